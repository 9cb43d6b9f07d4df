"""bench/pixels.py: a pixel run's record from a summary.json written out here (thresholds'
times, frames in DrQ-v2's count, the rates over the evaluations' span, the replay's bytes and
capacity) and its plot beside DrQ-v2's published median."""

from __future__ import annotations

import json

import pytest
import yaml

from bench.humanoid import ROOT
from bench.pixels import DRQV2_MEDIAN, pixel_record, plot, task_of

T0 = 1_000_000.0
# (seconds since submit, mean return, agent steps, updates)
EVALS = [(30.0, 40.0, 10_000, 2_000), (90.0, 520.0, 100_000, 40_000), (150.0, 710.0, 190_000, 80_000),
         (210.0, 905.0, 280_000, 120_000), (270.0, 880.0, 370_000, 160_000)]


def write_run(tmp_path, job="herd-walker-1") -> dict:
    cfg = yaml.safe_load((ROOT / "configs" / "walker-walk-pixels.yaml").read_text())
    (tmp_path / job).mkdir()
    summary = {
        "evaluations": [{"unix_time": T0 + s, "time_s": s - 3, "mean_return": r, "env_steps": n, "updates": u}
                        for s, r, n, u in EVALS],
        "final_eval": {"mean_return": 890.0},
        "learner": {"received": 400_000, "updates": 170_000, "replay_bytes_per_transition": 21_833.2,
                    "replay_naive_bytes_per_transition": 127_044.0, "replay_frame_capacity": 1_028_192,
                    "rows_unresolved": 0},
        "startup": {"first_update_s": 9.5},
        "wall_s": 300.0,
    }
    (tmp_path / job / "summary.json").write_text(json.dumps(summary))
    return cfg


def test_a_pixel_runs_record(tmp_path):
    cfg = write_run(tmp_path)
    r = pixel_record("configs/walker-walk-pixels.yaml", 2, {"machine": "cpu"}, "herd-walker-1", T0, cfg, True,
                     str(tmp_path))
    assert (r["env"], r["pixels"], r["seed"], r["cold"]) == ("dm_control/walker-walk-v0", 84, 2, True)
    assert (r["seconds_to_500"], r["seconds_to_700"], r["seconds_to_900"]) == (90.0, 150.0, 210.0)
    assert r["frames_to_700"] == 190_000 * 2  # agent steps x action repeat
    assert r["frames_per_s"] == pytest.approx(360_000 / 240) and r["updates_per_s"] == pytest.approx(158_000 / 240)
    assert r["frames_per_s_wall"] == pytest.approx(400_000 / 300)
    assert (r["best_eval_return"], r["best_eval_at_s"], r["final_eval_return"]) == (905.0, 210.0, 890.0)
    assert r["replay_capacity"] == 1_000_000 and r["replay_frame_capacity"] == 1_028_192
    assert r["replay_bytes_per_transition"] / r["replay_naive_bytes_per_transition"] < 0.2
    assert r["replay_gib"] == pytest.approx(21_833.2 * 1e6 / 2**30)
    assert [e["seconds"] for e in r["evaluations"]] == [s for s, *_ in EVALS]


def test_a_run_that_never_reaches_a_threshold_reads_null(tmp_path):
    cfg = write_run(tmp_path)
    cfg["env"]["pixels"]["size"] = 128
    data = json.loads((tmp_path / "herd-walker-1" / "summary.json").read_text())
    data["evaluations"] = data["evaluations"][:1]
    (tmp_path / "herd-walker-1" / "summary.json").write_text(json.dumps(data))
    r = pixel_record("x.yaml", 1, {}, "herd-walker-1", T0, cfg, False, str(tmp_path))
    assert r["pixels"] == 128 and r["best_eval_return"] == 40.0
    assert r["seconds_to_500"] is None and r["frames_to_700"] is None and r["frames_per_s"] is None


def test_the_plot_draws_drqv2_beside_the_runs(tmp_path):
    cfg = write_run(tmp_path)
    r = pixel_record("c.yaml", 1, {}, "herd-walker-1", T0, cfg, True, str(tmp_path))
    fig = plot([r], tmp_path / "p.png", "t")
    labels = [line.get_label() for line in fig.axes[1].get_lines()]
    assert any(label.startswith("DrQ-v2 walker-walk") for label in labels) and (tmp_path / "p.png").stat().st_size
    assert task_of(r["env"]) in DRQV2_MEDIAN
    frames, hours, _ = zip(*DRQV2_MEDIAN["walker-walk"], strict=True)
    assert list(frames) == sorted(frames) and list(hours) == sorted(hours)


def test_arms_time_to_target_every_seed_and_median(tmp_path):
    from bench.pixels import arm_lines

    cfg = write_run(tmp_path)
    cfg["run"]["target_return"] = 600
    fast = pixel_record("configs/fast.yaml", 1, {}, "herd-walker-1", T0, cfg, False, str(tmp_path))
    assert (fast["arm"], fast["target_return"], fast["seconds_to_target"]) == ("fast", 600, 150.0)
    cfg["run"]["target_return"] = 2_000
    never = pixel_record("configs/slow.yaml", 1, {}, "herd-walker-1", T0, cfg, False, str(tmp_path))
    assert never["seconds_to_target"] is None
    lines = arm_lines([fast, {**fast, "seed": 2, "seconds_to_target": 50.0}, never])
    assert lines["fast"] == "target 600: seed 1 150 s, seed 2 50 s; median 100 s"
    assert lines["slow"] == "target 2000: seed 1 never; median 300 s"  # its whole run, 300 s
