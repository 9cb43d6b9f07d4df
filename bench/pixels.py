"""Pixel SAC against the wall clock: DeepMind Control from camera frames, timed from `herd submit`.

    python bench/pixels.py [--config configs/walker-walk-pixels.yaml] [--seeds 1,2,3] [--seconds 600]
    python bench/pixels.py --config configs/cheetah-run-pixels.yaml --seeds 1
    python bench/pixels.py --pixels 128 --seeds 1          # the same task from 128x128 frames
    python bench/pixels.py --config configs/invertedpendulum-pixels.yaml \
        --config configs/invertedpendulum-pixels-privileged.yaml --seeds 1,2   # arms side by side

Starts a local Ray head if none answers (--own-cluster: a head of this run alone, on free ports,
as bench/startup.py starts one, so that it neither joins nor disturbs another on the machine),
submits each (config, seed) job through the `herd` CLI,
follows it and reads runs/<job>/summary.json. Several configs are arms: each seed runs every
arm in turn (seed 1 of each arm, then seed 2, ...), so a drift in the machine's load falls on all
of them alike. One flat record per run:

    arm, env, pixels, seed, cold  the config's name, the task, the frame size, the seed, an
                                  empty compile cache
    frames_per_s                  frames rendered per second by all actors (one per agent step)
                                  between the first and the last evaluation; frames_per_s_wall
                                  over the whole run
    updates_per_s                 the learner's updates/s over the same span
    seconds_to_500/700/900        the first evaluation at or above it (null: never), and
                                  seconds_to_target at the config's run.target_return
    frames_to_700                 env frames (agent steps x action repeat, DrQ-v2's count) at
                                  that evaluation
    best_eval_return, final_eval_return
    replay_bytes_per_transition   the frame ring's device bytes per transition of capacity, and
                                  replay_naive_bytes_per_transition (two stacked observations
                                  per row) beside it
    replay_capacity               transitions the replay holds (the config's), and
                                  replay_frame_capacity, replay_gib (its device bytes)
    machine, command

Writes bench/results/pixels-<machine>.json and a PNG: return against minutes since submit, and
against hours on a log axis beside DrQ-v2's published curve (the median of its 10 seeds). With
several arms it prints each arm's seconds to its target, every seed and their median.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import console, header, result_path, save, save_figure
from bench.humanoid import follow_jobs, submit_one
from bench.humanoid_record import first_reaching
from herd import local

THRESHOLDS = (500, 700, 900)

DRQV2_MEDIAN = {
    # (frames, hours of DrQ-v2's own wall clock, median eval return of its 10 seeds), every 100k
    # frames, from facebookresearch/drqv2 curves/dmc_<task>.csv (84x84, 3 frames, action repeat 2)
    "walker-walk": [(0, 0.0, 20), (100_000, 0.392, 143), (200_000, 0.784, 467), (300_000, 1.183, 764),
                    (400_000, 1.583, 888), (500_000, 1.982, 929), (600_000, 2.385, 921),
                    (700_000, 2.787, 937), (800_000, 3.188, 948), (900_000, 3.592, 955),
                    (1_000_000, 3.996, 953)],
    "cheetah-run": [(0, 0.0, 0), (100_000, 0.276, 263), (200_000, 0.56, 494), (300_000, 0.844, 535),
                    (400_000, 1.131, 595), (500_000, 1.417, 611), (600_000, 1.704, 649),
                    (700_000, 1.99, 666), (800_000, 2.277, 683), (900_000, 2.562, 720),
                    (1_000_000, 2.857, 730)],
}


def task_of(env_id: str) -> str:
    """'dm_control/walker-walk-v0' -> 'walker-walk' (the key of DRQV2_MEDIAN)."""
    return env_id.removeprefix("dm_control/").removesuffix("-v0")


def span_rate(evals: list[dict], key: str) -> float | None:
    """`key`'s growth per second between the first and the last evaluation."""
    if len(evals) < 2 or evals[-1]["seconds"] <= evals[0]["seconds"]:
        return None
    return (evals[-1][key] - evals[0][key]) / (evals[-1]["seconds"] - evals[0]["seconds"])


def pixel_record(config: str, seed: int, info: dict, job: str, t_submit: float, cfg: dict, cold: bool,
                 runs_dir: str) -> dict:
    """One run's flat record (the module docstring's keys), from runs/<job>/summary.json."""
    summary = json.loads((Path(runs_dir) / job / "summary.json").read_text())
    pixels = cfg["env"].get("pixels") or {}
    repeat = int(pixels.get("action_repeat", 2))
    evals = [{"seconds": e["unix_time"] - t_submit, "mean_return": e["mean_return"],
              "env_steps": e["env_steps"], "updates": e["updates"]} for e in summary["evaluations"]]
    learner = summary["learner"]
    hits = {t: first_reaching(evals, t) or {} for t in THRESHOLDS}
    best = max(evals, key=lambda e: e["mean_return"], default={})
    target = cfg["run"].get("target_return")
    at_target = {} if target is None else first_reaching(evals, float(target)) or {}
    capacity = int(cfg["learner"]["replay"]["capacity"])
    per_row = learner.get("replay_bytes_per_transition")
    record = {
        **info, "arm": Path(config).stem, "env": cfg["env"]["id"], "pixels": int(pixels.get("size", 84)),
        "seed": seed, "cold": cold,
        "job": job, "config_file": config, "config": cfg, "action_repeat": repeat,
        "frame_stack": int(pixels.get("frame_stack", 3)), "actors": cfg["actors"]["num_actors"],
        "envs_per_actor": cfg["actors"]["num_envs"],
        "frames_per_s": span_rate(evals, "env_steps"), "updates_per_s": span_rate(evals, "updates"),
        "frames_per_s_wall": int(learner["received"]) / summary["wall_s"],
        **{f"seconds_to_{t}": hits[t].get("seconds") for t in THRESHOLDS},
        "target_return": target, "seconds_to_target": at_target.get("seconds"),
        "frames_to_700": None if not hits[700] else hits[700]["env_steps"] * repeat,
        "best_eval_return": best.get("mean_return"), "best_eval_at_s": best.get("seconds"),
        "final_eval_return": summary["final_eval"]["mean_return"],
        "replay_bytes_per_transition": per_row,
        "replay_naive_bytes_per_transition": learner.get("replay_naive_bytes_per_transition"),
        "replay_capacity": capacity, "replay_frame_capacity": learner.get("replay_frame_capacity"),
        "replay_gib": None if per_row is None else per_row * capacity / 2**30,
        "rows_unresolved": learner.get("rows_unresolved"),
        "first_update_s": (summary.get("startup") or {}).get("first_update_s"),
        "env_steps": int(learner["received"]), "updates": int(learner["updates"]), "wall_s": summary["wall_s"],
        "evaluations": evals,
    }
    fps, ups = record["frames_per_s"], record["updates_per_s"]
    console.print(f"{record['arm']} {record['pixels']}px seed {seed}: target {target} at "
                  f"{record['seconds_to_target']} s; 500/700/900 at "
                  f"{[record[f'seconds_to_{t}'] for t in THRESHOLDS]} s; best {record['best_eval_return']} at "
                  f"{record['best_eval_at_s']} s; final {record['final_eval_return']}; "
                  f"{'-' if fps is None else f'{fps:.0f}'} frames/s, {'-' if ups is None else f'{ups:.0f}'} "
                  f"updates/s; {per_row} replay bytes/transition")
    return record


def plot(records: list[dict], path: Path, title: str):
    """Left: eval return against minutes since submit, every run. Right: against hours on a log
    axis, with DrQ-v2's published median curve of the same task."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for r in records:
        name = f"{r.get('arm', task_of(r['env']))} {r['pixels']}px s{r['seed']}"
        xs = [e["seconds"] for e in r["evaluations"]]
        ys = [e["mean_return"] for e in r["evaluations"]]
        axes[0].plot([x / 60 for x in xs], ys, "-o", ms=3, label=name)
        axes[1].plot([x / 3600 for x in xs], ys, "-o", ms=3, label=name)
    for task in sorted({task_of(r["env"]) for r in records} & set(DRQV2_MEDIAN)):
        pts = DRQV2_MEDIAN[task][1:]
        axes[1].plot([h for _, h, _ in pts], [ret for *_, ret in pts], "k--", lw=1.2,
                     label=f"DrQ-v2 {task} (median of 10 seeds, published)")
    axes[0].set_xlabel("minutes since herd submit")
    axes[1].set_xlabel("hours of wall clock (log)")
    axes[1].set_xscale("log")
    for ax in axes:
        for y in THRESHOLDS:
            ax.axhline(y, color="grey", ls=":", lw=0.8)
        ax.set_ylabel("deterministic eval return")
        ax.set_ylim(0, 1000)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    return save_figure(fig, path, title)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", action="append", default=None,
                   help="repeatable (default configs/walker-walk-pixels.yaml)")
    p.add_argument("--seeds", default="1", help="comma list: each config runs once per seed")
    p.add_argument("--seconds", type=float, default=600, help="the job's run.max_seconds")
    p.add_argument("--pixels", type=int, default=None, help="frame size (default: the config's)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--runs-dir", default="runs")
    p.add_argument("--out", default=None)
    p.add_argument("--own-cluster", action="store_true", help="a Ray head of this run alone")
    args = p.parse_args()
    if args.pixels:
        args.set = [f"env.pixels.size={args.pixels}", *args.set]
    path = result_path("pixels", args.out, quick=False)
    info = header("Herd: pixel SAC, evaluation return against wall-clock")
    if not args.own_cluster:
        local.align_auth_mode()
        local.up(num_cpus=os.cpu_count())
        return run_arms(args, path, info)
    from bench.startup import Cluster

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a stopped bench takes its head along
    with tempfile.TemporaryDirectory(prefix="herd-bench-pixels-") as tmp:
        cluster = Cluster(Path(tmp), None, {})
        try:
            # `herd submit` and the job client of this process find that head alone (through its
            # dashboard: Ray's job client would prefer a RAY_ADDRESS to the URL it is given)
            os.environ.update({k: cluster.env[k] for k in (
                "HERD_HOME", "HERD_DASHBOARD_URL", "RAY_AUTH_MODE", "RAY_AUTH_TOKEN_PATH")})
            return run_arms(args, path, info)
        finally:
            cluster.close()


def run_arms(args, path: Path, info: dict) -> int:
    records: list[dict] = []
    for seed in (int(s) for s in args.seeds.split(",")):
        for config in args.config or ["configs/walker-walk-pixels.yaml"]:
            job, t_submit, cfg, cold = submit_one(config, seed, args)
            follow_jobs([job], args.seconds + 300)
            records.append(pixel_record(config, seed, info, job, t_submit, cfg, cold, args.runs_dir))
            save(records, path)  # what ran survives a later run's failure
            plot(records, path.with_suffix(".png"), f"Herd from pixels, {info['machine']}")
    for arm, line in arm_lines(records).items():
        console.print(f"{arm}: {line}")
    console.print(f"wrote {path} and {path.with_suffix('.png').name}")
    return 0


def arm_lines(records: list[dict]) -> dict[str, str]:
    """Per arm: seconds to its target, every seed, and their median (a seed that never got
    there counts as its run's whole length, so the median is a lower bound then)."""
    out = {}
    for arm in dict.fromkeys(r["arm"] for r in records):
        runs = [r for r in records if r["arm"] == arm]
        times = [r["seconds_to_target"] for r in runs]
        worst = [t if t is not None else r["wall_s"] for t, r in zip(times, runs)]
        out[arm] = (f"target {runs[0]['target_return']}: "
                    + ", ".join(f"seed {r['seed']} {'never' if t is None else f'{t:.0f} s'}"
                                for t, r in zip(times, runs))
                    + f"; median {statistics.median(worst):.0f} s")
    return out


if __name__ == "__main__":
    sys.exit(main())
