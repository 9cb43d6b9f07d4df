"""Camera frames as observations: a MuJoCo env seen through one of its cameras.

`PixelEnv` wraps any env whose `unwrapped` has MuJoCo `model` and `data` (gymnasium's MuJoCo
envs, a user's own MujocoEnv, actors/dmc.py's DeepMind Control adapter). Its observation is one
RGB frame, uint8 [3, size, size]; a step repeats the action `action_repeat` times and sums the
rewards. Frame stacking is the actor's (it keeps frame numbers, proto/herd.proto's frame fields).

All envs of a process render through one OpenGL context (`shared_context()`): separate contexts
in one process or many contend for the GPU (bench/render.py measures it). A GL context is
current in one thread at a time, so each thread that renders has its own (an actor that makes
its envs on one thread and steps them on another: the second renders, the first sits idle). MuJoCo picks its GL
backend from MUJOCO_GL when it is imported, and PyOpenGL from PYOPENGL_PLATFORM, so
`select_gl` sets both; the context is made from the chosen backend's module directly, so an
earlier `import mujoco` (gymnasium's envs, the actor's fast path) does not matter.
"""

from __future__ import annotations

import atexit
import contextlib
import glob
import importlib
import os
import sys
import threading
from typing import Any

import gymnasium as gym
import mujoco
import numpy as np

from herd.actors.config import PixelConfig

# Software GL where no GPU shows: Mesa's EGL (llvmpipe) and OSMesa render alike on this code
# path (bench/results/render-*-x86-64.json); EGL is the one backend for both kinds of node.
SOFTWARE_GL = "egl"
_BACKENDS = ("egl", "osmesa")


def gpu_present() -> bool:
    """An NVIDIA device node or a DRM render node: EGL renders on that GPU."""
    return bool(glob.glob("/dev/nvidia[0-9]*") or glob.glob("/dev/dri/renderD*"))


def select_gl(choice: str = "auto") -> str:
    """The GL backend for this process ("egl" or "osmesa"), written to MUJOCO_GL and
    PYOPENGL_PLATFORM. "auto" keeps an egl/osmesa MUJOCO_GL already set (an image's choice),
    else takes egl (on the GPU where one shows, Mesa's software EGL elsewhere)."""
    if choice == "auto":
        preset = os.environ.get("MUJOCO_GL", "").lower()
        choice = preset if preset in _BACKENDS else ("egl" if gpu_present() else SOFTWARE_GL)
    if choice not in _BACKENDS:
        raise ValueError(f"env.pixels.gl must be auto, egl or osmesa, not {choice!r}")
    platform = os.environ.get("PYOPENGL_PLATFORM", "").lower()
    if "OpenGL.platform" in sys.modules and platform and platform != choice:
        raise RuntimeError(f"PyOpenGL was already loaded for {platform!r} in this process; "
                           f"start it with MUJOCO_GL={choice} PYOPENGL_PLATFORM={choice}")
    os.environ["MUJOCO_GL"] = choice
    os.environ["PYOPENGL_PLATFORM"] = choice
    return choice


# What one env's frame is drawn from: the MuJoCo structs, the camera and the env's settings.
View = tuple[mujoco.MjModel, mujoco.MjData, mujoco.MjvCamera, PixelConfig]


class _Model:
    """What one model needs in the shared context: its uploaded meshes and textures, a scene.

    The shadow map is sized to the frames (4x their side, at least 256) instead of the model's
    own (2048-4096, made for full-screen views): at 84x84 the shadows look the same and cost a
    fraction. Without antialias the offscreen buffer has no multisampling (bench/results/render-*)."""

    def __init__(self, model: mujoco.MjModel, cfg: PixelConfig):
        quality = model.vis.quality
        quality.shadowsize = min(quality.shadowsize, max(256, 4 * cfg.size))
        if not cfg.antialias:
            quality.offsamples = 0
        self.scene = mujoco.MjvScene(model, maxgeom=max(1000, 2 * model.ngeom))
        self.context = mujoco.MjrContext(model, mujoco.mjtFontScale.mjFONTSCALE_100)
        mujoco.mjr_setBuffer(mujoco.mjtFramebuffer.mjFB_OFFSCREEN, self.context)
        self.width, self.height = model.vis.global_.offwidth, model.vis.global_.offheight
        self.max_size = min(self.width, self.height)
        self._buffers: dict[tuple[int, int], np.ndarray] = {}

    def buffer(self, height: int, width: int) -> np.ndarray:
        """A reused [height, width, 3] uint8 array for glReadPixels."""
        rgb = self._buffers.get((height, width))
        if rgb is None:
            rgb = self._buffers[height, width] = np.empty((height, width, 3), np.uint8)
        return rgb


class SharedContext:
    """One thread's GL context; per model signature one MjrContext and one MjvScene, so envs of
    the same robot share uploads. Rendering is sequential: one env after another."""

    def __init__(self, backend: str):
        self.backend = backend
        try:
            self._gl = importlib.import_module(f"mujoco.{backend}").GLContext(64, 64)
        except Exception as e:  # noqa: BLE001 -- reported with what to install
            raise RuntimeError(f"no offscreen OpenGL ({backend}): {type(e).__name__}: {e}. On Debian: apt-get "
                               "install libegl-mesa0 libgl1-mesa-dri libosmesa6 (software GL)") from None
        self._gl.make_current()
        self._models: dict[tuple[int, bool], _Model] = {}
        self._bound: _Model | None = None
        self._option = mujoco.MjvOption()
        self._perturb = mujoco.MjvPerturb()
        atexit.register(self.close)  # while PyOpenGL is whole: its teardown at exit raises otherwise

    def close(self) -> None:
        """Free the models' GL resources, then the context (at exit: as far as it goes when the
        context is still current in another thread)."""
        if self._gl is None:
            return
        gl, self._gl = self._gl, None
        with contextlib.suppress(Exception):
            gl.make_current()
            for m in self._models.values():
                m.context.free()
        with contextlib.suppress(Exception):
            gl.free()
        # a free that failed (at exit dm_control's EGL renderer may have ended the display
        # first) would be tried again by GLContext.__del__, which prints its EGLError
        gl._context = None
        self._models.clear()

    def model(self, model: mujoco.MjModel, cfg: PixelConfig) -> _Model:
        """The model's entry, made at its first use, in this context made current (a gymnasium
        viewer of the same thread may have taken over) with the model's offscreen framebuffer
        bound: MuJoCo binds it only when its context's buffer changes, so after another model's
        frame GL would still draw into that model's."""
        self._gl.make_current()
        key = (model.signature, cfg.antialias)
        entry = self._models.get(key)
        if entry is None:
            entry = self._models[key] = _Model(model, cfg)
        if entry is not self._bound:
            mujoco.mjr_setBuffer(mujoco.mjtFramebuffer.mjFB_OFFSCREEN, entry.context)
            self._bound = entry
        return entry

    def _draw(self, m: _Model, view: View, rect: mujoco.MjrRect) -> None:
        model, data, camera, cfg = view
        mujoco.mjv_updateScene(model, data, self._option, self._perturb, camera, mujoco.mjtCatBit.mjCAT_ALL,
                               m.scene)
        m.scene.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = cfg.effects
        m.scene.flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = cfg.effects
        mujoco.mjr_render(rect, m.scene, m.context)

    def render(self, view: View, rect: mujoco.MjrRect, rgb: np.ndarray) -> None:
        """Render into rgb ([H, W, 3] uint8, C-contiguous, bottom row first as GL reads it)."""
        m = self.model(view[0], view[3])
        self._draw(m, view, rect)
        mujoco.mjr_readPixels(rgb, None, rect, m.context)

    def render_tiled(self, views: list[View]) -> list[np.ndarray]:
        """Frames [3, size, size] of several views of one model at one size and antialias,
        rendered side by side in the offscreen buffer and read back with one glReadPixels per
        buffer full: one GPU sync for many envs instead of one each."""
        m = self.model(views[0][0], views[0][3])
        size = views[0][3].size
        cols = max(1, m.width // size)
        per_read = cols * max(1, m.height // size)
        frames = []
        for start in range(0, len(views), per_read):
            chunk = views[start:start + per_read]
            rows = -(-len(chunk) // cols)
            for i, view in enumerate(chunk):
                self._draw(m, view, mujoco.MjrRect(i % cols * size, i // cols * size, size, size))
            width = min(len(chunk), cols) * size
            rgb = m.buffer(rows * size, width)
            mujoco.mjr_readPixels(rgb, None, mujoco.MjrRect(0, 0, width, rows * size), m.context)
            for i in range(len(chunk)):
                y, x = i // cols * size, i % cols * size
                frames.append(np.ascontiguousarray(rgb[y:y + size, x:x + size][::-1].transpose(2, 0, 1)))
        return frames


_LOCAL = threading.local()


def shared_context(gl: str = "auto") -> SharedContext:
    """The calling thread's GL context, made at its first call (with select_gl(gl))."""
    context = getattr(_LOCAL, "context", None)
    if context is None:
        context = _LOCAL.context = SharedContext(select_gl(gl))
    return context


def make_camera(env: gym.Env, camera: str | int | None) -> mujoco.MjvCamera:
    """The camera an env is seen through: `camera` by name or id (-1: MuJoCo's free camera),
    else the env's own (a DeepMind Control domain's, a MujocoEnv's camera_name/camera_id or its
    default free-camera settings)."""
    u = env.unwrapped
    model = u.model
    cam = mujoco.MjvCamera()
    if camera is None:
        renderer = getattr(u, "mujoco_renderer", None)
        camera = getattr(u, "render_camera", None)
        if camera is None and renderer is not None:
            camera = renderer.camera_id
    elif isinstance(camera, str):
        name = camera
        camera = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, name)
        if camera < 0:
            names = [model.camera(i).name for i in range(model.ncam)]
            raise ValueError(f"env.pixels.camera {name!r}: the model has no such camera; its cameras: {names}")
    if camera is not None and camera >= 0:
        if camera >= model.ncam:
            raise ValueError(f"env.pixels.camera {camera}: the model has {model.ncam} cameras")
        cam.type = mujoco.mjtCamera.mjCAMERA_FIXED
        cam.fixedcamid = camera
        return cam
    # gymnasium's free camera: centred on the geoms, backed off by the model's extent, then the
    # env's default_camera_config on top
    mujoco.mjv_defaultFreeCamera(model, cam)
    renderer = getattr(u, "mujoco_renderer", None)
    for key, value in (getattr(renderer, "default_cam_config", None) or {}).items():
        if isinstance(value, np.ndarray):
            getattr(cam, key)[:] = value
        else:
            setattr(cam, key, value)
    return cam


class PixelEnv(gym.Wrapper):
    """One uint8 frame [3, size, size] per step from the env's camera, the action repeated.

    `state` is what the wrapped env observed at the same moment (float32, flat), followed, under
    env.randomize, by the episode's drawn physics factors (Randomized.physics): a learner whose
    critics read the env's state gets it beside each frame (proto/herd.proto frame_state)."""

    def __init__(self, env: gym.Env, cfg: PixelConfig):
        super().__init__(env)
        u = env.unwrapped
        if not isinstance(getattr(u, "model", None), mujoco.MjModel) or \
                not isinstance(getattr(u, "data", None), mujoco.MjData):
            raise TypeError(f"{type(u).__name__}: pixels need a MuJoCo env (unwrapped.model / .data)")
        self.pixel_config = cfg
        if cfg.size > shared_context(cfg.gl).model(u.model, cfg).max_size:
            raise ValueError(f"env.pixels.size {cfg.size} exceeds the model's offscreen buffer "
                             f"(<visual><global offwidth/offheight> in its XML)")
        self._camera = make_camera(env, cfg.camera)
        self._rect = mujoco.MjrRect(0, 0, cfg.size, cfg.size)
        self._rgb = np.empty((cfg.size, cfg.size, 3), np.uint8)  # GL's rows, reused every frame
        self.observation_space = gym.spaces.Box(0, 255, (3, cfg.size, cfg.size), np.uint8)
        self._physics = getattr(env, "physics", None)  # env.randomize's drawn factors
        extra = len(self._physics()) if self._physics is not None else 0
        self.state = np.zeros(int(np.prod(env.observation_space.shape)) + extra, np.float32)

    @property
    def camera(self) -> mujoco.MjvCamera:
        """The camera frames are seen through (env.randomize jitters a free one)."""
        return self._camera

    def frame(self) -> np.ndarray:
        """The camera's view now: a new uint8 array [3, H, W] (rows top first)."""
        shared_context(self.pixel_config.gl).render(self.view(), self._rect, self._rgb)
        return np.ascontiguousarray(self._rgb[::-1].transpose(2, 0, 1))

    def view(self) -> View:
        u = self.env.unwrapped
        return u.model, u.data, self._camera, self.pixel_config

    def reset(self, **kwargs: Any) -> tuple[np.ndarray, dict]:
        state, info = self.env.reset(**kwargs)
        self._set_state(state)
        return self.frame(), info

    def _set_state(self, observed: Any) -> None:
        observed = np.asarray(observed, np.float32).ravel()
        if self._physics is None:
            self.state = observed
        else:
            self.state = np.concatenate([observed, self._physics()])

    def advance(self, action: Any) -> tuple[float, bool, bool, dict]:
        """step() without its frame: the action repeated, the rewards summed (render_frames
        then renders the frames of many envs at once)."""
        total = 0.0
        for _ in range(self.pixel_config.action_repeat):
            state, reward, terminated, truncated, info = self.env.step(action)
            self._set_state(state)
            total += float(reward)
            if terminated or truncated:
                break
        return total, terminated, truncated, info

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        reward, terminated, truncated, info = self.advance(action)
        return self.frame(), reward, terminated, truncated, info


def picture(env: gym.Env, width: int, height: int) -> np.ndarray:
    """One [height, width, 3] uint8 picture of a MuJoCo env from its own camera (a video frame
    of an env that has no renderer of its own), through this thread's context."""
    rgb = np.empty((height, width, 3), np.uint8)
    cfg = PixelConfig(size=min(512, max(16, width, height)))  # its size sets the shadow map only
    context = shared_context()
    if max(width, height) > context.model(env.unwrapped.model, cfg).max_size:
        raise ValueError(f"a {width}x{height} picture exceeds the model's offscreen buffer")
    context.render((env.unwrapped.model, env.unwrapped.data, make_camera(env, None), cfg),
                   mujoco.MjrRect(0, 0, width, height), rgb)
    return rgb[::-1].copy()


def render_frames(envs: list[PixelEnv]) -> list[np.ndarray]:
    """The current frame of each env (as PixelEnv.frame() gives it), envs of one model and size
    rendered tiled through the shared context."""
    frames: list[np.ndarray | None] = [None] * len(envs)
    groups: dict[tuple, list[int]] = {}
    for i, env in enumerate(envs):
        cfg = env.pixel_config
        groups.setdefault((env.unwrapped.model.signature, cfg.size, cfg.antialias), []).append(i)
    if not envs:
        return []
    context = shared_context(envs[0].pixel_config.gl)
    for idx in groups.values():
        for i, frame in zip(idx, context.render_tiled([envs[i].view() for i in idx]), strict=True):
            frames[i] = frame
    return frames
