"""`herd down` while a job trains: the job is wound down first (summary.json, final checkpoint,
books with steps = acked = received = inserted), one line per job, then the cluster stops. A run
that kept only checkpoint-best/ (a cluster stopped with --force) resumes from it, named, and
its metrics.csv and curve.png go on from that run's.

Real parts: a `herd up` cluster of the test's own (private HOME, loopback, token auth), the real
learner over gRPC, real MuJoCo actors; the resume runs on the suite's cluster.
"""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys

import pytest
import yaml

from tests.cluster.test_local_up import ROOT, free_port, private_home
from tests.jobs import SMALL, controller_up, herd, small_learner, wait_for

pytestmark = pytest.mark.cluster

CFG = {**SMALL, "learner": small_learner(min_size=300),
       "run": {**SMALL["run"], "name": "downed", "save_replay": True, "eval_every_s": 2,
               "checkpoint_every_s": 600}}


def rows_of(run) -> list[dict]:
    try:
        with open(run / "metrics.csv", newline="") as f:
            return list(csv.DictReader(f))
    except OSError:
        return []


def test_down_winds_the_job_down_then_a_best_only_run_resumes(ray_cluster, tmp_path):
    _, env, dash = private_home(tmp_path)

    def own(*args, timeout=240):
        return subprocess.run([sys.executable, "-m", "herd", *args], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=timeout, check=False)

    r = own("up", "--port", str(free_port()), "--dashboard-port", str(dash), "--num-cpus", "2",
            "--metrics-port", str(free_port()), "--client-port", str(free_port()),
            "--agent-port", str(free_port()), "--no-preload")
    assert r.returncode == 0, r.stderr
    try:
        (tmp_path / "downed.yaml").write_text(yaml.safe_dump(CFG))
        r = own("submit", str(tmp_path / "downed.yaml"), "--runs-dir", str(tmp_path / "runs"))
        assert r.returncode == 0, r.stderr
        job = next(ln.split()[1] for ln in r.stdout.splitlines() if ln.startswith("submitted"))
        run = tmp_path / "runs" / job
        # training, and an evaluation kept as checkpoint-best/; no final checkpoint yet
        wait_for(lambda: (run / "checkpoint-best" / "model.pt").exists(), 240, "a best checkpoint")
        assert not (run / "checkpoint").exists() and not (run / "summary.json").exists()
        r = own("down", "--grace", "90")
    finally:
        down = own("down", "--force")  # a failed check must not leave that cluster running
    assert r.returncode == 0, r.stderr
    said = r.stdout.split(f"{job}: ", 1)[1].splitlines()
    assert said[0] == "wound down: summary.json, checkpoint/", r.stdout
    assert said[1].startswith("  books exact: steps ") and said[2] == f"  results: {run}", r.stdout
    assert all(len(ln) <= 80 for ln in r.stdout.splitlines() if "results:" not in ln), r.stdout
    assert "Ray stopped" in r.stdout, r.stdout
    assert "nothing stopped" in down.stderr  # the first `down` had stopped it
    s = json.loads((run / "summary.json").read_text())
    assert s["stop_reason"] == "cluster going down (herd down)"
    assert (run / "checkpoint" / "model.pt").exists() and s["checkpoint"]
    ls = s["learner"]
    assert s["actor_steps"] == s["actor_acked"] == ls["received"] == ls["inserted"] > 0, s
    assert s["wind_down"]["grace_s"] == 90 and s["wind_down"]["replay_left_out"] is None
    assert (run / "checkpoint" / "replay.pt").exists()
    assert s["final_eval"]["mean_return"] is not None
    assert (run / "curve.png").read_bytes()[:4] == b"\x89PNG"  # its picture, written as it ended

    # ---- a run with only checkpoint-best/ (as --force leaves one) resumes from it, named ----
    bare = tmp_path / "bare"
    shutil.copytree(run, bare / job)
    for gone in ("checkpoint", "checkpoints", "summary.json"):
        shutil.rmtree(bare / job / gone, ignore_errors=True)
        (bare / job / gone).unlink(missing_ok=True)
    # herd plot: the run and its copy (metrics.csv alone: no summary) are one config, one band
    r = herd("plot", str(run), str(bare / job), "-o", str(tmp_path / "both.png"))
    assert "wrote" in r.stdout and (tmp_path / "both.png").stat().st_size > 1000
    cfg = {**CFG, "run": {**CFG["run"], "name": "again"}}
    (tmp_path / "again.yaml").write_text(yaml.safe_dump(cfg))
    runs2, before = tmp_path / "runs2", rows_of(bare / job)
    r = herd("submit", str(tmp_path / "again.yaml"), "--runs-dir", str(runs2),
             "--resume", str(bare / job))
    again = next(ln.split()[1] for ln in r.stdout.splitlines() if ln.startswith("submitted"))
    try:
        assert f"(resuming {bare / job}/checkpoint-best: the newest checkpoint there" in r.stdout, r.stdout
        first = wait_for(lambda: controller_up(again), 150, "the resumed job's controller")
        assert first["learner"]["restored"]["path"].endswith("checkpoint-best")
        assert first["learner"]["updates"] > 0
        # its metrics.csv goes on from the earlier run's rows, then rows of its own
        wait_for(lambda: len(rows_of(runs2 / again)) > len(before), 60, "a row of its own")
    finally:
        herd("stop", again, check=False)
    wait_for(lambda: (runs2 / again / "summary.json").exists(), 120, "its summary")
    resumed = json.loads((runs2 / again / "summary.json").read_text())
    assert resumed["resumed_from"].endswith(f"{job}/checkpoint-best")
    assert resumed["lineage"]["earlier_run"] == str(bare / job)
    assert "max_env_steps counts the env steps of the run resumed" in resumed["lineage"]["budgets"]
    after = rows_of(runs2 / again)
    assert after[:len(before)] == before
    assert float(after[len(before)]["time_s"]) > float(before[-1]["time_s"])
    # env steps go on from the checkpoint's (checkpoint-best/ is older than the run's last row)
    assert int(after[len(before)]["env_steps"]) >= first["learner"]["restored"]["received"]
    assert (runs2 / again / "curve.png").exists()  # the earlier run's evaluations at least
