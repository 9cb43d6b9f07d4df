"""`herd tune`: a grid of Herd jobs on Ray Tune, each trial one job at a fixed wall-clock budget.

    herd tune configs/humanoid.yaml --grid learner.replay.batch_size=512,1024,2048 \
        --grid learner.replay.ratio=0.02,0.05,0.1 --seeds 3 --seconds 240 --concurrent 3
    herd tune ... --seeds 1 --first-seed 2 --out sweep.json --append   # one seed more, same table

Each trial runs the job driver (`herd.driver.run`) inside a Tune trial: its learner and env
actors are Ray actors like any job's, with the config's CPUs per actor and, with --concurrent
N on a GPU cluster, 1/N of a GPU for each learner (`learner.placement.num_gpus`). Every cell is
validated like a YAML config before any trial starts (a bad key or value fails at once, named).
Writes one flat record per trial (its grid values, seed, final and best evaluation return,
rates) to JSON and, for a two-key grid, a heatmap of the mean final return over seeds.
"""

from __future__ import annotations

import itertools
import json
import os
import platform
import statistics
import sys
from pathlib import Path

import yaml

from herd.config import ConfigError, load_config, parse_config, parse_sets, with_overrides


def parse_grid(items: list[str]) -> dict[str, list]:
    """['learner.replay.batch_size=512,2048', ...] -> {'learner.replay.batch_size': [512, 2048], ...}."""
    grid = {}
    for item in items:
        key, sep, values = item.partition("=")
        if not sep or not key or not values:
            raise ConfigError(f"--grid {item!r}: expected section.key=v1,v2,...")
        grid[key] = [yaml.safe_load(v) for v in values.split(",")]
    return grid


def cells(base: dict, grid: dict[str, list], seeds: list[int], seconds: float, gpus: float | None) -> list[dict]:
    """Every (grid point, seed) as a validated job config dict, plus its grid values."""
    out = []
    for values in itertools.product(*grid.values()):
        point = dict(zip(grid, values))
        for seed in seeds:
            fixed = {"learner.algorithm.seed": seed, "actors.seed": seed, "run.max_seconds": seconds,
                     "run.stop_at_target": False}
            if gpus is not None:
                fixed["learner.placement.num_gpus"] = gpus
            data = with_overrides(base, {**point, **fixed})
            where = ", ".join(f"{k}={v}" for k, v in point.items())
            parse_config(data, f"grid cell {where} seed {seed}")  # refused here, named
            out.append({"point": point, "seed": seed, "config": data})
    return out


def trial(config: dict) -> None:
    """One Tune trial: one Herd job, reported once it ends."""
    from ray import tune

    from herd import driver

    params = config["cell"]
    cfg = parse_config(params["config"], "trial")
    job_id = f"{params['name']}-{params['index']:03d}"  # as job_name() names the trial
    summary = driver.run(cfg, job_id, Path(params["runs_dir"]) / job_id, learner_bundle=LEARNER_BUNDLE)
    problem = idle_trial(summary)
    if problem:  # a result of nothing is no cell's answer: the trial errs, and says why
        raise RuntimeError(f"{job_id}: {problem}")
    evals = [e["mean_return"] for e in summary["evaluations"]]
    ls = summary["learner"]
    tune.report({
        "job": job_id, "final_eval_return": summary["final_eval"]["mean_return"],
        "best_eval_return": max(evals, default=None), "evaluations": len(evals),
        "updates": int(ls["updates"]), "env_steps": int(ls["received"]), "wall_s": summary["wall_s"],
        "updates_per_s": ls["updates"] / summary["wall_s"], "env_steps_per_s": ls["received"] / summary["wall_s"],
        # when the trial's updates began and its compiled graph took over: a cell whose learner
        # compiled beside its actors (a cache miss) shows it here, not only in a slower rate
        **{k: (summary.get("startup") or {}).get(k) for k in STARTUP_KEYS},
    })


def idle_trial(summary: dict) -> str | None:
    """Why a finished trial's job measured nothing (no update), or None when it trained."""
    ls = summary["learner"]
    if ls["updates"] > 0:
        return None
    if not ls["received"]:
        actors = ("no env actor stepped (waiting for CPUs its trial's group did not give them?)"
                  if not summary.get("actor_steps") else "the env actors stepped but sent no transition")
        return f"no update in {summary['wall_s']:.0f} s: {actors}"
    return (f"no update in {summary['wall_s']:.0f} s: {ls['received']} transitions received, fewer "
            f"than learner.replay.min_size or too few for the budget")


def job_name(t) -> str:
    cell = t.config["cell"]
    return f"{cell['name']}-{cell['index']:03d}"


LEARNER_BUNDLE = 1  # trial_resources' bundles: [driver, learner, *env actors]


def trial_resources(config: dict):
    """What one trial's job holds: Tune schedules a trial's actors inside its placement group,
    so the group has a bundle for the driver, the learner (CPUs and its GPU share) and each
    env actor; a trial starts only when all of them fit."""
    from ray import tune

    cfg = parse_config(config["cell"]["config"], "trial")
    place = cfg.learner.placement
    learner = {"CPU": place.num_cpus}
    if place.num_gpus:
        learner["GPU"] = place.num_gpus
    actors = [{"CPU": cfg.actors.num_cpus}] * cfg.actors.num_actors
    return tune.PlacementGroupFactory([{"CPU": 0.01}, learner, *actors], strategy="PACK")


def machine() -> dict:
    import torch

    name = torch.cuda.get_device_name(0) if torch.cuda.is_available() else (platform.processor() or
                                                                            platform.machine())
    return {"machine": name, "torch": torch.__version__, "cores": os.cpu_count()}


def run(config: str, grid_items: list[str], seeds: list[int], seconds: float, concurrent: int,
        name: str, runs_dir: str, out: str | None, command: str | None = None,
        append: bool = False, sets: list[str] = ()) -> list[dict]:
    import ray
    from ray import tune

    load_config(config, sets)  # the base itself first: its own errors (and --set's) name it
    base = with_overrides(yaml.safe_load(Path(config).read_text()), parse_sets(sets))
    grid = parse_grid(grid_items)
    cells(base, grid, seeds, seconds, None)  # every cell refused or taken before Ray starts
    path = Path(out) if out else Path(runs_dir).resolve() / f"tune-{name}" / "results.json"
    earlier = earlier_records(path, list(grid), seconds) if append else []
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"), log_to_driver=False)
    has_gpu = ray.cluster_resources().get("GPU", 0) >= 1
    gpus = 1.0 / concurrent if has_gpu else None  # each learner's share, in its trial's group
    todo = cells(base, grid, seeds, seconds, gpus)
    root = Path(runs_dir).resolve() / f"tune-{name}"
    params = [{**c, "index": i, "name": name, "runs_dir": str(root)} for i, c in enumerate(todo)]
    print(f"herd tune: {len(todo)} trials ({' x '.join(str(len(v)) for v in grid.values())} cells x "
          f"{len(seeds)} seeds), {seconds:.0f} s each, {concurrent} at a time; runs in {root}", flush=True)
    books = TrialBooks(path, list(grid), earlier, {**machine(), "config_file": config, "seconds": seconds,
                                                   "command": command})
    tuner = tune.Tuner(
        tune.with_resources(trial, trial_resources),
        param_space={"cell": tune.grid_search(params)},
        tune_config=tune.TuneConfig(max_concurrent_trials=concurrent, trial_name_creator=job_name,
                                    trial_dirname_creator=job_name),
        run_config=tune.RunConfig(storage_path=str(root / "tune"), name=name, verbose=1,
                                  callbacks=[books.callback()]),
    )
    results = tuner.fit()
    header = books.header
    for r in results:  # every trial once more, from Tune's own books (the callback's may lag)
        books.add(r.config["cell"], r.metrics, None if r.error is None else str(r.error))
    records = books.write()
    print_table(records, list(grid))
    if len(grid) == 2 and mean_by_point(records, list(grid)):
        heatmap(records, *grid, path.with_suffix(".png"), f"{records[0]['env']}, {seconds:.0f} s per trial, "
                f"{header['machine']}")
    print(f"wrote {path}" + (f" and {path.with_suffix('.png')}" if path.with_suffix(".png").exists() else ""))
    failed = sum("error" in rec for rec in records)
    if failed:
        print(f"herd tune: {failed} of {len(records)} trials failed (their error above)", file=sys.stderr)
    return records


class TrialBooks:
    """The sweep's records, written to `path` again as each trial ends (with --append's earlier
    ones), so that a sweep cut short (a machine's time limit) keeps the trials it finished."""

    def __init__(self, path: Path, keys: list[str], earlier: list[dict], header: dict):
        self.path, self.keys, self.earlier, self.header = path, keys, earlier, header
        self.done: dict[int, dict] = {}  # by trial index

    def add(self, cell: dict, metrics: dict | None, error: str | None) -> None:
        rec = {**self.header, "env": cell["config"]["env"]["id"], "seed": cell["seed"], **cell["point"]}
        if error is not None:
            rec["error"] = error.strip().splitlines()[-1][:300]
        else:
            rec.update({k: v for k, v in (metrics or {}).items() if k in TRIAL_KEYS})
        self.done[cell["index"]] = rec

    def write(self) -> list[dict]:
        records = merged([self.done[i] for i in sorted(self.done)], self.earlier, self.keys)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(records, indent=1) + "\n")
        tmp.replace(self.path)  # never a half-written file
        return records

    def callback(self):
        from ray.tune import Callback

        books = self

        class Keep(Callback):
            def on_trial_complete(self, iteration, trials, trial, **info):
                books.add(trial.config["cell"], trial.last_result, None)
                books.write()

            def on_trial_error(self, iteration, trials, trial, **info):
                books.add(trial.config["cell"], None, trial.get_error() or "the trial failed")
                books.write()

        return Keep()


def earlier_records(path: Path, keys: list[str], seconds: float) -> list[dict]:
    """--append: the trials already in `path`, which must be of the same grid keys and budget."""
    if not path.is_file():
        return []
    try:
        records = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ConfigError(f"--append: {path} is not a herd tune result ({e.msg})") from None
    if not isinstance(records, list):
        raise ConfigError(f"--append: {path} is not a herd tune result (not a list of trials)")
    for rec in records:
        if not isinstance(rec, dict) or any(k not in rec for k in keys) or rec.get("seconds") != seconds:
            raise ConfigError(f"--append: {path} holds trials of another sweep (grid keys "
                              f"{', '.join(keys)} at {seconds:.0f} s expected)")
    return records


def merged(records: list[dict], earlier: list[dict], keys: list[str]) -> list[dict]:
    """This call's trials plus the earlier ones of other (cell, seed)s, sorted by cell and seed;
    a trial run again replaces its earlier record."""
    def trial_of(rec):
        return tuple(rec[k] for k in keys), rec["seed"]

    ran = {trial_of(rec) for rec in records}
    out = records + [rec for rec in earlier if trial_of(rec) not in ran]
    return sorted(out, key=lambda rec: (tuple(str(rec[k]) for k in keys), rec["seed"]))


STARTUP_KEYS = ("first_update_s", "first_compiled_update_s", "actors_ready_s")
TRIAL_KEYS = ("job", "final_eval_return", "best_eval_return", "evaluations", "updates", "env_steps",
              "wall_s", "updates_per_s", "env_steps_per_s", *STARTUP_KEYS)


def mean_by_point(records: list[dict], keys: list[str]) -> dict[tuple, float]:
    groups: dict[tuple, list[float]] = {}
    for rec in records:
        if rec.get("final_eval_return") is not None:
            groups.setdefault(tuple(rec[k] for k in keys), []).append(rec["final_eval_return"])
    return {p: statistics.mean(v) for p, v in groups.items()}


def print_table(records: list[dict], keys: list[str]) -> None:
    for rec in records:
        where = "  ".join(f"{k.split('.')[-1]}={rec[k]}" for k in keys)
        best = rec.get("best_eval_return")
        got = rec.get("error") or (f"final {rec['final_eval_return']:.1f}  best "
                                   f"{'-' if best is None else f'{best:.1f}'}  "
                                   f"{rec['updates_per_s']:.0f} updates/s  {rec['env_steps_per_s']:.0f} steps/s")
        print(f"  {where}  seed {rec['seed']}: {got}")
    for point, mean in sorted(mean_by_point(records, keys).items(), key=lambda kv: -kv[1]):
        print(f"  mean final return {mean:9.1f}  " + "  ".join(f"{k}={v}" for k, v in zip(keys, point)))


def heatmap(records: list[dict], x_key: str, y_key: str, path: Path, title: str) -> None:
    try:
        import matplotlib
    except ImportError:  # an extra: pip install 'herd[bench]'
        print(f"no heatmap ({path}): matplotlib is not installed (pip install 'herd[bench]')")
        return

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    means = mean_by_point(records, [x_key, y_key])
    xs = sorted({p[0] for p in means})
    ys = sorted({p[1] for p in means})
    grid = [[means.get((x, y), float("nan")) for x in xs] for y in ys]
    fig, ax = plt.subplots(figsize=(1.6 * len(xs) + 2.5, 1.2 * len(ys) + 1.8))
    im = ax.imshow(grid, origin="lower", cmap="viridis")
    for i, row in enumerate(grid):
        for j, v in enumerate(row):
            ax.text(j, i, f"{v:.0f}", ha="center", va="center", color="w")
    ax.set_xticks(range(len(xs)), [str(x) for x in xs])
    ax.set_yticks(range(len(ys)), [str(y) for y in ys])
    ax.set_xlabel(x_key)
    ax.set_ylabel(y_key)
    fig.colorbar(im, label="final deterministic eval return (mean over seeds)")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
