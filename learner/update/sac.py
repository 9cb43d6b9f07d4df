"""Soft Actor-Critic: twin Q, tanh-Gaussian actor, learned temperature, Polyak targets.

The losses themselves are plain functions in learner/update/losses.py; this file wires them into one
step and keeps it fast. `SAC.update` is one full step (sample -> normalize -> critic -> actor
-> temperature -> targets) written as a function of fixed-shape device tensors with no host
sync, so it can be compiled and captured as one CUDA graph (learner/graph/capture.py). On the CPU
it simply runs eagerly. The family (AlgorithmConfig): mlp or residual networks, an MSE or a
categorical (c51) critic, running observation and reward normalization, n-step rows.

Kernel budget (the update is launch-bound at small batch, so every kernel counts):
- one actor pass over [obs, next_obs] (both use the pre-update actor, as in standard SAC);
- the actor's loss reads the critic with detached weights: no weight-gradient matmuls;
- gradients come from autograd.grad (no zero_grad kernels) and the temperature gradient is
  written in closed form; actor + temperature and critic each take one flat Adam step
  (learner/update/flat_adam.py); the target update is one lerp over a flat buffer.
- with `simultaneous` (default) the pieces run as a DAG on three CUDA streams: critic forward,
  target forward and the actor's loss side by side (learner/update/branches.py).
The differentiable pieces are separate functions so that, compiled, each has exactly one
backward call (AOTAutograd runs one joint backward per compiled region).
"""

from __future__ import annotations

import contextlib
import copy
import re
from collections.abc import Callable
from typing import TypeVar

import numpy as np
import torch

from herd.learner.config import AlgorithmConfig, ComputeConfig
from herd.learner.replay.ring import ReplayBuffer
from herd.learner.update import losses
from herd.learner.update.branches import Branches
from herd.learner.update.flat_adam import FlatAdam, flatten_
from herd.learner.update.networks import Actor, Critic
from herd.learner.update.normalizer import RunningNorm
from herd.proto import codec
from herd.proto import herd_pb2 as pb

LOSS_NAMES = ("critic_loss", "actor_loss", "alpha_loss", "alpha", "q_mean", "entropy", "reward_rms")


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


def compile_kwargs(mode: str | None, options: dict) -> dict:
    """torch.compile's keywords for `mode` and learner.compute.compile_options: the options (mode
    'default' is what they start from) or the mode. An option inductor does not have is a
    ValueError of one line, before anything compiles."""
    if not options:
        return {"mode": mode}
    import torch._inductor.config as inductor

    known = inductor.get_config_copy()
    unknown = sorted(k for k in options if k not in known)
    if unknown:
        raise ValueError(f"learner.compute.compile_options: torch._inductor has no setting {unknown[0]!r}")
    if mode not in (None, "default"):
        raise ValueError("learner.compute.compile_options needs learner.compute.compile_mode 'default'")
    return {"options": dict(options)}


U = TypeVar("U")


def fresh_twin(device: torch.device, build: Callable[[], U]) -> U:
    """`build()` (an update's constructor, which seeds torch's RNG) with the caller's RNG state
    put back after; on CUDA its initial weights are written before another thread's stream
    reads them."""
    cuda = device.type == "cuda"
    with torch.random.fork_rng(devices=[device] if cuda else []):
        twin = build()
    if cuda:
        torch.cuda.synchronize(device)
    return twin


class SAC:
    def __init__(self, cfg: AlgorithmConfig, compute: ComputeConfig, batch_size: int, obs_dim,
                 action_dim, action_low, action_high, device):
        """`cfg`: the update's math; `compute`: its precision, streams and compile options;
        `batch_size`: transitions sampled per update."""
        self.cfg, self.compute, self.batch_size = cfg, compute, batch_size
        self.device = device = torch.device(device)
        self.obs_dim = obs_dim
        self.action_low = np.asarray(action_low, np.float32)
        self.action_high = np.asarray(action_high, np.float32)
        torch.manual_seed(cfg.seed)
        self.actor = Actor(
            obs_dim, action_dim, cfg.hidden_sizes, action_low, action_high,
            (cfg.log_std_min, cfg.log_std_max), arch=cfg.actor_arch, width=cfg.actor_width,
            blocks=cfg.actor_blocks, expansion=cfg.expansion,
        ).to(device)
        self.c51 = cfg.critic_loss == "c51"
        self.critic = Critic(
            obs_dim, action_dim, cfg.hidden_sizes, 2, cfg.num_atoms if self.c51 else 1,
            arch=cfg.critic_arch, width=cfg.critic_width, blocks=cfg.critic_blocks,
            expansion=cfg.expansion,
        ).to(device)
        self.target = copy.deepcopy(self.critic).requires_grad_(False)
        self.atoms = torch.linspace(cfg.v_min, cfg.v_max, cfg.num_atoms, device=device) if self.c51 else None
        pad = self.actor.in_dim
        self.obs_norm = RunningNorm(pad, device, cfg.norm_horizon) if cfg.obs_norm else None
        self.reward_norm = RunningNorm(1, device, cfg.norm_horizon) if cfg.reward_norm else None
        self.log_alpha = torch.tensor(
            float(torch.tensor(cfg.init_alpha).log()), device=device, requires_grad=True
        )
        self.target_entropy = float(
            cfg.target_entropy if cfg.target_entropy is not None else -action_dim
        )
        self.tau = float(cfg.tau)  # plain floats: compiled code guards on them cheaply
        self._actor_params = list(self.actor.parameters())
        self._critic_params = list(self.critic.parameters())
        # Flat Adam (learner/update/flat_adam.py): each optimizer's parameters are views of one
        # buffer; the temperature rides in the actor's buffer (its own lr if it differs).
        self.critic_opt = FlatAdam([(self._critic_params, cfg.critic_lr, cfg.critic_weight_decay)])
        self.actor_opt = FlatAdam([(self._actor_params, cfg.actor_lr, cfg.actor_weight_decay),
                                   ([self.log_alpha], cfg.alpha_lr)])
        self._target_flat = flatten_(list(self.target.parameters()))
        # the averaged actor (actor_ema): its own flat buffer, lerped toward the live actor's
        # slice of the actor optimizer's buffer (the temperature rides after it)
        self.actor_avg = self._avg_flat = None
        if cfg.actor_ema > 0:
            self.actor_avg = copy.deepcopy(self.actor).requires_grad_(False)
            self._avg_flat = flatten_(list(self.actor_avg.parameters()))
        self._n_actor = sum(p.numel() for p in self._actor_params)
        self.amp_dtype = resolve_amp(compute.amp, device)
        self.scaler = GraphScaler(device) if self.amp_dtype == torch.float16 else None
        # streams: 0 critic, 1 actor + temperature, 2 target (learner/update/branches.py)
        self.branches = Branches(device, compute.simultaneous, 3)
        self._inputs = self._inputs_eager
        self._actor_pass = self._actor_pass_eager
        self._critic_out = self._critic_out_eager
        self._target = self._target_eager
        self._critic_loss = self._critic_loss_eager
        self._actor_loss = self._actor_loss_eager

    def twin(self) -> SAC:
        """A SAC of this config and shapes with fresh weights, on its device (the graph's
        background compile, learner/graph/capture.py); the caller's RNG state is kept."""
        return fresh_twin(self.device, lambda: type(self)(
            self.cfg, self.compute, self.batch_size, self.obs_dim, self.actor.action_dim,
            self.action_low, self.action_high, self.device))

    def autocast(self):
        if self.amp_dtype is None:
            return contextlib.nullcontext()
        # No weight-cast cache: a cache entry made during capture would be stale on replay.
        return torch.autocast(self.device.type, dtype=self.amp_dtype, cache_enabled=False)

    PIECES = ("_inputs", "_actor_pass", "_critic_out", "_target", "_critic_loss", "_actor_loss")

    def compile(self, mode: str | None = "default") -> None:
        """torch.compile the differentiable pieces (forward and their backward) and both Adams
        (together: the second one's sizes make Dynamo recompile the shared function)."""
        kw = compile_kwargs(mode, self.compute.compile_options)
        for name in self.PIECES:
            setattr(self, name, torch.compile(getattr(self, name + "_eager"), **kw))
        self.critic_opt.compile(**kw)
        self.actor_opt.compile(**kw)

    # ---- the pieces: pure functions of tensors (the math is in learner/update/losses.py) ----
    @torch.no_grad()
    def _inputs_eager(self, pair, reward):
        """Normalized [B, 2, obs_pad] obs | next_obs and scaled rewards; the running statistics
        take in this batch first."""
        if self.obs_norm is not None:
            self.obs_norm.update_(pair[:, 0])
            pair = self.obs_norm.normalize(pair, self.cfg.obs_clip)
        if self.reward_norm is not None:
            self.reward_norm.update_(reward.unsqueeze(-1))
            reward = reward / self.reward_norm.rms()
        return pair, reward

    def _actor_pass_eager(self, obs_pair: torch.Tensor):
        with self.autocast():
            return self.actor.sample(obs_pair)

    def _critic_out_eager(self, obs, action):
        with self.autocast():
            return self.critic(obs, action)

    @torch.no_grad()
    def _target_eager(self, reward, discount, terminated, next_obs, next_a, next_logp, alpha):
        with self.autocast():
            nxt = self.target(next_obs, next_a)
        if self.c51:
            return losses.c51_target(reward, discount, terminated, nxt, next_logp, alpha, self.atoms)
        return losses.soft_target(reward, discount, terminated, nxt, next_logp, alpha)

    def _critic_loss_eager(self, out, target):
        if self.c51:
            return losses.c51_critic_loss(out, target), losses.expected_q(out.detach(), self.atoms).mean()
        return losses.mse_critic_loss(out, target), out.detach().mean()

    def _actor_loss_eager(self, obs, a_pi, logp_pi, alpha):
        with self.autocast():
            out = self.critic(obs, a_pi, detach_weights=True)
        q_pi = losses.expected_q(out, self.atoms) if self.c51 else out
        return losses.actor_loss(q_pi, logp_pi, alpha)

    # ---- one update ----
    def update(self, buffer: ReplayBuffer) -> torch.Tensor:
        """One SAC step on a uniform batch from `buffer`; returns LOSS_NAMES as a tensor."""
        return self.update_on(buffer.sample(self.batch_size))

    def update_on(self, b: dict[str, torch.Tensor]) -> torch.Tensor:
        """One SAC step on batch `b` (as ReplayBuffer.gather returns it).

        The DAG, one CUDA stream per branch: 0 critic forward + loss; 1 actor loss +
        temperature; 2 target forward. The critic steps only once the actor's loss and the
        target have read it (softlearning's order); `simultaneous: false` steps it first.
        """
        alpha = self.log_alpha.detach().exp()
        pair, reward = self._inputs(b["obs_pair"], b["reward"])  # pair: [B, 2, obs_pad]
        obs, next_obs = pair[:, 0], pair[:, 1]
        br = self.branches
        br.fork(0)
        with br.on(0):  # the critic's forward needs nothing but the batch
            out = self._critic_out(obs, b["action"])
        a_all, logp_all = self._actor_pass(pair)  # [B, 2, act], [B, 2]: obs | next
        a_pi, logp_pi = a_all[:, 0], logp_all[:, 0].float()
        br.fork(1, 2)
        with br.on(2):
            target = self._target(reward, b["discount"], b["terminated"], next_obs,
                                  a_all[:, 1].detach(), logp_all[:, 1].detach().float(), alpha)
        br.after(0, 2)
        with br.on(0):
            critic_loss, q_mean = self._critic_loss(out, target)
            c_grads, c_inf = self._grads(critic_loss, self._critic_params)
            if not self.compute.simultaneous:  # CleanRL's order: the actor sees the new critic
                self._step(self.critic_opt, c_grads, c_inf)
        with br.on(1):  # actor + temperature
            actor_loss = self._actor_loss(obs, a_pi, logp_pi, alpha)
            a_grads, a_inf = self._grads(actor_loss, self._actor_params)
            alpha_grad = losses.temperature_grad(logp_pi, self.target_entropy)
        br.after(0, 1)  # the critic may change only once the actor's loss has read it
        with br.on(1):
            self._step(self.actor_opt, [*a_grads, alpha_grad], a_inf)
            if self._avg_flat is not None:
                with torch.no_grad():
                    self._avg_flat.lerp_(self.actor_opt.flat[: self._n_actor], self.cfg.actor_ema)
        with br.on(0):  # after the target's read too: it waited for branch 2 above
            if self.compute.simultaneous:
                self._step(self.critic_opt, c_grads, c_inf)
            with torch.no_grad():  # Polyak: one lerp over the flat target buffer
                self._target_flat.lerp_(self.critic_opt.flat, self.tau)
        br.join()
        if self.scaler is not None:
            self.scaler.update(c_inf, a_inf)
        alpha_loss = alpha.log() * alpha_grad  # value of the temperature loss before its step
        rms = self.reward_norm.rms()[0] if self.reward_norm is not None else torch.ones_like(alpha)
        return torch.stack([critic_loss.detach(), actor_loss.detach(), alpha_loss, alpha, q_mean,
                            -logp_pi.detach().mean(), rms])

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

    # ---- what the actors get ----
    def policy_weights(self, version: int, averaged: bool = False) -> pb.PolicyWeights:
        """The actor as PolicyWeights, with the observation statistics it was trained on;
        `averaged`: the averaged actor (actor_ema) where there is one."""
        actor = self.actor_avg if averaged and self.actor_avg is not None else self.actor
        norm = {}
        if self.obs_norm is not None:
            d = self.obs_dim
            norm = dict(obs_mean=self.obs_norm.mean[:d].cpu().numpy(),
                        obs_std=self.obs_norm.std()[:d].cpu().numpy(), obs_clip=self.cfg.obs_clip)
        return codec.pack_weights(actor.wire_tensors(), version, self.cfg.log_std_min,
                                  self.cfg.log_std_max, arch=actor.arch, **norm)

    # ---- state ----
    def _norms(self) -> dict[str, RunningNorm]:
        return {k: n for k, n in (("obs_norm", self.obs_norm), ("reward_norm", self.reward_norm))
                if n is not None}

    def state_tensors(self) -> list[torch.Tensor]:
        """Every tensor an update mutates (for graph warm-up rollback)."""
        out = [*self.critic_opt.tensors(), *self.actor_opt.tensors(), self._target_flat]
        if self._avg_flat is not None:
            out.append(self._avg_flat)
        for n in self._norms().values():
            out += n.tensors()
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
            **{k: n.state_dict() for k, n in self._norms().items()},
            **({"actor_avg": self.actor_avg.state_dict()} if self.actor_avg is not None else {}),
        }

    def load_state_dict(self, state: dict) -> None:
        """Load in place. Optimizer state is replaced, so capture graphs after loading.
        Checkpoints of the plain networks from before the residual family load too."""
        state = upgrade_state(state)
        self.actor.load_state_dict(state["actor"])
        if self.actor_avg is not None:  # a checkpoint without one starts the average at its actor
            self.actor_avg.load_state_dict(state.get("actor_avg", state["actor"]))
        self.critic.load_state_dict(state["critic"])
        self.target.load_state_dict(state["target"])
        with torch.no_grad():
            self.log_alpha.copy_(state["log_alpha"])
        self.actor_opt.load_state_dict(state["actor_opt"])
        self.critic_opt.load_state_dict(state["critic_opt"])
        if self.scaler is not None and state.get("scaler"):
            for dst, src in zip(self.scaler.tensors(), state["scaler"]):
                dst.copy_(src)
        for k, n in self._norms().items():
            if k not in state:
                raise ValueError(f"the checkpoint was trained without learner.algorithm.{k}: it "
                                 f"cannot resume a learner with {k} on (set learner.algorithm.{k}: "
                                 "false)")
            n.load_state_dict(state[k])


def upgrade_state(state: dict) -> dict:
    """Rename the keys of checkpoints from before the residual family (actor `net.<i>`, critic
    `weights.<i>` / `biases.<i>`) to today's `layers.<i>` and `head`; newer states pass through."""
    if not any(k.startswith("net.") for k in state["actor"]):
        return state

    def renamed(sd: dict, linears: list[str], key) -> dict:
        where = {old: (f"layers.{i}" if i < len(linears) - 1 else "head") for i, old in enumerate(linears)}
        return {key(k, where): v for k, v in sd.items()}

    out = dict(state)
    actor_linears = sorted({k.split(".")[1] for k in state["actor"] if k.startswith("net.")}, key=int)
    out["actor"] = renamed(state["actor"], actor_linears, lambda k, w: re.sub(
        r"^net\.(\d+)", lambda m: w[m.group(1)], k))
    for net in ("critic", "target"):
        sd = state[net]
        linears = sorted({k.split(".")[1] for k in sd if k.startswith("weights.")}, key=int)
        out[net] = renamed(sd, linears, lambda k, w: (
            f"{w[k.split('.')[1]]}.{'weight' if k.startswith('weights.') else 'bias'}"
            if k.split(".")[0] in ("weights", "biases") else k))
    return out


def resolve_amp(amp: str, device: torch.device) -> torch.dtype | None:
    """The autocast dtype for `amp` on `device`; None (off) on the CPU."""
    if device.type != "cuda" or amp == "off":
        return None
    if amp == "fp16":
        return torch.float16
    if amp == "auto" and not torch.cuda.is_bf16_supported():
        return None
    return torch.bfloat16
