"""The seed's open question: faster sampling with smaller batches, or bigger batches with slower sampling?

A 3 x 3 grid, batch_size {64, 128, 256} x replay_ratio {0.25, 0.5, 1.0}, of short SAC runs on
InvertedPendulum-v5 (a cheap MuJoCo task) with the REAL system in one process, no Ray: one
in-process Learner (real gRPC server on loopback, hidden 128x128, min_replay_size 1000) and one
EnvActor (4 envs, 1000 warmup steps) pushing to it. Each cell runs for the same wall-clock budget,
then its latest published policy gets a deterministic evaluation (5 episodes). Per cell: evaluation
return at the budget, env steps, updates, updates/s and env steps/s.

    python bench/sweep.py                    # 9 cells x 40 s (~7 min)
    python bench/sweep.py --seconds 60 --seeds 3
    python bench/sweep.py --quick            # 2 x 2, a few seconds per cell, results in /tmp

Writes bench/results/sweep-<machine>.json (one flat record per cell and seed) and
bench/results/sweep-<machine>.png (evaluation return over batch x ratio, mean over seeds).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # before bench/: learner/ not bench/learner.py
from rich.table import Table

from bench.common import console, header, progress, result_path, save

ENV_ID = "InvertedPendulum-v5"
BATCHES = (64, 128, 256)
RATIOS = (0.25, 0.5, 1.0)
QUICK_BATCHES = (64, 256)
QUICK_RATIOS = (0.25, 1.0)


def env_spec(env_cfg):
    from actors.envs import describe, make_env
    from proto import codec

    env = make_env(env_cfg)
    d = describe(env)
    env.close()
    return codec.spec_to_proto(env_cfg.id, d["obs_shape"], d["obs_dtype"], d["action_shape"],
                               d["action_low"], d["action_high"])


def run_cell(env_cfg, spec, batch: int, ratio: float, seconds: float, seed: int, episodes: int) -> dict:
    """One short run: learner + actor for `seconds` of wall clock, then a deterministic evaluation."""
    from actors.config import ActorConfig
    from actors.env_actor import EnvActor
    from cluster.evaluate import evaluate
    from learner.config import LearnerConfig
    from learner.service import Learner

    learner = Learner(LearnerConfig(device="cpu", batch_size=batch, replay_ratio=ratio,
                                    min_replay_size=1_000, buffer_capacity=200_000,
                                    hidden_sizes=(128, 128), seed=seed), spec)
    actor = None
    try:
        actor = EnvActor(f"sweep-{batch}-{ratio}", env_cfg,
                         ActorConfig(num_envs=4, warmup_steps=1_000, seed=seed),
                         learner.address(), seed=seed)
        t0 = time.monotonic()
        time.sleep(seconds)
        elapsed = time.monotonic() - t0
        # the budget's end: what the system had done and the latest policy it had published
        env_steps, updates, weights = learner.buffer.inserted, learner.updates, learner.weights()
    finally:
        stats = actor.stop() if actor is not None else {"error": None}
        learner.stop()
    if stats.get("error"):
        raise RuntimeError(f"actor failed in cell batch={batch} ratio={ratio}: {stats['error']}")
    ev = evaluate(env_cfg, weights, episodes, seed=10_000 + seed) if weights is not None else None
    return {
        "batch": batch, "replay_ratio": ratio, "seed": seed, "seconds": round(elapsed, 2),
        "eval_return": round(ev["mean_return"], 1) if ev else None,
        "eval_min": round(ev["min_return"], 1) if ev else None,
        "eval_max": round(ev["max_return"], 1) if ev else None,
        "eval_episodes": episodes, "policy_version": weights.version if weights is not None else 0,
        "env_steps": int(env_steps), "updates": int(updates),
        "updates_per_s": round(updates / elapsed, 1), "env_steps_per_s": round(env_steps / elapsed, 1),
        "samples_per_s": round(batch * updates / elapsed, 1),
    }


def mean_of(records: list[dict], batch: int, ratio: float, key: str) -> float:
    vals = [r[key] for r in records if r["batch"] == batch and r["replay_ratio"] == ratio
            and r[key] is not None]
    return statistics.fmean(vals) if vals else math.nan


def plot(records: list[dict], batches, ratios, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    ret = np.array([[mean_of(records, b, r, "eval_return") for r in ratios] for b in batches])
    ups = np.array([[mean_of(records, b, r, "updates_per_s") for r in ratios] for b in batches])
    sps = np.array([[mean_of(records, b, r, "env_steps_per_s") for r in ratios] for b in batches])
    fig, ax = plt.subplots(figsize=(6.4, 4.8))
    im = ax.imshow(ret, cmap="viridis", origin="lower", vmin=0, vmax=max(1000.0, np.nanmax(ret)))
    for i in range(len(batches)):
        for j in range(len(ratios)):
            dark = not np.isnan(ret[i, j]) and ret[i, j] > 600
            ax.text(j, i, f"{ret[i, j]:.0f}\n{ups[i, j]:.0f} upd/s\n{sps[i, j]:.0f} steps/s",
                    ha="center", va="center", fontsize=8, color="black" if dark else "white")
    ax.set_xticks(range(len(ratios)), [str(r) for r in ratios])
    ax.set_yticks(range(len(batches)), [str(b) for b in batches])
    ax.set_xlabel("replay ratio (updates per env step)")
    ax.set_ylabel("batch size")
    ax.set_title(title, fontsize=9)
    fig.colorbar(im, ax=ax, label="deterministic eval return (max 1000)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=None, help="wall-clock budget per cell (40; quick: 3)")
    ap.add_argument("--seeds", type=int, default=1, help="runs per cell, seeds 0..N-1")
    ap.add_argument("--episodes", type=int, default=5, help="deterministic evaluation episodes")
    ap.add_argument("--quick", action="store_true", help="2 x 2 grid, tiny budget, results in /tmp")
    ap.add_argument("--out", default=None, help="JSON path (the PNG goes beside it)")
    args = ap.parse_args(argv)
    seconds = args.seconds if args.seconds is not None else (3.0 if args.quick else 40.0)
    batches, ratios = (QUICK_BATCHES, QUICK_RATIOS) if args.quick else (BATCHES, RATIOS)

    info = header(f"sweep: batch x replay ratio at {seconds:g} s per cell, {ENV_ID}, CPU learner")
    from actors.config import EnvConfig

    env_cfg = EnvConfig(id=ENV_ID)
    spec = env_spec(env_cfg)
    cells = [(b, r, s) for s in range(args.seeds) for b in batches for r in ratios]
    records = []
    with progress() as bar:
        task = bar.add_task("cells", total=len(cells))
        for b, r, s in cells:
            bar.update(task, description=f"batch {b} ratio {r} seed {s}")
            cell = run_cell(env_cfg, spec, b, r, seconds, s, args.episodes)
            records.append(dict(machine=info["machine"], torch=info["torch"], env=ENV_ID, cores=info["cores"],
                                **cell, command=info["command"]))
            bar.advance(task)

    path = result_path("sweep", args.out, args.quick)
    save(records, path)
    png = path.with_suffix(".png")
    plot(records, batches, ratios, png,
         f"{ENV_ID}: eval return after {seconds:g} s wall clock, mean of {args.seeds} seed(s)\n"
         f"{info['machine']}, {info['cores']} cores, CPU learner 128x128, 1 actor x 4 envs")

    table = Table(title=f"{ENV_ID}, {seconds:g} s per cell on {info['machine']} ({info['cores']} cores), "
                        f"mean of {args.seeds} seed(s)")
    for col in ("batch", "ratio", "eval return", "env steps", "updates", "updates/s", "env steps/s",
                "samples/s"):
        table.add_column(col, justify="right")
    for b in batches:
        for r in ratios:
            m = {k: mean_of(records, b, r, k) for k in ("eval_return", "env_steps", "updates",
                                                         "updates_per_s", "env_steps_per_s", "samples_per_s")}
            table.add_row(str(b), str(r), f"{m['eval_return']:.1f}", f"{m['env_steps']:.0f}",
                          f"{m['updates']:.0f}", f"{m['updates_per_s']:.1f}", f"{m['env_steps_per_s']:.0f}",
                          f"{m['samples_per_s']:.0f}")
    console.print(table)
    console.print(f"wrote {path} and {png}")
    return records


if __name__ == "__main__":
    main()
