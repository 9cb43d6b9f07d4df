"""CPU cost of acting from pixels: the actors' conv policy (herd.actors.policy, arch "conv") on
stacked uint8 frames, batched over an actor's envs, on one thread as in an actor.

The network is DrQ-v2's actor at its published sizes (4 conv 3x3 layers of 32 channels, the
first of stride 2, a trunk of 50 features, two hidden layers of 1024) with random weights:
the cost does not depend on their values. ms per frame = one act() call / envs, median of
--repeats timings of --n calls each.

    python bench/pixel_policy.py [--size 84] [--stack 3] [--envs 1 4 16]

Writes bench/results/pixel-policy-<machine>.json.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # actors/, not bench/actors.py

import numpy as np

from bench.common import console, header, median_seconds, timing_flags, write_results
from herd.actors.policy import MLPPolicy
from herd.proto import codec


def drqv2_actor(rng, size: int, in_ch: int, action_dim: int, hidden: int = 1024, feature: int = 50,
                channels: int = 32) -> tuple[dict, tuple]:
    """DrQ-v2's actor layout as "conv" PolicyWeights tensors, and its conv strides."""
    t, c, h, strides = {}, in_ch, size, (2, 1, 1, 1)
    for i, s in enumerate(strides):
        t[f"conv{i}.weight"] = rng.normal(0, 0.05, (channels, c, 3, 3)).astype(np.float32)
        t[f"conv{i}.bias"] = np.zeros(channels, np.float32)
        c, h = channels, (h - 3) // s + 1
    t["trunk.weight"] = rng.normal(0, 0.01, (feature, c * h * h)).astype(np.float32)
    t["trunk.bias"] = np.zeros(feature, np.float32)
    t["trunk_norm.weight"], t["trunk_norm.bias"] = np.ones(feature, np.float32), np.zeros(feature, np.float32)
    for i, (a, b) in enumerate([(feature, hidden), (hidden, hidden), (hidden, 2 * action_dim)]):
        t[f"fc{i}.weight"] = rng.normal(0, 0.03, (b, a)).astype(np.float32)
        t[f"fc{i}.bias"] = np.zeros(b, np.float32)
    return t, strides


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=84)
    ap.add_argument("--stack", type=int, default=3)
    ap.add_argument("--envs", type=int, nargs="+", default=[1, 4, 16])
    ap.add_argument("--action-dim", type=int, default=6, help="walker's and cheetah's")
    timing_flags(ap, n=20)
    args = ap.parse_args(argv)
    info = header("Pixel policy on the CPU (one thread)")
    rng = np.random.default_rng(0)
    tensors, strides = drqv2_actor(rng, args.size, 3 * args.stack, args.action_dim)
    msg = codec.pack_weights(tensors, 1, -10.0, 2.0, arch="conv", conv_strides=strides)
    low, high = -np.ones(args.action_dim, np.float32), np.ones(args.action_dim, np.float32)
    policy = MLPPolicy(msg, low, high)
    records = []
    for envs in args.envs:
        obs = rng.integers(0, 256, (envs, 3 * args.stack, args.size, args.size), dtype=np.uint8)
        ms = median_seconds(lambda obs=obs: policy.act(obs), args.n, args.repeats) / envs * 1e3
        records.append({**info, "size": args.size, "stack": args.stack, "envs": envs,
                        "ms_per_frame": round(ms, 3), "ms_per_call": round(ms * envs, 3)})
        console.print(f"  {args.size}x{args.size} stack {args.stack}, {envs:>3} envs: "
                      f"{ms:.2f} ms per frame ({ms * envs:.1f} ms per call)")
    write_results("pixel-policy", records, args.out)
    return records


if __name__ == "__main__":
    main()
