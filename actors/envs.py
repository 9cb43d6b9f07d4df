"""Making environments by name, the way gymnasium and RLlib users name them; DeepMind Control's
as dm_control/<domain>-<task>-v0 (actors/dmc.py); camera frames with env.pixels (actors/pixels.py)."""

from __future__ import annotations

import importlib
import sys

import gymnasium as gym
import numpy as np

from herd.actors.config import EnvConfig


class EnvError(ValueError):
    """An env that cannot be made or that SAC cannot drive."""


def _ray_creator(env_id: str):
    # register_env runs in this process (env.module, imported first in every process of a job)
    # or not at all; without it, importing ray.tune (pandas, ray.data: ~1 s) finds nothing
    if "ray.tune.registry" not in sys.modules:
        return None
    try:
        from ray.tune.registry import ENV_CREATOR, _global_registry

        if _global_registry.contains(ENV_CREATOR, env_id):
            return _global_registry.get(ENV_CREATOR, env_id)
    except Exception:  # noqa: BLE001 -- Ray not initialised here: only gymnasium's registry applies
        return None
    return None


def make_env(cfg: EnvConfig) -> gym.Env:
    """A new env instance; EnvError with a readable reason when the id is unknown or unfit."""
    if cfg.module:
        try:
            importlib.import_module(cfg.module)
        except ImportError as e:
            raise EnvError(f"env.module {cfg.module!r} cannot be imported: {e}") from None
    if cfg.pixels is not None:  # MUJOCO_GL and PYOPENGL_PLATFORM before any GL import (dm_control's)
        from herd.actors import pixels

        try:
            pixels.select_gl(cfg.pixels.gl)
        except (ValueError, RuntimeError) as e:
            raise EnvError(f"{cfg.id}: {e}") from None
    creator = _ray_creator(cfg.id)
    if creator is not None:
        env = creator(dict(cfg.kwargs))
    elif cfg.id.startswith("dm_control/"):
        from herd.actors import dmc

        try:
            env = dmc.make(cfg.id, dict(cfg.kwargs))
        except ValueError as e:
            raise EnvError(str(e)) from None
    else:
        try:
            env = gym.make(cfg.id, **cfg.kwargs)
        except gym.error.Error as e:
            raise EnvError(
                f"unknown env id {cfg.id!r}: not in gymnasium's registry and not registered "
                f"with ray.tune.registry.register_env ({e})"
            ) from None
    if not isinstance(env.action_space, gym.spaces.Box):
        raise EnvError(f"{cfg.id}: SAC needs a continuous (Box) action space, got {env.action_space}")
    if not isinstance(env.observation_space, gym.spaces.Box):
        raise EnvError(f"{cfg.id}: Herd needs a Box observation space, got {env.observation_space}")
    if not np.all(np.isfinite(env.action_space.low)) or not np.all(np.isfinite(env.action_space.high)):
        raise EnvError(f"{cfg.id}: the action space must be bounded for a tanh policy")
    randomized = None
    if cfg.randomize is not None and cfg.randomize.train:  # under the camera: reset draws, then renders
        from herd.actors.randomize import Randomized

        try:
            env = randomized = Randomized(env, cfg.randomize)
        except TypeError as e:
            env.close()
            raise EnvError(f"{cfg.id}: {e}") from None
    if cfg.pixels is not None:
        from herd.actors import pixels

        try:
            env = pixels.PixelEnv(env, cfg.pixels)
        except (TypeError, ValueError, RuntimeError) as e:
            env.close()
            raise EnvError(f"{cfg.id}: {e}") from None
        if randomized is not None:
            randomized.randomizer.watch(env.camera)
    return env


def describe(env: gym.Env) -> dict:
    """Shapes and bounds of an env, the fields of proto EnvSpec: state obs travel as float32; a
    pixel env's obs is one uint8 frame [3, H, W] and frame_stack (> 0) says how many are stacked;
    state_dim is the length of what the env observes beside its camera (PixelEnv.state)."""
    pixel_cfg, inner = None, env
    while pixel_cfg is None and isinstance(inner, gym.Wrapper):  # PixelEnv under other wrappers
        pixel_cfg = getattr(inner, "pixel_config", None)
        inner = inner if pixel_cfg else inner.env
    return {
        "obs_shape": tuple(env.observation_space.shape),
        "obs_dtype": "uint8" if pixel_cfg else "float32",
        "frame_stack": pixel_cfg.frame_stack if pixel_cfg else 0,
        "state_dim": len(inner.state) if pixel_cfg else 0,
        "action_shape": tuple(env.action_space.shape),
        "action_low": np.asarray(env.action_space.low, np.float32).ravel(),
        "action_high": np.asarray(env.action_space.high, np.float32).ravel(),
    }
