"""`herd evaluate CHECKPOINT`: the policy rebuilt from a checkpoint is the one the learner
published, episodes are deterministic, and an mp4 is written where offscreen rendering works."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from herd.proto import codec

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def checkpoint(make_learner, env_cfg, tmp_path):
    learner = make_learner(hidden_sizes=(32, 48))  # uneven widths: the padding is sliced right
    run_dir = tmp_path / "runs" / "herd-eval-job"
    learner.save(str(run_dir / "checkpoint"))
    (run_dir / "config.yaml").write_text(yaml.safe_dump({"env": env_cfg.model_dump(mode="json")}))
    return run_dir, learner.weights()


def test_weights_from_checkpoint_equal_the_published_ones(checkpoint, env_cfg):
    from herd.evaluation import resolve_checkpoint, weights_from_checkpoint

    run_dir, published = checkpoint
    ckpt = resolve_checkpoint(run_dir)
    assert ckpt == run_dir / "checkpoint"
    rebuilt = weights_from_checkpoint(ckpt, env_cfg)
    a, b = codec.unpack_weights(rebuilt), codec.unpack_weights(published)
    assert [n for n, _ in a] == [n for n, _ in b] and len(a) == 6
    for (_, x), (_, y) in zip(a, b):
        assert x.shape == y.shape and np.array_equal(x, y)
    assert (rebuilt.log_std_min, rebuilt.log_std_max) == (published.log_std_min, published.log_std_max)


def test_a_checkpoint_of_the_flat_config_layout_still_loads(checkpoint, env_cfg):
    """model.pt keeps its learner config; one saved before the config had sections (one flat
    mapping, its keys since renamed or removed) still rebuilds the same policy."""
    import torch

    from herd.evaluation import weights_from_checkpoint
    from herd.learner.config import MOVED

    run_dir, published = checkpoint
    path = run_dir / "checkpoint" / "model.pt"
    state = torch.load(path, weights_only=True)
    where = {to: old for old, to in MOVED.items()}
    flat = {where[f"{section}.{k}"]: v for section, part in state["config"].items()
            for k, v in part.items()
            if f"{section}.{k}" in where}  # keys that came after the flat layout (the encoder's) left out
    state["config"] = {**flat, "compile_process": False}  # a key no section knows any more
    torch.save(state, path)
    rebuilt = weights_from_checkpoint(run_dir / "checkpoint", env_cfg)
    assert rebuilt.SerializeToString() == published.SerializeToString()


def test_evaluate_checkpoint_is_deterministic(checkpoint):
    from herd.evaluation import evaluate_checkpoint

    run_dir, _ = checkpoint
    one = evaluate_checkpoint(run_dir, episodes=2)
    two = evaluate_checkpoint(run_dir / "checkpoint", episodes=2)
    assert one["env"] == "InvertedPendulum-v5" and one["episodes"] == 2
    assert one["mean_return"] == two["mean_return"] > 0


def herd(*args, env=None):
    return subprocess.run([sys.executable, "-m", "herd", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env={**os.environ, **(env or {})}, check=False)


def test_cli_evaluate_and_errors(checkpoint, tmp_path):
    run_dir, _ = checkpoint
    r = herd("evaluate", str(run_dir), "--episodes", "1")
    assert r.returncode == 0, r.stderr
    assert "deterministic return" in r.stdout and "over 1 episodes" in r.stdout
    r = herd("evaluate", str(tmp_path / "nowhere"))
    assert r.returncode == 2 and "no checkpoint" in r.stderr


def no_gl_set(**env) -> dict:
    """This environment without a GL choice (a user's shell), plus `env`."""
    return {**{k: v for k, v in os.environ.items() if k not in ("MUJOCO_GL", "PYOPENGL_PLATFORM")}, **env}


def evaluate_video(run_dir, out, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "herd", "evaluate", str(run_dir), "--episodes", "1",
                           "--video", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env=env, check=False)


def test_video_without_mujoco_gl_set(checkpoint, tmp_path):
    """The user sets nothing: EGL (Mesa's software EGL on this CPU machine) is picked."""
    from herd.evaluation import gl_context_fails

    if gl_context_fails("egl"):
        pytest.skip(f"no EGL here: {gl_context_fails('egl')}")
    run_dir, _ = checkpoint
    out = tmp_path / "eval.mp4"
    r = evaluate_video(run_dir, out, no_gl_set())
    assert r.returncode == 0, r.stderr
    assert out.stat().st_size > 1000 and out.read_bytes()[4:8] == b"ftyp"  # an MP4 container
    assert "video:" in r.stdout and "MUJOCO_GL=egl" in r.stdout


def test_video_falls_back_to_osmesa_where_egl_fails():
    from herd.evaluation import gl_context_fails

    if gl_context_fails("osmesa"):
        pytest.skip(f"no OSMesa here: {gl_context_fails('osmesa')}")
    # glvnd finds no EGL vendor: EGL makes no display, as on a machine without EGL
    code = "from herd.evaluation import offscreen_gl; print(offscreen_gl())"
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                       env=no_gl_set(__EGL_VENDOR_LIBRARY_FILENAMES="/nonexistent.json"), check=False)
    assert r.returncode == 0 and r.stdout.strip() == "osmesa", r.stderr


def test_video_without_any_gl_fails_in_one_line(checkpoint, tmp_path, monkeypatch, capsys):
    """Asked for a video and none can be made: exit 2 and one line, never an evaluation
    without it that a script would take for one with it."""
    from herd import cli, evaluation

    for name in ("MUJOCO_GL", "PYOPENGL_PLATFORM"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(evaluation, "gl_context_fails", lambda gl: f"{gl} makes no context")
    run_dir, _ = checkpoint
    assert cli.main(["evaluate", str(run_dir), "--episodes", "1", "--video", str(tmp_path / "x.mp4")]) == 2
    out = capsys.readouterr()
    assert out.err.strip() == ("herd: no video: no offscreen OpenGL here (egl: egl makes no context; "
                               "osmesa: osmesa makes no context); on Debian: apt-get install "
                               "libegl-mesa0 libgl1-mesa-dri libosmesa6")
    assert not out.out and not (tmp_path / "x.mp4").exists()


def test_the_drivers_evaluator_matches_a_fresh_evaluation() -> None:
    """Envs kept between evaluations, reset with the same seeds: the same episodes each time."""
    from bench.actors import random_policy_weights
    from herd.actors.config import EnvConfig
    from herd.evaluation import Evaluator, evaluate

    env_cfg = EnvConfig(id="InvertedPendulum-v5")
    weights = random_policy_weights(4, 1, hidden=(16, 16))
    ev = Evaluator(env_cfg, 3)
    first, second = ev.evaluate(weights), ev.evaluate(weights)
    fresh = evaluate(env_cfg, weights, 3)
    assert first == second == fresh
    assert first["episodes"] == 3 and first["mean_length"] >= 1
