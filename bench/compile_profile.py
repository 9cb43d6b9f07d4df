"""Where a cold compile of the learner's update goes: one config's update compiled and captured
alone (no job, no actors), cold then warm, per arm, with torch's own phase timers.

    python bench/compile_profile.py                                   # configs/humanoid.yaml
    python bench/compile_profile.py --arm 'k1:learner.compute.updates_per_call=1' \
        --arm 'threads1:$TORCHINDUCTOR_COMPILE_THREADS=1'

Each arm runs twice, each time in a fresh process: cold (TORCHINDUCTOR_CACHE_DIR and
TRITON_CACHE_DIR in a new empty folder), then warm (the same folder, as the learner's swap
finds it after its twin's compile). On CUDA the process does what `herd precompile` does:
compile, warm up and capture `updates_per_call` updates as one CUDA graph on a small ring
(learner/build.py precompile). On the CPU, where the learner never compiles, it compiles the update
with inductor's C++ backend and runs the same warm-up, so the tool can be tried here; only the
shape of its profile carries over. An arm is NAME:KEY=VALUE[;KEY=VALUE], a key
`learner.<section>.<field>` or `$ENV_VAR`. Writes one flat record per run to bench/results/compile-profile-<machine>.json:
arm, cold, prepare_s (compile + warm-up + capture), import_torch_s, frames (graphs compiled),
and every torch._dynamo phase timer summed over its calls (phase_<name>_s, phase_<name>_n calls),
with machine, torch, command. The timers nest (a frame's compile holds its backend's, which holds
inductor's codegen), so they do not add up; the table prints the largest.

In a job the same compile runs on a thread beside the training thread and 15 busy actors
(cold compile + capture took 58-79 s on the H200 + 16 cores, 2026-12-02/03, bench/results/humanoid-final-mse-ema-*): the gap between that and
this tool's cold prepare_s is what the job's company costs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))


def parse_arm(spec: str) -> tuple[str, dict, dict]:
    """'k1:learner.compute.updates_per_call=1;$X=2' -> ('k1', {'updates_per_call': 1}, {'X': '2'}); the
    learner's values read as `herd submit --set` reads them (herd.config.parse_sets)."""
    from herd.config import ConfigError, parse_sets

    name, _, body = spec.partition(":")
    items = [s.strip() for s in body.split(";") if s.strip()]
    if not name or not items or any("=" not in s for s in items):
        raise SystemExit(f"--arm {spec!r}: give NAME:KEY=VALUE[;KEY=VALUE]")
    env = dict(s[1:].split("=", 1) for s in items if s.startswith("$"))
    try:
        sets = parse_sets(s for s in items if not s.startswith("$"))
    except ConfigError as e:
        raise SystemExit(f"--arm {spec!r}: {e}") from None
    from herd.learner.config import SECTION_OF

    fields = {k.rpartition(".")[2]: v for k, v in sets.items()}
    bad = [k for k in sets if k.count(".") != 2 or not k.startswith("learner.")
           or SECTION_OF.get(k.rpartition(".")[2]) != k.split(".")[1]]
    if bad:
        raise SystemExit(f"--arm {spec!r}: a key is learner.<section>.<field> or $ENV_VAR, "
                         f"not {bad[0]!r}")
    return name, fields, env


def env_spec(config: str) -> dict:
    """The env's EnvSpec fields, as `herd precompile` gets them (herd.config.check_env)."""
    import numpy as np

    from herd.config import check_env, load_config

    cfg = load_config(str(ROOT / config) if not Path(config).is_file() else config, ())
    d = check_env(cfg)
    return dict(env=cfg.env.id, **{k: np.asarray(v).tolist() if isinstance(v, (tuple, np.ndarray)) else v
                                   for k, v in d.items()})


def child(job: dict) -> dict:
    """One compile in this (fresh) process; its record."""
    t0 = time.perf_counter()
    import torch  # noqa: F401  (its import time is measured)
    import torch._dynamo.utils as dyn

    import_torch_s = time.perf_counter() - t0
    from common import learner_from

    from herd.learner.build import pick_device, small_update
    from herd.learner.graph.capture import GraphedUpdate
    from herd.proto import codec

    cfg = learner_from(job["config"], **job["learner"])
    device = pick_device(cfg.compute.device)
    spec = job["spec"]
    t1 = time.perf_counter()
    fields = {k: v for k, v in spec.items() if k != "env"}
    sac, ring = small_update(cfg, codec.spec_to_proto(spec["env"], **fields), device)
    mode = cfg.compute.compile_mode if cfg.compute.compile else None
    update = GraphedUpdate(sac, ring, cfg.compute.updates_per_call, compile_mode=mode)
    build_s = time.perf_counter() - t1
    t2 = time.perf_counter()
    if update.use_graph:
        update.prepare()  # compile, warm up, capture: as herd precompile
    else:  # the CPU: compiled at construction, traced at the first calls
        for _ in range(update.warmup):
            update()
    prepare_s = time.perf_counter() - t2
    phases = {k: (sum(v), len(v)) for k, v in dyn.compilation_time_metrics.items()}
    stats = dyn.counters["stats"]
    return dict(device=device.type, graph=update.use_graph, compile_mode=mode,
                updates_per_call=cfg.compute.updates_per_call, batch=cfg.replay.batch_size, amp=cfg.compute.amp,
                import_torch_s=round(import_torch_s, 2), build_s=round(build_s, 2),
                prepare_s=round(prepare_s, 2), frames=int(stats.get("unique_graphs", 0)),
                calls_captured=int(stats.get("calls_captured", 0)),
                **{f"phase_{k}_s": round(s, 3) for k, (s, _) in phases.items()},
                **{f"phase_{k}_n": n for k, (_, n) in phases.items()})


def run_arm(config: str, spec: dict, name: str, learner: dict, env: dict, cache: Path,
            cold: bool, timeout: float) -> dict:
    if cold:
        shutil.rmtree(cache, ignore_errors=True)
        cache.mkdir(parents=True)
    job = dict(config=config, spec=spec, learner=learner)
    penv = {**os.environ, **env, "TORCHINDUCTOR_CACHE_DIR": str(cache),
            "TRITON_CACHE_DIR": str(cache / "triton")}
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, __file__, "--child", json.dumps(job)], env=penv,
                         capture_output=True, text=True, timeout=timeout, check=False)
    wall = time.perf_counter() - t0
    if out.returncode:
        raise SystemExit(f"arm {name} ({'cold' if cold else 'warm'}) failed: "
                         f"{out.stderr.strip()[-1500:]}")
    rec = json.loads(out.stdout.strip().splitlines()[-1])
    return dict(arm=name, cold=cold, process_s=round(wall, 2), env_vars=env, learner_set=learner,
                **rec)


def table(records: list[dict]) -> None:
    from common import console
    from rich.table import Table

    t = Table(title="seconds, one process per column")
    cols = [f"{r['arm']} {'cold' if r['cold'] else 'warm'}" for r in records]
    t.add_column("", overflow="fold")
    for c in cols:
        t.add_column(c, justify="right")
    for key in ("process_s", "import_torch_s", "build_s", "prepare_s", "frames"):
        t.add_row(key, *(str(r.get(key, "-")) for r in records))
    phase_keys = {k for r in records for k in r if k.startswith("phase_") and k.endswith("_s")}
    top = sorted(phase_keys, key=lambda k: -max(r.get(k, 0) for r in records))[:12]
    for k in top:
        t.add_row(k.removeprefix("phase_").removesuffix("_s"),
                  *(f"{r[k]:.2f} ({r[k[:-2] + '_n']})" if k in r else "-" for r in records))
    console.print(t)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default="configs/humanoid.yaml")
    p.add_argument("--arm", action="append", default=[], metavar="NAME:KEY=VALUE[;KEY=VALUE]",
                   help="beside the config as it is ('config'); learner.<field> or $ENV_VAR")
    p.add_argument("--no-warm", action="store_true", help="only the cold run of each arm")
    p.add_argument("--timeout", type=float, default=600, help="seconds per run")
    p.add_argument("--out", default=None)
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return
    from common import console, header, write_results

    arms = [("config", {}, {})] + [parse_arm(a) for a in args.arm]
    info = header("Herd: where the learner update's compile goes")
    spec = env_spec(args.config)
    base = Path(tempfile.mkdtemp(prefix="herd-compile-profile-"))
    records = []
    try:
        for name, learner, env in arms:
            for cold in (True, False)[:1 if args.no_warm else 2]:
                console.print(f"[bold]{name}[/] {'cold' if cold else 'warm'} ...")
                rec = run_arm(args.config, spec, name, learner, env, base / name, cold, args.timeout)
                console.print(f"  prepare {rec['prepare_s']} s, {rec['frames']} graphs, "
                              f"process {rec['process_s']} s")
                records.append({**info, "config": args.config, "env": spec["env"], **rec})
    finally:
        shutil.rmtree(base, ignore_errors=True)
    table(records)
    write_results("compile-profile", records, args.out)


if __name__ == "__main__":
    main()
