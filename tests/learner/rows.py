"""Transitions for the learner tests: id-tagged rows (a torn or lost row shows) and random ones."""

import numpy as np


def tagged_rows(ids: np.ndarray, obs_dim: int, act_dim: int) -> dict[str, np.ndarray]:
    """Row i: obs = i, next_obs = i + 0.5, action = i + 0.25, reward = 2i, terminated = i % 2."""
    f = ids.astype(np.float32)[:, None]
    return {
        "obs": np.repeat(f, obs_dim, 1),
        "next_obs": np.repeat(f + 0.5, obs_dim, 1),
        "action": np.repeat(f + 0.25, act_dim, 1),
        "reward": f[:, 0] * 2,
        "terminated": (ids % 2).astype(np.uint8),
    }


def random_rows(n: int, obs_dim: int, act_dim: int, bound: float, p_term: float,
                seed: int) -> dict[str, np.ndarray]:
    """n random transitions: normal obs and rewards, uniform actions in [-bound, bound]."""
    g = np.random.default_rng(seed)
    return {
        "obs": g.normal(size=(n, obs_dim)), "next_obs": g.normal(size=(n, obs_dim)),
        "action": g.uniform(-bound, bound, size=(n, act_dim)), "reward": g.normal(size=n),
        "terminated": (g.random(n) < p_term).astype(np.uint8),
    }
