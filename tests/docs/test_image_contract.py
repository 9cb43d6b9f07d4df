"""docs/camera-to-robot.md's image contract, run as written: its snippet, fed a camera's pictures
(RGB rows top first, 4x the policy's frame size), drives the exported ONNX policy to the actions
herd.load_policy gives for the env's own frame stacks of the same views, and the export's
facts are what the page's table says."""

from __future__ import annotations

import json
import re
import sys

import numpy as np
import pytest

from herd.actors.config import EnvConfig, PixelConfig
from herd.actors.envs import make_env
from herd.actors.frames import FrameStack
from tests.conftest import ROOT
from tests.pixels import pixel_run

PAGE = ROOT / "docs" / "camera-to-robot.md"
ENV = {"id": "MyRobot-v0", "module": "myrobot", "pixels": {"size": 32, "frame_stack": 3}}
sys.path.insert(0, str(ROOT / "examples" / "myrobot"))  # the arm the page trains


def snippet() -> str:
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.DOTALL)
    return next(b for b in blocks if "def to_frame" in b)


@pytest.fixture
def exported(tmp_path):
    pytest.importorskip("onnxruntime")
    from herd.export import export_policy

    run, _ = pixel_run(tmp_path / "runs" / "herd-pixels", ENV, seed=3, act=2)
    return export_policy(run, "onnx", best=True)


def test_the_snippet_feeds_camera_pictures_as_the_policy_expects(exported):
    from herd.export import load_policy

    meta = json.loads(exported.with_suffix(".json").read_text())
    assert meta["obs_shape"] == [9, 32, 32] and meta["obs_dtype"] == "uint8" and meta["frame_stack"] == 3
    code = snippet().replace("runs/<job>/export/policy.json", str(exported.with_suffix(".json")))
    code = code.replace("runs/<job>/export/policy.onnx", str(exported))
    page: dict = {}
    exec(compile(code, str(PAGE), "exec"), page)  # noqa: S102 -- the page's own code, as a reader runs it

    # the same episode seen twice: the policy's 32x32 frames and a 128x128 "camera" of the same view
    small = make_env(EnvConfig(**ENV))
    camera = make_env(EnvConfig(id=ENV["id"], module=ENV["module"], pixels=PixelConfig(size=128)))
    policy, stack = load_policy(exported), FrameStack(3)
    frame, _ = small.reset(seed=4)
    picture, _ = camera.reset(seed=4)
    want_obs, first = stack.reset(frame), True
    rng = np.random.default_rng(0)
    for _ in range(6):
        # the camera's picture as a camera delivers it: [h, w, 3] RGB, rows top first
        fed_picture = picture.transpose(1, 2, 0)
        got = page["act"](fed_picture, first=first)
        fed = np.concatenate(list(page["frames"]))
        assert fed.shape == (9, 32, 32) and fed.dtype == np.uint8
        # scaled down from 4x, the snippet's frames match the rendered ones up to resampling
        # (about 1 here; rows upside down read about 4.7, blue for red about 2.5)
        diff = np.abs(fed.astype(int) - want_obs).mean()
        assert diff < 1.8, diff
        np.testing.assert_allclose(got, policy.act(fed), atol=1e-5)  # same stack, same action
        action = rng.uniform(-1, 1, 2).astype(np.float32)
        frame, *_ = small.step(action)
        picture, *_ = camera.step(action)
        want_obs, first = stack.push(frame), False
    # oldest first: the newest frame is the last three channels
    assert np.array_equal(np.concatenate(list(page["frames"]))[6:], page["to_frame"](fed_picture))

