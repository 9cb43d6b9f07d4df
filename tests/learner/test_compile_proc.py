"""learner.compile_process: the cold compile in a child process (learner/compile_proc.py).

On the CPU, with inductor's C++ backend standing in for Triton: a real child compiles a twin of
the update into a fresh cache directory, and the learner's background preparation (GraphPrep)
then compiles its own twin from that cache without a single miss, in a fresh interpreter. A
child that fails leaves the preparation to compile on its own thread; a cancelled one and an
orphaned one end; a learner that fails to build leaves none behind.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

from herd.learner.compile_proc import UNITS, CompileProcess, shares
from herd.learner.config import LearnerConfig
from herd.learner.graphed import GraphPrep, twin_of
from herd.learner.replay import ReplayBuffer
from herd.learner.sac import SAC
from herd.learner.service import Learner
from tests.learner.procs import alive, children_running

OBS, ACT = 5, 2
LOW, HIGH = [-1.0] * ACT, [1.0] * ACT
no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU's answers")
ROOT = Path(__file__).resolve().parents[2]

TINY = dict(device="cpu", compile=True, batch_size=16, buffer_capacity=5_000, seed=1,
            hidden_sizes=[16, 16])
"""The plain SAC at sizes the CPU compiles fast (the family's update compiled here took 77 s of
the suite; its compile on the GPU is what bench/gpu/child.sh measures)."""

PARENT = r"""
import json, sys
import numpy as np, torch
from torch._dynamo.utils import counters
from herd.learner.compile_proc import CompileGroup, CompileProcess
from herd.learner.config import LearnerConfig
from herd.learner.graphed import GraphPrep, configure_backends, twin_of
from herd.learner.replay import ReplayBuffer
from herd.learner.sac import SAC

cfg = LearnerConfig(**json.loads(sys.argv[1]))
low, high = np.array([-1.0, -1.0]), np.array([1.0, 1.0])
n = cfg.compile_processes  # booted first, as the learner does (learner/service.py)
child = CompileGroup(cfg, (5,), 2, low, high, n) if n > 1 else CompileProcess(cfg, (5,), 2, low, high)
dev = torch.device(cfg.device)
configure_backends(dev, cfg.tf32)  # as make_update does
sac = SAC(cfg, 5, 2, low, high, dev)
ring = ReplayBuffer(cfg.buffer_capacity, (5,), 2, dev)  # not the child's ring size
prep = GraphPrep(twin_of(sac), ring, cfg.updates_per_call, cfg.compile_mode, 3, child)
prep.done.wait()
print(json.dumps({"error": prep.error, "child_s": prep.child_s, "seconds": prep.seconds,
                  "cpu_s": prep.cpu_s, "phases": prep.phases,
                  "child_rc": [p.wait(30) for p in (child.procs if n > 1 else [child.proc])],
                  **counters["inductor"],
                  **{"aot_" + k: v for k, v in counters["aot_autograd"].items()}}))
"""


@pytest.mark.parametrize(("device", "children"), [("cpu", 1), ("cpu", 2), pytest.param("cuda", 3, marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs CUDA"))])
def test_the_learner_compiles_from_what_the_child_compiled(tmp_path, device, children) -> None:
    """With several children (learner.compile_processes), each compiles its share of the
    frames, and the learner's compile still hits every graph."""
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor"),
           "TRITON_CACHE_DIR": str(tmp_path / "triton"), "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    cfg = {**TINY, "device": device, "compile_processes": children,
           **({"amp": "bf16"} if device == "cuda" else {}),
           # options are part of inductor's cache key: the children must compile with them too
           **({"compile_options": {"triton.autotune_pointwise": False}} if children > 1 else {})}
    out = subprocess.run([sys.executable, "-c", PARENT, json.dumps(cfg)], env=env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=600, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    print(got)
    assert got["error"] is None and got["child_s"] > 0
    # the learner's own compile (from the caches) is timed: torch.compile's phases, its CPU
    assert 0 < got["phases"]["prepare_compile_s"] <= got["seconds"]
    assert 0 <= got["phases"]["prepare_kernel_wait_s"] <= got["phases"]["prepare_compile_s"]
    assert 0 < got["cpu_s"] <= got["seconds"] + 0.05
    assert got["child_rc"] == [0] * children  # they exited
    assert got.get("fxgraph_cache_miss", 0) == 0 and got.get("aot_autograd_cache_miss", 0) == 0
    assert got["fxgraph_cache_hit"] >= 5 and got["aot_autograd_cache_hit"] >= 3
    assert any((tmp_path / "inductor").rglob("*.py"))  # it compiled into the directory it was given


def test_the_shares_deal_every_frame_once_and_keep_the_adams_together() -> None:
    assert sorted(f for unit in UNITS for f in unit) == sorted((*SAC.PIECES, SAC.ADAMS))
    for n in range(1, 10):
        dealt = [f for share in shares(n) for f in share]
        assert sorted(dealt) == sorted(SAC.PIECES + (SAC.ADAMS,)) and len(shares(n)) == min(n, len(UNITS))
        mine = next(share for share in shares(n) if "_inputs" in share)
        assert "_target" in mine  # it reads the normalized batch: compiled beside it (UNITS)
    assert shares(2)[0][0] == "_actor_pass" and shares(2)[1][0] == "_critic_out"  # heaviest apart


def small_sac() -> tuple[SAC, ReplayBuffer]:
    cfg = LearnerConfig(**{**TINY, "compile": False})
    dev = torch.device("cpu")
    return SAC(cfg, OBS, ACT, LOW, HIGH, dev), ReplayBuffer(1_000, (OBS,), ACT, dev)


@no_cuda
def test_a_failed_child_leaves_the_compile_to_the_background_thread(caplog) -> None:
    sac, ring = small_sac()
    child = CompileProcess(sac.cfg, (OBS,), ACT, LOW, HIGH, device="cuda")  # no GPU here
    with caplog.at_level(logging.WARNING, logger="herd.learner"):
        prep = GraphPrep(twin_of(sac), ring, 1, None, 1, child)
        assert prep.done.wait(120)
    assert prep.error is None and prep.child_s is None  # its own warm-up ran, and succeeded
    assert child.proc.wait(10) == 0  # it said why and exited
    msg = " ".join(r.getMessage() for r in caplog.records)
    assert "compile process failed" in msg and "sees no GPU" in msg


def test_a_cancelled_preparation_ends_its_child() -> None:
    sac, ring = small_sac()
    child = CompileProcess(LearnerConfig(**TINY), (OBS,), ACT, LOW, HIGH)  # a real CPU compile
    prep = GraphPrep(twin_of(sac), ring, 1, "default", 1, child)
    time.sleep(1.0)
    assert child.proc.poll() is None
    prep.cancelled.set()
    assert prep.done.wait(10)
    assert prep.error == "cancelled" and child.proc.returncode is not None


ORPHAN = r"""
import json, sys, time
from herd.learner.compile_proc import CompileProcess
from herd.learner.config import LearnerConfig
child = CompileProcess(LearnerConfig(**json.loads(sys.argv[1])), (5,), 2, [-1.0, -1.0], [1.0, 1.0])
print(child.proc.pid, flush=True)
time.sleep(600)
"""


def test_the_child_ends_when_the_learner_dies(tmp_path) -> None:
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor"),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    parent = subprocess.Popen([sys.executable, "-c", ORPHAN, json.dumps(TINY)], env=env,
                              stdout=subprocess.PIPE, text=True)
    try:
        pid = int(parent.stdout.readline())
        time.sleep(4.0)  # past its imports: compiling
        assert alive(pid)
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        deadline = time.monotonic() + 15
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not alive(pid)
    finally:
        parent.kill()


@no_cuda
def test_the_learner_boots_a_child_only_for_a_background_compile_on_cuda(spec, monkeypatch) -> None:
    """device auto on a box without CUDA: none. device cuda: booted, then the build fails
    (no GPU) and the child goes with it."""
    base = dict(compile=True, compile_process=True, buffer_capacity=2_000, min_replay_size=200,
                batch_size=16, hidden_sizes=(16, 16), ingest_process="off")
    lrn = Learner(LearnerConfig(device="auto", **base), spec)
    try:
        assert lrn._compiling is None and not children_running(b"learner.compile_proc")
    finally:
        lrn.stop()
    seen = []
    real = CompileProcess.__init__

    def boot(self, *a, **k):
        real(self, *a, **k)
        seen.append(self.proc)

    monkeypatch.setattr(CompileProcess, "__init__", boot)
    with pytest.raises(RuntimeError, match="sees no GPU"):
        Learner(LearnerConfig(device="cuda", **base), spec)
    assert len(seen) == 1 and seen[0].returncode is not None and not children_running(b"learner.compile_proc")
    # compile_processes above 1 turns it on by itself: a group of children, gone with the build
    split = {**base, "compile_process": False, "compile_processes": 2}
    with pytest.raises(RuntimeError, match="sees no GPU"):
        Learner(LearnerConfig(device="cuda", **split), spec)
    assert len(seen) == 3 and all(p.returncode is not None for p in seen[1:])
    assert not children_running(b"learner.compile_proc")


def test_kill_is_safe_from_two_threads() -> None:
    child = CompileProcess(LearnerConfig(**TINY), (OBS,), ACT, LOW, HIGH, device="cuda:99")
    threads = [threading.Thread(target=child.kill) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert child.proc.returncode is not None
    assert child.wait() is not None  # a closed pipe: one line, no exception
    assert child.seconds is None


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_a_cuda_learner_swaps_in_the_graph_compiled_from_its_child(spec, tmp_path, monkeypatch) -> None:
    """GPU: a learner with compile_process trains on the uncompiled graph, and the compiled
    one takes over after the child's cold compile, with no error on the way."""
    from tests.learner.test_ingest_process import send_batches

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))  # cold, and the
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))  # child inherits it
    lrn = Learner(LearnerConfig(device="cuda", compile=True, compile_process=True, amp="bf16",
                                buffer_capacity=5_000, min_replay_size=200, batch_size=64,
                                hidden_sizes=(32, 32), replay_ratio=None, updates_per_call=2), spec)
    try:
        assert lrn._compiling is not None
        send_batches(lrn, spec, "gpu")
        deadline = time.monotonic() + 300
        while lrn.status_dict()["first_compiled_unix"] is None and time.monotonic() < deadline:
            time.sleep(0.5)
        st = lrn.status_dict()
        assert st["graph_error"] is None and st["first_compiled_unix"] is not None
        assert st["compile_process_s"] > 0 and st["eager_updates"] > 0
        assert lrn._compiling.proc.wait(30) == 0  # done, and gone on its own
    finally:
        lrn.stop()
