"""gymnasium's v5 Humanoid, Ant and HalfCheetah `step`, batched over E envs.

About a fifth of a Humanoid-v5 `unwrapped.step` is Python around the physics (mass_center
twice, _get_obs' concatenation, contact cost, health checks, the info dict), paid per env.
Here the per-env part shrinks to: set ctrl, `mj_step(nstep=frame_skip)`, `mj_rnePostConstraint`
(as `MujocoEnv._step_mujoco_simulation` does), and copies of the MjData rows the formulas
read into [E, ...] staging arrays; obs, reward and terminated then come from numpy over all
envs at once. The formulas mirror gymnasium 1.x's v5 classes line by line, with every weight,
range and observation switch read from the env instance, so non-default kwargs give
gymnasium's numbers too. Anything else (another class, a subclass, render_mode 'human',
envs of one batch built differently) gets `None` from `build` and keeps the per-env path.
Reset stays gymnasium's own `unwrapped.reset`.
"""

from __future__ import annotations

import mujoco
import numpy as np


def _humanoid(u):
    """Obs/reward/terminated of gymnasium's humanoid_v5.HumanoidEnv.step."""
    mass = u.model.body_mass.copy()
    fw, cw, kw = u._forward_reward_weight, u._ctrl_cost_weight, u._contact_cost_weight
    (klo, khi), (zlo, zhi) = u._contact_cost_range, u._healthy_z_range
    hr, stop, dt = u._healthy_reward, u._terminate_when_unhealthy, u.dt
    skip = 2 if u._exclude_current_positions_from_observation else 0
    parts = [("cinert", u._include_cinert_in_observation is True),
             ("cvel", u._include_cvel_in_observation is True),
             ("qfrc_actuator", u._include_qfrc_actuator_in_observation is True),
             ("cfrc_ext", u._include_cfrc_ext_in_observation is True)]

    def compute(s, action):
        com = np.einsum("b,tebj->tej", mass, s["xipos"])[..., :2] / mass.sum()
        v = (com[1] - com[0]) / dt
        healthy = (zlo < s["qpos"][:, 2]) & (s["qpos"][:, 2] < zhi)
        contact = np.clip(kw * np.square(s["cfrc_ext"]).sum(axis=(1, 2)), klo, khi)
        reward = fw * v[:, 0] + healthy * hr - (cw * np.square(s["ctrl"]).sum(axis=1) + contact)
        E = len(reward)
        obs = [s["qpos"][:, skip:], s["qvel"]]
        obs += [s["qfrc_actuator"][:, 6:] if k == "qfrc_actuator" else s[k][:, 1:].reshape(E, -1)
                for k, on in parts if on]
        return obs, reward, ~healthy & bool(stop)

    return compute, ["xipos"], ["qpos", "qvel", "cinert", "cvel", "qfrc_actuator", "cfrc_ext", "ctrl", "xipos"]


def _ant(u):
    """Obs/reward/terminated of gymnasium's ant_v5.AntEnv.step."""
    fw, cw, kw = u._forward_reward_weight, u._ctrl_cost_weight, u._contact_cost_weight
    (flo, fhi), (zlo, zhi) = u._contact_force_range, u._healthy_z_range
    hr, stop, dt = u._healthy_reward, u._terminate_when_unhealthy, u.dt
    skip = 2 if u._exclude_current_positions_from_observation else 0
    cfrc = bool(u._include_cfrc_ext_in_observation)

    def compute(s, action):
        v = (s["main_xy"][1] - s["main_xy"][0]) / dt
        z = s["qpos"][:, 2]
        healthy = (np.isfinite(s["qpos"]).all(1) & np.isfinite(s["qvel"]).all(1)
                   & (zlo <= z) & (z <= zhi))
        forces = np.clip(s["cfrc_ext"], flo, fhi)
        ctrl = cw * np.sum(np.square(action), axis=1)  # in action's dtype, as gymnasium
        contact = kw * np.sum(np.square(forces), axis=(1, 2))
        reward = fw * v[:, 0] + healthy * hr - (ctrl + contact)
        obs = [s["qpos"][:, skip:], s["qvel"]]
        if cfrc:
            obs.append(forces[:, 1:].reshape(len(reward), -1))
        return obs, reward, ~healthy & bool(stop)

    return compute, ["main_xy"], ["qpos", "qvel", "cfrc_ext", "main_xy"]


def _half_cheetah(u):
    """Obs/reward/terminated of gymnasium's half_cheetah_v5.HalfCheetahEnv.step."""
    fw, cw, dt = u._forward_reward_weight, u._ctrl_cost_weight, u.dt
    skip = 1 if u._exclude_current_positions_from_observation else 0

    def compute(s, action):
        v = (s["qpos"][:, 0] - s["x0"][0, :, 0]) / dt
        reward = fw * v - cw * np.sum(np.square(action), axis=1)
        return [s["qpos"][:, skip:], s["qvel"]], reward, np.zeros(len(reward), bool)

    return compute, ["x0"], ["qpos", "qvel"]


def _classes():
    from gymnasium.envs.mujoco.ant_v5 import AntEnv
    from gymnasium.envs.mujoco.half_cheetah_v5 import HalfCheetahEnv
    from gymnasium.envs.mujoco.humanoid_v5 import HumanoidEnv

    return {HumanoidEnv: _humanoid, AntEnv: _ant, HalfCheetahEnv: _half_cheetah}


def _settings(u) -> tuple:
    """What must agree between envs of one batch for one formula to serve them all."""
    own = tuple(sorted((k, repr(v)) for k, v in vars(u).items()
                       if k.startswith("_") and not k.startswith("_np_random")))
    m = u.model
    return (type(u), u.frame_skip, u.dt, own, m.nq, m.nv, m.nu, m.nbody, m.body_mass.tobytes())


def _views(u) -> dict:
    """Live numpy views of the MjData rows read (valid as long as u.data lives)."""
    d = u.data
    v = {k: getattr(d, k) for k in ("qpos", "qvel", "cinert", "cvel", "qfrc_actuator", "cfrc_ext",
                                   "ctrl", "xipos")}
    if hasattr(u, "_main_body"):
        v["main_xy"] = d.body(u._main_body).xpos[:2]
    v["x0"] = d.qpos[:1]
    return v


class FastLocomotion:
    """Batched step for E envs of one supported class; `build` says whether it applies."""

    def __init__(self, envs, compute, before, after):
        self.compute, self.before, self.after = compute, before, after
        u = envs[0].unwrapped
        self.frame_skip, self.nu, self.key = u.frame_skip, u.model.nu, _settings(u)
        self.obs_dim = int(u.observation_space.shape[0])
        E, ref = len(envs), _views(u)
        self.stage = {k: np.zeros((E, *ref[k].shape)) for k in after if k not in before}
        for k in before:  # [0] before the step, [1] after it
            self.stage[k] = np.zeros((2, E, *ref[k].shape))
        self._bound = [None] * E
        for i, env in enumerate(envs):
            self.rebind(i, env)

    @classmethod
    def build(cls, envs) -> FastLocomotion | None:
        u = envs[0].unwrapped
        make = _classes().get(type(u))
        if make is None or u.render_mode == "human" or "step" in vars(u):
            return None
        key = _settings(u)
        if any(_settings(e.unwrapped) != key for e in envs[1:]):
            return None
        fast = cls(envs, *make(u))
        # A layout this file does not know (a future kwarg) must not pass silently.
        obs, _, _ = fast.compute(fast.stage, np.zeros((len(envs), fast.nu), np.float32))
        return fast if sum(o.shape[1] for o in obs) == fast.obs_dim else None

    def rebind(self, i: int, env) -> bool:
        """Point slot i at env (new after a crash); False when it no longer fits the batch."""
        u = env.unwrapped
        if _settings(u) != self.key:
            return False
        v = _views(u)
        pre = [(self.stage[k][0, i], v[k]) for k in self.before]
        post = [(self.stage[k][1, i] if k in self.before else self.stage[k][i], v[k])
                for k in self.after]
        self._bound[i] = (u.model, u.data, v["ctrl"], pre, post)
        return True

    def physics(self, idx, action, failed: list) -> None:
        """Per-env part for envs idx: mj_step drops the GIL, so chunks may run on threads."""
        step, rne, copy, n = mujoco.mj_step, mujoco.mj_rnePostConstraint, np.copyto, self.frame_skip
        for i in idx:
            m, d, ctrl, pre, post = self._bound[i]
            try:
                for dst, src in pre:
                    copy(dst, src)
                ctrl[:] = action[i]
                step(m, d, n)
                rne(m, d)
                for dst, src in post:
                    copy(dst, src)
            except Exception as e:  # noqa: BLE001 -- the caller recreates env i
                failed.append((i, e))

    def finish(self, action, next_obs, reward) -> tuple[np.ndarray, np.ndarray]:
        """Obs and reward of every env into the caller's rows; (float64 reward, terminated)."""
        obs, r, term = self.compute(self.stage, action)
        np.concatenate(obs, axis=1, out=next_obs, casting="same_kind")
        reward[:] = r
        return r, term
