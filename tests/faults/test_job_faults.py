"""A job whose env actor's worker is killed while it scales still ends with its summary, a
final checkpoint and exact books, and a scale-down and a stop while the replay ratio holds the
actors back deliver every step.

The worker is killed (SIGKILL, as the raylet's memory monitor does) while a scale adds actors,
in a job whose replay ratio binds (a 0.5-CPU learner asked for 1,000 updates per row: the actors'
windows stay full, the batches in them would take minutes of updates to let in; staging of 4
batches, so that it binds soon); then `herd scale` to 1 actor, then `herd stop`. Every stepped transition of the processes that stopped is delivered, the killed one
counts with what the learner accepted from it: steps = acked = received = inserted, and no
actor logs an error at its stop. (The job's controller killed while it scales:
tests/cluster/test_scale_steady.py.)

Test cluster: 4 CPUs; learner 0.5 + actors of 0.5 each.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.jobs import ROOT, SMALL, controller_up, herd, small_learner, status, stepping, submit, wait_for

pytestmark = pytest.mark.cluster

BOUND = {**SMALL,
         "learner": small_learner(ratio=1000.0, ratio_tolerance=50, min_size=300, staging_batches=4),
         "actors": {**SMALL["actors"], "warmup_steps": 10**9, "window": 2},
         "run": {**SMALL["run"], "name": "bound", "eval_every_s": 60}}


def scale_in_background(job: str, n: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "herd", "scale", job, "--actors", str(n)], cwd=ROOT,
                            text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=os.environ.copy())


def held_back(job: str) -> bool:
    """Every actor's window full and not one ack for 2 s: the learner lets nothing in."""
    before = {a["actor_id"]: a for a in status(job)["actors"]}
    time.sleep(2)
    after = status(job)["actors"]
    return len(after) == 2 and all(a.get("in_flight") == 2 and a["actor_id"] in before
                                   and before[a["actor_id"]].get("acked") == a.get("acked") for a in after)


def summary_of(tmp_path, job: str) -> dict:
    run_dir = tmp_path / "runs" / job
    wait_for(lambda: (run_dir / "summary.json").exists(), 180, "summary.json", poll=2)
    assert (run_dir / "checkpoint" / "model.pt").is_file()
    return json.loads((run_dir / "summary.json").read_text())


def assert_books_close(summary: dict) -> None:
    lr, faults = summary["learner"], summary["faults"]
    print(f"{summary['stop_reason']}: steps {summary['actor_steps']}, acked {summary['actor_acked']}, "
          f"received {lr['received']}, inserted {lr['inserted']}; killed processes "
          f"{faults['killed_actor_processes']} (steps lost with them >= {faults['killed_steps_lost_at_least']})")
    assert summary["actor_steps"] == summary["actor_acked"] == int(lr["received"]) == int(lr["inserted"]) > 0
    assert summary["faults"]["transitions_lost"] == 0 and int(lr["rejected_batches"]) == 0


def test_a_killed_worker_mid_scale_and_a_stop_under_the_limiter_lose_nothing(ray_cluster, tmp_path):
    job = submit(BOUND, tmp_path)
    try:
        wait_for(lambda: controller_up(job), 150, "the controller", poll=2)
        s = wait_for(lambda: stepping(job, 1, {}), 120, "the first actor stepping", poll=1)
        victim = s["actors"][0]
        scaling = scale_in_background(job, 2)
        os.kill(victim["pid"], signal.SIGKILL)  # while the controller creates the new actor
        out, err = scaling.communicate(timeout=120)
        assert scaling.returncode == 0 and "2 actors" in out, (out, err)
        # Ray restarts the killed process; both step, and the limiter holds them back: each
        # one's window full, its pushes waiting for the learner's updates
        s = wait_for(lambda: stepping(job, 2, {}), 120, "2 actors stepping", poll=2)
        restarted = next(a for a in s["actors"] if a["actor_id"] == victim["actor_id"])
        assert restarted["pid"] != victim["pid"]
        wait_for(lambda: held_back(job), 90, "both actors held back by the replay ratio", poll=1)
        # a scale-down while the ratio holds: the leaving actor's batches go in before it stops
        t0 = time.monotonic()
        scaled = herd("scale", job, "--actors", "1")
        print(f"scale 2 -> 1 under the limiter: {time.monotonic() - t0:.1f} s")
        assert "1 actors" in scaled.stdout, scaled.stdout
    finally:
        herd("stop", job, check=False)
    summary = summary_of(tmp_path, job)
    assert summary["stop_reason"] == "stopped by user"
    assert_books_close(summary)
    assert summary["faults"]["killed_actor_processes"] >= 1
    logs = herd("logs", job).stdout
    assert "client closed" not in logs and "stopped on an error" not in logs, logs[-3000:]
