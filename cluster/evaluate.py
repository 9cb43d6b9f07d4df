"""Deterministic evaluation of a published policy on fresh envs (no exploration noise)."""

from __future__ import annotations

import numpy as np

from actors.config import EnvConfig
from actors.envs import describe, make_env
from actors.policy import MLPPolicy


def evaluate(env_cfg: EnvConfig, weights, episodes: int, seed: int = 10_000) -> dict:
    """Mean/min/max return and mean length of `episodes` deterministic episodes."""
    env = make_env(env_cfg)
    d = describe(env)
    policy = MLPPolicy(weights, d["action_low"], d["action_high"])
    returns, lengths = [], []
    for ep in range(episodes):
        obs, _ = env.reset(seed=seed + ep)
        done, total, steps = False, 0.0, 0
        while not done:
            action = policy.act(np.asarray(obs, np.float32).ravel()[None], deterministic=True)[0]
            obs, r, term, trunc, _ = env.step(action)
            total += float(r)
            steps += 1
            done = term or trunc
        returns.append(total)
        lengths.append(steps)
    env.close()
    return {
        "policy_version": weights.version,
        "mean_return": float(np.mean(returns)),
        "min_return": float(np.min(returns)),
        "max_return": float(np.max(returns)),
        "mean_length": float(np.mean(lengths)),
        "episodes": episodes,
    }
