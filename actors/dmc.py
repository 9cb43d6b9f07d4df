"""DeepMind Control tasks as gymnasium envs: ids "dm_control/<domain>-<task>-v0" (e.g.
dm_control/walker-walk-v0, dm_control/cheetah-run-v0), the names shimmy gives them.

The observation is the task's observation dict flattened in the task's own key order, so a task
also runs from state; a pixel job wraps the env in actors/pixels.py, which renders
`model`/`data` (the raw MuJoCo structs under dm_control's Physics). The time limit (1000 control
steps in the suite) ends an episode as truncation; a discount of 0 at the last step (a task that
really ends) as termination.
"""

from __future__ import annotations

import os
import re
from typing import Any

import gymnasium as gym
import mujoco
import numpy as np

PREFIX = "dm_control/"
_ID = re.compile(r"^dm_control/(?P<domain>[A-Za-z0-9_]+)-(?P<task>[A-Za-z0-9_]+)-v0$")

# DrQ-v2's and MR.Q's camera per domain (quadruped's camera 0 looks at the floor from above)
_CAMERA = {"quadruped": 2}


def is_dmc_id(env_id: str) -> bool:
    return env_id.startswith(PREFIX)


def _adapt_dm_control_tables() -> None:
    """dm_control 1.0.50 indexes every field its size tables name, some of which mujoco 4.0.0
    does not have (flex vertex-edge fields): drop those from the tables before a Physics is made."""
    from dm_control.mujoco.wrapper.mjbindings import sizes

    model = mujoco.MjModel.from_xml_string("<mujoco/>")
    structs = {"mjmodel": model, "mjdata": mujoco.MjData(model)}
    for name, struct in structs.items():
        for field in [f for f in sizes.array_sizes[name] if not hasattr(struct, f)]:
            del sizes.array_sizes[name][field]


def _suite():
    # dm_control picks a renderer of its own when imported, trying GLFW where MUJOCO_GL is unset
    # (a warning on a node without a display); frames come from actors/pixels.py, not from it
    unset = "MUJOCO_GL" not in os.environ
    if unset:
        os.environ["MUJOCO_GL"] = "disable"
    try:
        _adapt_dm_control_tables()
        from dm_control import suite
    finally:
        if unset:
            del os.environ["MUJOCO_GL"]
    return suite


def parse_id(env_id: str) -> tuple[str, str]:
    """(domain, task) of a known suite task; ValueError with one line naming what exists."""
    m = _ID.match(env_id)
    if not m:
        raise ValueError(f"{env_id!r} is not a DeepMind Control id: write dm_control/<domain>-<task>-v0, "
                         "e.g. dm_control/walker-walk-v0")
    domain, task = m["domain"], m["task"]
    by_domain = _suite().TASKS_BY_DOMAIN
    if domain not in by_domain:
        raise ValueError(f"{env_id}: no DeepMind Control domain {domain!r}; domains: "
                         + ", ".join(sorted(by_domain)))
    if task not in by_domain[domain]:
        raise ValueError(f"{env_id}: domain {domain!r} has no task {task!r}; its tasks: "
                         + ", ".join(sorted(by_domain[domain])))
    return domain, task


class DMCEnv(gym.Env):
    """One suite task behind gymnasium's API. `model`/`data` are the MuJoCo structs to render."""

    metadata = {"render_modes": ["rgb_array"]}  # noqa: RUF012 -- gymnasium's own class attribute

    def __init__(self, domain: str, task: str, task_kwargs: dict | None = None,
                 environment_kwargs: dict | None = None, visualize_reward: bool = False,
                 render_mode: str | None = None, width: int = 320, height: int = 240):
        self._env = _suite().load(domain, task, task_kwargs=dict(task_kwargs or {}),
                                  environment_kwargs=environment_kwargs, visualize_reward=visualize_reward)
        self.spec_id = f"{PREFIX}{domain}-{task}-v0"
        self.render_camera = _CAMERA.get(domain, 0)
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"{self.spec_id}: render_mode {render_mode!r}: only 'rgb_array'")
        self.render_mode, self._render_size = render_mode, (width, height)
        self.metadata = {**self.metadata, "render_fps": round(1.0 / self.dt)}
        spec = self._env.action_spec()
        self.action_space = gym.spaces.Box(spec.minimum.astype(np.float32), spec.maximum.astype(np.float32),
                                           dtype=np.float32)
        size = sum(int(np.prod(s.shape)) for s in self._env.observation_spec().values())
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (size,), np.float64)

    @property
    def model(self) -> mujoco.MjModel:
        return self._env.physics.model.ptr

    @property
    def data(self) -> mujoco.MjData:
        return self._env.physics.data.ptr

    @property
    def dt(self) -> float:
        return self._env.control_timestep()

    def _obs(self, observation: dict) -> np.ndarray:
        return np.concatenate([np.asarray(v, np.float64).ravel() for v in observation.values()])

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        if seed is not None:  # the task draws its initial state from its own RandomState
            self._env.task.random.seed(seed)
        return self._obs(self._env.reset().observation), {}

    def render(self) -> np.ndarray | None:
        """A [height, width, 3] picture from the domain's camera (`herd evaluate --video`)."""
        if self.render_mode != "rgb_array":
            return None
        from herd.actors import pixels  # GL only where something is rendered

        return pixels.picture(self, *self._render_size)

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        ts = self._env.step(action)
        terminated = ts.last() and ts.discount == 0.0
        return self._obs(ts.observation), float(ts.reward or 0.0), terminated, ts.last() and not terminated, {}


def make(env_id: str, kwargs: dict) -> DMCEnv:
    """The env of a dm_control/<domain>-<task>-v0 id; kwargs are suite.load's (task_kwargs,
    environment_kwargs, visualize_reward) and gymnasium's render_mode ("rgb_array"), width and
    height. ValueError with one line for an unknown task."""
    domain, task = parse_id(env_id)
    try:
        return DMCEnv(domain, task, **kwargs)
    except TypeError as e:
        raise ValueError(f"{env_id}: env.kwargs take task_kwargs, environment_kwargs, visualize_reward, "
                         f"render_mode, width, height ({e})") from None
