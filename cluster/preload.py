"""What a Ray worker of a `herd up --preload` cluster imports before it takes work (Ray's
preload_python_modules, local.PRELOAD_ENV): in a spare worker, one started for no job yet
(herd/pool.py), it starts torch, NumPy, gRPC, Gymnasium and MuJoCo importing in a background
thread, and returns at once.

So a job's learner lands in a process whose torch is already imported: the spares `herd up`
starts, and those each job's controller starts again once the job has taken them. A spare
given work at once waits for what the thread has half done, not for the thread as a whole.
(Importing these before the worker takes work, Ray's way, made the 2-core box's first update 5
s later: every fresh worker, the job supervisor's too, imported torch before doing anything.)
A worker Ray starts for a job (RAY_JOB_ID set: its supervisor, its actors beyond the spares)
takes its work bare: preloading in those made the driver start 3 s later and the actors 2.5 s
later on the GPU box (startup-preload-wait-nvidia-h200.json). The import thread runs at a lower
CPU priority: a refill's spares import beside a running job and must not slow it.

With $HERD_PRELOAD_DIR set (local.up sets it), the worker leaves `<pid>.start` there as it
begins and `<pid>.done` once every import has ended, so that `herd up` can return once its
spares are warm (local.finish_preload): a job submitted while 16 workers were still importing
torch had its driver start 2.4 s later (bench/results/startup-nvidia-h200.json).

Third-party libraries only: Herd's own modules would stay at the version the cluster started
with, and an upgraded torch needs `herd down` / `herd up` anyway.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import threading
from pathlib import Path

from herd.local import PRELOAD_DIR_ENV, preload_default

MODULES = ("torch", "numpy", "grpc", "gymnasium", "mujoco")
COMPILER = ("torch._inductor.compile_fx", "triton")
"""Where a GPU shows, also torch.compile's own imports (Dynamo, Inductor, SymPy, Triton: 2.9 s
after torch on the 2-core box), which the learner's first compile otherwise makes on its own
thread while the actors fill the cores, and whose files a just-started GPU box reads cold."""


def modules(gpu: bool) -> tuple[str, ...]:
    return MODULES + COMPILER if gpu else MODULES


NICE = 10
"""The import thread's CPU priority (Linux nice): below a running job's processes."""

done = threading.Event()
"""Set once every module's import has ended (in sys.modules a module is there from its start)."""


def mark(what: str) -> None:
    """<pid>.<what> in $HERD_PRELOAD_DIR, if set; a worker that cannot write it only costs the wait."""
    folder = os.environ.get(PRELOAD_DIR_ENV)
    if folder:
        with contextlib.suppress(OSError):
            (Path(folder) / f"{os.getpid()}.{what}").touch()


def load() -> None:
    mark("start")
    with contextlib.suppress(OSError):  # this thread only (Linux: a thread id is a pid here)
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), NICE)
    for name in modules(preload_default()):
        # a worker that cannot import it finds out when it needs it, with the real error
        with contextlib.suppress(Exception):
            importlib.import_module(name)
    done.set()
    mark("done")


def wanted() -> bool:
    """In a spare (a worker of no job yet, or any process outside Ray); never in a worker Ray
    started for a job."""
    return set(os.environ.get("RAY_JOB_ID", "f")) == {"f"}


# not a daemon: a process that ends while torch or MuJoCo is half imported must wait for the
# import (a few seconds at most); a daemon thread there made the interpreter's exit segfault
if wanted():
    threading.Thread(target=load, name="herd-preload").start()
else:
    done.set()
