"""What every bench script shares: the machine's name, the header line, result files."""

from __future__ import annotations

import json
import os
import platform
import re
import shlex
import statistics
import sys
import time
from pathlib import Path

import torch
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

RESULTS = Path(__file__).resolve().parent / "results"
console = Console()


def machine_name() -> str:
    """The GPU's name (e.g. "NVIDIA H200"), or the CPU's when there is none."""
    if torch.cuda.is_available():
        return torch.cuda.get_device_name(0)
    return platform.processor() or platform.machine() or "cpu"


def slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "cpu"


def command() -> str:
    return "python " + shlex.join([os.path.relpath(sys.argv[0])] + sys.argv[1:])


def header(title: str) -> dict:
    """Print and return the date, machine, torch version, cores and the command line."""
    info = dict(date=time.strftime("%Y-%m-%d", time.gmtime()), machine=machine_name(),
                torch=torch.__version__, cores=os.cpu_count(), command=command(), **cpu_topology())
    cpu = ", ".join(f"{k} {v}" for k, v in info.items() if k in ("cpu_model", "threads_per_core",
                                                                  "l2_cache", "l3_cache"))
    console.print(f"[bold]{title}[/]  {info['machine']}  torch {info['torch']}  "
                  f"cores {info['cores']} ({cpu})\n  $ {info['command']}")
    return info


def read_stat(path: str) -> tuple[str, list[str]]:
    """(name, fields after the name) of a /proc/<pid>/stat or /proc/<pid>/task/<tid>/stat."""
    with open(path) as f:
        head, rest = f.read().rsplit(")", 1)
    return head.split("(", 1)[1], rest.split()


def stat_cpu_s(fields: list[str]) -> float:
    """User + system CPU seconds from read_stat's fields."""
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process `pid`, every thread (from /proc)."""
    return stat_cpu_s(read_stat(f"/proc/{pid}/stat")[1])


def proc_faults(pid: int) -> int:
    """Minor page faults of process `pid` so far (from /proc): each a fresh page the kernel had
    to map and zero, a cost that grows on virtual machines."""
    return int(read_stat(f"/proc/{pid}/stat")[1][7])


def _box_ticks() -> list[int]:
    """The whole machine's CPU ticks by kind: /proc/stat's first line."""
    with open("/proc/stat") as f:
        return [int(x) for x in f.readline().split()[1:]]


def box_steal_s() -> float:
    """CPU seconds the hypervisor gave this VM's cores to others (steal, from /proc/stat)."""
    ticks = _box_ticks()
    return (ticks[7] if len(ticks) > 7 else 0) / os.sysconf("SC_CLK_TCK")


def cpu_topology() -> dict:
    """CPU model, hardware threads per core and cache sizes, as far as Linux tells them."""
    out: dict = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    out["cpu_model"] = line.split(":", 1)[1].strip()
                    break
        with open("/sys/devices/system/cpu/cpu0/topology/thread_siblings_list") as f:
            sib = f.read().strip()
        out["threads_per_core"] = sum(
            (int(b) - int(a) + 1) if "-" in part else 1
            for part in sib.split(",") for a, _, b in [part.partition("-")])
        for idx in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
            level, kind = (idx / "level").read_text().strip(), (idx / "type").read_text().strip()
            if kind != "Instruction":
                out[f"l{level}_cache"] = (idx / "size").read_text().strip()
    except OSError:
        pass
    return out


def box_busy_s() -> float:
    """CPU seconds the whole machine has spent not idle (all cores, from /proc/stat)."""
    ticks = _box_ticks()
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)  # idle + iowait
    return (sum(ticks[:8]) - idle) / os.sysconf("SC_CLK_TCK")  # without guest time (in user)


def private_ray_auth() -> None:
    """Before a bench's own ray.init(address="local"): token auth with a token of this process
    alone, unless the caller chose (RAY_AUTH_MODE / RAY_AUTH_TOKEN[_PATH] set). Without it Ray
    writes ~/.ray/auth_token, which turns token auth on for the user's later clusters."""
    import atexit
    import secrets
    import tempfile

    if any(os.environ.get(k) for k in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")):
        return
    fd, path = tempfile.mkstemp(prefix="herd-bench-ray-token-")  # 0600
    os.write(fd, secrets.token_hex(32).encode())
    os.close(fd)
    atexit.register(lambda: os.path.exists(path) and os.unlink(path))
    os.environ.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=path)


def ray_runtime_env() -> dict:
    """Ray workers import this checkout and whatever this process has on PYTHONPATH (the GPU
    box's wheel folder): a PYTHONPATH of the root alone leaves them without Ray's own deps."""
    root = str(Path(__file__).resolve().parent.parent)
    paths = [root] + [os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return {"env_vars": {"PYTHONPATH": os.pathsep.join(dict.fromkeys(paths))}}


def result_path(kind: str, out: str | None, quick: bool, ext: str = "json") -> Path:
    """bench/results/<kind>-<machine>.<ext>; quick runs go to /tmp so they never overwrite."""
    if out:
        return Path(out).with_suffix("." + ext)
    base = Path("/tmp/herd-bench") if quick else RESULTS
    base.mkdir(parents=True, exist_ok=True)
    return base / f"{kind}-{slug(machine_name())}.{ext}"


def submitted_job(stdout: str) -> str:
    """The job id `herd submit` printed ('submitted <job> ...')."""
    return next(line.split()[1] for line in stdout.splitlines() if line.startswith("submitted"))


def save(records: list[dict], path: Path) -> None:
    path.write_text(json.dumps(records, indent=1) + "\n")


def write_results(kind: str, records: list[dict], out: str | None, quick: bool = False) -> Path:
    """`records` saved where result_path puts them, and a line saying where."""
    path = result_path(kind, out, quick)
    save(records, path)
    console.print(f"wrote {path}")
    return path


def median_seconds(fn, n: int, repeats: int, clock=time.perf_counter) -> float:
    """Seconds per call of `fn()` by `clock`: one call to warm up, then the median of `repeats`
    timings of `n` calls each."""
    fn()
    runs = []
    for _ in range(repeats):
        t0 = clock()
        for _ in range(n):
            fn()
        runs.append((clock() - t0) / n)
    return statistics.median(runs)


def timing_flags(ap, n: int) -> None:
    """A micro-benchmark's --n (calls per timing), --repeats and --out."""
    ap.add_argument("--n", type=int, default=n, help="calls per timing")
    ap.add_argument("--repeats", type=int, default=5, help="timings; the median is reported")
    ap.add_argument("--out", default=None)


def save_figure(fig, path: Path, title: str):
    """`fig` titled, laid out and written to `path` (PNG, 110 dpi); returned."""
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return fig


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed_calls(step, seconds: float, device: torch.device, max_chunk: int):
    """Calls `step()` for `seconds`, in chunks that double up to `max_chunk` (the host never
    waits per call), the device synced after each chunk: (calls, seconds taken, CPU seconds of
    this thread, the last call's output)."""
    calls, elapsed, chunk = 0, 0.0, 1
    t0, cpu0 = time.perf_counter(), time.thread_time()
    out = None
    while elapsed < seconds:
        for _ in range(chunk):
            out = step()
        sync(device)
        calls += chunk
        elapsed = time.perf_counter() - t0
        chunk = min(chunk * 2, max_chunk)
    return calls, elapsed, time.thread_time() - cpu0, out


def progress() -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                    TimeElapsedColumn(), console=console)


def learner_sets(items: list[str]) -> dict:
    """--set FIELD=VALUE items as learner settings, read as `herd submit --set` reads its items
    (herd.config.parse_sets: YAML values); a bad item or an unknown field is one line."""
    from herd.config import ConfigError, parse_sets
    from herd.learner.config import SECTION_OF

    try:
        out = parse_sets(items)
    except ConfigError as e:
        raise SystemExit(str(e)) from None
    for key in out:
        if key not in SECTION_OF:
            raise SystemExit(f"--set {key}: expected FIELD=VALUE with a learner field")
    return out


def learner_from(config: str | Path, **overrides):
    """A LearnerConfig from a job config's `learner:` section (e.g. configs/humanoid.yaml) with
    `overrides` (field names: batch_size=, device=) on top."""
    import yaml

    from herd.learner.config import LearnerConfig

    path = Path(config)
    if not path.is_absolute():
        path = RESULTS.parent.parent / path
    base = yaml.safe_load(path.read_text()).get("learner", {}) if path.exists() else {}
    return LearnerConfig.from_saved(base, **overrides)
