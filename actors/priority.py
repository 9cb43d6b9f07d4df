"""An env actor's CPU priority below the learner's (`actors.nice`)."""

from __future__ import annotations

import os


def lower_priority(by: int) -> int:
    """Raise the nice value of every thread of this process by `by` (capped at 19; threads started
    later inherit it from their creator). On Linux a nice value is per thread, so each task in
    /proc/self/task is set; elsewhere os.nice covers the calling thread. Returns the process's
    main-thread nice value after (unchanged when `by` is 0 or the system refuses)."""
    if by <= 0:
        return os.getpriority(os.PRIO_PROCESS, 0)
    try:
        tids = [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        tids = []
    try:
        if not tids:
            os.nice(by)
        for tid in tids:
            try:
                now = os.getpriority(os.PRIO_PROCESS, tid)
                os.setpriority(os.PRIO_PROCESS, tid, min(19, now + by))
            except ProcessLookupError:  # a thread that ended meanwhile
                pass
    except PermissionError:
        pass
    return os.getpriority(os.PRIO_PROCESS, os.getpid())
