"""The pixel update in the graph machinery (learner/graph/capture.py) on the frame replay.

CPU: the warm-up + rollback that precedes a capture leaves no trace, and the wrapper's loop of
k updates equals single calls, with critics on frames or on the env's state. CUDA (marked `cuda`):
the captured graph equals eager updates (fp32, TF32 off, deterministic cuDNN), a graph captured
on an empty ring samples rows inserted after it, and bf16 at 84x84 / batch 256 runs finite (its
updates/s printed).
"""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch

from herd.learner.config import LearnerConfig
from herd.learner.graph.capture import GraphedUpdate, make_update
from herd.learner.replay.frames import FrameReplay
from herd.learner.update.pixel_sac import PixelSAC
from tests.pixels import DRQ_STEPS

ACT = 2
cuda = pytest.mark.cuda


def episode_batch(n: int, size: int, first: int = 0, seed: int = 0, reward: float | None = None) -> dict:
    """One actor's frames first .. first + n (one episode) and its n rows."""
    rng = np.random.default_rng(seed)
    rewards = rng.normal(size=n) if reward is None else np.full(n, reward)
    return {"frames": rng.integers(0, 256, (n + 1, 3, size, size), dtype=np.uint8),
            "frame_prev": np.concatenate([[-1], first + np.arange(n)]).astype(np.int64),
            "first_frame": np.int64(first), "obs_frame": first + np.arange(n, dtype=np.int64),
            "next_frame": first + 1 + np.arange(n, dtype=np.int64),
            "action": rng.uniform(-1, 1, (n, ACT)).astype(np.float32),
            "reward": rewards.astype(np.float32), "terminated": np.zeros(n, np.uint8),
            "actor_id": np.str_("a"), "incarnation": np.uint64(1)}


def make(device: str, size: int = 16, batch: int = 8, amp: str = "off", rows: int = 200,
         **enc) -> tuple[PixelSAC, FrameReplay]:
    cfg = LearnerConfig.flat(device=device, amp=amp, batch_size=batch, seed=3, **DRQ_STEPS,
                             **{"feature_dim": 8, "channels": 4, "hidden_sizes": (16, 16), **enc})
    dev = torch.device(device)
    state_dim = 5 if cfg.encoder.privileged_critic else 0
    sac = PixelSAC(cfg.algorithm, cfg.encoder, cfg.compute, batch, (3, size, size), 3, ACT, [-1.0] * ACT,
                   [1.0] * ACT, dev, state_dim)
    replay = FrameReplay(1000, (3, size, size), 3, ACT, dev, window=64, state_dim=state_dim)
    if rows:
        b = episode_batch(rows, size)
        b["frame_state"] = np.random.default_rng(1).normal(size=(rows + 1, state_dim)).astype(np.float32)
        replay.insert(b)
    return sac, replay


def run(step, calls: int, seed: int = 123) -> torch.Tensor:
    torch.manual_seed(seed)
    return torch.stack([step().clone() for _ in range(calls)])


def params(sac: PixelSAC) -> list[torch.Tensor]:
    return [p for name in sac.modules for p in getattr(sac, name).parameters()] + [sac.log_alpha]


def assert_parity(a, b, la, lb, rtol, atol) -> None:
    torch.testing.assert_close(la, lb, rtol=rtol, atol=atol)
    for p, q in zip(params(a), params(b)):
        torch.testing.assert_close(p, q, rtol=rtol, atol=atol)


@pytest.mark.parametrize("privileged", [False, True])
def test_warmup_rollback_leaves_no_trace_cpu(privileged: bool) -> None:
    a, replay = make("cpu", privileged_critic=privileged)
    b, _ = make("cpu", rows=0, privileged_critic=privileged)
    step = GraphedUpdate(a, replay, 2)
    step.warm_rollback_check()
    for opt in (a.actor_opt, a.critic_opt):
        assert float(opt.step_t) == 0 and not opt.exp_avg.any() and not opt.exp_avg_sq.any()
    la = run(step, 2)
    lb = run(GraphedUpdate(b, replay, 2), 2)
    assert_parity(a, b, la, lb, rtol=0, atol=0)


@pytest.mark.parametrize(("target_encoder", "privileged"), [(True, False), (False, False), (False, True)])
def test_updates_per_call_loop_equals_single_calls_cpu(target_encoder: bool, privileged: bool) -> None:
    a, replay = make("cpu", target_encoder=target_encoder, privileged_critic=privileged)
    b, _ = make("cpu", rows=0, target_encoder=target_encoder, privileged_critic=privileged)
    la = run(GraphedUpdate(a, replay, 2), 2)
    lb = run(GraphedUpdate(b, replay, 1), 4)[1::2]
    assert_parity(a, b, la, lb, rtol=0, atol=0)


@cuda
@pytest.mark.parametrize(("target_encoder", "privileged"), [(True, False), (False, False), (False, True)])
def test_graph_equals_eager_cuda(target_encoder: bool, privileged: bool) -> None:
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.deterministic = True
    try:
        a, replay = make("cuda", target_encoder=target_encoder, privileged_critic=privileged)
        b, _ = make("cuda", rows=0, target_encoder=target_encoder, privileged_critic=privileged)
        ga = GraphedUpdate(a, replay, 2, cuda_graph=True)
        la = run(ga, 3)
        lb = run(GraphedUpdate(b, replay, 2, cuda_graph=False), 3)
        assert ga.graph is not None
        assert_parity(a, b, la, lb, rtol=1e-4, atol=1e-5)
    finally:
        torch.backends.cudnn.deterministic = False


@cuda
def test_a_graph_captured_on_an_empty_ring_samples_later_rows_cuda() -> None:
    sac, replay = make("cuda", rows=0)
    step = GraphedUpdate(sac, replay, 1, cuda_graph=True)
    step.prepare()  # captured with nothing in the ring
    replay.insert(episode_batch(50, 16, reward=7.0))
    step()
    torch.manual_seed(0)
    assert set(replay.sample(64)["reward"].tolist()) == {7.0}
    assert torch.isfinite(step()).all()


@cuda
def test_bf16_84px_batch_256_runs_in_the_graph_cuda() -> None:
    sac, replay = make("cuda", size=84, batch=256, amp="bf16", rows=2000, feature_dim=50,
                       channels=32, hidden_sizes=(1024, 1024))
    step = make_update(sac, replay)
    step.prepare()
    assert step.graph is not None
    for _ in range(20):
        step()
    torch.cuda.synchronize()
    t0, n = time.perf_counter(), 200
    for _ in range(n):
        out = step()
    torch.cuda.synchronize()
    rate = n / (time.perf_counter() - t0)
    print(f"pixel SAC, 84x84 x3 frames, batch 256, bf16, CUDA graph: {rate:.0f} updates/s")
    assert torch.isfinite(out).all()
