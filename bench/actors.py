"""Env steps/s: the raw gymnasium ceiling vs Herd's actors feeding a live learner, in one run.

1. Ceiling: N plain processes (multiprocessing, no Ray, no gRPC), each stepping E gymnasium
   envs in gymnasium's own loop, actions from the same 256x256 CPU policy (1 torch thread) that
   Herd's actors act with, measured just before Herd's row at N, with the learner training
   beside it. By default (--policy init) the learner publishes its first (random) weights only,
   so both sides act with one fixed policy while it trains flat out. MuJoCo's cost per step
   moves with the actions (a locally measured Humanoid step costs ~25% more with zero actions
   than with uniform random ones; on the H200 a ceiling with the learner's changing weights
   read 11.5k to 44k env steps/s at 8-16 processes), so the two sides must act alike.
   Deliberately gymnasium's wrapped `env.step` (JSON ceiling_stepper "gymnasium"), never
   Herd's stepper: the ceiling is what users get without Herd. The top count's ceiling is
   measured once more at the end (ceiling_after_steps_per_s): the box drifts.
2. Herd: N EnvActors as Ray actors (num_cpus=1 each) pushing over gRPC to a live Learner in
   this process (GPU when present; the learner settings of --config, default
   configs/humanoid.yaml, with replay_ratio null: it updates flat out while ingesting).
   The figure is transitions entering the replay buffer per second (learner-side count).
   Actors step with VecStepper's fastest applicable path (JSON stepper_path, e.g. "batched").
   With --policy learner the actors get the weights as the learner trains them, and each
   ceiling a snapshot of them.
   Rows also split the stepping thread's time per env step (policy, env, push).
3. Extra rows with --threaded: fewer actors, each stepping its envs on several threads.

    python bench/actors.py               # the full run (~5 min on the 16-core H200 box)
    python bench/actors.py --quick       # tiny, on a laptop CPU in ~2 min
    python bench/actors.py --counts 16 --variants base,pin,envs=16   # set-ups side by side

Writes bench/results/actors-<machine>.json (flat records) and a PNG scaling plot beside it.
"""

from __future__ import annotations

import argparse
import itertools
import multiprocessing as mp
import os
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: bench/actors.py must not shadow actors/
    _here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _here]
    sys.path.insert(0, str(_here.parent))

import numpy as np
import torch
from rich.table import Table

from bench.common import (
    box_busy_s,
    box_steal_s,
    console,
    header,
    learner_from,
    private_ray_auth,
    proc_cpu_s,
    progress,
    ray_runtime_env,
    result_path,
    save,
)


def random_policy_weights(obs_dim: int, act_dim: int, hidden=(256, 256)):
    """PolicyWeights of a freshly initialised tanh-Gaussian MLP (what the learner publishes)."""
    from herd.proto import codec

    torch.manual_seed(0)
    sizes = [obs_dim, *hidden, 2 * act_dim]
    tensors = {}
    for i, (a, b) in enumerate(itertools.pairwise(sizes)):
        lin = torch.nn.Linear(a, b)
        tensors[f"l{i}.weight"] = lin.weight.detach().numpy()
        tensors[f"l{i}.bias"] = lin.bias.detach().numpy()
    return codec.pack_weights(tensors, 1, -5.0, 2.0)


def ceiling_worker(env_id: str, num_envs: int, warmup: float, seconds: float, seed: int,
                   weights: bytes | None, q) -> None:
    """gymnasium's loop + the CPU policy, nothing else; puts (env steps/s over `seconds`, mean
    episode length). `weights`: serialized PolicyWeights to act with (None: a fresh random MLP)."""
    import gymnasium as gym

    from herd.actors.policy import MLPPolicy
    from herd.proto import herd_pb2 as pb

    torch.set_num_threads(1)
    envs = [gym.make(env_id) for _ in range(num_envs)]
    obs = np.stack([np.asarray(e.reset(seed=seed * 100 + i)[0], np.float32)
                    for i, e in enumerate(envs)])
    space = envs[0].action_space
    w = (pb.PolicyWeights.FromString(weights) if weights
         else random_policy_weights(obs.shape[1], space.shape[0]))
    policy = MLPPolicy(w, space.low, space.high)
    steps, t_start = 0, time.monotonic()
    t0, episodes = None, 0
    while True:
        now = time.monotonic()
        if t0 is None and now - t_start >= warmup:
            t0, steps, episodes = now, 0, 0
        if t0 is not None and now - t0 >= seconds:
            break
        action = policy.act(obs)
        for i, e in enumerate(envs):
            o, _, term, trunc, _ = e.step(action[i])
            if term or trunc:
                o, _ = e.reset()
                episodes += 1
            obs[i] = o
        steps += num_envs
    q.put((steps / (time.monotonic() - t0), steps / max(episodes, 1)))


def measure_ceiling(env_id: str, n: int, args, weights: bytes | None = None) -> tuple[float, float]:
    """(env steps/s of n ceiling processes together, their mean episode length)."""
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=ceiling_worker,
                         args=(env_id, args.envs, args.warmup, args.seconds, i, weights, q))
             for i in range(n)]
    for p in procs:
        p.start()
    got = [q.get(timeout=args.warmup + args.seconds + 120) for _ in procs]
    for p in procs:
        p.join()
    return float(sum(r for r, _ in got)), float(np.mean([length for _, length in got]))


def parse_variant(text: str, args) -> dict:
    """'base', or '+'-joined changes to the default actors: 'pin' (each actor's threads bound
    to one core), 'spp=8' (vector steps per push), 'envs=16' (envs per actor)."""
    v = {"name": text, "envs": args.envs, "steps_per_push": args.steps_per_push, "pin": False}
    for part in text.split("+"):
        key, _, val = part.partition("=")
        if key == "pin":
            v["pin"] = True
        elif key == "spp":
            v["steps_per_push"] = int(val)
        elif key == "envs":
            v["envs"] = int(val)
        elif key != "base":
            raise SystemExit(f"unknown variant part {part!r}: use base, pin, spp=N, envs=N")
    return v


def time_split(before: list[dict], after: list[dict]) -> dict:
    """Stepping-thread time per env step over the window, all actors together (EnvActor's
    time_s snapshots, each taken at a push with the steps it covers): policy, env, push
    (handing batches over) in us; cpu/wall of that thread."""
    def total(stats, key):
        return sum(s["time_s"][key] for s in stats)

    steps = total(after, "steps") - total(before, "steps") or 1
    out = {f"{k}_us_per_step": round(1e6 * (total(after, k) - total(before, k)) / steps, 1)
           for k in ("policy", "env", "push")}
    wall = total(after, "wall") - total(before, "wall")
    out["step_thread_cpu_share"] = round((total(after, "cpu") - total(before, "cpu")) / wall, 3) \
        if wall > 0 else None
    return out


def measure_herd(learner, ray, actor_cls, env_cfg, n: int, threads: int, args,
                 variant: dict | None = None) -> dict:
    from herd.actors.config import ActorConfig

    v = variant or parse_variant("base", args)
    cfg = ActorConfig(num_actors=n, num_envs=v["envs"], steps_per_push=v["steps_per_push"],
                      warmup_steps=0, window=args.window, num_cpus=threads, step_threads=threads)
    actors = [actor_cls.options(num_cpus=threads).remote(f"bench-{n}-{i}", env_cfg, cfg,
                                                         learner.address(), None, i)
              for i in range(n)]
    try:
        deadline = time.monotonic() + 120
        while min(s["steps"] for s in ray.get([a.stats.remote() for a in actors])) == 0:
            if time.monotonic() > deadline:
                raise TimeoutError("actors did not start stepping")
            time.sleep(0.2)
        cores = sorted(os.sched_getaffinity(0))
        if v["pin"]:  # actor i on core i (mod cores); the learner and Ray stay unbound
            ray.get([a.pin.remote([cores[i % len(cores)]]) for i, a in enumerate(actors)])
        time.sleep(args.warmup)
        stats0 = ray.get([a.stats.remote() for a in actors])  # + starts rate windows
        pids = [s["pid"] for s in stats0]
        me = os.getpid()  # the learner (and this Ray driver) live in this process
        st0, t0, c0 = learner.status_dict(), time.monotonic(), [proc_cpu_s(p) for p in pids]
        b0, l0, x0 = box_busy_s(), proc_cpu_s(me), box_steal_s()
        time.sleep(args.seconds)
        st1, t1, c1 = learner.status_dict(), time.monotonic(), [proc_cpu_s(p) for p in pids]
        b1, l1, x1 = box_busy_s(), proc_cpu_s(me), box_steal_s()
        stats = ray.get([a.stats.remote() for a in actors])
    finally:
        finals = ray.get([a.stop.remote() for a in actors])
        for a in actors:
            ray.kill(a)
    dt = t1 - t0
    errors = [s["error"] for s in finals if s["error"]]
    return dict(
        env_steps_per_s=(st1["inserted"] - st0["inserted"]) / dt,
        actor_steps_per_s=sum(s["recent_steps_per_s"] for s in stats),
        updates_per_s=(st1["updates"] - st0["updates"]) / dt,
        mb_per_s=(st1["bytes_received"] - st0["bytes_received"]) / dt / 1e6,
        push_latency_ms=float(np.mean([s["push_latency_ms"] for s in stats])),
        # cores each actor process got: < 1 means it waited (learner, scheduler), not stepped
        actor_cores=round(float(np.mean([b - a for a, b in zip(c0, c1)])) / dt, 3),
        learner_process_cores=round((l1 - l0) / dt, 3),
        box_busy_cores=round((b1 - b0) / dt, 2),  # of os.cpu_count(): all processes together
        box_steal_cores=round((x1 - x0) / dt, 2),  # taken by the hypervisor (VM neighbours)
        **time_split(stats0, stats),
        push_wait_s=float(np.mean([s["push_wait_s"] for s in finals])),
        policy_lag=float(np.mean([s["policy_lag"] for s in stats])),
        episode_length=float(np.mean([s["mean_length"] or 0.0 for s in stats])),
        learner_policy_lag=st1["mean_policy_lag"],
        fast_path=all(s["fast_path"] for s in stats),
        stepper_path=",".join(sorted({s.get("stepper_path", "?") for s in stats})),
        sent=sum(s["sent"] for s in finals),
        acked=sum(s["acked"] for s in finals),
        errors=errors,
    )


def plot(records: list[dict], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    main = sorted((r for r in records if r["step_threads"] == 1 and r.get("variant", "base") == "base"),
                  key=lambda r: r["actors"])
    xs = [r["actors"] for r in main]
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    ax.plot(xs, [r["ceiling_steps_per_s"] for r in main], "o-", label="gymnasium ceiling (no Ray/gRPC)")
    ax.plot(xs, [r["env_steps_per_s"] for r in main], "s-", label="Herd: into the replay buffer")
    again = [r for r in main if r.get("ceiling_after_steps_per_s")]
    if again:
        ax.plot([r["actors"] for r in again], [r["ceiling_after_steps_per_s"] for r in again], "o",
                mfc="none", c="C0", label="ceiling measured again after Herd")
    if main:
        ax.plot(xs, [main[0]["ceiling_steps_per_s"] * x for x in xs], ":", c="gray", label="linear")
    for r in records:
        label = (f"{r['step_threads']} threads/actor" if r["step_threads"] > 1
                 else r.get("variant", "base") if r.get("variant", "base") != "base" else None)
        if label:
            ax.plot(r["actors"], r["env_steps_per_s"], "^", c="C2")
            ax.annotate(label, (r["actors"], r["env_steps_per_s"]),
                        fontsize=7, xytext=(4, -10), textcoords="offset points")
    ax.set_xscale("log", base=2)
    ax.set_xticks(xs, [str(x) for x in xs])
    ax.set_xlabel("actor processes")
    ax.set_ylabel("env steps / s")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def start_ray(cores: int) -> None:
    """A private local Ray for the bench. Once in the suite, on the loaded 2-core box, its raylet
    did not register within Ray's start-up timeout: that one failure is retried, once."""
    import ray

    for attempt in (1, 2):
        try:
            ray.init(address="local", num_cpus=cores, include_dashboard=False, log_to_driver=False,
                     runtime_env=ray_runtime_env())
            return
        except Exception as e:  # Ray raises a bare Exception for this
            if attempt == 2 or "timed out during startup" not in str(e):
                raise
            console.print(f"  ray.init: {e} -- starting it once more")
            ray.shutdown()


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--env", default="Humanoid-v5")
    ap.add_argument("--config", default="configs/humanoid.yaml", help="the live learner's settings")
    ap.add_argument("--counts", default=None,
                    help="actor process counts, any list (default 1,2,4,8,16; --quick 1,2)")
    ap.add_argument("--envs", type=int, default=8, help="envs per process")
    ap.add_argument("--steps-per-push", type=int, default=32)
    ap.add_argument("--window", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=None, help="measured window per point (8; --quick 3)")
    ap.add_argument("--warmup", type=float, default=None, help="seconds before each window (3; --quick 1)")
    ap.add_argument("--threaded", default=None,
                    help="actor counts rerun with several step threads (1,4; --quick 1; '' for none)")
    ap.add_argument("--variants", default="base",
                    help="comma list of actor set-ups: base, pin, spp=N, envs=N, joined with + "
                         "(e.g. base,pin,pin+spp=8); other than base at --variant-counts only")
    ap.add_argument("--policy", choices=("init", "learner"), default="init",
                    help="init: the learner's first weights only, for actors and ceilings alike, while "
                         "it trains flat out; learner: actors get the weights as the learner trains "
                         "them and each ceiling a snapshot (MuJoCo's cost moves with the policy)")
    ap.add_argument("--variant-counts", default=None, help="actor counts for variants (default: the largest)")
    ap.add_argument("--quick", action="store_true", help="tiny run for a CPU box")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    private_ray_auth()  # before anything of Ray reads the auth settings
    quick = {"counts": "1,2", "seconds": 3.0, "warmup": 1.0, "threaded": "1"}
    full = {"counts": "1,2,4,8,16", "seconds": 8.0, "warmup": 3.0, "threaded": "1,4"}
    for key, value in (quick if args.quick else full).items():  # what the command line left unset
        if getattr(args, key) is None:
            setattr(args, key, value)
    counts = [int(c) for c in args.counts.split(",")]
    threaded = [int(c) for c in args.threaded.split(",") if c and int(c) > 0]  # "" or 0: none
    cores = os.cpu_count() or 1
    info = header("Herd actors vs the gymnasium ceiling")
    out = result_path("actors", args.out, args.quick)

    import ray

    from herd.actors.config import EnvConfig
    from herd.actors.env_actor import EnvActor
    from herd.actors.envs import describe, make_env
    from herd.learner.learner import Learner
    from herd.proto import codec

    start_ray(cores)  # before the learner's gRPC threads exist (Ray forks its processes)
    env_cfg = EnvConfig(id=args.env)
    records: list[dict] = []
    d = describe(make_env(env_cfg))
    spec = codec.spec_to_proto(args.env, d["obs_shape"], d["obs_dtype"], d["action_shape"],
                               d["action_low"], d["action_high"])
    # The job config's learner (batch, AMP, graph, updates per replay), training flat out;
    # compile off so that no point waits for it. --policy init: it publishes its first
    # weights only, so every actor and every ceiling acts with one fixed random MLP.
    frozen = {"publish_every_s": 1e9} if args.policy == "init" else {}
    lcfg = learner_from(args.config, ratio=None, min_size=10_000, capacity=1_000_000,
                        staging_batches=64, max_batch=4096, compile=False, port=0, **frozen)
    learner = Learner(lcfg, spec)
    console.print(f"  learner on {learner.device} ({args.config}: batch {lcfg.replay.batch_size}, "
                  f"{lcfg.compute.updates_per_call} updates per replay, amp {lcfg.compute.amp}), "
                  "replay ratio null; "
                  f"actors act with {'its first weights only' if frozen else 'its weights as published'}")

    def ceiling(n: int) -> tuple[float, float, int]:
        """The ceiling with the policy Herd's actors have now (the learner keeps training)."""
        version, wire = learner.publisher.wait_newer_wire(0, timeout=5.0)
        rate, length = measure_ceiling(args.env, n, args, wire)
        console.print(f"  ceiling {n:>2} processes (policy v{version}): {rate:>9,.0f} env steps/s, "
                      f"episodes of {length:.0f} steps")
        return rate, length, version

    actor_cls = ray.remote(max_restarts=0)(EnvActor)
    variants = [parse_variant(t, args) for t in args.variants.split(",") if t]
    vcounts = [int(c) for c in (args.variant_counts or str(max(counts))).split(",")]
    base = parse_variant("base", args)
    runs = [(n, 1, base) for n in counts if any(v["name"] == "base" for v in variants)]
    runs += [(n, 1, v) for v in variants if v["name"] != "base" for n in vcounts]
    runs += [(n, max(2, min(args.envs, (cores - 1) // n)), base) for n in threaded]
    ceilings: dict[int, tuple[float, float, int]] = {}
    try:
        with progress() as prog:
            task = prog.add_task("herd", total=len(runs))
            for n, threads, v in runs:
                if n not in ceilings:  # measured just before Herd's first row at n
                    ceilings[n] = ceiling(n)
                prog.update(task, description=f"herd: {n} actors x {threads} threads, {v['name']}")
                m = measure_herd(learner, ray, actor_cls, env_cfg, n, threads, args, v)
                c_rate, c_len, c_version = ceilings[n]
                rec = dict(info, env=args.env, actors=n, envs_per_actor=v["envs"], variant=v["name"],
                           policy=args.policy, step_threads=threads,
                           env_steps_per_s=round(m.pop("env_steps_per_s"), 1),
                           ceiling_steps_per_s=round(c_rate, 1), ceiling_stepper="gymnasium",
                           ceiling_episode_length=round(c_len, 1), ceiling_policy_version=c_version,
                           **m, device=str(learner.device), batch=lcfg.replay.batch_size,
                           updates_per_call=lcfg.compute.updates_per_call,
                           steps_per_push=v["steps_per_push"])
                rec["ratio_to_ceiling"] = round(rec["env_steps_per_s"] / c_rate, 3)
                records.append(rec)
                save(records, out)  # survives a killed run
                console.print(f"  herd {n:>2} actors x {threads} threads, {v['name']}: "
                              f"{rec['env_steps_per_s']:>9,.0f} env steps/s into the buffer "
                              f"({rec['ratio_to_ceiling']:.2f} of ceiling), "
                              f"{m['updates_per_s']:,.0f} updates/s, lag {m['policy_lag']:.2f}, "
                              f"episodes of {m['episode_length']:.0f} steps; "
                              f"us/step policy {m['policy_us_per_step']}, env {m['env_us_per_step']}, "
                              f"push {m['push_us_per_step']}; steal {m['box_steal_cores']} cores")
                prog.advance(task)
        top_n = max(counts)  # the box may have changed speed meanwhile (VM neighbours): again
        again, _, again_version = ceiling(top_n)
        for r in records:
            if r["actors"] == top_n:
                r["ceiling_after_steps_per_s"] = round(again, 1)
                r["ceiling_after_policy_version"] = again_version
        save(records, out)
    finally:
        learner.stop()
        ray.shutdown()

    table = Table(title=f"{args.env}, {args.envs} envs/process on {info['machine']} "
                        f"({cores} cores, torch {info['torch']})")
    for col in ("actors", "variant", "threads", "ceiling", "herd → buffer", "ratio", "updates/s",
                "push ms", "lag", "env us/step", "cores/actor", "learner cores", "box busy"):
        table.add_column(col, justify="right")
    for r in records:
        table.add_row(str(r["actors"]), r["variant"], str(r["step_threads"]), f"{r['ceiling_steps_per_s']:,.0f}",
                      f"{r['env_steps_per_s']:,.0f}", f"{r['ratio_to_ceiling']:.2f}",
                      f"{r['updates_per_s']:,.0f}", f"{r['push_latency_ms']:.1f}",
                      f"{r['policy_lag']:.2f}", f"{r['env_us_per_step']}", f"{r['actor_cores']:.2f}",
                      f"{r['learner_process_cores']:.2f}", f"{r['box_busy_cores']:.1f}")
    console.print(table)
    base = records[0] if records else None
    top = max((r for r in records if r["step_threads"] == 1 and r["variant"] == "base"),
              key=lambda r: r["actors"], default=None)
    if base and top and top is not base:
        eff = top["env_steps_per_s"] / (top["actors"] * base["env_steps_per_s"])
        console.print(f"scaling 1 -> {top['actors']} actors: {eff:.0%} of linear (Herd), "
                      f"{top['ceiling_steps_per_s'] / (top['actors'] * base['ceiling_steps_per_s']):.0%} "
                      f"(ceiling); Herd/ceiling at {top['actors']}: {top['ratio_to_ceiling']:.2f}")
    png = out.with_suffix(".png")
    acting = "the learner's first weights" if args.policy == "init" else "the learner's weights as trained"
    plot(records, png, f"{args.env} on {info['machine']}, {cores} cores, learner training on "
                       f"{learner.device}\nactors and ceiling act with {acting}")
    console.print(f"wrote {out} and {png}")
    return records


if __name__ == "__main__":
    main()
