"""Graph vs eager: same seed, same ring -> same losses and parameters.

GPU (marked `cuda`): TF32 off; a captured graph runs the very kernels eager runs, with the
same Philox offsets, so fp32 must agree to rtol 1e-5 / atol 1e-6 (bf16: 1e-3 / 1e-4) after 6
updates, also with 2 updates per replay (passed on the H200, torch 2.11). The compiled graph
is meant to draw its noise through aten (inductor fallback_random) and is held to rtol 1e-3 /
atol 1e-4; it did not match there (xfail, see the marker).
CPU twins: the warm-up + rollback that precedes capture leaves no trace, and the graph
wrapper's eager fallback equals a plain loop.
"""

from __future__ import annotations

import pytest
import torch

from herd.learner.config import LearnerConfig
from herd.learner.graph.capture import GraphedUpdate
from herd.learner.replay.ring import ReplayBuffer
from herd.learner.update.sac import SAC
from tests.learner.rows import random_rows

OBS, ACT = 11, 4
cuda = pytest.mark.cuda


FAMILY = dict(actor_arch="residual", critic_arch="residual", actor_width=64, critic_width=64,
              critic_loss="c51", num_atoms=51, v_min=-50.0, v_max=50.0, obs_norm=True, reward_norm=True)
"""The 2026 family (learner/config.py) at small sizes: all of it must live in the graph."""
DEFAULT_FAMILY = {**FAMILY, "critic_loss": "mse", "actor_weight_decay": 0.1, "critic_weight_decay": 0.1}
"""configs/humanoid.yaml's critic (MSE) with AdamW's decay on both networks."""


def make(device: str, amp: str = "off", batch: int = 64, hidden=(64, 64), **family) -> tuple[SAC, ReplayBuffer]:
    cfg = LearnerConfig.flat(device=device, batch_size=batch, hidden_sizes=hidden, amp=amp,
                        capacity=2000, seed=3, **family)
    dev = torch.device(device)
    sac = SAC(cfg.algorithm, cfg.compute, cfg.replay.batch_size, OBS, ACT, [-1.0] * ACT, [1.0] * ACT, dev)
    buf = ReplayBuffer(2000, (OBS,), ACT, dev)
    buf.extend(random_rows(1500, OBS, ACT, bound=1.0, p_term=0.1, seed=0))
    return sac, buf


def run(step, calls: int, seed: int = 123) -> torch.Tensor:
    torch.manual_seed(seed)
    return torch.stack([step().clone() for _ in range(calls)])


def params(sac: SAC) -> list[torch.Tensor]:
    norms = [t for n in sac._norms().values() for t in n.tensors()]
    return [*sac.actor.parameters(), *sac.critic.parameters(), *sac.target.parameters(), sac.log_alpha, *norms]


def assert_parity(a: SAC, b: SAC, la: torch.Tensor, lb: torch.Tensor, rtol: float, atol: float) -> None:
    torch.testing.assert_close(la, lb, rtol=rtol, atol=atol)
    for p, q in zip(params(a), params(b)):
        torch.testing.assert_close(p, q, rtol=rtol, atol=atol)


@pytest.mark.parametrize("family", [{}, DEFAULT_FAMILY], ids=["plain", "mse-decay"])
def test_warmup_rollback_leaves_no_trace_cpu(family: dict) -> None:
    a, buf = make("cpu", **family)
    b, _ = make("cpu", **family)
    step = GraphedUpdate(a, buf, 2)
    step.warm_rollback_check()
    for opt in (a.actor_opt, a.critic_opt):  # Adam state is back to step 0
        assert float(opt.step_t) == 0 and not opt.exp_avg.any() and not opt.exp_avg_sq.any()
    la = run(step, 3)
    lb = run(GraphedUpdate(b, buf, 2), 3)
    assert_parity(a, b, la, lb, rtol=0, atol=0)


def test_updates_per_call_loop_equals_single_calls_cpu() -> None:
    a, buf = make("cpu")
    b, _ = make("cpu")
    la = run(GraphedUpdate(a, buf, 3), 2)  # 6 updates, last loss of each call
    lb = run(GraphedUpdate(b, buf, 1), 6)[2::3]
    assert_parity(a, b, la, lb, rtol=0, atol=0)


def test_family_warmup_rollback_leaves_no_trace_cpu() -> None:
    a, buf = make("cpu", **FAMILY)
    b, _ = make("cpu", **FAMILY)
    step = GraphedUpdate(a, buf, 2)
    step.warm_rollback_check()
    la = run(step, 3)
    lb = run(GraphedUpdate(b, buf, 2), 3)
    assert_parity(a, b, la, lb, rtol=0, atol=0)


@cuda
@pytest.mark.parametrize("family", [{}, FAMILY, DEFAULT_FAMILY], ids=["plain", "family", "mse-decay"])
@pytest.mark.parametrize("amp,k,tol", [("off", 1, (1e-5, 1e-6)), ("off", 2, (1e-5, 1e-6)), ("bf16", 1, (1e-3, 1e-4))])
def test_graph_equals_eager_gpu(amp: str, k: int, tol, family: dict) -> None:
    torch.backends.cuda.matmul.allow_tf32 = False
    a, buf = make("cuda", amp, **family)
    b, _ = make("cuda", amp, **family)
    graphed = GraphedUpdate(a, buf, k, cuda_graph=True)
    graphed.capture()
    assert graphed.graph is not None
    la = run(graphed, 6 // k)
    lb = run(GraphedUpdate(b, buf, k, cuda_graph=False), 6 // k)
    assert_parity(a, b, la, lb, *tol)


@cuda
@pytest.mark.xfail(strict=False, reason="on torch 2.11 / H200 the compiled update drew other noise than "
                   "eager even with fallback_random (loss diff up to 1.28); compiled RNG parity is open")
def test_compiled_graph_close_to_eager_gpu() -> None:
    torch._inductor.config.fallback_random = True  # aten RNG: the same noise as eager
    try:
        torch.backends.cuda.matmul.allow_tf32 = False
        a, buf = make("cuda")
        b, _ = make("cuda")
        graphed = GraphedUpdate(a, buf, 2, cuda_graph=True, compile_mode="default")
        la = run(graphed, 3)
        lb = run(GraphedUpdate(b, buf, 2, cuda_graph=False), 3)
        assert_parity(a, b, la, lb, rtol=1e-3, atol=1e-4)
    finally:
        torch._inductor.config.fallback_random = False


@cuda
def test_graph_sees_the_ring_grow_gpu() -> None:
    """size_t is read inside the graph: indices follow the fill level without recapture."""
    a, buf = make("cuda")
    graphed = GraphedUpdate(a, buf, 1, cuda_graph=True)
    graphed()
    buf.extend({k: getattr(buf, k)[:400].cpu() for k in ("obs", "next_obs", "action", "reward", "terminated")})
    assert buf.size == 1900
    out = graphed()
    torch.cuda.synchronize()
    assert torch.isfinite(out).all()
