"""Transitions whose every column carries the row's id, so a torn or lost row shows."""

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
