"""SAC from pixels: DrQ's update on the frame replay, written like learner/update/sac.py's for the graph.

    sample (frame replay: stacks by index) -> random shift (obs and next, one gather)
    critic:  encoder(obs) -> critic trunk -> twin Q(features, action)      trains the encoder
    actor:   encoder(obs).detach() -> actor trunk -> tanh-Gaussian          its own trunk
    target:  target encoder(next) -> target trunk -> target twin Q, soft Bellman (losses.py)
             (target_encoder false: the online encoder's next features, DrQ-v2's way)
    steps:   one flat Adam for encoder + critic (critic_lr), one for actor (actor_lr) +
             temperature (alpha_lr) (flat_adam.py); Polyak: one lerp over the flat target,
             encoder.encoder_tau for the encoder, algorithm.tau after

With learner.encoder.privileged_critic the critics read the env's state instead (an asymmetric
actor-critic: the state of each row's obs and next frame, from the frame replay):

    critic:  twin Q(obs state, action), no trunk, no conv pass
    actor:   encoder(obs) -> actor trunk -> tanh-Gaussian    its loss trains the encoder,
             and a linear head on the actor trunk's features -> the obs state (mean squared
             error), which trains them too
    target:  target twin Q(next state, next action from the next frames' features)
    steps:   one flat Adam for the critics, one for encoder + actor + state head (actor_lr) +
             temperature (alpha_lr)

The critics learn from the state as a state job's do. The actor's gradient alone (dQ/da through
the policy) is one number per action dimension and sample, a thin signal for a conv encoder; the
state head hands it every number of the state. The state head is the learner's own: the
published policy is the encoder, the actor trunk and the actor. Against the symmetric update:
bench/results/pixels-2026-12-05-invertedpendulum-privileged-x86-64.json.

Like SAC.update it is a function of fixed-shape device tensors with no host read, so
learner/graph/capture.py captures it as one CUDA graph (bf16 autocast on CUDA; fp32 on the CPU, where
it runs eagerly). The next actions come from the actor on the online encoder's features of the
next frames (no gradient), as in DrQ; the target critics read their own encoder.
"""

from __future__ import annotations

import contextlib
import copy

import numpy as np
import torch

from herd.learner.config import AlgorithmConfig, ComputeConfig, EncoderConfig, LearnerConfig
from herd.learner.replay.frames import FrameReplay
from herd.learner.update import losses
from herd.learner.update.encoder import Encoder, Trunk, random_shift
from herd.learner.update.flat_adam import FlatAdam, flatten_, module_params
from herd.learner.update.networks import Actor, Critic
from herd.learner.update.sac import compile_kwargs, fresh_twin, resolve_amp
from herd.proto import codec
from herd.proto import herd_pb2 as pb

IGNORED = {
    **{f"algorithm.{k}": why for keys, why in (
        ("actor_arch actor_width actor_blocks critic_arch critic_width critic_blocks expansion",
         "its actor and critics are MLPs of hidden_sizes on the trunks"),
        ("critic_loss num_atoms v_min v_max", "its critics regress one value (mse)"),
        ("obs_norm obs_clip reward_norm norm_horizon", "it normalizes neither frames nor rewards"),
        ("actor_ema", "it publishes its live actor, no averaged copy"),
        ("actor_weight_decay critic_weight_decay", "its Adams do not decay weights"),
    ) for k in keys.split()},
    "compute.simultaneous": "its critic and actor steps run on one stream, in order",
    "replay.dtype": "the frame replay stores uint8 frames",
}
"""Keys the state update (learner/update/sac.py) reads and this one ignores -> why."""


def refuse_ignored(cfg: LearnerConfig) -> None:
    """ValueError, in one line, when `cfg` sets a key of IGNORED to other than its default: a
    pixel job would train without it."""
    for key, why in IGNORED.items():
        section, name = key.split(".")
        part = getattr(cfg, section)
        if getattr(part, name) != type(part).model_fields[name].default:
            raise ValueError(f"learner.{key}: a pixel job's update ignores it ({why}); "
                             f"leave it at its default")


class PixelSAC:
    def __init__(self, cfg: AlgorithmConfig, enc: EncoderConfig, compute: ComputeConfig,
                 batch_size: int, frame_shape: tuple[int, int, int], frame_stack: int,
                 action_dim: int, action_low, action_high, device, state_dim: int = 0):
        """`cfg`: the algorithm keys it reads (hidden_sizes, the step sizes, tau, init_alpha,
        target_entropy, log_std_*, seed; refuse_ignored refuses the others); `batch_size`: rows per update (learner.replay.batch_size); `state_dim`: the
        env's state length (EnvSpec.state_dim), which privileged critics read."""
        self.cfg, self.enc, self.compute = cfg, enc, compute
        self.privileged, self.state_dim = enc.privileged_critic, state_dim
        if self.privileged and not state_dim:
            raise ValueError("learner.encoder.privileged_critic: the env reports no state beside "
                             "its frames (EnvSpec.state_dim is 0)")
        self.batch_size = batch_size
        self.device = device = torch.device(device)
        self.frame_shape, self.frame_stack = tuple(frame_shape), frame_stack
        self.action_low = np.asarray(action_low, np.float32)
        self.action_high = np.asarray(action_high, np.float32)
        self.amp_dtype = resolve_amp(compute.amp, device)
        if self.amp_dtype == torch.float16:
            raise ValueError("learner.compute.amp fp16 is not supported for pixel envs; use bf16 "
                             "or auto")
        if device.type == "cuda":  # fixed conv shapes: cuDNN picks its fastest kernels once
            torch.backends.cudnn.benchmark = True
        torch.manual_seed(cfg.seed)
        c, h, w = self.frame_shape
        f, hidden = enc.feature_dim, cfg.hidden_sizes
        self.encoder = Encoder(c * frame_stack, (h, w), enc.channels, enc.layers, enc.strided).to(device)
        self.critic_trunk = None if self.privileged else Trunk(self.encoder.repr_dim, f).to(device)
        self.critic = Critic(state_dim if self.privileged else f, action_dim, hidden, 2, 1).to(device)
        self.actor_trunk = Trunk(self.encoder.repr_dim, f).to(device)
        self.actor = Actor(f, action_dim, hidden, action_low, action_high,
                           (cfg.log_std_min, cfg.log_std_max)).to(device)
        self.state_head = torch.nn.Linear(f, state_dim).to(device) if self.privileged else None
        # what the critic's loss trains: the encoder too, unless the critics read the state
        online = (self.critic,) if self.privileged else (self.encoder, self.critic_trunk, self.critic)
        self.target_encoder = (copy.deepcopy(self.encoder).requires_grad_(False)
                               if enc.target_encoder and not self.privileged else None)
        self.target_trunk = (None if self.privileged
                             else copy.deepcopy(self.critic_trunk).requires_grad_(False))
        self.target = copy.deepcopy(self.critic).requires_grad_(False)
        self.log_alpha = torch.tensor(float(np.log(cfg.init_alpha)), device=device,
                                      requires_grad=True)
        self.target_entropy = float(
            cfg.target_entropy if cfg.target_entropy is not None else -action_dim)
        self._critic_params = module_params(*online)
        self._actor_params = module_params(
            *((self.encoder,) if self.privileged else ()), self.actor_trunk, self.actor,
            *((self.state_head,) if self.privileged else ()))
        self.critic_opt = FlatAdam([(self._critic_params, cfg.critic_lr)])
        self.actor_opt = FlatAdam([(self._actor_params, cfg.actor_lr), ([self.log_alpha], cfg.alpha_lr)])
        targets = [m for m in (self.target_encoder, self.target_trunk, self.target) if m is not None]
        self._target_flat = flatten_(module_params(*targets))
        n_enc = 0 if self.privileged else sum(p.numel() for p in self.encoder.parameters())
        tau = torch.full_like(self._target_flat, cfg.tau)
        if self.target_encoder is not None:
            tau[:n_enc] = enc.encoder_tau
            n_enc = 0
        self._tau = tau  # per element: the encoder's step, then the trunk's and the heads'
        # what the target lerps toward: the critic optimizer's flat buffer, from the encoder's
        # parameters on (with a target encoder) or from the trunk's
        self._target_src = self.critic_opt.flat[n_enc:]
        self.modules = tuple(m for m in self.MODULES if getattr(self, m, None) is not None)
        for name in self.PIECES:
            setattr(self, name, getattr(self, name + "_eager"))

    def twin(self) -> PixelSAC:
        """A pixel SAC of this class, config and shapes with fresh weights (the graph's
        background compile, learner/graph/capture.py); the caller's RNG state is kept."""
        return fresh_twin(self.device, lambda: type(self)(
            self.cfg, self.enc, self.compute, self.batch_size, self.frame_shape, self.frame_stack,
            self.actor.action_dim, self.action_low, self.action_high, self.device, self.state_dim))

    def autocast(self):
        if self.amp_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.amp_dtype, cache_enabled=False)

    PIECES = ("_augment", "_encode", "_encode_next", "_actor_pass", "_critic_out", "_target",
              "_actor_loss", "_state_loss")

    def compile(self, mode: str | None = "default") -> None:
        """torch.compile each piece (forward and backward) and both Adams, as SAC.compile."""
        kw = compile_kwargs(mode, self.compute.compile_options)
        for name in self.PIECES:
            setattr(self, name, torch.compile(getattr(self, name + "_eager"), **kw))
        self.critic_opt.compile(**kw)
        self.actor_opt.compile(**kw)

    # ---- the pieces ----
    def _augment_eager(self, pixels: torch.Tensor):
        """[B, 2, S*C, H, W] obs | next stacks -> each image randomly shifted, its own shift (one
        gather) -> (obs, next)."""
        b, two, *chw = pixels.shape
        both = random_shift(pixels.reshape(b * two, *chw), self.enc.augment_pad).view(b, two, *chw)
        return both[:, 0], both[:, 1]

    def _encode_eager(self, pixels):
        with self.autocast():
            return self.encoder(pixels)

    @torch.no_grad()
    def _encode_next_eager(self, pixels):
        """The online features of the next frames (the actor's next actions) and the target
        encoder's (the target critics)."""
        with self.autocast():
            h = self.encoder(pixels)
            return h, (h if self.target_encoder is None else self.target_encoder(pixels))

    def _actor_pass_eager(self, h_pair):
        with self.autocast():
            return self.actor.sample(self.actor_trunk(h_pair))

    def _state_loss_eager(self, h, state):
        """How far the actor trunk's features of the obs frames are from telling its state."""
        with self.autocast():
            pred = self.state_head(self.actor_trunk(h))
        return (pred.float() - state).square().mean()

    # the critics' input `x`: encoder features through their trunk, or the env's state as it is
    def _critic_out_eager(self, x, action):
        with self.autocast():
            return self.critic(x if self.privileged else self.critic_trunk(x), action)

    @torch.no_grad()
    def _target_eager(self, reward, discount, terminated, x_next, next_a, next_logp, alpha):
        with self.autocast():
            nxt = self.target(x_next if self.privileged else self.target_trunk(x_next), next_a)
        return losses.soft_target(reward, discount, terminated, nxt, next_logp, alpha)

    def _actor_loss_eager(self, x, a_pi, logp_pi, alpha):
        with self.autocast():
            if not self.privileged:
                x = self.critic_trunk(x, detach_weights=True)
            q = self.critic(x, a_pi, detach_weights=True)
        return losses.actor_loss(q, logp_pi, alpha)

    # ---- one update ----
    def update(self, replay: FrameReplay) -> torch.Tensor:
        """One step on a uniform batch of `replay`; returns sac.LOSS_NAMES as a tensor."""
        return self.update_on(replay.sample(self.batch_size))

    def update_on(self, b: dict[str, torch.Tensor]) -> torch.Tensor:
        alpha = self.log_alpha.detach().exp()
        obs, nxt = self._augment(b["pixels"])
        h = self._encode(obs)  # trains the encoder: through the critic's loss, or the actor's
        h_next, h_next_t = self._encode_next(nxt)
        h_actor = h if self.privileged else h.detach()
        a_all, logp_all = self._actor_pass(torch.stack([h_actor, h_next], 1))  # obs | next
        a_pi, logp_pi = a_all[:, 0], logp_all[:, 0].float()
        x, x_next = ((b["obs_state"], b["next_state"]) if self.privileged else (h, h_next_t))
        target = self._target(b["reward"], b["discount"], b["terminated"], x_next,
                              a_all[:, 1].detach(), logp_all[:, 1].detach().float(), alpha)
        q = self._critic_out(x, b["action"])
        critic_loss = losses.mse_critic_loss(q, target)
        c_grads = torch.autograd.grad(critic_loss, self._critic_params)
        actor_loss = self._actor_loss(x.detach(), a_pi, logp_pi, alpha)  # the pre-step critic
        own = actor_loss + self._state_loss(h, b["obs_state"]) if self.privileged else actor_loss
        a_grads = torch.autograd.grad(own, self._actor_params)
        alpha_grad = losses.temperature_grad(logp_pi, self.target_entropy)
        self.critic_opt.step(list(c_grads))
        self.actor_opt.step([*a_grads, alpha_grad])
        with torch.no_grad():
            self._target_flat.lerp_(self._target_src, self._tau)
        alpha_loss = alpha.log() * alpha_grad
        return torch.stack([critic_loss.detach(), actor_loss.detach(), alpha_loss, alpha,
                            q.detach().mean(), -logp_pi.detach().mean(), torch.ones_like(alpha)])

    # ---- what the actors get ----
    def wire_tensors(self) -> dict[str, np.ndarray]:
        """The policy by PolicyWeights arch "conv"'s names: conv<i>, trunk, trunk_norm, fc<i>."""
        def arr(t):
            return t.detach().float().cpu().numpy().copy()

        out = {}
        for i, conv in enumerate(self.encoder.convs):
            out[f"conv{i}.weight"], out[f"conv{i}.bias"] = arr(conv.weight), arr(conv.bias)
        trunk = self.actor_trunk
        out["trunk.weight"], out["trunk.bias"] = arr(trunk.linear.weight), arr(trunk.linear.bias)
        out["trunk_norm.weight"], out["trunk_norm.bias"] = arr(trunk.norm.weight), arr(trunk.norm.bias)
        for name, t in self.actor.wire_tensors().items():  # l<i>.weight / l<i>.bias
            out["fc" + name[1:]] = t
        return out

    def policy_weights(self, version: int, averaged: bool = False) -> pb.PolicyWeights:
        """The policy as PolicyWeights arch "conv" (`averaged`: there is no averaged actor here)."""
        return codec.pack_weights(self.wire_tensors(), version, self.cfg.log_std_min,
                                  self.cfg.log_std_max, arch="conv",
                                  conv_strides=self.encoder.strides)

    # ---- state ----
    def state_tensors(self) -> list[torch.Tensor]:
        """Every tensor an update mutates (for graph warm-up rollback)."""
        return [*self.critic_opt.tensors(), *self.actor_opt.tensors(), self._target_flat]

    MODULES = ("encoder", "critic_trunk", "critic", "actor_trunk", "actor", "target_encoder",
               "target_trunk", "target", "state_head")

    def state_dict(self) -> dict:
        return {
            **{name: getattr(self, name).state_dict() for name in self.modules},
            "log_alpha": self.log_alpha.detach().cpu(),
            "actor_opt": self.actor_opt.state_dict(),
            "critic_opt": self.critic_opt.state_dict(),
            "pixels": True,
            "privileged_critic": self.privileged,
        }

    def load_state_dict(self, state: dict) -> None:
        """Load in place (optimizer state replaced: capture graphs after loading)."""
        if not state.get("pixels"):
            raise ValueError("the checkpoint is of a state-env learner; this learner's env is "
                             "from pixels")
        if bool(state.get("privileged_critic")) != self.privileged:
            raise ValueError(f"the checkpoint's critics read "
                             f"{'the state' if state.get('privileged_critic') else 'the frames'}; "
                             f"this learner's have learner.encoder.privileged_critic "
                             f"{str(self.privileged).lower()}")
        if "teacher" in state and "teacher" not in self.modules:
            raise ValueError("the checkpoint's frame actor learned from a teacher; this learner "
                             "has learner.encoder.privileged_teacher false")
        for name in self.modules:
            if name not in state:
                raise ValueError(f"the checkpoint has no {name}: it was trained with another "
                                 f"learner.encoder.target_encoder")
            getattr(self, name).load_state_dict(state[name])
        with torch.no_grad():
            self.log_alpha.copy_(state["log_alpha"])
        self.actor_opt.load_state_dict(state["actor_opt"])
        self.critic_opt.load_state_dict(state["critic_opt"])
