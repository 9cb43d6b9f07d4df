"""Soft Actor-Critic: twin Q, tanh-Gaussian actor, learned temperature, Polyak targets.

`SAC.update` is one full step (sample -> critic -> actor -> temperature -> targets) written as
a function of fixed-shape device tensors with no host sync, so it can be compiled and captured
as one CUDA graph (learner/graphed.py). On the CPU it simply runs eagerly.

Kernel budget (the update is launch-bound at small batch, so every kernel counts):
- one actor pass over [obs, next_obs] (both use the pre-update actor, as in standard SAC);
- the actor's loss reads the critic with detached weights: no weight-gradient matmuls;
- gradients come from autograd.grad (no zero_grad kernels) and the temperature gradient is
  written in closed form; actor + temperature and critic each take one flat Adam step
  (learner/flat_adam.py); the target update is one lerp over a flat buffer.
- with `simultaneous` (default) the pieces run as a DAG on three CUDA streams: critic forward,
  target forward and the actor's loss side by side (learner/branches.py).
The differentiable pieces are separate functions so that, compiled, each has exactly one
backward call (AOTAutograd runs one joint backward per compiled region).
"""

from __future__ import annotations

import contextlib
import copy

import torch

from learner.branches import Branches
from learner.config import LearnerConfig
from learner.flat_adam import FlatAdam, flatten_
from learner.networks import Actor, TwinCritic
from learner.replay import ReplayBuffer

LOSS_NAMES = ("critic_loss", "actor_loss", "alpha_loss", "alpha", "q_mean", "entropy")


class GraphScaler:
    """fp16 loss scaling that never reads a value on the host, so it can live in a CUDA graph.

    The scale, growth tracker and overflow flags are device tensors; the inf check and unscale
    is one multi-tensor kernel; fused Adam skips the step itself when `found_inf` is set; the
    scale update is torch's in-place `_amp_update_scale_` (what GradScaler uses internally).
    """

    def __init__(self, device, init_scale=2.0**16, growth=2.0, backoff=0.5, interval=2000):
        self.scale = torch.full((), init_scale, dtype=torch.float32, device=device)
        self.growth_tracker = torch.zeros((), dtype=torch.int32, device=device)
        self.found_inf = torch.zeros((), dtype=torch.float32, device=device)
        self.growth, self.backoff, self.interval = growth, backoff, interval

    def unscale_(self, grads: list[torch.Tensor]) -> torch.Tensor:
        """Unscale `grads` in place; returns a fresh device flag (>0: non-finite seen).

        Each branch of an update gets its own flag (no shared writes across streams);
        `update` folds them into found_inf once the branches joined.
        """
        found = torch.zeros_like(self.found_inf)
        torch._amp_foreach_non_finite_check_and_unscale_(grads, found, self.scale.reciprocal())
        return found

    def update(self, *found: torch.Tensor) -> None:
        for f in found:
            self.found_inf.add_(f)
        torch._amp_update_scale_(
            self.scale, self.growth_tracker, self.found_inf,
            self.growth, self.backoff, self.interval,
        )
        self.found_inf.zero_()

    def tensors(self) -> list[torch.Tensor]:
        return [self.scale, self.growth_tracker, self.found_inf]


class SAC:
    def __init__(self, cfg: LearnerConfig, obs_dim, action_dim, action_low, action_high, device):
        self.cfg = cfg
        self.device = device = torch.device(device)
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
        self.gamma = float(cfg.gamma)  # plain floats: compiled code guards on them cheaply
        self.tau = float(cfg.tau)
        self._actor_params = list(self.actor.parameters())
        self._critic_params = list(self.critic.parameters())
        # Flat Adam (learner/flat_adam.py): each optimizer's parameters are views of one
        # buffer; the temperature rides in the actor's buffer (its own lr if it differs).
        self.critic_opt = FlatAdam([(self._critic_params, cfg.critic_lr)])
        self.actor_opt = FlatAdam([(self._actor_params, cfg.actor_lr), ([self.log_alpha], cfg.alpha_lr)])
        self._target_flat = flatten_(list(self.target.parameters()))
        self.amp_dtype = resolve_amp(cfg.amp, device)
        self.scaler = GraphScaler(device) if self.amp_dtype == torch.float16 else None
        # streams: 0 critic, 1 actor + temperature, 2 target (learner/branches.py)
        self.branches = Branches(device, cfg.simultaneous, 3)
        self._actor_pass = self._actor_pass_eager
        self._critic_q = self._critic_q_eager
        self._target_q = self._target_q_eager
        self._critic_loss = self._critic_loss_eager
        self._actor_loss = self._actor_loss_eager

    def autocast(self):
        if self.amp_dtype is None:
            return contextlib.nullcontext()
        # No weight-cast cache: a cache entry made during capture would be stale on replay.
        return torch.autocast(self.device.type, dtype=self.amp_dtype, cache_enabled=False)

    def compile(self, mode: str | None = "default") -> None:
        """torch.compile the differentiable pieces (forward and their backward) and both Adams."""
        self._actor_pass = torch.compile(self._actor_pass_eager, mode=mode)
        self._critic_q = torch.compile(self._critic_q_eager, mode=mode)
        self._target_q = torch.compile(self._target_q_eager, mode=mode)
        self._critic_loss = torch.compile(self._critic_loss_eager, mode=mode)
        self._actor_loss = torch.compile(self._actor_loss_eager, mode=mode)
        self.critic_opt.compile(mode)
        self.actor_opt.compile(mode)

    # ---- the differentiable pieces: pure functions of tensors ----
    def _actor_pass_eager(self, obs_pair: torch.Tensor):
        with self.autocast():
            return self.actor.sample(obs_pair)

    def _critic_q_eager(self, obs, action):
        with self.autocast():
            return self.critic(obs, action).float()

    def _target_q_eager(self, reward, terminated, next_obs, next_a, next_logp, alpha):
        with torch.no_grad():
            with self.autocast():
                next_q = self.target(next_obs, next_a).min(0).values
            soft_next = next_q.float() - alpha * next_logp  # fp32: targets never see 16 bits
            return reward + self.gamma * (1.0 - terminated) * soft_next

    @staticmethod
    def _critic_loss_eager(q, target_q):
        return 0.5 * (q - target_q).square().mean(1).sum(), q.detach().mean()

    def _actor_loss_eager(self, obs, a_pi, logp_pi, alpha):
        with self.autocast():
            q_pi = self.critic(obs, a_pi, detach_weights=True).min(0).values
        return (alpha * logp_pi - q_pi.float()).mean()

    # ---- one update ----
    def update(self, buffer: ReplayBuffer) -> torch.Tensor:
        """One SAC step on a uniform batch from `buffer`; returns LOSS_NAMES as a tensor."""
        return self.update_on(buffer.sample(self.cfg.batch_size))

    def update_on(self, b: dict[str, torch.Tensor]) -> torch.Tensor:
        """One SAC step on batch `b` (as ReplayBuffer.gather returns it)."""
        alpha = self.log_alpha.detach().exp()
        pair = b["obs_pair"]  # [B, 2, obs_pad]: the padded rows the networks take
        obs, next_obs = pair[:, 0], pair[:, 1]
        br = self.branches
        br.fork(0)
        with br.on(0):  # the critic's forward needs nothing but the batch
            q = self._critic_q(obs, b["action"])
        a_all, logp_all = self._actor_pass(pair)  # [B, 2, act], [B, 2]: obs | next
        a_pi, logp_pi = a_all[:, 0], logp_all[:, 0].float()
        br.fork(1, 2)
        with br.on(2):
            target_q = self._target_q(b["reward"], b["terminated"], next_obs, a_all[:, 1].detach(),
                                      logp_all[:, 1].detach().float(), alpha)
        br.after(0, 2)
        with br.on(0):
            critic_loss, q_mean = self._critic_loss(q, target_q)
            c_grads, c_inf = self._grads(critic_loss, self._critic_params)
            if not self.cfg.simultaneous:  # CleanRL's order: the actor sees the new critic
                self._step(self.critic_opt, c_grads, c_inf)
        with br.on(1):  # actor + temperature
            actor_loss = self._actor_loss(obs, a_pi, logp_pi, alpha)
            a_grads, a_inf = self._grads(actor_loss, self._actor_params)
            # d/dlog_alpha of -(log_alpha * (logp + H)).mean(), written out: no autograd.
            logp_mean = logp_pi.detach().mean()
            alpha_grad = -(logp_mean + self.target_entropy)
        br.after(0, 1)  # the critic may change only once the actor's loss has read it
        with br.on(1):
            self._step(self.actor_opt, [*a_grads, alpha_grad], a_inf)
        with br.on(0):  # after the target's read too: it waited for branch 2 above
            if self.cfg.simultaneous:
                self._step(self.critic_opt, c_grads, c_inf)
            with torch.no_grad():  # Polyak: one lerp over the flat target buffer
                self._target_flat.lerp_(self.critic_opt.flat, self.tau)
        br.join()
        if self.scaler is not None:
            self.scaler.update(c_inf, a_inf)
        alpha_loss = alpha.log() * alpha_grad  # value of the temperature loss before its step
        return torch.stack(
            [critic_loss.detach(), actor_loss.detach(), alpha_loss, alpha, q_mean, -logp_mean]
        )

    def _grads(self, loss, params) -> tuple[list[torch.Tensor], torch.Tensor | None]:
        """Gradients of `loss` into `params`; with fp16, unscaled, plus their overflow flag."""
        if self.scaler is None:
            return list(torch.autograd.grad(loss, params)), None
        grads = list(torch.autograd.grad(loss * self.scaler.scale, params))
        return grads, self.scaler.unscale_(grads)

    @staticmethod
    def _step(opt: FlatAdam, grads, found_inf) -> None:
        opt.found_inf = found_inf  # fp16: the step is skipped on overflow
        opt.step(grads)

    # ---- state ----
    def state_tensors(self) -> list[torch.Tensor]:
        """Every tensor an update mutates (for graph warm-up rollback)."""
        out = [*self.critic_opt.tensors(), *self.actor_opt.tensors(), self._target_flat]
        if self.scaler is not None:
            out += self.scaler.tensors()
        return out

    def state_dict(self) -> dict:
        return {
            "actor": self.actor.state_dict(),
            "critic": self.critic.state_dict(),
            "target": self.target.state_dict(),
            "log_alpha": self.log_alpha.detach().cpu(),
            "actor_opt": self.actor_opt.state_dict(),
            "critic_opt": self.critic_opt.state_dict(),
            "scaler": [t.cpu() for t in self.scaler.tensors()] if self.scaler else None,
        }

    def load_state_dict(self, state: dict) -> None:
        """Load in place. Optimizer state is replaced, so capture graphs after loading."""
        self.actor.load_state_dict(state["actor"])
        self.critic.load_state_dict(state["critic"])
        self.target.load_state_dict(state["target"])
        with torch.no_grad():
            self.log_alpha.copy_(state["log_alpha"])
        self.actor_opt.load_state_dict(state["actor_opt"])
        self.critic_opt.load_state_dict(state["critic_opt"])
        if self.scaler is not None and state.get("scaler"):
            for dst, src in zip(self.scaler.tensors(), state["scaler"]):
                dst.copy_(src)


def resolve_amp(amp: str, device: torch.device) -> torch.dtype | None:
    """The autocast dtype for `amp` on `device`; None (off) on the CPU."""
    if device.type != "cuda" or amp == "off":
        return None
    if amp == "fp16":
        return torch.float16
    if amp == "auto" and not torch.cuda.is_bf16_supported():
        return None
    return torch.bfloat16
