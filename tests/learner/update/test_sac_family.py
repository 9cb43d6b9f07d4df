"""The update's family (residual nets, c51 critic, running normalization) against plain
references written out in the test, and the actors acting on the same inputs."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch

from herd.actors.policy import MLPPolicy
from herd.learner.config import LearnerConfig
from herd.learner.graph.capture import GraphedUpdate
from herd.learner.replay.ring import ReplayBuffer
from herd.learner.update import losses
from herd.learner.update.normalizer import RunningNorm
from herd.learner.update.sac import LOSS_NAMES, SAC
from tests.learner.rows import random_rows

OBS, ACT = 7, 3
LOW, HIGH = [-2.0] * ACT, [2.0] * ACT
FAMILY = dict(actor_arch="residual", critic_arch="residual", actor_width=32, critic_width=48,
              critic_loss="c51", num_atoms=21, v_min=-20.0, v_max=20.0, obs_norm=True, reward_norm=True)


def make(seed=0, **kw):
    cfg = LearnerConfig.flat(device="cpu", batch_size=32, hidden_sizes=(32, 32), seed=seed,
                        capacity=1000, **kw)
    sac = SAC(cfg.algorithm, cfg.compute, cfg.replay.batch_size, OBS, ACT, LOW, HIGH, torch.device("cpu"))
    buf = ReplayBuffer(1000, (OBS,), ACT, torch.device("cpu"))
    rows = random_rows(500, OBS, ACT, bound=2.0, p_term=0.2, seed=seed)
    rows["obs"] = rows["obs"] * 5 + 3  # far from zero mean, unit std: normalization matters
    rows["discount"] = (0.99 ** np.random.default_rng(seed).integers(1, 4, 500)).astype(np.float32)
    buf.extend(rows)
    return sac, buf


def slow_projection(values, probs, atoms):
    """C51's projection as its paper writes it: floor and ceil, one value at a time."""
    v_min, v_max = float(atoms[0]), float(atoms[-1])
    n = len(atoms)
    dz = (v_max - v_min) / (n - 1)
    out = np.zeros((values.shape[0], n))
    for b in range(values.shape[0]):
        for j in range(values.shape[1]):
            pos = (min(max(float(values[b, j]), v_min), v_max) - v_min) / dz
            lo, hi = math.floor(pos), math.ceil(pos)
            if lo == hi:
                out[b, lo] += probs[b, j]
            else:
                out[b, lo] += probs[b, j] * (hi - pos)
                out[b, hi] += probs[b, j] * (pos - lo)
    return out


def test_projection_matches_the_textbook_split_incl_clipping_and_exact_atoms():
    atoms = torch.linspace(-10, 10, 11, dtype=torch.float64)
    g = torch.Generator().manual_seed(0)
    values = torch.randn(64, 11, generator=g, dtype=torch.float64) * 12  # many outside [-10, 10]
    values[0] = atoms  # exactly on the atoms
    values[1] = atoms * 0.5  # halfway points
    probs = torch.softmax(torch.randn(64, 11, generator=g, dtype=torch.float64), -1)
    got = losses.project_onto_atoms(values, probs, atoms)
    np.testing.assert_allclose(got.numpy(), slow_projection(values.numpy(), probs.numpy(), atoms.numpy()),
                               atol=1e-12)
    np.testing.assert_allclose(got.sum(-1).numpy(), 1.0, atol=1e-12)  # mass is kept


def test_c51_target_terminal_rows_put_all_mass_at_the_reward_and_truncated_rows_bootstrap():
    atoms = torch.linspace(-10, 10, 21)
    logits = torch.randn(2, 3, 21)
    reward = torch.tensor([1.5, 1.5, 1.5])
    discount = torch.tensor([0.9, 0.9**3, 0.9])  # row 1: an n-step row of 3 steps
    terminated = torch.tensor([1.0, 0.0, 0.0])
    logp = torch.tensor([0.3, -0.2, 0.1])
    alpha = torch.tensor(0.5)
    tgt = losses.c51_target(reward, discount, terminated, logits, logp, alpha, atoms)
    # terminal: one point mass at r = 1.5, between atoms 1 and 2 of spacing 1
    want0 = np.zeros(21)
    want0[11], want0[12] = 0.5, 0.5
    np.testing.assert_allclose(tgt[0].numpy(), want0, atol=1e-6)
    # bootstrapped rows: the pessimistic critic's distribution, shifted and shrunk
    probs = torch.softmax(logits, -1)
    for b in (1, 2):
        pick = int((probs[:, b] * atoms).sum(-1).argmin())
        vals = reward[b] + discount[b] * (atoms - alpha * logp[b])
        want = slow_projection(vals[None].numpy(), probs[pick, b][None].numpy(), atoms.numpy())[0]
        np.testing.assert_allclose(tgt[b].numpy(), want, atol=1e-6)
        if b == 1:  # all its values inside the support (row 2's top ones are clipped): mean kept
            assert float(vals.max()) < 10
            mean = float((tgt[b] * atoms).sum())
            assert math.isclose(mean, float((probs[pick, b] * vals).sum()), abs_tol=1e-4)


def test_c51_softmaxes_of_16_bit_logits_are_taken_in_fp32():
    """AMP's critics hand out bf16 logits: the expected Q, the target distribution and the
    cross-entropy must be those of the same logits in fp32, not of a bf16 softmax."""
    g = torch.Generator().manual_seed(3)
    atoms = torch.linspace(-100, 300, 101)
    logits = (torch.randn(2, 256, 101, generator=g) * 3).to(torch.bfloat16)
    exact = logits.double()  # the very values the bf16 tensor holds
    np.testing.assert_allclose(losses.expected_q(logits, atoms).numpy(),
                               (torch.softmax(exact, -1) * atoms.double()).sum(-1).numpy(), rtol=0, atol=2e-3)
    target = torch.softmax(torch.randn(256, 101, generator=g), -1)
    want = -(target.double() * torch.log_softmax(exact, -1)).sum(-1).mean(1).sum()
    assert math.isclose(float(losses.c51_critic_loss(logits, target)), float(want), rel_tol=1e-5)
    reward, discount, terminated = torch.rand(256, generator=g), torch.full((256,), 0.97), torch.zeros(256)
    logp, alpha = torch.randn(256, generator=g), torch.tensor(0.02)
    got = losses.c51_target(reward, discount, terminated, logits, logp, alpha, atoms)
    ref = losses.c51_target(reward, discount, terminated, logits.float(), logp, alpha, atoms)
    assert got.dtype == torch.float32
    np.testing.assert_allclose(got.numpy(), ref.numpy(), atol=1e-6)


def test_running_norm_equals_the_stats_of_all_rows_then_fades_past_its_horizon():
    g = torch.Generator().manual_seed(1)
    norm = RunningNorm(4, "cpu", horizon=10_000)
    seen = []
    for _ in range(12):
        x = torch.randn(64, 4, generator=g) * torch.tensor([1.0, 2.0, 0.1, 5.0]) + 3
        norm.update_(x)
        seen.append(x)
    allx = torch.cat(seen).double()
    np.testing.assert_allclose(norm.mean.numpy(), allx.mean(0).numpy(), rtol=1e-5)
    np.testing.assert_allclose(norm.var.numpy(), allx.var(0, unbiased=False).numpy(), rtol=1e-4)
    small = RunningNorm(1, "cpu", horizon=100)
    for _ in range(50):
        small.update_(torch.zeros(50, 1))
    for _ in range(50):  # the data moves: a capped count follows it
        small.update_(torch.full((50, 1), 10.0))
    assert float(small.count) == 100 and float(small.mean) > 9.9


@pytest.mark.parametrize("arch", ["mlp", "residual"])
def test_actors_act_on_the_learners_normalized_inputs(arch):
    sac, buf = make(actor_arch=arch, obs_norm=True, actor_width=32)
    for _ in range(5):
        sac.update(buf)
    w = sac.policy_weights(version=3)
    w = type(w).FromString(w.SerializeToString())
    assert w.arch == arch and len(w.obs_mean) == OBS and w.obs_clip == sac.cfg.obs_clip
    assert float(sac.obs_norm.mean[:OBS].mean()) > 2  # the statistics moved off zero
    policy = MLPPolicy(w, np.array(LOW, np.float32), np.array(HIGH, np.float32))
    obs = np.random.default_rng(0).normal(3, 5, size=(16, OBS)).astype(np.float32)
    with torch.no_grad():
        x = torch.from_numpy(obs)
        padded = torch.nn.functional.pad(x, (0, sac.actor.in_dim - OBS))
        mean, _ = sac.actor(sac.obs_norm.normalize(padded, sac.cfg.obs_clip))
        want = (torch.tanh(mean) * sac.actor.scale + sac.actor.bias).numpy()
    np.testing.assert_allclose(policy.act(obs, deterministic=True), want, atol=1e-5)


def test_family_update_is_finite_moves_the_state_and_round_trips():
    sac, buf = make(**FAMILY)
    crit = [p.clone() for p in sac.critic.parameters()]
    for _ in range(3):
        out = sac.update(buf)
    assert out.shape == (len(LOSS_NAMES),) and torch.isfinite(out).all()
    assert float(out[LOSS_NAMES.index("reward_rms")]) != 1.0
    assert all(not torch.equal(a, b) for a, b in zip(crit, sac.critic.parameters()))
    assert sac.critic.head.weight.shape == (2, 48, 21)  # twin critics, 21 atoms each
    other, _ = make(seed=1, **FAMILY)
    other.load_state_dict(copy.deepcopy(sac.state_dict()))
    torch.manual_seed(5)
    a = sac.update(buf)
    torch.manual_seed(5)
    b = other.update(buf)
    assert torch.equal(a, b)  # normalizer statistics travel with the checkpoint


def test_family_warm_up_rolls_back_the_normalizers_too():
    sac, buf = make(**FAMILY)
    step = GraphedUpdate(sac, buf)
    before = [t.clone() for t in sac.state_tensors()]
    step.warm_rollback_check()
    for a, b in zip(before, sac.state_tensors()):
        assert torch.equal(a, b)


def test_a_checkpoint_without_normalizers_is_refused_clearly():
    plain, _ = make()
    sac, _ = make(obs_norm=True)
    with pytest.raises(ValueError, match="without learner.algorithm.obs_norm"):
        sac.load_state_dict(plain.state_dict())


def test_checkpoints_of_the_old_plain_layout_load():
    sac, buf = make()
    sac.update(buf)
    state = copy.deepcopy(sac.state_dict())
    old = dict(state)  # the layout before the family: nn.Sequential actor, stacked critic lists
    old["actor"] = {k.replace("layers.0.", "net.0.").replace("layers.1.", "net.2.").replace("head.", "net.4."): v
                    for k, v in state["actor"].items()}
    for net in ("critic", "target"):
        old[net] = {k.replace("layers.0.weight", "weights.0").replace("layers.0.bias", "biases.0")
                    .replace("layers.1.weight", "weights.1").replace("layers.1.bias", "biases.1")
                    .replace("head.weight", "weights.2").replace("head.bias", "biases.2"): v
                    for k, v in state[net].items()}
    other, _ = make(seed=3)
    other.load_state_dict(old)
    for a, b in zip(sac.critic.parameters(), other.critic.parameters()):
        assert torch.equal(a, b)
    for a, b in zip(sac.actor.parameters(), other.actor.parameters()):
        assert torch.equal(a, b)
