"""learner/config.py: one frozen model per component, every field documented, field names unique
across the sections; the flat layout refused by name, and still read from checkpoints."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from pydantic import ValidationError

from herd.learner.config import MOVED, SECTION_OF, LearnerConfig

SOURCE = Path(__file__).resolve().parents[2] / "learner" / "config.py"


def test_every_field_of_every_section_has_a_docstring() -> None:
    tree = ast.parse(SOURCE.read_text())
    missing = []
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
        body = cls.body
        for i, node in enumerate(body):
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                after = body[i + 1] if i + 1 < len(body) else None
                documented = (isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
                              and isinstance(after.value.value, str))
                if not documented and node.target.id != "model_config":
                    missing.append(f"{cls.name}.{node.target.id}")
    assert missing == []


def test_sections_are_frozen_and_their_field_names_unique() -> None:
    sections = LearnerConfig.model_fields
    assert list(sections) == ["algorithm", "encoder", "replay", "compute", "server", "placement"]
    names = [n for s in sections.values() for n in s.annotation.model_fields]
    assert len(names) == len(set(names)) == len(SECTION_OF)
    cfg = LearnerConfig()
    with pytest.raises(ValidationError):
        cfg.replay.batch_size = 3
    # every key of the flat layout points at a field that exists
    assert all(SECTION_OF[to.split(".")[1]] == to.split(".")[0] for to in MOVED.values())


def test_flat_puts_each_field_in_its_section() -> None:
    cfg = LearnerConfig.flat(batch_size=32, device="cpu", host="0.0.0.0", num_cpus=2, tau=0.01)
    assert (cfg.replay.batch_size, cfg.compute.device, cfg.server.host, cfg.placement.num_cpus,
            cfg.algorithm.tau) == (32, "cpu", "0.0.0.0", 2, 0.01)
    with pytest.raises(TypeError, match="no field 'batch_sise'"):
        LearnerConfig.flat(batch_sise=32)


def test_a_flat_key_is_refused_naming_where_it_lives_now() -> None:
    with pytest.raises(ValidationError) as e:
        LearnerConfig(buffer_capacity=10_000)
    (err,) = e.value.errors()
    assert err["type"] == "moved"
    assert err["msg"] == "learner.buffer_capacity: moved to learner.replay.capacity"


def test_a_saved_config_of_either_layout_reads_back() -> None:
    cfg = LearnerConfig.flat(batch_size=32, hidden_sizes=(16, 16), amp="bf16", token="t")
    assert LearnerConfig.from_saved(cfg.model_dump()) == cfg
    flat = {"batch_size": 32, "hidden_sizes": [16, 16], "amp": "bf16", "buffer_capacity": 5_000,
            "compile_process": True, "cuda_early": False}  # two keys no section knows any more
    old = LearnerConfig.from_saved(flat, device="cpu")
    assert (old.replay.batch_size, old.replay.capacity, old.algorithm.hidden_sizes, old.compute.amp,
            old.compute.device) == (32, 5_000, (16, 16), "bf16", "cpu")
