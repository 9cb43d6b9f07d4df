"""CPU time per env step of one actor process, all its threads counted, three ways.

At 16 actors on 16 cores the box runs out of cores before the simulator does, so what scales
is CPU seconds per env step, not one process's steps/s. One process each, same env, same
256x256 policy (1 torch thread), random initial weights:

  gymnasium   gymnasium's wrapped env.step loop (bench/actors.py's ceiling)
  stepper     Herd's VecStepper (batched path where it applies) + the policy, no network
  herd        a full EnvActor pushing over gRPC to a live learner in this process (the
              learner does not train: min_replay_size is out of reach, so it only ingests);
              its CPU is also split by thread
  herd-libc-heap  the same with glibc's default malloc thresholds (HERD_STEADY_HEAP=0,
              proto/heap.py): what the steady heap saves
  ray         the same EnvActor as a Ray actor (num_cpus=1) of a local Ray instance started
              here, as jobs run it; its process's CPU is read from /proc, and the CPU of Ray's
              own daemons (raylet, gcs_server) over the same window is reported beside it

CPU time is the process's user + system time (os.times() inside it, every thread) over the
timed window; minor page faults per step beside it. The learner process is not counted.
Writes bench/results/actor-cost-<machine>.json.

    python bench/actor_cost.py [--env Humanoid-v5] [--envs 8] [--seconds 8]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # before bench/: actors/, not bench/actors.py

from rich.table import Table

from bench.common import (
    console,
    header,
    private_ray_auth,
    proc_cpu_s,
    proc_faults,
    ray_runtime_env,
    read_stat,
    stat_cpu_s,
    write_results,
)

MODES = ("gymnasium", "stepper", "herd", "herd-libc-heap", "ray")
DAEMONS = ("raylet", "gcs_server")


def cpu_s() -> float:
    t = os.times()
    return t.user + t.system


def faults() -> int:
    return proc_faults(os.getpid())


def _policy(obs_dim: int, space):
    import torch

    from bench.actors import random_policy_weights
    from herd.actors.policy import MLPPolicy

    torch.set_num_threads(1)
    return MLPPolicy(random_policy_weights(obs_dim, space.shape[0]), space.low, space.high)


def _timed(step, steps_per_call: int, warmup: float, seconds: float) -> tuple[int, float, float, int]:
    """Run `step` for warmup + seconds; (steps, wall s, CPU s, minor faults) of the timed part."""
    t_end_warm = time.monotonic() + warmup
    while time.monotonic() < t_end_warm:
        step()
    steps, c0, t0, f0 = 0, cpu_s(), time.monotonic(), faults()
    while time.monotonic() - t0 < seconds:
        step()
        steps += steps_per_call
    return steps, time.monotonic() - t0, cpu_s() - c0, faults() - f0


def worker(mode: str, env_id: str, num_envs: int, warmup: float, seconds: float, address, q) -> None:
    import gymnasium as gym
    import numpy as np

    from herd.actors.config import ActorConfig, EnvConfig

    if mode.startswith("herd"):
        from herd.actors.env_actor import EnvActor
        from herd.proto.heap import OFF_SWITCH

        if mode == "herd-libc-heap":  # glibc's own thresholds: no steady_heap() (proto/heap.py)
            os.environ[OFF_SWITCH] = "0"

        actor = EnvActor("cost-0", EnvConfig(id=env_id), ActorConfig(num_envs=num_envs, warmup_steps=0),
                         address, seed=0)
        actor._on_weights(_weights_for(actor))  # act with a real policy from the first step
        time.sleep(warmup)
        s0, c0, t0, th0, f0 = actor.steps, cpu_s(), time.monotonic(), thread_cpu_s(), faults()
        time.sleep(seconds)
        steps, wall, cpu = actor.steps - s0, time.monotonic() - t0, cpu_s() - c0
        th1, nfaults = thread_cpu_s(), faults() - f0
        path = actor.stepper.path
        actor.stop()
        # where the process's CPU goes, by thread: cores each
        threads = {k: round((v - th0.get(k, 0.0)) / wall, 3) for k, v in th1.items()}
        q.put(record(mode, path, steps, wall, cpu, nfaults,
                     threads={k: v for k, v in sorted(threads.items(), key=lambda kv: -kv[1]) if v >= 0.005}))
        return
    elif mode == "stepper":
        from herd.actors.stepper import VecStepper

        st = VecStepper(EnvConfig(id=env_id), num_envs)
        policy = _policy(st.obs_dim, st.envs[0].action_space)
        a = st.envs[0].action_space.shape[0]
        nxt, rew = np.empty((num_envs, st.obs_dim), np.float32), np.empty(num_envs, np.float32)
        term, act = np.empty(num_envs, np.uint8), np.empty((num_envs, a), np.float32)

        def step():
            act[:] = policy.act(st.obs)
            st.step(act, nxt, rew, term)

        steps, wall, cpu, nfaults = _timed(step, num_envs, warmup, seconds)
        path = st.path
    else:
        envs = [gym.make(env_id) for _ in range(num_envs)]
        obs = np.stack([np.asarray(e.reset(seed=i)[0], np.float32) for i, e in enumerate(envs)])
        policy = _policy(obs.shape[1], envs[0].action_space)

        def step():
            action = policy.act(obs)
            for i, e in enumerate(envs):
                o, _, done, cut, _ = e.step(action[i])
                obs[i] = e.reset()[0] if done or cut else o

        steps, wall, cpu, nfaults = _timed(step, num_envs, warmup, seconds)
        path = "gymnasium"
    q.put(record(mode, path, steps, wall, cpu, nfaults))


def record(mode: str, path: str, steps: int, wall: float, cpu: float, nfaults: int, **extra) -> dict:
    return {"mode": mode, "stepper_path": path, "env_steps": steps, "wall_s": round(wall, 2),
            "cpu_s": round(cpu, 3), "env_steps_per_s": round(steps / wall, 1),
            "cpu_us_per_step": round(1e6 * cpu / max(steps, 1), 1), "cores_used": round(cpu / wall, 2),
            "minor_faults_per_step": round(nfaults / max(steps, 1), 2), **extra}


def thread_cpu_s() -> dict[str, float]:
    """CPU seconds of each thread of this process, by name: Python's thread name where the
    thread is a Python thread, else the OS name (gRPC's C-core names its own threads)."""
    names = {t.native_id: t.name for t in threading.enumerate()}
    out: dict[str, float] = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            os_name, fields = read_stat(f"/proc/self/task/{tid}/stat")
        except OSError:  # the thread ended meanwhile
            continue
        name = names.get(int(tid)) or os_name
        out[name] = out.get(name, 0.0) + stat_cpu_s(fields)
    return out


def daemon_pids() -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/comm") as f:
                    name = f.read().strip()
            except OSError:
                continue
            if name in DAEMONS:
                pids.append(int(entry))
    return pids


def run_in_ray(env_id: str, num_envs: int, warmup: float, seconds: float, address: str) -> dict:
    """The EnvActor as jobs run it: a Ray actor with num_cpus=1 (Ray sets its OMP_NUM_THREADS)."""
    import ray

    from herd.actors.config import ActorConfig, EnvConfig
    from herd.actors.env_actor import EnvActor

    ray.init(address="local", num_cpus=max(2, os.cpu_count() or 2), include_dashboard=False,
             log_to_driver=False, runtime_env=ray_runtime_env())
    try:
        actor = ray.remote(num_cpus=1, max_restarts=0)(EnvActor).remote(
            "cost-ray", EnvConfig(id=env_id), ActorConfig(num_envs=num_envs, warmup_steps=0), address)
        pid = ray.get(actor.stats.remote())["pid"]
        time.sleep(warmup)
        daemons = daemon_pids()
        f0 = proc_faults(pid)
        s0, c0, d0, t0 = ray.get(actor.stats.remote())["steps"], proc_cpu_s(pid), \
            sum(proc_cpu_s(p) for p in daemons), time.monotonic()
        time.sleep(seconds)
        f1 = proc_faults(pid)
        s1, c1, d1, t1 = ray.get(actor.stats.remote())["steps"], proc_cpu_s(pid), \
            sum(proc_cpu_s(p) for p in daemons), time.monotonic()
        path = ray.get(actor.stats.remote())["stepper_path"]
        ray.get(actor.stop.remote())
    finally:
        ray.shutdown()
    return record("ray", path, s1 - s0, t1 - t0, c1 - c0, f1 - f0,
                  ray_daemon_cores=round((d1 - d0) / (t1 - t0), 3))


def _weights_for(actor):
    from bench.actors import random_policy_weights

    return random_policy_weights(actor.stepper.obs_dim, actor.low.shape[0])


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--env", default="Humanoid-v5")
    ap.add_argument("--envs", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--warmup", type=float, default=3.0)
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--out", default=None)
    ap.add_argument("--quick", action="store_true", help="short windows, results in /tmp")
    args = ap.parse_args(argv)
    private_ray_auth()  # before anything of Ray reads the auth settings
    if args.quick:
        args.seconds, args.warmup = min(args.seconds, 2.0), min(args.warmup, 1.0)
    info = header(f"CPU per env step of one actor process: {args.env}, {args.envs} envs")
    learner = None
    if "herd" in args.modes or "ray" in args.modes:
        from herd.actors.config import EnvConfig
        from herd.actors.envs import describe, make_env
        from herd.learner.config import LearnerConfig
        from herd.learner.learner import Learner
        from herd.proto import codec

        d = describe(make_env(EnvConfig(id=args.env)))
        spec = codec.spec_to_proto(args.env, d["obs_shape"], d["obs_dtype"], d["action_shape"],
                                   d["action_low"], d["action_high"])
        learner = Learner(LearnerConfig.flat(device="cpu", capacity=200_000, min_size=10**9,
                                             ratio=None), spec)
    records = []
    ctx = mp.get_context("spawn")
    try:
        for mode in args.modes.split(","):
            if mode == "ray":
                rec = run_in_ray(args.env, args.envs, args.warmup, args.seconds, learner.address())
                records.append({**info, "env": args.env, "envs_per_actor": args.envs, **rec})
                console.print(f"  ray       ({rec['stepper_path']}): {rec['env_steps_per_s']:8,.0f} env steps/s, "
                              f"{rec['cpu_us_per_step']:6.1f} CPU us per step, {rec['cores_used']:.2f} cores; "
                              f"Ray daemons {rec['ray_daemon_cores']:.2f} cores")
                continue
            q = ctx.Queue()
            p = ctx.Process(target=worker, args=(mode, args.env, args.envs, args.warmup, args.seconds,
                                                 learner.address() if learner else None, q))
            p.start()
            rec = q.get(timeout=args.warmup + args.seconds + 180)
            p.join()
            records.append({**info, "env": args.env, "envs_per_actor": args.envs, **rec})
            console.print(f"  {mode:9s} ({rec['stepper_path']}): {rec['env_steps_per_s']:8,.0f} env steps/s, "
                          f"{rec['cpu_us_per_step']:6.1f} CPU us per step, {rec['cores_used']:.2f} cores")
            if rec.get("threads"):
                split = ", ".join(f"{k} {v:.3f}" for k, v in rec["threads"].items())
                console.print(f"    by thread (cores): {split}")
    finally:
        if learner is not None:
            learner.stop()
    base = records[0]["cpu_us_per_step"] if records else None
    table = Table(title=f"{args.env}, {args.envs} envs, one process each ({info['machine']})")
    for col in ("mode", "path", "env steps/s", "CPU us/step", "vs first", "cores", "faults/step"):
        table.add_column(col, justify="right")
    for r in records:
        table.add_row(r["mode"], r["stepper_path"], f"{r['env_steps_per_s']:,.0f}", f"{r['cpu_us_per_step']}",
                      f"{r['cpu_us_per_step'] / base:.2f}", f"{r['cores_used']}",
                      f"{r['minor_faults_per_step']}")
    console.print(table)
    write_results("actor-cost", records, args.out, args.quick)
    return records


if __name__ == "__main__":
    main()
