"""The learner as the driver sees it: a slow learner told from a dead one, Ray's restarts of it
ridden out and counted (what each cost since the checkpoint it restored)."""

from __future__ import annotations

import time

import ray
from ray.exceptions import GetTimeoutError, RayActorError

try:
    from ray.exceptions import ActorUnavailableError
    LEARNER_DOWN = (RayActorError, ActorUnavailableError, GetTimeoutError)
except ImportError:  # older Ray
    LEARNER_DOWN = (RayActorError, GetTimeoutError)


class LearnerWatch:
    """Tells a slow learner from a dead one and keeps the books on restarts."""

    def __init__(self, learner, timeout_s: float, start: float):
        self.learner, self.timeout_s, self.start = learner, timeout_s, start
        self.learner_id: str | None = None
        self.last: dict = {}  # newest good status before a crash
        self.down_since: float | None = None
        self.restarts: list[dict] = []

    def observe(self, ls: dict, now: float) -> dict | None:
        """A usable learner status (`ls`, or a fresh one when the controller's call failed), or
        None while the learner is down; records a restart when the learner's id changed."""
        if "error" in ls:
            try:  # ask it directly: the controller may have hit the dying process
                ls = ray.get(self.learner.status_dict.remote(), timeout=10)
            except LEARNER_DOWN:
                if self.down_since is None:
                    self.down_since = now
                    print(f"[herd] learner unreachable ({ls['error']}); waiting for Ray to "
                          "restart it", flush=True)
                if now - self.down_since > self.timeout_s:
                    raise RuntimeError(f"the learner stayed down for {self.timeout_s:.0f}s") from None
                return None
            # anything else (its training thread failed) propagates: not a crash to ride out
        if self.learner_id is not None and ls["learner_id"] != self.learner_id:
            self._restarted(ls, now)
        self.learner_id, self.down_since = ls["learner_id"], None
        self.last = ls
        return ls

    def _restarted(self, ls: dict, now: float) -> None:
        ck = ls.get("restored") or {"updates": 0, "received": 0, "inserted": 0, "path": None}
        rec = {
            "at_s": round(now - self.start, 1),
            "down_s": round(now - (self.down_since or now), 1),
            "checkpoint": ck.get("path"),
            "replay": ck.get("replay", "absent"),
            "checkpoint_updates": ck["updates"],
            "checkpoint_received": ck["received"],
            "last_seen_updates": self.last.get("updates", 0),
            "last_seen_received": self.last.get("received", 0),
        }
        # Lower bounds: the learner may have gone on for up to one status poll after last_seen.
        rec["updates_lost"] = max(0, rec["last_seen_updates"] - ck["updates"])
        rec["transitions_lost"] = max(0, rec["last_seen_received"] - ck["received"])
        self.restarts.append(rec)
        print(f"[herd] learner restarted from {ck.get('path') or 'scratch'}: lost >= "
              f"{rec['updates_lost']} updates and >= {rec['transitions_lost']} transitions "
              "since that checkpoint", flush=True)

    def call(self, method: str, *args, timeout: float | None = None):
        """A learner call that waits out a restart (the restarted learner answers it)."""
        deadline = time.monotonic() + (timeout or self.timeout_s)
        while True:
            try:
                return ray.get(getattr(self.learner, method).remote(*args), timeout=30)
            except LEARNER_DOWN:
                if time.monotonic() > deadline:
                    raise
                time.sleep(1)
