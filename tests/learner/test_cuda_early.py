"""learner/cuda_early.py: the CUDA driver's calls, in order, for the learner's device; silent
where there is no driver (this box) or it refuses. The driver is faked (a unit test of one
component): the real one is exercised by every CUDA learner on the GPU box."""

from __future__ import annotations

import pytest

from herd.learner import cuda_early
from herd.learner.config import LearnerConfig
from herd.learner.service import Learner


class FakeDriver:
    def __init__(self, fail: str | None = None):
        self.calls, self.fail = [], fail

    def __getattr__(self, name):
        def call(*args):
            self.calls.append((name, args[1] if name == "cuDeviceGet" else None))
            return 100 if name == self.fail else 0
        return call


@pytest.mark.parametrize(("device", "index"), [("auto", 0), ("cuda", 0), ("cuda:3", 3)])
def test_the_context_is_the_learners_device(monkeypatch, device, index) -> None:
    drv = FakeDriver()
    monkeypatch.setattr(cuda_early.ctypes, "CDLL", lambda name: drv)
    cuda_early.open_context_early(device).join()
    assert drv.calls == [("cuInit", None), ("cuDeviceGet", index), ("cuDevicePrimaryCtxRetain", None)]


def test_a_refusal_stops_there(monkeypatch) -> None:
    drv = FakeDriver(fail="cuInit")
    monkeypatch.setattr(cuda_early.ctypes, "CDLL", lambda name: drv)
    assert cuda_early.open_context(0) is False and drv.calls == [("cuInit", None)]


def test_no_driver_no_error() -> None:
    assert cuda_early.open_context(0, lib_name="libcuda-not-here.so.1") is False


def test_the_cpu_learner_opens_nothing(spec) -> None:
    lrn = Learner(LearnerConfig(buffer_capacity=2_000, min_replay_size=200, batch_size=16,
                                hidden_sizes=(16, 16), ingest_process="off"), spec)
    try:
        assert lrn._cuda_init is None
        assert lrn.startup_unix["init"] <= lrn.startup_unix["torch"] <= lrn.startup_unix["device"]
    finally:
        lrn.stop()
