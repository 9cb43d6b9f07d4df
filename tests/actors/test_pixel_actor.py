"""An EnvActor of a pixel env (real MuJoCo rendered offscreen) against a real in-process pixel
learner: each frame reaches it once, every env step is one row, n-step rows included, and the
actor acts with the learner's conv policy once published."""

from __future__ import annotations

import time

from herd.actors.config import ActorConfig, EnvConfig
from herd.actors.env_actor import EnvActor
from herd.actors.envs import describe, make_env
from herd.learner.config import LearnerConfig
from herd.learner.learner import Learner
from herd.proto import codec
from tests.pixels import DRQ_STEPS

ENV = EnvConfig(id="InvertedPendulum-v5", pixels={"size": 24, "frame_stack": 3})


def test_pixel_actor_feeds_the_frame_replay_and_acts_with_the_conv_policy():
    d = describe(make_env(ENV))
    spec = codec.spec_to_proto(ENV.id, d["obs_shape"], d["obs_dtype"], d["action_shape"],
                               d["action_low"], d["action_high"], frame_stack=d["frame_stack"])
    cfg = LearnerConfig.flat(capacity=20_000, min_size=64, ratio=None, device="cpu", feature_dim=16,
                             channels=8, layers=2, hidden_sizes=(32, 32), batch_size=16,
                             publish_every_s=0.2, n_step=3, **DRQ_STEPS)
    learner = Learner(cfg, spec)
    actor = None
    try:
        acfg = ActorConfig(num_envs=3, steps_per_push=4, warmup_steps=200, n_step=3, gamma=0.99)
        actor = EnvActor("px0", ENV, acfg, learner.address(), seed=4)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (actor.steps > actor.random_steps + 300
                                                   and actor.episodes > 5):
            time.sleep(0.2)
        stats = actor.stop()
        actor = None
        assert stats["error"] is None and stats["rejected"] == 0
        assert stats["policy_version"] >= 1 and stats["steps"] > stats["random_steps"]
        assert stats["sent"] == stats["acked"] == stats["steps"]  # every env step one row
        deadline = time.monotonic() + 10
        while learner.status_dict()["inserted"] < stats["sent"] and time.monotonic() < deadline:
            time.sleep(0.05)
        s = learner.status_dict()
        assert s["received"] == s["inserted"] == stats["sent"]
        # each frame once: one per step, one per episode start (the envs' first ones included)
        assert s["frames_received"] == stats["steps"] + stats["episodes"] + 3
    finally:
        if actor is not None:
            actor.stop()
        learner.stop()
