"""Replay: the GPU ring, its single writer and the rate limiter that paces inserts against
samples, as Reverb's table owns its limiter.

The limiter is Reverb's SampleToInsertRatio with updates as samples: after `min_size` rows,
`ratio` updates per inserted row, and either side may run ahead of the other by `tolerance`
updates before it waits. `ratio` None: no pacing (updates start once `min_size` rows are in).
"""

from __future__ import annotations

import logging

import torch

from herd.learner.replay.ring import ReplayBuffer

log = logging.getLogger("herd.learner")


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
            from herd.learner.replay.ring_writer import RingWriter

            self._writer = RingWriter(self.ring, chunk_rows=self.chunk_rows)
        return self._writer.write(blocks)

    def settle(self) -> None:
        """The last insert's blocks may be handed back: their copies are done (RingWriter.settle)."""
        if self._writer is not None:
            self._writer.settle()

    def limits(self, updates: int) -> tuple[bool, bool]:
        return self.limiter.allows(self.ring, updates)


class FrameTable(ReplayTable):
    """A pixel env's table: validated and placed batches (not packed rows) into the frame
    replay (learner/replay/frames.py). A batch whose insert raises is refused alone, counted
    (insert_failures, rows_failed) and logged; the training thread goes on with the next."""

    def __init__(self, ring, limiter: RateLimiter):
        super().__init__(ring, limiter, chunk_rows=0)
        self.insert_failures = self.rows_failed = 0

    def insert(self, blocks: list[dict]) -> int:
        kept = 0
        for arrays in blocks:
            try:
                kept += self.ring.insert(arrays)
            except Exception as e:  # noqa: BLE001 - one bad batch must not end training
                self.insert_failures += 1
                self.rows_failed += len(arrays["reward"])
                if self.insert_failures <= 10 or not self.insert_failures % 1000:
                    log.error("a batch of actor %s was not inserted (%d so far): %s",
                              arrays.get("actor_id"), self.insert_failures, repr(e)[:300])
        return kept
