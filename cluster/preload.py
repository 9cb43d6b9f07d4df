"""What a Ray worker of a `herd up --preload` cluster imports before it takes work (Ray's
preload_python_modules, local.PRELOAD_ENV): it starts torch, NumPy, gRPC, Gymnasium and MuJoCo
importing in a background thread, and returns at once.

Ray prestarts its workers (local.warm_up), so a job's learner can land in a process whose torch
is already imported. A worker started for a job takes its work at once: its own imports then
wait for what the thread has half done, not for the thread as a whole. (Importing these before
the worker takes work, Ray's way, made the 2-core box's first update 5 s later: every fresh
worker, the job supervisor's too, imported torch before doing anything.)

With $HERD_PRELOAD_DIR set (local.up sets it), the worker leaves `<pid>.start` there as it
begins and `<pid>.done` once every import has ended, so that `herd up` can return once the
workers it prestarted are warm (local.finish_preload): a job submitted while 16 workers were
still importing torch had its driver start 2.4 s later (bench/results/startup-nvidia-h200.json).
Workers that start after that (a job's supervisor, its actors beyond the prestarted ones) do
not preload (local.WARMING).

Third-party libraries only: Herd's own modules would stay at the version the cluster started
with, and an upgraded torch needs `herd down` / `herd up` anyway.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import threading
from pathlib import Path

from herd.local import PRELOAD_DIR_ENV, WARMING, preload_default

MODULES = ("torch", "numpy", "grpc", "gymnasium", "mujoco")
COMPILER = ("torch._inductor.compile_fx", "triton")
"""Where a GPU shows, also torch.compile's own imports (Dynamo, Inductor, SymPy, Triton: 2.9 s
after torch on the 2-core box), which the learner's first compile otherwise makes on its own
thread while the actors fill the cores, and whose files a just-started GPU box reads cold."""


def modules(gpu: bool) -> tuple[str, ...]:
    return MODULES + COMPILER if gpu else MODULES


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
    for name in modules(preload_default()):
        # a worker that cannot import it finds out when it needs it, with the real error
        with contextlib.suppress(Exception):
            importlib.import_module(name)
    done.set()
    mark("done")


def wanted() -> bool:
    """Without $HERD_PRELOAD_DIR, always; with it, only while `herd up` waits (local.WARMING)."""
    folder = os.environ.get(PRELOAD_DIR_ENV)
    return not folder or (Path(folder) / WARMING).exists()


# not a daemon: a process that ends while torch or MuJoCo is half imported must wait for the
# import (a few seconds at most); a daemon thread there made the interpreter's exit segfault
if wanted():
    threading.Thread(target=load, name="herd-preload").start()
else:
    done.set()
