"""AMP: resolution rules, the graph-safe fp16 loss scaler, and AMP learning like fp32."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from herd.learner.config import LearnerConfig
from herd.learner.graph.capture import GraphedUpdate
from herd.learner.replay.ring import ReplayBuffer
from herd.learner.update.sac import SAC, GraphScaler, resolve_amp

cuda = pytest.mark.cuda


def test_amp_is_off_on_cpu() -> None:
    for amp in ("off", "bf16", "fp16", "auto"):
        assert resolve_amp(amp, torch.device("cpu")) is None


def _fused_cpu_ok() -> bool:
    try:
        p = torch.nn.Parameter(torch.ones(2))
        p.grad = torch.ones(2)
        torch.optim.Adam([p], fused=True).step()
        torch._amp_foreach_non_finite_check_and_unscale_([p.grad], torch.zeros(()), torch.ones(()))
        return True
    except (RuntimeError, NotImplementedError):
        return False


@pytest.mark.skipif(not _fused_cpu_ok(), reason="no fused Adam / amp kernels on this CPU build")
@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=cuda)])
def test_scaler_skips_overflow_steps_and_backs_off(device: str) -> None:
    p = torch.nn.Parameter(torch.ones(4, device=device))
    opt = torch.optim.Adam([p], lr=0.1, fused=True)
    sc = GraphScaler(device, init_scale=1024.0, interval=2)
    for grad, expect_skip in [(torch.full((4,), 1024.0), False), (torch.tensor([1.0, float("inf"), 0, 0]), True)]:
        before = p.detach().clone()
        grads = [grad.to(device).clone()]
        opt.found_inf = found = sc.unscale_(grads)
        p.grad = grads[0]
        opt.step()
        scale = float(sc.scale)
        sc.update(found)
        if expect_skip:
            assert torch.equal(p, before) and float(sc.scale) == scale / 2
            assert float(opt.state[p]["step"]) == 1  # the skipped step is not counted
        else:
            assert not torch.equal(p, before) and float(sc.scale) == scale
            torch.testing.assert_close(grads[0], torch.ones(4, device=device))  # unscaled


def regression_buffer(device: torch.device, obs: int = 16, act: int = 4) -> ReplayBuffer:
    """Terminal transitions with reward = f(obs): the critic regresses a fixed function."""
    g = np.random.default_rng(0)
    n = 4000
    o = g.normal(size=(n, obs)).astype(np.float32)
    buf = ReplayBuffer(n, (obs,), act, device)
    buf.extend({"obs": o, "next_obs": o, "action": g.uniform(-1, 1, (n, act)),
                "reward": np.tanh(o[:, :4]).sum(1), "terminated": np.ones(n, np.uint8)})
    return buf


def final_critic_loss(amp: str, device: torch.device, updates: int = 400) -> float:
    cfg = LearnerConfig.flat(device=device.type, batch_size=256, hidden_sizes=(64, 64), amp=amp,
                        capacity=4000, critic_lr=1e-3)
    sac = SAC(cfg.algorithm, cfg.compute, cfg.replay.batch_size, 16, 4, [-1.0] * 4, [1.0] * 4, device)
    step = GraphedUpdate(sac, regression_buffer(device), 4)
    losses = [step()[0].clone() for _ in range(updates // 4)]
    return float(torch.stack(losses[-10:]).mean())


@cuda
@pytest.mark.parametrize("amp", ["bf16", "fp16"])
def test_amp_learns_like_fp32_gpu(amp: str) -> None:
    dev = torch.device("cuda")
    ref = final_critic_loss("off", dev)
    got = final_critic_loss(amp, dev)
    start = final_critic_loss("off", dev, updates=4)
    assert ref < 0.5 * start  # the task is learnable in this budget
    assert got < max(1.5 * ref, ref + 0.02), (amp, got, ref)


@cuda
def test_fp16_graph_runs_with_device_scale_gpu() -> None:
    dev = torch.device("cuda")
    cfg = LearnerConfig.flat(device="cuda", batch_size=128, hidden_sizes=(64, 64), amp="fp16", capacity=4000)
    sac = SAC(cfg.algorithm, cfg.compute, cfg.replay.batch_size, 16, 4, [-1.0] * 4, [1.0] * 4, dev)
    assert sac.scaler is not None
    buf = regression_buffer(dev)
    step = GraphedUpdate(sac, buf, 2)
    for _ in range(10):
        out = step()
    torch.cuda.synchronize()
    assert step.graph is not None and torch.isfinite(out).all()
    # An overflow inside the replayed graph: the critic step is skipped and the scale backs off.
    scale = float(sac.scaler.scale)
    w = [p.detach().clone() for p in sac.critic.parameters()]
    buf.reward.fill_(6e4)  # squares to inf in fp16 scaled backward
    step()
    torch.cuda.synchronize()
    assert float(sac.scaler.scale) < scale
    assert all(torch.equal(a, b) for a, b in zip(w, sac.critic.parameters()))
