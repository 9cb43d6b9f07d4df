"""learner/graph/update_gaps.py: the update stream's longest pauses that the learner caused, on a
clock the test moves (the training loop's own measurement is in test_graph_swap.py)."""

from __future__ import annotations

from herd.learner.graph.update_gaps import UpdateGaps


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_a_pause_counts_from_when_an_update_could_start_and_waiting_for_rows_does_not() -> None:
    clock = Clock()
    g = UpdateGaps(window_s=10.0, clock=clock)
    g.ready()
    clock.t += 5.0  # the first update's own time: the start-up timeline's, not a pause
    g.done()
    assert g.stats() == {"startup_update_gap_s": 0.0, "startup_update_gap_at_s": None, "max_update_gap_s": 0.0}
    g.ready()
    clock.t += 0.2  # the next update took 0.2 s from the end of the one before
    g.done()
    assert g.stats()["startup_update_gap_s"] == 0.2 and g.stats()["startup_update_gap_at_s"] == 0.2
    g.blocked()
    clock.t += 3.0  # the limiter waits for rows: the actors' pace
    g.ready()
    clock.t += 0.05
    g.done()
    assert g.stats()["max_update_gap_s"] == 0.2
    g.ready()
    clock.t += 0.7  # the lock held (a swap, a checkpoint) with rows waiting
    g.done()
    assert g.stats() == {"startup_update_gap_s": 0.7, "startup_update_gap_at_s": 3.95, "max_update_gap_s": 0.7}


def test_after_the_start_up_window_only_the_run_s_maximum_moves() -> None:
    clock = Clock()
    g = UpdateGaps(window_s=10.0, clock=clock)
    g.ready()
    g.done()
    g.blocked()
    clock.t += 9.0
    g.ready()
    clock.t += 0.3
    g.done()  # ends 9.3 s after the first update: inside
    g.blocked()
    clock.t += 1.0
    g.ready()
    clock.t += 0.9
    g.done()  # ends 11.2 s after: outside
    s = g.stats()
    assert (s["startup_update_gap_s"], s["startup_update_gap_at_s"], s["max_update_gap_s"]) == (0.3, 9.3, 0.9)
