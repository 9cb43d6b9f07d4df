"""A pixel replay that would not fit its device's memory is capped to what does, with one line
saying so (in the log, the status and so the job's summary), never an out-of-memory crash; a
replay that cannot hold even min_size rows is refused in one line."""

from __future__ import annotations

import logging

import pytest

from herd.learner.learner import Learner
from herd.learner.replay.fit import GIB, available_bytes, fit_capacity
from herd.learner.replay.frames import default_frame_capacity, layout_bytes
from tests.learner.test_frame_learner import ACTION, FRAME, pixel_spec, small_cfg


def frame_bytes(n: int) -> int:
    return layout_bytes(n, default_frame_capacity(n), FRAME, ACTION)


def test_fit_caps_to_the_largest_capacity_that_fits():
    budget = frame_bytes(600_000) + 1
    fit = fit_capacity(1_000_000, frame_bytes, budget, "a test's budget", at_least=5_000)
    assert fit.capacity < 1_000_000 and frame_bytes(fit.capacity) <= budget < frame_bytes(fit.capacity + 1)
    assert fit.asked == 1_000_000 and "capped to" in fit.note and "a test's budget" in fit.note
    same = fit_capacity(1_000, frame_bytes, frame_bytes(1_000), "x")
    assert same.capacity == 1_000 and same.note is None


def test_fit_refuses_below_min_size_in_one_line():
    with pytest.raises(ValueError, match="the replay does not fit: 5,000 transitions need") as e:
        fit_capacity(1_000_000, frame_bytes, frame_bytes(100), "learner.replay.memory_gib=0.001",
                     at_least=5_000)
    assert "\n" not in str(e.value)


def test_memory_gib_is_the_budget_and_the_cpu_has_one():
    assert available_bytes("cpu", 0.5) == (GIB // 2, "learner.replay.memory_gib=0.5")
    free, where = available_bytes("cpu", None)
    assert free > 0 and "available" in where


def test_a_pixel_learner_over_its_memory_limit_starts_capped(caplog):
    """84x84-like sizes are not needed: a 24x24 replay of 100k rows (~0.5 GiB) against a
    memory limit of 0.05 GiB."""
    limit = 0.05
    with caplog.at_level(logging.WARNING, logger="herd.learner"):
        cfg = small_cfg().model_copy(update={"replay": small_cfg().replay.model_copy(
            update={"capacity": 100_000, "memory_gib": limit})})
        lrn = Learner(cfg, pixel_spec())
    try:
        st = lrn.status_dict()
        assert 32 <= st["replay_capacity"] < 100_000 and st["replay_capacity_asked"] == 100_000
        assert lrn.buffer.nbytes <= limit * GIB
        assert st["replay_capacity_note"].startswith("learner.replay.capacity 100,000 needs")
        assert any("capped to" in r.getMessage() for r in caplog.records)
    finally:
        lrn.stop()
