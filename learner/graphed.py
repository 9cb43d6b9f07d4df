"""The training loop's update callable: k SAC updates captured as one CUDA graph.

On CUDA (cuda_graph on) `prepare()` (or else the first call) warms the update up on a side
stream, rolls the model back to where it was, and captures `updates_per_call` updates as a single CUDA graph; every
later call is one `graph.replay()`: no Python, no autograd and no launch overhead per kernel.
Everything the graph reads lives at fixed addresses (the ring, its size_t, parameters,
optimizer state); the batch is sampled inside the graph. Elsewhere it is a plain loop.
"""

from __future__ import annotations

import time

import torch

from herd.learner.replay import ReplayBuffer
from herd.learner.sac import SAC


def configure_backends(device: torch.device, tf32: bool) -> None:
    """TF32 for fp32 matmuls (the one process-wide switch the learner flips)."""
    if torch.device(device).type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32


def make_update(sac: SAC, buffer: ReplayBuffer) -> GraphedUpdate:
    """The update a learner with `sac.cfg` runs: graphed (+ compiled) on CUDA, eager on the CPU."""
    cfg = sac.cfg
    configure_backends(sac.device, cfg.tf32)
    cuda = sac.device.type == "cuda"
    compile_mode = cfg.compile_mode if cfg.compile and cuda else None  # the CPU stays eager
    return GraphedUpdate(sac, buffer, cfg.updates_per_call, compile_mode=compile_mode,
                         in_flight=cfg.graphs_in_flight)


class GraphedUpdate:
    """Call it to run `updates_per_call` updates; returns the last update's loss tensor.

    The returned tensor is static when graphed (overwritten by the next call): copy it out
    before calling again if you keep it.
    """

    def __init__(
        self,
        sac: SAC,
        buffer: ReplayBuffer,
        updates_per_call: int = 1,
        cuda_graph: bool | None = None,
        compile_mode: str | None = None,
        warmup: int = 3,
        in_flight: int = 2,
    ):
        """`in_flight`: graph replays queued ahead of the GPU; one call more first sleeps on a
        blocking CUDA event until the oldest is done. Unbounded (0), the calling thread spins a
        core in CUDA's full launch queue; bounded, the GPU still always has the next replay
        queued and the core is free (for actors on the same box). Graph mode only."""
        self.sac, self.buffer = sac, buffer
        self.k = updates_per_call
        cuda = sac.device.type == "cuda"
        self.use_graph = cuda and (sac.cfg.cuda_graph if cuda_graph is None else cuda_graph)
        self.warmup = warmup
        if compile_mode is not None:
            sac.compile(compile_mode)
        self.graph: torch.cuda.CUDAGraph | None = None
        self.out: torch.Tensor | None = None
        self.capture_s = 0.0
        self._events: list[torch.cuda.Event] = []
        if self.use_graph and in_flight > 0:
            self._events = [torch.cuda.Event(blocking=True) for _ in range(in_flight)]
        self.calls = 0

    def _run(self) -> torch.Tensor:
        out = None
        for _ in range(self.k):
            out = self.sac.update(self.buffer)
        return out

    def __call__(self) -> torch.Tensor:
        if not self.use_graph:
            return self._run()
        if self.graph is None:
            self.capture()
        if self._events:  # sleeps (GIL released) until the replay n calls back is done
            done = self._events[self.calls % len(self._events)]
            done.synchronize()
            self.graph.replay()
            done.record()
        else:
            self.graph.replay()
        self.calls += 1
        return self.out

    def prepare(self) -> None:
        """Compile and capture now rather than at the first update: the learner calls this as
        its training thread starts, so the cost overlaps the actors' start-up. An empty ring is
        fine (index 0 is sampled; warm-up is rolled back and the graph reads size_t on replay)."""
        if self.use_graph and self.graph is None:
            self.capture()

    def capture(self) -> None:
        """Warm up (compile, lazy optimizer state, cuBLAS handles), roll back, capture."""
        t0 = time.perf_counter()
        before = {id(t): t.detach().clone() for t in self.sac.state_tensors()}
        side = torch.cuda.Stream(self.sac.device)
        side.wait_stream(torch.cuda.current_stream(self.sac.device))
        with torch.cuda.stream(side):
            for _ in range(self.warmup):
                self._run()
        torch.cuda.current_stream(self.sac.device).wait_stream(side)
        rollback(self.sac, before)
        graph = torch.cuda.CUDAGraph()
        # thread_local: gRPC threads may touch CUDA (pinned memory) while we capture.
        with torch.cuda.graph(graph, capture_error_mode="thread_local"):
            self.out = self._run()
        self.graph = graph
        torch.cuda.synchronize(self.sac.device)
        self.capture_s = time.perf_counter() - t0

    def warm_rollback_check(self) -> None:
        """Eager twin of capture()'s warm-up + rollback (lets the CPU suite test it)."""
        before = {id(t): t.detach().clone() for t in self.sac.state_tensors()}
        for _ in range(self.warmup):
            self._run()
        rollback(self.sac, before)


@torch.no_grad()
def rollback(sac: SAC, before: dict[int, torch.Tensor]) -> None:
    """Restore what warm-up changed; optimizer state born in warm-up goes back to zero,
    which is exactly a fresh Adam (step 0, zero moments)."""
    for t in sac.state_tensors():
        saved = before.get(id(t))
        if saved is None:
            t.zero_()
        else:
            t.copy_(saved)
