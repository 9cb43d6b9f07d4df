"""The driver's deterministic evaluations: one under way at a time, every `eval_every_s` once
the learner has updated, on an Evaluator actor started at the first update; the best one's
policy (best_policy.pb) and full state (checkpoint-best/) kept as the run goes; the one under
way at the stop finished and kept; then the final checkpoint's own evaluation. Each record is
the evaluator's (mean_return, mean_contact_cost, ...) stamped with when its policy was taken."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import ray
from ray.exceptions import ActorUnavailableError, RayActorError

from herd.ray_errors import one_line

BEST_POLICY = "best_policy.pb"
BEST_CHECKPOINT, CANDIDATE = "checkpoint-best", ".checkpoint-candidate"
EVAL_WAIT_S = 300.0  # at the stop, the longest an evaluation under way is waited for


def keep_best_policy(run_dir: Path, weights) -> None:
    """The best-evaluated policy as a serialized PolicyWeights message (atomic write)."""
    tmp = run_dir / (BEST_POLICY + ".tmp")
    tmp.write_bytes(weights.SerializeToString())
    tmp.replace(run_dir / BEST_POLICY)


def keep_best_checkpoint(run_dir: Path) -> None:
    """CANDIDATE becomes checkpoint-best/ (directory renames: atomic, the old best goes last)."""
    best, old = run_dir / BEST_CHECKPOINT, run_dir / ".checkpoint-best-old"
    shutil.rmtree(old, ignore_errors=True)
    if best.exists():
        best.rename(old)
    (run_dir / CANDIDATE).rename(best)
    shutil.rmtree(old, ignore_errors=True)


class PeriodicEvals:
    """`start_evaluator()` makes the Evaluator actor; `watch` is the driver's LearnerWatch;
    `checkpoint_errors` the job's list, to which a failed candidate save is added."""

    def __init__(self, start_evaluator, watch, run_dir: Path, every_s: float, start: float, timeline,
                 checkpoint_errors: list):
        self._start_evaluator, self._watch, self._run_dir = start_evaluator, watch, run_dir
        self._every_s, self._start, self._timeline = every_s, start, timeline
        self._checkpoint_errors = checkpoint_errors
        self.evaluator = None
        self.evals: list[dict] = []  # as recorded in summary.json, in the order taken
        self._pending = None  # (ObjectRef, taken: dict, weights, full state in CANDIDATE)
        self._last = time.monotonic()

    def poll(self, ls: dict, now: float) -> None:
        """Record a finished evaluation; start the evaluator at the first update; take the next
        policy when one is due and none is under way."""
        if self._pending is not None and ray.wait([self._pending[0]], timeout=0)[0]:
            pending, self._pending = self._pending, None
            try:
                self._record(*pending)
            except (RayActorError, ActorUnavailableError) as e:  # its process or node lost:
                # Ray starts the evaluator again (max_restarts), the next evaluation goes on
                print(f"[herd] an evaluation is left out: its evaluator was lost ({one_line(e)})", flush=True)
        if not ls["updates"]:
            return
        if self.evaluator is None:
            self.evaluator = self._start_evaluator()
        if self._pending is None and now - self._last >= self._every_s:
            weights, full_state = self._take()
            taken = {"time_s": now - self._start, "unix_time": time.time(),
                     "env_steps": ls["received"], "updates": ls["updates"]}
            self._pending = (self.evaluator.evaluate.remote(weights), taken, weights, full_state)
            self._last = now

    def finish(self, wait_s: float = EVAL_WAIT_S) -> None:
        """At the stop: the evaluation under way is waited for and kept, not dropped."""
        if self._pending is None:
            return
        pending, self._pending = self._pending, None
        try:
            if not ray.wait([pending[0]], timeout=wait_s)[0]:
                raise TimeoutError(f"not done within {wait_s:g} s")
            ray.get(pending[0])  # the evaluator's own error, if it failed
        except Exception as e:  # noqa: BLE001 -- the checkpoint and summary must still be written
            print(f"[herd] the last periodic evaluation is left out ({one_line(e)})", flush=True)
            return
        self._record(*pending)

    def final(self, weights, timeout: float | None = None) -> dict:
        """The final checkpoint's evaluation; the evaluator goes with it (also when it is not
        done within `timeout` s: GetTimeoutError). A candidate state that was not the best is
        removed first."""
        shutil.rmtree(self._run_dir / CANDIDATE, ignore_errors=True)
        if self.evaluator is None:  # the job ended before its first update
            self.evaluator = self._start_evaluator()
        try:
            return ray.get(self.evaluator.evaluate.remote(weights), timeout=timeout)
        finally:
            ray.kill(self.evaluator)

    def best(self) -> dict | None:
        return max(self.evals, key=lambda e: e["mean_return"], default=None)

    def last_return(self) -> float | None:
        return self.evals[-1]["mean_return"] if self.evals else None

    def last_contact_cost(self) -> float | None:
        """The last evaluation's mean summed contact cost per episode (herd.evaluation), None
        for an env without one: metrics.csv's eval_contact_cost beside eval_return."""
        return self.evals[-1].get("mean_contact_cost") if self.evals else None

    def last_heldout_return(self) -> float | None:
        """The last evaluation's mean return on env.randomize's held-out draws (None without
        env.randomize): metrics.csv's eval_heldout_return beside eval_return."""
        return self.evals[-1].get("heldout_mean_return") if self.evals else None

    def _take(self) -> tuple:
        """The policy to evaluate next and whether its full state is saved beside it (CANDIDATE):
        an evaluation that turns out the run's best then keeps that state as checkpoint-best/, so
        a policy that collapses later cannot take the best one's optimizer and networks with it.
        A failed save (disk full) costs only the candidate: the evaluation goes on."""
        try:
            return self._watch.call("save_for_eval", str(self._run_dir / CANDIDATE)), True
        except OSError as e:
            self._checkpoint_errors.append({"error": one_line(e), "best_candidate": True})
            return self._watch.call("policy_for_eval"), False

    def _record(self, done, taken: dict, weights, full_state: bool) -> None:
        # stamped with when its weights were taken, not when it finished
        self.evals.append({**ray.get(done), **taken})
        self._timeline.mark("first_eval")
        if self.evals[-1]["mean_return"] >= max(e["mean_return"] for e in self.evals):
            keep_best_policy(self._run_dir, weights)
            if full_state:
                keep_best_checkpoint(self._run_dir)
