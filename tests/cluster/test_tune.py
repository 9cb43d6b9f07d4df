"""`herd tune` end to end: a 2 x 1 grid of real jobs as Ray Tune trials on the test cluster."""

from __future__ import annotations

import copy
import json
import subprocess
import sys

import pytest
import yaml

from herd.config import ConfigError
from herd.tune import TrialBooks, earlier_records, idle_trial, merged
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
    r = tune(tmp_path, "--grid", "learner.replay.batch_size=16,32", "--grid", "learner.replay.ratio=0.5",
             "--seconds", str(SECONDS), "--concurrent", "2", "--name", "t", "--out", str(out),
             "--set", "run.log_every_s=2", "--set", "actors.num_cpus=1.4")
    # 1.4 CPUs an actor: the two trials' groups then hold all but 0.2 of the 4, so an actor
    # scheduled outside its trial's group would never start (as on the GPU box, 0 steps)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    records = json.loads(out.read_text())
    assert [(rec["learner.replay.batch_size"], rec["learner.replay.ratio"]) for rec in records] == [(16, 0.5), (32, 0.5)]
    for rec in records:
        assert "error" not in rec, rec
        assert rec["seed"] == 1 and rec["seconds"] == SECONDS and rec["env"] == "InvertedPendulum-v5"
        assert rec["updates"] > 0 and rec["env_steps"] >= 300 and rec["final_eval_return"] > 0, rec
        assert rec["wall_s"] >= SECONDS and rec["machine"] and rec["command"].startswith("herd tune")
        summary = json.loads((tmp_path / "runs" / "tune-t" / rec["job"] / "summary.json").read_text())
        assert summary["final_eval"]["mean_return"] == rec["final_eval_return"]  # the job's own books
        assert rec["first_update_s"] == summary["startup"]["first_update_s"] > 0  # its start-up, kept
        assert "first_compiled_update_s" in rec  # null on the CPU, where nothing compiles
        cfg = yaml.safe_load((tmp_path / "runs" / "tune-t" / rec["job"] / "config.yaml").read_text())
        assert cfg["learner"]["replay"]["batch_size"] == rec["learner.replay.batch_size"]
        assert cfg["run"]["log_every_s"] == 2  # --set (SMALL has 1), in every trial
    assert out.with_suffix(".png").stat().st_size > 1_000  # two keys: the heatmap
    assert "mean final return" in r.stdout


def test_a_bad_grid_value_is_refused_before_any_trial(tmp_path):
    r = tune(tmp_path, "--grid", "learner.replay.batch_size=16,-3", "--seconds", "5")
    assert r.returncode == 2
    assert "learner.replay.batch_size" in r.stderr and "batch_size=-3" in r.stderr
    assert not (tmp_path / "runs").exists()
    r = tune(tmp_path, "--grid", "learner.replay.batch_sise=16", "--seconds", "5")
    assert r.returncode == 2 and "batch_sise" in r.stderr
    r = tune(tmp_path, "--grid", "learner.replay.batch_size=16", "--seconds", "5", "--set", "actors.num_actors=-1")
    assert r.returncode == 2 and "num_actors" in r.stderr and "--set" in r.stderr


def test_append_keeps_other_seeds_and_replaces_a_trial_run_again(tmp_path):
    """A sweep split over several calls (--first-seed K --append): one table, one heatmap."""
    key = "learner.replay.batch_size"
    earlier = [{key: 16, "seed": 1, "final_eval_return": 1.0, "seconds": 30},
               {key: 32, "seed": 1, "final_eval_return": 2.0, "seconds": 30},
               {key: 16, "seed": 2, "final_eval_return": 3.0, "seconds": 30}]
    path = tmp_path / "sweep.json"
    path.write_text(json.dumps(earlier))
    assert earlier_records(path, [key], 30) == earlier
    now = [{key: 32, "seed": 2, "final_eval_return": 4.0}, {key: 16, "seed": 2, "final_eval_return": 5.0}]
    out = merged(now, earlier_records(path, [key], 30), [key])
    assert [(r[key], r["seed"], r["final_eval_return"]) for r in out] == [
        (16, 1, 1.0), (16, 2, 5.0), (32, 1, 2.0), (32, 2, 4.0)]
    assert earlier_records(tmp_path / "none.json", [key], 30) == []  # a first call: nothing yet


def test_append_refuses_another_sweeps_file(tmp_path):
    path = tmp_path / "sweep.json"
    path.write_text(json.dumps([{"learner.replay.batch_size": 16, "seed": 1, "seconds": 30}]))
    with pytest.raises(ConfigError, match="another sweep"):
        earlier_records(path, ["learner.replay.ratio"], 30)  # other grid keys
    with pytest.raises(ConfigError, match="another sweep"):
        earlier_records(path, ["learner.replay.batch_size"], 120)  # another budget
    path.write_text("{not json")
    with pytest.raises(ConfigError, match="not a herd tune result"):
        earlier_records(path, ["learner.replay.batch_size"], 30)
    r = tune(tmp_path, "--grid", "learner.replay.batch_size=16", "--seconds", "5", "--out", str(path), "--append")
    assert r.returncode == 2 and "not a herd tune result" in r.stderr  # before any trial
    assert not (tmp_path / "runs").exists()


def test_a_trial_that_made_no_update_is_an_error_that_says_why():
    """The GPU box's first sweep: 9 trials of 0 env steps each, recorded as results."""
    def summary(updates, received, actor_steps):
        return {"wall_s": 120.4, "learner": {"updates": updates, "received": received},
                "actor_steps": actor_steps}

    assert idle_trial(summary(10, 5_000, 5_000)) is None
    assert "no env actor stepped" in idle_trial(summary(0, 0, 0))
    assert "sent no transition" in idle_trial(summary(0, 0, 800))
    got = idle_trial(summary(0, 700, 700))
    assert "no update in 120 s" in got and "700 transitions" in got and "learner.replay.min_size" in got


def test_each_finished_trial_is_written_at_once_so_a_cut_sweep_keeps_it(tmp_path):
    """A machine's time limit can end `herd tune` mid-grid: what finished is already on disk."""
    from types import SimpleNamespace

    key = "learner.replay.batch_size"
    path = tmp_path / "sweep.json"
    earlier = [{key: 16, "seed": 9, "final_eval_return": 1.0, "seconds": 30}]
    books = TrialBooks(path, [key], earlier, {"machine": "test", "seconds": 30})
    keep = books.callback()

    def trial(index, seed, result=None, error=None):
        cell = {"index": index, "seed": seed, "point": {key: 16}, "config": {"env": {"id": "E-v0"}}}
        return SimpleNamespace(config={"cell": cell}, last_result=result, get_error=lambda: error)

    keep.on_trial_complete(1, [], trial(0, 1, {"final_eval_return": 5.0, "updates": 7, "time_total_s": 3}))
    got = json.loads(path.read_text())
    assert [(r["seed"], r.get("final_eval_return")) for r in got] == [(1, 5.0), (9, 1.0)]
    assert "time_total_s" not in got[0] and got[0]["updates"] == 7 and got[0]["env"] == "E-v0"
    keep.on_trial_error(2, [], trial(1, 2, error="Traceback ...\nRuntimeError: t-001: no update in 30 s"))
    got = json.loads(path.read_text())
    assert got[1]["seed"] == 2 and got[1]["error"] == "RuntimeError: t-001: no update in 30 s"
    assert not list(tmp_path.glob("*.tmp"))  # written whole, then moved in place
