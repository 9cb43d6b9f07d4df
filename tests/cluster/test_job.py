"""A real job on a real local Ray cluster: submit, watch counts rise, scale 1 -> 2 -> 1, stop.

Real Ray (head + dashboard + job server), real gRPC learner, real MuJoCo envs, all on the CPU.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import yaml

from tests.jobs import (
    ROOT,
    SMALL,
    controller_up,
    ended_or_live,
    get_json,
    herd,
    small_learner,
    status,
    status_when,
    submit,
    wait_for,
)

pytestmark = pytest.mark.cluster


def test_job_runs_scales_and_stops(ray_cluster, tmp_path):
    job = submit(SMALL, tmp_path)
    try:
        _runs_scales_and_stops(job, tmp_path / "runs", ray_cluster["dashboard"], tmp_path)
    finally:  # a failed check must not leave the job running beside the next tests
        if not (tmp_path / "runs" / job / "summary.json").exists():
            herd("stop", job, check=False)


def through_ray(job: str, tmp_path) -> dict:
    """`herd status --json` the old way: a HERD_HOME without the endpoint's record sends the CLI
    through a Ray driver to the controller actor."""
    env = {**os.environ, "HERD_HOME": str(tmp_path / "elsewhere")}
    r = subprocess.run([sys.executable, "-m", "herd", "status", job, "--json"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=180, check=True)
    return json.loads(r.stdout)


def _runs_scales_and_stops(job: str, runs, url: str, tmp_path):
    first = wait_for(lambda: controller_up(job), 120, "the job's controller")
    assert first["target_actors"] == 1  # the config's count, even before the actor is up
    s1 = wait_for(lambda: status_when(job, lambda s: s["learner"]["updates"] > 0), 120,
                  "the first updates")
    s2 = wait_for(lambda: status_when(job, lambda s: s["learner"]["received"] > s1["learner"]["received"]
                                      and s["learner"]["updates"] > s1["learner"]["updates"]), 30,
                  "received and updates to rise")
    assert s2["learner"]["received"] > s1["learner"]["received"] >= 0
    assert s2["learner"]["updates"] > s1["learner"]["updates"]
    # actors follow the learner's policy as its version advances
    wait_for(lambda: status(job)["actors"][0]["policy_version"] > 1, 60, "policy version advance")
    # the job's one actor (counted once it has stepped: the controller's first status can come
    # before its scale call has added the actor)
    assert len(s2["actors"]) == 1

    # ---- the CLI's loopback endpoint (cluster/control.py) answers as the Ray path does ----
    from herd.control import record_path

    assert record_path(job).exists()
    slow, fast = through_ray(job, tmp_path), status(job)
    assert slow.keys() == fast.keys() and slow["job_id"] == fast["job_id"] == job
    assert slow["learner"].keys() == fast["learner"].keys()
    assert slow["learner"]["learner_id"] == fast["learner"]["learner_id"]
    assert [a["actor_id"] for a in slow["actors"]] == [a["actor_id"] for a in fast["actors"]]
    # herd.Job.status() of the Python API takes the endpoint too: no Ray driver, the same answer
    code = ("import json, sys, herd; st = herd.Job(sys.argv[1], sys.argv[2], client=None).status(); "
            "print(json.dumps({'status': st, 'ray': 'ray' in sys.modules}, default=str))")
    r = subprocess.run([sys.executable, "-c", code, job, str(tmp_path)], cwd=ROOT, capture_output=True,
                       text=True, timeout=60, check=True)
    api = json.loads(r.stdout)
    assert not api["ray"] and api["status"].keys() == fast.keys() and api["status"]["job_id"] == job
    assert api["status"]["learner"]["learner_id"] == fast["learner"]["learner_id"]
    assert f"{job}  RUNNING" in herd("list").stdout

    # ---- live scaling, learner untouched ----
    learner_id = s2["learner"]["learner_id"]
    assert "2 actors" in herd("scale", job, "--actors", "2").stdout
    two = wait_for(lambda: status_when(job, lambda s: len(s["actors"]) == 2 and all(
                   a.get("steps", 0) > 0 for a in s["actors"])), 90, "two stepping actors")
    assert two["learner"]["learner_id"] == learner_id and two["target_actors"] == 2

    # ---- the dashboard's REST API lists the job, the learner and the env actors ----
    jobs = get_json(f"{url}/api/jobs/")
    assert any(j.get("submission_id") == job and j["status"] == "RUNNING" for j in jobs)
    actors = get_json(f"{url}/api/v0/actors?limit=1000")["data"]["result"]["result"]
    alive = [a for a in actors if a["state"] == "ALIVE"]
    classes = [a["class_name"] for a in alive]
    assert "Learner" in classes and classes.count("EnvActor") == 2 and "Controller" in classes

    # each actor's steps/s over the header's window (the driver's row), never 0 while it steps
    first_actor = s2["actors"][0]["actor_id"]
    for _ in range(3):
        rates = status(job)["progress"]["actor_steps_per_s"]
        assert rates.get(first_actor, 0) > 0, rates
        time.sleep(1)
    # --watch into a file: a block per refresh, not one redraw at the end
    watched = tmp_path / "watch.txt"
    with watched.open("w") as out:
        w = subprocess.Popen([sys.executable, "-m", "herd", "status", job, "--watch", "0.5"], cwd=ROOT,
                             stdout=out, stderr=subprocess.PIPE, text=True)
        wait_for(lambda: watched.read_text().count("env actors") >= 2 or None, 60, "two watch blocks")
        w.send_signal(signal.SIGINT)
        w.wait(timeout=30)
    text = watched.read_text()
    assert "\x1b[" not in text and text.count(f"── {job} ──") >= 2, text

    assert "1 actors" in herd("scale", job, "--actors", "1").stdout
    one = status(job)
    assert len(one["actors"]) == one["target_actors"] == 1 and one["learner"]["learner_id"] == learner_id
    assert len(one["retired"]) == 1

    # ---- stop: final checkpoint, evaluation and summary; nothing stepped is lost ----
    herd("stop", job)
    run_dir = runs / job
    wait_for(lambda: (run_dir / "summary.json").exists(), 180, "summary.json")
    # the endpoint's record goes with the controller; the CLI then tells from Ray's job record
    wait_for(lambda: not record_path(job).exists(), 30, "the endpoint's record to go")

    summary = json.loads((run_dir / "summary.json").read_text())
    # its picture is there with its summary (no evaluation finished yet: the driver says why not)
    assert (run_dir / "curve.png").exists() or not summary["evaluations"], summary["evaluations"]
    # an ended job's status is its final one, from the CLI and the Python API alike
    final = wait_for(lambda: (ended_or_live(job) or {}).get("ended") and ended_or_live(job), 60,
                     "the job to end")
    assert final["state"] in ("SUCCEEDED", "STOPPED") and final["summary"] == summary
    r = herd("status", job)
    assert r.stdout.startswith(f"{job} ended {final['state']} (stopped by user) after "), r.stdout
    assert f"results: {run_dir}" in r.stdout
    code = ("import json, sys, herd; print(json.dumps(herd.Job(sys.argv[1], sys.argv[2], "
            "client=None).status()))")
    r = subprocess.run([sys.executable, "-c", code, job, str(run_dir)], cwd=ROOT, capture_output=True,
                       text=True, timeout=60, check=True)
    assert json.loads(r.stdout) == final
    assert summary["stop_reason"] == "stopped by user"
    lr = summary["learner"]
    assert int(lr["received"]) == summary["actor_acked"] == summary["actor_steps"]
    assert int(lr["inserted"]) == int(lr["received"])
    assert int(lr["updates"]) > 0
    assert summary["final_eval"]["episodes"] == 1
    # the best-evaluated policy is kept beside the final checkpoint
    assert summary["evaluations"], "no periodic evaluation ran"
    from herd.proto import herd_pb2 as pb

    best = pb.PolicyWeights.FromString((run_dir / "best_policy.pb").read_bytes())
    assert best.version == summary["best_eval"]["policy_version"]
    assert summary["best_eval"]["mean_return"] == max(e["mean_return"] for e in summary["evaluations"])
    # ... with its full state: checkpoint-best/ holds the networks best_policy.pb was taken from
    import torch

    assert summary["best_checkpoint"] == str(run_dir / "checkpoint-best")
    state = torch.load(run_dir / "checkpoint-best" / "model.pt", weights_only=True)
    assert state["policy_version"] == best.version
    assert not (run_dir / ".checkpoint-candidate").exists()
    assert (run_dir / "checkpoint" / "model.pt").exists()
    # the start-up timeline: every phase, in order, seconds since `herd submit`
    from herd.startup import PHASES

    up = summary["startup"]
    assert up["since"] == "herd submit" and up["first_compiled_update_s"] is None  # the CPU
    assert None not in [up[f"{p}_s"] for p in PHASES if p != "first_compiled_update"], up
    # each process's phases in order; the learner and the actors start side by side
    learner = [p for p in PHASES if p.startswith("learner_")]
    actors = [p for p in PHASES if p.startswith("actors_")]
    driver = [p for p in PHASES if p not in {*learner, *actors, "first_compiled_update"}]
    for chain in (driver, ["driver_ready", *learner[1:], "first_rows"], learner,
                  ["driver_ready", *actors[1:]], actors):
        times = [up[f"{p}_s"] for p in chain]
        assert times == sorted(times), (chain, up)
    assert up["actors_ready_s"] >= up["learner_listening_s"], up  # (with 2+ actors, rows can come first)
    assert (run_dir / "config.yaml").exists() and (run_dir / "metrics.csv").exists()
    assert list((run_dir / "tb").glob("events.*"))


def test_cuda_learner_on_a_cpu_cluster_is_refused(ray_cluster, tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    cfg = {**SMALL, "learner": small_learner(device="cuda")}
    path = tmp_path / "cuda.yaml"
    path.write_text(yaml.safe_dump(cfg))
    before = {j.get("submission_id") for j in get_json(f"{ray_cluster['dashboard']}/api/jobs/")}
    r = herd("submit", str(path), "--runs-dir", str(tmp_path / "runs"), check=False)
    assert r.returncode == 2
    assert "no GPU" in r.stderr
    after = {j.get("submission_id") for j in get_json(f"{ray_cluster['dashboard']}/api/jobs/")}
    assert after == before  # refused before any job was submitted
