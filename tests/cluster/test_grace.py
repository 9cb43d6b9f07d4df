"""The wind-down under `herd down`'s grace (herd.grace), its learner and evaluator stood in for:
the networks saved first, the replay only while the grace lasts (else left out, and said), the
final evaluation skipped when no time is left; without a grace, the wind-down as before. The
real wind-down: tests/cluster/test_local_up.py."""

from __future__ import annotations

import time

import pytest
import ray

from herd import grace as grace_mod
from herd.grace import Grace


class Watch:
    def __init__(self):
        self.calls = []

    def call(self, method, *args):
        self.calls.append((method, *args))


class Method:
    """A Ray actor method: .remote(*args) records its arguments."""

    def __init__(self):
        self.asked: list[tuple] = []

    def remote(self, *args):
        self.asked.append(args)
        return "ref"


class Learner:
    save = Method()


def test_without_a_grace_the_checkpoint_holds_the_replay():
    watch = Watch()
    g = Grace()
    g.save(watch, Learner, "ckpt", True)
    assert watch.calls == [("save", "ckpt", True)] and g.record() is None


def test_the_networks_first_then_the_replay_while_the_grace_lasts(monkeypatch):
    watch, Learner.save = Watch(), Method()
    seen = {}
    monkeypatch.setattr(grace_mod.ray, "get", lambda ref, timeout: seen.setdefault("timeout", timeout))
    g = Grace(60, time.time() - 10)  # asked 10 s ago
    g.save(watch, Learner, "ckpt", True)
    assert watch.calls == [("save", "ckpt", False)] and Learner.save.asked == [("ckpt", True)]
    assert 40 < seen["timeout"] <= 45  # 60 - 10 waited - 5 kept for the summary
    assert g.record() == {"grace_s": 60, "replay_left_out": None, "final_eval_skipped": None}


def test_a_replay_that_does_not_fit_is_left_out_and_said(monkeypatch, capsys):
    def too_slow(ref, timeout):
        raise ray.exceptions.GetTimeoutError("slow")

    monkeypatch.setattr(grace_mod.ray, "get", too_slow)
    g = Grace(60)
    g.save(Watch(), Learner, "ckpt", True)
    assert g.record()["replay_left_out"] == "not saved within the 60 s grace"
    assert "replay buffer left out of the final checkpoint" in capsys.readouterr().out
    spent = Grace(5)  # all of it kept for the summary: no replay, no final evaluation
    spent.save(Watch(), Learner, "ckpt", True)
    assert spent.replay_left_out == "no time left of the 5 s grace"
    ev = spent.evaluate(None, None)
    assert ev["mean_return"] is None and ev["skipped"] == "no time left of the 5 s grace"


def test_a_stop_request_carries_its_grace():
    g = Grace.of_status({"stop_why": {"why": "x", "grace_s": 30, "asked_at": time.time() - 10}})
    assert g.left() == pytest.approx(15, abs=1)
    assert Grace.of_status({"stop_why": {}}).left() is None and Grace().cap(300) == 300
