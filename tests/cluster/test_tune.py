"""`herd tune` end to end: a 2 x 1 grid of real jobs as Ray Tune trials on the test cluster."""

from __future__ import annotations

import copy
import json
import subprocess
import sys

import pytest
import yaml

from tests.jobs import ROOT, SMALL

pytestmark = pytest.mark.cluster
SECONDS = 30


def tune(tmp_path, *args) -> subprocess.CompletedProcess:
    cfg = copy.deepcopy(SMALL)
    cfg["run"]["name"] = "tunetest"
    path = tmp_path / "tune.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return subprocess.run([sys.executable, "-m", "herd", "tune", str(path), *args,
                           "--runs-dir", str(tmp_path / "runs")],
                          cwd=ROOT, capture_output=True, text=True, timeout=400, check=False)


def test_tune_runs_each_cell_as_a_job_and_writes_flat_records(ray_cluster, tmp_path):
    out = tmp_path / "sweep.json"
    # 30 s a trial: two side by side on 2 cores make their first update ~17-19 s into it
    r = tune(tmp_path, "--grid", "learner.batch_size=16,32", "--grid", "learner.replay_ratio=0.5",
             "--seconds", str(SECONDS), "--concurrent", "2", "--name", "t", "--out", str(out))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    records = json.loads(out.read_text())
    assert [(rec["learner.batch_size"], rec["learner.replay_ratio"]) for rec in records] == [(16, 0.5), (32, 0.5)]
    for rec in records:
        assert "error" not in rec, rec
        assert rec["seed"] == 1 and rec["seconds"] == SECONDS and rec["env"] == "InvertedPendulum-v5"
        assert rec["updates"] > 0 and rec["env_steps"] >= 300 and rec["final_eval_return"] > 0, rec
        assert rec["wall_s"] >= SECONDS and rec["machine"] and rec["command"].startswith("herd tune")
        summary = json.loads((tmp_path / "runs" / "tune-t" / rec["job"] / "summary.json").read_text())
        assert summary["final_eval"]["mean_return"] == rec["final_eval_return"]  # the job's own books
        cfg = yaml.safe_load((tmp_path / "runs" / "tune-t" / rec["job"] / "config.yaml").read_text())
        assert cfg["learner"]["batch_size"] == rec["learner.batch_size"]
    assert out.with_suffix(".png").stat().st_size > 1_000  # two keys: the heatmap
    assert "mean final return" in r.stdout


def test_a_bad_grid_value_is_refused_before_any_trial(tmp_path):
    r = tune(tmp_path, "--grid", "learner.batch_size=16,-3", "--seconds", "5")
    assert r.returncode == 2
    assert "learner.batch_size" in r.stderr and "batch_size=-3" in r.stderr
    assert not (tmp_path / "runs").exists()
    r = tune(tmp_path, "--grid", "learner.batch_sise=16", "--seconds", "5")
    assert r.returncode == 2 and "batch_sise" in r.stderr
