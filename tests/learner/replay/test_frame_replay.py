"""The device frame replay (learner/replay/frames.py) against a slow reference written plainly
here: stacks across episode starts and across the frame ring's wraparound, the guard where a
link points at an overwritten frame, rows whose obs frame is gone never sampled."""

from __future__ import annotations

import numpy as np
import torch

from herd.learner.replay.frames import FrameReplay, default_frame_capacity, layout_bytes

SHAPE = (1, 2, 2)  # 4 bytes a frame: a frame's number fits in them, so each is unique
STACK = 3


def pixels(k: int) -> np.ndarray:
    return np.frombuffer(np.uint32(k).tobytes(), np.uint8).reshape(SHAPE)


class Actor:
    """An actor process: envs interleaved, frames numbered 0, 1, ..., each sent once, rows of
    one or two steps pointing at frames by number. Remembers what it sent for the reference."""

    def __init__(self, name: str, uid: int, envs: int, seed: int):
        self.name, self.uid, self.rng = name, uid, np.random.default_rng(seed)
        self.next_number = 0
        self.sent: list[tuple[int, int]] = []  # (number, prev) of frames not yet in a batch
        self.rows: list[tuple[int, int]] = []
        self.envs = [self._reset() for _ in range(envs)]  # per env: frame numbers of its episode

    def _frame(self, prev: int) -> int:
        n = self.next_number
        self.next_number += 1
        self.sent.append((n, prev))
        return n

    def _reset(self) -> list[int]:
        return [self._frame(-1)]

    def step(self) -> None:
        e = int(self.rng.integers(len(self.envs)))
        ep = self.envs[e]
        ep.append(self._frame(ep[-1]))
        k = 2 if len(ep) >= 3 and self.rng.random() < 0.3 else 1
        self.rows.append((ep[-1 - k], ep[-1]))
        if self.rng.random() < 0.2:  # episode over: the next starts with a first frame
            self.envs[e] = self._reset()

    def batch(self) -> dict:
        nums = [n for n, _ in self.sent]
        first = nums[0] if nums else self.next_number
        assert nums == list(range(first, first + len(nums)))
        out = {
            "frames": np.stack([pixels(self.uid << 24 | n) for n in nums]) if nums
            else np.zeros((0, *SHAPE), np.uint8),
            "frame_prev": np.array([p for _, p in self.sent], np.int64),
            "first_frame": np.int64(first),
            "obs_frame": np.array([o for o, _ in self.rows], np.int64),
            "next_frame": np.array([x for _, x in self.rows], np.int64),
            "action": np.zeros((len(self.rows), 1), np.float32),
            "reward": np.arange(len(self.rows), dtype=np.float32),
            "terminated": np.zeros(len(self.rows), np.uint8),
            "actor_id": np.str_(self.name),
            "incarnation": np.uint64(7),
        }
        self.sent, self.rows = [], []
        return out


class Reference:
    """Every frame in a Python list in arrival order; a stack walks `prev` by hand."""

    def __init__(self, frame_capacity: int):
        self.fcap = frame_capacity
        self.order: list[tuple[str, int]] = []  # (actor, number) by global number
        self.where: dict[tuple[str, int], int] = {}
        self.prev: dict[tuple[str, int], int] = {}
        self.pix: dict[tuple[str, int], np.ndarray] = {}
        self.rows: list[tuple[str, int, int]] = []
        self.dropped = 0

    def add(self, b: dict) -> int:
        actor = str(b["actor_id"])
        for i, p in enumerate(b["frame_prev"]):
            key = (actor, int(b["first_frame"]) + i)
            self.where[key] = len(self.order)
            self.order.append(key)
            self.prev[key], self.pix[key] = int(p), b["frames"][i]
        rows = [(actor, int(o), int(x)) for o, x in zip(b["obs_frame"], b["next_frame"])]
        kept = [r for r in rows if self.alive(r[:2])]  # an obs frame already overwritten: dropped
        self.rows += kept
        self.dropped += len(rows) - len(kept)
        return len(kept)

    def alive(self, key) -> bool:
        return key in self.where and self.where[key] >= len(self.order) - self.fcap

    def stack(self, actor: str, n: int) -> np.ndarray:
        chain = [n]
        for _ in range(STACK - 1):
            p = self.prev[(actor, chain[-1])]
            if p != -1 and self.alive((actor, p)):
                chain.append(p)
            else:
                chain.append(chain[-1])  # the episode's oldest frame here, repeated
        return np.concatenate([self.pix[(actor, k)] for k in reversed(chain)])


def check_all_rows(replay: FrameReplay, ref: Reference) -> int:
    """Every row of the sampling window gathered and compared with the reference; returns how
    many stacks were padded."""
    start, count = (int(x) for x in replay.window_t)
    idx = (start + torch.arange(count)) % replay.capacity
    got = replay.gather(idx)
    padded = 0
    # the window is the newest `count` rows; rows are kept in arrival order
    window = ref.rows[len(ref.rows) - count:]
    for s in replay.sample_indices(256).tolist():
        actor, o, _ = window[(s - start) % replay.capacity]
        assert ref.alive((actor, o)), "a row whose obs frame is gone was sampled"
    for i, (actor, o, x) in enumerate(window):
        if not ref.alive((actor, o)):  # a straggler: never sampled (above)
            continue
        want_obs, want_next = ref.stack(actor, o), ref.stack(actor, x)
        np.testing.assert_array_equal(got["obs"][i].numpy(), want_obs)
        np.testing.assert_array_equal(got["next_obs"][i].numpy(), want_next)
        padded += len({bytes(f) for f in want_obs.reshape(STACK, -1)}) < STACK
    return padded


def test_stacks_match_the_reference_across_episode_starts_and_wraparound():
    fcap = 40
    replay = FrameReplay(32, SHAPE, STACK, 1, torch.device("cpu"), window=64, frame_capacity=fcap)
    ref = Reference(fcap)
    actors = [Actor("a", 1, 2, 1), Actor("b", 2, 3, 2)]
    padded = 0
    for i in range(60):
        actor = actors[i % 2]
        for _ in range(int(actor.rng.integers(1, 6))):
            actor.step()
        b = actor.batch()
        assert replay.insert(b) == ref.add(b)
        padded += check_all_rows(replay, ref)
    assert replay.written > 3 * fcap  # the frame ring wrapped several times
    assert replay.inserted == len(ref.rows) and replay.rows_unresolved == ref.dropped
    assert padded > 0 and ref.dropped < len(ref.rows) / 10


def test_a_link_to_an_overwritten_frame_pads_as_an_episode_start():
    # one episode of 8 frames into a 5-frame ring: frames 3..7 remain
    replay = FrameReplay(8, SHAPE, STACK, 1, torch.device("cpu"), window=64, frame_capacity=5)
    b = {"frames": np.stack([pixels(k) for k in range(8)]),
         "frame_prev": np.arange(-1, 7, dtype=np.int64), "first_frame": np.int64(0),
         "obs_frame": np.array([1, 3, 5], np.int64), "next_frame": np.array([2, 4, 6], np.int64),
         "action": np.zeros((3, 1), np.float32), "reward": np.array([1, 3, 5], np.float32),
         "terminated": np.zeros(3, np.uint8), "actor_id": np.str_("a"), "incarnation": np.uint64(1)}
    assert replay.insert(b) == 2  # the row of frame 1 points at a frame already gone
    assert replay.rows_unresolved == 1 and replay.size == 2
    got = replay.gather(torch.tensor([0, 1]))
    frame = [pixels(k) for k in range(8)]
    # frame 3's previous frame (2) was overwritten: frame 3 repeated, as at an episode start
    np.testing.assert_array_equal(got["obs"][0].numpy(), np.concatenate([frame[3]] * 3))
    np.testing.assert_array_equal(got["next_obs"][0].numpy(),
                                  np.concatenate([frame[3], frame[3], frame[4]]))
    np.testing.assert_array_equal(got["obs"][1].numpy(), np.concatenate(frame[3:6]))
    np.testing.assert_array_equal(got["reward"].numpy(), [3, 5])
    # two more frames push frame 3 (row 0's obs) out: row 0 leaves the window, never sampled
    b2 = {**b, "frames": np.stack([pixels(8), pixels(9)]), "frame_prev": np.array([7, 8]),
          "first_frame": np.int64(8), "obs_frame": np.array([7], np.int64),
          "next_frame": np.array([8], np.int64), "action": np.zeros((1, 1), np.float32),
          "reward": np.array([7], np.float32), "terminated": np.zeros(1, np.uint8)}
    assert replay.insert(b2) == 1
    assert replay.size == 2  # rows of frames 5 and 7
    torch.manual_seed(0)
    rewards = replay.sample(256)["reward"]
    assert set(rewards.tolist()) == {5.0, 7.0}


def test_an_unknown_frame_drops_its_row_and_an_unknown_link_pads():
    replay = FrameReplay(8, SHAPE, STACK, 1, torch.device("cpu"), window=64, frame_capacity=16)
    # a learner that never saw frames 0..9 of this actor (it restarted): frame 10's link to 9 is
    # unknown, so frame 10 starts its stack; a row whose obs is frame 9 cannot be rebuilt
    b = {"frames": np.stack([pixels(10), pixels(11)]), "frame_prev": np.array([9, 10]),
         "first_frame": np.int64(10), "obs_frame": np.array([9, 10], np.int64),
         "next_frame": np.array([10, 11], np.int64), "action": np.zeros((2, 1), np.float32),
         "reward": np.zeros(2, np.float32), "terminated": np.zeros(2, np.uint8),
         "actor_id": np.str_("a"), "incarnation": np.uint64(1)}
    assert replay.insert(b) == 1 and replay.rows_unresolved == 1
    got = replay.gather(torch.tensor([0]))
    np.testing.assert_array_equal(got["obs"][0].numpy(), np.concatenate([pixels(10)] * 3))


def test_bytes_per_transition_against_the_naive_layout():
    small = FrameReplay(1_000, (3, 8, 8), STACK, 6, torch.device("cpu"))
    tensors = (small.frames, small.gid, small.prev, small.refs, small.rest, small.window_t)
    assert small.nbytes == sum(t.numel() * t.element_size() for t in tensors)
    for size in (84, 128):  # 1M transitions, as a GPU learner holds them
        shape, cap = (3, size, size), 1_000_000
        per_row = layout_bytes(cap, default_frame_capacity(cap), shape, 6) / cap
        naive = 2 * STACK * 3 * size * size
        assert per_row <= naive / 5


def test_a_batch_longer_than_the_actor_window_resolves_its_own_frames():
    replay = FrameReplay(100, SHAPE, STACK, 1, torch.device("cpu"), window=8, frame_capacity=120)
    n = 50
    b = {"frames": np.stack([pixels(k) for k in range(n + 1)]),
         "frame_prev": np.arange(-1, n, dtype=np.int64), "first_frame": np.int64(0),
         "obs_frame": np.arange(n, dtype=np.int64), "next_frame": np.arange(1, n + 1, dtype=np.int64),
         "action": np.zeros((n, 1), np.float32), "reward": np.arange(n, dtype=np.float32),
         "terminated": np.zeros(n, np.uint8), "actor_id": np.str_("a"), "incarnation": np.uint64(1)}
    assert replay.insert(b) == n and replay.rows_unresolved == 0
    got = replay.gather(torch.tensor([0, 30]))
    np.testing.assert_array_equal(got["obs"][1].numpy(), np.concatenate([pixels(k) for k in (28, 29, 30)]))
    # the next batch may point back `window` frames into this one, not further
    b2 = {**b, "frames": pixels(51)[None], "frame_prev": np.array([50]), "first_frame": np.int64(51),
          "obs_frame": np.array([50, 40], np.int64), "next_frame": np.array([51, 51], np.int64),
          "action": np.zeros((2, 1), np.float32), "reward": np.zeros(2, np.float32),
          "terminated": np.zeros(2, np.uint8)}
    assert replay.insert(b2) == 1 and replay.rows_unresolved == 1


def test_a_sampled_row_with_a_frame_gone_never_falls_back_to_another_such_row():
    """The window's oldest row alive, the newer ones (and the newest) pointing at frames already
    overwritten: every sample is the oldest row."""
    replay = FrameReplay(8, SHAPE, STACK, 1, torch.device("cpu"), window=64, frame_capacity=6)

    def batch(actor, first, n, rows, reward):
        return {"frames": np.stack([pixels(k) for k in range(first, first + n)]) if n
                else np.zeros((0, *SHAPE), np.uint8),
                "frame_prev": np.array([-1] + list(range(first, first + n - 1)))[:n],
                "first_frame": np.int64(first),
                "obs_frame": np.array([o for o, _ in rows], np.int64),
                "next_frame": np.array([x for _, x in rows], np.int64),
                "action": np.zeros((len(rows), 1), np.float32),
                "reward": np.full(len(rows), reward, np.float32),
                "terminated": np.zeros(len(rows), np.uint8),
                "actor_id": np.str_(actor), "incarnation": np.uint64(1)}

    assert replay.insert(batch("b", 0, 2, [], 0)) == 0  # frames 0, 1
    assert replay.insert(batch("a", 0, 4, [(2, 3)], 1)) == 1  # frames 2..5, a row on 4 -> 5
    assert replay.insert(batch("b", 2, 0, [(0, 1)], 2)) == 1  # rows on b's frames 0 -> 1
    assert replay.insert(batch("b", 2, 0, [(0, 1)], 3)) == 1
    assert replay.insert(batch("c", 0, 2, [], 0)) == 0  # frames 6, 7 overwrite b's
    assert replay.size == 3  # the oldest row is there: the window keeps all three
    torch.manual_seed(0)
    assert set(replay.sample(256)["reward"].tolist()) == {1.0}
