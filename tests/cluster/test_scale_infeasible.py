"""Scaling past the cluster's CPUs, as a user on a small machine does it: the actors that do not
fit are reported as waiting for CPUs (not as failures), a scale back down removes them whatever
state they are in, and stop ends with a summary whose books balance (actor steps = acked =
received = inserted). Test cluster: 4 CPUs; learner 0.5 + actors of 1.5 each: 2 fit."""

from __future__ import annotations

import json

import pytest

from tests.jobs import SMALL, herd, interrupted, status_when, submit, wait_for

pytestmark = pytest.mark.cluster

CFG = {**SMALL, "actors": {**SMALL["actors"], "num_cpus": 1.5},
       "run": {**SMALL["run"], "name": "infeasible"}}


def test_scale_past_the_cpus_then_down_then_stop(ray_cluster, tmp_path):
    job = submit(CFG, tmp_path)
    try:
        wait_for(lambda: status_when(job, lambda s: s["actors"] and s["actors"][0].get("steps", 0) > 0),
                 150, "the first actor stepping", poll=2)
        # Ctrl-C ends a watch or a follow quietly (the job goes on)
        for args, ready, wait_s in ((("status", job, "--watch", "1"), None, 12),
                                    (("logs", job, "--follow"), "[herd]", 2)):
            r = interrupted(args, ready, wait_s)
            assert r.returncode == 130 and "Traceback" not in r.stderr, r.stderr
        r = herd("scale", job, "--actors", "8")
        assert "8 actors" in r.stdout and "waiting for CPUs (each needs 1.5" in r.stdout, r.stdout
        # one more fits; the other 6 wait, and status says so instead of "unavailable"
        # (Ray's free-CPU view follows the second actor's placement a moment later)
        s = wait_for(lambda: status_when(job, lambda s: s["waiting_actors"] == 6
                                         and s["cpus_free"] == pytest.approx(0.5)), 60,
                     "6 actors waiting for CPUs, 0.5 free", poll=2)
        waiting = [a for a in s["actors"] if a.get("waiting")]
        assert len(waiting) == 6 and all("waiting for CPUs" in a["error"] for a in waiting)
        text = herd("status", job).stdout
        assert "6 waiting for CPUs, 0.5 free" in " ".join(text.split()), text
        # down to 1: the 6 that never ran go at once, the second running one delivers and goes
        r = herd("scale", job, "--actors", "1")
        assert "1 actors" in r.stdout and "waiting" not in r.stdout, r.stdout
        s = wait_for(lambda: status_when(job, lambda s: len(s["actors"]) == 1 and not s["waiting_actors"]),
                     30, "one actor left", poll=1)
        assert len(s["retired"]) == 7
    finally:
        herd("stop", job, check=False)
    run_dir = tmp_path / "runs" / job
    wait_for(lambda: (run_dir / "summary.json").exists(), 180, "summary.json", poll=2)
    summary = json.loads((run_dir / "summary.json").read_text())
    lr = summary["learner"]
    assert summary["stop_reason"] == "stopped by user"
    assert summary["actor_steps"] == summary["actor_acked"] == int(lr["received"]) == int(lr["inserted"]) > 0
    assert (run_dir / "checkpoint" / "model.pt").is_file()
