"""The training thread sleeps instead of spinning: bounded graph replays in flight (CUDA only)."""

from __future__ import annotations

import time

import pytest
import torch

from herd.learner.config import LearnerConfig
from herd.learner.graph.capture import GraphedUpdate
from herd.learner.replay.ring import ReplayBuffer
from herd.learner.update.sac import SAC

cuda = pytest.mark.cuda


def _rate(in_flight: int, seconds: float = 1.5) -> tuple[float, float]:
    """(updates/s, cores the calling thread burns) of Humanoid-sized graphed updates."""
    dev = torch.device("cuda")
    cfg = LearnerConfig.flat(device="cuda", batch_size=512, amp="bf16", capacity=20_000,
                        updates_per_call=4)
    buf = ReplayBuffer(20_000, (348,), 17, dev)
    buf.obs.normal_()
    buf.next_obs.normal_()
    buf.size = buf.inserted = 20_000
    buf.size_t.fill_(20_000.0)
    step = GraphedUpdate(SAC(cfg.algorithm, cfg.compute, cfg.replay.batch_size, 348, 17, [-0.4] * 17, [0.4] * 17, dev), buf, 4, in_flight=in_flight)
    for _ in range(20):
        step()
    torch.cuda.synchronize()
    calls, t0, c0 = 0, time.perf_counter(), time.thread_time()
    while time.perf_counter() - t0 < seconds:
        step()
        calls += 1
    torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    return calls * 4 / wall, (time.thread_time() - c0) / wall


@cuda
def test_paced_replays_keep_the_rate_and_free_the_core() -> None:
    spun_rate, spun_cpu = _rate(0)
    paced_rate, paced_cpu = _rate(2)
    print(f"unpaced {spun_rate:,.0f} updates/s at {spun_cpu:.2f} cores; "
          f"paced {paced_rate:,.0f} at {paced_cpu:.2f}")
    assert paced_rate >= 0.9 * spun_rate
    assert paced_cpu < 0.5


def test_cpu_update_ignores_in_flight() -> None:
    cfg = LearnerConfig.flat(device="cpu", batch_size=8, hidden_sizes=(16, 16), capacity=1000)
    buf = ReplayBuffer(1000, (5,), 2, torch.device("cpu"))
    buf.size = buf.inserted = 100
    buf.size_t.fill_(100.0)
    step = GraphedUpdate(SAC(cfg.algorithm, cfg.compute, cfg.replay.batch_size, 5, 2, [-1, -1], [1, 1], torch.device("cpu")), buf, 1, in_flight=2)
    assert not step._events and torch.isfinite(step()).all()
