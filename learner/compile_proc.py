"""The compiled graph's cold compile in a process of its own: its Python never takes the
training thread's GIL.

On CUDA with `learner.compile` the update's first torch.compile is tens of seconds of Python
(dynamo, AOTAutograd, inductor's lowering and codegen) besides Triton's kernel builds. Run on
the learner's background thread (learner/graphed.py GraphPrep), that Python shares one GIL with
the training thread replaying the uncompiled graph: on the H200 the compile took 67-75 s beside
the training, against 42 s alone, and the uncompiled graph ran ~480 updates/s, against 752/s
alone (README, "Training starts before the compile ends").

With `learner.compile_process` the learner boots this child first thing, before it imports
torch itself. The child compiles a twin of the update (same config, a small ring of the same
layout: the ring's size is not compiled in) and runs its warm-up (`warm_twin`). That fills
the on-disk caches of inductor's FX graphs, AOTAutograd and Triton. GraphPrep waits for it
without holding the GIL, then compiles its own twin from those caches (a re-trace, seconds), and
the swap follows as before. If the child fails, GraphPrep compiles cold on its thread, as it
does without the child: slower, never wrong. The child ends when its pipe does, which the
kernel closes when the learner dies however it dies (the reason is in learner/ingest_proc.py).

With `learner.compile_processes` > 1 (CompileGroup) several children split the update's frames
(UNITS) and compile their shares at once.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import sys
import threading
import time
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING

from herd.learner.child_proc import start_child

if TYPE_CHECKING:
    from herd.learner.config import LearnerConfig

class CompileProcess:
    """Boots the child and hands it the work at once; `wait` blocks (without the GIL) until it
    is done, and returns why it failed (one line) or None."""

    def __init__(self, cfg: LearnerConfig, obs_shape: tuple[int, ...], action_dim: int,
                 action_low, action_high, device: str | None = None, warmup: int = 3,
                 pieces: tuple[str, ...] | None = None, env: dict | None = None):
        """`device`: where to compile; None: the learner's (`cfg.device`, resolved as the
        learner resolves it). `warmup`: calls of `updates_per_call` updates, as GraphedUpdate.
        `pieces`: compile only these frames (SAC.compile's `only`; None: all). `env`: the
        child's environment (None: this process's)."""
        self._conn, child_end = mp.Pipe()
        self.proc = start_child("compile_proc", child_end, env=env)  # learner/child_proc.py
        self.seconds: float | None = None  # the child's compile and warm-up, once done
        work = dict(cfg=cfg.model_dump(), obs_shape=tuple(obs_shape), action_dim=int(action_dim),
                    low=[float(x) for x in action_low], high=[float(x) for x in action_high],
                    device=device or cfg.device, warmup=warmup,
                    pieces=list(pieces) if pieces is not None else None)
        self._conn.send(work)

    def wait(self, cancelled: threading.Event | None = None, poll_s: float = 0.2) -> str | None:
        """None once the child has filled the caches; otherwise why not, in one line. Returns
        early ("cancelled") when `cancelled` is set."""
        while True:
            if cancelled is not None and cancelled.is_set():
                self.kill()
                return "cancelled"
            try:
                if self._conn.poll(poll_s):
                    kind, value = self._conn.recv()
                    break
            except (EOFError, OSError):  # it ended without a word
                self.proc.wait()
                return f"the compile process ended (exit code {self.proc.returncode})"
        self._conn.close()  # it has said all it will, and exits on its own
        if kind == "done":
            self.seconds = value
            return None
        return value

    def kill(self) -> None:
        """End the child (done or not) and reap it; safe to call again, from any thread."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        try:
            self._conn.close()
        except OSError:  # closed by another thread meanwhile
            pass


UNITS = (("_actor_pass", "_actor_loss"), ("_critic_out", "_critic_loss"), ("adams",),
         ("_inputs", "_target"))
"""The update's frames as SAC.compile names them (its PIECES and ADAMS; this module does not
import torch), in the units one compile process takes whole, the heaviest first. The target
compiles beside the inputs' normalization: fed by the eager one (compiled in another process),
it saw other input strides, and the learner's own compile missed its cache entry. The two Adams
are one function: the second one's sizes make Dynamo recompile it, so they compile together.
On this CPU the splits into 2 and 4 then left the learner's compile no miss (the plain SAC and
configs/humanoid.yaml's family, by hand; the suite runs 1 and 2 for the plain SAC,
tests/learner/test_compile_proc.py)."""


def shares(n: int) -> list[tuple[str, ...]]:
    """The frames each of `n` compile processes compiles (n is capped at one unit each)."""
    n = max(1, min(n, len(UNITS)))
    return [tuple(f for unit in UNITS[i::n] for f in unit) for i in range(n)]


class CompileGroup:
    """`learner.compile_processes` > 1: that many children, each compiling its share of the
    frames into the same caches at once; the interface of one CompileProcess. Inductor's
    kernel-compile workers are split between them (TORCHINDUCTOR_COMPILE_THREADS, unless set)."""

    def __init__(self, cfg: LearnerConfig, obs_shape: tuple[int, ...], action_dim: int,
                 action_low, action_high, n: int, device: str | None = None, warmup: int = 3):
        env = dict(os.environ)
        env.setdefault("TORCHINDUCTOR_COMPILE_THREADS", str(max(1, (os.cpu_count() or 1) // n)))
        self.children = [CompileProcess(cfg, obs_shape, action_dim, action_low, action_high,
                                        device, warmup, pieces=share, env=env)
                         for share in shares(n)]
        self.seconds: float | None = None  # the slowest child's compile and warm-up, once done

    @property
    def procs(self) -> list:
        return [c.proc for c in self.children]

    def wait(self, cancelled: threading.Event | None = None, poll_s: float = 0.2) -> str | None:
        """None once every child has filled its share; otherwise the first one's reason (the
        others are ended: the learner then compiles on its own thread)."""
        for child in self.children:
            why = child.wait(cancelled, poll_s)
            if why is not None:
                self.kill()
                return why
        self.seconds = max(c.seconds for c in self.children)
        return None

    def kill(self) -> None:
        for child in self.children:
            child.kill()


def _orphaned(conn: Connection) -> None:
    """The child's watch: the learner closing the pipe (or dying) ends the child."""
    try:
        conn.recv()
    except (EOFError, OSError):
        pass
    os._exit(0)


def main(fd: int) -> None:
    """The child: build a twin of the learner's update and compile and warm it up."""
    conn = Connection(fd)
    try:
        work = conn.recv()
    except (EOFError, OSError):  # the learner went away before this process read its work
        return
    threading.Thread(target=_orphaned, args=(conn,), daemon=True).start()
    try:
        t0 = time.perf_counter()
        from herd.learner.config import LearnerConfig
        from herd.learner.graphed import configure_backends, warm_twin
        from herd.learner.precompile import small_update
        from herd.learner.service import pick_device

        cfg = LearnerConfig(**work["cfg"])
        device = pick_device(work["device"])
        configure_backends(device, cfg.tf32)
        twin, ring = small_update(cfg, work["obs_shape"], work["action_dim"], work["low"],
                                  work["high"], device)
        t1 = time.perf_counter()
        pieces = work.get("pieces")
        warm_twin(twin, ring, cfg.updates_per_call, cfg.compile_mode, work["warmup"], pieces)
        seconds = time.perf_counter() - t1
        what = "" if pieces is None else f" ({', '.join(pieces)})"
        print(f"herd learner: the compile process filled the caches{what} in {seconds:.1f} s "
              f"(+{t1 - t0:.1f} s of imports and build)", file=sys.stderr, flush=True)
        conn.send(("done", seconds))
    except BaseException as e:  # noqa: BLE001  (the learner logs it and compiles on its own)
        try:
            conn.send(("error", f"{type(e).__name__}: {e}".strip().splitlines()[0]))
        except OSError:  # the learner is gone
            pass
