"""learner/graph/thread_cpu.py: CPU seconds per named thread, read from /proc (real threads)."""

import threading
import time
from pathlib import Path

import pytest

from herd.learner.graph.thread_cpu import cpu_by_thread, thread_cpu

pytestmark = pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="Linux /proc only")


def spin(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_a_busy_thread_shows_by_name_and_an_idle_one_does_not():
    before = thread_cpu()
    assert threading.current_thread().name in {name for name, _ in before.values()}
    busy = threading.Thread(target=spin, args=(0.3,), name="herd-busy")
    idle = threading.Thread(target=time.sleep, args=(0.3,), name="herd-idle")
    busy.start(), idle.start()
    spin(0.05)
    while_running = cpu_by_thread(before)  # both still alive: a thread that ended is not counted
    busy.join(), idle.join()
    assert 0.0 < while_running.get("herd-busy", 0.0) <= 0.35, while_running
    assert "herd-idle" not in while_running, while_running


def test_the_largest_come_first_and_the_rest_are_summed_as_others():
    before = thread_cpu()
    stop = threading.Event()

    def work(s):
        spin(s)
        stop.wait()

    threads = [threading.Thread(target=work, args=(0.05 * (i + 1),), name=f"herd-w{i}") for i in range(4)]
    for t in threads:
        t.start()
    time.sleep(0.6)
    try:
        got = cpu_by_thread(before, top=2)
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert list(got)[:2] == ["herd-w3", "herd-w2"], got
    assert got["others"] >= 0.03 and len(got) == 3, got
