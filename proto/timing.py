"""Process clocks every component reports in its start-up timeline (cluster/startup.py reads
them): here, beside the wire contract, because the learner and the actors both use them and
neither may import the job layer."""

from __future__ import annotations

import os
import time


def process_started() -> float | None:
    """When this process began (unix time; Linux /proc, None elsewhere): what came before its
    first line of Python (Ray forking a worker, the interpreter's start) counts too."""
    try:
        with open("/proc/self/stat") as f:
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])  # field 22: starttime
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return time.time() - uptime + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None
