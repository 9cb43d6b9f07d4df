"""A learner whose __init__ fails: in a plain process it raises; in a Ray actor it keeps the
reason and raises it from the driver's first calls (address, status_dict) instead, because a
threaded Ray actor whose __init__ raises aborts in Ray's C++ TerminateHandler and prints that
crash above the reason (tests/cluster/test_cli_errors.py runs the whole job)."""

from __future__ import annotations

import pytest

from herd.learner import learner
from herd.learner.config import LearnerConfig
from herd.learner.learner import Learner

BAD = dict(device="cpu", compile=True, compile_options={"no_such_setting": 1}, capacity=1_000,
           min_size=1_000, batch_size=8, hidden_sizes=(8, 8), ingest_process="off")
WHY = "torch._inductor has no setting 'no_such_setting'"


def test_outside_ray_the_init_raises(spec) -> None:
    assert not learner._in_ray_actor()
    with pytest.raises(ValueError, match=WHY):
        Learner(LearnerConfig.flat(**BAD), spec)


def test_in_a_ray_actor_the_first_calls_raise_the_reason(spec, monkeypatch) -> None:
    monkeypatch.setattr(learner, "_in_ray_actor", lambda: True)
    lrn = Learner(LearnerConfig.flat(**BAD), spec)
    for call in (lrn.address, lrn.status_dict):
        with pytest.raises(ValueError, match=WHY):
            call()
