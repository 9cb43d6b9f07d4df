"""cluster/periodic_eval.py on a real local Ray cluster: a slow evaluator actor stands in for
MuJoCo, the learner's side is a stub that hands out policies and saves candidate states."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import ray

from herd.periodic_eval import BEST_CHECKPOINT, BEST_POLICY, CANDIDATE, PeriodicEvals
from herd.proto import herd_pb2 as pb
from tests.cluster.stub_evaluator import SlowEvaluator
from tests.jobs import ROOT

pytestmark = pytest.mark.cluster


class Learner:
    """The LearnerWatch calls PeriodicEvals makes: a new version per policy taken."""

    def __init__(self, fail_save: bool = False):
        self.version, self.fail_save = 0, fail_save

    def call(self, method: str, *args):
        if method == "save_for_eval" and self.fail_save:
            raise OSError(28, "No space left on device")
        self.version += 1
        if method == "save_for_eval":
            Path(args[0]).mkdir(parents=True, exist_ok=True)
            (Path(args[0]) / "model.pt").write_text(str(self.version))
        return pb.PolicyWeights(version=self.version)


class Marks:
    def __init__(self):
        self.marks = []

    def mark(self, name: str) -> None:
        self.marks.append(name)


@pytest.fixture
def on_ray(ray_cluster):
    ray.init(address=ray_cluster["gcs"], namespace="herd-periodic-eval-test",
             runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}}, logging_level="ERROR")
    try:
        yield
    finally:
        ray.shutdown()


def evals_with(tmp_path, seconds: float, learner=None, errors=None):
    made = []

    def start():
        made.append(ray.remote(SlowEvaluator).options(num_cpus=0).remote(seconds))
        return made[-1]

    marks = Marks()
    ev = PeriodicEvals(start, learner or Learner(), tmp_path, every_s=0.0, start=time.monotonic(),
                       timeline=marks, checkpoint_errors=errors if errors is not None else [])
    return ev, made, marks


def test_the_evaluation_under_way_at_the_stop_is_kept_with_its_state(on_ray, tmp_path):
    ev, made, marks = evals_with(tmp_path, seconds=3.0)
    ev.poll({"updates": 0, "received": 0}, time.monotonic())
    assert not made  # no evaluator before the first update
    ev.poll({"updates": 5, "received": 100}, time.monotonic())
    assert len(made) == 1 and (tmp_path / CANDIDATE / "model.pt").exists()
    ev.poll({"updates": 9, "received": 200}, time.monotonic())  # one under way at a time
    assert ev.evals == []
    ev.finish()  # the stop: waited for, recorded, kept as the best
    assert [(e["mean_return"], e["updates"], e["env_steps"]) for e in ev.evals] == [(1.0, 5, 100)]
    assert marks.marks == ["first_eval"] and ev.best()["policy_version"] == 1
    assert pb.PolicyWeights.FromString((tmp_path / BEST_POLICY).read_bytes()).version == 1
    assert (tmp_path / BEST_CHECKPOINT / "model.pt").read_text() == "1"
    assert ev.final(pb.PolicyWeights(version=7))["mean_return"] == 7.0
    assert not (tmp_path / CANDIDATE).exists()


def test_finished_evaluations_keep_the_best_and_a_slow_one_at_the_stop_is_left_out(on_ray, tmp_path, capsys):
    errors = []
    ev, made, _ = evals_with(tmp_path, seconds=0.2, learner=Learner(fail_save=True), errors=errors)
    for updates in (1, 2, 3):
        ev.poll({"updates": updates, "received": 10 * updates}, time.monotonic())
        deadline = time.monotonic() + 30
        while len(ev.evals) < updates and time.monotonic() < deadline:
            time.sleep(0.05)
            ev.poll({"updates": updates, "received": 10 * updates}, time.monotonic())
    assert [e["mean_return"] for e in ev.evals] == [1.0, 2.0, 3.0] and len(made) == 1
    # a failed candidate save (disk full) costs the candidate, not the evaluation
    assert errors and errors[0]["best_candidate"] and not (tmp_path / BEST_CHECKPOINT).exists()
    assert pb.PolicyWeights.FromString((tmp_path / BEST_POLICY).read_bytes()).version == 3
    ev.finish()  # nothing under way: nothing to wait for
    (tmp_path / "slow").mkdir()
    ev2, _, _ = evals_with(tmp_path / "slow", seconds=30.0)
    ev2.poll({"updates": 1, "received": 1}, time.monotonic())
    t0 = time.monotonic()
    ev2.finish(wait_s=0.5)
    assert time.monotonic() - t0 < 10 and ev2.evals == []
    assert "the last periodic evaluation is left out (not done within 0.5 s)" in capsys.readouterr().out


def test_an_evaluation_whose_evaluator_is_lost_is_left_out_and_the_next_goes_on(on_ray, tmp_path, capsys):
    """Its process killed mid-evaluation (as its node's loss takes it): Ray starts the evaluator
    again, the evaluation under way is left out, the supervision goes on with the next."""
    made = []

    def start():
        made.append(ray.remote(SlowEvaluator).options(num_cpus=0, max_restarts=-1).remote(5.0))
        return made[-1]

    ev = PeriodicEvals(start, Learner(), tmp_path, every_s=0.0, start=time.monotonic(), timeline=Marks(),
                       checkpoint_errors=[])
    ev.poll({"updates": 1, "received": 10}, time.monotonic())
    assert len(made) == 1
    from ray.util.state import get_actor

    actor_id = made[0]._actor_id.hex()
    deadline = time.monotonic() + 60
    while (getattr(get_actor(actor_id), "state", None) != "ALIVE") and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(1.0)  # its 5 s evaluation under way
    ray.kill(made[0], no_restart=False)
    deadline = time.monotonic() + 60
    while not ev.evals and time.monotonic() < deadline:
        time.sleep(0.2)
        ev.poll({"updates": 2, "received": 20}, time.monotonic())
    assert "an evaluation is left out: its evaluator was lost" in capsys.readouterr().out
    assert [e["policy_version"] for e in ev.evals] == [2] and len(made) == 1  # the same actor, restarted
