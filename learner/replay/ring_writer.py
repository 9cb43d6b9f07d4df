"""New transitions into the replay ring without stalling, or racing, the update graph.

    ingest:  numpy rows ──pack──► packed block (the ingest thread or process, learner/ingest*.py)
    host:    packed block ──copy──► pinned slot j     (a page-locked block skips this copy)
    ingest:  [wait consumed[j]] pinned j ──H2D, non_blocking──► device slot j ; record copied[j]
    update:  ... graph replay ... [wait copied[j]] device slot j ──D2D──► ring rows, size_t ;
             record consumed[j] ; next replay ...

The host-to-device copy (the slow part) runs on its own stream, overlapping the replay that
is in flight. Only the device-to-device write into the ring, microseconds long, runs on the
update stream, between two replays: a sample can never see half-written (torn) rows, and
size_t grows only after its rows are in. Slots rotate, so the host blocks only when it laps
a copy that has not finished (copied[j]). On the CPU blocks are written into the ring as they are.
"""

from __future__ import annotations

import torch

from herd.learner.replay.ring import ReplayBuffer


class RingWriter:
    """The single writer into a ReplayBuffer: packed row blocks in (`ReplayBuffer.pack_rows`),
    through pinned slots, into the ring."""

    def __init__(self, buffer: ReplayBuffer, chunk_rows: int = 8192, slots: int = 3):
        self.buffer = buffer
        self.device = buffer.device
        self.cuda = self.device.type == "cuda"
        self.chunk_rows = chunk_rows = min(chunk_rows, buffer.capacity)
        width = buffer.row_width
        self.host = [
            torch.zeros(chunk_rows, width, dtype=torch.float32, pin_memory=self.cuda)  # pads stay 0
            for _ in range(slots)
        ]
        self.slot = 0
        self.fill = 0  # rows in the current slot, not yet in the ring
        self._host_rows: list[tuple[int, int]] = []  # of those, the ones in the host slot
        self._copies: list = []  # of those, (device rows, page-locked block rows) to copy
        if self.cuda:
            self.stream = torch.cuda.Stream(self.device)
            self.dev = [torch.empty_like(h, device=self.device) for h in self.host]
            self.copied = [torch.cuda.Event() for _ in range(slots)]
            self.consumed = [torch.cuda.Event() for _ in range(slots)]
            self._direct_done = torch.cuda.Event()
        self._unsettled = False

    def write(self, blocks: list[torch.Tensor]) -> int:
        """Append packed [n, row_width] CPU blocks to the ring; returns rows written once the
        blocks may be reused. On CUDA a page-locked block (the ingest process's registered
        slots, learner/ingest/processes.py) is copied to the device as it is; any other through a
        pinned host slot. On the CPU blocks go into the ring directly."""
        total, direct = 0, False
        for rows in blocks:
            n = rows.shape[0]
            total += n
            if not self.cuda:
                self.buffer.extend_packed(rows)
                continue
            pinned = rows.is_pinned()
            direct |= pinned
            for lo in range(0, n, self.chunk_rows):
                hi = min(n, lo + self.chunk_rows)
                if self.fill + hi - lo > self.chunk_rows:
                    self.flush()
                at, j = self.fill, self.slot
                if pinned:  # DMA from the block itself, no host copy (issued by flush)
                    self._copies.append((self.dev[j][at : at + hi - lo], rows[lo:hi]))
                else:
                    self.host[j][at : at + hi - lo].copy_(rows[lo:hi])
                    self._host_rows.append((at, at + hi - lo))
                self.fill += hi - lo
        self.flush()
        if direct:  # the caller hands the page-locked blocks back once settle() returned
            self._direct_done.record(self.stream)
            self._unsettled = True
        return total

    def settle(self) -> None:
        """Wait until the copies from the last write's page-locked blocks are done. Called right
        before those blocks are handed back (the next take), an update later: by then the copy
        has long finished, where a wait at the end of write() held the training thread ~1 ms
        per write at a flat-out ingest."""
        if self._unsettled:
            self._direct_done.synchronize()
            self._unsettled = False

    def flush(self) -> None:
        """Send the current slot to the ring (ordered behind work already queued)."""
        n, j = self.fill, self.slot
        if n == 0:
            return
        update = torch.cuda.current_stream(self.device)
        with torch.cuda.stream(self.stream):
            self.stream.wait_event(self.consumed[j])  # device slot j read by its last write
            for dst, src in self._copies:
                dst.copy_(src, non_blocking=True)
            for a, b in self._host_rows:
                self.dev[j][a:b].copy_(self.host[j][a:b], non_blocking=True)
            self.copied[j].record(self.stream)
        update.wait_event(self.copied[j])
        self.buffer.extend_packed(self.dev[j][:n])
        self.consumed[j].record(update)
        self._host_rows, self._copies = [], []
        self.fill = 0
        self.slot = (j + 1) % len(self.host)
        # The next slot's pinned memory may still be feeding an earlier H2D copy.
        self.copied[self.slot].synchronize()
