"""CPU seconds per thread of this process, to see who else ran while the compiled graph was
prepared (its thread waits ~9 s for the GIL or a CPU beside a job on the GPU box).

Linux: /proc/self/task/<tid>/stat's utime + stime; a Python thread goes by its threading name
(herd-train, herd-ingest, ...), any other by its kernel name (gRPC's and CUDA's own threads).
Elsewhere nothing is read and the result is {}.
"""

from __future__ import annotations

import os
import threading

TASKS = "/proc/self/task"


def thread_cpu() -> dict[int, tuple[str, float]]:
    """tid -> (name, CPU seconds so far) of every thread of this process now."""
    names = {t.native_id: t.name for t in threading.enumerate()}
    try:
        tids = os.listdir(TASKS)
        tick = os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, AttributeError):
        return {}
    out = {}
    for tid in tids:
        try:
            with open(f"{TASKS}/{tid}/stat") as f:
                stat = f.read()
            comm, rest = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:].split()
            utime, stime = int(rest[11]), int(rest[12])  # stat fields 14 and 15 (state is field 3)
        except (OSError, ValueError, IndexError):  # the thread ended since the listing
            continue
        out[int(tid)] = (names.get(int(tid), comm), (utime + stime) / tick)
    return out


def cpu_by_thread(before: dict[int, tuple[str, float]], top: int = 6) -> dict[str, float]:
    """CPU seconds each thread ran since `before` (a thread_cpu()), summed by name, the `top`
    largest first and the rest as 'others'; threads that ended since are not counted."""
    by_name: dict[str, float] = {}
    for tid, (name, cpu) in thread_cpu().items():
        by_name[name] = by_name.get(name, 0.0) + cpu - before.get(tid, (name, 0.0))[1]
    ranked = sorted(by_name.items(), key=lambda kv: -kv[1])
    out = {name: round(s, 2) for name, s in ranked[:top] if s > 0}
    rest = sum(s for _, s in ranked[top:])
    if rest > 0:
        out["others"] = round(rest, 2)
    return out
