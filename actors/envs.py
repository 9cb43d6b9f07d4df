"""Making environments by name, the way gymnasium and RLlib users name them."""

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
    creator = _ray_creator(cfg.id)
    if creator is not None:
        env = creator(dict(cfg.kwargs))
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
    return env


def describe(env: gym.Env) -> dict:
    """Shapes and bounds of an env, the fields of proto EnvSpec (obs travel as float32)."""
    return {
        "obs_shape": tuple(env.observation_space.shape),
        "obs_dtype": "float32",
        "action_shape": tuple(env.action_space.shape),
        "action_low": np.asarray(env.action_space.low, np.float32).ravel(),
        "action_high": np.asarray(env.action_space.high, np.float32).ravel(),
    }
