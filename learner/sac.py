"""Soft Actor-Critic: twin Q, tanh-Gaussian actor, learned temperature, Polyak targets.

`SAC.update` is one full step (sample -> critic -> actor -> temperature -> targets) written as
a function of fixed-shape device tensors with no host sync, so it can be compiled and captured
as one CUDA graph (learner/graphed.py). On the CPU it simply runs eagerly.
"""

from __future__ import annotations

import contextlib
import copy

import torch

from learner.config import LearnerConfig
from learner.networks import Actor, TwinCritic
from learner.replay import ReplayBuffer

LOSS_NAMES = ("critic_loss", "actor_loss", "alpha_loss", "alpha", "q_mean", "entropy")


class SAC:
    def __init__(self, cfg: LearnerConfig, obs_dim, action_dim, action_low, action_high, device):
        self.cfg = cfg
        self.device = device
        torch.manual_seed(cfg.seed)
        self.actor = Actor(
            obs_dim, action_dim, cfg.hidden_sizes, action_low, action_high,
            (cfg.log_std_min, cfg.log_std_max),
        ).to(device)
        self.critic = TwinCritic(obs_dim, action_dim, cfg.hidden_sizes).to(device)
        self.target = copy.deepcopy(self.critic).requires_grad_(False)
        self.log_alpha = torch.tensor(
            float(torch.tensor(cfg.init_alpha).log()), device=device, requires_grad=True
        )
        self.target_entropy = float(
            cfg.target_entropy if cfg.target_entropy is not None else -action_dim
        )
        cuda = device.type == "cuda"
        # Capturable (or fused) Adam keeps its step counter on the device: graph-safe.
        opt = dict(capturable=True, fused=True) if cuda else dict(foreach=True)
        self.actor_opt = torch.optim.Adam(self.actor.parameters(), lr=cfg.actor_lr, **opt)
        self.critic_opt = torch.optim.Adam(self.critic.parameters(), lr=cfg.critic_lr, **opt)
        self.alpha_opt = torch.optim.Adam([self.log_alpha], lr=cfg.alpha_lr, **opt)
        self.amp_dtype = resolve_amp(cfg.amp, device)
        self._target_params = list(self.target.parameters())
        self._online_params = list(self.critic.parameters())

    def autocast(self):
        if self.amp_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.amp_dtype)

    def update(self, buffer: ReplayBuffer) -> torch.Tensor:
        """One SAC step on a uniform batch from `buffer`; returns LOSS_NAMES as a tensor."""
        cfg = self.cfg
        b = buffer.gather(buffer.sample_indices(cfg.batch_size))
        alpha = self.log_alpha.detach().exp()

        with torch.no_grad(), self.autocast():
            next_action, next_logp = self.actor.sample(b["next_obs"])
            next_q = self.target(b["next_obs"], next_action).min(0).values
        soft_next = next_q.float() - alpha * next_logp.float()
        target_q = b["reward"] + cfg.gamma * (1.0 - b["terminated"]) * soft_next

        with self.autocast():
            q = self.critic(b["obs"], b["action"])
        critic_loss = 0.5 * (q.float() - target_q).pow(2).mean(1).sum()
        self.critic_opt.zero_grad(set_to_none=False)
        critic_loss.backward()
        self.critic_opt.step()

        with self.autocast():
            action, logp = self.actor.sample(b["obs"])
            q_pi = self.critic(b["obs"], action).min(0).values
        logp = logp.float()
        actor_loss = (alpha * logp - q_pi.float()).mean()
        self.actor_opt.zero_grad(set_to_none=False)
        actor_loss.backward()
        self.actor_opt.step()

        alpha_loss = -(self.log_alpha * (logp.detach() + self.target_entropy)).mean()
        self.alpha_opt.zero_grad(set_to_none=False)
        alpha_loss.backward()
        self.alpha_opt.step()

        with torch.no_grad():
            torch._foreach_lerp_(self._target_params, self._online_params, cfg.tau)
        return torch.stack(
            [critic_loss, actor_loss, alpha_loss, alpha, q.mean().float(), -logp.mean()]
        ).detach()

    def state_dict(self) -> dict:
        return {
            "actor": self.actor.state_dict(),
            "critic": self.critic.state_dict(),
            "target": self.target.state_dict(),
            "log_alpha": self.log_alpha.detach().cpu(),
            "actor_opt": self.actor_opt.state_dict(),
            "critic_opt": self.critic_opt.state_dict(),
            "alpha_opt": self.alpha_opt.state_dict(),
        }

    def load_state_dict(self, state: dict) -> None:
        self.actor.load_state_dict(state["actor"])
        self.critic.load_state_dict(state["critic"])
        self.target.load_state_dict(state["target"])
        with torch.no_grad():
            self.log_alpha.copy_(state["log_alpha"])
        self.actor_opt.load_state_dict(state["actor_opt"])
        self.critic_opt.load_state_dict(state["critic_opt"])
        self.alpha_opt.load_state_dict(state["alpha_opt"])


def resolve_amp(amp: str, device: torch.device) -> torch.dtype | None:
    """The autocast dtype for `amp` on `device`; None (off) on the CPU."""
    if device.type != "cuda" or amp == "off":
        return None
    if amp == "fp16":
        return torch.float16
    if amp == "auto" and not torch.cuda.is_bf16_supported():
        return None
    return torch.bfloat16
