"""A pixel actor's frame numbering and rows (actors/frames.py) against a plain reference: the
stacks the learner rebuilds from what was sent are the stacks the policy acted on, every frame
travels once (its state beside it), and n-step rows point k frames on in their episode."""

import numpy as np
import pytest

from herd.actors.frames import FrameRows

SHAPE = (3, 4, 4)  # one tiny RGB frame
FRAME = int(np.prod(SHAPE))


def state_of(frames: np.ndarray) -> np.ndarray:
    """The fake envs' state at a frame: its first two pixels, so a frame and its state pair up."""
    return frames[..., :2].astype(np.float32)


class FakeSteps:
    """E envs of random frames: episodes end at random (terminated or truncated), and now and
    then an env raises (no row; it is recreated and starts a new episode)."""

    def __init__(self, E: int, seed: int):
        self.rng = np.random.default_rng(seed)
        self.obs = self.rng.integers(0, 256, (E, FRAME), dtype=np.uint8)

    def step(self, next_frames, reward, terminated):
        E = len(self.obs)
        ok = self.rng.random(E) > 0.03
        done = ok & (self.rng.random(E) < 0.15)
        frames = self.rng.integers(0, 256, (E, FRAME), dtype=np.uint8)
        next_frames[ok] = frames[ok]
        reward[:] = self.rng.normal(size=E)
        terminated[:] = done & (self.rng.random(E) < 0.5)
        fresh = ~ok | done
        self.obs[ok & ~done] = frames[ok & ~done]
        self.obs[fresh] = self.rng.integers(0, 256, (int(fresh.sum()), FRAME), dtype=np.uint8)
        return ok, done


def rebuild(number: int, frames: dict, prev: dict, S: int) -> np.ndarray:
    """The stack of frame `number` from the links sent: [prev(prev(n)), prev(n), n]."""
    chain = [number]
    while len(chain) < S:
        p = prev[chain[-1]]
        chain.append(chain[-1] if p < 0 else p)
    return np.concatenate([frames[n] for n in reversed(chain)], axis=0)


@pytest.mark.parametrize("n_step", [1, 3])
def test_stacks_rebuilt_from_the_wire_are_what_the_policy_saw(n_step):
    E, S, gamma = 5, 3, 0.9
    env = FakeSteps(E, seed=n_step)
    fr = FrameRows(env.obs.copy(), SHAPE, S, act_dim=2, rows=4 * E, n_step=n_step, gamma=gamma,
                   state=state_of(env.obs))
    acted = {}  # (env, action[0] as an id) -> the stack acted on
    episode = {}  # frame number -> (episode id, position in it): the reference's own books
    ep_of = list(range(E))
    pos = [0] * E
    ep_next = E
    for e in range(E):
        episode[int(fr.cur[e])] = (e, 0)
    batches, ok_steps = [], 0
    for t in range(400):
        stacks = fr.stacks().copy()
        action = np.stack([np.arange(E) + 1000.0 * t, np.zeros(E)], axis=1).astype(np.float32)
        for e in range(E):
            acted[float(action[e, 0])] = stacks[e]
        fr.begin(action)
        ok, done = env.step(fr.next_frames, fr.one["reward"], fr.one["terminated"])
        ok_steps += int(ok.sum())
        before = fr.next_number
        fr.end(env.obs, ok, done, state_of(env.obs), state_of(fr.next_frames))
        # the reference numbering: new frames of live envs in env order, then fresh episodes
        number = before
        for e in np.flatnonzero(ok):
            pos[e] += 1
            episode[number] = (ep_of[e], pos[e])
            number += 1
        for e in np.flatnonzero(~ok | done):
            ep_of[e], pos[e] = ep_next, 0
            ep_next += 1
            episode[number] = (ep_of[e], 0)
            number += 1
        assert number == fr.next_number
        if fr.full():  # take() gives views the next step overwrites: the client packs them at once
            batches.append({k: np.copy(v) for k, v in fr.take().items()})
    fr.flush()
    batches.append(fr.take())

    frames, prev, expected_first = {}, {}, 0
    for b in batches:
        assert b["first_frame"] == expected_first  # numbers run on, each frame once
        np.testing.assert_array_equal(b["frame_state"], state_of(b["frames"].reshape(-1, FRAME)))
        for i, (f, p) in enumerate(zip(b["frames"], b["frame_prev"])):
            frames[expected_first + i], prev[expected_first + i] = f.reshape(-1, *SHAPE[1:]), int(p)
        expected_first += len(b["frames"])
        newest = expected_first - 1
        assert np.all(b["obs_frame"] <= newest) and np.all(b["next_frame"] <= newest)
        assert np.all(b["obs_frame"] >= 0)
    assert len(frames) == fr.next_number
    for n, p in prev.items():  # links stay inside an episode, one position back
        ep, at = episode[n]
        assert (p == -1) == (at == 0)
        if p >= 0:
            assert episode[p] == (ep, at - 1)
    rows = 0
    for b in batches:
        for i in range(len(b["reward"])):
            rows += 1
            o, nx = int(b["obs_frame"][i]), int(b["next_frame"][i])
            np.testing.assert_array_equal(rebuild(o, frames, prev, S), acted[float(b["action"][i, 0])])
            k = 1 if n_step == 1 else round(np.log(b["discount"][i]) / np.log(gamma))
            assert 1 <= k <= n_step
            (ep, at), (ep2, at2) = episode[o], episode[nx]
            assert ep == ep2 and at2 == at + k
    assert rows == ok_steps  # every env step that did not raise is exactly one row
