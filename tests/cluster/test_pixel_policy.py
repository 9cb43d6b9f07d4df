"""Pixel policies users take away: load_policy, `herd export` (the exported module reads the
uint8 stack [S*C, H, W]) and `herd evaluate` (with the camera's video) act as the actors'
conv policy does, on a real MuJoCo env rendered offscreen."""

from __future__ import annotations

import json

import numpy as np
import pytest

from herd.actors.config import EnvConfig
from herd.actors.envs import describe, make_env
from herd.actors.frames import FrameStack
from herd.actors.policy import MLPPolicy
from tests.pixels import pixel_run

ENV = {"id": "InvertedPendulum-v5", "pixels": {"size": 32, "frame_stack": 3}}
FORMATS = ("onnx", "torchscript", "safetensors")


@pytest.fixture
def run_dir(tmp_path):
    """runs/JOB of a pixel job as far as these read it: config.yaml and best_policy.pb."""
    return pixel_run(tmp_path / "runs" / "herd-pixels", ENV)


def camera_stacks(n: int) -> np.ndarray:
    """n stacks of real camera frames, as the actors see them, along one random episode."""
    env = make_env(EnvConfig(**ENV))
    stack, out = FrameStack(3), []
    obs, _ = env.reset(seed=1)
    x = stack.reset(obs)
    for _ in range(n):
        out.append(x)
        obs, _, term, trunc, _ = env.step(env.action_space.sample())
        x = stack.reset(env.reset()[0]) if term or trunc else stack.push(obs)
    env.close()
    return np.stack(out)


def test_pixel_policy_loads_exports_and_acts_as_the_actors(run_dir):
    from herd.export import export_policy, load_policy, sidecar

    run, weights = run_dir
    obs = camera_stacks(12)
    assert obs.shape == (12, 9, 32, 32) and obs.dtype == np.uint8
    d = describe(make_env(EnvConfig(**ENV)))
    want = MLPPolicy(weights, d["action_low"], d["action_high"]).act(obs, deterministic=True)
    policy = load_policy(run, best=True)
    assert policy.frame_stack == 3 and policy.obs_shape == (9, 32, 32)
    assert np.array_equal(policy.act(obs), want)
    np.testing.assert_allclose(policy.act(obs[0]), want[0], rtol=1e-5, atol=1e-5)  # one stack
    for fmt in FORMATS:
        out = export_policy(run, fmt, best=True)
        meta = json.loads(sidecar(out).read_text())
        assert meta["obs_shape"] == [9, 32, 32] and meta["obs_dtype"] == "uint8"
        assert meta["frame_stack"] == 3 and meta["conv_strides"] == [2, 1]
        np.testing.assert_allclose(load_policy(out).act(obs), want, rtol=1e-5, atol=1e-5)
    import onnxruntime

    session = onnxruntime.InferenceSession(str(run / "export" / "policy.onnx"),
                                           providers=["CPUExecutionProvider"])
    (inp,) = session.get_inputs()
    assert inp.type == "tensor(uint8)" and inp.shape[1:] == [9, 32, 32]


def test_evaluate_a_pixel_policy_and_its_camera_video(run_dir, tmp_path):
    import imageio.v2 as imageio

    from herd.evaluation import evaluate_checkpoint

    run, _ = run_dir
    plain = evaluate_checkpoint(run / "best_policy.pb", episodes=2)
    video = tmp_path / "camera.mp4"
    seen = evaluate_checkpoint(run / "best_policy.pb", episodes=2, video=str(video))
    assert seen["mean_return"] == plain["mean_return"]  # the same episodes, one after the other
    assert seen["frames"] == round(2 * plain["mean_length"]) + 2  # each step's frame and the last
    reader = imageio.get_reader(str(video))
    frames = [f for f in reader]
    assert len(frames) == seen["frames"]
    assert frames[0].shape == (256, 256, 3)  # 32x32 camera frames scaled up 8x for watching
    assert frames[0].std() > 1  # a picture, not a blank
