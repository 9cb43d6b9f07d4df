"""The seed's open question: faster sampling with smaller batches, or bigger batches with slower sampling?

A 3 x 3 grid, batch_size x replay_ratio, of short SAC runs with the REAL system and no Ray: per
cell one Learner (real gRPC server on loopback, the replay ring and the update on the GPU when
there is one) and K EnvActors pushing to it from the same process. Learner settings come from
`--config` (default configs/humanoid.yaml, so the answer speaks for those defaults), with the
cell's batch and ratio, compile off (a compile per batch shape would eat the budget; the graph
and AMP stay). Every cell runs for the same wall-clock budget, then its latest published policy
gets a deterministic evaluation. `--parallel N` runs N cells at once, each in its own process
(one round per row of the grid when N = 3), so a 9-cell grid costs three budgets.

    python bench/sweep.py                                   # HalfCheetah-v5, 9 cells x 60 s, 3 at a time
    python bench/sweep.py --env Humanoid-v5 --seconds 90
    python bench/sweep.py --quick                           # CPU: InvertedPendulum, 2 x 2, seconds per cell

Writes bench/results/sweep-<machine>.json (one flat record per cell and seed) and
bench/results/sweep-<machine>.png (evaluation return over batch x ratio, mean over seeds).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # before bench/: learner/ not bench/learner.py
from rich.table import Table

from bench.common import console, header, learner_from, progress, result_path, save

ROOT = Path(__file__).resolve().parent.parent
QUICK = dict(env="InvertedPendulum-v5", batches=(64, 256), ratios=(0.25, 1.0), seconds=3.0,
             learner={"hidden_sizes": [128, 128], "min_replay_size": 1_000, "buffer_capacity": 200_000,
                      "device": "cpu"})


def env_spec(env_cfg):
    from actors.envs import describe, make_env
    from proto import codec

    env = make_env(env_cfg)
    d = describe(env)
    env.close()
    return codec.spec_to_proto(env_cfg.id, d["obs_shape"], d["obs_dtype"], d["action_shape"],
                               d["action_low"], d["action_high"])


def run_cell(env_id: str, config: str, quick: bool, batch: int, ratio: float, seconds: float, seed: int,
             episodes: int, actors: int, envs: int) -> dict:
    """One short run: learner + actors for `seconds` of wall clock, then a deterministic evaluation."""
    from actors.config import ActorConfig, EnvConfig
    from actors.env_actor import EnvActor
    from cluster.evaluate import evaluate
    from learner.service import Learner

    env_cfg = EnvConfig(id=env_id)
    extra = QUICK["learner"] if quick else {}
    lcfg = learner_from(config, **extra, batch_size=batch, replay_ratio=ratio, seed=seed, compile=False,
                        port=0, num_cpus=1.0)
    learner = Learner(lcfg, env_spec(env_cfg))
    running, stats = [], []
    try:
        for i in range(actors):
            running.append(EnvActor(f"sweep-{batch}-{ratio}-{i}", env_cfg,
                                    ActorConfig(num_envs=envs, warmup_steps=1_000, seed=seed),
                                    learner.address(), seed=seed * 100 + i))
        t0 = time.monotonic()
        time.sleep(seconds)
        elapsed = time.monotonic() - t0
        # the budget's end: what the system had done and the latest policy it had published
        env_steps, updates, weights = learner.buffer.inserted, learner.updates, learner.weights()
    finally:
        stats = [a.stop() for a in running]
        learner.stop()
    for st in stats:
        if st.get("error"):
            raise RuntimeError(f"actor failed in cell batch={batch} ratio={ratio}: {st['error']}")
    ev = evaluate(env_cfg, weights, episodes, seed=10_000 + seed) if weights is not None else None
    return {
        "batch": batch, "replay_ratio": ratio, "seed": seed, "seconds": round(elapsed, 2),
        "eval_return": round(ev["mean_return"], 1) if ev else None,
        "eval_min": round(ev["min_return"], 1) if ev else None,
        "eval_max": round(ev["max_return"], 1) if ev else None,
        "eval_episodes": episodes, "policy_version": weights.version if weights is not None else 0,
        "env_steps": int(env_steps), "updates": int(updates), "actors": actors, "envs_per_actor": envs,
        "updates_per_s": round(updates / elapsed, 1), "env_steps_per_s": round(env_steps / elapsed, 1),
        "samples_per_s": round(batch * updates / elapsed, 1), "device": str(learner.device),
    }


def run_round(cells: list[tuple], argv_base: list[str]) -> list[dict]:
    """Cells in parallel, one process each (`--cell B,R,S`); their records in cell order."""
    procs = []
    for b, r, s in cells:
        procs.append(subprocess.Popen([sys.executable, __file__, *argv_base, "--cell", f"{b},{r},{s}"],
                                      cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    out = []
    for (b, r, s), proc in zip(cells, procs):
        stdout, stderr = proc.communicate()
        lines = [ln for ln in stdout.splitlines() if ln.startswith("{")]
        if proc.returncode or not lines:
            raise RuntimeError(f"cell batch={b} ratio={r} seed={s} failed:\n{stderr[-3000:]}")
        out.append(json.loads(lines[-1]))
    return out


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
    top = float(np.nanmax(ret)) if np.isfinite(ret).any() else 1.0
    im = ax.imshow(ret, cmap="viridis", origin="lower", vmin=min(0.0, float(np.nanmin(ret))), vmax=top)
    for i in range(len(batches)):
        for j in range(len(ratios)):
            dark = not np.isnan(ret[i, j]) and ret[i, j] > 0.6 * top
            ax.text(j, i, f"{ret[i, j]:.0f}\n{ups[i, j]:.0f} upd/s\n{sps[i, j]:.0f} steps/s",
                    ha="center", va="center", fontsize=8, color="black" if dark else "white")
    ax.set_xticks(range(len(ratios)), [str(r) for r in ratios])
    ax.set_yticks(range(len(batches)), [str(b) for b in batches])
    ax.set_xlabel("replay ratio (updates per env step)")
    ax.set_ylabel("batch size")
    ax.set_title(title, fontsize=9)
    fig.colorbar(im, ax=ax, label="deterministic eval return")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--env", default="HalfCheetah-v5")
    ap.add_argument("--config", default="configs/humanoid.yaml", help="learner settings of every cell")
    ap.add_argument("--batches", default="256,512,1024")
    ap.add_argument("--ratios", default="0.15,0.3,0.6")
    ap.add_argument("--seconds", type=float, default=None, help="wall-clock budget per cell (60; quick: 3)")
    ap.add_argument("--seeds", type=int, default=1, help="runs per cell, seeds 0..N-1")
    ap.add_argument("--episodes", type=int, default=5, help="deterministic evaluation episodes")
    ap.add_argument("--actors", type=int, default=2, help="EnvActors per cell")
    ap.add_argument("--envs", type=int, default=8, help="envs per actor")
    ap.add_argument("--parallel", type=int, default=3, help="cells at once, one process each")
    ap.add_argument("--quick", action="store_true", help="CPU: InvertedPendulum, 2 x 2, results in /tmp")
    ap.add_argument("--out", default=None, help="JSON path (the PNG goes beside it)")
    ap.add_argument("--cell", default=None, help=argparse.SUPPRESS)  # B,R,S: run one cell, print JSON
    args = ap.parse_args(argv)
    raw_argv = list(sys.argv[1:] if argv is None else argv)
    env_id = args.env
    batches = [int(x) for x in args.batches.split(",")]
    ratios = [float(x) for x in args.ratios.split(",")]
    seconds = args.seconds if args.seconds is not None else 60.0
    if args.quick:
        env_id, batches, ratios = QUICK["env"], list(QUICK["batches"]), list(QUICK["ratios"])
        seconds = args.seconds if args.seconds is not None else QUICK["seconds"]
        args.envs = min(args.envs, 4)
        args.actors = 1
    if args.cell:
        b, r, s = args.cell.split(",")
        print(json.dumps(run_cell(env_id, args.config, args.quick, int(b), float(r), seconds, int(s),
                                  args.episodes, args.actors, args.envs)), flush=True)
        return []

    info = header(f"sweep: batch x replay ratio at {seconds:g} s per cell, {env_id}, "
                  f"{args.parallel} cells at a time")
    cells = [(b, r, s) for s in range(args.seeds) for b in batches for r in ratios]
    records = []
    with progress() as bar:
        task = bar.add_task("cells", total=len(cells))
        for i in range(0, len(cells), max(1, args.parallel)):
            chunk = cells[i : i + max(1, args.parallel)]
            bar.update(task, description=" | ".join(f"batch {b} ratio {r}" for b, r, _ in chunk))
            if args.parallel > 1:
                done = run_round(chunk, raw_argv)
            else:
                done = [run_cell(env_id, args.config, args.quick, b, r, seconds, s, args.episodes,
                                 args.actors, args.envs) for b, r, s in chunk]
            for cell in done:
                records.append(dict(machine=info["machine"], torch=info["torch"], env=env_id,
                                    cores=info["cores"], parallel=args.parallel, **cell,
                                    command=info["command"]))
                bar.console.print(f"  batch {cell['batch']:5d} ratio {cell['replay_ratio']:<5} "
                                  f"eval {cell['eval_return']}  {cell['updates_per_s']:.0f} upd/s  "
                                  f"{cell['env_steps_per_s']:.0f} steps/s")
            bar.advance(task, len(chunk))

    path = result_path("sweep", args.out, args.quick)
    save(records, path)
    png = path.with_suffix(".png")
    hidden = "x".join(map(str, learner_from(args.config, **(QUICK["learner"] if args.quick else {})).hidden_sizes))
    plot(records, batches, ratios, png,
         f"{env_id}: eval return after {seconds:g} s wall clock, mean of {args.seeds} seed(s)\n"
         f"{info['machine']}, {info['cores']} cores, {args.parallel} cells at once, "
         f"{args.actors} actor(s) x {args.envs} envs, {hidden}")

    table = Table(title=f"{env_id}, {seconds:g} s per cell on {info['machine']} ({info['cores']} cores), "
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
