"""Wall-clock to a walking Humanoid: the full system, timed from `herd submit`.

    python bench/humanoid.py [--config configs/humanoid.yaml] [--seconds 240] [--set learner.replay.batch_size=1024]
    python bench/humanoid.py --config configs/humanoid.yaml --config configs/humanoid-plain.yaml --seeds 1,2
    python bench/humanoid.py --ablate all --seeds 1,2 --seconds 240   # each piece of the family switched in turn
    python bench/humanoid.py --ablate c51,n_step --no-full --append --out X.json  # more of it, later
    python bench/humanoid.py --config configs/humanoid.yaml --config configs/humanoid-plain.yaml \
        --envs Walker2d-v5,Hopper-v5 --parallel 4 --set actors.num_actors=3 --seconds 120  # side by side

Starts a local Ray head if none answers, submits each (config, seed) job in turn through the
`herd` CLI (`--parallel N`: N jobs at once, each with 1/N of the GPU), follows it, then reads runs/<job>/summary.json: deterministic evaluation return
against seconds since submit, env steps and updates. Writes one flat record per run (every
seed, side by side) to bench/results/humanoid-<machine>.json and a PNG plot of all curves.
Each record also has the box's speed and load over its batch of jobs (bench/machine_load.py):
cpu_probe_s just before the submit, and disk_read_mb, io_pressure_s, cpu_pressure_s,
cpu_steal_s, cpu_throttled_s from the submit to the jobs' end, machine-wide; what each of its
figures is, bench/humanoid_record.py says.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import console, header, result_path, save, save_figure, submitted_job
from bench.humanoid_record import record_of
from bench.machine_load import cpu_probe, io_now, io_since
from herd import local
from herd.config import parse_sets, with_overrides

ROOT = Path(__file__).resolve().parent.parent


def apply_overrides(cfg: dict, sets: list[str]) -> dict:
    """`--set` items applied as `herd submit --set` applies them (herd.config)."""
    return with_overrides(cfg, parse_sets(sets))


ABLATIONS = {
    "residual": {"learner.algorithm.actor_arch": "mlp", "learner.algorithm.critic_arch": "mlp"},  # 2x256 MLPs instead
    "c51": {"learner.algorithm.critic_loss": "c51"},  # the config's MSE critic swapped for the categorical one
    "obs_norm": {"learner.algorithm.obs_norm": False},
    "reward_norm": {"learner.algorithm.reward_norm": False},
    "n_step": {"learner.algorithm.n_step": 1},
}
"""The family's pieces, each switched on its own: off, or for c51 (an option the config leaves off,
bench/results/ablation-*) on; a run of the config with that one change."""
SWAPPED_IN = {"c51"}
"""The pieces whose arm adds to the config ('+c51'); the others take away ('-residual')."""


def variants(ablate: str | None, full: bool = True) -> list[tuple[str, dict]]:
    """('full', {}) (unless `full` is False) then ('-piece' or '+piece', overrides) for each piece
    asked for."""
    names = [] if not ablate else list(ABLATIONS) if ablate == "all" else ablate.split(",")
    unknown = [n for n in names if n not in ABLATIONS]
    if unknown:
        raise SystemExit(f"--ablate: unknown piece(s) {unknown}; choose from {list(ABLATIONS)} or 'all'")
    if not full and not names:
        raise SystemExit("--no-full needs --ablate: there would be nothing to run")
    return [*([("full", {})] if full else []),
            *((f"{'+' if n in SWAPPED_IN else '-'}{n}", ABLATIONS[n]) for n in names)]


def parse_arm(spec: str) -> tuple[str, dict]:
    """--arm 'ema:learner.algorithm.actor_ema=0.001;learner.algorithm.tau=0.01' -> ('ema', {key: value, ...}), the
    values parsed as --set parses them; a bad spec is refused before anything runs."""
    name, _, sets = spec.partition(":")
    if not name.strip() or not sets.strip() or name.strip() in ("full", *ABLATIONS):
        raise SystemExit(f"--arm {spec!r}: give NAME:KEY=VALUE[;KEY=VALUE], NAME not 'full' or an --ablate piece")
    try:
        overrides = parse_sets([x for x in sets.split(";") if x.strip()])
    except ValueError as e:
        raise SystemExit(f"--arm {spec!r}: {e}") from None
    return name.strip(), overrides


def label(config: str, variant: str, seed: int) -> str:
    """A run's name in the plot: 'humanoid s1', 'humanoid +c51 s2'."""
    return Path(config).stem + ("" if variant == "full" else f" {variant}") + f" s{seed}"


def earlier_runs(path: Path, seconds: float) -> list[dict]:
    """--append: the runs already in `path` (none if it is not there), which must be this
    bench's records of the same budget; anything else is refused, not overwritten."""
    if not path.exists():
        return []
    try:
        runs = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise SystemExit(f"--append: {path} is not JSON ({e.msg}); move it or drop --append") from None
    if not isinstance(runs, list) or not all(isinstance(r, dict) and "variant" in r for r in runs):
        raise SystemExit(f"--append: {path} does not hold bench/humanoid.py runs")
    budgets = {r.get("config", {}).get("run", {}).get("max_seconds") for r in runs}
    if budgets - {seconds}:
        raise SystemExit(f"--append: {path} holds runs of {sorted(budgets, key=str)} s, not {seconds:g} s")
    return runs


def compile_cache_empty() -> bool:
    """True when torch inductor's cache directory holds nothing yet (a cold start)."""
    import getpass

    d = Path(os.environ.get("TORCHINDUCTOR_CACHE_DIR") or f"/tmp/torchinductor_{getpass.getuser()}")
    return not d.exists() or not any(d.iterdir())


def submit(cfg_path: Path, runs: Path) -> tuple[str, float]:
    t_submit = time.time()
    out = subprocess.run([sys.executable, "-m", "herd", "submit", str(cfg_path), "--runs-dir",
                          str(runs)], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return submitted_job(out), t_submit


def follow_jobs(jobs: list[str], timeout: float) -> None:
    """Print each job's [herd] lines as they come (tagged when several) until all have ended."""
    from ray.job_submission import JobSubmissionClient

    client = JobSubmissionClient(os.environ.get("HERD_DASHBOARD_URL", local.DEFAULT_DASHBOARD))
    t0, deadline = time.time(), time.monotonic() + timeout
    seen = dict.fromkeys(jobs, 0)
    running = list(jobs)
    while running and time.monotonic() < deadline:
        for job in list(running):
            status = str(client.get_job_status(job)).split(".")[-1]
            lines = [ln for ln in client.get_job_logs(job).splitlines() if ln.startswith("[herd]")]
            for ln in lines[seen[job]:]:
                tag = f"{job[-4:]} " if len(jobs) > 1 else ""
                console.print(f"{time.time() - t0:6.1f}s {tag}{ln}", markup=False)
            seen[job] = len(lines)
            if status in ("SUCCEEDED", "FAILED", "STOPPED"):
                if status != "SUCCEEDED":
                    console.print(client.get_job_logs(job)[-4000:], markup=False)
                    raise SystemExit(f"job {job} ended {status}")
                running.remove(job)
        time.sleep(2)
    if running:
        raise SystemExit(f"jobs {running} did not finish within {timeout:.0f}s")


def plot(curves: list[tuple[str, list[dict]]], path: Path, title: str):
    """Eval return against seconds since submit (and against env steps where a curve has them);
    where evaluations carry a contact cost, it too against seconds (dotted, the right axis)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    # every curve drawn: one colour per config/variant, one marker per seed of it (label()'s
    # " s<seed>" suffix; a label without one is an arm of its own)
    arm_of = {label: re.sub(r" s\d+$", "", label) for label, _ in curves}
    arms = list(dict.fromkeys(arm_of.values()))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    seen: dict[str, int] = {}
    costs = any(e.get("mean_contact_cost") is not None for _, evals in curves for e in evals)
    cost_ax = axes[0].twinx() if costs else None
    for label, evals in curves:
        arm = arm_of[label]
        style = dict(color=colors[arms.index(arm) % len(colors)], marker="os^vD"[seen.get(arm, 0) % 5], ms=4,
                     label=label)
        seen[arm] = seen.get(arm, 0) + 1
        axes[0].plot([e["seconds"] for e in evals], [e["mean_return"] for e in evals], "-", **style)
        if all("env_steps" in e for e in evals):
            axes[1].plot([e["env_steps"] for e in evals], [e["mean_return"] for e in evals], "-", **style)
        paid = [e for e in evals if e.get("mean_contact_cost") is not None]
        if cost_ax is not None and paid:
            cost_ax.plot([e["seconds"] for e in paid], [e["mean_contact_cost"] for e in paid], ":",
                         color=style["color"], lw=1, label=f"_{label} contact cost")
    axes[0].set_xlabel("seconds since submit")
    if cost_ax is not None:
        cost_ax.set_ylabel("contact cost per episode (dotted)")
        cost_ax.set_ylim(bottom=0)
    axes[1].set_xlabel("env steps")
    for ax in axes:
        if "Humanoid" in title:  # the targets' thresholds
            for y in (5000, 6500, 10000, 11000):
                ax.axhline(y, color="grey", ls="--", lw=0.8)
        ax.set_ylabel("deterministic eval return")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7 if len(curves) > 6 else None)
    return save_figure(fig, path, title)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", action="append", default=None, help="repeatable (default configs/humanoid.yaml)")
    p.add_argument("--seeds", default="0", help="comma list: each config runs once per seed")
    p.add_argument("--seconds", type=float, default=240, help="the job's run.max_seconds")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--ablate", default=None, help="'all' or a comma list of " + ",".join(ABLATIONS))
    p.add_argument("--no-full", action="store_true", help="with --ablate: only the pieces, not the full config")
    p.add_argument("--append", action="store_true",
                   help="keep the runs already in --out (of the same budget): an ablation split over calls")
    p.add_argument("--arm", action="append", default=[], metavar="NAME:KEY=VALUE[;KEY=VALUE]",
                   help="repeatable: one more variant beside the config, with these --set overrides")
    p.add_argument("--envs", default=None, help="comma list of env ids: every config runs on each")
    p.add_argument("--parallel", type=int, default=1,
                   help="jobs side by side, each with 1/N of the GPU (set actors.num_actors to fit the CPUs)")
    p.add_argument("--runs-dir", default="runs")
    p.add_argument("--out", default=None)
    args = p.parse_args()
    local.align_auth_mode()
    path = result_path("humanoid", args.out, quick=False)
    records = earlier_runs(path, args.seconds) if args.append else []  # refused before anything runs
    info = header("Herd: evaluation return against wall-clock")
    local.up(num_cpus=os.cpu_count())
    curves = [(r["env"], label(r["config_file"], r["variant"], r["seed"]), r["evaluations"]) for r in records]
    envs = args.envs.split(",") if args.envs else [None]
    runs = [(c, v, {**o, **({"env.id": e} if e else {})}, int(seed)) for e in envs
            for c in args.config or ["configs/humanoid.yaml"]
            for v, o in [*variants(args.ablate, not args.no_full), *map(parse_arm, args.arm)]
            for seed in args.seeds.split(",")]
    share = [] if args.parallel <= 1 else [f"learner.placement.num_gpus={1 / args.parallel:.4f}"]
    for i in range(0, len(runs), max(1, args.parallel)):
        batch = runs[i:i + max(1, args.parallel)]
        # a batch of jobs side by side: submitted together, each with 1/parallel of the GPU
        # and the CPUs its config asks for; the cluster must hold them all at once
        probe, before = cpu_probe(), io_now()  # the box's speed and load counters at the submit
        started = [(config, variant, seed, *submit_one(config, seed, args, [*share, *(
            f"{k}={json.dumps(v)}" for k, v in overrides.items())]))
                   for config, variant, overrides, seed in batch]
        follow_jobs([job for *_, job, _t, _cfg, _cold in started], args.seconds + 300)
        load = {"cpu_probe_s": probe, **io_since(before)}  # machine-wide: the batch's jobs together
        for config, variant, seed, job, t_submit, cfg, cold in started:
            rec = {"variant": variant, "parallel": args.parallel,
                   **record_of(config, seed, info, job, t_submit, cfg, cold, args.runs_dir), **load}
            records.append(rec)
            curves.append((rec["env"], label(config, variant, seed), rec["evaluations"]))
            save(records, path)  # what ran survives a later run's failure
            for env in {e for e, *_ in curves}:  # one plot per env
                png = path.with_suffix(".png") if len(envs) == 1 else path.with_name(f"{path.stem}-{env}.png")
                plot([(label, ev) for e, label, ev in curves if e == env], png, f"Herd, {env}, {info['machine']}")
    console.print(f"wrote {path} and its plot(s)")
    return 0


def submit_one(config: str, seed: int, args, sets: list[str] = ()) -> tuple[str, float, dict, bool]:
    """(job, unix time of submit, resolved config dict, cold) of one submitted run."""
    cold = compile_cache_empty()
    cfg = apply_overrides(yaml.safe_load((ROOT / config).read_text()),
                          [f"run.max_seconds={args.seconds}", f"learner.algorithm.seed={seed}", f"actors.seed={seed}",
                           *args.set, *sets])
    # one file per run: several benches may submit at once
    fd, name = tempfile.mkstemp(prefix=f"herd-bench-{cfg['env']['id'].replace('/', '-')}-", suffix=".yaml")
    os.close(fd)
    cfg_path = Path(name)
    cfg_path.write_text(yaml.safe_dump(cfg))
    try:
        job, t_submit = submit(cfg_path, Path(args.runs_dir).resolve())
    finally:
        cfg_path.unlink(missing_ok=True)  # the job holds its own copy (runs/<job>/config.yaml)
    return job, t_submit, cfg, cold

if __name__ == "__main__":
    sys.exit(main())
