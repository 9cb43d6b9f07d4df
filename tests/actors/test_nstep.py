"""n-step rows against a slow reference computed from whole trajectories."""

from __future__ import annotations

import numpy as np
import pytest

from herd.actors.nstep import NStep
from herd.actors.nstep import transition_rows as _rows

E, OBS, ACT = 3, 2, 1


def simulate(n: int, gamma: float, steps: int, seed: int, push_every: int):
    """Random lockstep trajectories (terminations, truncations, env errors) through NStep,
    collected over pushes of `push_every` steps; plus the one-step log the reference reads."""
    rng = np.random.default_rng(seed)
    acc = NStep(E, OBS, ACT, n, gamma)
    got, log = [], []
    out, at = _rows(E * n * push_every, OBS, ACT, discount=True), 0
    obs = rng.normal(size=(E, OBS)).astype(np.float32)
    for t in range(steps):
        action = rng.normal(size=(E, ACT)).astype(np.float32)
        reward = rng.normal(size=E).astype(np.float32)
        next_obs = rng.normal(size=(E, OBS)).astype(np.float32)
        u = rng.random(E)
        terminated = (u < 0.08).astype(np.uint8)
        done = u < 0.16  # half of the ends are truncations (time limits)
        ok = rng.random(E) > 0.04
        at += acc.add(obs, action, reward, next_obs, terminated, done, ok, out, at)
        log.append((obs.copy(), action, reward, next_obs, terminated, done, ok))
        new_obs = np.where(done[:, None], rng.normal(size=(E, OBS)), next_obs).astype(np.float32)
        new_obs[~ok] = rng.normal(size=(int((~ok).sum()), OBS))  # a recreated env restarts
        obs = new_obs
        if (t + 1) % push_every == 0:  # a push: the accumulator's windows span pushes
            got += [{k: v[i].copy() for k, v in out.items()} for i in range(at)]
            out, at = _rows(E * n * push_every, OBS, ACT, discount=True), 0
    at += acc.flush_all(obs, out, at)
    got += [{k: v[i].copy() for k, v in out.items()} for i in range(at)]
    return got, log, obs


def reference(log, final_obs, n: int, gamma: float):
    """Per env, cut its steps into episodes (an end, an env error, or the stop); a row sums the
    rewards of up to n steps of its own episode and bootstraps where that stops."""
    rows = []
    for e in range(E):
        seg = []  # (obs, action, reward, next_obs, terminated) of the open episode

        def close(seg, boot_last, term_last):
            for j in range(len(seg)):
                k = min(n, len(seg) - j)
                end = j + k - 1
                nxt = seg[end][3] if end < len(seg) - 1 or boot_last is None else boot_last
                term = term_last if end == len(seg) - 1 else 0
                ret = sum(gamma**i * float(seg[j + i][2]) for i in range(k))
                rows.append({"obs": seg[j][0], "action": seg[j][1], "reward": ret, "next_obs": nxt,
                             "terminated": term, "discount": gamma**k})

        for obs, action, reward, next_obs, terminated, done, ok in log:
            if not ok[e]:  # bootstrap from where the env stood before the failed step
                close(seg, obs[e], 0)
                seg = []
                continue
            seg.append((obs[e], action[e], reward[e], next_obs[e], int(terminated[e])))
            if done[e]:
                close(seg, None, int(terminated[e]))
                seg = []
        # full windows leave as they fill; what is open at the stop bootstraps from final_obs
        close(seg, final_obs[e], 0)
    return rows


def key(r):
    return tuple(np.round(np.asarray(r["obs"], np.float64), 5))


@pytest.mark.parametrize(("n", "push_every"), [(1, 4), (2, 3), (3, 5), (5, 2)])
def test_nstep_rows_match_the_reference(n, push_every):
    gamma = 0.9
    got, log, final = simulate(n, gamma, steps=120, seed=n, push_every=push_every)
    want = reference(log, final, n, gamma)
    assert len(got) == len(want) == sum(int(ok.sum()) for *_, ok in log)  # one row per env step
    want_by = {key(r): r for r in want}
    assert len(want_by) == len(want)
    for r in got:
        w = want_by[key(r)]
        np.testing.assert_allclose(r["action"], w["action"])
        np.testing.assert_allclose(r["reward"], w["reward"], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(r["next_obs"], w["next_obs"])
        assert int(r["terminated"]) == w["terminated"]
        np.testing.assert_allclose(r["discount"], w["discount"], rtol=1e-6)
    # terminal rows never bootstrap past the end, truncated ones do with the final obs
    assert any(w["terminated"] for w in want)
    assert n == 1 or any(not w["terminated"] and w["discount"] > 1.0001 * gamma**n for w in want)
