"""Replay ring buffer: preallocated tensors on the learner's device.

Rows are written by one writer (the learner's training thread). The filled size lives in a
device tensor so that a captured update can sample from a growing buffer without a host sync.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch


class ReplayBuffer:
    """Fixed-capacity ring of (obs, action, reward, next_obs, terminated) rows."""

    def __init__(
        self,
        capacity: int,
        obs_shape: tuple[int, ...],
        action_dim: int,
        device: torch.device,
        obs_dtype: torch.dtype = torch.float32,
    ):
        self.capacity = capacity
        self.device = device
        obs_dim = int(np.prod(obs_shape))
        self.obs = torch.zeros(capacity, obs_dim, dtype=obs_dtype, device=device)
        self.next_obs = torch.zeros(capacity, obs_dim, dtype=obs_dtype, device=device)
        self.action = torch.zeros(capacity, action_dim, dtype=torch.float32, device=device)
        self.reward = torch.zeros(capacity, dtype=torch.float32, device=device)
        self.terminated = torch.zeros(capacity, dtype=torch.float32, device=device)
        # The number of valid rows, readable by captured graphs (no .item()).
        self.size_t = torch.zeros((), dtype=torch.float32, device=device)
        self.pos = 0
        self.size = 0
        self.inserted = 0

    def extend(self, rows: dict[str, torch.Tensor]) -> None:
        """Write `n` rows (tensors already on any device); wraps around the ring."""
        n = rows["reward"].shape[0]
        if n > self.capacity:
            rows = {k: v[-self.capacity :] for k, v in rows.items()}
            self.pos = (self.pos + n - self.capacity) % self.capacity
            n = self.capacity
        first = min(n, self.capacity - self.pos)
        for start, stop, src in ((self.pos, self.pos + first, 0), (0, n - first, first)):
            if stop <= start:
                continue
            take = slice(src, src + stop - start)
            self.obs[start:stop].copy_(rows["obs"][take].flatten(1), non_blocking=True)
            self.next_obs[start:stop].copy_(rows["next_obs"][take].flatten(1), non_blocking=True)
            self.action[start:stop].copy_(rows["action"][take].flatten(1), non_blocking=True)
            self.reward[start:stop].copy_(rows["reward"][take], non_blocking=True)
            self.terminated[start:stop].copy_(rows["terminated"][take], non_blocking=True)
        self.pos = (self.pos + n) % self.capacity
        self.size = min(self.size + n, self.capacity)
        self.inserted += n
        self.size_t.fill_(float(self.size))

    def sample_indices(self, batch_size: int, generator: torch.Generator | None = None):
        """Uniform indices in [0, size) computed on the device from size_t (graph-safe)."""
        u = torch.rand(batch_size, device=self.device, generator=generator)
        return (u * self.size_t).long().clamp_(max=self.capacity - 1)

    def gather(self, idx: torch.Tensor) -> dict[str, torch.Tensor]:
        return {
            "obs": self.obs[idx].float(),
            "action": self.action[idx],
            "reward": self.reward[idx],
            "next_obs": self.next_obs[idx].float(),
            "terminated": self.terminated[idx],
        }

    def state_dict(self) -> dict:
        n = self.size
        return {
            "obs": self.obs[:n].cpu(),
            "next_obs": self.next_obs[:n].cpu(),
            "action": self.action[:n].cpu(),
            "reward": self.reward[:n].cpu(),
            "terminated": self.terminated[:n].cpu(),
            "pos": self.pos,
            "size": self.size,
            "inserted": self.inserted,
        }

    def load_state_dict(self, state: dict) -> None:
        n = int(state["size"])
        if n > self.capacity:
            raise ValueError(f"saved buffer holds {n} rows; this ring has {self.capacity}")
        for name in ("obs", "next_obs", "action", "reward", "terminated"):
            getattr(self, name)[:n].copy_(state[name][:n])
        self.size, self.pos, self.inserted = n, int(state["pos"]) % self.capacity, int(state["inserted"])
        self.size_t.fill_(float(n))

    def save(self, path: Path) -> None:
        """torch.save to a temporary name, then rename: readers never see half a file."""
        path = Path(path)
        tmp = path.with_suffix(path.suffix + ".tmp")
        torch.save(self.state_dict(), tmp)
        tmp.replace(path)

    def load(self, path: Path) -> None:
        self.load_state_dict(torch.load(path, mmap=True, weights_only=True))
