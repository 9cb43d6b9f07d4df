"""The box's load while a benchmark runs, machine-wide: bytes read from disk, seconds some task
stalled on I/O or on a CPU, CPU seconds a hypervisor stole, seconds a CPU quota held this
container back (io_now / io_since), and a fixed single-thread loop's time (cpu_probe: the box's
CPU speed right now). bench/startup.py and bench/humanoid.py put them in their records."""

from __future__ import annotations

import os
import time


def io_now() -> dict[str, float]:
    """Machine-wide counters, to tell a run that waited on first reads of the box's files from
    one that waited on CPUs: MB read from block devices (not loop/ram/zram), and the seconds
    some task stalled on I/O and on CPU (/proc/pressure, where the kernel has it), and the CPU
    seconds a hypervisor stole from this machine (/proc/stat's steal, summed over its CPUs) and
    the seconds this container's cgroup was held back by its CPU quota."""
    out: dict[str, float] = {}
    try:
        with open("/proc/stat") as f:
            cpu = f.readline().split()  # cpu user nice system idle iowait irq softirq steal ...
        out["cpu_steal_s"] = int(cpu[8]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        pass
    throttled = cgroup_throttled_s()
    if throttled is not None:
        out["cpu_throttled_s"] = throttled
    try:
        disks = {d for d in os.listdir("/sys/block") if not d.startswith(("loop", "ram", "zram"))}
        with open("/proc/diskstats") as f:
            sectors = sum(int(x[5]) for x in (ln.split() for ln in f) if x[2] in disks)
        out["disk_read_mb"] = sectors * 512 / 1e6
    except (OSError, ValueError, IndexError):
        pass
    for what in ("io", "cpu"):
        try:
            with open(f"/proc/pressure/{what}") as f:
                some = f.readline().split()
            out[f"{what}_pressure_s"] = int(some[-1].split("=")[1]) / 1e6
        except (OSError, ValueError, IndexError):
            pass
    return out


def io_since(before: dict[str, float], prefix: str = "") -> dict[str, float | None]:
    after = io_now()
    return {prefix + k: (round(after[k] - before[k], 1) if k in after and k in before else None)
            for k in ("disk_read_mb", "io_pressure_s", "cpu_pressure_s", "cpu_steal_s", "cpu_throttled_s")}


def cgroup_throttled_s() -> float | None:
    """Seconds this process's cgroup was throttled by a CPU quota (cgroup v2 throttled_usec, v1
    throttled_time); None where there is no such file (no quota controller)."""
    for path, key, unit in (("/sys/fs/cgroup/cpu.stat", "throttled_usec", 1e6),
                            ("/sys/fs/cgroup/cpu/cpu.stat", "throttled_time", 1e9),
                            ("/sys/fs/cgroup/cpu,cpuacct/cpu.stat", "throttled_time", 1e9)):
        try:
            with open(path) as f:
                for ln in f:
                    name, _, value = ln.partition(" ")
                    if name == key:
                        return int(value) / unit
        except (OSError, ValueError):
            continue
    return None


def cpu_probe(n: int = 3_000_000) -> float:
    """Seconds for a fixed single-thread Python loop, best of 3: the box's CPU speed right now
    (boxes of one kind differed ~2x from call to call in the learner's init and compile)."""
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        x = 0
        for i in range(n):
            x += i & 7
        best = min(best, time.perf_counter() - t0)
    return round(best, 3)
