"""A wind-down with a deadline: `herd down` stops each job with a grace time, after which the
cluster goes. The networks are saved first (small, seconds at most); the replay buffer only in
the time that is left, else it is left out and the summary says so; the final evaluation only
while time is left, else the summary says it was skipped.

Without a grace (`herd stop`, a budget reached), the wind-down is as before: the checkpoint with
its replay (run.save_replay), then the final evaluation, however long they take.
"""

from __future__ import annotations

import time

import ray

from herd.ray_errors import one_line

SUMMARY_RESERVE_S = 5.0
"""Of the grace, what is kept for the summary, metrics and the driver's exit after the saves."""


class Grace:
    """The wind-down's deadline (None: no deadline) and what it cost, for summary.json."""

    def __init__(self, grace_s: float | None = None, asked_at: float | None = None):
        self.grace_s = grace_s
        self.deadline = None
        if grace_s is not None:
            waited = max(0.0, time.time() - asked_at) if asked_at else 0.0
            self.deadline = time.monotonic() + float(grace_s) - waited
        self.replay_left_out: str | None = None
        self.final_eval_skipped: str | None = None

    @classmethod
    def of_status(cls, st: dict) -> Grace:
        """From the controller's status: the grace a stop request carried (`stop_why`)."""
        why = st.get("stop_why") or {}
        return cls(why.get("grace_s"), why.get("asked_at"))

    def left(self) -> float | None:
        """Seconds left before the deadline, less SUMMARY_RESERVE_S (None: no deadline)."""
        if self.deadline is None:
            return None
        return self.deadline - time.monotonic() - SUMMARY_RESERVE_S

    def cap(self, seconds: float) -> float:
        """`seconds`, or what is left of the grace when that is less (never below 1)."""
        left = self.left()
        return seconds if left is None else max(1.0, min(seconds, left))

    def save(self, watch, learner, ckpt_dir: str, save_replay: bool) -> None:
        """The final checkpoint. With a deadline and save_replay: the networks first, then the
        networks with the replay while the grace lasts; OSError as LearnerWatch.call raises it."""
        if self.deadline is None or not save_replay:
            watch.call("save", ckpt_dir, save_replay)
            return
        watch.call("save", ckpt_dir, False)
        left = self.left()
        if left is None or left < 1.0:
            self.replay_left_out = f"no time left of the {self.grace_s:g} s grace"
            return
        try:
            ray.get(learner.save.remote(ckpt_dir, True), timeout=left)
        except ray.exceptions.GetTimeoutError:
            self.replay_left_out = f"not saved within the {self.grace_s:g} s grace"
        except Exception as e:  # noqa: BLE001 -- the networks are saved: the replay is extra
            self.replay_left_out = f"its save failed ({one_line(e)})"
        if self.replay_left_out:
            print(f"[herd] replay buffer left out of the final checkpoint: {self.replay_left_out}",
                  flush=True)

    def evaluate(self, periodic, weights) -> dict:
        """The final checkpoint's evaluation (PeriodicEvals.final), skipped when the grace has
        no time for it: then its mean_return is None and `skipped` says why."""
        left = self.left()
        if left is not None and left < 1.0:
            self.final_eval_skipped = f"no time left of the {self.grace_s:g} s grace"
        else:
            try:
                return periodic.final(weights, timeout=left)
            except ray.exceptions.GetTimeoutError:
                self.final_eval_skipped = f"not done within the {self.grace_s:g} s grace"
        print(f"[herd] final evaluation skipped: {self.final_eval_skipped}", flush=True)
        return {"mean_return": None, "episodes": 0, "policy_version": None,
                "skipped": self.final_eval_skipped}

    def record(self) -> dict | None:
        """summary.json's `wind_down`: the grace and what did not fit (None without a grace)."""
        if self.grace_s is None:
            return None
        return {"grace_s": self.grace_s, "replay_left_out": self.replay_left_out,
                "final_eval_skipped": self.final_eval_skipped}
