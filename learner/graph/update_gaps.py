"""The longest pauses in the update stream that the learner itself caused.

A pause runs from the moment an update could have started to the end of the next update: from
the end of the update before, when the replay limiter lets the next one go at once, else from
the first moment it does (waiting for rows is the actors' pace, not a pause). So a swap of
graphs, a checkpoint holding the model lock, ingest, publishing or a thread starved of the GIL
all show; the first update's own time does not (it is the start-up timeline's first_update).

The training thread (learner/trainer.py) calls ready() at each loop top where the limiter
allows an update, blocked() where it does not, and done() after each update. Reads from other
threads see floats, written whole.
"""

from __future__ import annotations

import time

STARTUP_WINDOW_S = 90.0
"""How long after the first update the start-up's longest pause is taken over: the compiled
graph's swap comes within it (the target: within the first minute after submit)."""


class UpdateGaps:
    def __init__(self, window_s: float = STARTUP_WINDOW_S, clock=time.monotonic):
        self.window_s, self.clock = window_s, clock
        self.first: float | None = None  # the first update's end
        self.since: float | None = None  # when the next update could have started
        self.max_s = 0.0  # over the run so far
        self.startup_s = 0.0  # over the first window_s after the first update
        self.startup_at_s: float | None = None  # when that one ended, seconds after the first update

    def ready(self) -> None:
        if self.since is None:
            self.since = self.clock()

    def blocked(self) -> None:
        self.since = None

    def done(self) -> None:
        now = self.clock()
        if self.first is None:
            self.first = now
        elif self.since is not None:
            gap = now - self.since
            self.max_s = max(self.max_s, gap)
            after = now - self.first
            if after <= self.window_s and gap > self.startup_s:
                self.startup_s, self.startup_at_s = gap, after
        self.since = now

    def stats(self) -> dict:
        """startup_update_gap_s (and _at_s: seconds after the first update that it ended),
        max_update_gap_s: the longest pauses, rounded to the millisecond."""
        at = self.startup_at_s
        return {"startup_update_gap_s": round(self.startup_s, 3),
                "startup_update_gap_at_s": None if at is None else round(at, 2),
                "max_update_gap_s": round(self.max_s, 3)}
