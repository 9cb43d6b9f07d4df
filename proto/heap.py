"""glibc heap settings for the processes that move wire messages (actors and the learner).

A fresh process gives every malloc above glibc's mmap threshold (128 KiB at first) its own
mmap, so each 360 KB batch or 650 KB weights message is mapped and zeroed page by page
(~200 minor faults) and unmapped again, every time. glibc raises the threshold only after a
large block has been freed, which importing torch happens to do: whether a process pays
depended on what it had imported. Measured on the 2-core box, serializing one 128-row Humanoid
batch: 480 µs and 211 faults in a fresh process, 48 µs and 1 fault after one 8 MB free.
`steady_heap()` sets both thresholds once, so large blocks are reused from the heap.
"""

from __future__ import annotations

import ctypes
import os

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
OFF_SWITCH = "HERD_STEADY_HEAP"
"""Set to 0 to keep glibc's defaults (bench/actor_cost.py's herd-libc-heap mode)."""


def steady_heap(mmap_threshold: int = 32 << 20, trim_threshold: int = 128 << 20) -> bool:
    """Blocks below `mmap_threshold` come from the heap; the heap's top is given back to the OS
    only past `trim_threshold` free. True when set; False off glibc or when switched off."""
    if os.environ.get(OFF_SWITCH, "1") == "0":
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt  # this process's C library
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to set
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, mmap_threshold)) and bool(mallopt(M_TRIM_THRESHOLD, trim_threshold))
