"""actors.nice: an EnvActor lowers the CPU priority of every one of its threads, those it starts
later too (in a process of its own: a nice value cannot be raised back without privileges)."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import json, os, sys, threading, time
from herd.actors.config import ActorConfig, EnvConfig
from herd.actors.envs import describe, make_env
from herd.actors.env_actor import EnvActor
from herd.learner.config import LearnerConfig
from herd.learner.learner import Learner
from herd.proto import codec

env_cfg = EnvConfig(id=sys.argv[1])
d = describe(make_env(env_cfg))
spec = codec.spec_to_proto(env_cfg.id, d["obs_shape"], d["obs_dtype"], d["action_shape"],
                           d["action_low"], d["action_high"])
learner = Learner(LearnerConfig.flat(capacity=4_000, min_size=10**9, batch_size=32,
                                hidden_sizes=(32, 32), ratio=None), spec)
before = {t: os.getpriority(os.PRIO_PROCESS, int(t)) for t in os.listdir("/proc/self/task")}
actor = EnvActor("t-nice", env_cfg, ActorConfig(num_envs=2, steps_per_push=4, warmup_steps=10**9,
                                                 step_threads=2, nice=int(sys.argv[2])),
                 learner.address(), seed=1)
deadline = time.monotonic() + 30
while actor.steps < 200 and time.monotonic() < deadline:
    time.sleep(0.05)
names = {t.native_id: t.name for t in threading.enumerate()}
after = {t: os.getpriority(os.PRIO_PROCESS, int(t)) for t in os.listdir("/proc/self/task")}
steps = actor.steps
actor.stop()
learner.stop()
print(json.dumps({"before": before, "after": after, "steps": steps,
                  "names": {str(k): v for k, v in names.items()}}))
"""


def nice_run(env_id: str, nice: int) -> dict:
    r = subprocess.run([sys.executable, "-c", SCRIPT, env_id, str(nice)], cwd=ROOT, capture_output=True,
                       text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_every_thread_of_a_niced_actor_runs_lower_those_started_later_too(env_cfg):
    base = os.getpriority(os.PRIO_PROCESS, 0)
    out = nice_run(env_cfg.id, 4)
    assert out["steps"] >= 200  # it steps at its lower priority
    after, names = out["after"], out["names"]
    want = min(19, base + 4)
    # every thread the process has, the learner's included (they share this test process);
    # the stepping and torch-import threads were started after the change
    assert set(after.values()) == {want}, after
    started_after = [t for t, n in names.items() if n.startswith(("herd-step", "herd-mj"))]
    assert started_after and all(after[t] == want for t in started_after)
    assert set(out["before"].values()) == {base}


def test_nice_0_changes_nothing(env_cfg):
    base = os.getpriority(os.PRIO_PROCESS, 0)
    out = nice_run(env_cfg.id, 0)
    assert set(out["after"].values()) == {base}
