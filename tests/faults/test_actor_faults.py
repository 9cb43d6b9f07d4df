"""Env actors killed mid-run (SIGKILL of their process), several times, on a real Ray cluster:
Ray restarts them, the learner never stops, and the books balance.

Accounting bound: a killed process loses what it had stepped but the learner had not yet
accepted: at most (window + 1) batches of num_envs * steps_per_push rows (the unacked window
plus the batch being filled). Everything it had acked is in the learner, and a graceful stop
loses nothing.
"""

from __future__ import annotations

import os
import signal
import time

import pytest

from herd.actors.config import ActorConfig

pytestmark = pytest.mark.cluster
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KILLS = 4


def _stats(ray, handle, timeout=60):
    deadline = time.monotonic() + timeout
    while True:
        try:
            return ray.get(handle.stats.remote(), timeout=10)
        except Exception:  # restarting: calls fail or time out until the new process is up
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def _restarted(stats, old_pid):
    return stats["pid"] != old_pid and stats["acked"] > 0


def _wait(pred, timeout, what):
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def test_killed_env_actors_restart_and_accounting_holds(ray_cluster, make_learner, env_cfg):
    import ray

    from herd.actors.env_actor import EnvActor

    learner = make_learner(min_size=300, capacity=50_000, ratio=None)
    learner_id = learner.learner_id
    cfg = ActorConfig(num_envs=2, steps_per_push=8, warmup_steps=100, window=3, num_cpus=0.5)
    bound = (cfg.window + 1) * cfg.num_envs * cfg.steps_per_push
    ray.init(address=ray_cluster["gcs"], namespace="herd-faults-test",
             runtime_env={"env_vars": {"PYTHONPATH": ROOT}}, logging_level="ERROR")
    try:
        remote = ray.remote(EnvActor).options(num_cpus=0.5, max_restarts=-1, max_concurrency=4)
        actors = {f"k{i}": remote.remote(f"k{i}", env_cfg, cfg, learner.address(), seed=i)
                  for i in range(2)}
        for h in actors.values():
            _wait(lambda h=h: _stats(ray, h)["steps"] > 500, 120, "actors stepping")
        snapshots = {a: [] for a in actors}  # (steps, acked) of each killed incarnation
        # both actors killed at once, KILLS / 2 times: their restarts (a process each, importing
        # torch and MuJoCo) overlap
        for k in range(KILLS // len(actors)):
            updates = learner.updates
            before = {}
            for actor_id, handle in actors.items():
                before[actor_id] = _stats(ray, handle)
                os.kill(before[actor_id]["pid"], signal.SIGKILL)
                snapshots[actor_id].append((before[actor_id]["steps"], before[actor_id]["acked"]))
            # Ray brings each back in a new process, which reconnects and steps again
            for actor_id, handle in actors.items():
                _wait(lambda h=handle, pid=before[actor_id]["pid"]: _restarted(_stats(ray, h), pid), 120,
                      f"restart of {actor_id} after kill round {k + 1}")
            assert learner.learner_id == learner_id and learner.status_dict()["updates"] >= updates
        assert sum(map(len, snapshots.values())) == KILLS
        _wait(lambda: learner.updates > 0, 60, "learning")
        finals = {a: ray.get(h.stop.remote(), timeout=60) for a, h in actors.items()}
    finally:
        ray.shutdown()

    _wait(lambda: learner.buffer.inserted >= learner.received, 20, "ring drained")
    status = learner.status_dict()  # raises if the training thread died
    assert status["learner_id"] == learner_id and status["rejected_batches"] == 0
    assert learner.buffer.inserted == learner.received == sum(learner.servicer.received.values())
    lost_total = 0
    for actor_id, final in finals.items():
        assert final["error"] is None
        # the last incarnation stopped gracefully: everything it stepped was accepted
        assert final["steps"] == final["sent"] == final["acked"] > 0
        got = learner.servicer.received[actor_id]
        killed = got - final["acked"]  # what the learner took from the killed incarnations
        steps_s = sum(s for s, _ in snapshots[actor_id])
        acked_s = sum(a for _, a in snapshots[actor_id])
        assert killed >= acked_s, "an acked transition went missing"
        lost_at_least = steps_s - killed  # stepped before the snapshot, never accepted
        assert lost_at_least <= len(snapshots[actor_id]) * bound, (lost_at_least, bound)
        lost_total += max(0, lost_at_least)
    print(f"\n[faults] {KILLS} actor kills survived; learner received {learner.received}; "
          f"transitions lost to kills (lower bound) {lost_total}, bound {KILLS * bound}")
