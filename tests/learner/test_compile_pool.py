"""learner/graphed.py warm_compile_pool (`learner.compile_pool_early`): inductor's worker pool
is started only where the learner's compile will run (CUDA, compile, graph, the flag), and a
pool that will not start is a log line, not the learner's death. torch's hook is faked (a unit
test of one component): the real pool starts on the GPU box (bench/gpu/child.sh ARMS=pool)."""

from __future__ import annotations

import logging

import pytest
from torch._inductor import async_compile

from herd.learner.config import LearnerConfig
from herd.learner.graphed import warm_compile_pool


@pytest.fixture
def starts(monkeypatch):
    calls = []
    monkeypatch.setattr(async_compile, "maybe_warm_pool", lambda: calls.append(1))
    return calls


def test_it_starts_the_pool_only_where_the_compile_runs(starts) -> None:
    on = dict(compile=True, cuda_graph=True, compile_pool_early=True)
    assert warm_compile_pool(LearnerConfig(**on), "cuda") and starts == [1]
    for off in ({"compile_pool_early": False}, {"compile": False}, {"cuda_graph": False}):
        assert not warm_compile_pool(LearnerConfig(**{**on, **off}), "cuda")
    assert not warm_compile_pool(LearnerConfig(**on), "cpu")
    assert starts == [1]
    assert not LearnerConfig().compile_pool_early  # off until measured


def test_a_pool_that_will_not_start_is_one_log_line(monkeypatch, caplog) -> None:
    def refuse():
        raise OSError("no more processes")

    monkeypatch.setattr(async_compile, "maybe_warm_pool", refuse)
    cfg = LearnerConfig(compile=True, cuda_graph=True, compile_pool_early=True)
    with caplog.at_level(logging.WARNING, logger="herd.learner"):
        assert not warm_compile_pool(cfg, "cuda")
    assert "compile pool did not start early (OSError: no more processes)" in caplog.text
