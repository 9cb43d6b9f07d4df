"""EnvActor against a real in-process learner: rows arrive, counts agree, metrics are filled."""

import time

from herd.actors.config import ActorConfig
from herd.actors.env_actor import EnvActor


def test_actor_feeds_learner_and_counts_agree(make_learner, env_cfg):
    learner = make_learner(min_size=200, capacity=20_000, ratio=None)
    cfg = ActorConfig(num_envs=4, steps_per_push=8, warmup_steps=64, window=2, step_threads=2)
    actor = EnvActor("t0", env_cfg, cfg, learner.address(), seed=1)
    deadline = time.monotonic() + 30
    while (actor.steps < 2_000 or not actor.client.policy_version) and time.monotonic() < deadline:
        time.sleep(0.05)
    stats = actor.stop()
    assert stats["error"] is None
    assert stats["fast_path"] and stats["step_threads"] == 2
    assert stats["steps"] >= 2_000 and stats["episodes"] > 0
    assert stats["sent"] == stats["steps"] == stats["acked"]
    assert stats["bytes_sent"] > stats["steps"] * 4 * 4 * 2
    assert stats["policy_version"] >= 1 and stats["policy_lag"] >= 0
    assert stats["push_latency_ms"] > 0
    t = stats["time_s"]  # the stepping thread's split: parts within its wall time, all used
    assert t["env"] > 0 and t["policy"] > 0 and t["push"] > 0 and t["cpu"] > 0
    assert t["policy"] + t["env"] + t["push"] <= t["wall"] * 1.01
    assert 0 < t["steps"] <= stats["steps"]
    deadline = time.monotonic() + 10
    while learner.buffer.inserted < stats["sent"] and time.monotonic() < deadline:
        time.sleep(0.02)
    assert learner.received == learner.buffer.inserted == stats["sent"]


def test_pin_binds_every_thread(make_learner, env_cfg):
    import os
    import threading

    learner = make_learner(min_size=10**9, capacity=4_000, ratio=None)
    actor = EnvActor("t1", env_cfg, ActorConfig(num_envs=2, steps_per_push=4, warmup_steps=0),
                     learner.address(), seed=2)
    every = set(os.sched_getaffinity(0))
    core = max(every)
    try:
        assert actor.pin([core]) == [core]  # the actor shares this test's process: all pinned
        step_tid = next(t.native_id for t in threading.enumerate() if t.name == "herd-step")
        assert os.sched_getaffinity(step_tid) == {core}
        steps = actor.steps
        time.sleep(0.5)
        assert actor.steps > steps  # still stepping, on the one core
    finally:
        actor.stop()
        for tid in os.listdir("/proc/self/task"):
            try:
                os.sched_setaffinity(int(tid), every)
            except OSError:
                pass


def test_n_step_actor_rows_reach_the_ring_with_their_discounts(make_learner, env_cfg):
    """An EnvActor summing 3 steps per row: every env step is one row in the ring (stop flushes
    the open windows), and the ring holds discounts g^k for k = 1..3 only."""
    import numpy as np

    learner = make_learner(min_size=10**9, capacity=20_000, ratio=None)
    cfg = ActorConfig(num_envs=4, steps_per_push=8, warmup_steps=10**9, n_step=3, gamma=0.9)
    actor = EnvActor("t-n", env_cfg, cfg, learner.address(), seed=3)
    deadline = time.monotonic() + 30
    while actor.steps < 1_000 and time.monotonic() < deadline:
        time.sleep(0.05)
    stats = actor.stop()
    assert stats["error"] is None and stats["episodes"] > 0  # episodes ended: partial windows
    deadline = time.monotonic() + 10
    while learner.buffer.inserted < stats["steps"] and time.monotonic() < deadline:
        time.sleep(0.02)
    assert stats["sent"] == stats["acked"] == stats["steps"] == learner.buffer.inserted
    d = learner.buffer.discount[: learner.buffer.size].numpy()
    np.testing.assert_allclose(np.unique(d), [0.9**3, 0.9**2, 0.9], rtol=1e-6)


def test_wait_for_policy_steps_only_with_the_learners_policy(make_learner, env_cfg):
    """A resumed job's actors (wait_for_policy, warmup 0): not one random-action step."""
    learner = make_learner(min_size=10**9, capacity=4_000, ratio=None)
    actor = EnvActor("t-w", env_cfg, ActorConfig(num_envs=2, steps_per_push=4, warmup_steps=0,
                                                 wait_for_policy=True), learner.address(), seed=4)
    deadline = time.monotonic() + 30
    while actor.steps < 200 and time.monotonic() < deadline:
        time.sleep(0.05)
    stats = actor.stop()
    assert stats["steps"] >= 200 and stats["random_steps"] == 0 and stats["policy_version"] > 0
