"""The packed row: one transition as one fp32 row, in numpy alone (no torch).

    [ obs (obs_pad) | next_obs (obs_pad) | action | reward | terminated | discount ]

obs_pad is obs_dim rounded up to 8 (zero columns), the width the networks' matmuls want. The
replay ring (learner/replay/ring.py) writes packed rows into its two tensors; ingest packs them
where batches arrive, in this process or in an ingest process (learner/ingest/processes.py), which
thus never imports torch.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

ROW_FIELDS = ("obs", "next_obs", "action", "reward", "terminated", "discount")
"""Column order of a packed row."""


def pad8(n: int) -> int:
    """`n` rounded up to a multiple of 8: an obs's width in a packed row and the networks' input
    widths (their matmuls want it)."""
    return -(-n // 8) * 8


@dataclass(frozen=True)
class RowLayout:
    obs_dim: int
    action_dim: int
    one_step_discount: float = 0.99
    """The bootstrap factor of rows that arrive without one (one-step rows)."""

    @classmethod
    def of(cls, obs_shape: tuple[int, ...], action_dim: int, one_step_discount: float = 0.99,
           **_) -> RowLayout:
        """From ReplayBuffer's layout arguments (its obs_dtype is the ring's business)."""
        return cls(int(np.prod(obs_shape)), int(action_dim), float(one_step_discount))

    @property
    def obs_pad(self) -> int:
        return pad8(self.obs_dim)

    @property
    def row_width(self) -> int:
        return 2 * self.obs_pad + self.action_dim + 3

    def pack(self, rows: dict, dst: np.ndarray) -> None:
        """Rows (numpy arrays, or CPU tensors) into `dst[:n]`, a [>= n, row_width] fp32 array:
        one host pass, dtype conversion included (terminated arrives as uint8). The obs pad
        columns are never written: allocate `dst` zeroed."""
        n = int(rows["reward"].shape[0])
        dst = dst[:n]
        pad = self.obs_pad
        starts = {"obs": 0, "next_obs": pad, "action": 2 * pad, "reward": 2 * pad + self.action_dim}
        starts["terminated"] = starts["reward"] + 1
        starts["discount"] = starts["reward"] + 2
        widths = {"obs": self.obs_dim, "next_obs": self.obs_dim, "action": self.action_dim}
        for name in ROW_FIELDS:
            src = rows.get(name)
            if src is None and name == "discount":
                dst[:, starts[name]] = self.one_step_discount
                continue
            src = src.detach().cpu().numpy() if hasattr(src, "detach") else np.asarray(src)
            src = src.reshape(n, -1)
            expect = widths.get(name, 1)
            if src.shape[1] != expect:
                raise ValueError(f"{name} has {src.shape[1]} columns, the ring expects {expect}")
            dst[:, starts[name] : starts[name] + expect] = src
