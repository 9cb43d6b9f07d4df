"""E environments stepped as one batch, writing transitions straight into row-aligned arrays.

Four ways to step, one interface (`VecStepper.step`):

* MuJoCo fast path, for any gymnasium id whose env is a `MujocoEnv` under gymnasium's default
  wrappers only (TimeLimit, OrderEnforcing, PassiveEnvChecker): each env's own *unwrapped*
  `step` is called, so rewards, terminations and observations are gymnasium's, computed by the
  same code. The wrappers' per-step Python is replaced by one episode counter (the TimeLimit).
  About 70% of a Humanoid step is `mj_step`, which releases the GIL: with `threads > 1` the
  envs are split over a small thread pool and the physics of different envs runs on different
  cores at once (threaded mj_step, below gymnasium's Python loop).
* Batched locomotion path, inside the fast path, for gymnasium's v5 Humanoid, Ant and
  HalfCheetah classes (actors/fast_locomotion.py): the Python of their `step` is redone with
  numpy over all E envs, leaving per env only ctrl, mj_step and a few row copies.
* Tiled pixel path, for pixel envs (actors/pixels.py): every env's action repeat, then the
  frames of all of them rendered side by side in one offscreen buffer and read back at once.
* Plain loop, for everything else (Ray-registered creators, extra wrappers, non-MuJoCo envs):
  `env.step` of the fully wrapped env, one env after the other.

Autoreset is done here: the row written for a finished episode holds its true final
observation as `next_obs`, and `obs` (what the policy sees next) already holds the reset one.
No per-transition Python objects: every field is written into preallocated numpy rows.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import gymnasium as gym
import numpy as np

from herd.actors.config import EnvConfig
from herd.actors.envs import describe, make_env
from herd.actors.fast_locomotion import FastLocomotion
from herd.actors.pixels import PixelEnv, render_frames

log = logging.getLogger("herd.actor")

_DEFAULT_WRAPPERS = ("TimeLimit", "OrderEnforcing", "PassiveEnvChecker")


def fast_path_ok(env: gym.Env) -> bool:
    """True when stepping env.unwrapped (plus our own time limit) is exactly env.step."""
    try:
        from gymnasium.envs.mujoco.mujoco_env import MujocoEnv
    except Exception:  # noqa: BLE001 -- gymnasium without MuJoCo support
        return False
    if not isinstance(env.unwrapped, MujocoEnv):
        return False
    e = env
    while isinstance(e, gym.Wrapper):
        if type(e).__name__ not in _DEFAULT_WRAPPERS or type(e).__module__.split(".")[0] != "gymnasium":
            return False
        e = e.env
    return True


def _time_limit(env: gym.Env) -> int | None:
    e = env
    while isinstance(e, gym.Wrapper):
        if type(e).__name__ == "TimeLimit":
            return int(e._max_episode_steps)
        e = e.env
    return None


@dataclass
class StepOut:
    """What one vector step produced besides the rows it wrote."""

    ok: np.ndarray
    """bool [E]: False where the env raised and was recreated (its row is not a transition)."""
    episodes: list[tuple[float, int]] = field(default_factory=list)
    """(return, length) of every episode that ended in this step."""
    done: np.ndarray | None = None
    """bool [E]: the episode ended in this step (terminated or truncated; obs was reset)."""


class VecStepper:
    """E envs of one EnvConfig; `obs` [E, obs_dim] is what the policy acts on next (float32;
    a pixel env's camera frame, flattened uint8). Pixel envs also keep `state` [E, state_dim],
    each env's state at its `obs` frame, and `next_state`, the state at the frame a step wrote
    into next_obs (float32; PixelEnv.state)."""

    def __init__(self, env_cfg: EnvConfig, num_envs: int, seed: int = 0, threads: int = 1,
                 fast: bool | None = None):
        self.env_cfg = env_cfg
        self.envs = [make_env(env_cfg) for _ in range(num_envs)]
        allowed = fast_path_ok(self.envs[0])
        self.fast = allowed if fast is None else (fast and allowed)
        self.limit = _time_limit(self.envs[0]) if self.fast else None
        self.threads = max(1, min(threads, num_envs)) if self.fast else 1
        self._step_fns = [self._bind(e) for e in self.envs]
        self._loco = FastLocomotion.build(self.envs) if self.fast else None
        # pixel envs: the physics of every env first, then all their frames in one tiled render
        # (one readback; on a GPU node 3.7x the frames/s of a frame per env, bench/results/render-*)
        self.tiled = all(isinstance(e, PixelEnv) for e in self.envs)
        self.seed = seed
        self.num_envs = num_envs
        self.env_errors = 0
        self._resets = np.zeros(num_envs, np.int64)
        self._ep_ret = np.zeros(num_envs)
        self._ep_len = np.zeros(num_envs, np.int64)
        # float32 for state envs, uint8 camera frames (flattened) for pixel envs
        d = describe(self.envs[0])
        self.obs_dtype = np.dtype(d["obs_dtype"])
        self.state = np.zeros((num_envs, d["state_dim"]), np.float32)
        self.next_state = np.zeros_like(self.state)
        first = [self._reset(i) for i in range(num_envs)]
        self.obs = np.stack(first).astype(self.obs_dtype)
        self.obs_dim = self.obs.shape[1]
        self._chunks = [[int(i) for i in c] for c in np.array_split(np.arange(num_envs), self.threads)]
        if self.threads > 1:
            # A thread back from mj_step waits for the GIL up to the switch interval (5 ms by
            # default) while another runs Python: shorten it so the physics threads keep going.
            sys.setswitchinterval(min(sys.getswitchinterval(), 0.0005))
        self._pool = (ThreadPoolExecutor(self.threads - 1, thread_name_prefix="herd-mj")
                      if self.threads > 1 else None)

    @property
    def path(self) -> str:
        """Which way envs are stepped: 'batched', 'unwrapped' (per-env fast path) or 'plain'."""
        return ("batched" if self._loco is not None else "unwrapped" if self.fast
                else "tiled" if self.tiled else "plain")

    def _bind(self, env: gym.Env):
        return env.unwrapped.step if self.fast else env.step

    def _reset(self, i: int) -> np.ndarray:
        s = int(self.seed * 10_007 + i * 101 + self._resets[i])
        self._resets[i] += 1
        self._ep_ret[i], self._ep_len[i] = 0.0, 0
        env = self.envs[i].unwrapped if self.fast else self.envs[i]
        obs, _ = env.reset(seed=s)
        if self.tiled:
            self.state[i] = self.envs[i].state
        return np.asarray(obs, self.obs_dtype).ravel()

    def _run(self, idx, action, next_obs, reward, terminated, ok, episodes, done) -> None:
        for i in idx:
            try:
                o, r, term, trunc, _ = self._step_fns[i](action[i])
            except Exception as e:  # noqa: BLE001 -- a broken simulator must not take the actor down
                self._recreate(i, e)
                ok[i] = False
                self.obs[i] = self._reset(i)
                continue
            next_obs[i] = np.ravel(o)
            reward[i] = r
            terminated[i] = bool(term)
            self._ep_ret[i] += r
            self._ep_len[i] += 1
            if self.limit is not None and self._ep_len[i] >= self.limit:
                trunc = True
            if term or trunc:
                done[i] = True
                episodes.append((float(self._ep_ret[i]), int(self._ep_len[i])))
                self.obs[i] = self._reset(i)
            else:
                self.obs[i] = next_obs[i]

    def _recreate(self, i: int, e: BaseException) -> None:
        self.env_errors += 1
        if self.env_errors == 1:
            log.error("env %d raised in step (%r); recreating it", i, e)
        with contextlib.suppress(Exception):  # a broken env may fail to close as well
            self.envs[i].close()
        self.envs[i] = make_env(self.env_cfg)
        self._step_fns[i] = self._bind(self.envs[i])
        if self._loco is not None and not self._loco.rebind(i, self.envs[i]):
            self._loco = None  # the new instance differs: per-env fast path from now on

    def step(self, action: np.ndarray, next_obs: np.ndarray, reward: np.ndarray,
             terminated: np.ndarray) -> StepOut:
        """Step every env with action[i]; row i of next_obs/reward/terminated gets its result.

        `obs` is updated in place (reset where an episode ended). The caller copies `obs`
        into its own rows *before* calling, since this overwrites it.
        """
        out = StepOut(ok=np.ones(self.num_envs, bool), done=np.zeros(self.num_envs, bool))
        if self._loco is not None:
            self._step_batched(action, next_obs, reward, terminated, out)
            return out
        if self.tiled:
            self._step_tiled(action, next_obs, reward, terminated, out)
            return out
        args = (action, next_obs, reward, terminated, out.ok, out.episodes, out.done)
        if self._pool is None:
            self._run(range(self.num_envs), *args)
        else:  # chunk 0 on this thread, the rest on the pool; mj_step drops the GIL
            futs = [self._pool.submit(self._run, c, *args) for c in self._chunks[1:]]
            self._run(self._chunks[0], *args)
            for f in futs:
                f.result()
        return out

    def _step_tiled(self, action, next_obs, reward, terminated, out: StepOut) -> None:
        """Pixel envs: each env's action repeat (PixelEnv.advance), then one tiled render of the
        frames they stand at (the last frame of an episode that ended among them), then resets."""
        stepped: list[tuple[int, bool]] = []
        for i in range(self.num_envs):
            try:
                r, term, trunc, _ = self.envs[i].advance(action[i])
            except Exception as e:  # noqa: BLE001 -- as in _run: the env is recreated, not the actor
                self._recreate(i, e)
                out.ok[i] = False
                self.obs[i] = self._reset(i)
                continue
            reward[i] = r
            terminated[i] = bool(term)
            self.next_state[i] = self.envs[i].state
            self._ep_ret[i] += r
            self._ep_len[i] += 1
            stepped.append((i, bool(term or trunc)))
        frames = render_frames([self.envs[i] for i, _ in stepped])
        for (i, ended), frame in zip(stepped, frames, strict=True):
            next_obs[i] = frame.ravel()
            if ended:
                out.done[i] = True
                out.episodes.append((float(self._ep_ret[i]), int(self._ep_len[i])))
                self.obs[i] = self._reset(i)
            else:
                self.obs[i] = next_obs[i]
                self.state[i] = self.next_state[i]

    def _step_batched(self, action, next_obs, reward, terminated, out: StepOut) -> None:
        loco, failed = self._loco, []
        action = np.asarray(action)
        if action.shape != (self.num_envs, loco.nu):  # gymnasium's do_simulation refuses too
            raise ValueError(f"action shape {action.shape}, expected {(self.num_envs, loco.nu)}")
        if self._pool is None:
            loco.physics(range(self.num_envs), action, failed)
        else:
            futs = [self._pool.submit(loco.physics, c, action, failed) for c in self._chunks[1:]]
            loco.physics(self._chunks[0], action, failed)
            for f in futs:
                f.result()
        r, term = loco.finish(action, next_obs, reward)
        terminated[:] = term
        for i, _ in failed:
            out.ok[i] = False
        ok = out.ok
        self._ep_ret[ok] += r[ok]
        self._ep_len[ok] += 1
        done = term if self.limit is None else term | (self._ep_len >= self.limit)
        self.obs[:] = next_obs
        out.done[:] = done & ok
        for i in np.flatnonzero(done & ok):
            out.episodes.append((float(self._ep_ret[i]), int(self._ep_len[i])))
            self.obs[i] = self._reset(i)
        for i, e in sorted(failed, key=lambda f: f[0]):
            self._recreate(i, e)
            self.obs[i] = self._reset(i)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        for env in self.envs:
            env.close()
