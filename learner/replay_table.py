"""Replay: the GPU ring, its single writer and the rate limiter that paces inserts against
samples, as Reverb's table owns its limiter.

The limiter is Reverb's SampleToInsertRatio with updates as samples: after `min_size` rows,
`ratio` updates per inserted row, and either side may run ahead of the other by `tolerance`
updates before it waits. `ratio` None: no pacing (updates start once `min_size` rows are in).
"""

from __future__ import annotations

import torch

from herd.learner.replay import ReplayBuffer


class RateLimiter:
    def __init__(self, ratio: float | None, tolerance: int, min_size: int):
        self.ratio, self.tolerance, self.min_size = ratio, tolerance, min_size
        self.base = 0
        """Updates made before this ring's rows (a restore without its buffer): not counted."""

    def allows(self, ring: ReplayBuffer, updates: int) -> tuple[bool, bool]:
        """(may insert, may update) for a ring after `updates` updates."""
        warm = ring.size >= self.min_size
        if self.ratio is None:
            return True, warm
        allowed = self.ratio * max(0, ring.inserted - self.min_size)
        done = updates - self.base  # updates made on this ring's inserts
        may_insert = not warm or allowed - done < self.tolerance
        may_update = warm and done < allowed + self.tolerance
        return may_insert, may_update


class ReplayTable:
    """The ring, written only through `insert` (from the training thread), paced by `limiter`."""

    def __init__(self, ring: ReplayBuffer, limiter: RateLimiter, chunk_rows: int):
        self.ring, self.limiter, self.chunk_rows = ring, limiter, chunk_rows
        self._writer = None  # made on the training thread: its CUDA stream and events live there

    def insert(self, blocks: list[torch.Tensor]) -> int:
        """Packed row blocks (ReplayBuffer.pack_rows) into the ring; returns rows written."""
        if self._writer is None:
            from herd.learner.ingest_stream import RingWriter

            self._writer = RingWriter(self.ring, chunk_rows=self.chunk_rows)
        return self._writer.write(blocks)

    def settle(self) -> None:
        """The last insert's blocks may be handed back: their copies are done (RingWriter.settle)."""
        if self._writer is not None:
            self._writer.settle()

    def limits(self, updates: int) -> tuple[bool, bool]:
        return self.limiter.allows(self.ring, updates)


class FrameTable(ReplayTable):
    """A pixel env's table: validated batches (not packed rows) into the frame replay
    (learner/frame_replay.py), which maps their frame numbers to its slots as it writes."""

    def __init__(self, ring, limiter: RateLimiter):
        super().__init__(ring, limiter, chunk_rows=0)

    def insert(self, blocks: list[dict]) -> int:
        return sum(self.ring.insert(arrays) for arrays in blocks)
