"""The "conv" PolicyWeights layout on the actors' CPU policy against a plain numpy reference of
herd.proto's description (stacked uint8 frames / 255 - 0.5, 3x3 convolutions with their
strides and ReLU, trunk, LayerNorm, tanh, fc layers)."""

import numpy as np
import pytest

from herd.actors.policy import MLPPolicy, PolicyNet
from herd.proto import codec
from tests.pixels import conv_weights


def reference(t: dict, strides, frames: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One stacked observation [S*C, H, W] uint8 -> (mean, log_std), loops written out."""
    x = frames.astype(np.float64) / 255.0 - 0.5
    for i, s in enumerate(strides):
        w, b = t[f"conv{i}.weight"].astype(np.float64), t[f"conv{i}.bias"]
        ho, wo = (x.shape[1] - 3) // s + 1, (x.shape[2] - 3) // s + 1
        y = np.zeros((w.shape[0], ho, wo))
        for r in range(ho):
            for q in range(wo):
                patch = x[:, r * s:r * s + 3, q * s:q * s + 3]
                y[:, r, q] = (w * patch).sum(axis=(1, 2, 3)) + b
        x = np.maximum(y, 0)
    h = t["trunk.weight"] @ x.ravel() + t["trunk.bias"]
    h = (h - h.mean()) / np.sqrt(h.var() + 1e-5) * t["trunk_norm.weight"] + t["trunk_norm.bias"]
    h = np.tanh(h)
    n_fc = sum(1 for k in t if k.startswith("fc") and k.endswith(".weight"))
    for i in range(n_fc):
        h = t[f"fc{i}.weight"] @ h + t[f"fc{i}.bias"]
        if i < n_fc - 1:
            h = np.maximum(h, 0)
    return h[: len(h) // 2], h[len(h) // 2:]


def test_conv_policy_matches_the_reference():
    rng = np.random.default_rng(0)
    strides = (2, 1)
    t = conv_weights(rng, in_ch=9, size=20)
    msg = codec.pack_weights(t, 7, -10.0, 2.0, arch="conv", conv_strides=strides)
    net = PolicyNet(msg)
    obs = rng.integers(0, 256, (4, 9, 20, 20), dtype=np.uint8)
    import torch

    mean, log_std = net(torch.from_numpy(obs))
    for i in range(len(obs)):
        m, ls = reference(t, strides, obs[i])
        np.testing.assert_allclose(mean[i].detach().numpy(), m, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(log_std[i].detach().numpy(), ls, rtol=1e-4, atol=1e-4)
    low, high = np.array([-1.0, 0.0], np.float32), np.array([1.0, 2.0], np.float32)
    policy = MLPPolicy(msg, low, high)
    assert policy.arch == "conv" and policy.version == 7
    act = policy.act(obs, deterministic=True)
    np.testing.assert_allclose(act, np.tanh(mean.detach().numpy()) * [1, 1] + [0, 1], rtol=1e-5, atol=1e-6)
    noisy = policy.act(obs, generator=torch.Generator().manual_seed(0))
    assert noisy.shape == (4, 2) and np.all(noisy >= low) and np.all(noisy <= high)
    assert not np.allclose(noisy, act)


def test_84x84_stack_of_3_gives_one_action_per_env():
    rng = np.random.default_rng(1)
    t = conv_weights(rng, in_ch=9, size=84, channels=(32, 32, 32, 32), strides=(2, 1, 1, 1), feature=50)
    msg = codec.pack_weights(t, 1, -10.0, 2.0, arch="conv", conv_strides=(2, 1, 1, 1))
    policy = MLPPolicy(msg, -np.ones(2, np.float32), np.ones(2, np.float32))
    out = policy.act(rng.integers(0, 256, (3, 9, 84, 84), dtype=np.uint8), deterministic=True)
    assert out.shape == (3, 2) and np.all(np.abs(out) <= 1)


@pytest.mark.parametrize("drop, why", [("trunk.weight", "lack tensor"), ("strides", "one stride per conv")])
def test_malformed_conv_weights_say_what_is_wrong(drop, why):
    t = conv_weights(np.random.default_rng(2), in_ch=9, size=20)
    strides = (2,) if drop == "strides" else (2, 1)
    t.pop(drop, None)
    with pytest.raises(ValueError, match=why):
        PolicyNet(codec.pack_weights(t, 1, -10.0, 2.0, arch="conv", conv_strides=strides))
