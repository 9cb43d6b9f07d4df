"""The fast MuJoCo stepper against plain gymnasium: same observations, rewards, terminations."""

import gymnasium as gym
import numpy as np
import pytest

from herd.actors.config import EnvConfig
from herd.actors.stepper import VecStepper, fast_path_ok


def _reference(env_id, E, seed, actions):
    """gymnasium's own loop: wrapped env.step, reset with the stepper's seeds on episode end."""
    envs = [gym.make(env_id) for _ in range(E)]
    resets = [0] * E
    obs = []
    for i, e in enumerate(envs):
        o, _ = e.reset(seed=seed * 10_007 + i * 101 + resets[i])
        resets[i] += 1
        obs.append(np.asarray(o, np.float32))
    rows = []
    for a in actions:
        step = []
        for i, e in enumerate(envs):
            o, r, term, trunc, _ = e.step(a[i])
            step.append((np.asarray(o, np.float32), np.float32(r), bool(term), term or trunc))
            if term or trunc:
                e.reset(seed=seed * 10_007 + i * 101 + resets[i])
                resets[i] += 1
        rows.append(step)
    return rows


@pytest.mark.parametrize("env_id,steps,threads", [
    ("InvertedPendulum-v5", 300, 1),   # terminates often: exercises autoreset
    ("InvertedPendulum-v5", 300, 2),
    ("Humanoid-v5", 60, 2),
])
def test_matches_gymnasium(env_id, steps, threads):
    E, seed = 3, 7
    st = VecStepper(EnvConfig(id=env_id), E, seed=seed, threads=threads)
    assert st.fast and st.threads == min(threads, E)
    rng = np.random.default_rng(0)
    space = st.envs[0].action_space
    actions = rng.uniform(space.low, space.high, (steps, E, space.shape[0])).astype(np.float32)
    ref = _reference(env_id, E, seed, actions)
    d = st.obs_dim
    ends = 0
    for t in range(steps):
        nxt = np.zeros((E, d), np.float32)
        rew = np.zeros(E, np.float32)
        term = np.zeros(E, np.uint8)
        out = st.step(actions[t], nxt, rew, term)
        assert out.ok.all()
        ends += len(out.episodes)
        for i in range(E):
            o, r, te, _ = ref[t][i]
            np.testing.assert_allclose(nxt[i], o, rtol=1e-6, atol=1e-6)
            assert rew[i] == pytest.approx(r, rel=1e-6, abs=1e-6)
            assert bool(term[i]) == te
    if env_id.startswith("Inverted"):
        assert ends > 0
    st.close()


def test_time_limit_truncates_like_gymnasium():
    st = VecStepper(EnvConfig(id="InvertedPendulum-v5", kwargs={}), 1, seed=0)
    st.limit = 5  # the TimeLimit wrapper's rule, on a short horizon
    lengths = []
    for _ in range(12):
        out = st.step(np.zeros((1, 1), np.float32), np.zeros((1, 4), np.float32),
                      np.zeros(1, np.float32), np.zeros(1, np.uint8))
        lengths += [n for _, n in out.episodes]
    assert lengths and all(n <= 5 for n in lengths)
    st.close()


def test_extra_wrappers_fall_back_to_the_plain_loop():
    env = gym.wrappers.ClipReward(gym.make("InvertedPendulum-v5"), 0.0, 0.5)
    assert not fast_path_ok(env)
    assert fast_path_ok(gym.make("InvertedPendulum-v5"))
    st = VecStepper(EnvConfig(id="InvertedPendulum-v5"), 2, fast=False, threads=4)
    assert not st.fast and st.threads == 1
    out = st.step(np.zeros((2, 1), np.float32), np.zeros((2, 4), np.float32),
                  np.zeros(2, np.float32), np.zeros(2, np.uint8))
    assert out.ok.all()
    st.close()


def test_pixel_envs_step_tiled_as_one_at_a_time():
    """The tiled pixel path against the plain loop of PixelEnv.step: the same rewards,
    terminations, episode ends and autoresets, the same frames (up to the tile's rasterisation)."""
    from herd.actors.config import PixelConfig

    E, seed, cfg = 4, 3, EnvConfig(id="InvertedPendulum-v5", pixels=PixelConfig(size=32))
    tiled, plain = VecStepper(cfg, E, seed=seed), VecStepper(cfg, E, seed=seed)
    plain.tiled = False
    assert tiled.path == "tiled" and plain.path == "plain"
    rng = np.random.default_rng(0)
    ends = 0
    for _ in range(80):  # random actions end InvertedPendulum's episodes within a few steps
        a = rng.uniform(-3, 3, (E, 1)).astype(np.float32)
        rows = []
        for st in (tiled, plain):
            nxt, rew, term = np.zeros_like(st.obs), np.zeros(E, np.float32), np.zeros(E, bool)
            out = st.step(a, nxt, rew, term)
            rows.append((nxt, rew, term, out))
        (n1, r1, t1, o1), (n2, r2, t2, o2) = rows
        np.testing.assert_array_equal(r1, r2)
        np.testing.assert_array_equal(t1, t2)
        np.testing.assert_array_equal(o1.done, o2.done)
        assert o1.episodes == o2.episodes and o1.ok.all() and o2.ok.all()
        for x, y in ((n1, n2), (tiled.obs, plain.obs)):
            diff = np.abs(x.astype(np.int16) - y)
            assert diff.mean() < 0.5 and (diff <= 2).mean() > 0.99
        ends += len(o1.episodes)
    assert ends >= 4
    tiled.close()
    plain.close()


def test_pixel_envs_keep_the_state_the_env_observes_at_each_frame():
    """A pixel stepper's state (at obs) and next_state (at the frame a step wrote, the true final
    one where an episode ended) against gymnasium's own loop of the same env from state, with
    the same seeds, actions and action repeat."""
    from herd.actors.config import PixelConfig

    E, seed, repeat = 3, 5, 2
    cfg = EnvConfig(id="InvertedPendulum-v5", pixels=PixelConfig(size=16, action_repeat=repeat))
    st = VecStepper(cfg, E, seed=seed)
    envs = [gym.make("InvertedPendulum-v5") for _ in range(E)]
    resets = [1] * E
    want = np.stack([e.reset(seed=seed * 10_007 + i * 101)[0] for i, e in enumerate(envs)])
    rng = np.random.default_rng(1)
    ends = 0
    for _ in range(60):
        np.testing.assert_allclose(st.state, want, rtol=0, atol=1e-6)
        a = rng.uniform(-3, 3, (E, 1)).astype(np.float32)
        out = st.step(a, np.zeros_like(st.obs), np.zeros(E, np.float32), np.zeros(E, bool))
        for i, e in enumerate(envs):
            for _ in range(repeat):
                o, _, term, trunc, _ = e.step(a[i])
                if term or trunc:
                    break
            np.testing.assert_allclose(st.next_state[i], o, rtol=0, atol=1e-6)
            assert out.done[i] == (term or trunc)
            if term or trunc:
                o, _ = e.reset(seed=seed * 10_007 + i * 101 + resets[i])
                resets[i] += 1
                ends += 1
            want[i] = o
    assert ends >= 3
    st.close()
