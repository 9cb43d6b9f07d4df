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


OLD_PIXEL_KEYS = {"pixel_lr": 1e-3, "pixel_batch_size": 64, "pixel_tau": 0.01,
                  "pixel_init_alpha": 0.01, "pixel_hidden_sizes": [128, 128]}
"""A saved pixel run's encoder section before a pixel job read learner.algorithm's keys."""


def test_a_pixel_key_of_the_encoder_is_refused_naming_where_it_lives_now() -> None:
    with pytest.raises(ValidationError) as e:
        LearnerConfig(encoder={"pixel_lr": 1e-3, "channels": 16})
    (err,) = e.value.errors()
    assert err["type"] == "moved"
    assert err["msg"] == "learner.encoder.pixel_lr: moved to learner.algorithm.critic_lr, actor_lr and alpha_lr"
    with pytest.raises(ValidationError, match=r"learner.encoder.pixel_batch_size: moved to "
                                              r"learner.replay.batch_size \(and 1 more\)"):
        LearnerConfig(encoder={"pixel_batch_size": 64, "pixel_tau": 0.01})


def test_a_job_config_with_a_moved_pixel_key_is_refused_in_one_line(tmp_path) -> None:
    from herd.config import ConfigError, load_config

    path = tmp_path / "old.yaml"
    path.write_text("env: {id: InvertedPendulum-v5, pixels: {size: 32}}\n"
                    "learner: {encoder: {pixel_init_alpha: 0.01}}\n")
    with pytest.raises(ConfigError) as e:
        load_config(path)
    assert str(e.value) == f"{path}: learner.encoder.pixel_init_alpha: moved to learner.algorithm.init_alpha"
    with pytest.raises(ConfigError) as e:
        load_config(tmp_path / "old.yaml", sets=["learner.encoder.pixel_tau=0.02"])
    assert "\n" not in str(e.value) and "--set learner.encoder.pixel_tau=0.02" in str(e.value)


def test_a_pixel_job_refuses_a_key_its_update_ignores_in_one_line() -> None:
    """Every state-update key that the pixel update never reads, set: refused, naming why."""
    from herd.learner.update.pixel_sac import IGNORED, refuse_ignored

    refuse_ignored(LearnerConfig())  # the defaults pass
    refuse_ignored(LearnerConfig.flat(hidden_sizes=(64,), actor_lr=1e-3, tau=0.01, init_alpha=0.1,
                                      batch_size=64))  # what it reads passes
    with pytest.raises(ValueError) as e:
        refuse_ignored(LearnerConfig.flat(critic_loss="c51"))
    assert str(e.value) == ("learner.algorithm.critic_loss: a pixel job's update ignores it (its "
                            "critics regress one value (mse)); leave it at its default")
    changed = {"actor_arch": "residual", "actor_width": 64, "actor_blocks": 2, "critic_arch": "residual",
               "critic_width": 64, "critic_blocks": 3, "expansion": 4, "critic_loss": "c51",
               "num_atoms": 51, "v_min": -10.0, "v_max": 10.0, "obs_norm": True, "obs_clip": 5.0,
               "reward_norm": True, "norm_horizon": 1000, "actor_ema": 0.01,
               "actor_weight_decay": 0.1, "critic_weight_decay": 0.1, "simultaneous": False,
               "dtype": "bfloat16"}
    assert {f"{SECTION_OF[k]}.{k}" for k in changed} == set(IGNORED)
    for key, value in changed.items():
        with pytest.raises(ValueError, match=rf"^learner.{SECTION_OF[key]}.{key}: a pixel job's "
                                             r"update ignores it \([^\n]+\); leave it at its default$"):
            refuse_ignored(LearnerConfig.flat(**{key: value}))


def test_a_saved_pixel_run_with_the_encoders_old_keys_is_migrated() -> None:
    """A pixel run's encoder.pixel_* become the algorithm and replay keys it reads now; a state
    run's (its dump held the encoder's defaults) are dropped."""
    saved = LearnerConfig.flat(n_step=3, channels=16).model_dump()
    saved["encoder"].update(OLD_PIXEL_KEYS)
    pixel = LearnerConfig.from_saved(saved, pixels=True, device="cpu")
    a = pixel.algorithm
    assert ((a.actor_lr, a.critic_lr, a.alpha_lr, a.tau, a.init_alpha, a.hidden_sizes,
             pixel.replay.batch_size, a.n_step, pixel.encoder.channels, pixel.compute.device) ==
            (1e-3, 1e-3, 1e-3, 0.01, 0.01, (128, 128), 64, 3, 16, "cpu"))
    state = LearnerConfig.from_saved(saved)
    assert state == LearnerConfig.flat(n_step=3, channels=16)
