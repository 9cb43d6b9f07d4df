"""bench/humanoid_record.py: the record of a run, from a synthetic evaluation series written out here: the
thresholds' times, the best evaluation with its contact cost, the lowest one after 5,000 and
the updates/s once the compiled graph took over."""

from __future__ import annotations

import json

import pytest
import yaml

from bench.humanoid import ROOT, plot
from bench.humanoid_record import compiled_updates_per_s, eval_record, record_of


def series(rows: list[tuple]) -> list[dict]:
    """(seconds since submit, mean return, updates, contact cost) per evaluation."""
    return [{"seconds": s, "mean_return": r, "env_steps": 40 * u, "updates": u, "mean_contact_cost": c}
            for s, r, u, c in rows]


# the compiled graph takes over at 52.7 s; the learner restarts between 70 and 75 s, its count
# back to its checkpoint's 40,000
EVALS = series([
    (17.0, 680.0, 4_000, 40.0),
    (22.0, 5_200.0, 9_000, 55.0),
    (27.0, 4_100.0, 14_000, 60.0),
    (55.0, 8_000.0, 30_000, 70.0),
    (60.0, 10_400.0, 36_000, 80.0),
    (65.0, 11_200.0, 42_000, 90.5),
    (70.0, 9_900.0, 48_000, 85.0),
    (75.0, 10_900.0, 40_000, 88.0),
    (80.0, 10_800.0, 46_000, 87.0),
])
STARTUP = {"first_update_s": 7.5, "first_compiled_update_s": 52.7}


def test_the_records_figures_from_an_evaluation_series():
    r = eval_record(EVALS, STARTUP)
    assert (r["seconds_to_5000"], r["updates_to_5000"], r["env_steps_to_5000"]) == (22.0, 9_000, 360_000)
    assert (r["seconds_to_10000"], r["updates_to_10000"]) == (60.0, 36_000)
    assert r["seconds_to_11000"] == 65.0
    assert (r["best_eval_return"], r["best_eval_at_s"], r["best_eval_contact_cost"]) == (11_200.0, 65.0, 90.5)
    assert r["min_eval_after_5000"] == 4_100.0 and r["dips_after_5000"] == "0/7"
    # from 55 s to 80 s: 6,000 updates in each of four gaps, none counted for the restart's fall
    assert r["updates_per_s"] == pytest.approx(24_000 / 25.0)
    assert r["last3_eval_return"] == pytest.approx((9_900 + 10_900 + 10_800) / 3)


def test_a_run_that_never_got_there_reads_null():
    evals = series([(20.0, 900.0, 5_000, None), (30.0, 4_800.0, 9_000, None), (40.0, 3_000.0, 13_000, None)])
    r = eval_record(evals, STARTUP)
    assert r["seconds_to_5000"] is r["seconds_to_11000"] is r["min_eval_after_5000"] is None
    assert r["dips_after_5000"] is None
    assert (r["best_eval_return"], r["best_eval_at_s"]) == (4_800.0, 30.0)
    assert r["best_eval_contact_cost"] is None  # an env without a contact cost
    assert r["updates_per_s"] is None  # no evaluation after the compiled graph took over
    empty = eval_record([], None)
    assert empty["best_eval_return"] is empty["best_eval_at_s"] is empty["updates_per_s"] is None
    assert empty["last3_eval_return"] is None


def test_updates_per_s_counts_from_the_first_update_without_a_compiled_graph():
    cpu = {"first_update_s": 7.5, "first_compiled_update_s": None}
    assert compiled_updates_per_s(EVALS[:3], cpu) == pytest.approx(10_000 / 10.0)
    assert compiled_updates_per_s(EVALS[:3], {}) is None  # no start-up timeline: no start to count from
    assert compiled_updates_per_s(EVALS[-1:], STARTUP) is None  # one evaluation spans no time


OLD_KEYS = {
    "env", "job", "config_file", "config", "seed", "cold", "first_update_s", "actors_ready_s",
    "first_compiled_update_s", "startup_update_gap_s", "actor_arch", "critic_arch", "critic_loss",
    "obs_norm", "reward_norm", "n_step", "batch", "actors", "seconds_to_5000", "env_steps_to_5000",
    "updates_to_5000", "seconds_to_6500", "env_steps_to_6500", "seconds_to_10000", "updates_to_10000",
    "min_eval_after_5000", "dips_after_5000", "final_eval_return", "best_eval_return", "last3_eval_return",
    "env_steps", "updates", "wall_s", "startup", "evaluations", "env_steps_per_s", "updates_per_s", "command",
}
"""A record's keys before the contact cost and the compiled graph's updates/s came in."""


def test_record_of_keeps_every_key_and_adds_the_new_ones(tmp_path):
    t_submit = 1_000.0
    evals = [{"unix_time": t_submit + e["seconds"], "time_s": e["seconds"] - 5.0, "mean_return": e["mean_return"],
              "env_steps": e["env_steps"], "updates": e["updates"], "mean_contact_cost": e["mean_contact_cost"],
              "min_return": e["mean_return"] - 10, "max_return": e["mean_return"] + 10, "mean_length": 1000.0,
              "policy_version": i, "episodes": 5} for i, e in enumerate(EVALS)]
    summary = {"startup": STARTUP, "evaluations": evals, "wall_s": 100.0,
               "final_eval": {"mean_return": 10_700.0, "mean_contact_cost": 86.0},
               "learner": {"received": 2_000_000, "updates": 50_000}}
    (tmp_path / "job").mkdir()
    (tmp_path / "job" / "summary.json").write_text(json.dumps(summary))
    cfg = yaml.safe_load((ROOT / "configs/humanoid.yaml").read_text())
    r = record_of("configs/humanoid.yaml", 1, {"machine": "m"}, "job", t_submit, cfg, True, str(tmp_path))
    assert OLD_KEYS <= set(r)
    assert {k: r[k] for k in ("seconds_to_11000", "best_eval_return", "best_eval_at_s", "min_eval_after_5000",
                              "best_eval_contact_cost", "final_eval_contact_cost")} == {
        "seconds_to_11000": 65.0, "best_eval_return": 11_200.0, "best_eval_at_s": 65.0,
        "min_eval_after_5000": 4_100.0, "best_eval_contact_cost": 90.5, "final_eval_contact_cost": 86.0}
    assert r["updates_per_s"] == pytest.approx(960.0) and r["updates_per_s_wall"] == 500.0
    assert [e["mean_contact_cost"] for e in r["evaluations"]] == [e["mean_contact_cost"] for e in EVALS]
    assert r["evaluations"][0]["seconds"] == pytest.approx(17.0)


def test_the_plot_draws_the_contact_cost_on_the_right_axis(tmp_path):
    fig = plot([("humanoid s1", EVALS), ("rllib", [{"seconds": 10.0, "mean_return": 300.0}])],
               tmp_path / "p.png", "Herd, Humanoid-v5, test")
    left, _, right = fig.axes
    assert [ln.get_label() for ln in left.lines][:2] == ["humanoid s1", "rllib"]
    (cost,) = right.lines  # one curve has contact costs; its line stays out of the legend
    assert list(cost.get_ydata()) == [e["mean_contact_cost"] for e in EVALS]
    assert cost.get_color() == left.lines[0].get_color() and cost.get_label().startswith("_")
    assert (tmp_path / "p.png").stat().st_size > 0
