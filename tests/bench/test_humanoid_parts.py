"""bench/humanoid.py's pure parts: ablation variants that parse as job configs, eval bookkeeping."""

import json

import pytest
import yaml

from bench.humanoid import (
    ABLATIONS,
    ROOT,
    apply_overrides,
    label,
    plot,
    variants,
)
from bench.humanoid_record import first_reaching, lowest_after
from herd.config import parse_config


def test_every_ablation_switches_its_piece_off_in_a_valid_config():
    base = yaml.safe_load((ROOT / "configs/humanoid.yaml").read_text())
    full = parse_config(base).learner.algorithm
    assert (full.critic_arch, full.critic_loss, full.obs_norm, full.reward_norm, full.n_step) == (
        "residual", "mse", True, True, 3)  # the family the pieces are switched in
    seen = {}
    for name, overrides in variants("all")[1:]:
        cfg = parse_config(apply_overrides(yaml.safe_load((ROOT / "configs/humanoid.yaml").read_text()),
                                           [f"{k}={json.dumps(v)}" for k, v in overrides.items()])).learner.algorithm
        seen[name] = cfg
    assert seen["-residual"].critic_arch == seen["-residual"].actor_arch == "mlp"
    assert seen["+c51"].critic_loss == "c51" and not seen["-obs_norm"].obs_norm
    assert seen["+c51"].v_max > seen["+c51"].v_min  # the config keeps the atoms' support for it
    assert not seen["-reward_norm"].reward_norm and seen["-n_step"].n_step == 1
    assert set(ABLATIONS) == {n[1:] for n in seen}
    with pytest.raises(SystemExit, match="unknown piece"):
        variants("c51,wings")


def test_first_reaching_and_the_lowest_evaluation_after_it():
    evals = [{"mean_return": r} for r in (100, 5200, 3900, 6000, 4100)]
    assert first_reaching(evals, 5000)["mean_return"] == 5200
    assert lowest_after(evals, 5000) == 3900
    assert lowest_after(evals, 7000) is None and lowest_after([{"mean_return": 5001}], 5000) is None


def test_the_plot_draws_every_run_one_colour_per_arm(tmp_path):
    """An ablation's 12 runs are 12 curves (markers used to run out after five)."""
    evals = [{"seconds": 10.0 * i, "mean_return": 100.0 * i, "env_steps": 1000 * i} for i in range(3)]
    runs = [label("configs/humanoid.yaml", v, s) for v, _ in variants("all") for s in (1, 2)]
    fig = plot([(r, evals) for r in runs], tmp_path / "p.png", "Herd, Humanoid-v5, test")
    for ax in fig.axes:
        assert [ln.get_label() for ln in ax.lines if ln.get_label() in runs] == runs
    first = {ln.get_label(): ln.get_color() for ln in fig.axes[0].lines}
    assert first["humanoid s1"] == first["humanoid s2"] != first["humanoid +c51 s1"]
    assert (tmp_path / "p.png").stat().st_size > 0
    # labels not of label()'s "<arm> s<seed>" form (bench/plot_results.py's): a colour each
    fig = plot([("family, seed 1", evals), ("family, seed 2", evals)], tmp_path / "q.png", "Herd, test")
    assert fig.axes[0].lines[0].get_color() != fig.axes[0].lines[1].get_color()


def test_each_evaluation_carries_the_training_statistics_logged_before_it(tmp_path):
    from bench.humanoid_record import TRAIN_KEYS, training_at, training_rows

    assert training_rows(tmp_path / "none.csv") == []
    from herd.metrics import COLUMNS

    assert set(TRAIN_KEYS) <= set(COLUMNS)  # the driver's metrics.csv writes each of them
    path = tmp_path / "metrics.csv"
    path.write_text(",".join(COLUMNS) + "\n" + "\n".join(
        ",".join({"time_s": str(t), "critic_loss": str(loss), "alpha": "", "train_return": "50"}.get(c, "1")
                 for c in COLUMNS) for t, loss in ((2.0, 0.5), (4.0, 0.25), (6.0, 9.0))) + "\n")
    rows = training_rows(path)
    at = training_at(rows, 5.0)  # the row of 4.0 s, not the later spike at 6.0 s
    assert at["train_critic_loss"] == 0.25 and at["train_alpha"] is None and at["train_return"] == 50.0
    assert set(at) == {k if k.startswith("train_") else f"train_{k}" for k in TRAIN_KEYS}
    assert training_at(rows, 1.0) == {} and training_at(rows, 60.0)["train_critic_loss"] == 9.0


def test_an_arm_is_a_named_variant_with_set_overrides_and_a_bad_one_is_refused():
    from bench.humanoid import parse_arm

    name, overrides = parse_arm("ema:learner.algorithm.actor_ema=0.001; learner.algorithm.actor_lr=0.0001")
    assert name == "ema" and overrides == {"learner.algorithm.actor_ema": 0.001, "learner.algorithm.actor_lr": 0.0001}
    cfg = parse_config(apply_overrides(yaml.safe_load((ROOT / "configs/humanoid.yaml").read_text()),
                                       [f"{k}={json.dumps(v)}" for k, v in overrides.items()])).learner.algorithm
    assert cfg.actor_ema == 0.001 and cfg.actor_lr == 1e-4
    for bad in ("ema", "ema:", ":learner.algorithm.tau=0.1", "full:learner.algorithm.tau=0.1", "c51:learner.algorithm.tau=0.1",
                "ema:learner.algorithm.tau"):
        with pytest.raises(SystemExit, match="--arm"):
            parse_arm(bad)


def test_a_run_s_record_carries_the_start_up_s_flat_keys(tmp_path) -> None:
    """The start-up milestones as flat keys, from summary.json's startup (which stays whole)."""
    import json

    from bench.humanoid_record import record_of

    startup = {"first_update_s": 7.5, "actors_ready_s": 9.2, "first_compiled_update_s": 52.7,
               "startup_update_gap_s": 0.27, "learner_init_s": 6.0}
    evals = [{"unix_time": 130.0, "time_s": 28.0, "mean_return": 5100.0, "env_steps": 350_000, "updates": 13_000}]
    summary = {"startup": startup, "evaluations": evals, "final_eval": {"mean_return": 9000.0},
               "learner": {"received": 400_000, "updates": 15_000}, "wall_s": 40.0}
    (tmp_path / "job").mkdir()
    (tmp_path / "job" / "summary.json").write_text(json.dumps(summary))
    cfg = yaml.safe_load((ROOT / "configs/humanoid.yaml").read_text())
    r = record_of("configs/humanoid.yaml", 1, {"machine": "m"}, "job", 100.0, cfg, True, str(tmp_path))
    assert {k: r[k] for k in ("cold", "first_update_s", "actors_ready_s", "first_compiled_update_s",
                              "startup_update_gap_s", "seconds_to_5000", "machine")} == {
        "cold": True, "first_update_s": 7.5, "actors_ready_s": 9.2, "first_compiled_update_s": 52.7,
        "startup_update_gap_s": 0.27, "seconds_to_5000": 30.0, "machine": "m"}
    assert r["startup"] == startup and r["command"].startswith("python ")
