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

    @property
    def columns(self) -> dict[str, tuple[int, int]]:
        """Each field's (first column, width) in a packed row, in ROW_FIELDS order; an obs's
        pad columns follow it unnamed. Everything that reads rows takes its offsets here."""
        pad, a = self.obs_pad, self.action_dim
        return {"obs": (0, self.obs_dim), "next_obs": (pad, self.obs_dim), "action": (2 * pad, a),
                "reward": (2 * pad + a, 1), "terminated": (2 * pad + a + 1, 1),
                "discount": (2 * pad + a + 2, 1)}

    def pack(self, rows: dict, dst: np.ndarray) -> None:
        """Rows (numpy arrays, or CPU tensors) into `dst[:n]`, a [>= n, row_width] fp32 array:
        one host pass, dtype conversion included (terminated arrives as uint8). The obs pad
        columns are never written: allocate `dst` zeroed."""
        n = int(rows["reward"].shape[0])
        dst = dst[:n]
        for name, (start, width) in self.columns.items():
            src = rows.get(name)
            if src is None and name == "discount":
                dst[:, start] = self.one_step_discount
                continue
            src = src.detach().cpu().numpy() if hasattr(src, "detach") else np.asarray(src)
            src = src.reshape(n, -1)
            if src.shape[1] != width:
                raise ValueError(f"{name} has {src.shape[1]} columns, the ring expects {width}")
            dst[:, start : start + width] = src
