"""local.wait_preloaded: when `herd up --preload` returns (unit test: files written by threads
stand in for the workers, which tests/cluster/test_local_up.py starts for real)."""

from __future__ import annotations

import threading
import time

from herd.local import wait_preloaded


def later(delay: float, path) -> threading.Timer:
    t = threading.Timer(delay, path.touch)
    t.start()
    return t


def test_it_returns_once_every_worker_that_began_has_ended(tmp_path):
    timers = [later(0.2, tmp_path / "1.start"), later(0.3, tmp_path / "2.start"),
              later(0.6, tmp_path / "1.done"), later(1.0, tmp_path / "2.done")]
    t0 = time.monotonic()
    assert wait_preloaded(tmp_path, timeout=10, settle=0.3)
    took = time.monotonic() - t0
    assert 1.3 <= took < 3, took  # the last done at 1.0 s, then 0.3 s without a new start
    for t in timers:
        t.join()


def test_a_worker_that_begins_while_it_settles_is_waited_for(tmp_path):
    timers = [later(0.0, tmp_path / "1.start"), later(0.2, tmp_path / "1.done"),
              later(0.5, tmp_path / "2.start"), later(1.5, tmp_path / "2.done")]
    t0 = time.monotonic()
    assert wait_preloaded(tmp_path, timeout=10, settle=0.6)
    assert time.monotonic() - t0 >= 2.0
    for t in timers:
        t.join()


def test_it_gives_up_when_nothing_begins_or_a_worker_never_ends(tmp_path):
    t0 = time.monotonic()
    assert not wait_preloaded(tmp_path, timeout=30, first_s=0.5)
    assert time.monotonic() - t0 < 2
    (tmp_path / "7.start").touch()
    t0 = time.monotonic()
    assert not wait_preloaded(tmp_path, timeout=1.0, first_s=0.2)
    assert 1.0 <= time.monotonic() - t0 < 2


def test_preload_is_on_by_default_only_where_a_gpu_shows(tmp_path, monkeypatch):
    from herd.local import preload_default

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    dev, proc = tmp_path / "dev", tmp_path / "gpus"
    dev.mkdir()
    (dev / "nvidiactl").touch()  # the driver's control node alone is not a GPU
    assert not preload_default(dev, proc)
    proc.mkdir()
    assert not preload_default(dev, proc)
    (proc / "0000:18:00.0").mkdir()  # the driver lists a GPU
    assert preload_default(dev, proc)
    (proc / "0000:18:00.0").rmdir()
    (dev / "nvidia0").touch()
    assert preload_default(dev, proc)
    for hidden in ("", "-1"):
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", hidden)
        assert not preload_default(dev, proc)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    assert preload_default(dev, proc)
