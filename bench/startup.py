"""Start-up, phase by phase, cold and warm: seconds from `herd submit` to each phase of
summary.json's "startup" (cluster/startup.py), side by side.

    python bench/startup.py                                   # configs/demo.yaml, cold then warm
    python bench/startup.py --config configs/humanoid.yaml --seconds 120
    python bench/startup.py --modes warm --set learner.compute.compile=false
    python bench/startup.py --modes warm --preload both --repeat 3 --until-eval   # preload A/B
    python bench/startup.py --modes warm --preload on --jobs 3 --seconds 60   # jobs in a row

Each run gets a fresh local Ray head of its own (own ports, temp dir, token), started with the
compile cache it is to see: cold = TORCHINDUCTOR_CACHE_DIR and TRITON_CACHE_DIR in a new empty
folder; warm = the folder the cold run of this invocation filled (the user's own cache when
only warm runs are asked for). The job runs for --seconds (its own run.max_seconds if not set;
--until-eval stops after the first evaluation); with --jobs N, N jobs run one after another on
each cluster (job_index 1..N: a later job finds the spare workers the one before it started
again, herd/pool.py). Writes one flat record per job to
bench/results/startup-<machine>.json: cold, every <phase>_s, first_update_s, actors_ready_s,
first_compiled_update_s (null on the CPU), seconds_to_5000 (Humanoid; null if not reached),
disk_read_mb / io_pressure_s / cpu_pressure_s / cpu_steal_s / cpu_throttled_s (machine-wide,
from the cluster's start to the job's submit as up_*, and from there to the cluster's end: first reads of the box's
files against a wait for CPUs, time a hypervisor gave this machine's CPUs to others, and time
the container's CPU quota held it back),
cpu_probe_s (a fixed single-thread Python loop timed just before the cluster starts: how fast
the box's CPUs are right now), machine, command.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import console, header, result_path, save, submitted_job
from bench.machine_load import cpu_probe, io_now, io_since
from herd import local, pool
from herd.config import ConfigError, parse_sets, with_overrides
from herd.startup import GRAPH_KEYS, PHASES

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """A Ray head of this run alone, as `herd up` starts one (token auth, loopback only), with
    `extra_env` in every process it starts (the learner sees the compile cache set there)."""

    def __init__(self, work: Path, num_cpus: int | None, extra_env: dict, preload: bool = False):
        self.marker = f"bench-startup-{secrets.token_hex(4)}"
        gcs, dash = free_port(), free_port()
        token = work / "ray_token"
        token.write_text(secrets.token_hex(32))
        self.env = {**os.environ, **extra_env, "RAY_USAGE_STATS_ENABLED": "0",
                    "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token),
                    local.LOOPBACK_ONLY_ENV: "0", "HERD_HOME": str(work / "herd"),
                    "RAY_ADDRESS": f"127.0.0.1:{gcs}", "HERD_DASHBOARD_URL": f"http://127.0.0.1:{dash}"}
        self.env.pop("RAY_AUTH_TOKEN", None)
        if preload:  # as `herd up --preload`
            self.env.update(local.preload_env(work / "preload"))
        else:
            self.env.pop(local.PRELOAD_ENV, None)
            self.env.pop(local.PRELOAD_DIR_ENV, None)
        spares = num_cpus or os.cpu_count() or 1
        self.env.update(pool.pool_env(spares))
        self.url = self.env["HERD_DASHBOARD_URL"]
        cmd = [local.ray_bin(), "start", "--head", f"--port={gcs}", "--node-ip-address=127.0.0.1",
               f"--temp-dir={work / 'ray'}", "--include-dashboard=true", "--dashboard-host=127.0.0.1",
               f"--dashboard-port={dash}", f"--metrics-export-port={free_port()}",
               f"--dashboard-agent-listen-port={free_port()}", f"--ray-client-server-port={free_port()}",
               "--disable-usage-stats"] + ([f"--num-cpus={num_cpus}"] if num_cpus else [])
        r = subprocess.run(cmd, check=False, env={**self.env, local.CLUSTER_MARKER_ENV: self.marker},
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if r.returncode:
            self.close()  # what it started before failing
            raise SystemExit(f"`ray start` failed: {r.stderr.strip()[-2000:]}")
        for key in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN_PATH"):  # this process's REST calls
            os.environ[key] = self.env[key]
        deadline = time.monotonic() + 120
        while not local.dashboard_up(self.url):
            if time.monotonic() > deadline:
                raise SystemExit(f"the bench cluster's dashboard never answered at {self.url}")
            time.sleep(1)
        pool.start_spares(self.env["RAY_ADDRESS"], spares, {**self.env, local.CLUSTER_MARKER_ENV: self.marker})
        # as `herd up --preload`: it returns once the spares are warm
        self.preload_wait_s = local.finish_preload(work / "preload") if preload else None

    def job(self, job: str) -> dict:
        return json.loads(local.get(f"{self.url}/api/jobs/{job}"))

    def logs(self, job: str) -> str:
        return json.loads(local.get(f"{self.url}/api/jobs/{job}/logs"))["logs"]

    def close(self) -> None:
        local.stop_processes_marked(self.marker)


def run_one(cfg_path: Path, work: Path, cluster: Cluster, timeout: float, until_eval: bool,
            submit_args: tuple[str, ...] = (), runs: Path | None = None) -> dict:
    """Submit (with `submit_args`, into `runs`: work/runs unless given), follow the [herd]
    lines, wait for the end; the job's summary.json, with the machine's load and the unix time
    of the submit."""
    runs = runs or work / "runs"
    load = os.getloadavg()[0]  # a shared box's other work shows up in every phase
    t0 = time.time()
    out = subprocess.run([sys.executable, "-m", "herd", "submit", str(cfg_path), "--runs-dir", str(runs),
                          *submit_args], cwd=ROOT, env=cluster.env, capture_output=True, text=True, check=False)
    if out.returncode:
        raise SystemExit(f"herd submit failed: {out.stderr.strip()}")
    job = submitted_job(out.stdout)
    seen, deadline, stopped = 0, time.monotonic() + timeout, False
    while time.monotonic() < deadline:
        try:
            state = cluster.job(job)["status"]
            lines = [ln for ln in cluster.logs(job).splitlines() if ln.startswith("[herd]")]
        except OSError:  # the dashboard slow to answer on a loaded machine: ask again
            time.sleep(1)
            continue
        for ln in lines[seen:]:
            console.print(f"{time.time() - t0:6.1f}s {ln}", markup=False)
        seen = len(lines)
        if until_eval and not stopped and any(re.search(r"eval_return=-?\d", ln) for ln in lines):
            subprocess.run([sys.executable, "-m", "herd", "stop", job], cwd=ROOT, env=cluster.env,
                           capture_output=True, check=False)
            stopped = True
        if state in ("SUCCEEDED", "FAILED", "STOPPED"):
            if state != "SUCCEEDED":
                console.print(cluster.logs(job)[-4000:], markup=False)
                raise SystemExit(f"job {job} ended {state}")
            return {**json.loads((runs / job / "summary.json").read_text()), "loadavg_1m": load,
                    "submitted_unix": t0}
        time.sleep(1)
    raise SystemExit(f"job {job} did not finish within {timeout:.0f}s")


def seconds_to(summary: dict, threshold: float) -> float | None:
    """Seconds from submit to the policy whose evaluation first reached `threshold`."""
    up = summary.get("startup") or {}
    hit = next((e for e in summary.get("evaluations", []) if e["mean_return"] >= threshold), None)
    if hit is None or up.get("zero_unix") is None:
        return None
    return round(hit["unix_time"] - up["zero_unix"], 2)


def record(summary: dict, cold: bool, info: dict, config: str, preload: bool = False,
           preload_wait_s: float | None = None, io: dict | None = None,
           probe_s: float | None = None, job_index: int = 1) -> dict:
    up = summary.get("startup") or {}
    humanoid = summary["env"].startswith("Humanoid")
    return {
        "cold": cold, "preload": preload, "config": config, "env": summary["env"],
        "job_index": job_index,  # 1: the cluster's first job; 2, 3: the ones after it (--jobs)
        "preload_wait_s": preload_wait_s,  # how long the cluster's start waited for it, before submit
        **{f"{p}_s": up.get(f"{p}_s") for p in PHASES},
        **{k: up.get(k) for k in GRAPH_KEYS},
        "seconds_to_5000": seconds_to(summary, 5000) if humanoid else None,
        "best_eval": (summary.get("best_eval") or {}).get("mean_return"),
        "loadavg_1m": summary["loadavg_1m"],  # at submit: the machine's load beside this job
        **(io or {}),  # disk_read_mb, io/cpu_pressure_s, cpu_steal_s: the cluster's start (up_*), the job
        "cpu_probe_s": probe_s,  # the CPU-speed probe just before the cluster started
        "date": info["date"], "machine": info["machine"], "torch": info["torch"], "cores": info["cores"],
        "command": info["command"],
    }


def table(records: list[dict]) -> None:
    from rich.table import Table

    t = Table(title="seconds since `herd submit`")
    t.add_column("phase")
    for r in records:
        t.add_column(arm(r), justify="right")
    fmt = lambda v: "-" if v is None else f"{v:.2f}" if v < 1 else f"{v:.1f}"
    for key in [f"{p}_s" for p in PHASES] + ["uncompiled_capture_s", "capture_s",
                                             "graph_swap_s", "startup_update_gap_s", "seconds_to_5000"]:
        t.add_row(key.removesuffix("_s"), *(fmt(r[key]) for r in records))
    console.print(t)


def arm(r: dict) -> str:
    return (("cold" if r["cold"] else "warm") + (" preload" if r.get("preload") else "")
            + (f" job {r['job_index']}" if r.get("job_index", 1) > 1 else ""))


def medians(records: list[dict]) -> None:
    """Each arm's per-run first_update_s and actors_ready_s, and their medians."""
    import statistics

    for name in dict.fromkeys(arm(r) for r in records):
        runs = [r for r in records if arm(r) == name]
        for key in ("driver_exec_s", "learner_torch_s", "actors_ready_s", "first_update_s"):
            values = [r[key] for r in runs if r[key] is not None]
            if values:
                console.print(f"{name} {key}: {values} median {statistics.median(values):.2f}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default="configs/demo.yaml")
    p.add_argument("--modes", default="cold,warm", help="cold, warm or both, in that order")
    p.add_argument("--seconds", type=float, default=None, help="the job's run.max_seconds")
    p.add_argument("--until-eval", action="store_true", help="stop each job after its first evaluation")
    p.add_argument("--repeat", type=int, default=1, help="runs of each mode (a fresh cluster each); "
                   "the medians are printed after the table")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--num-cpus", type=int, default=None, help="the bench cluster's CPUs (default all)")
    p.add_argument("--preload", choices=("on", "off", "both"), default="off",
                   help="Ray workers that import torch & co. as they start, as `herd up --preload` "
                        "starts them (on), bare as `herd up` (off), or each run of both, bare first")
    p.add_argument("--jobs", type=int, default=1, help="jobs one after another on each cluster")
    p.add_argument("--timeout", type=float, default=900)
    p.add_argument("--out", default=None)
    args = p.parse_args()
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if not modes or set(modes) - {"cold", "warm"}:
        raise SystemExit(f"--modes: cold and/or warm, got {args.modes!r}")
    info = header("Herd: start-up timeline, cold and warm")
    cfg = yaml.safe_load((ROOT / args.config).read_text() if not Path(args.config).is_file()
                         else Path(args.config).read_text())
    sets = list(args.set) + ([f"run.max_seconds={args.seconds}"] if args.seconds else [])
    try:  # as `herd submit --set` reads them: YAML values, dotted keys, one line for a bad item
        cfg = with_overrides(cfg, parse_sets(sets))
    except ConfigError as e:
        raise SystemExit(f"herd: {e}") from None
    base = Path(tempfile.mkdtemp(prefix="herd-bench-startup-"))
    cache = base / "compile-cache"  # cold fills it; warm (after cold) reads it
    records = []
    try:
        preloads = {"on": [True], "off": [False], "both": [False, True]}[args.preload]
        runs = [(m, pre) for m in modes for _ in range(args.repeat) for pre in preloads]
        for i, (mode, preload) in enumerate(runs):
            work = base / f"{mode[0]}{i}"  # short: Ray's socket paths under it must fit 107 bytes
            work.mkdir()
            cfg_path = work / "job.yaml"
            cfg_path.write_text(yaml.safe_dump(cfg, sort_keys=False))
            if mode == "cold":
                shutil.rmtree(cache, ignore_errors=True)
                cache.mkdir()
            extra = ({"TORCHINDUCTOR_CACHE_DIR": str(cache), "TRITON_CACHE_DIR": str(cache / "triton")}
                     if mode == "cold" or "cold" in modes else {})
            console.print(f"[bold]{mode}[/]{' preload' if preload else ''}: compile cache "
                          f"{extra.get('TORCHINDUCTOR_CACHE_DIR', 'the default (yours)')}")
            probe = cpu_probe()
            io0 = io_now()
            cluster = Cluster(work, args.num_cpus, extra, preload)
            io = io_since(io0, "up_")
            io0 = io_now()
            try:
                for j in range(1, args.jobs + 1):
                    summary = run_one(cfg_path, work, cluster, args.timeout, args.until_eval)
                    records.append(record(summary, mode == "cold" and j == 1, info, args.config, preload,
                                          cluster.preload_wait_s, {**io, **io_since(io0)}, probe, j))
                    io, io0 = {}, io_now()
            finally:
                cluster.close()
    finally:
        shutil.rmtree(base, ignore_errors=True)
    table(records)
    if args.repeat > 1 or args.preload == "both" or args.jobs > 1:
        medians(records)
    path = result_path("startup", args.out, quick=False)
    save(records, path)
    console.print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
