"""The batched v5 locomotion step against gymnasium's own wrapped loop, step by step.

float64 rows, so the 1e-6 tolerance checks the formulas, not float32 rounding. Short time
limits (max_episode_steps) make truncation happen next to the terminations.
"""

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.envs.mujoco.humanoid_v5 import HumanoidEnv

from herd.actors.config import EnvConfig
from herd.actors.fast_locomotion import FastLocomotion
from herd.actors.stepper import VecStepper


def _compare(env_id, kwargs, E, steps, threads=1, seed=3):
    st = VecStepper(EnvConfig(id=env_id, kwargs=kwargs), E, seed=seed, threads=threads)
    assert st.path == "batched"
    ref = [gym.make(env_id, **kwargs) for _ in range(E)]
    resets = [0] * E
    for i, e in enumerate(ref):
        o, _ = e.reset(seed=seed * 10_007 + i * 101 + resets[i])
        resets[i] += 1
        np.testing.assert_allclose(st.obs[i], o, rtol=1e-6, atol=1e-6)
    space = ref[0].action_space
    actions = np.random.default_rng(1).uniform(space.low, space.high, (steps, E, space.shape[0]))
    actions = actions.astype(np.float32)
    n_term = n_trunc = 0
    for t in range(steps):
        nxt, rew, term = np.zeros((E, st.obs_dim)), np.zeros(E), np.zeros(E, np.uint8)
        out = st.step(actions[t], nxt, rew, term)
        assert out.ok.all()
        lengths = [n for _, n in out.episodes]
        ended = []
        for i, e in enumerate(ref):
            o, r, te, tr, _ = e.step(actions[t, i])
            np.testing.assert_allclose(nxt[i], o, rtol=1e-6, atol=1e-6)
            assert rew[i] == pytest.approx(r, rel=1e-6, abs=1e-6)
            assert bool(term[i]) is bool(te)
            if te or tr:
                ended.append(e._elapsed_steps)
                n_term, n_trunc = n_term + bool(te), n_trunc + (bool(tr) and not te)
                e.reset(seed=seed * 10_007 + i * 101 + resets[i])
                resets[i] += 1
            np.testing.assert_allclose(st.obs[i], e.unwrapped._get_obs(), rtol=1e-6, atol=1e-6)
        assert lengths == ended  # same episodes end, in env order, with the same lengths
    st.close()
    return n_term, n_trunc


@pytest.mark.parametrize("env_id,kwargs,E,steps,threads", [
    ("Humanoid-v5", {"max_episode_steps": 22}, 4, 600, 1),
    ("Humanoid-v5", {"max_episode_steps": 22}, 4, 150, 2),
    ("Ant-v5", {"max_episode_steps": 60, "healthy_z_range": (0.3, 0.9)}, 4, 500, 1),
    ("HalfCheetah-v5", {"max_episode_steps": 70}, 3, 400, 1),
])
def test_matches_gymnasium(env_id, kwargs, E, steps, threads):
    n_term, n_trunc = _compare(env_id, kwargs, E, steps, threads)
    assert n_trunc > 0
    if env_id != "HalfCheetah-v5":
        assert n_term > 0


@pytest.mark.parametrize("env_id,kwargs", [
    ("Humanoid-v5", dict(max_episode_steps=30, exclude_current_positions_from_observation=False,
                         include_cinert_in_observation=False, include_cfrc_ext_in_observation=False,
                         contact_cost_range=(0.0, 1e-3), healthy_z_range=(0.9, 2.0),
                         forward_reward_weight=2.0, ctrl_cost_weight=0.3, frame_skip=3)),
    ("Humanoid-v5", dict(max_episode_steps=30, terminate_when_unhealthy=False,
                         include_cvel_in_observation=False, include_qfrc_actuator_in_observation=False)),
    ("Ant-v5", dict(max_episode_steps=30, main_body="torso", include_cfrc_ext_in_observation=False,
                    exclude_current_positions_from_observation=False, contact_force_range=(-0.5, 2.0))),
    ("HalfCheetah-v5", dict(max_episode_steps=30, exclude_current_positions_from_observation=False,
                            forward_reward_weight=0.5)),
])
def test_non_default_kwargs(env_id, kwargs):
    _compare(env_id, kwargs, 2, 120)


class _Tweaked(HumanoidEnv):
    def step(self, action):
        o, r, te, tr, info = super().step(action)
        return o, r + 1.0, te, tr, info


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # Humanoid-v4, on purpose
def test_unknown_classes_keep_the_per_env_path():
    assert FastLocomotion.build([_Tweaked()]) is None
    assert FastLocomotion.build([gym.make("Humanoid-v4")]) is None
    assert FastLocomotion.build([gym.make("Humanoid-v5", ctrl_cost_weight=0.1),
                                 gym.make("Humanoid-v5", ctrl_cost_weight=0.2)]) is None
    st = VecStepper(EnvConfig(id="InvertedPendulum-v5"), 2)
    assert st.path == "unwrapped"
    st.close()
    assert VecStepper(EnvConfig(id="Humanoid-v5"), 1, fast=False).path == "plain"


def test_a_failing_env_is_recreated_and_rebound():
    st = VecStepper(EnvConfig(id="HalfCheetah-v5"), 3, seed=0)
    old = st.envs[1]
    st._loco._bound[1] = (None,) + st._loco._bound[1][1:]  # mj_step(None, ...) raises
    out = st.step(np.zeros((3, 6), np.float32), np.zeros((3, st.obs_dim)), np.zeros(3),
                  np.zeros(3, np.uint8))
    assert out.ok.tolist() == [True, False, True] and st.env_errors == 1
    assert st.envs[1] is not old and st.path == "batched"
    out = st.step(np.zeros((3, 6), np.float32), np.zeros((3, st.obs_dim)), np.zeros(3),
                  np.zeros(3, np.uint8))
    assert out.ok.all()
    st.close()
