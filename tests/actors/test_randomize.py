"""Domain randomization (actors/randomize.py) on real MuJoCo models: draws follow from the seed
and stay in their ranges, a randomized frame differs from the nominal one, physical parameters
change in the MjModel and come back to the model as written."""

from __future__ import annotations

import sys

import mujoco
import numpy as np
import pytest

from herd.actors.config import OFFSETS, SCALES, EnvConfig, PixelConfig, RandomizeConfig
from herd.actors.envs import make_env
from herd.actors.randomize import Randomized, Randomizer
from herd.actors.stepper import VecStepper
from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "examples" / "myrobot"))  # the own-robot example's package

ENVS = {"gymnasium": ("InvertedPendulum-v5", None), "own robot": ("MyRobot-v0", "myrobot"),
        "dm_control": ("dm_control/cartpole-swingup-v0", None)}
VISUAL = ("light_dir", "light_diffuse", "light_ambient", "geom_rgb", "material_rgb", "camera_pos",
          "camera_angle", "camera_fovy")
PHYSICAL = ("mass", "friction", "damping", "actuator_gain", "gravity")


def cfg_of(kind: str, pixels: bool = False, **randomize) -> EnvConfig:
    env_id, module = ENVS[kind]
    return EnvConfig(id=env_id, module=module, pixels=PixelConfig(size=32) if pixels else None,
                     randomize=RandomizeConfig(**randomize) if randomize else None)


def only(fields: tuple[str, ...]) -> dict:
    """A RandomizeConfig's keyword arguments that leave every field outside `fields` nominal."""
    return {name: None for name in (*SCALES, *OFFSETS) if name not in fields}


def test_fields_are_split_into_scales_and_offsets():
    assert sorted(SCALES + OFFSETS) == sorted(VISUAL + PHYSICAL)


@pytest.mark.parametrize("kind", ENVS)
def test_draws_follow_from_the_seed_and_stay_in_their_ranges(kind):
    model = make_env(cfg_of(kind)).unwrapped.model
    cfg = RandomizeConfig(seed=5, heldout_seed=6)
    a, b = Randomizer(model, cfg).draw(123), Randomizer(model, cfg).draw(123)
    assert set(a) == set(VISUAL + PHYSICAL)
    for name, values in a.items():
        assert np.array_equal(values, b[name]), name  # another Randomizer, the same draw
        lo, hi = getattr(cfg, name)
        assert values.size == 0 or (values.min() >= lo and values.max() <= hi), name
    other_episode = Randomizer(model, cfg).draw(124)
    other_seed = Randomizer(model, cfg.model_copy(update={"seed": 7})).draw(123)
    for other in (other_episode, other_seed):
        assert not np.array_equal(a["mass"], other["mass"])
    # each field has its own stream: leaving the looks nominal does not move the physics' draw
    physics_only = Randomizer(model, RandomizeConfig(seed=5, heldout_seed=6, **only(PHYSICAL))).draw(123)
    assert set(physics_only) == set(PHYSICAL)
    assert all(np.array_equal(physics_only[k], a[k]) for k in PHYSICAL)


@pytest.mark.parametrize("kind", ENVS)
def test_physical_parameters_change_and_come_back(kind):
    env = make_env(cfg_of(kind, **only(PHYSICAL)))
    written = make_env(cfg_of(kind)).unwrapped.model  # the model as its XML has it
    model = env.unwrapped.model
    assert isinstance(env, Randomized) and model is not written
    env.reset(seed=3)
    r = env.randomizer
    assert not np.allclose(model.body_mass[1:], written.body_mass[1:])
    np.testing.assert_allclose(model.body_mass[1:], written.body_mass[1:] * r.last["mass"][:, 0])
    np.testing.assert_allclose(model.body_inertia[1:], written.body_inertia[1:] * r.last["mass"])
    np.testing.assert_allclose(model.geom_friction, written.geom_friction * r.last["friction"])
    np.testing.assert_allclose(model.dof_damping, written.dof_damping * r.last["damping"])
    np.testing.assert_allclose(model.actuator_gainprm[:, 0], written.actuator_gainprm[:, 0] * r.last["actuator_gain"])
    np.testing.assert_allclose(model.opt.gravity, written.opt.gravity * r.last["gravity"][0])
    assert not np.allclose(model.actuator_gainprm[:, 0], written.actuator_gainprm[:, 0])
    first = model.body_mass.copy()
    env.reset(seed=4)  # the next episode's draw is made from the nominal values, not the last draw's
    np.testing.assert_allclose(model.body_mass[1:], written.body_mass[1:] * r.last["mass"][:, 0])
    assert not np.array_equal(model.body_mass, first)
    r.apply(None)
    for name in ("body_mass", "body_inertia", "geom_friction", "dof_damping", "actuator_gainprm",
                 "actuator_biasprm", "geom_rgba", "light_dir", "cam_pos", "cam_quat"):
        assert np.array_equal(getattr(model, name), getattr(written, name)), name
    assert np.array_equal(model.opt.gravity, written.opt.gravity)


def test_a_servos_kp_and_kv_scale_with_its_gain():
    model = mujoco.MjModel.from_xml_string("""<mujoco><worldbody><body><joint name="j" type="hinge"/>
        <geom size="0.1"/></body></worldbody><actuator><position joint="j" kp="40" kv="3"/>
        <motor joint="j" gear="2"/></actuator></mujoco>""")
    r = Randomizer(model, RandomizeConfig(**only(("actuator_gain",))))
    draw = r.draw(0)
    r.apply(draw)
    g = draw["actuator_gain"]
    np.testing.assert_allclose(model.actuator_gainprm[:, 0], [40 * g[0], 1 * g[1]])
    np.testing.assert_allclose(model.actuator_biasprm[0, 1:3], [-40 * g[0], -3 * g[0]])
    assert np.all(model.actuator_biasprm[1] == 0)  # a motor has no bias to scale


@pytest.mark.parametrize("kind", ENVS)
def test_a_randomized_frame_differs_from_the_nominal_one(kind):
    nominal = make_env(cfg_of(kind, pixels=True))
    looks = make_env(cfg_of(kind, pixels=True, **only(VISUAL)))
    physics = make_env(cfg_of(kind, pixels=True, **only(PHYSICAL)))
    frames = [env.reset(seed=11)[0].astype(np.int16) for env in (nominal, looks, physics)]
    assert (frames[1] != frames[0]).any(axis=0).mean() > 0.05  # InvertedPendulum: a black backdrop
    # the physics alone leaves the first frame (same start pose) as it is: the looks made the change
    assert np.array_equal(frames[2], frames[0])
    again = make_env(cfg_of(kind, pixels=True, **only(VISUAL)))
    assert np.array_equal(again.reset(seed=11)[0], frames[1])  # the same draw, the same frame
    assert not np.array_equal(looks.reset(seed=12)[0], frames[1])


def test_the_state_a_privileged_critic_reads_ends_with_the_drawn_physics():
    from herd.actors.envs import describe

    plain = make_env(cfg_of("own robot", pixels=True))
    env = make_env(cfg_of("own robot", pixels=True, **only(("mass", "actuator_gain"))))
    looks = make_env(cfg_of("own robot", pixels=True, **only(VISUAL)))
    observed = len(plain.state)
    model = env.unwrapped.model
    extra = (model.nbody - 1) + model.nu  # a factor per body's mass and per actuator's gain
    assert describe(env)["state_dim"] == observed + extra == len(env.state)
    assert describe(looks)["state_dim"] == observed  # the looks are not the critics' business
    env.reset(seed=5)
    draw = env.env.randomizer.draw(5)
    np.testing.assert_allclose(env.state[observed:], np.concatenate(
        [draw["mass"].ravel(), draw["actuator_gain"].ravel()]), rtol=1e-6)
    env.step(env.action_space.sample())  # every step's state carries the episode's factors
    np.testing.assert_allclose(env.state[observed:observed + model.nbody - 1], draw["mass"].ravel(),
                               rtol=1e-6)
    env.env.randomizer.apply(None)
    np.testing.assert_array_equal(env.env.physics(), np.ones(extra, np.float32))


def test_a_free_camera_is_jittered_and_restored():
    """InvertedPendulum is seen through gymnasium's free camera, not one of the model's."""
    env = make_env(cfg_of("gymnasium", pixels=True, **only(("camera_pos", "camera_angle"))))
    cam = env.camera
    assert cam.type != mujoco.mjtCamera.mjCAMERA_FIXED
    r = env.env.randomizer
    lookat, azimuth = cam.lookat.copy(), cam.azimuth
    env.reset(seed=1)
    assert not np.allclose(cam.lookat, lookat) and cam.azimuth != azimuth
    r.apply(None)
    assert np.array_equal(cam.lookat, lookat) and cam.azimuth == azimuth


def test_each_stepped_env_draws_its_own_model_reproducibly():
    cfg = cfg_of("own robot", pixels=True, seed=0)  # every field at its default range

    def masses(seed):
        st = VecStepper(cfg, 3, seed=seed)
        out = np.stack([e.unwrapped.model.body_mass.copy() for e in st.envs])
        st.close()
        return out

    a = masses(0)
    assert len({tuple(m) for m in a}) == 3  # three envs, three draws
    assert np.array_equal(a, masses(0)) and not np.array_equal(a, masses(1))


def test_a_model_that_is_not_mujoco_is_refused():
    from herd.actors.envs import EnvError

    with pytest.raises(EnvError, match="env.randomize needs a MuJoCo env"):
        make_env(EnvConfig(id="Pendulum-v1", randomize=RandomizeConfig()))
