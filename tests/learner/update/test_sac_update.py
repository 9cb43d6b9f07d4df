"""The kernel-lean SAC update equals a textbook SAC update (separate passes, .backward())."""

from __future__ import annotations

import copy
import math

import pytest
import torch

from herd.learner.config import LearnerConfig
from herd.learner.replay.ring import ReplayBuffer
from herd.learner.update.sac import LOSS_NAMES, SAC
from tests.learner.rows import random_rows

OBS, ACT = 7, 3
LOW, HIGH = [-2.0] * ACT, [2.0] * ACT


def make(seed: int = 0, **kw) -> tuple[SAC, ReplayBuffer]:
    cfg = LearnerConfig.flat(device="cpu", batch_size=32, hidden_sizes=(32, 32), seed=seed,
                        capacity=1000, **kw)
    sac = SAC(cfg.algorithm, cfg.compute, cfg.replay.batch_size, OBS, ACT, LOW, HIGH, torch.device("cpu"))
    buf = ReplayBuffer(1000, (OBS,), ACT, torch.device("cpu"))
    buf.extend(random_rows(500, OBS, ACT, bound=2.0, p_term=0.2, seed=seed))
    return sac, buf


def ref_sample(actor, obs, noise):
    mean, log_std = actor(obs)
    std = log_std.exp()
    pre = mean + std * noise
    logp = torch.distributions.Normal(mean, std).log_prob(pre).sum(-1)
    logp = logp - torch.log(actor.scale * (1 - torch.tanh(pre) ** 2)).sum(-1)
    return torch.tanh(pre) * actor.scale + actor.bias, logp


def ref_update(s: dict, b: dict, noise: torch.Tensor, gamma: float, tau: float, te: float,
               simultaneous: bool):
    """Textbook SAC step: three optimizers, .backward(), critic grads in the actor loss.

    simultaneous: the actor's loss reads the critic before its step (softlearning's SAC);
    else after it (CleanRL's order).
    """
    actor, critic, target, log_alpha = s["actor"], s["critic"], s["target"], s["log_alpha"]
    alpha = log_alpha.detach().exp()
    with torch.no_grad():
        na, nlogp = ref_sample(actor, b["next_obs"], noise[:, 1])
        y = b["reward"] + gamma * (1 - b["terminated"]) * (target(b["next_obs"], na).min(0).values - alpha * nlogp)
    q = critic(b["obs"], b["action"])
    closs = 0.5 * ((q - y) ** 2).mean(1).sum()
    s["copt"].zero_grad()
    closs.backward()
    if not simultaneous:
        s["copt"].step()
    a, logp = ref_sample(actor, b["obs"], noise[:, 0])
    aloss = (alpha * logp - critic(b["obs"], a).min(0).values).mean()
    s["aopt"].zero_grad()
    saved = [p.grad.clone() for p in critic.parameters()]
    aloss.backward()
    for p, g in zip(critic.parameters(), saved):  # the actor's loss never steps the critic
        p.grad = g
    s["aopt"].step()
    if simultaneous:
        s["copt"].step()
    alpha_loss = -(log_alpha * (logp.detach() + te)).mean()
    s["alopt"].zero_grad()
    alpha_loss.backward()
    s["alopt"].step()
    with torch.no_grad():
        for t, p in zip(target.parameters(), critic.parameters()):
            t.lerp_(p, tau)
    return closs.detach(), aloss.detach()


@pytest.mark.parametrize("simultaneous", [True, False])
def test_update_matches_textbook_sac(monkeypatch, simultaneous: bool) -> None:
    sac, buf = make(simultaneous=simultaneous)
    ref = {k: copy.deepcopy(getattr(sac, k)) for k in ("actor", "critic", "target")}
    ref["log_alpha"] = sac.log_alpha.detach().clone().requires_grad_(True)
    ref["copt"] = torch.optim.Adam(ref["critic"].parameters(), lr=sac.cfg.critic_lr)
    ref["aopt"] = torch.optim.Adam(ref["actor"].parameters(), lr=sac.cfg.actor_lr)
    ref["alopt"] = torch.optim.Adam([ref["log_alpha"]], lr=sac.cfg.alpha_lr)
    for i in range(3):
        b = buf.sample(32)
        noise = torch.randn(32, 2, ACT)
        monkeypatch.setattr(torch, "randn_like", lambda x, noise=noise: noise.clone())
        out = sac.update_on(b)
        monkeypatch.undo()
        closs, aloss = ref_update(ref, b, noise, sac.cfg.gamma, sac.tau, sac.target_entropy,
                                  simultaneous)
        assert torch.allclose(out[0], closs, rtol=1e-5, atol=1e-6), i
        assert torch.allclose(out[1], aloss, rtol=1e-5, atol=1e-6), i
    for name in ("actor", "critic", "target"):
        for p, r in zip(getattr(sac, name).parameters(), ref[name].parameters()):
            assert torch.allclose(p, r, atol=2e-6), name
    assert torch.allclose(sac.log_alpha, ref["log_alpha"], atol=1e-7)
    # parameters really are views of the flat buffers the optimizers step
    assert sac.critic.layers[0].weight.data_ptr() == sac.critic_opt.flat.data_ptr()


def test_wire_tensors_drop_the_padding() -> None:
    sac, _ = make()
    w = sac.actor.wire_tensors()
    assert w["l0.weight"].shape == (32, OBS) and w["l2.weight"].shape == (2 * ACT, 32)
    assert sac.actor.layers[0].weight.shape[1] % 8 == 0
    assert not sac.actor.layers[0].weight[:, OBS:].any()


def test_update_outputs_and_state_change() -> None:
    sac, buf = make()
    before = [p.clone() for p in sac.critic.parameters()]
    tgt = [p.clone() for p in sac.target.parameters()]
    out = sac.update(buf)
    assert out.shape == (len(LOSS_NAMES),) and torch.isfinite(out).all()
    assert math.isclose(float(out[3]), sac.cfg.init_alpha, rel_tol=1e-6)  # alpha before its step
    for p, b, t, new_t in zip(sac.critic.parameters(), before, tgt, sac.target.parameters()):
        assert not torch.equal(p, b)
        assert torch.allclose(new_t, torch.lerp(t, p, sac.tau))


def test_separate_alpha_lr_uses_a_second_group() -> None:
    sac, buf = make(alpha_lr=1e-3)
    assert torch.is_tensor(sac.actor_opt.lr)  # per-element lr: one step, two rates
    a0 = sac.log_alpha.item()
    sac.update(buf)
    assert abs(sac.log_alpha.item() - a0) > 5e-4  # Adam's first step is ~lr


def test_state_dict_roundtrip() -> None:
    sac, buf = make()
    sac.update(buf)
    assert float(sac.critic_opt.step_t) == 1
    other, _ = make(seed=1)
    other.load_state_dict(copy.deepcopy(sac.state_dict()))
    torch.manual_seed(5)
    a = sac.update(buf)
    torch.manual_seed(5)
    b = other.update(buf)
    assert torch.equal(a, b)
