"""Pixel envs (actors/pixels.py, actors/dmc.py) with real MuJoCo, real dm_control and real
offscreen GL (Mesa's software EGL here, as on a CPU node)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import mujoco
import numpy as np
import pytest

from herd.actors import pixels
from herd.actors.config import EnvConfig, PixelConfig
from herd.actors.envs import EnvError, describe, make_env
from tests.conftest import ROOT

WALKER = "dm_control/walker-walk-v0"


def _frames_differ(a: np.ndarray, b: np.ndarray) -> bool:
    return int(np.abs(a.astype(np.int16) - b).max()) > 30


@pytest.mark.parametrize("env_id", [WALKER, "Walker2d-v5"])
def test_pixel_env_gives_one_uint8_frame(env_id: str) -> None:
    env = make_env(EnvConfig(id=env_id, pixels=PixelConfig()))
    obs, _ = env.reset(seed=0)
    assert obs.shape == (3, 84, 84) and obs.dtype == np.uint8 and obs.flags.c_contiguous
    assert env.observation_space.contains(obs)
    assert obs.std() > 5  # a picture, not a cleared buffer
    d = describe(env)
    assert (d["obs_shape"], d["obs_dtype"], d["frame_stack"]) == ((3, 84, 84), "uint8", 3)
    nxt = obs
    for _ in range(10):
        nxt, *_ = env.step(np.ones(env.action_space.shape, np.float32))
    assert _frames_differ(obs, nxt)  # the robot moved in view
    assert not np.shares_memory(nxt, env.step(env.action_space.sample())[0])  # frames are kept, not reused


@pytest.mark.parametrize("env_id", [WALKER, "Walker2d-v5"])
def test_action_repeat_sums_the_rewards_of_single_steps(env_id: str) -> None:
    repeated = make_env(EnvConfig(id=env_id, pixels=PixelConfig(size=16, action_repeat=3)))
    single = make_env(EnvConfig(id=env_id))
    repeated.reset(seed=3)
    single.reset(seed=3)
    rng = np.random.default_rng(0)
    for _ in range(5):
        a = rng.uniform(-1, 1, single.action_space.shape).astype(np.float32)
        _, r, *_ = repeated.step(a)
        assert r == pytest.approx(sum(single.step(a)[1] for _ in range(3)), rel=1e-9, abs=1e-12)


def test_dm_control_episode_is_1000_env_steps_truncated() -> None:
    env = make_env(EnvConfig(id=WALKER, pixels=PixelConfig(size=16)))  # action repeat 2
    env.reset(seed=1)
    zero = np.zeros(env.action_space.shape, np.float32)
    ends = [env.step(zero)[2:4] for _ in range(500)]
    assert ends[-1] == (False, True) and not any(t or u for t, u in ends[:-1])


def test_dm_control_from_state_is_its_flat_observation() -> None:
    env = make_env(EnvConfig(id="dm_control/cheetah-run-v0"))
    obs, _ = env.reset(seed=0)
    assert obs.shape == (17,) == env.observation_space.shape  # position 8 + velocity 9
    assert describe(env)["frame_stack"] == 0 and describe(env)["obs_dtype"] == "float32"
    again, _ = make_env(EnvConfig(id="dm_control/cheetah-run-v0")).reset(seed=0)
    np.testing.assert_array_equal(obs, again)  # the seed sets the task's initial state
    video = make_env(EnvConfig(id="dm_control/cheetah-run-v0",
                               kwargs={"render_mode": "rgb_array", "width": 64, "height": 48}))
    video.reset(seed=0)
    picture = video.render()  # what `herd evaluate --video` records
    assert picture.shape == (48, 64, 3) and picture.dtype == np.uint8 and picture.std() > 5


def test_effects_switch_shadows_and_reflections() -> None:
    frames = {}
    for effects in (False, True):
        env = make_env(EnvConfig(id="Walker2d-v5", pixels=PixelConfig(size=32, effects=effects)))
        frames[effects], _ = env.reset(seed=0)
        scene = pixels.shared_context().model(env.unwrapped.model, env.pixel_config).scene
        assert scene.flags[mujoco.mjtRndFlag.mjRND_SHADOW] == effects
        assert scene.flags[mujoco.mjtRndFlag.mjRND_REFLECTION] == effects
    assert _frames_differ(frames[False], frames[True])


def test_antialias_off_renders_without_multisampling() -> None:
    frames = {}
    for antialias in (True, False):
        env = make_env(EnvConfig(id="Hopper-v5", pixels=PixelConfig(size=32, antialias=antialias)))
        frames[antialias], _ = env.reset(seed=0)
        assert (env.unwrapped.model.vis.quality.offsamples == 0) == (not antialias)
    diff = np.abs(frames[True].astype(np.int16) - frames[False])
    assert diff.max() > 30 and diff.mean() < 10  # the same picture, its edges drawn otherwise


def test_own_robot_is_seen_through_its_own_camera() -> None:
    sys.path.insert(0, str(ROOT / "examples" / "myrobot"))
    try:
        cfg = dict(id="MyRobot-v0", module="myrobot")
        own = make_env(EnvConfig(**cfg, pixels=PixelConfig(size=48)))
        top = make_env(EnvConfig(**cfg, pixels=PixelConfig(size=48, camera="top")))
        free = make_env(EnvConfig(**cfg, pixels=PixelConfig(size=48, camera=-1)))
        views = [env.reset(seed=2)[0] for env in (own, top, free)]
        np.testing.assert_array_equal(views[0], views[1])  # the env's camera_name "top"
        assert _frames_differ(views[0], views[2])
        with pytest.raises(EnvError, match="no such camera"):
            make_env(EnvConfig(**cfg, pixels=PixelConfig(camera="side")))
    finally:
        sys.path.remove(str(ROOT / "examples" / "myrobot"))


def test_tiled_rendering_matches_one_frame_at_a_time() -> None:
    envs = [make_env(EnvConfig(id="Walker2d-v5", pixels=PixelConfig(size=32))) for _ in range(9)]
    for i, env in enumerate(envs):
        env.reset(seed=i)
        for _ in range(i):
            env.advance(np.full(env.action_space.shape, 0.5, np.float32))
    single = [env.frame() for env in envs]
    for a, b in zip(single, pixels.render_frames(envs), strict=True):
        diff = np.abs(a.astype(np.int16) - b)
        assert diff.mean() < 0.5 and (diff <= 2).mean() > 0.99  # rasterised at another offset


def _frame_on_a_new_thread(env) -> np.ndarray:
    """The env's frame rendered through a GL context of its own (a new thread's)."""
    out = []
    worker = threading.Thread(target=lambda: out.append(env.frame()))
    worker.start()
    worker.join(30)
    return out[0]


def test_frames_of_two_robots_in_one_process_stay_their_own() -> None:
    for env_id in (WALKER, "Walker2d-v5"):  # two models drawn before, at another size
        make_env(EnvConfig(id=env_id, pixels=PixelConfig(size=84))).reset(seed=0)
    walker = make_env(EnvConfig(id=WALKER, pixels=PixelConfig(size=32)))
    here, _ = walker.reset(seed=4)
    np.testing.assert_array_equal(here, _frame_on_a_new_thread(walker))


def test_envs_made_on_one_thread_render_on_another() -> None:
    env = make_env(EnvConfig(id=WALKER, pixels=PixelConfig(size=32)))
    here, _ = env.reset(seed=4)
    there = []
    worker = threading.Thread(target=lambda: there.extend([env.frame(), pixels.render_frames([env])[0]]))
    worker.start()
    worker.join(30)
    np.testing.assert_array_equal(here, there[0])
    assert np.abs(here.astype(np.int16) - there[1]).mean() < 0.5


@pytest.mark.parametrize(("env_id", "says"), [
    ("dm_control/walkr-walk-v0", "no DeepMind Control domain 'walkr'; domains: acrobot"),
    ("dm_control/walker-fly-v0", "domain 'walker' has no task 'fly'; its tasks: run, stand, walk"),
    ("dm_control/walker", "write dm_control/<domain>-<task>-v0"),
])
def test_unknown_dm_control_task_is_one_clear_line(env_id: str, says: str) -> None:
    with pytest.raises(EnvError) as e:
        make_env(EnvConfig(id=env_id, pixels=PixelConfig()))
    assert says in str(e.value) and "\n" not in str(e.value)


def test_state_env_unchanged_and_without_gl() -> None:
    code = ("import sys; from herd.actors.config import EnvConfig; from herd.actors.envs import make_env, describe;"
            "env = make_env(EnvConfig(id='Walker2d-v5')); obs, _ = env.reset(seed=0); d = describe(env);"
            "print(obs.dtype, obs.shape, d['obs_dtype'], d['frame_stack'], type(env).__name__,"
            " sorted({m.split('.')[0] for m in sys.modules if m.startswith(('dm_control', 'OpenGL', 'herd.actors.pixels'))"
            " or m.startswith('herd.actors.dmc')}))")
    # a process of its own, without the GL choice this one made
    env = {k: v for k, v in os.environ.items() if k not in ("MUJOCO_GL", "PYOPENGL_PLATFORM")}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=120, check=True).stdout.split()
    assert out == ["float64", "(17,)", "float32", "0", "TimeLimit", "[]"]
