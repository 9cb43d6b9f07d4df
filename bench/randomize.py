"""Domain randomization against none: how much of its return a camera policy keeps on held-out
randomizations of its robot.

    python bench/randomize.py                                  # examples/myrobot/myrobot-pixels.yaml
    python bench/randomize.py --seeds 1,2 --steps 12000 --episodes 30 --runs-dir /tmp/runs
    python bench/randomize.py --split bench/results/randomize-<date>-<machine>.json --runs-dir /tmp/runs

Two arms of one config, side by side on a local Ray head of this run alone: `randomized` (the
config's env.randomize) and `nominal` (env.randomize.train false: trained on the model as
written, evaluated on the same held-out draws). Each seed runs both arms in turn, each job for
as many env steps (--steps; the replay ratio sets its updates), so what else loads a shared
machine changes how long, not how much, each arm learns. After each job its policies are
evaluated here, --episodes episodes each, on the model as written and on the held-out draws of
env.randomize (heldout_seed: none of training's draws), beside a policy that does nothing. One
flat record per run:

    arm, seed, env, pixels              the arm, the seed, the task, the frame size
    best_nominal_return, best_heldout_return
                                        best_policy.pb's (what herd export takes from a run)
                                        mean return on the model as written and on held-out draws
    best_retention                      best_heldout_return / best_nominal_return
    best_retention_above_idle           the same over what a policy doing nothing scores there
                                        (idle_nominal_return, idle_heldout_return)
    final_*                             the same of the job's last checkpoint
    last_*                              the same of the job's own last 4 evaluations, averaged
    best_heldout_visual_return, best_heldout_physical_return
                                        with --split: best_policy.pb on held-out draws of the
                                        looks alone and of the physics alone
    env_steps, updates, wall_s          of the job; loadavg_1m_at_submit / _at_end: the machine's load
    evaluations                         the job's periodic evaluations: seconds since submit,
                                        mean_return, heldout_mean_return
    machine, command

Writes bench/results/randomize-<date>-<machine>.json and a PNG of the evaluations.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import RESULTS, console, header, save, save_figure, slug
from bench.startup import Cluster, run_one
from herd.config import parse_sets, with_overrides

ROOT = Path(__file__).resolve().parent.parent
CONFIG = "examples/myrobot/myrobot-pixels.yaml"
ARMS = {"randomized": [], "nominal": ["env.randomize.train=false"]}


class Idle:
    """A policy that does nothing (zero torque): the floor of the arm's return."""

    version = 0

    def __init__(self, act_dim: int):
        self.act_dim = act_dim

    def act(self, obs, deterministic=True):
        return np.zeros((len(obs), self.act_dim), np.float32)


EVAL_SEED = 20_000
"""Episode i of the bench's evaluations resets with EVAL_SEED + i: none of the job's own
evaluations (10_000 + i), which chose its best policy."""
LAST = 4
"""The job's last evaluations averaged into last_*: one policy's return moves a lot between them."""


def returns(policy, env_cfg, randomize, episodes: int) -> tuple[float, float]:
    """(nominal, held-out) mean return of `policy` on `env_cfg` evaluated with `randomize`."""
    from herd.evaluation import HELDOUT, evaluate

    out = evaluate(env_cfg.model_copy(update={"randomize": randomize}), policy, episodes, seed=EVAL_SEED)
    return out["mean_return"], out[HELDOUT + "mean_return"]


def kept(nominal: float, heldout: float, idle: tuple) -> dict:
    """How much of its nominal return a policy keeps on the held-out draws: as it is, and of
    what it scores above a policy doing nothing."""
    return {"nominal_return": nominal, "heldout_return": heldout,
            "retention": heldout / nominal if nominal else None,
            "retention_above_idle": (heldout - idle[1]) / (nominal - idle[0]) if nominal != idle[0] else None}


def record(arm: str, seed: int, summary: dict, runs: Path, randomize, episodes: int, idle: tuple,
           info: dict) -> dict:
    from herd.export import load_policy

    run, t_submit = runs / summary["job_id"], summary["submitted_unix"]
    evals = [{"seconds": e["unix_time"] - t_submit, "mean_return": e["mean_return"],
              "heldout_mean_return": e.get("heldout_mean_return")} for e in summary["evaluations"]]
    last = evals[-LAST:]
    cfg = yaml.safe_load((run / "config.yaml").read_text())
    r = {**info, "arm": arm, "seed": seed, "job": summary["job_id"], "env": cfg["env"]["id"], "pixels": cfg["env"]["pixels"]["size"],
         "episodes": episodes, "eval_seed": EVAL_SEED}
    # best: best_policy.pb, what herd export and load_policy take from a run; final: its last checkpoint
    for which, best in (("best", True), ("final", False)):
        if best and not (run / "best_policy.pb").is_file():  # no periodic evaluation finished
            continue
        policy = load_policy(run, best=best)
        r.update({f"{which}_{k}": v for k, v in kept(*returns(policy, policy.env, randomize, episodes), idle).items()})
        r[f"{which}_policy_version"] = policy.version
    if last:
        r.update({f"last_{k}": v for k, v in kept(float(np.mean([e["mean_return"] for e in last])),
                                                   float(np.mean([e["heldout_mean_return"] for e in last])),
                                                   idle).items()})
    r.update({"idle_nominal_return": idle[0], "idle_heldout_return": idle[1],
              "env_steps": summary["learner"]["received"], "updates": summary["learner"]["updates"],
              "wall_s": summary["wall_s"], "loadavg_1m_at_submit": summary["loadavg_1m"],
              "loadavg_1m_at_end": os.getloadavg()[0], "randomize": cfg["env"].get("randomize"),
              "heldout_randomize": randomize.model_dump(mode="json"), "evaluations": evals})
    console.print(f"{arm} seed {seed}: " + "; ".join(
        f"{w} nominal {r[w + '_nominal_return']:.1f}, held-out {r[w + '_heldout_return']:.1f}, retention "
        f"{r[w + '_retention']:.2f} ({r[w + '_retention_above_idle']:.2f} above doing nothing)"
        for w in ("best", "final", "last") if w + "_retention" in r) + f"; doing nothing {idle[0]:.1f} / {idle[1]:.1f}")
    return r


def split(records: list[dict], runs: Path, randomize, episodes: int) -> None:
    """Each run's best policy on held-out draws of the looks alone and of the physics alone
    (best_heldout_visual_return, best_heldout_physical_return): where the return goes."""
    from herd.actors.config import OFFSETS, SCALES
    from herd.export import load_policy

    parts = {"visual": {k: None for k in SCALES if k != "light_diffuse"},
             "physical": {k: None for k in (*OFFSETS, "light_diffuse")}}
    for r in records:
        run = runs / r["job"] if "job" in r else next(runs.glob(f"herd-{r['arm']}-s{r['seed']}-*"))
        policy = load_policy(run, best=True)
        for part, off in parts.items():
            r[f"best_heldout_{part}_return"] = returns(policy, policy.env, randomize.model_copy(update=off),
                                                       episodes)[1]
        console.print(f"{r['arm']} seed {r['seed']}: best policy held-out {r['best_heldout_return']:.1f}; "
                      f"looks alone {r['best_heldout_visual_return']:.1f}, physics alone "
                      f"{r['best_heldout_physical_return']:.1f} (nominal {r['best_nominal_return']:.1f})")


def plot(records: list[dict], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (curves, bars) = plt.subplots(1, 2, figsize=(11, 4))
    for i, r in enumerate(records):
        xs = [e["seconds"] for e in r["evaluations"]]
        line, = curves.plot(xs, [e["mean_return"] for e in r["evaluations"]], "-o", ms=3,
                            label=f"{r['arm']} s{r['seed']} nominal")
        held = [e["heldout_mean_return"] for e in r["evaluations"]]
        if any(h is not None for h in held):
            curves.plot(xs, held, "--", color=line.get_color(), label=f"{r['arm']} s{r['seed']} held-out")
        bars.bar([3 * i, 3 * i + 1], [r["best_nominal_return"], r["best_heldout_return"]], color=["C0", "C1"])
    bars.set_xticks([3 * i + 0.5 for i in range(len(records))],
                    [f"{r['arm']}\ns{r['seed']}" for r in records], fontsize=8)
    if records:
        bars.axhline(records[0]["idle_nominal_return"], color="grey", ls=":", lw=1)
    bars.set_title("best policy: nominal (blue), held-out draws (orange)", fontsize=9)
    curves.set_xlabel("seconds since herd submit")
    for ax in (curves, bars):
        ax.set_ylabel("deterministic eval return")
        ax.grid(alpha=0.3)
    curves.legend(fontsize=7)
    save_figure(fig, path, title)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default=CONFIG)
    p.add_argument("--seeds", default="1,2")
    p.add_argument("--steps", type=int, default=12_000,
                   help="each job's run.max_env_steps: both arms learn from as many transitions, "
                        "whatever else loads the machine")
    p.add_argument("--seconds", type=float, default=900, help="each job's run.max_seconds (a cap)")
    p.add_argument("--episodes", type=int, default=30, help="episodes of each final evaluation")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="for both arms")
    p.add_argument("--runs-dir", default=None, help="where the runs are kept (default: removed at the end)")
    p.add_argument("--out", default=None)
    p.add_argument("--split", metavar="JSON", default=None,
                   help="a record of this bench whose runs --runs-dir kept: add each best policy's "
                        "return on held-out looks alone and physics alone")
    args = p.parse_args()
    from herd.actors.config import RandomizeConfig
    from herd.config import load_config

    info = header("Herd: domain randomization, return kept on held-out randomizations")
    path = Path(args.out) if args.out else RESULTS / f"randomize-{info['date']}-{slug(info['machine'])}.json"
    base = yaml.safe_load((ROOT / args.config).read_text())
    randomize = load_config(ROOT / args.config, args.set).env.randomize or RandomizeConfig()
    working_dir = (ROOT / args.config).parent
    sys.path.insert(0, str(working_dir))  # the env's package, for the evaluations here
    if args.split:
        records = json.loads(Path(args.split).read_text())
        split(records, Path(args.runs_dir), randomize, args.episodes)
        save(records, Path(args.split))
        return 0
    env_cfg = load_config(ROOT / args.config, args.set).env
    idle = returns(Idle(2), env_cfg, randomize, args.episodes)
    records: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="herd-bench-randomize-") as tmp:
        work = Path(tmp)
        cluster = Cluster(work, None, {})
        try:
            for seed in (int(s) for s in args.seeds.split(",")):
                for arm, sets in ARMS.items():
                    overrides = parse_sets([f"run.max_seconds={args.seconds}", f"run.max_env_steps={args.steps}",
                                            f"learner.algorithm.seed={seed}",
                                            f"actors.seed={seed}", f"run.name={slug(f'{arm}-s{seed}')}",
                                            *args.set, *sets])
                    cfg = with_overrides(base, overrides)
                    runs = Path(args.runs_dir).resolve() if args.runs_dir else work / "runs"
                    path_cfg = work / f"{cfg['run']['name']}.yaml"
                    path_cfg.write_text(yaml.safe_dump(cfg))
                    summary = run_one(path_cfg, work, cluster, args.seconds + 300, False,
                                      ("--working-dir", str(working_dir)), runs)
                    records.append(record(arm, seed, summary, runs, randomize, args.episodes, idle, info))
                    save(records, path)  # what ran survives a later run's failure
                    plot(records, path.with_suffix(".png"), f"Herd: {base['env']['id']} from pixels, "
                                                            f"{info['machine']}")
        finally:
            cluster.close()
    for arm in ARMS:
        console.print(f"{arm}: best policy's retention " + ", ".join(
            f"seed {r['seed']} {r['best_retention']:.2f} ({r['best_nominal_return']:.1f} -> "
            f"{r['best_heldout_return']:.1f})"
            for r in records if r["arm"] == arm))
    console.print(f"wrote {path} and {path.with_suffix('.png').name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
