"""`herd down`'s per-job lines without a cluster (the jobs' records and their answers stood in
for): --force says what each job loses and what its run folder keeps; a job that does not wind
down within the grace says so; `--resume runs/<job>` takes the newest of checkpoint/ and
checkpoint-best/ and names it. The real thing: tests/cluster/test_local_up.py."""

from __future__ import annotations

import os
import time

import pytest

from herd import teardown
from herd.checkpoint import newest_checkpoint


def a_run(tmp_path, *ckpts: tuple[str, float]):
    run = tmp_path / "runs" / "herd-x-1"
    for name, age in ckpts:
        (run / name).mkdir(parents=True)
        (run / name / "model.pt").write_bytes(b"")
        os.utime(run / name / "model.pt", (time.time() - age, time.time() - age))
    (run / "metrics.csv").write_text("time_s\n")
    return run


@pytest.fixture
def one_job(monkeypatch, tmp_path):
    run = a_run(tmp_path, ("checkpoint-best", 40))
    entry = f"python -m herd.driver --job-id herd-x-1 --runs-dir {run.parent}"
    monkeypatch.setattr(teardown, "live_jobs", lambda url: [
        {"submission_id": "herd-x-1", "status": "RUNNING", "entrypoint": entry}])
    return run


def test_force_says_what_each_job_loses_and_keeps(one_job, monkeypatch):
    monkeypatch.setattr(teardown, "ask_stop", lambda *a: pytest.fail("--force asks no job to stop"))
    said = []
    out = teardown.wind_down("http://127.0.0.1:1", force=True, say=said.append)
    assert [r["wound_down"] for r in out] == [False]
    assert said == [out[0]["line"]]
    line = said[0]
    assert line.startswith("herd-x-1: not wound down (--force); lost: summary.json, the final "
                           "checkpoint and books"), line
    assert "keeps checkpoint-best/ (40 s old), metrics.csv" in line, line


def test_a_job_past_its_grace_says_so(one_job, monkeypatch):
    monkeypatch.setattr(teardown, "ask_stop", lambda *a: True)
    monkeypatch.setattr(teardown, "job_state", lambda url, job: "RUNNING")
    t0 = time.monotonic()
    out = teardown.wind_down("http://127.0.0.1:1", grace_s=0.5, say=lambda line: None)
    assert time.monotonic() - t0 < 3
    assert "not wound down within the 0.5 s grace; lost: summary.json" in out[0]["line"]


def test_a_negative_grace_is_refused_in_one_line():
    with pytest.raises(ValueError, match="the grace must be 0 s or more, got -1"):
        teardown.down_cluster(-1)


def test_resume_takes_the_newest_checkpoint_and_names_it(tmp_path):
    run = a_run(tmp_path, ("checkpoint", 100), ("checkpoint-best", 10))
    ckpt, why = newest_checkpoint(run)
    assert ckpt == run / "checkpoint-best"
    assert why.startswith("the newest checkpoint there, saved 10 s ago") and "checkpoint/ is older" in why
    os.utime(run / "checkpoint" / "model.pt")  # a later periodic save
    assert newest_checkpoint(run)[0] == run / "checkpoint"
    assert newest_checkpoint(run / "checkpoint-best") == (run / "checkpoint-best", "named")
    with pytest.raises(FileNotFoundError, match="looked for model.pt, checkpoint/model.pt, "
                                                "checkpoint-best/model.pt"):
        newest_checkpoint(tmp_path)


def test_the_python_twin_says_when_no_cluster_is_on_record(tmp_path, monkeypatch):
    import herd

    monkeypatch.setenv("HERD_HOME", str(tmp_path / "none"))
    with pytest.raises(herd.HerdError, match="no cluster started by `herd up` on record"):
        herd.down()
    with pytest.raises(herd.HerdError, match="the grace must be 0 s or more"):
        herd.down(grace_s=-5)
