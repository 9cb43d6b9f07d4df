"""Supervise: every run.log_every_s the controller's status becomes a metrics row, a line of the
driver's log and the progress `herd status` shows; the learner's restarts are ridden out,
periodic evaluations and checkpoints taken, and the loop ends at a budget, at the target, or
at a stop request (`herd stop`, `herd down`)."""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import ray

from herd.books import ControllerLost
from herd.config import JobConfig
from herd.control import NAMESPACE
from herd.evaluation import Evaluator
from herd.grace import Grace
from herd.job.launch import Launched
from herd.job.watch import LEARNER_DOWN
from herd.job_setup import redacted
from herd.lineage import Lineage
from herd.metrics import MetricsWriter
from herd.periodic_eval import PeriodicEvals
from herd.progress import RATE_WINDOW_S, actor_rates, actor_steps, format_row, progress_row
from herd.ray_errors import one_line
from herd.startup import Timeline
from herd.tracking import open_wandb, provenance


@dataclass
class Supervised:
    """What the supervision leaves to the wind-down and the summary."""

    reason: str
    """summary.json's stop_reason."""
    grace: Grace
    """`herd down`'s deadline for the wind-down (none for any other stop)."""
    periodic: PeriodicEvals
    metrics: LateMetrics
    record: dict
    """The run's provenance (run_record)."""
    checkpoint_errors: list[dict]


def supervise(cfg: JobConfig, job: Launched, lineage: Lineage, timeline: Timeline) -> Supervised:
    """Until the job is to stop; whatever fails here, the job still winds down with its books
    (unless the learner is down: then there is nothing to save or count, and it raises)."""
    record = run_record(cfg, job.job_id, job.run_dir)
    wandb_run = open_wandb(cfg.run.wandb, job.run_dir, job.job_id, record)
    metrics = LateMetrics(lambda: MetricsWriter(job.run_dir, record, wandb_run))
    checkpoint_errors: list[dict] = []

    def start_evaluator():
        return ray.remote(Evaluator).options(
            name=f"{job.job_id}-evaluator", namespace=NAMESPACE, num_cpus=0, max_restarts=-1,
            max_task_retries=2,
        ).remote(cfg.env, cfg.run.eval_episodes, cfg.eval_seed)

    # the evaluator starts at the first update: its process (torch, MuJoCo: seconds of CPU)
    # would otherwise boot beside the learner's and the actors' and slow the way to that update
    periodic = PeriodicEvals(start_evaluator, job.watch, job.run_dir, cfg.run.eval_every_s, job.start,
                             timeline, checkpoint_errors)
    reason, grace = "max_seconds", Grace()
    try:
        reason, grace = Ticks(cfg, job, lineage, timeline, periodic, metrics, checkpoint_errors).run()
    except ControllerLost as e:
        reason = "controller lost"
        print(f"[herd] {e}; the job winds down with the counts it last reported", flush=True)
    except Exception as e:  # whatever failed, the job still ends with its books
        if job.watch.down_since is not None:  # no learner to save or count: nothing to wind down
            raise
        reason = f"error: {one_line(e)}"
        print(f"[herd] supervising the job failed ({one_line(e)}); it winds down", flush=True)
    return Supervised(reason, grace, periodic, metrics, record, checkpoint_errors)


class Ticks:
    """The supervision loop: its rate window and the time of the last periodic checkpoint."""

    def __init__(self, cfg: JobConfig, job: Launched, lineage: Lineage, timeline: Timeline,
                 periodic: PeriodicEvals, metrics: LateMetrics, checkpoint_errors: list[dict]):
        self.cfg, self.job, self.lineage, self.timeline = cfg, job, lineage, timeline
        self.periodic, self.metrics, self.checkpoint_errors = periodic, metrics, checkpoint_errors
        self.last_ckpt = time.monotonic()
        # rates of the first row count from the counters this learner started with (a resumed
        # job's restored ones), not from zero
        restored = job.watch.call("status_dict").get("restored") or {}
        # the first window opens at the job's start: steps the actors delivered while the learner
        # started would otherwise count over the few seconds since this loop began
        self.recent = [(job.start, restored.get("received", 0), restored.get("updates", 0),
                        restored.get("inserted", 0), {})]

    def run(self) -> tuple[str, Grace]:
        """(why the job stops, the grace of its wind-down)."""
        watch = self.job.watch
        while True:
            time.sleep(self.cfg.run.log_every_s)
            st = self.job.link.status()
            if st is None:  # unavailable for a moment: the next tick asks again
                continue
            now, restarts = time.monotonic(), len(watch.restarts)
            ls = watch.observe(st["learner"], now)
            if ls is None:
                continue
            st = {**st, "learner": ls}
            self.timeline.observe(st)
            if len(watch.restarts) > restarts:  # counters went back to the checkpoint's
                self.recent = [(now, ls["received"], ls["updates"], ls["inserted"], self.recent[-1][-1])]
            self.periodic.poll(ls, now)
            self.report(st, ls, now)
            if now - self.last_ckpt >= self.cfg.run.checkpoint_every_s:
                self.checkpoint(now)
            stop = self.stop(st, ls, now)
            if stop is not None:
                return stop

    def report(self, st: dict, ls: dict, now: float) -> None:
        """The tick's row: to metrics.csv, to the controller (`herd status`), to the log."""
        run, periodic = self.cfg.run, self.periodic
        row = progress_row(st, periodic.last_return(), now - self.job.start, self.recent[0])
        row["eval_contact_cost"] = periodic.last_contact_cost()  # beside eval_return
        row["eval_heldout_return"] = periodic.last_heldout_return()
        steps = actor_steps(st["actors"])
        rates = actor_rates(steps, now, self.recent)
        self.recent.append((now, ls["received"], ls["updates"], ls["inserted"], steps))
        while len(self.recent) > 1 and now - self.recent[1][0] >= RATE_WINDOW_S:  # the oldest stays >= W old
            self.recent.pop(0)
        self.metrics.write(self.lineage.row(row), opened=ls["updates"] > 0)
        self.job.link.tell("set_progress", {**row, "max_env_steps": run.max_env_steps,
                                            "max_seconds": run.max_seconds,
                                            "actor_steps_per_s": rates, "unix_time": time.time(),
                                            "start_over": self.timeline.over(ls, now - self.job.start)})
        print(format_row(row), flush=True)

    def checkpoint(self, now: float) -> None:
        """A periodic checkpoint; a failed one is recorded and tried again an interval later."""
        run, job = self.cfg.run, self.job
        try:
            ray.get(job.learner.save.remote(job.ckpt_dir, run.save_replay))
            self.last_ckpt = now
            keep_history(Path(job.ckpt_dir), run.keep_checkpoints)
        except LEARNER_DOWN:  # died while saving: the next poll sees it
            pass
        except OSError as e:  # disk full, say: the learner cleaned up; retry next interval
            self.last_ckpt = now
            self.checkpoint_errors.append({"time_s": round(now - job.start, 1), "error": one_line(e)})
            print(f"[herd] {one_line(e)}; training goes on, next try in "
                  f"{run.checkpoint_every_s:g}s", flush=True)

    def stop(self, st: dict, ls: dict, now: float) -> tuple[str, Grace] | None:
        """Why the job stops after this tick, with its wind-down's grace; None to go on."""
        run = self.cfg.run
        last = self.periodic.last_return()
        if (run.stop_at_target and run.target_return is not None and last is not None
                and last >= run.target_return):
            return "target_return", Grace()
        if ls["received"] >= run.max_env_steps:
            return "max_env_steps", Grace()
        if now - self.job.start >= run.max_seconds:
            return "max_seconds", Grace()
        if st["stop_requested"]:  # `herd stop`, or `herd down` with its grace
            return (st.get("stop_why") or {}).get("why") or "stopped by user", Grace.of_status(st)
        return None


class LateMetrics:
    """The run's MetricsWriter, opened at the first update: its TensorBoard import (torch, a
    second or more of CPU) would otherwise run beside the learner's and the actors' start-up.
    The rows of the ticks before it wait here and go first, in order."""

    def __init__(self, open_writer):
        self._open, self._writer, self._rows = open_writer, None, []

    def write(self, row: dict, opened: bool) -> None:
        if self._writer is None and not opened:
            self._rows.append(row)
        else:
            self.writer().write(row)

    def writer(self) -> MetricsWriter:
        if self._writer is None:
            self._writer = self._open()
            for row in self._rows:
                self._writer.write(row)
            self._rows.clear()
        return self._writer

    def close(self, summary: dict) -> None:
        self.writer().close(summary)


def run_record(cfg: JobConfig, job_id: str, run_dir: Path) -> dict:
    """The run's provenance (resolved config as in config.yaml, seeds, versions, commits)."""
    import yaml

    return {"job_id": job_id, **provenance(cfg, yaml.safe_load(redacted(cfg)))}


def keep_history(ckpt_dir: Path, keep: int) -> None:
    """After a save: hard-link checkpoint/'s files into checkpoints/<updates>/ and prune to the
    `keep` newest (checkpoint/ itself counts as one). The next save renames new files over
    checkpoint/'s names, so the links go on naming this save's data: a policy that collapses
    later cannot overwrite the last good full state."""
    if keep <= 1:
        return
    history = ckpt_dir.parent / "checkpoints"
    import torch

    # mmap: the one count, without reading the networks and optimizers back in
    updates = int(torch.load(ckpt_dir / "model.pt", map_location="cpu", mmap=True,
                             weights_only=True)["updates"])
    snap = history / f"{updates:012d}"
    if not snap.exists():
        tmp = history / f".{updates:012d}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        for name in ("model.pt", "replay.pt"):
            if (ckpt_dir / name).exists():
                os.link(ckpt_dir / name, tmp / name)
        tmp.rename(snap)
    # the newest snapshot is checkpoint/'s own: keep-1 older ones beside it
    for old in sorted(p for p in history.iterdir() if not p.name.startswith("."))[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
