"""Ingest in its own process (learner.server.ingest_process: on): the same answers and books as in
process, batches larger than a shared slot arrive whole and in order, GetStatus answers from
the child, and the child never outlives a killed learner (its port is free again)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import grpc
import numpy as np
import pytest

from herd.learner.config import LearnerConfig
from herd.learner.ingest.processes import SLOT_ROWS
from herd.learner.learner import Learner
from herd.proto import codec
from herd.proto import herd_pb2 as pb
from herd.proto import herd_pb2_grpc as pb_grpc
from tests.learner.procs import alive, children_running
from tests.learner.rpc.test_bad_input import Stream, rows

ROOT = Path(__file__).resolve().parents[3]
BIG = 2 * SLOT_ROWS + 100  # three shared slots


@pytest.fixture(scope="module")
def learner(spec):
    lrn = Learner(LearnerConfig.flat(capacity=10_000, min_size=10_000, batch_size=64,
                                hidden_sizes=(32, 32), max_batch=BIG, ingest_process="on"), spec)
    yield lrn
    lrn.stop()


def handshake(channel, spec, actor, incarnation=0):
    return pb_grpc.LearnerStub(channel).Handshake(
        pb.HandshakeRequest(actor_id=actor, spec=spec, incarnation=incarnation)).session_id


def send_batches(learner, spec, actor: str, batches: int = 4, rows_each: int = 100) -> None:
    """`batches` accepted batches of `rows_each` rows from one new actor session."""
    with grpc.insecure_channel(learner.address()) as ch:
        s = Stream(ch)
        sid = handshake(ch, spec, actor)
        for seq in range(1, batches + 1):
            assert s.send(codec.pack_batch(rows(rows_each, seed=seq), session_id=sid, actor_id=actor,
                                           seq=seq, policy_version=0)).code == 0
        s.close()


def settled(learner):
    deadline = time.monotonic() + 10
    while learner.buffer.inserted < learner.received and time.monotonic() < deadline:
        time.sleep(0.02)
    return learner.status_dict()


def test_answers_and_books_as_in_process(learner, spec):
    with grpc.insecure_channel(learner.address()) as ch:
        s = Stream(ch)
        sid = handshake(ch, spec, "p", incarnation=3)
        bad = rows(8)
        bad["reward"][2] = np.nan
        ack = s.send(codec.pack_batch(bad, session_id=sid, actor_id="p", seq=1, policy_version=0))
        assert ack.code == grpc.StatusCode.INVALID_ARGUMENT.value[0] and "NaN" in ack.message
        assert s.send(codec.pack_batch(rows(8), session_id=sid, actor_id="p", seq=1,
                                       policy_version=0)).code == 0
        s.close()
        again = Stream(ch)  # the ack "lost": the same batch on a new connection
        sid = handshake(ch, spec, "p", incarnation=3)
        dup = again.send(codec.pack_batch(rows(8), session_id=sid, actor_id="p", seq=1,
                                          policy_version=0))
        assert dup.code == 0 and dup.duplicate
        again.close()
        st = settled(learner)
        assert (st["received"], st["inserted"], st["rejected_batches"], st["duplicate_batches"]) == (8, 8, 1, 1)
        assert learner.servicer.received == {"p": 8}
        time.sleep(1.2)  # the child's GetStatus answers from the learner's status of a second ago
        status = pb_grpc.LearnerStub(ch).GetStatus(pb.StatusRequest())
        assert status.learner_id == learner.learner_id and status.received == 8


def test_batch_larger_than_a_slot_arrives_whole_in_order(learner, spec):
    before = settled(learner)["inserted"]
    r = rows(BIG)
    r["reward"] = np.arange(BIG, dtype=np.float32)
    with grpc.insecure_channel(learner.address()) as ch:
        s = Stream(ch)
        sid = handshake(ch, spec, "big")
        assert s.send(codec.pack_batch(r, session_id=sid, actor_id="big", seq=1, policy_version=0)).code == 0
        s.close()
    assert settled(learner)["inserted"] == before + BIG
    ring = learner.buffer
    np.testing.assert_array_equal(ring.reward[before:before + BIG].cpu().numpy(), r["reward"])
    np.testing.assert_allclose(ring.obs[before:before + BIG].cpu().numpy(), r["obs"])


def test_the_child_packs_without_torch_as_the_ring_does(learner, spec):
    """The ingest process packs with RowLayout in numpy (it never maps libtorch): every field
    lands in the ring as the learner's own pack_rows puts it."""
    from herd.learner.replay.ring import ReplayBuffer

    for pid in learner.ingest.pids:
        with open(f"/proc/{pid}/maps") as f:
            assert "libtorch" not in f.read()
    before = settled(learner)["inserted"]
    r = rows(300, seed=7)
    with grpc.insecure_channel(learner.address()) as ch:
        s = Stream(ch)
        sid = handshake(ch, spec, "exact")
        assert s.send(codec.pack_batch(r, session_id=sid, actor_id="exact", seq=1, policy_version=0)).code == 0
        s.close()
    assert settled(learner)["inserted"] == before + 300
    ring = learner.buffer
    ref = ReplayBuffer(300, tuple(spec.obs_shape), ring.action_dim, ring.device,
                       one_step_discount=ring.one_step_discount)
    ref.extend(r)
    for field in ("obs", "next_obs", "action", "reward", "terminated", "discount"):
        np.testing.assert_array_equal(getattr(ring, field)[before:before + 300].cpu().numpy(),
                                      getattr(ref, field)[:300].cpu().numpy(), err_msg=field)


def test_ingest_process_dies_with_a_killed_learner(spec):
    script = (
        f"import sys, time; sys.path.insert(0, {str(ROOT)!r})\n"
        "from tests.learner.ingest.test_ingest_process import spawn_learner\n"
        "lrn = spawn_learner()\n"
        "print(lrn.ingest.pids[0], lrn.port, flush=True)\n"
        "time.sleep(120)\n")
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        child, port = map(int, parent.stdout.readline().split())
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(10)
        deadline = time.monotonic() + 10
        while alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(child), "the ingest process outlived its learner"
        with socket.socket() as s:  # nothing holds the port
            s.bind(("127.0.0.1", port))
    finally:
        parent.kill()


def spawn_learner() -> Learner:
    """A learner with its ingest process, for the kill test's own interpreter."""
    from herd.actors.config import EnvConfig
    from herd.actors.envs import describe, make_env

    d = describe(make_env(EnvConfig(id="InvertedPendulum-v5")))
    spec = codec.spec_to_proto("InvertedPendulum-v5", d["obs_shape"], d["obs_dtype"], d["action_shape"],
                               d["action_low"], d["action_high"])
    return Learner(LearnerConfig.flat(capacity=1_000, min_size=1_000, batch_size=8,
                                 hidden_sizes=(8,), ingest_process="on"), spec)


def test_several_ingest_processes_each_actor_at_its_home(spec):
    from herd.actors.client import LearnerClient

    lrn = Learner(LearnerConfig.flat(capacity=10_000, min_size=10_000, batch_size=64,
                                hidden_sizes=(32, 32), ingest_process="on", ingest_processes=2), spec)
    try:
        homes = {c.port for c in lrn.ingest.children}
        clients = [LearnerClient(lrn.address(), f"m{k}", spec, window=2) for k in range(8)]
        for s in range(3):
            for c in clients:
                c.push(rows(16, seed=s), 0)
        assert all(c.flush(30) for c in clients)
        assert {c._push_address.rsplit(":", 1)[1] for c in clients} == {str(p) for p in homes}
        split = [set(c.counts()["per_actor"]) for c in lrn.ingest.children]
        assert split[0] and split[1] and not split[0] & split[1]  # each actor in one process
        # a resend after a lost ack reaches the same process, which knows it took it
        with grpc.insecure_channel(lrn.address()) as main:
            reply = pb_grpc.LearnerStub(main).Handshake(pb.HandshakeRequest(
                actor_id="m-dup", spec=spec, incarnation=9))
        home = reply.ingest_port or lrn.port
        assert reply.session_id == 0 or not reply.ingest_port
        with grpc.insecure_channel(f"127.0.0.1:{home}") as ch:
            for expect_dup in (False, True):
                s = Stream(ch)
                sid = handshake(ch, spec, "m-dup", incarnation=9)
                ack = s.send(codec.pack_batch(rows(8), session_id=sid, actor_id="m-dup", seq=1,
                                              policy_version=0))
                assert ack.code == 0 and ack.duplicate == expect_dup
                s.close()
        st = settled(lrn)
        assert st["received"] == st["inserted"] == 8 * 3 * 16 + 8 and st["duplicate_batches"] == 1
        for c in clients:
            c.close()
    finally:
        lrn.stop()


def _started(pid: int) -> float:
    """When process `pid` began, unix time (to /proc's clock tick and /proc/uptime's 10 ms)."""
    with open(f"/proc/{pid}/stat") as f:
        ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/uptime") as f:
        uptime = float(f.read().split()[0])
    return time.time() - uptime + ticks / os.sysconf("SC_CLK_TCK")


def test_the_training_thread_starts_while_the_ingest_processes_boot(spec, monkeypatch):
    """The training thread (on CUDA: the uncompiled graph's capture) is running by the time the
    learner waits for its ingest children; rows still arrive and are trained on after."""
    from herd.learner.ingest import processes

    seen = []
    real = processes.IngestProcess.wait_ready

    def wait_ready(self):
        seen.append(threading.enumerate())
        return real(self)

    monkeypatch.setattr(processes.IngestProcess, "wait_ready", wait_ready)
    lrn = Learner(LearnerConfig.flat(capacity=2_000, min_size=200, batch_size=16,
                                hidden_sizes=(16, 16), ingest_process="on", ratio=None), spec)
    try:
        assert len(seen) == 1 and any(t.name == "herd-train" for t in seen[0])
        send_batches(lrn, spec, "early")
        deadline = time.monotonic() + 20
        while (lrn.updates == 0 or lrn.buffer.size < 400) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert lrn.updates > 0 and lrn.buffer.size == 400
    finally:
        lrn.stop()


def test_ingest_processes_boot_while_the_learner_builds(spec, tmp_path):
    """The children are started before the learner imports torch and builds its replay buffer
    and networks (they boot Python and torch meanwhile) and serve once the learner does; a build
    that fails leaves none."""
    lrn = Learner(LearnerConfig.flat(capacity=10_000, min_size=10_000, batch_size=64,
                                hidden_sizes=(256, 256), ingest_process="on", ingest_processes=2), spec)
    try:
        torch_in = lrn.startup_unix["device"]  # torch imported, the device ready
        # 0.02 s: the tick of /proc's start time and the 10 ms of /proc/uptime
        assert all(_started(pid) <= torch_in + 0.02 for pid in lrn.ingest.pids)
        with grpc.insecure_channel(lrn.address()) as ch:
            reply = pb_grpc.LearnerStub(ch).Handshake(pb.HandshakeRequest(actor_id="early", spec=spec))
        assert (reply.ingest_port or lrn.port) in {c.port for c in lrn.ingest.children}
    finally:
        lrn.stop()
    before = set(children_running(b"learner.ingest.processes"))
    with pytest.raises(FileNotFoundError):
        Learner(LearnerConfig.flat(capacity=1_000, min_size=1_000, batch_size=8,
                              hidden_sizes=(8,), ingest_process="on", ingest_processes=2), spec,
                checkpoint=str(tmp_path / "none"))
    with pytest.raises(RuntimeError, match="sees no GPU"):  # booted, never given work
        Learner(LearnerConfig.flat(device="cuda", ingest_process="on"), spec)
    time.sleep(0.5)
    assert set(children_running(b"learner.ingest.processes")) <= before
