"""learner.compute.compile_options: torch.compile's `options` for every compiled frame, checked first."""

from __future__ import annotations

import pytest
import torch
from pydantic import ValidationError

from herd.learner.config import LearnerConfig
from herd.learner.learner import Learner
from herd.learner.update.sac import SAC, compile_kwargs

FAST = {"triton.autotune_pointwise": False}


def test_options_or_the_mode_never_both():
    assert compile_kwargs("default", {}) == {"mode": "default"}
    assert compile_kwargs("max-autotune-no-cudagraphs", {}) == {"mode": "max-autotune-no-cudagraphs"}
    assert compile_kwargs("default", FAST) == {"options": FAST}
    with pytest.raises(ValueError, match="compile_mode 'default'"):
        compile_kwargs("max-autotune-no-cudagraphs", FAST)
    with pytest.raises(ValidationError, match="compile_mode 'default'"):
        LearnerConfig.flat(compile_options=FAST, compile_mode="max-autotune-no-cudagraphs")


def test_an_unknown_setting_is_named_in_one_line():
    with pytest.raises(ValueError, match="no setting 'triton.autotune_pointwize'") as e:
        compile_kwargs("default", {"triton.autotune_pointwize": False})
    assert "\n" not in str(e.value)


def test_every_frame_and_both_adams_compile_with_the_options(monkeypatch):
    seen = []

    def fake_compile(fn, **kw):  # the one component under test is SAC.compile's wiring
        seen.append(kw)
        return fn

    monkeypatch.setattr(torch, "compile", fake_compile)
    cfg = LearnerConfig.flat(compile=True, compile_options=FAST, hidden_sizes=(8, 8))
    SAC(cfg.algorithm, cfg.compute, cfg.replay.batch_size, 3, 1, [-1.0], [1.0], torch.device("cpu")).compile(cfg.compute.compile_mode)
    assert len(seen) == len(SAC.PIECES) + 2 and all(kw == {"options": FAST} for kw in seen)


def test_the_learner_refuses_an_unknown_setting_before_it_serves(spec):
    cfg = LearnerConfig.flat(compile=True, compile_options={"no_such_thing": 1}, capacity=1_000,
                        min_size=1_000, batch_size=8, hidden_sizes=(8, 8))
    with pytest.raises(ValueError, match="no setting 'no_such_thing'"):
        Learner(cfg, spec)
