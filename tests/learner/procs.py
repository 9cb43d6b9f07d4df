"""This test process's children, read from /proc (Linux)."""

from __future__ import annotations

import os
from pathlib import Path


def alive(pid: int) -> bool:
    """`pid` exists and is not a zombie (a zombie has gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def children_running(marker: bytes) -> list[int]:
    """Live children of this process whose command line holds `marker`."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if (entry.name.isdigit() and marker in (entry / "cmdline").read_bytes()
                    and int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == os.getpid()
                    and alive(int(entry.name))):
                found.append(int(entry.name))
        except (OSError, ValueError):
            pass
    return found
