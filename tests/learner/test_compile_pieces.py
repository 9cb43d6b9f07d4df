"""learner.compile_pieces: torch.compile takes only the frames it names, the rest stay eager."""

from __future__ import annotations

import pytest
import torch
from pydantic import ValidationError

from herd.learner.config import LearnerConfig
from herd.learner.sac import SAC
from tests.learner.test_graph_swap import make


def compiled_by(monkeypatch, cfg: LearnerConfig, only=None) -> list[str]:
    """The functions SAC.compile hands to torch.compile (the one component under test: its
    choice of frames), by name."""
    seen = []

    def fake_compile(fn, **kw):
        seen.append(fn.__name__)
        return fn

    monkeypatch.setattr(torch, "compile", fake_compile)
    SAC(cfg, 3, 1, [-1.0], [1.0], torch.device("cpu")).compile(cfg.compile_mode, only)
    return seen


def test_all_frames_by_default_and_only_the_named_ones_otherwise(monkeypatch):
    every = [p + "_eager" for p in SAC.PIECES] + ["adam_flat_", "adam_flat_"]
    assert compiled_by(monkeypatch, LearnerConfig(compile=True, hidden_sizes=(8, 8))) == every
    cfg = LearnerConfig(compile=True, hidden_sizes=(8, 8), compile_pieces=["critic_loss", "adams"])
    assert compiled_by(monkeypatch, cfg) == ["_critic_loss_eager", "adam_flat_", "adam_flat_"]
    # a compile process's share (learner/compile_proc.py) is taken among the named ones
    assert compiled_by(monkeypatch, cfg, only=("_critic_out", "_critic_loss")) == ["_critic_loss_eager"]
    assert compiled_by(monkeypatch, LearnerConfig(compile=True, compile_pieces=[])) == []


def test_the_config_names_every_frame_sac_compiles():
    """learner/config.py spells the frames (it imports no torch); SAC.PIECES is what compiles."""
    import typing

    field = LearnerConfig.model_fields["compile_pieces"].annotation
    (names,) = {typing.get_args(typing.get_args(a)[0]) for a in typing.get_args(field) if a is not type(None)}
    assert set(names) == {p.removeprefix("_") for p in SAC.PIECES} | {SAC.ADAMS}


def test_an_unknown_piece_is_refused_by_name():
    with pytest.raises(ValidationError, match="compile_pieces"):
        LearnerConfig(compile_pieces=["critic"])


def test_a_partly_compiled_update_makes_the_eager_updates_numbers():
    """Real inductor (its C++ backend on this CPU): the inputs' normalization compiled, every
    other frame eager, three updates give the eager SAC's weights."""
    torch._dynamo.reset()
    graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"]  # reset() keeps the counters
    eager, buf = make(obs_norm=True, reward_norm=True)
    part, _ = make(obs_norm=True, reward_norm=True, compile=True, compile_pieces=["inputs"])
    part.compile("default")
    assert part._critic_loss == part._critic_loss_eager and part._inputs != part._inputs_eager
    for sac in (eager, part):
        torch.manual_seed(0)
        for _ in range(3):
            sac.update(buf)
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == graphs + 1  # the one frame
    for a, b in zip(eager.state_tensors(), part.state_tensors()):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
