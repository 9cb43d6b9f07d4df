"""The uncompiled graph while the compiled one is prepared in the background, then the swap.

CPU: the swap logic, with the graph faked (the CPU has none): GraphedUpdate's `_warm_up` runs
the warm-up eagerly and `_record` hands back a FakeGraph whose replay runs the k eager updates,
so Adam's step count counts every update made; the first FakeGraph stands for the uncompiled
graph, the second for the compiled one. The background work (warm_twin) is held on an
Event or made to fail. The real warm_twin runs on the CPU too: it leaves the live SAC and the
ring as they were.
GPU (marked `cuda`): the uncompiled graph, then the graph prepared in the background and
swapped in, give the losses and parameters of a learner that ran the same updates eagerly and
then captured synchronously (same seeds), with and without torch.compile.
"""

from __future__ import annotations

import logging
import sys
import threading
import time

import pytest
import torch

from herd.learner.config import LearnerConfig
from herd.learner.graph import capture
from herd.learner.graph.capture import GraphedUpdate, graph_stats, make_update
from herd.learner.replay.ring import ReplayBuffer
from herd.learner.replay.table import RateLimiter, ReplayTable
from herd.learner.rpc.publisher import WeightPublisher
from herd.learner.trainer import Trainer
from herd.learner.update.sac import SAC
from tests.learner.rows import random_rows

OBS, ACT = 11, 4
cuda = pytest.mark.cuda


def make(device: str = "cpu", **cfg) -> tuple[SAC, ReplayBuffer]:
    cfg = LearnerConfig.flat(**{"device": device, "batch_size": 32, "hidden_sizes": (32, 32),
                                "capacity": 2000, "seed": 3, **cfg})
    dev = torch.device(device)
    sac = SAC(cfg.algorithm, cfg.compute, cfg.replay.batch_size, OBS, ACT, [-1.0] * ACT, [1.0] * ACT, dev)
    buf = ReplayBuffer(2000, (OBS,), ACT, dev)
    buf.extend(random_rows(1500, OBS, ACT, bound=1.0, p_term=0.1, seed=0))
    return sac, buf


class FakeGraph:
    """A 'replay' runs the k eager updates (k real steps per replay, as a graph's replay is)."""

    def __init__(self, step: GraphedUpdate):
        self.step, self.replays = step, 0

    def replay(self) -> None:
        self.replays += 1
        self.step.out = self.step._run()

    def reset(self) -> None:  # CUDAGraph.reset: its memory pool goes back
        self.resets = getattr(self, "resets", 0) + 1


def graphable(sac: SAC, buf: ReplayBuffer, k: int) -> GraphedUpdate:
    """A GraphedUpdate on the graph path on the CPU; `step.captures` counts the captures."""
    step = GraphedUpdate(sac, buf, k, in_flight=0)
    step.use_graph = True
    step.captures = 0

    def warm_up() -> None:
        for _ in range(step.warmup):
            step._run()

    def record():
        step.captures += 1
        return FakeGraph(step), None

    step._warm_up, step._record = warm_up, record
    return step


def adam_steps(sac: SAC) -> int:
    """Updates made on `sac` (its Adam steps once per update; warm-up is rolled back)."""
    assert int(sac.critic_opt.step_t) == int(sac.actor_opt.step_t)
    return int(sac.critic_opt.step_t)


def held(monkeypatch, fail: BaseException | None = None) -> tuple[threading.Event, threading.Event]:
    """warm_twin replaced: it signals `started`, waits for `release`, then returns (or raises)."""
    started, release = threading.Event(), threading.Event()

    def warm_twin(twin, buffer, k, compile_mode, warmup):
        started.set()
        assert release.wait(10)
        if fail is not None:
            raise fail

    monkeypatch.setattr(capture, "warm_twin", warm_twin)
    return started, release


def test_the_uncompiled_graph_until_the_preparation_is_done_then_the_compiled_at_a_call(
        monkeypatch) -> None:
    started, release = held(monkeypatch)
    sac, buf = make()
    step = graphable(sac, buf, k=2)
    step.prepare_in_background()  # captures the uncompiled graph at once
    assert started.wait(5)
    assert step.captures == 1 and step.interim and adam_steps(sac) == 0  # warm-up rolled back
    uncompiled = step.graph
    for _ in range(5):  # the preparation is held: every call replays the uncompiled graph
        assert torch.isfinite(step()).all()
    assert step.graph is uncompiled and uncompiled.replays == 5 and step.captures == 1
    assert step.eager_updates == 10 and adam_steps(sac) == 10
    assert step.first_compiled_unix is None
    release.set()
    assert step.prep.done.wait(5)
    time.sleep(0.05)
    assert step.graph is uncompiled and step.captures == 1  # done, but the swap waits for a call
    before = time.time()
    step()  # this call swaps (warm-up, rollback, capture) and replays once
    assert isinstance(step.graph, FakeGraph) and step.graph is not uncompiled
    assert step.captures == 2 and step.graph.replays == 1 and not step.interim
    assert step.first_compiled_unix >= before and step.prep is None
    for _ in range(3):
        step()
    assert step.captures == 2 and step.graph.replays == 4 and uncompiled.replays == 5
    assert uncompiled.resets == 1  # released at the swap
    assert adam_steps(sac) == 2 * 9  # 9 calls of 2 updates: none lost, none run twice
    stats = graph_stats(step)
    assert stats["eager_updates"] == 10 and stats["graph_error"] is None
    assert stats["capture_s"] >= stats["graph_swap_s"] > 0  # the preparation's seconds + the swap's
    assert stats["capture_s"] >= stats["uncompiled_capture_s"] > 0  # the first capture's own part


def test_a_failed_preparation_keeps_training_eager_with_one_log_line(monkeypatch, caplog) -> None:
    _, release = held(monkeypatch, fail=RuntimeError("inductor fell over\n(a long traceback)"))
    sac, buf = make()
    step = graphable(sac, buf, k=2)
    step.prepare_in_background()
    step()
    release.set()
    assert step.prep.done.wait(5)
    with caplog.at_level(logging.ERROR, logger="herd.learner"):
        for _ in range(4):
            step()
    # the uncompiled graph goes on: every call after the failure replays it
    assert step.interim and step.captures == 1 and step.graph.replays == 5 and not step.use_graph
    assert adam_steps(sac) == 2 * 5
    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(lines) == 1 and "\n" not in lines[0], lines
    assert "preparation failed" in lines[0] and "RuntimeError: inductor fell over" in lines[0]
    assert "uncompiled CUDA graph" in lines[0]
    stats = graph_stats(step)
    assert stats["graph_error"] == "preparation: RuntimeError: inductor fell over"
    assert stats["first_compiled_unix"] is None and stats["eager_updates"] == 2


def test_a_failed_swap_puts_the_live_tensors_back_and_stays_eager(monkeypatch, caplog) -> None:
    """No capture works: neither the uncompiled graph (one warning, eager calls) nor the swap."""
    _, release = held(monkeypatch)
    release.set()
    sac, buf = make()
    step = graphable(sac, buf, k=2)

    def record():  # after warm-up and rollback: as a capture error would
        raise RuntimeError("operation not permitted when stream is capturing")

    step._record = record
    with caplog.at_level(logging.WARNING, logger="herd.learner"):
        step.prepare_in_background()
        assert step.graph is None and not step.interim and adam_steps(sac) == 0
        assert step.prep.done.wait(5)
        for _ in range(3):
            step()  # the first one tries the swap, fails, and still makes its 2 updates
    assert step.graph is None and not step.use_graph and adam_steps(sac) == 6
    assert step.error.startswith("capture: RuntimeError: operation not permitted")
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(errors) == 1 and "eager updates" in errors[0]
    assert len(warnings) == 1 and "uncompiled CUDA graph failed" in warnings[0]


def test_a_failed_swap_keeps_the_uncompiled_graph(monkeypatch, caplog) -> None:
    _, release = held(monkeypatch)
    sac, buf = make()
    step = graphable(sac, buf, k=2)
    step.prepare_in_background()
    uncompiled = step.graph
    assert step.interim and step.captures == 1
    fake_record = step._record

    def record():  # the compiled capture fails
        raise RuntimeError("operation not permitted when stream is capturing")

    step._record = record
    release.set()
    assert step.prep.done.wait(5)
    with caplog.at_level(logging.ERROR, logger="herd.learner"):
        for _ in range(3):
            step()  # the first one tries the swap, fails, and replays the uncompiled graph
    assert fake_record is not record and step.graph is uncompiled and uncompiled.replays == 3
    assert step.interim and not step.use_graph and adam_steps(sac) == 6
    assert step.error.startswith("capture: RuntimeError")
    assert step.first_compiled_unix is None and not step.compiled


@pytest.mark.parametrize("fail", [None, RuntimeError("inductor fell over")])
def test_the_gil_switch_interval_is_short_while_preparing_and_restored_after(monkeypatch,
                                                                               fail) -> None:
    seen = []

    def warm_twin(*a):
        seen.append(sys.getswitchinterval())
        end = time.thread_time() + 0.2  # this thread's own CPU: prepare_cpu_s counts it
        while time.thread_time() < end:
            pass
        if fail is not None:
            raise fail

    monkeypatch.setattr(capture, "warm_twin", warm_twin)
    before = sys.getswitchinterval()
    assert before > capture.SWITCH_S  # the default 5 ms
    sac, buf = make()
    prep = capture.GraphPrep(sac.twin(), buf, 2, None, 1)
    assert prep.done.wait(5)
    assert seen == [pytest.approx(capture.SWITCH_S)]
    assert sys.getswitchinterval() == pytest.approx(before)
    assert (prep.error is None) == (fail is None)
    assert 0.2 <= prep.cpu_s <= prep.seconds + 0.01, (prep.cpu_s, prep.seconds)
    assert prep.threads["herd-graph-prep"] >= 0.15, prep.threads  # its own, by thread name


def test_without_a_background_preparation_the_first_call_captures(monkeypatch) -> None:
    monkeypatch.setattr(capture, "warm_twin", lambda *a: pytest.fail("no preparation was asked for"))
    sac, buf = make()
    step = graphable(sac, buf, k=3)
    step()
    assert step.captures == 1 and step.graph.replays == 1 and step.eager_updates == 0
    step.prepare()  # already captured: nothing to do
    assert step.captures == 1 and adam_steps(sac) == 3


def test_the_cpu_has_no_graph_and_no_preparation() -> None:
    sac, buf = make()
    step = make_update(sac, buf)
    step.prepare_in_background()
    assert step.prep is None and not step.use_graph
    step()
    assert step.graph is None and adam_steps(sac) == 1
    assert graph_stats(step) == {"capture_s": 0.0, "graph_swap_s": 0.0, "eager_updates": 0,
                                 "first_compiled_unix": None, "graph_error": None,
                                 "uncompiled_capture_s": 0.0,
                                 "prepare_cpu_s": None, "prepare_threads_cpu_s": None}


def test_the_start_up_timeline_carries_every_graph_field_the_learner_reports() -> None:
    """herd.startup.GRAPH_KEYS (the driver's and bench/startup.py's list) is graph_stats' own
    fields with the compile's phases, less first_compiled_unix (a phase of the timeline), and
    the update stream's pauses (UpdateGaps.stats)."""
    from herd.learner.graph.update_gaps import UpdateGaps
    from herd.startup import GRAPH_KEYS

    step = make_update(*make())
    step.prepare_phases = capture.compile_phases()  # torch keeps the table: both keys, on the CPU too
    assert set(step.prepare_phases) == {"prepare_compile_s", "prepare_kernel_wait_s"}
    assert set(GRAPH_KEYS) == set(graph_stats(step)) - {"first_compiled_unix"} | set(UpdateGaps().stats())


def test_the_twin_leaves_the_live_model_the_ring_and_the_rng_alone() -> None:
    sac, buf = make(obs_norm=True, reward_norm=True)
    live = [t.clone() for t in sac.state_tensors()]
    ring = (buf.obs_pair.clone(), buf.rest.clone(), buf.size_t.clone(), buf.size, buf.inserted)
    rng = torch.get_rng_state()
    twin = sac.twin()  # SAC() seeds torch: fork_rng puts the caller's state back
    assert torch.equal(rng, torch.get_rng_state())
    assert torch.equal(twin.actor.scale, sac.actor.scale) and torch.equal(twin.actor.bias, sac.actor.bias)
    assert not any(a.data_ptr() == b.data_ptr() for a, b in zip(twin.state_tensors(), sac.state_tensors()))
    capture.warm_twin(twin, buf, 2, None, 3)  # the real thing, on the CPU: 6 updates of the twin
    assert int(twin.critic_opt.step_t) == 6
    for a, b in zip(live, sac.state_tensors()):
        assert torch.equal(a, b)
    assert torch.equal(ring[0], buf.obs_pair) and torch.equal(ring[1], buf.rest)
    assert torch.equal(ring[2], buf.size_t) and (buf.size, buf.inserted) == ring[3:]


def training_loop(monkeypatch, sac: SAC, n_blocks: int):
    """(ring, blocks, step, trainer): a Trainer over a fresh ring that `take`s one of `blocks`
    (100 rows each; append more to feed it) per call, its update the graphable fake, the
    limiter at 1 update per row past 200, 100 ahead."""
    ring = ReplayBuffer(2000, (OBS,), ACT, torch.device("cpu"))
    blocks = [ring.pack_rows(random_rows(100, OBS, ACT, bound=1.0, p_term=0.1, seed=s)) for s in range(n_blocks)]

    def take(limit: int, timeout: float) -> list:
        out = blocks[:1]
        del blocks[:1]
        if not out:
            time.sleep(timeout)
        return out

    step = graphable(sac, ring, k=2)
    monkeypatch.setattr(capture, "make_update", lambda sac, ring, child=None: step)
    table = ReplayTable(ring, RateLimiter(1.0, 100, 200), chunk_rows=256)
    return ring, blocks, step, Trainer(sac, table, WeightPublisher(), take, publish_every_s=0.1, num_threads=1)


def test_the_training_loop_inserts_and_updates_while_the_graph_is_prepared(monkeypatch) -> None:
    started, release = held(monkeypatch)
    sac, _ = make(updates_per_call=2, graph_in_background=True)
    ring, blocks, step, trainer = training_loop(monkeypatch, sac, 10)
    trainer.start()
    try:
        assert started.wait(5)
        # the limiter's bound: 1 update per row past 200, 100 ahead: 900 updates on 1,000 rows
        wait_for(lambda: ring.inserted == 1000 and trainer.updates == 900)
        assert step.interim and step.eager_updates == 900
        prep = step.prep
        release.set()
        assert prep.done.wait(5)
        # the swap comes with the next update, which the limiter allows once more rows are in
        blocks.extend(ring.pack_rows(random_rows(100, OBS, ACT, bound=1.0, p_term=0.1, seed=s))
                      for s in range(10, 15))
        wait_for(lambda: ring.inserted == 1500 and trainer.updates == 1400)
        assert step.graph is not None and step.graph.replays > 0
    finally:
        trainer.stop()
    assert trainer.error is None and step.captures == 2 and not step.interim
    assert adam_steps(sac) == trainer.updates == step.eager_updates + 2 * step.graph.replays
    assert trainer.graph_stats()["first_compiled_unix"] is not None


class FakeGenerator:
    """A CUDA generator's offset (the CPU's has none)."""

    def __init__(self):
        self.offset = 0

    def get_offset(self) -> int:
        return self.offset

    def set_offset(self, offset: int) -> None:
        self.offset = offset


def test_rng_floor_undoes_a_rewind_by_another_threads_compile() -> None:
    """torch.compile sets the RNG state back after it traced (checked on this CPU: eager draws
    on one thread while another compiled repeated a third of their values): each eager update
    starts at least where the last one left the offset."""
    floor = capture.RngFloor(torch.device("cpu"))
    assert floor.gen is None
    with floor:  # the CPU: nothing to do
        pass
    floor.gen, floor.floor = FakeGenerator(), 0
    with floor:
        floor.gen.offset += 40  # an update draws
    floor.gen.offset = 8  # a compile elsewhere put back the state it saved
    with floor:
        assert floor.gen.offset == 40  # this update draws on from where the last one ended
        floor.gen.offset += 40
    with floor:  # no rewind: left alone
        assert floor.gen.offset == 80


def test_status_fields_before_the_update_exists() -> None:
    assert graph_stats(None) == {"capture_s": 0.0, "graph_swap_s": 0.0, "eager_updates": 0,
                                 "first_compiled_unix": None, "graph_error": None,
                                 "uncompiled_capture_s": 0.0,
                                 "prepare_cpu_s": None, "prepare_threads_cpu_s": None}


def wait_for(cond, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


# ---- GPU: the graph prepared in the background equals the synchronous one ----

def run(step, calls: int, seed: int) -> torch.Tensor:
    torch.manual_seed(seed)
    return torch.stack([step().clone() for _ in range(calls)])


def params(sac: SAC) -> list[torch.Tensor]:
    norms = [t for n in sac._norms().values() for t in n.tensors()]
    return [*sac.actor.parameters(), *sac.critic.parameters(), *sac.target.parameters(),
            sac.log_alpha, *sac.critic_opt.tensors(), *sac.actor_opt.tensors(), *norms]


@cuda
@pytest.mark.parametrize("compile_mode,k", [(None, 1), (None, 2), ("default", 2)],
                         ids=["graph", "graph-k2", "graph+compile-k2"])
def test_background_graph_equals_synchronous_capture_gpu(monkeypatch, compile_mode, k) -> None:
    """Uncompiled-graph calls while the preparation is held, then the swap; against a learner
    that made the same calls eagerly and then captured on its first graph call. Same seeds per
    phase."""
    torch.backends.cuda.matmul.allow_tf32 = False
    real_warm = capture.warm_twin
    release = threading.Event()
    monkeypatch.setattr(capture, "warm_twin", lambda *a: (release.wait(60), real_warm(*a)))
    family = dict(obs_norm=True, reward_norm=True, batch_size=64, hidden_sizes=(64, 64))
    a, buf = make("cuda", **family)
    b, _ = make("cuda", **family)
    torch.manual_seed(11)
    bg = GraphedUpdate(a, buf, k, cuda_graph=True, compile_mode=compile_mode)
    bg.prepare_in_background()
    la = [run(bg, 4, seed=11)]  # the uncompiled graph's replays
    assert bg.interim and bg.graph is not None and bg.eager_updates == 4 * k
    release.set()
    assert bg.prep.done.wait(300) and bg.prep.error is None, bg.prep.error
    la.append(run(bg, 5, seed=12))
    assert bg.graph is not None and bg.error is None and bg.first_compiled_unix is not None
    lb = [run(GraphedUpdate(b, buf, k, cuda_graph=False), 4, seed=11)]
    sync = GraphedUpdate(b, buf, k, cuda_graph=True, compile_mode=compile_mode)
    lb.append(run(sync, 5, seed=12))  # its first call captures
    print(f"prepare {bg.prepare_s:.1f}s, swap {bg.swap_s:.2f}s; synchronous capture {sync.swap_s:.1f}s")
    torch.testing.assert_close(torch.cat(la), torch.cat(lb), rtol=1e-5, atol=1e-6)
    for p, q in zip(params(a), params(b)):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)


def test_switched_off_the_training_loop_captures_before_its_first_update(monkeypatch) -> None:
    """learner.compute.graph_in_background false (on by default): the old order, no twin, no eager phase."""
    assert LearnerConfig().compute.graph_in_background is True
    sac, _ = make(updates_per_call=2, graph_in_background=False)
    assert sac.compute.graph_in_background is False
    ring, _blocks, step, trainer = training_loop(monkeypatch, sac, 5)
    trainer.start()
    try:
        wait_for(lambda: ring.inserted == 500 and trainer.updates == 400)
    finally:
        trainer.stop()
    assert trainer.error is None and step.captures == 1 and step.prep is None
    assert step.eager_updates == 0 and adam_steps(sac) == trainer.updates == 2 * step.graph.replays


def test_the_training_loop_counts_a_slow_update_as_a_pause_and_waiting_for_rows_not(monkeypatch) -> None:
    """learner/graph/update_gaps.py in the real loop: 1.5 s without rows (the limiter waits for the
    actors) is not a pause of the update stream; an update that takes 0.4 s (a swap, the GIL
    held elsewhere) is."""
    sac, _ = make(updates_per_call=2, graph_in_background=False)
    ring, blocks, step, trainer = training_loop(monkeypatch, sac, 10)
    trainer.start()
    try:
        wait_for(lambda: ring.inserted == 1000 and trainer.updates == 900)  # all rows used
        time.sleep(1.5)
        run, slow = step._run, [0.4]

        def slow_once():
            while slow:
                time.sleep(slow.pop())
            return run()

        step._run = slow_once  # the fake graph's next replay
        blocks.extend(ring.pack_rows(random_rows(100, OBS, ACT, bound=1.0, p_term=0.1, seed=s))
                      for s in range(10, 12))
        wait_for(lambda: ring.inserted == 1200 and trainer.updates == 1100)
    finally:
        trainer.stop()
    stats = trainer.graph_stats()
    assert trainer.error is None and not slow
    assert 0.4 <= stats["max_update_gap_s"] < 1.5, stats
    assert stats["startup_update_gap_s"] == stats["max_update_gap_s"] and stats["startup_update_gap_at_s"] > 1.5
