"""n-step rows from E envs stepped in lockstep: where the order of steps is known.

Each env keeps its last n one-step rows. A row leaves once it has n successors' rewards:
reward = r_t + g r_(t+1) + ... + g^(n-1) r_(t+n-1), next_obs = the obs n steps on,
discount = g^n. When an episode ends, every pending row of that env leaves at once with the
rewards up to the end: discount g^k for its k steps, `terminated` as the last step's (a true
termination does not bootstrap; a truncation bootstraps from the final observation). Every
env step becomes exactly one row, so the books (steps = transitions) stay exact.
"""

from __future__ import annotations

import numpy as np


def transition_rows(n: int, obs_dim: int, act_dim: int, discount: bool = False,
                    obs_dtype=np.float32) -> dict[str, np.ndarray]:
    """Preallocated row-aligned arrays for n transitions (proto TransitionBatch's fields), the
    rows NStep writes; `obs_dtype` int64 with obs_dim 1 where a row's obs are frame numbers."""
    out = {
        "obs": np.empty((n, obs_dim), obs_dtype),
        "action": np.empty((n, act_dim), np.float32),
        "reward": np.empty(n, np.float32),
        "next_obs": np.empty((n, obs_dim), obs_dtype),
        "terminated": np.empty(n, np.uint8),
    }
    if discount:
        out["discount"] = np.empty(n, np.float32)
    return out


class NStep:
    def __init__(self, num_envs: int, obs_dim: int, act_dim: int, n: int, gamma: float,
                 obs_dtype=np.float32):
        """`obs_dtype`: int64 when the "obs" of a row is a frame number (pixel envs)."""
        self.n, self.gamma = n, gamma
        self.obs = np.zeros((n, num_envs, obs_dim), obs_dtype)
        self.action = np.zeros((n, num_envs, act_dim), np.float32)
        self.reward = np.zeros((n, num_envs), np.float64)
        self.fill = np.zeros(num_envs, np.int64)  # pending rows per env, oldest first
        self.slot = 0  # where this step's rows go: envs step in lockstep, so one counter
        self.powers = gamma ** np.arange(n + 1)

    @property
    def pending(self) -> int:
        return int(self.fill.sum())

    def max_rows_per_step(self) -> int:
        return self.obs.shape[1] * self.n

    def add(self, obs, action, reward, next_obs, terminated, done, ok, out: dict, at: int) -> int:
        """One vector step's one-step rows in; the rows that are complete are written into
        `out` (field -> array) from row `at`. Returns how many. `ok[e]` False: env e raised
        and has no row this step; its pending rows bootstrap from obs[e], where it stood."""
        s = self.slot
        written = 0
        for e in np.flatnonzero(~ok):  # rare: a recreated env
            written += self._flush(e, (s - 1) % self.n, obs[e], 0, out, at + written)
        idx = np.flatnonzero(ok)
        self.obs[s, idx] = obs[idx]
        self.action[s, idx] = action[idx]
        self.reward[s, idx] = reward[idx]
        self.fill[idx] += 1
        for e in np.flatnonzero(ok & done):
            written += self._flush(e, s, next_obs[e], terminated[e], out, at + written)
        full = np.flatnonzero(ok & ~done & (self.fill == self.n))
        if len(full):  # the oldest row of every full window, all at once
            first = (s + 1) % self.n
            order = (first + np.arange(self.n)) % self.n
            rows = slice(at + written, at + written + len(full))
            out["obs"][rows] = self.obs[first, full]
            out["action"][rows] = self.action[first, full]
            out["reward"][rows] = self.powers[: self.n] @ self.reward[order][:, full]
            out["next_obs"][rows] = next_obs[full]
            out["terminated"][rows] = 0
            out["discount"][rows] = self.powers[self.n]
            self.fill[full] -= 1
            written += len(full)
        self.slot = (s + 1) % self.n
        return written

    def _flush(self, e: int, last: int, boot_obs, term, out: dict, at: int) -> int:
        """Every pending row of env e, ending at slot `last`, bootstrapping from boot_obs."""
        c = int(self.fill[e])
        for j in range(c):
            k = c - j  # steps this row sums
            slots = (last - k + 1 + np.arange(k)) % self.n
            r = at + j
            out["obs"][r] = self.obs[slots[0], e]
            out["action"][r] = self.action[slots[0], e]
            out["reward"][r] = self.powers[:k] @ self.reward[slots, e]
            out["next_obs"][r] = boot_obs
            out["terminated"][r] = term
            out["discount"][r] = self.powers[k]
        self.fill[e] = 0
        return c

    def flush_all(self, obs, out: dict, at: int) -> int:
        """At stop: every pending row leaves, truncated here (bootstrapping from obs)."""
        last = (self.slot - 1) % self.n
        written = 0
        for e in np.flatnonzero(self.fill):
            written += self._flush(e, last, obs[e], 0, out, at + written)
        return written
