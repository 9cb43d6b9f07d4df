"""Domain randomization: an env's MuJoCo model drawn anew around its own values at every reset.

`Randomized` wraps any env whose `unwrapped` has a MuJoCo `model` (gymnasium's MuJoCo envs, a
user's own MujocoEnv, actors/dmc.py's DeepMind Control adapter). It keeps the model's values as
written (`Randomizer.nominal`) and, before each reset, writes nominal values scaled or offset by
a draw (env.randomize's ranges, actors/config.py). Each draw follows from the config's seed and
the episode's reset seed alone, each field from its own stream, so an episode's model is the
same whatever came before it and whichever other fields are set; evaluation draws its held-out
set from `heldout_seed`, disjoint from training's.

What is drawn is what MuJoCo reads every step or every frame: lights, geom, site and material
colours, cameras (a free camera's MjvCamera once `watch` names it), masses and inertias,
friction, damping, actuator gains, gravity. Textures are uploaded once per model into the GL
context that every env of that model shares (actors/pixels.py), so a floor's or a skin's texture
is tinted through its material's colour, and a skybox keeps its own.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import mujoco
import numpy as np

from herd.actors.config import RandomizeConfig

_AFFINE = int(mujoco.mjtBias.mjBIAS_AFFINE)
# each field's own stream: SeedSequence([seed, reset seed, index])
_STREAM = {name: i for i, name in enumerate(RandomizeConfig.model_fields)
           if name not in ("seed", "heldout_seed", "train")}
PHYSICS = ("mass", "friction", "damping", "actuator_gain", "gravity")  # what physics() tells
_UNSEEDED = 1 << 40  # reset seeds of resets given none start here: apart from any explicit one


def _quat_xyz(degrees: np.ndarray) -> np.ndarray:
    """[n, 4] quaternions (w, x, y, z) of rotations by degrees[:, 0..2] about x, then y, then z."""
    half = np.deg2rad(degrees) / 2
    c, s = np.cos(half), np.sin(half)
    out = np.zeros((len(degrees), 4))
    for i in range(len(degrees)):
        q = np.array([1.0, 0, 0, 0])
        for axis in range(3):
            step = np.zeros(4)
            step[0], step[1 + axis] = c[i, axis], s[i, axis]
            mujoco.mju_mulQuat(q, q.copy(), step)
        out[i] = q
    return out


class Randomizer:
    """The nominal values of one MjModel; `apply(draw)` writes a drawn model, `apply(None)`
    the nominal one back."""

    def __init__(self, model: mujoco.MjModel, cfg: RandomizeConfig):
        self.model, self.cfg = model, cfg
        m = model
        self.nominal: dict[str, Any] = {
            "light_dir": m.light_dir.copy(), "light_diffuse": m.light_diffuse.copy(),
            "light_ambient": m.light_ambient.copy(),
            "headlight_diffuse": m.vis.headlight.diffuse.copy(),
            "headlight_ambient": m.vis.headlight.ambient.copy(),
            "geom_rgba": m.geom_rgba.copy(), "site_rgba": m.site_rgba.copy(), "mat_rgba": m.mat_rgba.copy(),
            "cam_pos": m.cam_pos.copy(), "cam_quat": m.cam_quat.copy(), "cam_fovy": m.cam_fovy.copy(),
            "fovy": float(m.vis.global_.fovy),
            "body_mass": m.body_mass.copy(), "body_inertia": m.body_inertia.copy(),
            "geom_friction": m.geom_friction.copy(), "dof_damping": m.dof_damping.copy(),
            "actuator_gainprm": m.actuator_gainprm.copy(), "actuator_biasprm": m.actuator_biasprm.copy(),
            "gravity": m.opt.gravity.copy(),
        }
        self.camera: mujoco.MjvCamera | None = None
        self._camera_nominal: tuple | None = None
        self.last: dict[str, np.ndarray] = {}

    def watch(self, camera: mujoco.MjvCamera) -> None:
        """A free (or tracking) camera a frame is seen through: jittered with the model's cameras."""
        self.camera = camera
        self._camera_nominal = (camera.lookat.copy(), float(camera.azimuth), float(camera.elevation))

    def _shapes(self) -> dict[str, tuple[int, ...]]:
        m = self.model
        lights = m.nlight + 1  # the model's lights and the headlight (row 0)
        return {"light_dir": (m.nlight, 3), "light_diffuse": (lights, 3), "light_ambient": (lights, 1),
                "geom_rgb": (m.ngeom + m.nsite, 3), "material_rgb": (m.nmat, 3),
                "camera_pos": (m.ncam + 1, 3), "camera_angle": (m.ncam + 1, 3), "camera_fovy": (m.ncam + 1,),
                "mass": (m.nbody - 1, 1), "friction": (m.ngeom, 1), "damping": (m.nv,),
                "actuator_gain": (m.nu,), "gravity": (1,)}

    def draw(self, reset_seed: int) -> dict[str, np.ndarray]:
        """The draw of an episode reset with `reset_seed`: per field set in the config, its
        factors or offsets (row -1 or 0 of a camera's and a light's: the free camera's, the
        headlight's)."""
        out = {}
        for name, shape in self._shapes().items():
            r = getattr(self.cfg, name)
            if r is not None:
                rng = np.random.default_rng([self.cfg.seed, reset_seed & ((1 << 63) - 1), _STREAM[name]])
                out[name] = rng.uniform(r[0], r[1], size=shape)
        return out

    def apply(self, draw: dict[str, np.ndarray] | None) -> None:
        """Nominal values, changed by `draw` where it has a field (None: the model as written)."""
        m, n, d = self.model, self.nominal, draw or {}
        self.last = dict(d)
        one = {name: np.ones(shape) for name, shape in self._shapes().items()}
        zero = {name: np.zeros(shape) for name, shape in self._shapes().items()}
        # looks
        direction = n["light_dir"] + d.get("light_dir", zero["light_dir"])
        m.light_dir[:] = direction / np.maximum(np.linalg.norm(direction, axis=1, keepdims=True), 1e-9)
        diffuse = d.get("light_diffuse", one["light_diffuse"])
        ambient = d.get("light_ambient", zero["light_ambient"])
        m.vis.headlight.diffuse[:] = np.clip(n["headlight_diffuse"] * diffuse[0], 0, 1)
        m.vis.headlight.ambient[:] = np.clip(n["headlight_ambient"] + ambient[0], 0, 1)
        m.light_diffuse[:] = np.clip(n["light_diffuse"] * diffuse[1:], 0, 1)
        m.light_ambient[:] = np.clip(n["light_ambient"] + ambient[1:], 0, 1)
        rgb = d.get("geom_rgb", zero["geom_rgb"])
        m.geom_rgba[:, :3] = np.clip(n["geom_rgba"][:, :3] + rgb[:m.ngeom], 0, 1)
        m.site_rgba[:, :3] = np.clip(n["site_rgba"][:, :3] + rgb[m.ngeom:], 0, 1)
        m.mat_rgba[:, :3] = np.clip(n["mat_rgba"][:, :3] + d.get("material_rgb", zero["material_rgb"]), 0, 1)
        self._cameras(d.get("camera_pos", zero["camera_pos"]), d.get("camera_angle", zero["camera_angle"]),
                      d.get("camera_fovy", zero["camera_fovy"]))
        # physics
        mass = d.get("mass", one["mass"])
        m.body_mass[1:] = n["body_mass"][1:] * mass[:, 0]
        m.body_inertia[1:] = n["body_inertia"][1:] * mass
        m.geom_friction[:] = n["geom_friction"] * d.get("friction", one["friction"])
        m.dof_damping[:] = n["dof_damping"] * d.get("damping", one["damping"])
        gain = d.get("actuator_gain", one["actuator_gain"])
        m.actuator_gainprm[:, 0] = n["actuator_gainprm"][:, 0] * gain
        servo = m.actuator_biastype == _AFFINE  # kp and kv of position/velocity servos go with the gain
        m.actuator_biasprm[:] = n["actuator_biasprm"]
        m.actuator_biasprm[servo, 1:3] = n["actuator_biasprm"][servo, 1:3] * gain[servo, None]
        m.opt.gravity[:] = n["gravity"] * d.get("gravity", one["gravity"])[0]

    def _cameras(self, pos: np.ndarray, angle: np.ndarray, fovy: np.ndarray) -> None:
        m, n = self.model, self.nominal
        m.cam_pos[:] = n["cam_pos"] + pos[:m.ncam]
        for i, q in enumerate(_quat_xyz(angle[:m.ncam])):
            mujoco.mju_mulQuat(m.cam_quat[i], n["cam_quat"][i], q)
        m.cam_fovy[:] = n["cam_fovy"] + fovy[:m.ncam]
        m.vis.global_.fovy = n["fovy"] + fovy[-1]
        if self.camera is not None and self.camera.type != mujoco.mjtCamera.mjCAMERA_FIXED:
            lookat, azimuth, elevation = self._camera_nominal
            self.camera.lookat[:] = lookat + pos[-1]
            self.camera.azimuth = azimuth + angle[-1, 0]
            self.camera.elevation = elevation + angle[-1, 1]

    def physics(self) -> np.ndarray:
        """The episode's physics as drawn: the factors of the physics fields set in the config,
        flat, in config order (1 where the model is as written, e.g. after `apply(None)`). A
        learner whose critics read the state gets them after what the env observes."""
        shapes = self._shapes()
        parts = [np.asarray(self.last.get(k, np.ones(shapes[k])), np.float32).ravel()
                 for k in PHYSICS if getattr(self.cfg, k) is not None]
        return np.concatenate(parts) if parts else np.zeros(0, np.float32)


class Randomized(gym.Wrapper):
    """The env with its model drawn anew before every reset (reset(seed=s): the draw of s;
    without a seed, the draws of a count of its own)."""

    def __init__(self, env: gym.Env, cfg: RandomizeConfig):
        super().__init__(env)
        model = getattr(env.unwrapped, "model", None)
        if not isinstance(model, mujoco.MjModel):
            raise TypeError(f"{type(env.unwrapped).__name__}: env.randomize needs a MuJoCo env "
                            "(unwrapped.model)")
        self.randomizer = Randomizer(model, cfg)
        self._unseeded = _UNSEEDED

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict]:
        if seed is None:
            self._unseeded += 1
        r = self.randomizer
        r.apply(r.draw(self._unseeded if seed is None else int(seed)))
        return self.env.reset(seed=seed, options=options)

    def physics(self) -> np.ndarray:
        """This episode's physics factors (Randomizer.physics)."""
        return self.randomizer.physics()
