"""Live scaling on one job, as a user does it: many times, both ways (1 -> 3 -> 1 -> 2) while
the job trains, the learner never restarted and nothing stepped lost; then past the cluster's
CPUs (-> 8), as on a small machine: the actors that do not fit are reported as waiting for CPUs
(not as failures), a scale back down (-> 1) removes them whatever state they are in, and stop
ends with a summary whose books balance (actor steps = acked = received = inserted).
Meanwhile `herd status --watch` and `herd logs --follow` end quietly on Ctrl-C.

Test cluster: 4 CPUs; learner 0.5 + actors of 1 each: 3 fit."""

from __future__ import annotations

import csv
import json

import pytest

from tests.jobs import (
    SMALL,
    Interruptible,
    controller_up,
    herd,
    status,
    status_when,
    stepping,
    submit,
    wait_for,
)

pytestmark = pytest.mark.cluster

CFG = {**SMALL, "actors": {**SMALL["actors"], "num_cpus": 1.0},
       "run": {**SMALL["run"], "name": "scale"}}


def actor_counts(run_dir) -> list[int]:
    """The `actors` column of a run's metrics.csv so far ([] before its first row)."""
    try:
        with open(run_dir / "metrics.csv") as f:
            return [int(r["actors"]) for r in csv.DictReader(f)]
    except FileNotFoundError:
        return []


def test_scale_up_and_down_then_past_the_cpus_then_stop(ray_cluster, tmp_path):
    job = submit(CFG, tmp_path)
    clis = []
    try:
        wait_for(lambda: controller_up(job), 150, "the controller", poll=2)
        first = wait_for(lambda: stepping(job, 1, {}), 90, "the first actor stepping")
        learner_id = first["learner"]["learner_id"]
        # Ctrl-C ends a watch or a follow quietly (the job goes on): both run beside the scaling
        # below and are interrupted after it (the watch 12 s after its start at least: a rich
        # Live view draws nothing on a pipe to wait for)
        clis = [(Interruptible(("status", job, "--watch", "1"), None), 12),
                (Interruptible(("logs", job, "--follow"), "[herd]"), 2)]

        # ---- 1 -> 3 -> 1 -> 2, every actor stepping after each change ----
        received, seen_ids = first["learner"]["received"], {"actor-0"}
        for n in (3, 1, 2):
            before = {a["actor_id"]: a.get("steps", 0) for a in status(job)["actors"]}
            assert f"{n} actors" in herd("scale", job, "--actors", str(n)).stdout
            s = wait_for(lambda n=n, before=before: stepping(job, n, before), 120, f"{n} stepping actors",
                         poll=1.5)
            # the same learner throughout, its counters only ever grow
            assert s["learner"]["learner_id"] == learner_id
            assert s["learner"]["received"] >= received
            received = s["learner"]["received"]
            seen_ids |= {a["actor_id"] for a in s["actors"]}
            # metrics.csv's rows follow the count: the driver writes one per pass of its loop
            # (log_every_s plus the status, evaluation and checkpoint work of that pass, seconds
            # on 2 cores), so the row is waited for before the next change, not raced
            wait_for(lambda n=n: n in actor_counts(tmp_path / "runs" / job), 30,
                     f"a metrics.csv row with {n} actors", poll=0.5)
            # a scaled-away actor hands in its final stats: everything it sent was acknowledged
            for r in s["retired"]:
                assert r["acked"] == r["steps"] == r["sent"], r
        assert seen_ids == {"actor-0", "actor-1", "actor-2", "actor-3"}  # 1 -> 3 -> 1 -> 2
        assert len(status(job)["retired"]) == 2
        for cli, min_s in clis:
            r = cli.interrupt(min_s)
            assert r.returncode == 130 and "Traceback" not in r.stderr, r.stderr

        # ---- past the CPUs: 2 -> 8 ----
        r = herd("scale", job, "--actors", "8")
        assert "8 actors" in r.stdout and "waiting for CPUs (each needs 1" in r.stdout, r.stdout
        # one more fits; the other 5 wait, and status says so instead of "unavailable"
        # (Ray's free-CPU view follows the third actor's placement a moment later)
        s = wait_for(lambda: status_when(job, lambda s: s["waiting_actors"] == 5
                                         and s["cpus_free"] == pytest.approx(0.5)), 60,
                     "5 actors waiting for CPUs, 0.5 free", poll=2)
        waiting = [a for a in s["actors"] if a.get("waiting")]
        assert len(waiting) == 5 and all("waiting for CPUs" in a["error"] for a in waiting)
        text = herd("status", job).stdout
        assert "5 actors waiting for CPUs (needs 1); 0.5 CPUs free" in " ".join(text.split()), text
        # down to 1: the 5 that never ran go at once, the 2 other running ones deliver and go
        r = herd("scale", job, "--actors", "1")
        assert "1 actors" in r.stdout and "waiting" not in r.stdout, r.stdout
        s = wait_for(lambda: status_when(job, lambda s: len(s["actors"]) == 1 and not s["waiting_actors"]),
                     30, "one actor left", poll=1)
        assert len(s["retired"]) == 2 + 7
        assert s["learner"]["learner_id"] == learner_id
    finally:
        for cli, _ in clis:
            cli.kill()
        herd("stop", job, check=False)
    run_dir = tmp_path / "runs" / job
    wait_for(lambda: (run_dir / "summary.json").exists(), 180, "summary.json", poll=2)
    summary = json.loads((run_dir / "summary.json").read_text())
    lr = summary["learner"]
    assert summary["stop_reason"] == "stopped by user"
    # sent = received = inserted, summed over every actor that ever ran
    assert summary["actor_steps"] == summary["actor_acked"] == int(lr["received"]) == int(lr["inserted"]) > 0
    assert int(lr["rejected_batches"]) == 0
    assert lr["learner_id"] == learner_id
    assert (run_dir / "checkpoint" / "model.pt").is_file()
    counts = actor_counts(run_dir)
    assert 3 in counts and counts[-1] == 1
