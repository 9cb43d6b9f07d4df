"""The SAC losses as plain functions of tensors: the algorithm, with no streams or graphs.

Shapes: B batch rows, Q critics (twin: 2), N atoms of the categorical critic. Every function
is side-effect free, so learner/update/sac.py can compile each one and capture them all in a graph.
Targets are computed in fp32: they never see 16 bits. Under AMP the critics' logits come out
in bf16 or fp16; every softmax over them is taken in fp32 (a 101-atom softmax in bf16 keeps
~3 significant digits of each probability, and the expected Q carries that error).
"""

from __future__ import annotations

import torch


def soft_target(reward, discount, terminated, next_q, next_logp, alpha):
    """Soft Bellman target [B]: r + g^k (1 - done) (min_i Q_i(s', a') - alpha log pi(a'|s')).

    next_q [Q, B] from the target critics; `discount` is each row's g^k (n-step rows)."""
    soft_next = next_q.min(0).values - alpha * next_logp
    return reward + discount * (1.0 - terminated) * soft_next


def mse_critic_loss(q, target):
    """Half the squared TD error, summed over the critics, averaged over the batch."""
    return 0.5 * (q - target).square().mean(1).sum()


def expected_q(logits, atoms):
    """[Q, B, N] logits -> [Q, B] means of the categorical return distributions."""
    return (torch.softmax(logits.float(), -1) * atoms).sum(-1)


def project_onto_atoms(values, probs, atoms):
    """C51's projection: the distribution with mass probs[b, j] at values[b, j] (clipped to the
    atoms' range), split between the two atoms around each value in proportion to closeness.

    Written as a hat function over the atom grid, m_i = sum_j p_j max(0, 1 - |b_j - i|) with
    b_j the value's position in atom units, which is the usual floor/ceil split (a value on an
    atom gives it all its mass) with no scatter: deterministic and fixed-shape. [B, N] out.
    """
    v_min, v_max, n = atoms[0], atoms[-1], atoms.shape[0]
    pos = (values.clamp(v_min, v_max) - v_min) / ((v_max - v_min) / (n - 1))  # [B, N]
    grid = torch.arange(n, device=values.device, dtype=values.dtype)
    hat = (1.0 - (pos.unsqueeze(-1) - grid).abs()).clamp_(min=0.0)  # [B, N_src, N_dst]
    return (probs.unsqueeze(-1) * hat).sum(1)


def c51_target(reward, discount, terminated, next_logits, next_logp, alpha, atoms):
    """Target distribution [B, N]: the soft Bellman operator applied atom by atom
    (z -> r + g^k (1 - done)(z - alpha log pi(a'|s'))) to the target critic whose mean is the
    lowest (clipped double Q, per row), projected back onto the atoms."""
    probs = torch.softmax(next_logits.float(), -1)  # [Q, B, N]
    pick = (probs * atoms).sum(-1).argmin(0)  # [B]: the pessimistic critic per row
    p = probs.gather(0, pick.view(1, -1, 1).expand(1, -1, probs.shape[-1])).squeeze(0)
    boot = (discount * (1.0 - terminated)).unsqueeze(-1)
    values = reward.unsqueeze(-1) + boot * (atoms - (alpha * next_logp).unsqueeze(-1))
    return project_onto_atoms(values, p, atoms)


def c51_critic_loss(logits, target_probs):
    """Cross-entropy of each critic's distribution against the target, summed over critics,
    averaged over the batch."""
    return -(target_probs * torch.log_softmax(logits.float(), -1)).sum(-1).mean(1).sum()


def actor_loss(q_pi, logp_pi, alpha):
    """E[alpha log pi(a|s) - min_i Q_i(s, a)], a ~ pi (reparameterised); q_pi [Q, B]."""
    return (alpha * logp_pi - q_pi.min(0).values).mean()


def temperature_grad(logp_pi, target_entropy):
    """d/d log_alpha of -(log_alpha * (log pi + H_target)).mean(), in closed form."""
    return -(logp_pi.detach().mean() + target_entropy)
