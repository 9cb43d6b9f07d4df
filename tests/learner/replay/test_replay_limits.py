"""Replay and limiter settings that would freeze or starve a learner are refused when its config
is built (sizes against capacity: when the job's is), each with one line; every setting accepted
leaves the limiter a move at every step (learner/replay/table.py RateLimiter), whatever the sizes
of inserts and update calls."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from herd.learner.config import LearnerConfig, ReplayConfig
from herd.learner.replay.table import RateLimiter


class Ring:
    def __init__(self, capacity: int):
        self.capacity, self.size, self.inserted = capacity, 0, 0

    def add(self, rows: int) -> None:
        self.inserted += rows
        self.size = min(self.capacity, self.inserted)


@pytest.mark.parametrize(("fields", "match"), [
    ({"ratio": 1.0, "ratio_tolerance": 0, "min_size": 1_000}, "ratio_tolerance is 0 with a replay ratio"),
    ({"ratio": float("inf")}, "ratio must be a finite number"),
    ({"capacity": 1_000, "min_size": 500, "ratio": 1e-4}, "less than one update per 1000 inserted rows"),
])
def test_settings_that_freeze_or_starve_the_learner_are_refused(fields, match):
    with pytest.raises(ValidationError, match=match) as e:
        LearnerConfig.flat(**fields)
    (err,) = e.value.errors()
    assert "\n" not in err["msg"]


@pytest.mark.parametrize(("replay", "match"), [
    ({"ratio_tolerance": 0}, "learner.replay: ratio_tolerance is 0 with a replay ratio"),
    ({"capacity": 1_000, "min_size": 5_000}, r"min_size \(5000\) exceeds learner.replay.capacity"),
    ({"capacity": 1_000, "min_size": 500, "batch_size": 2_000}, "batch_size exceeds"),
])
def test_a_job_config_refuses_them_in_one_line(replay, match):
    from herd.config import ConfigError, parse_config

    with pytest.raises(ConfigError, match=match) as e:
        parse_config({"env": {"id": "Hopper-v5"}, "learner": {"replay": replay}})
    assert "\n" not in str(e.value)


def test_tolerance_zero_froze_the_limiter_after_min_size():
    """What the refused setting did: ratio 1, min_size 1,000, tolerance 0: after the 1,000th row
    neither an insert nor an update may go."""
    lim, ring = RateLimiter(1.0, 0, 1_000), Ring(10_000)
    ring.add(1_000)
    assert lim.allows(ring, 0) == (False, False)


def test_no_pacing_needs_no_tolerance():
    assert LearnerConfig.flat(ratio=None, ratio_tolerance=0).replay.ratio_tolerance == 0


@settings(max_examples=150, deadline=None)
@given(ratio=st.one_of(st.none(), st.floats(1e-3, 64.0)), tolerance=st.integers(0, 50),
       capacity=st.integers(1_000, 5_000), min_size=st.integers(1, 6_000),
       batch=st.integers(1, 300), per_call=st.integers(1, 16))
def test_every_accepted_setting_leaves_the_limiter_a_move(ratio, tolerance, capacity, min_size,
                                                          batch, per_call):
    try:
        cfg = ReplayConfig(ratio=ratio, ratio_tolerance=tolerance, capacity=capacity,
                           min_size=min_size, batch_size=2)
    except ValidationError:
        return
    if min_size > capacity:  # the job config's refusal (a learner built for one update keeps it)
        return
    lim, ring, updates = RateLimiter(cfg.ratio, cfg.ratio_tolerance, cfg.min_size), Ring(capacity), 0
    for _ in range(2 * capacity // batch + 400):
        may_insert, may_update = lim.allows(ring, updates)
        assert may_insert or may_update, (ring.inserted, updates)
        if may_insert:
            ring.add(batch)
        if may_update:
            updates += per_call
    assert updates > 0  # learning started
