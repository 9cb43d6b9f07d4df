"""The start-up timeline's first_compiled_update: the learner's own time of its first graph
replay (first_compiled_unix), not a copy of first_update: on CUDA the first updates are eager
while the graph compiles in the background (learner/graph/capture.py)."""

from __future__ import annotations

import time

from herd.startup import Timeline


def learner(updates: int, compiled_at: float | None, device: str = "cuda:0") -> dict:
    return {"learner": {"inserted": 64, "updates": updates, "device": device,
                        "first_compiled_unix": compiled_at, "eager_updates": updates},
            "actors": []}


def test_first_compiled_update_is_the_learners_time_of_the_swap() -> None:
    tl = Timeline(time.time())
    tl.compiled = True
    tl.observe(learner(40, None))  # eager updates, the graph still compiling
    assert "first_update" in tl.marks and "first_compiled_update" not in tl.marks
    swapped = time.time() + 0.5
    tl.observe(learner(9000, swapped))  # polled later than the swap: its time, not the poll's
    tl.observe(learner(20000, swapped + 9))
    assert tl.marks["first_compiled_update"] == swapped
    out = tl.seconds(capture_s=41.0, graph_swap_s=2.5, eager_updates=3000, graph_error=None)
    assert out["first_compiled_update_s"] > out["first_update_s"]
    assert out["graph_swap_s"] == 2.5 and "graph_error" not in out  # None: left out


def test_a_graph_ready_before_the_first_update_is_both() -> None:
    tl = Timeline(time.time())
    tl.compiled = True
    at = time.time() - 0.2  # the first call was the graph's; the poll came 0.2 s later
    tl.observe(learner(8, at))
    assert tl.marks["first_update"] == tl.marks["first_compiled_update"] == at


def test_no_graph_no_mark() -> None:
    for device in ("cpu", "cuda:0"):  # the CPU; a learner that gave its graph up
        tl = Timeline(time.time())
        tl.compiled = True
        tl.observe(learner(100, None, device))
        assert "first_update" in tl.marks and "first_compiled_update" not in tl.marks
        assert tl.seconds()["first_compiled_update_s"] is None


def test_the_final_status_marks_a_swap_after_the_last_poll() -> None:
    tl = Timeline(time.time())
    tl.compiled = True
    tl.observe(learner(100, None))
    at = time.time()
    tl.observe_graph({"updates": 5000, "device": "cuda:0", "first_compiled_unix": at})
    assert tl.marks["first_compiled_update"] == at


def test_first_rows_and_update_are_the_learners_own_times() -> None:
    """A poll comes up to a quarter second (plus its round trip) after the fact: the marks are
    the training thread's times, where the learner reports them."""
    tl = Timeline(time.time())
    rows_at, update_at = time.time() - 0.6, time.time() - 0.4
    st = learner(8, None, "cpu")
    st["learner"]["startup_unix"] = {"first_rows": rows_at, "first_update": update_at}
    tl.observe(st)
    assert tl.marks["first_rows"] == rows_at and tl.marks["first_update"] == update_at
    tl = Timeline(time.time())
    before = time.time()
    tl.observe(learner(8, None, "cpu"))  # a learner without them: the poll's time
    assert tl.marks["first_rows"] >= before and tl.marks["first_update"] >= before
