"""An env that raises inside step: its actor recreates it, logs once, and loses no transition."""

import logging
import time

import pytest

from herd.actors.config import ActorConfig, EnvConfig
from herd.actors.env_actor import EnvActor
from herd.actors.envs import describe, make_env
from herd.proto import codec


@pytest.fixture
def faulty_learner():
    """A learner whose env spec is the faulty env's own (the handshake compares env ids)."""
    from herd.learner.config import LearnerConfig
    from herd.learner.learner import Learner

    env_cfg = EnvConfig(id="HerdFaulty-v0", module="tests.faults.faulty_env",
                        kwargs={"fail_every": 40})
    d = describe(make_env(env_cfg))
    spec = codec.spec_to_proto(env_cfg.id, d["obs_shape"], d["obs_dtype"], d["action_shape"],
                               d["action_low"], d["action_high"])
    learner = Learner(LearnerConfig.flat(capacity=20_000, min_size=200, batch_size=64,
                                    hidden_sizes=(64, 64), ratio=None), spec)
    yield learner, env_cfg
    learner.stop()


def test_raising_env_is_recreated_and_logged_once(faulty_learner, caplog):
    learner, env_cfg = faulty_learner
    cfg = ActorConfig(num_envs=3, steps_per_push=8, warmup_steps=64, window=2)
    with caplog.at_level(logging.INFO, logger="herd.actor"):
        actor = EnvActor("faulty", env_cfg, cfg, learner.address(), seed=3)
        deadline = time.monotonic() + 40
        while (actor.steps < 3_000 or actor.env_errors < 10) and time.monotonic() < deadline:
            time.sleep(0.05)
        stats = actor.stop()
    assert stats["error"] is None, stats["error"]
    assert stats["env_errors"] >= 10  # every 40 steps of each env instance
    assert stats["steps"] >= 3_000
    raised = [r for r in caplog.records if "raised in step" in r.getMessage()]
    assert len(raised) == 1, [r.getMessage() for r in raised]  # once, not a crash loop
    # the failed steps are no transitions; everything else arrived, exactly once
    assert stats["sent"] == stats["steps"] == stats["acked"]
    deadline = time.monotonic() + 10
    while learner.status_dict()["inserted"] < stats["sent"] and time.monotonic() < deadline:
        time.sleep(0.02)
    ls = learner.status_dict()
    assert ls["received"] == ls["inserted"] == stats["sent"]
    assert ls["rejected_batches"] == 0
