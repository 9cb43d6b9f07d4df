"""The privileged teacher and its frame student (learner/update/pixel_teacher.py): the Gaussians' KL
against torch's, the student learning to act as the teacher does from frames alone, the
teacher's steps reading no frame, the frame replay's state-only batch against its full one, the
checkpoint refused by a learner of the other kind, and the config refusing a teacher without
privileged critics."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from pydantic import ValidationError

from herd.learner.build import build_update
from herd.learner.config import LearnerConfig
from herd.learner.replay.frames import FrameReplay
from herd.learner.update.pixel_sac import PixelSAC
from herd.learner.update.pixel_teacher import STATE_KEYS, TeacherPixelSAC, gaussian_kl
from herd.proto import codec
from tests.pixels import DRQ_STEPS

SHAPE, DIM, ACT = (3, 16, 16), 5, 2


def teacher_cfg(**kw):
    return LearnerConfig.flat(feature_dim=8, channels=4, hidden_sizes=(16,), batch_size=6,
                              privileged_critic=True, privileged_teacher=True, **DRQ_STEPS, **kw)


def make(cfg) -> PixelSAC:
    spec = codec.spec_to_proto("toy", SHAPE, "uint8", (ACT,), [-1] * ACT, [1] * ACT, frame_stack=3,
                               state_dim=DIM)
    return build_update(cfg, spec, "cpu")


def batch(seed=0, n=6) -> dict:
    g = torch.Generator().manual_seed(seed)
    return {"pixels": torch.randint(0, 256, (n, 2, 9, 16, 16), dtype=torch.uint8, generator=g),
            "obs_state": torch.randn(n, DIM, generator=g), "next_state": torch.randn(n, DIM, generator=g),
            "action": torch.rand(n, ACT, generator=g) * 2 - 1, "reward": torch.randn(n, generator=g),
            "terminated": torch.zeros(n), "discount": torch.full((n,), 0.99)}


def test_gaussian_kl_is_torchs():
    g = torch.Generator().manual_seed(1)
    mp, mq, lp, lq = (torch.randn(7, 3, generator=g) for _ in range(4))
    want = torch.distributions.kl_divergence(torch.distributions.Normal(mp, lp.exp()),
                                             torch.distributions.Normal(mq, lq.exp())).sum(-1)
    torch.testing.assert_close(gaussian_kl(mp, lp, mq, lq), want)
    assert float(gaussian_kl(mp, lp, mp, lp).abs().max()) < 1e-6


def test_the_student_learns_to_act_as_the_teacher_from_frames():
    sac = make(teacher_cfg())
    assert isinstance(sac, TeacherPixelSAC) and sac.critic.obs_dim == DIM
    b = batch()

    def kl():
        with torch.no_grad():
            return float(sac._student_loss(sac._encode(b["pixels"][:, 0]), b["obs_state"])[0])

    teacher0 = [p.detach().clone() for p in sac.teacher.parameters()]
    enc0 = [p.detach().clone() for p in sac.encoder.parameters()]
    head_t0 = sac.target.head.weight.detach().clone()
    kl0 = kl()
    out = sac.update_on(b)
    assert out.shape == (7,) and torch.isfinite(out).all()
    assert all(not torch.equal(p, p0) for p, p0 in zip(sac.teacher.parameters(), teacher0))
    assert all(not torch.equal(p, p0) for p, p0 in zip(sac.encoder.parameters(), enc0))
    head = sac.critic.head.weight.detach()
    torch.testing.assert_close(sac.target.head.weight, head_t0 + 0.01 * (head - head_t0))
    for _ in range(80):
        sac.update_on(b)
    assert kl() < 0.3 * kl0  # the student's Gaussian on the frames closes on the teacher's


def test_teacher_steps_read_no_frame_and_move_the_critics_and_the_teacher():
    sac = make(teacher_cfg())
    states = {k: v for k, v in batch().items() if k in STATE_KEYS}
    enc0 = [p.detach().clone() for p in sac.encoder.parameters()]
    q0 = [p.detach().clone() for p in sac.critic.parameters()]
    t0 = [p.detach().clone() for p in sac.teacher.parameters()]
    sac._teacher_step(states)
    assert all(torch.equal(p, p0) for p, p0 in zip(sac.encoder.parameters(), enc0))
    assert all(not torch.equal(p, p0) for p, p0 in zip(sac.critic.parameters(), q0))
    assert all(not torch.equal(p, p0) for p, p0 in zip(sac.teacher.parameters(), t0))


def filled_replay() -> FrameReplay:
    """40 frames of one actor with their states, 39 rows between them."""
    replay = FrameReplay(1_000, SHAPE, 3, ACT, "cpu", state_dim=DIM)
    rng, n = np.random.default_rng(0), 40
    replay.insert({"frames": rng.integers(0, 256, (n, *SHAPE), dtype=np.uint8),
                   "frame_prev": np.arange(-1, n - 1), "first_frame": np.int64(0),
                   "frame_state": rng.normal(size=(n, DIM)).astype(np.float32),
                   "obs_frame": np.arange(n - 1), "next_frame": np.arange(1, n),
                   "action": rng.uniform(-1, 1, (n - 1, ACT)).astype(np.float32),
                   "reward": rng.normal(size=n - 1).astype(np.float32),
                   "terminated": np.zeros(n - 1, np.uint8), "actor_id": np.str_("a"),
                   "incarnation": np.uint64(1)})
    return replay


def test_a_state_batch_is_the_full_batchs_rows_without_frames():
    replay = filled_replay()
    torch.manual_seed(4)
    states = replay.sample_state(32)
    torch.manual_seed(4)
    full = replay.sample(32)
    assert set(states) == set(STATE_KEYS)
    for k in STATE_KEYS:
        torch.testing.assert_close(states[k], full[k])


def test_update_takes_teacher_updates_state_batches_and_one_frame_batch():
    replay = filled_replay()
    sac = make(teacher_cfg(teacher_updates=3))
    calls = {"sample": 0, "sample_state": 0}
    for name in calls:
        real = getattr(replay, name)

        def counted(n, real=real, name=name):
            calls[name] += 1
            return real(n)
        setattr(replay, name, counted)
    assert torch.isfinite(sac.update(replay)).all()
    assert calls == {"sample": 1, "sample_state": 2}


def test_checkpoints_are_refused_by_the_other_kind_and_weights_are_the_frame_actors():
    cfg = teacher_cfg()
    sac = make(cfg)
    sac.update_on(batch())
    other = make(cfg)
    other.load_state_dict(sac.state_dict())
    np.testing.assert_array_equal(other.policy_weights(1).tensors[0].data,
                                  sac.policy_weights(1).tensors[0].data)
    plain_cfg = LearnerConfig.flat(feature_dim=8, channels=4, hidden_sizes=(16,), batch_size=6,
                                   privileged_critic=True, **DRQ_STEPS)
    plain = make(plain_cfg)
    assert type(plain) is PixelSAC
    assert {k: v.shape for k, v in sac.wire_tensors().items()} == \
        {k: v.shape for k, v in plain.wire_tensors().items()}
    with pytest.raises(ValueError, match="learned from a teacher"):
        plain.load_state_dict(sac.state_dict())
    with pytest.raises(ValueError, match="no teacher"):
        other.load_state_dict(plain.state_dict())
    assert type(sac.twin()) is TeacherPixelSAC


def test_a_teacher_needs_privileged_critics():
    with pytest.raises((ValidationError, ValueError), match="privileged_teacher needs privileged_critic"):
        LearnerConfig.flat(privileged_teacher=True)
