"""The frames of E pixel envs stepped in lockstep: stacks to act on, frame numbers, push rows.

herd.proto's contract for pixel envs: every camera frame travels once, numbered 0, 1, 2, ...
for the life of the actor process, each with the number of its episode's previous frame (-1 at
an episode's first frame); a row names the newest frame of its obs stack and of its next_obs
stack. The learner rebuilds the stacks from those links, so what is sent here is enough to
rebuild exactly the stack the policy acted on: [prev(prev(n)), prev(n), n], an episode's first
frame repeated where it has fewer. Where the env has a state (PixelEnv.state), each frame's
state is kept beside it (frame_state): a learner whose critics read the state gets it once per
frame, as the frame itself.

n-step rows come from actors/nstep.py with frame numbers as their "obs" (one int64 each).
"""

from __future__ import annotations

import numpy as np

from herd.actors.nstep import NStep, transition_rows


class FrameRows:
    """Stacks, numbering and the push batch of E pixel envs.

    Per vector step: `stacks()` is what the policy acts on; `begin(action)` holds the step's
    actions; the stepper writes each env's new frame into `next_frames` (its true final frame
    where the episode ended) and resets envs in `obs` (their first frames); `end(obs, out)`
    numbers the new frames and writes the step's rows. `full()`: time to push `take()`.
    """

    def __init__(self, obs: np.ndarray, frame_shape: tuple[int, ...], stack: int, act_dim: int,
                 rows: int, n_step: int = 1, gamma: float = 0.99, state: np.ndarray | None = None):
        """`obs`: the envs' first frames [E, prod(frame_shape)] uint8; `rows`: push batch rows;
        `state`: the envs' states at those frames [E, state_dim] (None or no columns: none)."""
        E = len(obs)
        self.num_envs, self.frame_shape, self.S = E, tuple(frame_shape), stack
        self.acc = NStep(E, 1, act_dim, n_step, gamma, obs_dtype=np.int64) if n_step > 1 else None
        self.per_step = self.acc.max_rows_per_step() if self.acc else E
        self.rows_cap = max(rows, self.per_step)
        self.rows = transition_rows(self.rows_cap, 1, act_dim, discount=self.acc is not None,
                                    obs_dtype=np.int64)
        self.one = transition_rows(E, 1, act_dim, obs_dtype=np.int64)  # this step's one-step rows
        self.next_frames = np.empty((E, int(np.prod(frame_shape))), np.uint8)
        # a step brings at most 2 frames per env (its new one and, where it ended, a reset one)
        self.frames_cap = 2 * self.rows_cap + 2 * E
        self.frames = np.empty((self.frames_cap, *self.frame_shape), np.uint8)
        self.frame_prev = np.empty(self.frames_cap, np.int64)
        has_state = state is not None and state.shape[1] > 0
        self.frame_state = np.empty((self.frames_cap, state.shape[1]), np.float32) if has_state else None
        self.n = self.nf = 0
        self.next_number = 0  # the number the next new frame gets
        self.first = 0  # the number of frames[0]
        self.cur = np.empty(E, np.int64)  # each env's newest frame
        self._stack = np.empty((E, stack, *self.frame_shape), np.uint8)
        self._start(np.arange(E), obs, state)

    def stacks(self) -> np.ndarray:
        """[E, S*C, H, W] uint8: each env's last S frames, oldest first, on the channel axis."""
        E, S, C = self.num_envs, self.S, self.frame_shape[0]
        return self._stack.reshape(E, S * C, *self.frame_shape[1:])

    def _number(self, envs: np.ndarray, frames: np.ndarray, prev: np.ndarray,
                states: np.ndarray | None) -> np.ndarray:
        """New frames (rows of `frames`, in `envs` order) and their states into the batch; their
        numbers."""
        k = len(envs)
        numbers = self.next_number + np.arange(k)
        self.frames[self.nf:self.nf + k] = frames.reshape(k, *self.frame_shape)
        self.frame_prev[self.nf:self.nf + k] = prev
        if self.frame_state is not None:
            self.frame_state[self.nf:self.nf + k] = states
        self.nf += k
        self.next_number += k
        return numbers

    def _start(self, envs: np.ndarray, obs: np.ndarray, state: np.ndarray | None) -> None:
        """Episodes start in `envs` from frames obs[envs]: numbered, each stack that frame S times."""
        if not len(envs):
            return
        states = None if self.frame_state is None else state[envs]
        self.cur[envs] = self._number(envs, obs[envs], np.full(len(envs), -1), states)
        self._stack[envs] = obs[envs].reshape(len(envs), 1, *self.frame_shape)

    def begin(self, action: np.ndarray) -> None:
        self.one["obs"][:, 0] = self.cur
        self.one["action"][:] = action

    def end(self, obs: np.ndarray, ok: np.ndarray, done: np.ndarray,
            state: np.ndarray | None = None, next_state: np.ndarray | None = None) -> None:
        """After the stepper's step: `ok` False where an env raised (recreated and reset in
        obs: no row), `done` where an episode ended (next_frames holds its final frame, obs
        the next episode's first); `state` and `next_state` the envs' states at obs and at
        next_frames (VecStepper's)."""
        live = np.flatnonzero(ok)
        one = self.one
        new_states = None if self.frame_state is None else next_state[live]
        one["next_obs"][live, 0] = self._number(live, self.next_frames[live], self.cur[live],
                                                new_states)
        going = np.flatnonzero(ok & ~done)
        self.cur[going] = one["next_obs"][going, 0]
        self._stack[going, :-1] = self._stack[going, 1:]
        self._stack[going, -1] = self.next_frames[going].reshape(len(going), *self.frame_shape)
        self._start(np.flatnonzero(~ok | done), obs, state)
        if self.acc:
            self.n += self.acc.add(one["obs"], one["action"], one["reward"], one["next_obs"],
                                   one["terminated"], done, ok, self.rows, self.n)
        else:
            k = len(live)
            for name, v in self.rows.items():
                v[self.n:self.n + k] = one[name][live]
            self.n += k

    def full(self) -> bool:
        """The next step might not fit: push now."""
        return (self.n + self.per_step > self.rows_cap
                or self.nf + 2 * self.num_envs > self.frames_cap)

    def flush(self) -> None:
        """At stop: pending n-step rows leave, truncated where the envs stand."""
        if self.acc:
            self.n += self.acc.flush_all(self.cur[:, None], self.rows, self.n)

    def take(self) -> dict[str, np.ndarray]:
        """The push batch's arrays (views: the client packs them before the next step) and a
        fresh batch begun."""
        r, n = self.rows, self.n
        out = {"frames": self.frames[:self.nf], "first_frame": self.first,
               "frame_prev": self.frame_prev[:self.nf], "obs_frame": r["obs"][:n, 0],
               "next_frame": r["next_obs"][:n, 0], "action": r["action"][:n],
               "reward": r["reward"][:n], "terminated": r["terminated"][:n]}
        if "discount" in r:
            out["discount"] = r["discount"][:n]
        if self.frame_state is not None:
            out["frame_state"] = self.frame_state[:self.nf]
        self.n = self.nf = 0
        self.first = self.next_number
        return out


class FrameStack:
    """One env's last S frames as the policy reads them, [S*C, H, W] (evaluation, a user's own
    loop): `reset(frame)` at an episode's first frame, `push(frame)` after each step."""

    def __init__(self, stack: int):
        self.S = stack
        self._frames: np.ndarray | None = None

    def reset(self, frame) -> np.ndarray:
        frame = np.asarray(frame, np.uint8)
        self._frames = np.repeat(frame[None], self.S, axis=0)
        return self.stacked()

    def push(self, frame) -> np.ndarray:
        self._frames = np.concatenate([self._frames[1:], np.asarray(frame, np.uint8)[None]])
        return self.stacked()

    def stacked(self) -> np.ndarray:
        S, C, *hw = self._frames.shape
        return self._frames.reshape(S * C, *hw)
