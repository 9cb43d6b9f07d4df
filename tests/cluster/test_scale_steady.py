"""Scaling a running job leaves the actors already running alone: actors added (3 -> 7 -> 11)
or removed (-> 4) while the others step, and not one of those that were running reconnects;
then the job's controller is killed (SIGKILL) while it removes actors (-> 1): its actors die
with it, the driver winds the job down by itself, and the books still close on what the learner
accepted (every step acked, received and inserted), with a summary and a final checkpoint.

Test cluster: 4 CPUs; actors at 0.05 CPU each (as bench/scale.py's 0.1 on the GPU box, a crowd
that outnumbers the 2-core machine's cores 5 to 1), random actions throughout, no replay-ratio
limiter. Four newcomers a step: each boots a process (Python, torch, MuJoCo) on the same cores
as the running actors, which is what could disturb them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from herd import control
from tests.jobs import ROOT, SMALL, controller_up, herd, small_learner, stepping, submit, wait_for

pytestmark = pytest.mark.cluster

CFG = {**SMALL,
       "env": {"id": "Hopper-v5"},
       "learner": small_learner(ratio=None, min_size=500, ingest_process="on"),
       "actors": {**SMALL["actors"], "num_actors": 3, "num_cpus": 0.05, "warmup_steps": 10**9},
       "run": {**SMALL["run"], "name": "steady", "eval_every_s": 30}}


def reconnects(s: dict) -> dict[str, int]:
    return {a["actor_id"]: a["reconnects"] for a in s["actors"] if "reconnects" in a}


def test_scaling_does_not_disturb_running_actors(ray_cluster, tmp_path):
    job = submit(CFG, tmp_path)
    disturbed, killed = {}, False
    try:
        wait_for(lambda: controller_up(job), 150, "the controller", poll=2)
        s = wait_for(lambda: stepping(job, 3, {}), 150, "3 actors stepping", poll=2)
        for n in (7, 11, 4):
            before = reconnects(s)
            steps = {a["actor_id"]: a.get("steps", 0) for a in s["actors"]}
            assert f"{n} actors" in herd("scale", job, "--actors", str(n)).stdout
            # every actor steps past where it stood, the new ones from 0, and has for a while:
            # the newcomers' start (process, MuJoCo, torch, handshake) is over by then
            s = wait_for(lambda n=n, steps=steps: stepping(job, n, steps), 240,
                         f"{n} actors stepping", poll=3)
            s = wait_for(lambda n=n, s=s: stepping(job, n, {a["actor_id"]: a["steps"] for a in s["actors"]}),
                         120, f"{n} actors stepping on", poll=3)
            after = {a["actor_id"]: a for a in s["actors"]}
            for actor_id, count in before.items():
                if actor_id in after and after[actor_id]["reconnects"] != count:
                    disturbed[f"{actor_id} at {n}"] = after[actor_id].get("disconnects")
        assert not disturbed, f"running actors reconnected while others were added or removed: {disturbed}"
        # ---- the controller killed (SIGKILL) while it stops 3 of the 4 ----
        endpoint = control.find(job)
        scaling = subprocess.Popen([sys.executable, "-m", "herd", "scale", job, "--actors", "1"], cwd=ROOT,
                                   text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=os.environ.copy())
        # the victims leave its table as the scale begins, and their stops take a moment more
        wait_for(lambda: endpoint.status()["target_actors"] == 1, 60, "the scale to begin", poll=0.05)
        os.kill(json.loads(control.record_path(job).read_text())["pid"], signal.SIGKILL)
        killed = True
        _, err = scaling.communicate(timeout=120)
        assert "Traceback" not in err and len(err.strip().splitlines()) <= 1, err
    finally:
        if not killed:
            herd("stop", job, check=False)
    # its actors died with it; the driver winds the job down by itself, and the books close on
    # what the learner accepted from each actor
    run_dir = tmp_path / "runs" / job
    wait_for(lambda: (run_dir / "summary.json").exists(), 180, "summary.json", poll=2)
    assert (run_dir / "checkpoint" / "model.pt").is_file()
    summary = json.loads((run_dir / "summary.json").read_text())
    lr, faults = summary["learner"], summary["faults"]
    print(f"{summary['stop_reason']}: steps {summary['actor_steps']}, acked {summary['actor_acked']}, "
          f"received {lr['received']}, inserted {lr['inserted']}; killed processes "
          f"{faults['killed_actor_processes']} (steps lost with them >= {faults['killed_steps_lost_at_least']})")
    assert summary["stop_reason"] == "controller lost" and faults["controller_lost"]
    assert faults["killed_actor_processes"] >= 1
    assert summary["actor_steps"] == summary["actor_acked"] == int(lr["received"]) == int(lr["inserted"]) > 0
    assert faults["transitions_lost"] == 0 and int(lr["rejected_batches"]) == 0
