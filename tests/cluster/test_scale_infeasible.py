"""Live scaling on one job, as a user does it: many times, both ways (1 -> 3 -> 1 -> 2) while
the job trains, the learner never restarted and nothing stepped lost; then past the cluster's
CPUs the cluster could ever hold (-> 100,000: refused in one line, within seconds, nothing
created, the job goes on), then past the free CPUs (-> 4), as on a small machine: the actor
that does not fit is reported as waiting for CPUs (not as a failure), a scale back down (-> 1)
removes them whatever state they are in (the never-started one cancelled, one line for all),
and stop ends with a summary whose books balance (actor steps = acked = received = inserted).
Meanwhile `herd status --watch` and `herd logs --follow` end quietly on Ctrl-C.

Test cluster: 4 CPUs; learner 0.5 + actors of 1 each: 3 fit."""

from __future__ import annotations

import csv
import json
import time

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

        # ---- far past what the cluster could ever hold: refused in one line, nothing created ----
        t0 = time.monotonic()
        r = herd("scale", job, "--actors", "100000", check=False)
        answer_s = time.monotonic() - t0
        print(f"herd scale --actors 100000 answered in {answer_s:.2f} s: {r.stderr.strip()}")
        assert r.returncode == 2 and r.stdout == "" and len(r.stderr.strip().splitlines()) == 1, r
        # the test cluster's 4 CPUs at actors.num_cpus=1 hold 4 (its memory, more)
        assert "100000 actors could never be placed" in r.stderr and "holds at most 4" in r.stderr
        assert "4 by CPUs at actors.num_cpus=1" in r.stderr and "goes on with its 2" in r.stderr
        assert answer_s < 10, answer_s
        s = status(job)
        assert len(s["actors"]) == 2 and s["target_actors"] == 2 and not s["waiting_actors"], s

        # ---- past the free CPUs: 2 -> 4 (the cluster's 4 CPUs hold 4, the learner has 0.5) ----
        r = herd("scale", job, "--actors", "4")
        assert "4 actors" in r.stdout and "waiting for CPUs (each needs 1" in r.stdout, r.stdout
        # one more fits; the other waits, and status says so instead of "unavailable"
        # (Ray's free-CPU view follows the third actor's placement a moment later)
        s = wait_for(lambda: status_when(job, lambda s: s["waiting_actors"] == 1
                                         and s["cpus_free"] == pytest.approx(0.5)), 60,
                     "1 actor waiting for CPUs, 0.5 free", poll=2)
        waiting = [a for a in s["actors"] if a.get("waiting")]
        assert len(waiting) == 1 and all("waiting for CPUs" in a["error"] for a in waiting)
        text = herd("status", job).stdout
        assert "1 actor waiting for CPUs (needs 1); 0.5 CPUs free" in " ".join(text.split()), text
        # down to 1: the one that never ran is cancelled at once, the 2 other running ones
        # deliver and go; the CLI says so in one line
        r = herd("scale", job, "--actors", "1")
        assert r.stdout.strip() == (f"{job}: 1 actors (2 stopped, their steps delivered; "
                                    "1 cancelled before they started)"), r.stdout
        s = wait_for(lambda: status_when(job, lambda s: len(s["actors"]) == 1 and not s["waiting_actors"]),
                     30, "one actor left", poll=1)
        assert len(s["retired"]) == 2 + 2 and s["cancelled"] == 1  # retired: only actors that ran
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
