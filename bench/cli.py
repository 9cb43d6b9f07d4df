"""How fast the CLI answers about a running job: `herd status`, `list`, `scale` and `stop`,
each a fresh `python -m herd` process as a user runs it, timed from start to exit.

    python bench/cli.py                 # configs/demo.yaml on a local head of its own, 5 calls each

A Ray head of this run alone (bench/startup.py's Cluster: token auth, loopback, its own
HERD_HOME), one demo job; once its controller answers, each command runs --repeat times
(`scale` to the job's own actor count, so the job is left as it was), then one `herd stop`.
Writes bench/results/cli-<machine>.json: one flat record per command with every time, the
median, machine, cores, command.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import console, header, result_path, save, submitted_job
from bench.startup import Cluster

ROOT = Path(__file__).resolve().parent.parent


def herd(cluster: Cluster, *args: str) -> tuple[float, subprocess.CompletedProcess]:
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "herd", *args], cwd=ROOT, env=cluster.env,
                       capture_output=True, text=True, timeout=120, check=False)
    return time.perf_counter() - t0, r


def running_job(config: str, work: Path, tries: int = 2) -> tuple[Cluster, str]:
    """A head of its own and a submitted job. A head whose job agent never registers (herd
    submit retries for 90 s; seen once on the 2-core CI box, beside the suite's own clusters)
    is closed, its agent log's tail printed, and a fresh one started, `tries` times at most."""
    attempt = 1
    while True:
        home = work / f"head{attempt}"
        home.mkdir()
        cluster = Cluster(home, None, {})
        _, r = herd(cluster, "submit", config, "--runs-dir", str(work / "runs"))
        if not r.returncode:
            return cluster, submitted_job(r.stdout)
        logs = sorted(home.glob("ray/session_*/logs/dashboard_agent.log"))
        tail = logs[-1].read_text(errors="replace")[-1500:] if logs else "(no dashboard_agent.log)"
        cluster.close()
        if "No available agent" not in r.stderr or attempt == tries:
            raise SystemExit(f"herd submit failed: {r.stderr.strip()[-2000:]}\nagent log: {tail}")
        console.print(f"herd submit: no job agent on head {attempt}; its agent log ends:\n{tail}\n"
                      "starting a fresh head", markup=False)
        attempt += 1


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default="configs/demo.yaml")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--out", default=None)
    args = p.parse_args()
    info = header("Herd: CLI answers about a running job")
    path = result_path("cli", args.out, quick=False)
    with tempfile.TemporaryDirectory(prefix="herd-bench-cli-") as tmp:
        cluster, job = running_job(args.config, Path(tmp))
        try:
            deadline = time.monotonic() + 180
            while herd(cluster, "status", job)[1].returncode:  # until the controller answers
                if time.monotonic() > deadline:
                    raise SystemExit(f"{job}: no controller within 180 s")
                time.sleep(1)
            actors = str(yaml.safe_load((ROOT / args.config).read_text())["actors"]["num_actors"])
            calls = {"status": ["status", job], "list": ["list"], "scale": ["scale", job, "--actors", actors]}
            records = []
            for name, argv in [*calls.items(), ("stop", ["stop", job])]:
                times = []
                for _ in range(1 if name == "stop" else args.repeat):
                    s, r = herd(cluster, *argv)
                    if r.returncode:
                        raise SystemExit(f"herd {' '.join(argv)} exited {r.returncode}: {r.stderr.strip()}")
                    times.append(round(s, 3))
                med = statistics.median(times)
                console.print(f"herd {name}: median {med:.2f} s of {times}")
                records.append({"cli": name, "seconds": times, "median_s": med, "calls": len(times),
                                "config": args.config, **info})
            save(records, path)
            console.print(f"wrote {path}")
        finally:
            cluster.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
