"""learner/update/flat_adam.py against torch.optim's Adam and AdamW, step by step, on the CPU."""

import pytest
import torch

from herd.learner.update.flat_adam import FlatAdam


def params(seed: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(5, 3, generator=g).requires_grad_(), torch.randn(3, generator=g).requires_grad_(),
            torch.randn(4, generator=g).requires_grad_()]


def grads(step: int, like: list[torch.Tensor]) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(100 + step)
    return [torch.randn(p.shape, generator=g) for p in like]


@pytest.mark.parametrize("wd", [(0.0, 0.0), (0.1, 0.1), (0.1, 0.0)])
def test_flat_adam_steps_as_torch_adamw_per_group(wd):
    """Two groups (as the actor and its temperature): each with its own lr and weight decay;
    (0, 0) is plain Adam, and the flat buffer then takes no decay at all."""
    ours, ref = params(0), params(0)
    flat = FlatAdam([(ours[:2], 1e-2, wd[0]), (ours[2:], 3e-2, wd[1])])
    assert (flat.decay is None) == (wd == (0.0, 0.0))
    opt = torch.optim.AdamW([{"params": ref[:2], "lr": 1e-2, "weight_decay": wd[0]},
                             {"params": ref[2:], "lr": 3e-2, "weight_decay": wd[1]}], eps=1e-8)
    for step in range(6):
        gs = grads(step, ref)
        flat.step(gs)
        for p, g in zip(ref, gs):
            p.grad = g.clone()
        opt.step()
        for a, b in zip(ours, ref):
            torch.testing.assert_close(a.detach(), b.detach(), rtol=1e-5, atol=1e-6)


def test_decay_shrinks_a_parameter_whose_gradient_is_zero():
    p = [torch.ones(8, requires_grad=True)]
    FlatAdam([(p, 0.1, 0.5)]).step([torch.zeros(8)])
    torch.testing.assert_close(p[0].detach(), torch.full((8,), 1 - 0.1 * 0.5))
    q = [torch.ones(8, requires_grad=True)]
    FlatAdam([(q, 0.1)]).step([torch.zeros(8)])  # plain Adam: a zero gradient moves nothing
    torch.testing.assert_close(q[0].detach(), torch.ones(8))


def test_sac_decays_its_networks_but_never_the_temperature():
    from tests.learner.update.test_sac_update import make

    sac, buf = make(actor_weight_decay=0.1, critic_weight_decay=0.2)
    n_actor = sum(p.numel() for p in sac.actor.parameters())
    decay = sac.actor_opt.decay
    assert torch.is_tensor(decay) and decay.shape == sac.actor_opt.flat.shape
    assert float(decay[:n_actor].min()) == pytest.approx(sac.cfg.actor_lr * 0.1) and float(decay[n_actor:]) == 0
    assert sac.critic_opt.decay == pytest.approx(sac.cfg.critic_lr * 0.2)
    out = sac.update(buf)
    assert torch.isfinite(out).all()
    plain, _ = make()
    assert plain.actor_opt.decay is None and plain.critic_opt.decay is None
