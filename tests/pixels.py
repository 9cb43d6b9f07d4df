"""The pixel tests' shared parts: conv policies (PolicyWeights tensors in herd.proto's "conv"
layout), a pixel job's run folder, and the step sizes the pixel configs train with."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import yaml

from herd.proto import codec

DRQ_STEPS = dict(actor_lr=1e-3, critic_lr=1e-3, alpha_lr=1e-3, tau=0.01, init_alpha=0.1)
"""learner.algorithm's step sizes, target step and initial temperature of the pixel configs
(configs/*pixels*.yaml, DrQ's): the pixel update's tests train with them."""


def conv_weights(rng, in_ch, size, channels=(8, 8), strides=(2, 1), feature=16, hidden=32, act=2):
    """Tensors of a small conv policy for [in_ch, size, size] input, in the contract's names."""
    t, c, h = {}, in_ch, size
    for i, (out, s) in enumerate(zip(channels, strides)):
        t[f"conv{i}.weight"] = rng.normal(0, 0.3, (out, c, 3, 3)).astype(np.float32)
        t[f"conv{i}.bias"] = rng.normal(0, 0.1, out).astype(np.float32)
        c, h = out, (h - 3) // s + 1
    t["trunk.weight"] = rng.normal(0, 0.05, (feature, c * h * h)).astype(np.float32)
    t["trunk.bias"] = rng.normal(0, 0.1, feature).astype(np.float32)
    t["trunk_norm.weight"] = rng.normal(1, 0.1, feature).astype(np.float32)
    t["trunk_norm.bias"] = rng.normal(0, 0.1, feature).astype(np.float32)
    for i, (a, b) in enumerate([(feature, hidden), (hidden, hidden), (hidden, 2 * act)]):
        t[f"fc{i}.weight"] = rng.normal(0, 0.3, (b, a)).astype(np.float32)
        t[f"fc{i}.bias"] = rng.normal(0, 0.1, b).astype(np.float32)
    return t


def pixel_run(folder: Path, env: dict, seed: int = 0, act: int = 1):
    """runs/JOB of a pixel job as far as load_policy and export read it (config.yaml and
    best_policy.pb of a small conv policy for env's 3 stacked 32x32 frames): (folder, weights)."""
    weights = codec.pack_weights(conv_weights(np.random.default_rng(seed), 9, 32, act=act), 5, -10.0, 2.0,
                                 arch="conv", conv_strides=(2, 1))
    folder.mkdir(parents=True)
    (folder / "config.yaml").write_text(yaml.safe_dump({"env": env}))
    (folder / "best_policy.pb").write_bytes(weights.SerializeToString())
    return folder, weights
