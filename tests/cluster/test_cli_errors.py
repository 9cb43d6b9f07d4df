"""Every user error of the CLI is one line on stderr and exit code 2, never a traceback: an
unknown job, bad numbers, no cluster at all; a job that failed at start says why (exit 3; its
final status from the Python API)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.jobs import SMALL, interrupted, small_learner, wait_for

pytestmark = pytest.mark.cluster
ROOT = Path(__file__).resolve().parents[2]


def herd(*args, **env):
    return subprocess.run([sys.executable, "-m", "herd", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, env={**os.environ, **env}, check=False)


def one_line(r, code: int, must: str) -> None:
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == code and len(lines) == 1 and must in lines[0], (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr


def test_user_errors_on_a_live_cluster(ray_cluster, tmp_path):
    job = "herd-nosuch-20261201-000000-0000"
    for args, must in ((("status", job), f"no job {job}"), (("logs", job), "no job"),
                       (("stop", job), "no job"), (("scale", job, "--actors", "1"), "no job"),
                       (("scale", job, "--actors", "-1"), "--actors must be 1 or more, got -1"),
                       (("evaluate", str(tmp_path), "--episodes", "0"), "--episodes must be 1 or more")):
        one_line(herd(*args), 2, must)


def test_no_cluster_at_all(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    env = {"RAY_ADDRESS": f"127.0.0.1:{port}", "HERD_DASHBOARD_URL": f"http://127.0.0.1:{port}"}
    job = "herd-x-20261201-000000-0000"
    for args in (("status", job), ("scale", job, "--actors", "2"), ("stop", job)):
        one_line(herd(*args, **env), 2, f"no Ray cluster answers at 127.0.0.1:{port}")
    for args in (("logs", job), ("list",)):
        one_line(herd(*args, **env), 2, f"no Herd cluster running (no Ray dashboard answers at "
                                         f"http://127.0.0.1:{port}): start one with `herd up`")
    # a new user's shell: no RAY_ADDRESS, no cluster: every command says it the same way
    bare = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    bare.update(HERD_DASHBOARD_URL=f"http://127.0.0.1:{port}", HERD_HOME=str(tmp_path / "home"))
    for args in (("status", job), ("scale", job, "--actors", "2"), ("stop", job), ("logs", job),
                 ("list",), ("submit", "configs/demo.yaml"),
                 ("tune", "configs/demo.yaml", "--grid", "learner.replay.batch_size=64,128")):
        r = subprocess.run([sys.executable, "-m", "herd", *args], cwd=ROOT, capture_output=True,
                           text=True, timeout=120, env=bare, check=False)
        one_line(r, 2, "no Herd cluster running")


def test_a_job_that_failed_at_start_says_why(ray_cluster, tmp_path):
    # a learner no node can hold: the driver refuses it (exit 2) before starting anything
    cfg = {**SMALL, "learner": small_learner(num_cpus=64), "run": {**SMALL["run"], "name": "failing"}}
    path = tmp_path / "failing.yaml"
    path.write_text(yaml.safe_dump(cfg))
    # Ctrl-C while following: exit 130, and one line says the job goes on and how to stop it
    r = interrupted(("submit", str(path), "--runs-dir", str(tmp_path / "runs"), "--follow"), "results:")
    assert r.returncode == 130 and "Traceback" not in r.stderr, r.stderr
    job = next(line.split()[1] for line in r.stdout.splitlines() if line.startswith("submitted"))
    said = (f"Stopped following; job {job} keeps running: `herd stop {job}` stops it, "
            f"`herd logs {job} --follow` watches again")
    assert [ln for ln in r.stderr.splitlines() if ln.strip()] == [said], r.stderr

    def ended():
        r = herd("status", job)
        return r if "failed" in r.stderr else None

    one_line(wait_for(ended, 120, "the job to fail", poll=2), 3, "learner.placement.num_cpus=64")
    # the Python API returns the failed job's final status, its reason in it
    code = "import json, sys, herd; print(json.dumps(herd.Job(sys.argv[1], 'runs', client=None).status()))"
    r = subprocess.run([sys.executable, "-c", code, job], cwd=ROOT, capture_output=True, text=True,
                       timeout=60, check=True)
    final = json.loads(r.stdout)
    assert final["ended"] and final["state"] == "FAILED" and "learner.placement.num_cpus=64" in final["error"]


def test_a_learner_that_cannot_start_says_why_in_one_line(ray_cluster, tmp_path):
    # a setting only the learner can check (it needs torch): its __init__ raises
    learner = small_learner(compile=True, compile_options={"no_such_setting": 1})
    cfg = {**SMALL, "learner": learner, "run": {**SMALL["run"], "name": "badlearner"}}
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(cfg))
    r = herd("submit", str(path), "--runs-dir", str(tmp_path / "runs"))
    assert r.returncode == 0, r.stderr
    job = next(line.split()[1] for line in r.stdout.splitlines() if line.startswith("submitted"))

    def ended():
        r = herd("status", job)
        return r if "failed" in r.stderr else None

    reason = ("the learner could not start: ValueError: learner.compute.compile_options: torch._inductor "
              "has no setting 'no_such_setting'")
    one_line(wait_for(ended, 120, "the job to fail", poll=2), 3, reason)
    # the job's log says it too, without a crash dump of the learner's process above it (a
    # threaded Ray actor whose __init__ raises aborts in Ray's C++ TerminateHandler)
    time.sleep(2)  # what the learner's process printed as it went reaches the log
    log = herd("logs", job).stdout
    assert reason in " ".join(log.split()) and "TerminateHandler" not in log and "_raylet.so" not in log, log
