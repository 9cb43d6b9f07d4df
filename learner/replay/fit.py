"""A replay capacity that fits the learner's device: capped to its free memory, never an OOM.

The ring is preallocated whole when the learner starts. Before that, `fit_capacity` compares its
bytes at the config's capacity with what the device can give it: learner.replay.memory_gib when
set, else the device's free memory less a reserve for the networks, the update's activations and
its CUDA graph (`RESERVE_GIB`, or `RESERVE_FRACTION` of the card, the larger). Where it does not
fit, the capacity is the largest that does, and one line says so; the learner's status and the
job's summary carry that line (replay_capacity_note) beside the capacity asked for.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

RESERVE_GIB = 4.0
RESERVE_FRACTION = 0.1
GIB = 2**30


@dataclass(frozen=True)
class Fit:
    capacity: int
    asked: int
    bytes: int
    available: int
    note: str | None  # None: the capacity asked for fits


def available_bytes(device: torch.device, memory_gib: float | None) -> tuple[int, str]:
    """Bytes the replay may take on `device`, and where that figure comes from (for the note)."""
    if memory_gib is not None:
        return int(memory_gib * GIB), f"learner.replay.memory_gib={memory_gib:g}"
    device = torch.device(device)
    if device.type == "cuda":
        free, total = torch.cuda.mem_get_info(device)
        reserve = max(RESERVE_GIB * GIB, RESERVE_FRACTION * total)
        name = torch.cuda.get_device_name(device)
        return max(0, int(free - reserve)), (f"{name} has {free / GIB:.1f} GiB free, "
                                             f"{reserve / GIB:.1f} GiB kept for the update")
    free = _mem_available()
    reserve = max(RESERVE_GIB * GIB, RESERVE_FRACTION * free)
    return max(0, int(free - reserve)), (f"this node has {free / GIB:.1f} GiB available, "
                                         f"{reserve / GIB:.1f} GiB kept for the learner")


def _mem_available() -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 2**62  # no /proc/meminfo: nothing to cap against


def fit_capacity(asked: int, bytes_of: Callable[[int], int], available: int, where: str,
                 at_least: int = 1) -> Fit:
    """The largest capacity <= `asked` whose `bytes_of` fits in `available` bytes (bytes_of grows
    with the capacity); below `at_least` rows it refuses in one line."""
    need = bytes_of(asked)
    if need <= available:
        return Fit(asked, asked, need, available, None)
    lo, hi = 0, asked  # bytes_of(lo) fits (or lo is 0), bytes_of(hi) does not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if bytes_of(mid) <= available else (lo, mid)
    if lo < at_least:
        raise ValueError(f"the replay does not fit: {at_least:,} transitions need "
                         f"{bytes_of(at_least) / GIB:.2f} GiB and {where} leaves "
                         f"{available / GIB:.2f} GiB; lower learner.replay.min_size or free memory")
    note = (f"learner.replay.capacity {asked:,} needs {need / GIB:.1f} GiB; {where}: capped to "
            f"{lo:,} transitions ({bytes_of(lo) / GIB:.1f} GiB)")
    return Fit(lo, asked, bytes_of(lo), available, note)
