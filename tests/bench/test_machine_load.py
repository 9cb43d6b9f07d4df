"""bench/machine_load.py: the machine-wide I/O and CPU stall counters (io_now / io_since) and the CPU probe."""

import contextlib
import os
import time
from pathlib import Path

import pytest

from bench.machine_load import cgroup_throttled_s, cpu_probe, io_now, io_since

needs_psi = pytest.mark.skipif(not Path("/proc/pressure/cpu").exists(), reason="no /proc/pressure")


def test_the_deltas_carry_the_flat_keys_and_never_go_negative():
    before = io_now()
    got = io_since(before, "up_")
    assert set(got) == {"up_disk_read_mb", "up_io_pressure_s", "up_cpu_pressure_s", "up_cpu_steal_s",
                        "up_cpu_throttled_s"}
    assert all(v is None or v >= 0 for v in got.values()), got


@contextlib.contextmanager
def spinning(per_core: int, seconds: float):
    """per_core processes per core spin for `seconds` (processes: threads would share one GIL);
    leaving the block waits for them."""
    pids = []
    for _ in range(per_core * (os.cpu_count() or 1)):
        pid = os.fork()
        if pid == 0:
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                pass
            os._exit(0)
        pids.append(pid)
    try:
        yield
    finally:
        for pid in pids:
            os.waitpid(pid, 0)


@needs_psi
def test_cpu_stall_seconds_grow_when_more_threads_spin_than_there_are_cores():
    before = io_now()
    with spinning(2, 1.5):
        pass
    assert io_since(before)["cpu_pressure_s"] > 0.3


def test_steal_seconds_are_read_from_proc_stat():
    assert io_now()["cpu_steal_s"] >= 0  # every Linux kernel has the column


def test_the_cpu_probe_is_slower_when_every_core_is_busy():
    idle = cpu_probe(1_000_000)
    with spinning(3, 2):
        busy = cpu_probe(1_000_000)
    assert busy > 1.5 * idle, (idle, busy)


def test_cgroup_throttling_is_read_where_the_quota_controller_shows():
    if not any(Path(p).exists() for p in ("/sys/fs/cgroup/cpu.stat", "/sys/fs/cgroup/cpu/cpu.stat",
                                           "/sys/fs/cgroup/cpu,cpuacct/cpu.stat")):
        assert cgroup_throttled_s() is None
    else:
        got = cgroup_throttled_s()
        assert got is None or got >= 0  # v2's cpu.stat lacks throttled_usec without the cpu controller
