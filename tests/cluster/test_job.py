"""A real job on a real local Ray cluster: submit, watch counts rise, scale 1 -> 2 -> 1, stop.

Real Ray (head + dashboard + job server), real gRPC learner, real MuJoCo envs, all on the CPU.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.cluster
ROOT = Path(__file__).resolve().parents[2]

SMALL = {
    "env": {"id": "InvertedPendulum-v5"},
    "learner": {"hidden_sizes": [32, 32], "batch_size": 32, "buffer_capacity": 20000,
                "min_replay_size": 300, "replay_ratio": 0.5, "ratio_tolerance": 200,
                "publish_every_s": 0.3, "num_cpus": 0.5},
    "actors": {"num_actors": 1, "num_envs": 2, "steps_per_push": 8, "warmup_steps": 200,
               "num_cpus": 0.5},
    "run": {"name": "itest", "max_env_steps": 10_000_000, "max_seconds": 300,
            "eval_every_s": 5, "eval_episodes": 1, "log_every_s": 1, "checkpoint_every_s": 30},
}


def herd(*args, check=True) -> subprocess.CompletedProcess:
    r = subprocess.run([sys.executable, "-m", "cluster", *args], cwd=ROOT, capture_output=True,
                       text=True, timeout=180, env=os.environ.copy())
    if check and r.returncode:
        raise AssertionError(f"herd {' '.join(args)} exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
    return r


def get_json(url: str):
    from cluster.local import get

    return json.loads(get(url))


def status(job: str) -> dict:
    return json.loads(herd("status", job, "--json").stdout)


def wait_for(pred, timeout: float, what: str, poll: float = 1.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = pred()
        if value:
            return value
        time.sleep(poll)
    raise AssertionError(f"timed out waiting for {what}")


def _controller_up(job):
    r = herd("status", job, "--json", check=False)
    return json.loads(r.stdout) if r.returncode == 0 else None


def test_job_runs_scales_and_stops(ray_cluster, tmp_path):
    cfg_path = tmp_path / "small.yaml"
    cfg_path.write_text(yaml.safe_dump(SMALL))
    runs = tmp_path / "runs"
    out = herd("submit", str(cfg_path), "--runs-dir", str(runs)).stdout
    job = next(line.split()[1] for line in out.splitlines() if line.startswith("submitted"))
    assert "dashboard:" in out

    first = wait_for(lambda: _controller_up(job), 120, "the job's controller")
    s1 = wait_for(lambda: (lambda s: s if s["learner"]["updates"] > 0 else None)(status(job)),
                  120, "the first updates")
    time.sleep(4)
    s2 = status(job)
    assert s2["learner"]["received"] > s1["learner"]["received"] >= 0
    assert s2["learner"]["updates"] > s1["learner"]["updates"]
    # actors follow the learner's policy as its version advances
    wait_for(lambda: status(job)["actors"][0]["policy_version"] > 1, 60, "policy version advance")
    assert len(first["actors"]) == 1

    # ---- live scaling, learner untouched ----
    learner_id = s2["learner"]["learner_id"]
    assert "2 actors" in herd("scale", job, "--actors", "2").stdout
    two = wait_for(lambda: (lambda s: s if len(s["actors"]) == 2 and all(a.get("steps", 0) > 0
                   for a in s["actors"]) else None)(status(job)), 90, "two stepping actors")
    assert two["learner"]["learner_id"] == learner_id

    # ---- the dashboard's REST API lists the job, the learner and the env actors ----
    url = ray_cluster["dashboard"]
    jobs = get_json(f"{url}/api/jobs/")
    assert any(j.get("submission_id") == job and j["status"] == "RUNNING" for j in jobs)
    actors = get_json(f"{url}/api/v0/actors?limit=1000")["data"]["result"]["result"]
    alive = [a for a in actors if a["state"] == "ALIVE"]
    classes = [a["class_name"] for a in alive]
    assert "Learner" in classes and classes.count("EnvActor") == 2 and "Controller" in classes

    assert "1 actors" in herd("scale", job, "--actors", "1").stdout
    one = status(job)
    assert len(one["actors"]) == 1 and one["learner"]["learner_id"] == learner_id
    assert len(one["retired"]) == 1

    # ---- stop: final checkpoint, evaluation and summary; nothing stepped is lost ----
    herd("stop", job)
    run_dir = runs / job
    wait_for(lambda: (run_dir / "summary.json").exists(), 180, "summary.json")
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["stop_reason"] == "stopped by user"
    lr = summary["learner"]
    assert int(lr["received"]) == summary["actor_acked"] == summary["actor_steps"]
    assert int(lr["inserted"]) == int(lr["received"])
    assert int(lr["updates"]) > 0
    assert summary["final_eval"]["episodes"] == 1
    assert (run_dir / "checkpoint" / "model.pt").exists()
    assert (run_dir / "config.yaml").exists() and (run_dir / "metrics.csv").exists()
    assert list((run_dir / "tb").glob("events.*"))


def test_cuda_learner_on_a_cpu_cluster_is_refused(ray_cluster, tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    cfg = {**SMALL, "learner": {**SMALL["learner"], "device": "cuda"}}
    path = tmp_path / "cuda.yaml"
    path.write_text(yaml.safe_dump(cfg))
    r = herd("submit", str(path), "--runs-dir", str(tmp_path / "runs"), check=False)
    assert r.returncode == 2
    assert "no GPU" in r.stderr
    jobs = get_json(f"{ray_cluster['dashboard']}/api/jobs/")
    assert not any((j.get("submission_id") or "").startswith("herd-itest") and j["status"] == "RUNNING"
                   for j in jobs)
