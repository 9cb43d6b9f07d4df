"""A two-joint planar arm that learns to put its fingertip on a target: a gymnasium MuJoCo env
built on its own model (arm.xml beside this file)."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import numpy as np
from gymnasium import spaces, utils
from gymnasium.envs.mujoco import MujocoEnv

MODEL = Path(__file__).with_name("arm.xml")
REACH = 0.4
"""Distances are measured against this (metres): the reward is 0 this far from the target."""
SPEED_LIMIT = 8.0
"""rad/s: a joint spinning faster ends the episode, as a real arm's safety stop would."""


class ArmEnv(MujocoEnv, utils.EzPickle):
    """Observation (10): cos and sin of both joint angles, both joint velocities, the fingertip's
    offset from the target (x, y) and the target's position (x, y). Action (2): the shoulder's
    and the elbow's motor, each in [-1, 1]. Reward per step: 1 - sqrt(distance / 0.4), less a
    small cost of effort; 1 at the target, 0 at 40 cm. An episode is 100 steps (2 s)."""

    metadata: ClassVar[dict] = {"render_modes": ["human", "rgb_array", "depth_array"]}  # + render_fps below

    def __init__(self, random_target: bool = False, frame_skip: int = 2, camera_name: str = "top",
                 **kwargs):
        utils.EzPickle.__init__(self, random_target, frame_skip, camera_name, **kwargs)
        self.random_target = random_target
        obs_space = spaces.Box(-np.inf, np.inf, shape=(10,), dtype=np.float64)
        MujocoEnv.__init__(self, str(MODEL), frame_skip, observation_space=obs_space,
                           camera_name=camera_name, **kwargs)
        self.metadata = {**self.metadata, "render_fps": round(1.0 / self.dt)}  # frames per second of video
        self._target_site = self.model.site("target").id
        self._tip_site = self.model.site("fingertip").id

    def step(self, action):
        self.do_simulation(action, self.frame_skip)
        distance = float(np.linalg.norm(self._offset()))
        effort = 0.01 * float(np.square(action).sum())
        reward = 1.0 - np.sqrt(min(distance / REACH, 1.0)) - effort
        # a state the arm must not be in ends the episode; the reward it forgoes is the penalty
        terminated = bool(np.abs(self.data.qvel).max() > SPEED_LIMIT)
        if self.render_mode == "human":
            self.render()
        # the 100-step time limit is gymnasium's TimeLimit wrapper (max_episode_steps at register)
        return self._obs(), reward, terminated, False, {"distance": distance, "effort": effort}

    def reset_model(self):
        if self.random_target:  # anywhere the fingertip can reach
            radius, angle = self.np_random.uniform(0.08, 0.22), self.np_random.uniform(-np.pi, np.pi)
            self.model.site_pos[self._target_site, :2] = radius * np.cos(angle), radius * np.sin(angle)
        qpos = np.array([self.np_random.uniform(-np.pi, np.pi), self.np_random.uniform(-1.0, 1.0)])
        qvel = self.np_random.uniform(-0.01, 0.01, size=self.model.nv)
        self.set_state(qpos, qvel)
        return self._obs()

    def _offset(self) -> np.ndarray:
        return (self.data.site_xpos[self._tip_site] - self.data.site_xpos[self._target_site])[:2]

    def _obs(self) -> np.ndarray:
        angles, target = self.data.qpos, self.data.site_xpos[self._target_site][:2]
        return np.concatenate([np.cos(angles), np.sin(angles), self.data.qvel, self._offset(), target])
