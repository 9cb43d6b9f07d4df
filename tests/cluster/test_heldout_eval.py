"""A randomized env's evaluation (herd.evaluation.Evaluator): on the nominal model, as an
unrandomized job's, and on a held-out set of draws, the same set every time and none of the
training draws."""

from __future__ import annotations

import sys

import numpy as np

from herd.actors.config import EnvConfig, PixelConfig, RandomizeConfig
from herd.actors.envs import make_env
from herd.evaluation import HELDOUT, Evaluator, evaluate
from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "examples" / "myrobot"))


class Linear:
    """A fixed deterministic policy: tanh of a random projection of what it reads."""

    version = 7

    def __init__(self, obs_dim: int, act_dim: int = 2):
        self.w = np.random.default_rng(0).normal(size=(obs_dim, act_dim)) / np.sqrt(obs_dim)

    def act(self, obs, deterministic=True):
        x = np.asarray(obs, np.float64).reshape(len(obs), -1)
        return np.tanh((x / max(1.0, np.abs(x).max()) - 0.5) @ self.w * 4)


def arm(randomize: RandomizeConfig | None, pixels: bool = False) -> EnvConfig:
    return EnvConfig(id="MyRobot-v0", module="myrobot", randomize=randomize,
                     pixels=PixelConfig(size=24, frame_stack=2) if pixels else None)


def test_nominal_and_heldout_figures_side_by_side():
    randomized, plain = arm(RandomizeConfig(seed=2, heldout_seed=9)), arm(None)
    policy = Linear(10)
    out = evaluate(randomized, policy, episodes=3)
    assert out["policy_version"] == 7 and out["episodes"] == out[HELDOUT + "episodes"] == 3
    # the nominal figures are an unrandomized job's, exactly
    assert {k: out[k] for k in evaluate(plain, policy, 3)} == evaluate(plain, policy, 3)
    assert out[HELDOUT + "mean_return"] != out["mean_return"]
    again = Evaluator(randomized, 3)
    assert again.evaluate(policy) == again.evaluate(policy) == out  # one held-out set, every time
    assert evaluate(plain, policy, 3).keys().isdisjoint({HELDOUT + "mean_return"})


def test_the_nominal_envs_hold_the_written_model_and_the_heldout_ones_other_draws():
    cfg = arm(RandomizeConfig(seed=2, heldout_seed=9))
    ev = Evaluator(cfg, 2, seed=100)
    ev.evaluate(Linear(10))
    (_, nominal), (prefix, heldout) = ev.sets
    written = make_env(arm(None)).unwrapped.model
    assert prefix == HELDOUT
    for env in nominal:
        assert np.array_equal(env.unwrapped.model.body_mass, written.body_mass)
        assert np.array_equal(env.unwrapped.model.geom_rgba, written.geom_rgba)
    training = make_env(cfg)
    for i, env in enumerate(heldout):  # episode i's draw (reset seed 100 + i) against training's
        training.reset(seed=100 + i)
        held = env.unwrapped.model.body_mass
        assert not np.allclose(held, written.body_mass)
        assert not np.allclose(held, training.unwrapped.model.body_mass)


def test_a_pixel_policy_is_evaluated_on_randomized_frames():
    cfg = arm(RandomizeConfig(seed=0, heldout_seed=1, **{k: None for k in (
        "mass", "friction", "damping", "actuator_gain", "gravity")}), pixels=True)
    out = evaluate(cfg, Linear(2 * 3 * 24 * 24), episodes=2)
    # only the looks differ: the policy acts on other frames, so the arm moves otherwise
    assert out[HELDOUT + "mean_return"] != out["mean_return"]


def test_a_job_trained_on_the_written_model_is_still_evaluated_on_heldout_draws():
    """env.randomize.train false: the actors' envs are the model as written, the evaluations
    report the same held-out draws a randomized job's do."""
    from herd.actors.randomize import Randomized

    randomize = RandomizeConfig(seed=2, heldout_seed=9)
    untrained = arm(randomize.model_copy(update={"train": False}))
    env = make_env(untrained)
    assert not isinstance(env, Randomized)
    env.reset(seed=5)
    assert np.array_equal(env.unwrapped.model.body_mass, make_env(arm(None)).unwrapped.model.body_mass)
    policy = Linear(10)
    assert evaluate(untrained, policy, 3) == evaluate(arm(randomize), policy, 3)


def test_the_last_heldout_return_goes_to_metrics_csv(tmp_path):
    import csv

    from herd.metrics import COLUMNS, MetricsWriter
    from herd.periodic_eval import PeriodicEvals

    periodic = PeriodicEvals(None, None, tmp_path, every_s=1.0, start=0.0, timeline=None, checkpoint_errors=[])
    assert periodic.last_heldout_return() is None  # no evaluation yet
    periodic.evals += [{"mean_return": 50.0, "heldout_mean_return": 41.5}]
    assert periodic.last_heldout_return() == 41.5
    periodic.evals.append({"mean_return": 52.0})  # an env without env.randomize
    assert periodic.last_heldout_return() is None
    assert COLUMNS[-1] == "eval_heldout_return"  # appended: older files' columns keep their places
    writer = MetricsWriter(tmp_path)
    writer.write({"time_s": 1.0, "env_steps": 10, "eval_return": 50.0, "eval_heldout_return": 41.5})
    writer.write({"time_s": 2.0, "env_steps": 20, "eval_return": 52.0, "eval_heldout_return": None})
    writer.close()
    with open(tmp_path / "metrics.csv", newline="") as f:
        assert [r["eval_heldout_return"] for r in csv.DictReader(f)] == ["41.5", ""]
