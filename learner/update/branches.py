"""CUDA streams for the independent pieces of one SAC update.

A batch-256 update is latency-bound: ~140 small kernels that each fill a few of the GPU's
SMs. Its pieces form a small DAG: the critic's forward on (obs, action) needs only the batch;
the target's forward needs the actor's sample of next_obs; the actor's loss needs the actor's
sample of obs and the critic weights before their step. Each runs on its own stream, forked
from the caller's stream and joined back into it; inside `torch.cuda.graph` capture this
becomes a graph with parallel branches. On the CPU, or when off, every method is a no-op.
"""

from __future__ import annotations

import contextlib

import torch


class Branches:
    def __init__(self, device: torch.device, enabled: bool, n: int):
        on = enabled and torch.device(device).type == "cuda"
        self.streams = [torch.cuda.Stream(device) for _ in range(n)] if on else None

    def fork(self, *which: int) -> None:
        """Branches `which` start after everything queued so far on the current stream."""
        if self.streams:
            cur = torch.cuda.current_stream()
            for i in which:
                self.streams[i].wait_stream(cur)

    def on(self, i: int):
        """Context: queue work on branch `i`."""
        return torch.cuda.stream(self.streams[i]) if self.streams else contextlib.nullcontext()

    def after(self, i: int, j: int) -> None:
        """Branch `i`'s later work waits for what branch `j` has queued so far."""
        if self.streams:
            self.streams[i].wait_stream(self.streams[j])

    def join(self) -> None:
        """The current stream waits for every branch."""
        if self.streams:
            cur = torch.cuda.current_stream()
            for s in self.streams:
                cur.wait_stream(s)
