"""The pixel networks' parts: random shift against pad-and-crop written plainly, the encoder's
shapes, and one pixel SAC update: the critic's loss moves the encoder, the targets follow by
their own Polyak steps."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from herd.learner.config import LearnerConfig
from herd.learner.update.encoder import Encoder, random_shift
from herd.learner.update.pixel_sac import PixelSAC
from tests.pixels import DRQ_STEPS


def small_cfg(**kw) -> LearnerConfig:
    """A small pixel update's config at the pixel configs' step sizes."""
    return LearnerConfig.flat(feature_dim=8, channels=4, hidden_sizes=(16,), batch_size=6, **DRQ_STEPS, **kw)


def small_sac(cfg: LearnerConfig, state_dim: int = 0) -> PixelSAC:
    """PixelSAC of `cfg` on 3 stacked 16x16 RGB frames, 2 actions, on the CPU."""
    return PixelSAC(cfg.algorithm, cfg.encoder, cfg.compute, cfg.replay.batch_size, (3, 16, 16), 3, 2,
                    [-1, -1], [1, 1], "cpu", state_dim)


def test_random_shift_is_a_replicate_pad_and_a_random_crop():
    torch.manual_seed(3)
    x = torch.randint(0, 256, (64, 3, 10, 12), dtype=torch.uint8)
    pad = 2
    state = torch.get_rng_state()
    got = random_shift(x, pad)
    torch.set_rng_state(state)  # the same draw, read back for the reference
    shift = torch.randint(0, 2 * pad + 1, (64, 2, 1)) - pad
    padded = F.pad(x.float(), (pad, pad, pad, pad), mode="replicate").to(torch.uint8)
    for i in range(64):
        dy, dx = int(shift[i, 0]) + pad, int(shift[i, 1]) + pad
        assert torch.equal(got[i], padded[i, :, dy : dy + 10, dx : dx + 12])
    assert len({tuple(s.ravel().tolist()) for s in shift}) > 10  # shifts per sample
    assert random_shift(x, 0) is x


def test_encoder_shapes():
    enc = Encoder(9, (84, 84))
    assert enc.out_hw == (35, 35) and enc.repr_dim == 32 * 35 * 35
    assert enc(torch.zeros(2, 9, 84, 84, dtype=torch.uint8)).shape == (2, enc.repr_dim)
    with pytest.raises(ValueError, match="too small"):
        Encoder(9, (8, 8))


def test_one_update_trains_the_encoder_through_the_critic():
    cfg = small_cfg()
    sac = small_sac(cfg)
    g = torch.Generator().manual_seed(0)
    batch = {"pixels": torch.randint(0, 256, (6, 2, 9, 16, 16), dtype=torch.uint8, generator=g),
             "action": torch.rand(6, 2, generator=g) * 2 - 1, "reward": torch.randn(6, generator=g),
             "terminated": torch.zeros(6), "discount": torch.full((6,), 0.99)}
    enc0 = [p.detach().clone() for p in sac.encoder.parameters()]
    target0 = [p.detach().clone() for p in sac.target_encoder.parameters()]
    trunk_t0 = sac.target_trunk.linear.weight.detach().clone()
    out = sac.update_on(batch)
    assert out.shape == (7,) and torch.isfinite(out).all()
    for p, p0, t, t0 in zip(sac.encoder.parameters(), enc0, sac.target_encoder.parameters(), target0):
        assert not torch.equal(p, p0)  # the critic's loss reached the encoder
        # the target encoder moved by encoder_tau toward the new weights
        torch.testing.assert_close(t, t0 + 0.05 * (p.detach() - t0))
    trunk = sac.critic_trunk.linear.weight.detach()
    torch.testing.assert_close(sac.target_trunk.linear.weight, trunk_t0 + 0.01 * (trunk - trunk_t0))
    state = sac.state_dict()
    other = small_sac(cfg)
    other.load_state_dict(state)
    np.testing.assert_array_equal(other.policy_weights(1).tensors[0].data,
                                  sac.policy_weights(1).tensors[0].data)


def test_without_a_target_encoder_the_targets_read_the_online_features():
    cfg = small_cfg(target_encoder=False)
    sac = small_sac(cfg)
    assert sac.target_encoder is None and "target_encoder" not in sac.state_dict()
    g = torch.Generator().manual_seed(1)
    batch = {"pixels": torch.randint(0, 256, (6, 2, 9, 16, 16), dtype=torch.uint8, generator=g),
             "action": torch.rand(6, 2, generator=g) * 2 - 1, "reward": torch.randn(6, generator=g),
             "terminated": torch.zeros(6), "discount": torch.full((6,), 0.99)}
    head_t0 = sac.target.head.weight.detach().clone()
    assert torch.isfinite(sac.update_on(batch)).all()
    head = sac.critic.head.weight.detach()
    torch.testing.assert_close(sac.target.head.weight, head_t0 + 0.01 * (head - head_t0))
    with_target = small_cfg()
    other = small_sac(with_target)
    with pytest.raises(ValueError, match="target_encoder"):
        other.load_state_dict(sac.state_dict())


def test_privileged_critics_read_the_state_and_the_actor_trains_the_encoder():
    """The critics read the state; the actor's loss and a head reading the state back from the
    actor trunk's features train the encoder; the published policy is the symmetric one's."""
    cfg = small_cfg(privileged_critic=True)
    sac = small_sac(cfg, state_dim=5)
    assert sac.critic_trunk is None and sac.target_encoder is None and sac.target_trunk is None
    assert sac.critic.obs_dim == 5
    g = torch.Generator().manual_seed(2)
    batch = {"pixels": torch.randint(0, 256, (6, 2, 9, 16, 16), dtype=torch.uint8, generator=g),
             "obs_state": torch.randn(6, 5, generator=g), "next_state": torch.randn(6, 5, generator=g),
             "action": torch.rand(6, 2, generator=g) * 2 - 1, "reward": torch.randn(6, generator=g),
             "terminated": torch.zeros(6), "discount": torch.full((6,), 0.99)}

    def state_loss():
        with torch.no_grad():
            return float(sac._state_loss(sac._encode(batch["pixels"][:, 0]), batch["obs_state"]))

    enc0 = [p.detach().clone() for p in sac.encoder.parameters()]
    head_t0 = sac.target.head.weight.detach().clone()
    state_loss0 = state_loss()
    assert torch.isfinite(sac.update_on(batch)).all()
    for p, p0 in zip(sac.encoder.parameters(), enc0):
        assert not torch.equal(p, p0)  # the actor's loss and the state head's reached the encoder
    head = sac.critic.head.weight.detach()
    torch.testing.assert_close(sac.target.head.weight, head_t0 + 0.01 * (head - head_t0))
    for _ in range(60):  # the features learn to tell the state
        sac.update_on(batch)
    assert state_loss() < 0.8 * state_loss0
    # the critics' Q reads the state: other frames leave it, another state moves it
    q = sac._critic_out(batch["obs_state"], batch["action"])
    torch.testing.assert_close(sac._critic_out(batch["obs_state"].clone(), batch["action"]), q)
    assert not torch.equal(sac._critic_out(batch["next_state"], batch["action"]), q)
    # the published policy reads frames alone, named and shaped as a symmetric learner's
    plain = small_cfg()
    sym = small_sac(plain)
    assert {k: v.shape for k, v in sac.wire_tensors().items()} == \
        {k: v.shape for k, v in sym.wire_tensors().items()}
    other = small_sac(cfg, state_dim=5)
    other.load_state_dict(sac.state_dict())
    np.testing.assert_array_equal(other.policy_weights(1).tensors[0].data,
                                  sac.policy_weights(1).tensors[0].data)
    with pytest.raises(ValueError, match="privileged_critic"):
        sym.load_state_dict(sac.state_dict())
    with pytest.raises(ValueError, match="no state"):
        small_sac(cfg)


def test_padded_first_conv_is_the_same_convolution():
    """The CUDA path pads 9 input channels to 16 with zero weights for the extra ones: the same
    features and the same gradients as the plain convolution (forced on the CPU here)."""
    torch.manual_seed(0)
    enc = Encoder(9, (20, 20), channels=8, layers=2)
    x = torch.randint(0, 256, (4, 9, 20, 20), dtype=torch.uint8)
    plain = enc(x, pad_to=1)
    g_plain = torch.autograd.grad(plain.square().sum(), enc.convs[0].weight)[0]
    padded = enc(x, pad_to=8)
    g_padded = torch.autograd.grad(padded.square().sum(), enc.convs[0].weight)[0]
    torch.testing.assert_close(padded, plain)
    assert g_padded.shape == (8, 9, 3, 3)
    torch.testing.assert_close(g_padded, g_plain)


def test_strided_layers_reach_the_wire_and_the_actors_policy():
    """encoder.strided 2: the first two convs of stride 2; the published PolicyWeights carry the
    strides, and the actors' conv policy built from them acts as the learner's actor does."""
    from herd.actors.policy import PolicyNet

    cfg = small_cfg(strided=2, layers=3)
    sac = small_sac(cfg)
    assert sac.encoder.strides == [2, 2, 1] and sac.encoder.out_hw == (1, 1)
    msg = sac.policy_weights(3)
    assert list(msg.conv_strides) == [2, 2, 1]
    x = torch.randint(0, 256, (4, 9, 16, 16), dtype=torch.uint8)
    with torch.no_grad():
        want, _ = sac.actor(sac.actor_trunk(sac.encoder(x)))
        got, _ = PolicyNet(msg)(x)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="strided 5 is more than the 4 conv layers"):
        small_cfg(strided=5)
