"""Live scaling, many times, both ways (1 -> 3 -> 1 -> 2) while the job trains: the learner is
never restarted and nothing stepped is lost (sent = received = inserted across every change)."""

from __future__ import annotations

import csv
import json

import pytest

from tests.jobs import SMALL, controller_up, herd, status, submit, wait_for

pytestmark = pytest.mark.cluster


def stepping(job: str, n: int, after: dict[str, int]):
    """The status once n actors run and each has stepped beyond `after` (its steps so far)."""
    s = status(job)
    acts = s["actors"]
    if len(acts) == n and all(a.get("steps", 0) > after.get(a["actor_id"], 0) for a in acts):
        return s
    return None


def test_scale_up_and_down_repeatedly(ray_cluster, tmp_path):
    cfg = {**SMALL, "run": {**SMALL["run"], "name": "scale"}}
    job = submit(cfg, tmp_path)
    runs = tmp_path / "runs"
    wait_for(lambda: controller_up(job), 150, "the controller", poll=2)
    first = wait_for(lambda: stepping(job, 1, {}), 90, "the first actor stepping")
    learner_id = first["learner"]["learner_id"]

    received, seen_ids = first["learner"]["received"], {"actor-0"}
    for n in (3, 1, 2):
        before = {a["actor_id"]: a.get("steps", 0) for a in status(job)["actors"]}
        assert f"{n} actors" in herd("scale", job, "--actors", str(n)).stdout
        s = wait_for(lambda n=n, before=before: stepping(job, n, before), 120, f"{n} stepping actors", poll=1.5)
        # the same learner throughout, its counters only ever grow
        assert s["learner"]["learner_id"] == learner_id
        assert s["learner"]["received"] >= received
        received = s["learner"]["received"]
        seen_ids |= {a["actor_id"] for a in s["actors"]}
        # a scaled-away actor hands in its final stats: everything it sent was acknowledged
        for r in s["retired"]:
            assert r["acked"] == r["steps"] == r["sent"], r
    assert seen_ids == {"actor-0", "actor-1", "actor-2", "actor-3"}  # 1 -> 3 -> 1 -> 2
    assert len(status(job)["retired"]) == 2

    herd("stop", job)
    run_dir = runs / job
    wait_for(lambda: (run_dir / "summary.json").exists(), 180, "summary.json", poll=2)
    summary = json.loads((run_dir / "summary.json").read_text())
    lr = summary["learner"]
    # sent = received = inserted, summed over the 4 actors that ever ran
    assert summary["actor_steps"] == summary["actor_acked"] == int(lr["received"]) == int(lr["inserted"])
    assert int(lr["rejected_batches"]) == 0
    assert lr["learner_id"] == learner_id
    with open(run_dir / "metrics.csv") as f:
        counts = [int(r["actors"]) for r in csv.DictReader(f)]
    assert 3 in counts and counts[-1] == 2
