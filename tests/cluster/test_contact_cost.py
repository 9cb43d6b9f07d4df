"""Evaluations report Humanoid-v5's contact cost beside the return: the evaluator's episodes on a
real MuJoCo env against a plain gymnasium loop, `herd evaluate`'s output, the periodic
evaluations' figure for metrics.csv and the column it lands in, and a real job's records."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
import yaml

from bench.actors import random_policy_weights
from herd.actors.config import EnvConfig
from tests.jobs import ROOT, SMALL, submit, wait_for

# short episodes: a random policy's Humanoid falls (and touches the floor) within a few dozen steps
HUMANOID = EnvConfig(id="Humanoid-v5", kwargs={"max_episode_steps": 40})


@pytest.fixture(scope="module")
def humanoid_weights():
    return random_policy_weights(348, 17, hidden=(16, 16))


def plain_loop_costs(weights, episodes: int, seed: int = 10_000) -> list[float]:
    """Each episode's -sum(reward_contact), stepped by hand with the same policy and seeds."""
    from herd.actors.policy import MLPPolicy

    env = gym.make(HUMANOID.id, **HUMANOID.kwargs)
    policy = MLPPolicy(weights, env.action_space.low, env.action_space.high)
    costs = []
    for ep in range(episodes):
        obs, _ = env.reset(seed=seed + ep)
        done, cost = False, 0.0
        while not done:
            action = policy.act(np.asarray(obs, np.float32)[None], deterministic=True)[0]
            obs, _, term, trunc, info = env.step(action)
            cost -= float(info["reward_contact"])
            done = term or trunc
        costs.append(cost)
    env.close()
    return costs


def test_humanoid_evaluations_carry_the_summed_contact_cost(humanoid_weights):
    from herd.evaluation import Evaluator, evaluate

    out = evaluate(HUMANOID, humanoid_weights, 3)
    expected = plain_loop_costs(humanoid_weights, 3)
    # the evaluator acts for its 3 envs in one batch: float32 matmuls round a hair apart
    assert out["mean_contact_cost"] == pytest.approx(float(np.mean(expected)), rel=1e-5)
    assert out["mean_contact_cost"] > 0  # a cost, reported as a positive number
    assert Evaluator(HUMANOID, 3).evaluate(humanoid_weights) == out  # the driver's evaluator


def test_an_env_without_a_contact_cost_reports_none():
    from herd.evaluation import evaluate

    out = evaluate(EnvConfig(id="Hopper-v5"), random_policy_weights(11, 3, hidden=(16, 16)), 2)
    assert out["mean_contact_cost"] is None and out["episodes"] == 2


def test_herd_evaluate_prints_the_contact_cost_beside_the_return(humanoid_weights, tmp_path):
    run = tmp_path / "runs" / "herd-contact-job"
    run.mkdir(parents=True)
    (run / "config.yaml").write_text(yaml.safe_dump({"env": HUMANOID.model_dump(mode="json")}))
    (run / "best_policy.pb").write_bytes(humanoid_weights.SerializeToString())

    def herd(*args):
        r = subprocess.run([sys.executable, "-m", "herd", "evaluate", str(run / "best_policy.pb"),
                            "--episodes", "2", *args], cwd=ROOT, capture_output=True, text=True,
                           timeout=300, env=dict(os.environ), check=False)
        assert r.returncode == 0, r.stderr
        return r.stdout

    data = json.loads(herd("--json"))
    assert data["env"] == "Humanoid-v5"
    assert data["mean_contact_cost"] == pytest.approx(float(np.mean(plain_loop_costs(humanoid_weights, 2))), rel=1e-5)
    text = herd()
    assert "deterministic return" in text
    assert f"contact cost {data['mean_contact_cost']:.1f} per episode" in text
    assert f"return without it {data['mean_return'] + data['mean_contact_cost']:.1f}" in text


def test_the_periodic_evaluations_last_contact_cost_goes_to_metrics_csv(tmp_path):
    from herd.metrics import COLUMNS, MetricsWriter
    from herd.periodic_eval import PeriodicEvals

    periodic = PeriodicEvals(None, None, tmp_path, every_s=1.0, start=0.0, timeline=None, checkpoint_errors=[])
    assert periodic.last_contact_cost() is None  # no evaluation yet
    periodic.evals += [{"mean_return": 5.0, "mean_contact_cost": 3.5}, {"mean_return": 6.0, "mean_contact_cost": 2.25}]
    assert periodic.last_contact_cost() == 2.25
    periodic.evals.append({"mean_return": 7.0})  # an evaluator's record without the field
    assert periodic.last_contact_cost() is None
    # appended: older files' columns keep their places
    assert COLUMNS.index("eval_contact_cost") == 20
    writer = MetricsWriter(tmp_path)
    writer.write({"time_s": 1.0, "env_steps": 10, "eval_return": 6.0, "eval_contact_cost": 2.25})
    writer.write({"time_s": 2.0, "env_steps": 20, "eval_return": None, "eval_contact_cost": None})
    writer.close()
    with open(tmp_path / "metrics.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["eval_contact_cost"] for r in rows] == ["2.25", ""]


@pytest.mark.cluster
def test_a_humanoid_jobs_evaluations_and_metrics_carry_the_contact_cost(ray_cluster, tmp_path):
    cfg = {**SMALL, "env": HUMANOID.model_dump(mode="json"),
           "run": {**SMALL["run"], "name": "contact", "max_seconds": 20, "eval_every_s": 3, "eval_episodes": 2}}
    job = submit(cfg, tmp_path)
    summary_path = tmp_path / "runs" / job / "summary.json"
    wait_for(summary_path.exists, 240, "the job's summary.json")
    summary = json.loads(summary_path.read_text())
    evals = summary["evaluations"]
    assert evals and all(e["mean_contact_cost"] > 0 for e in evals), evals
    assert summary["final_eval"]["mean_contact_cost"] > 0
    assert summary["best_eval"]["mean_contact_cost"] > 0
    with open(tmp_path / "runs" / job / "metrics.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    logged = [float(r["eval_contact_cost"]) for r in rows if r["eval_contact_cost"]]
    # each row carries the last evaluation finished by then: the costs logged are the evaluations'
    assert logged and set(logged) <= {e["mean_contact_cost"] for e in evals}
    assert all(r["eval_return"] for r in rows if r["eval_contact_cost"])
