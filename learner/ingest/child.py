"""A learner's helper process: a fresh interpreter running `learner.<module>.main(fd, ...)`.

Not multiprocessing's spawn, which re-runs the parent's __main__ (a Ray worker's, or a script's
without a main guard). The child inherits its ends of the pipes; the parent closes its copies,
so a pipe ends when either side's process does, however it ends.
"""

from __future__ import annotations

import subprocess
import sys
from multiprocessing.connection import Connection
from pathlib import Path


def start_child(module: str, *child_ends: Connection, env: dict | None = None) -> subprocess.Popen:
    """Start `learner.<module>.main(*fds)` with `child_ends` handed over (closed here); `env`:
    its environment (None: this process's)."""
    fds = tuple(c.fileno() for c in child_ends)
    root = str(Path(__file__).resolve().parents[2])  # the folder that holds learner/
    boot = (f"import sys; sys.path.insert(0, {root!r}); "
            f"from learner.{module} import main; main({', '.join(map(str, fds))})")
    proc = subprocess.Popen([sys.executable, "-c", boot], pass_fds=fds, env=env)
    for c in child_ends:
        c.close()
    return proc
