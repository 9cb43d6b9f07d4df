"""The training loop's update callable: k SAC updates captured as one CUDA graph.

On CUDA (cuda_graph on) `capture()` warms the update up on a side stream, rolls the model
back to where it was, and captures `updates_per_call` updates as a single CUDA graph; every
later call is one `graph.replay()`: no Python, no autograd and no launch overhead per kernel.
Everything the graph reads lives at fixed addresses (the ring, its size_t, parameters,
optimizer state); the batch is sampled inside the graph. Elsewhere it is a plain loop.

When the capture happens:
- `prepare()`: now, on the calling thread (herd precompile, benchmarks); without either
  prepare call, the first call captures.
- `prepare_in_background()` (the learner's training thread): captures the plain `*_eager`
  pieces as an uncompiled graph at once (a second or so; plain eager calls where that capture
  fails) and replays it while a thread of its own compiles a throwaway twin of the SAC (same
  config and shapes, fresh weights) and runs its warm-up against the live ring, read only, on
  a side stream, which fills inductor's and triton's caches (this process's and the disk's).
  The first call after that finished compiles the live SAC from those caches and captures as
  `capture()` does; the compiled graph replaces the uncompiled one from then on. The job
  trains from its first rows instead of waiting for the compile, and on a graph replay (one
  launch) rather than eager calls (docs/tried.md#graph-in-the-background has the measurements).
  If the preparation or the swap's capture fails, one line is logged and calls go on with
  the uncompiled graph, or eagerly (never the learner's death: slower, not wrong).
"""

from __future__ import annotations

import logging
import sys
import threading
import time

import torch

from herd.learner.graph.thread_cpu import cpu_by_thread, thread_cpu
from herd.learner.replay.ring import ReplayBuffer
from herd.learner.update.flat_adam import adam_flat_
from herd.learner.update.sac import SAC

log = logging.getLogger("herd.learner")

COMPILING = threading.Lock()
"""Held while torch.compile may trace: it is not safe on two threads at once (two learners in
one process, as in the tests). A learner's own swap never waits on it: its preparation is done."""


def configure_backends(device: torch.device, tf32: bool) -> None:
    """TF32 for fp32 matmuls (the one process-wide switch the learner flips)."""
    if torch.device(device).type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32


def make_update(sac: SAC, buffer: ReplayBuffer) -> GraphedUpdate:
    """The update `sac.compute` asks for: graphed (+ compiled) on CUDA, eager on the CPU."""
    cfg = sac.compute
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
        self.use_graph = cuda and (sac.compute.cuda_graph if cuda_graph is None else cuda_graph)
        self.warmup = warmup
        self.compile_mode = compile_mode
        self.compiled = False  # the live SAC runs the torch.compile wrappers
        if compile_mode is not None and not self.use_graph:
            self._compile()  # compiled without a graph: at the first call, on the caller's thread
        self.graph: torch.cuda.CUDAGraph | None = None
        self.interim = False  # `graph` is the uncompiled one replayed until the compiled swap
        self.out: torch.Tensor | None = None
        self._events: list[torch.cuda.Event] = []
        if self.use_graph and in_flight > 0:
            self._events = [torch.cuda.Event(blocking=True) for _ in range(in_flight)]
        self.calls = 0
        self.prep: GraphPrep | None = None  # a background preparation not yet taken up
        self._rng: RngFloor | None = None  # around the calls made while `prep` runs
        # what the status reports (graph_stats)
        self.prepare_s = 0.0  # the background preparation's wall time (0: there was none)
        self.swap_s = 0.0  # the calling thread's stop for compile + warm-up + capture
        self.capture_s = 0.0  # both: what the graph cost, wherever it ran
        self.eager_updates = 0  # updates made before the compiled graph (uncompiled graph or eager)
        self.interim_s = 0.0  # the uncompiled graph's capture (the training thread, before any update)
        self.first_compiled_unix: float | None = None  # the first compiled/captured call
        self.prepare_cpu_s: float | None = None  # the preparation thread's own CPU seconds
        self.prepare_phases: dict = {}  # its compile's phase seconds (compile_phases)
        self.prepare_threads: dict | None = None  # the process's threads' CPU seconds over it
        self.error: str | None = None  # why the compiled graph was given up

    def _run(self) -> torch.Tensor:
        out = None
        for _ in range(self.k):
            out = self.sac.update(self.buffer)
        return out

    def __call__(self) -> torch.Tensor:
        if self.use_graph and (self.graph is None or self.interim):
            self._capture_when_ready()
        run = self._run if self.graph is None else self._replay
        if self.prep is None:
            out = run()
        else:  # the compiled graph is being prepared: the uncompiled graph (or eager) meanwhile
            self.eager_updates += self.k
            with self._rng:
                out = run()
        if self.first_compiled_unix is None and (
                (self.graph is not None and not self.interim) or self.compiled):
            self.first_compiled_unix = time.time()
        return out

    def _replay(self) -> torch.Tensor:
        if self._events:  # sleeps (GIL released) until the replay n calls back is done
            done = self._events[self.calls % len(self._events)]
            done.synchronize()
            self.graph.replay()
            done.record()
        else:
            self.graph.replay()
        self.calls += 1
        return self.out

    def _capture_when_ready(self) -> None:
        """Capture now, unless a background preparation is still running (or failed)."""
        prep = self.prep
        if prep is None:
            self.capture()  # nothing prepared in the background: this call captures (as ever)
            return
        if not prep.done.is_set():
            return
        self.prep, self.prepare_s, self.prepare_cpu_s = None, prep.seconds, prep.cpu_s
        self.prepare_phases, self.prepare_threads = prep.phases, prep.threads
        if prep.error is not None:
            self._give_up("preparation", prep.error)
            return
        try:
            self.capture()
        except Exception as e:  # capture() put the live tensors back; go on as before
            log.debug("CUDA graph capture failed", exc_info=True)
            self._uncompile()
            self._give_up("capture", one_line(e))

    def _give_up(self, what: str, error: str) -> None:
        self.use_graph, self.error = False, f"{what}: {error}"
        how = ("the uncompiled CUDA graph, slower, without torch.compile" if self.interim
               else "eager updates, slower, without the graph")
        log.error("herd learner: the CUDA graph's %s failed (%s); training goes on with %s",
                  what, error, how)

    def prepare(self) -> None:
        """Compile and capture now, on this thread (herd precompile, bench/learner.py). An empty
        ring is fine (index 0 is sampled; warm-up is rolled back and the graph reads size_t on
        replay)."""
        if self.use_graph and self.graph is None:
            self.capture()

    def prepare_in_background(self) -> None:
        """Capture the uncompiled graph now and start the compiled one's cold work (compile,
        first kernels) on a thread of its own; calls replay the uncompiled graph (or run
        eagerly, if it failed) until that is done, then the next one captures. Nothing to do on
        the CPU or with the graph off."""
        if not self.use_graph or self.graph is not None or self.prep is not None:
            return
        self._rng = RngFloor(self.sac.device)  # its floor from before the capture's warm-up
        self._capture_uncompiled()
        self.prep = GraphPrep(self.sac.twin(), self.buffer, self.k, self.compile_mode,
                              self.warmup)

    def _capture_uncompiled(self) -> None:
        """The uncompiled graph, captured on this thread before the compile starts on its own:
        what calls replay until the compiled one takes over. If it fails, they run eagerly."""
        t0 = time.perf_counter()
        try:
            self.graph, self.out = self._warm_up_and_record()
            self.interim = True
        except Exception as e:
            log.debug("uncompiled CUDA graph capture failed", exc_info=True)
            log.warning("herd learner: the uncompiled CUDA graph failed (%s); eager updates until "
                        "the compiled graph is ready", one_line(e))
        self.interim_s = time.perf_counter() - t0

    def capture(self) -> None:
        """Compile the live SAC (if asked), warm up on a side stream (compile, lazy optimizer
        state, cuBLAS handles), roll back, capture. Fails with the live tensors as they were."""
        t0 = time.perf_counter()
        with COMPILING:
            self._compile()
            old, (self.graph, self.out) = self.graph, self._warm_up_and_record()
        if old is not None:
            old.reset()  # the uncompiled graph's memory pool goes back
        self.interim = False
        self.swap_s = time.perf_counter() - t0
        self.capture_s = self.interim_s + self.prepare_s + self.swap_s

    def _compile(self) -> None:
        if self.compile_mode is not None and not self.compiled:
            self.sac.compile(self.compile_mode)
            self.compiled = True

    def _uncompile(self) -> None:
        """Undo SAC.compile: every piece back to its `*_eager` function, both Adams eager."""
        sac = self.sac
        for name in list(vars(sac)):
            if hasattr(type(sac), name + "_eager"):
                setattr(sac, name, getattr(sac, name + "_eager"))
        for opt in (sac.critic_opt, sac.actor_opt):
            opt._fn = adam_flat_
        self.compiled = False

    def _warm_up_and_record(self) -> tuple[torch.cuda.CUDAGraph, torch.Tensor]:
        """Warm up, roll back, capture; on failure the live tensors are put back as they were."""
        before = snapshot(self.sac)
        try:
            self._warm_up()
            rollback(self.sac, before)
            return self._record()
        except BaseException:
            rollback(self.sac, before)
            raise

    def _warm_up(self) -> None:
        dev = self.sac.device
        side = torch.cuda.Stream(dev)
        side.wait_stream(torch.cuda.current_stream(dev))
        with torch.cuda.stream(side):
            for _ in range(self.warmup):
                self._run()
        torch.cuda.current_stream(dev).wait_stream(side)

    def _record(self) -> tuple[torch.cuda.CUDAGraph, torch.Tensor]:
        graph = torch.cuda.CUDAGraph()
        # thread_local: gRPC threads may touch CUDA (pinned memory) while we capture.
        with torch.cuda.graph(graph, capture_error_mode="thread_local"):
            out = self._run()
        torch.cuda.synchronize(self.sac.device)
        return graph, out

    def warm_rollback_check(self) -> None:
        """Eager twin of capture()'s warm-up + rollback (lets the CPU suite test it)."""
        before = snapshot(self.sac)
        for _ in range(self.warmup):
            self._run()
        rollback(self.sac, before)


def graph_stats(step: GraphedUpdate | None) -> dict:
    """The learner status's fields about the graph (`step` None: the update is not built yet).

    capture_s: seconds of compile + warm-up + capture, wherever they ran: the uncompiled
      graph's capture (before the first update), the background preparation (the cold
      compile) and the swap on the training thread (the live compile, from the caches, and the
      capture); without a background preparation, all of it stopped
      the training thread, as before. 0 until the graph is live (and on the CPU).
    graph_swap_s: of it, the seconds the training thread stopped for.
    uncompiled_capture_s: of it, the uncompiled graph's warm-up and capture, which the training
      thread does before it takes its first rows (so it is on the first update's path).
    eager_updates: updates made while the compiled graph was being prepared (by the uncompiled
      graph, or eagerly where that could not be captured).
    first_compiled_unix: time.time() of the first compiled/captured call; None until then, on
      the CPU and after a fallback (the start-up timeline's first_compiled_update).
    graph_error: why the learner gave the compiled graph up (it trains on the uncompiled one,
      or eagerly); None when it did not.
    prepare_cpu_s: the CPU seconds the background preparation's thread itself ran (thread
      time; its kernel-compile workers not included); None without one. Well under its wall
      time (capture_s less the rest): it waited, for the GIL, for CPUs or for those workers.
    prepare_compile_s, prepare_kernel_wait_s: of the preparation, torch.compile's own time
      (Dynamo's compile_inner, summed over frames) and, inside that, loading the compiled
      modules, which waits for their Triton kernels' compiles (compile_phases); absent without one.
    prepare_threads_cpu_s: the CPU seconds each of the learner's threads ran over that compile
      (learner/graph/thread_cpu.py: by name, the largest six and 'others'; the preparation's own is
      herd-graph-prep), to tell who else held the GIL or the CPUs; None without one.
    """
    return {"capture_s": getattr(step, "capture_s", 0.0), "graph_swap_s": getattr(step, "swap_s", 0.0),
            "uncompiled_capture_s": getattr(step, "interim_s", 0.0),
            "prepare_cpu_s": getattr(step, "prepare_cpu_s", None),
            "prepare_threads_cpu_s": getattr(step, "prepare_threads", None),
            **getattr(step, "prepare_phases", {}),
            "eager_updates": getattr(step, "eager_updates", 0),
            "first_compiled_unix": getattr(step, "first_compiled_unix", None),
            "graph_error": getattr(step, "error", None)}


SWITCH_S = 0.0002
"""The GIL switch interval while the compiled graph is prepared on its own thread."""


class GraphPrep:
    """warm_twin(twin, ...) on a thread of its own; `done` is set when it returned or failed."""

    def __init__(self, twin: SAC, buffer: ReplayBuffer, k: int, compile_mode: str | None,
                 warmup: int):
        self.done = threading.Event()
        self.error: str | None = None  # one line
        self.seconds = 0.0
        self.cpu_s = 0.0  # this thread's own CPU time (time.thread_time) over the same span
        self.phases: dict = {}  # its compile's phase seconds (compile_phases)
        self.threads: dict = {}  # every thread's CPU seconds over its compile (cpu_by_thread)
        self._work = (twin, buffer, k, compile_mode, warmup)
        threading.Thread(target=self._run, name="herd-graph-prep", daemon=True).start()

    def _run(self) -> None:
        t0, c0 = time.perf_counter(), time.thread_time()
        # The compile is pure Python for tens of seconds: the training thread, back from each
        # replay's event wait, waits for the GIL up to the switch interval (5 ms by default,
        # about one replay of 4 family updates). Shortened while this runs (SWITCH_S).
        interval = sys.getswitchinterval()
        sys.setswitchinterval(min(interval, SWITCH_S))
        before, threads = compile_phases(), thread_cpu()
        try:
            with COMPILING:
                warm_twin(*self._work)
        except Exception as e:  # the training thread reports it and stays eager
            log.debug("CUDA graph preparation failed", exc_info=True)
            self.error = one_line(e)
        finally:
            sys.setswitchinterval(interval)
            self._work = None  # the twin is let go before the training thread may capture
            self.seconds = time.perf_counter() - t0
            self.cpu_s = time.thread_time() - c0
            self.phases = compile_phases(before)
            self.threads = cpu_by_thread(threads)
            self.done.set()


KERNEL_WAIT = "PyCodeCache.load_by_key_path"
"""torch._dynamo's phase timer for loading a compiled module, which waits for its kernels'
compiles in the workers (async_compile.wait runs inside it: on the CPU 15.3 of its 15.6 s)."""


def compile_phases(since: dict | None = None) -> dict:
    """torch.compile's phase seconds in this process (torch._dynamo.utils'
    compilation_time_metrics, summed), less `since` (an earlier call's): prepare_compile_s (the
    frames' compile_inner) and prepare_kernel_wait_s (KERNEL_WAIT). {} where torch keeps none."""
    try:
        from torch._dynamo.utils import compilation_time_metrics as m
        now = {"prepare_compile_s": sum(m.get("_compile.compile_inner", ())),
               "prepare_kernel_wait_s": sum(m.get(KERNEL_WAIT, ()))}
    except Exception:  # noqa: BLE001  (a private table: a torch without it records nothing)
        return {}
    if since is None:
        return now
    return {k: round(v - since.get(k, 0.0), 3) for k, v in now.items()}


def warm_twin(twin: SAC, buffer: ReplayBuffer, k: int, compile_mode: str | None,
              warmup: int) -> None:
    """Compile `twin` and run `warmup` calls of `k` updates on a side stream: inductor and
    triton keep what they build, and the live SAC's compile hits it. The ring is only read
    (sample + gather; rows the ingest stream writes meanwhile may be read torn: the twin's
    results are thrown away)."""
    if compile_mode is not None:
        twin.compile(compile_mode)
    side = torch.cuda.Stream(twin.device) if twin.device.type == "cuda" else None
    with torch.cuda.stream(side):  # None: the CPU, no stream
        for _ in range(warmup * k):
            twin.update(buffer)
    if side is not None:
        side.synchronize()  # errors surface here, on this thread


class RngFloor:
    """Around the eager updates that run while another thread compiles: each starts at least
    where the previous one left the CUDA generator's Philox offset.

    torch.compile saves the RNG state before it traces and sets it back after
    (torch._dynamo preserve_global_state, inductor preserve_rng_state). On another thread that
    rewinds the offset under the eager updates running meanwhile, which would then draw the
    same batch positions and policy noise again, once per compiled frame. A no-op on the CPU.
    """

    def __init__(self, device: torch.device):
        device = torch.device(device)
        self.gen = None
        if device.type == "cuda":
            index = device.index if device.index is not None else torch.cuda.current_device()
            self.gen = torch.cuda.default_generators[index]
            self.floor = self.gen.get_offset()

    def __enter__(self) -> None:
        if self.gen is not None and self.gen.get_offset() < self.floor:
            self.gen.set_offset(self.floor)

    def __exit__(self, *exc) -> None:
        if self.gen is not None:
            self.floor = max(self.floor, self.gen.get_offset())


def one_line(e: BaseException) -> str:
    first = str(e).strip().splitlines()
    return f"{type(e).__name__}: {first[0]}" if first else type(e).__name__


def snapshot(sac: SAC) -> dict[int, torch.Tensor]:
    """Copies of every tensor an update mutates, for `rollback`."""
    return {id(t): t.detach().clone() for t in sac.state_tensors()}


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
