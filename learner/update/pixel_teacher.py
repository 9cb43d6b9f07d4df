"""A privileged teacher and its frame student (learner.encoder.privileged_teacher): SAC on the
env's state, and a camera policy that learns to act as it does.

    teacher steps (encoder.teacher_updates of them per update, each on its own batch of rows,
    no frame read):
        critic:  twin Q(obs state, action) <- soft Bellman with the teacher's next action on the
                 next state (losses.py), target critics by Polyak as PixelSAC's
        teacher: tanh-Gaussian on the obs state, SAC's actor loss against the critics; the
                 temperature follows the teacher's entropy
    student step (one per update, on a batch of frames):
        encoder(obs frames, shifted) -> actor trunk -> tanh-Gaussian, the published policy:
        KL(teacher(obs state) || student(frames)) of the Gaussians before the tanh, plus the
        state head's error (PixelSAC's), trains the encoder, the trunk and the head

The actors act with the student; the teacher learns off-policy from what they send, as a state
job's actor does, and labels every row it is trained on: the student is taught on the states
its own behaviour reaches (DAgger's setting; Chen et al. 2019, "Learning by Cheating"; Lee et
al. 2020, "Learning quadrupedal locomotion over challenging terrain"). Against PixelSAC's
privileged critic, where the frame actor learns from dQ/da alone: every row hands the student a
whole action distribution to match, the critics' steps read no frame (several per update cost
less than one conv pass), and the student's step needs the obs frames only.

Fixed shapes and no host reads, as PixelSAC.update: learner/graph/capture.py captures it as one graph.
"""

from __future__ import annotations

import torch

from herd.learner.update import losses
from herd.learner.update.flat_adam import FlatAdam, module_params
from herd.learner.update.networks import Actor
from herd.learner.update.pixel_sac import PixelSAC
from herd.learner.update.sac import compile_kwargs

STATE_KEYS = ("obs_state", "next_state", "action", "reward", "terminated", "discount")


def gaussian_kl(mean_p, log_std_p, mean_q, log_std_q):
    """KL(p || q) of diagonal Gaussians, summed over the last dimension."""
    var_ratio = (2 * (log_std_p - log_std_q)).exp()
    gap = ((mean_p - mean_q) / log_std_q.exp()).square()
    return (0.5 * (var_ratio + gap - 1) - (log_std_p - log_std_q)).sum(-1)


class TeacherPixelSAC(PixelSAC):
    MODULES = (*PixelSAC.MODULES, "teacher")
    PIECES = (*PixelSAC.PIECES, "_teacher_step", "_student_loss")

    def __init__(self, cfg, enc, compute, batch_size, frame_shape, frame_stack, action_dim,
                 action_low, action_high, device, state_dim: int = 0):
        super().__init__(cfg, enc, compute, batch_size, frame_shape, frame_stack, action_dim,
                         action_low, action_high, device, state_dim)
        self.teacher = Actor(state_dim, action_dim, cfg.hidden_sizes, action_low,
                             action_high, (cfg.log_std_min, cfg.log_std_max)).to(self.device)
        # the student's own step: encoder, trunk, actor, state head (the temperature is the
        # teacher's); the teacher's step: the teacher and the temperature
        self.actor_opt = FlatAdam([(self._actor_params, cfg.actor_lr)])
        self.teacher_opt = FlatAdam([(module_params(self.teacher), cfg.actor_lr),
                                     ([self.log_alpha], cfg.alpha_lr)])
        self.modules = tuple(m for m in self.MODULES if getattr(self, m, None) is not None)

    def compile(self, mode: str | None = "default") -> None:
        super().compile(mode)
        self.teacher_opt.compile(**compile_kwargs(mode, self.compute.compile_options))

    # ---- the pieces ----
    def _teacher_step_eager(self, b: dict[str, torch.Tensor]):
        """One critic step and one teacher step on `b`'s states; returns (critic loss, teacher
        loss, alpha, mean Q, teacher entropy, alpha's gradient)."""
        alpha = self.log_alpha.detach().exp()
        s, s_next = b["obs_state"], b["next_state"]
        with self.autocast():
            a_pair, logp_pair = self.teacher.sample(torch.stack([s, s_next], 1))
        a_pi, logp_pi = a_pair[:, 0], logp_pair[:, 0].float()
        target = self._target(b["reward"], b["discount"], b["terminated"], s_next,
                              a_pair[:, 1].detach(), logp_pair[:, 1].detach().float(), alpha)
        q = self._critic_out(s, b["action"])
        critic_loss = losses.mse_critic_loss(q, target)
        c_grads = torch.autograd.grad(critic_loss, self._critic_params)
        teacher_loss = self._actor_loss(s, a_pi, logp_pi, alpha)  # the pre-step critic
        t_grads = torch.autograd.grad(teacher_loss, list(self.teacher.parameters()))
        alpha_grad = losses.temperature_grad(logp_pi, self.target_entropy)
        self.critic_opt.step(list(c_grads))
        self.teacher_opt.step([*t_grads, alpha_grad])
        with torch.no_grad():
            self._target_flat.lerp_(self._target_src, self._tau)
        return critic_loss.detach(), teacher_loss.detach(), alpha, q.detach().mean(), \
            -logp_pi.detach().mean(), alpha_grad

    def _student_loss_eager(self, h, state):
        """KL of the teacher's Gaussian on the state from the student's on the frames, and the
        state head's error."""
        with torch.no_grad(), self.autocast():
            t_mean, t_log_std = self.teacher(state)
        with self.autocast():
            feats = self.actor_trunk(h)
            s_mean, s_log_std = self.actor(feats)
            pred = self.state_head(feats)
        kl = gaussian_kl(t_mean.float(), t_log_std.float(), s_mean.float(), s_log_std.float())
        return kl.mean(), (pred.float() - state).square().mean()

    # ---- one update ----
    def update(self, replay) -> torch.Tensor:
        """`teacher_updates` teacher steps, each on its own batch of states, then one student
        step on a batch of frames; returns sac.LOSS_NAMES as a tensor."""
        for _ in range(self.enc.teacher_updates - 1):
            self._teacher_step(replay.sample_state(self.batch_size))
        return self.update_on(replay.sample(self.batch_size))

    def update_on(self, b: dict[str, torch.Tensor]) -> torch.Tensor:
        critic_loss, _, alpha, q_mean, entropy, alpha_grad = self._teacher_step(
            {k: b[k] for k in STATE_KEYS})
        obs, _ = self._augment(b["pixels"])
        kl, state_err = self._student_loss(self._encode(obs), b["obs_state"])
        grads = torch.autograd.grad(kl + state_err, self._actor_params)
        self.actor_opt.step(list(grads))
        alpha_loss = alpha.log() * alpha_grad
        return torch.stack([critic_loss, kl.detach(), alpha_loss, alpha, q_mean, entropy,
                            torch.ones_like(alpha)])

    # ---- state ----
    def state_tensors(self) -> list[torch.Tensor]:
        return [*super().state_tensors(), *self.teacher_opt.tensors()]

    def state_dict(self) -> dict:
        return {**super().state_dict(), "teacher_opt": self.teacher_opt.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        if "teacher" not in state:
            raise ValueError("the checkpoint has no teacher: it was trained with "
                             "learner.encoder.privileged_teacher false")
        super().load_state_dict(state)
        self.teacher_opt.load_state_dict(state["teacher_opt"])
