"""One place chooses the update and the ring for an env (learner/build.py): every caller gets
the pixel update for a pixel config (the Learner, checkpoint loading, precompile's small update,
the graph's twin), no other module constructs an update, and precompile fills the compile cache
(a second compile of the same update is much faster)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import torch

from herd.learner.build import build_ring, build_update, precompile, small_update
from herd.learner.checkpoint import saved_policy
from herd.learner.config import LearnerConfig
from herd.learner.replay.frames import FrameReplay
from herd.learner.replay.ring import ReplayBuffer
from herd.learner.update.pixel_sac import PixelSAC
from herd.learner.update.pixel_teacher import TeacherPixelSAC
from herd.learner.update.sac import SAC
from herd.proto import codec
from tests.pixels import DRQ_STEPS

cuda = pytest.mark.cuda
ROOT = Path(__file__).resolve().parents[2]
UPDATES = {"SAC", "PixelSAC", "TeacherPixelSAC"}
STATE = codec.spec_to_proto("toy", (5,), "float32", (2,), [-1, -1], [1, 1])
PIXELS = codec.spec_to_proto("toy", (3, 16, 16), "uint8", (2,), [-1, -1], [1, 1], frame_stack=3,
                             state_dim=4)


def pixel_cfg(**kw) -> LearnerConfig:
    return LearnerConfig.flat(device="cpu", capacity=1_000, feature_dim=8, channels=4,
                              hidden_sizes=(16,), batch_size=6, **DRQ_STEPS, **kw)


def test_every_caller_gets_the_pixel_update_for_a_pixel_config() -> None:
    cpu = torch.device("cpu")
    update = build_update(pixel_cfg(), PIXELS, cpu)
    assert type(update) is PixelSAC
    assert type(build_update(pixel_cfg(privileged_critic=True, privileged_teacher=True), PIXELS,
                             cpu)) is TeacherPixelSAC
    assert type(build_update(LearnerConfig.flat(device="cpu", hidden_sizes=(8,)), STATE, cpu)) is SAC
    small, ring = small_update(pixel_cfg(), PIXELS, cpu)  # herd precompile's
    assert type(small) is PixelSAC and isinstance(ring, FrameReplay)
    assert isinstance(build_ring(LearnerConfig.flat(capacity=1_000), STATE, cpu)[0], ReplayBuffer)
    twin = update.twin()  # the graph's background compile
    assert type(twin) is PixelSAC and twin is not update
    with pytest.raises(ValueError, match=r"^learner.algorithm.critic_loss: a pixel job's update "
                                         r"ignores it .*; leave it at its default$"):
        build_update(pixel_cfg(critic_loss="c51"), PIXELS, cpu)  # the learner's start says so
    build_update(pixel_cfg(critic_loss="c51"), STATE, cpu)  # a state job's update reads it
    # checkpoint loading (herd evaluate, herd export): the policy of the saved pixel update
    model = {"sac": update.state_dict(), "config": pixel_cfg().model_dump(), "policy_version": 3}
    weights = saved_policy(model, PIXELS)
    assert weights.arch == "conv" and weights.version == 3


def test_the_learner_builds_through_the_factory(monkeypatch) -> None:
    """The Learner's update is what build_update returns (it calls nothing else)."""
    from herd.learner import learner

    built = []
    real = learner.build_update
    monkeypatch.setattr(learner, "build_update", lambda *a: built.append(real(*a)) or built[-1])
    lrn = learner.Learner(pixel_cfg(min_size=32, ingest_process="off"), PIXELS)
    try:
        assert len(built) == 1 and lrn.sac is built[0] and type(lrn.sac) is PixelSAC
        assert isinstance(lrn.buffer, FrameReplay)
    finally:
        lrn.stop()


def constructions(path: Path) -> list[str]:
    """Calls of an update class outside that class's own definition."""
    found = []

    def visit(node: ast.AST, inside: str | None) -> None:
        if isinstance(node, ast.ClassDef):
            inside = node.name
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in UPDATES and node.func.id != inside):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.func.id}()")
        for child in ast.iter_child_nodes(node):
            visit(child, inside)

    visit(ast.parse(path.read_text()), None)
    return found


def test_updates_are_constructed_in_the_factory_only() -> None:
    """Outside learner/build.py (tests apart) no module calls an update class, and none probes
    an update for a twin."""
    found, probes = [], []
    for folder in ("learner", "cluster", "actors", "bench"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path != ROOT / "learner" / "build.py":
                found += constructions(path)
            if re.search(r"hasattr\([^)]*[\"']twin[\"']", path.read_text()):
                probes.append(str(path.relative_to(ROOT)))
    assert found == [] and probes == []


def test_precompile_is_a_no_op_on_the_cpu() -> None:
    cfg = LearnerConfig.flat(device="cpu", compile=True, hidden_sizes=(16, 16), capacity=1000)
    assert precompile(cfg, STATE, torch.device("cpu")) == 0.0


@cuda
def test_second_compile_hits_the_cache(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))  # start cold
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    cfg = LearnerConfig.flat(device="cuda", compile=True, amp="bf16", hidden_sizes=(64, 64),
                             batch_size=128, capacity=1000, updates_per_call=2)
    spec = codec.spec_to_proto("toy", (11,), "float32", (3,), [-1] * 3, [1] * 3)
    first = precompile(cfg, spec, torch.device("cuda"))
    torch._dynamo.reset()  # forget the in-memory compiled code: only the disk cache is left
    second = precompile(cfg, spec, torch.device("cuda"))
    print(f"precompile cold {first:.1f}s, warm {second:.1f}s")
    assert second < 0.6 * first
