"""What a Ray worker of a `herd up` cluster imports before it takes work (Ray's
preload_python_modules, local.PRELOAD_ENV): it starts torch, NumPy, gRPC, Gymnasium and MuJoCo
importing in a background thread, and returns at once.

Ray prestarts its workers (local.warm_up), so a job's learner can land in a process whose torch
is already imported. A worker started for a job takes its work at once: its own imports then
wait for what the thread has half done, not for the thread as a whole. (Importing these before
the worker takes work, Ray's way, made the 2-core box's first update 5 s later: every fresh
worker, the job supervisor's too, imported torch before doing anything.)

Third-party libraries only: Herd's own modules would stay at the version the cluster started
with, and an upgraded torch needs `herd down` / `herd up` anyway.
"""

from __future__ import annotations

import contextlib
import importlib
import threading

MODULES = ("torch", "numpy", "grpc", "gymnasium", "mujoco")


def load() -> None:
    for name in MODULES:
        # a worker that cannot import it finds out when it needs it, with the real error
        with contextlib.suppress(Exception):
            importlib.import_module(name)


threading.Thread(target=load, name="herd-preload", daemon=True).start()
