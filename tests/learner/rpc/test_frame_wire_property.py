"""Random pixel batches against a real pixel learner on loopback and a plain model of its frame
ring written here: several actor processes, valid and invalid batches, actors numbering their
frames again from lower first_frames, new incarnations, a 40-frame ring wrapped many times.
Every ack agrees with the model (taken or INVALID_ARGUMENT), every stored row's obs and next
stacks are the model's, no row with a frame gone is sampled, the books add up and the training
thread is alive at the end."""

from __future__ import annotations

import time

import grpc
import numpy as np
import pytest
import torch

from tests.learner.rpc.test_frame_wire import FCAP, Client, frame_learner, training_alive
from tests.learner.test_frame_learner import FRAME, STACK

IA = grpc.StatusCode.INVALID_ARGUMENT.value[0]
LIMIT = 2**62


class Model:
    """The frame ring as the wire describes it: frame number -> the frame an actor process sent
    last under it; global numbers in arrival order; a frame there while fewer than FCAP frames
    came after it; a stack walks `prev` back while the frame it reaches is there."""

    def __init__(self):
        self.pixels: list[np.ndarray] = []  # by global number
        self.prev: list[int] = []  # global number of the previous frame, -1: none or unknown
        self.numbers: dict[tuple, dict[int, int]] = {}  # actor process -> number -> global
        self.newest: dict[tuple, int] = {}
        self.rows: list[tuple[int, int, int]] = []  # (row id, obs global, next global), stored
        self.dropped = 0

    def alive(self, g: int) -> bool:
        return 0 <= g and g >= len(self.pixels) - FCAP

    def valid(self, key: tuple, b: dict) -> bool:
        first, prev = b["first_frame"], b["frame_prev"]
        obs, nxt, n = list(b["obs_frame"]), list(b["next_frame"]), len(b["frame_prev"])
        if not 1 <= len(obs) <= 1024 or len(b["frames"]) != n:
            return False
        if first + max(n - 1, 0) >= LIMIT:
            return False
        if any(not -1 <= p < first + i for i, p in enumerate(prev)):
            return False
        top = first + n - 1 if n else LIMIT - 1
        if any(r < 0 or r > top for r in obs + nxt) or any(x <= o for o, x in zip(obs, nxt)):
            return False
        newest = first + n - 1 if n else self.newest.get(key)
        return newest is None or all(r <= newest for r in obs + nxt)

    def take(self, key: tuple, b: dict, row_ids: range) -> None:
        first, n = b["first_frame"], len(b["frame_prev"])
        numbers = self.numbers.setdefault(key, {})

        def resolve(k: int) -> int:
            if first <= k < first + n:
                return len(self.pixels) + k - first
            return numbers.get(k, -1)

        prev = [resolve(p) if p >= 0 else -1 for p in b["frame_prev"]]
        rows = [(resolve(o), resolve(x)) for o, x in zip(b["obs_frame"], b["next_frame"])]
        for i in range(n):
            numbers[first + i] = len(self.pixels)
            self.pixels.append(b["frames"][i])
            self.prev.append(prev[i])
        if n:
            self.newest[key] = first + n - 1
        for rid, (o, x) in zip(row_ids, rows):
            if self.alive(o) and self.alive(x):
                self.rows.append((int(rid), o, x))
            else:
                self.dropped += 1

    def stack(self, g: int) -> np.ndarray:
        chain = [g]
        for _ in range(STACK - 1):
            p = self.prev[chain[-1]]
            chain.append(p if p >= 0 and self.alive(p) else chain[-1])
        return np.concatenate([self.pixels[k] for k in reversed(chain)])


class Actor:
    """An actor process's numbering: runs of frames in episodes, now and then numbered again
    from a lower first_frame, or a new process (incarnation) on a new session."""

    def __init__(self, channel, uid: int, rng, incarnation: int):
        self.channel, self.uid, self.rng, self.incarnation = channel, uid, rng, incarnation
        self.client = Client(channel, f"prop-{uid}", uid, incarnation)
        self.next, self.last, self.sent = 0, -1, []

    @property
    def key(self) -> tuple:
        return (f"prop-{self.uid}", self.incarnation)

    def restart(self, new_process: bool) -> None:
        if new_process:
            self.client.close()
            self.incarnation += 1
            self.client = Client(self.channel, f"prop-{self.uid}", self.uid, self.incarnation)
            self.next, self.sent = 0, []
        else:  # the same process numbers again from below its newest
            self.next = int(self.rng.integers(0, self.next + 1))
            self.sent = [k for k in self.sent if k < self.next]
        self.last = -1

    def batch(self, serial: list[int]) -> dict:
        rng = self.rng
        first, n = self.next, int(rng.integers(0, 5))
        prev = []
        for i in range(n):
            prev.append(-1 if self.last < 0 or rng.random() < 0.2 else self.last)
            self.last = first + i
        self.next = first + n
        self.sent = (self.sent + list(range(first, first + n)))[-10:]
        pool = sorted(set(self.sent)) or [0]
        obs, nxt = [], []
        for _ in range(int(rng.integers(1, 5))):  # mostly a later frame sent; now and then not
            o = int(rng.choice(pool[:-1] or pool))
            later = [k for k in pool if k > o]
            obs.append(o)
            nxt.append(int(rng.choice(later)) if later and rng.random() < 0.98 else pool[-1] + 1)
        frames = []
        for _ in range(n):
            serial[0] += 1
            f = np.zeros(FRAME, np.uint8)
            f.reshape(-1)[:5] = *np.frombuffer(np.uint32(serial[0]).tobytes(), np.uint8), self.uid
            frames.append(f)
        b = {"frames": np.stack(frames) if frames else np.zeros((0, *FRAME), np.uint8),
             "first_frame": first, "frame_prev": prev, "obs_frame": obs, "next_frame": nxt}
        self._spoil(b)
        return b

    def _spoil(self, b: dict) -> None:
        """Now and then one thing an actor must not send."""
        rng, n = self.rng, len(b["frame_prev"])
        kind = int(rng.integers(0, 50))
        if kind == 0 and n:
            b["frame_prev"][-1] = b["first_frame"] + n - 1  # a frame its own previous
        elif kind == 1:
            b["obs_frame"][0] = -1
        elif kind == 2:
            b["next_frame"][0] = b["obs_frame"][0]
        elif kind == 3:
            b["first_frame"] = (LIMIT - 1, LIMIT, 2**63 + 5, 2**64 - 1)[int(rng.integers(4))]
            b["frame_prev"] = [-1] * n
        elif kind == 4 and n:
            b["frames"] = b["frames"][:-1]  # a frame's bytes missing
        elif kind == 5:
            b["obs_frame"], b["next_frame"] = [], []  # no rows
        elif kind == 6:
            b["next_frame"][0] = b["first_frame"] + n + 3  # a frame not sent yet

    def arrays(self, b: dict, row_ids: range) -> dict:
        rows = len(b["obs_frame"])
        return {"frames": b["frames"], "first_frame": b["first_frame"],
                "frame_prev": np.array(b["frame_prev"], np.int64),
                "obs_frame": np.array(b["obs_frame"], np.int64),
                "next_frame": np.array(b["next_frame"], np.int64),
                "action": np.zeros((rows, 2), np.float32),
                "reward": np.array(row_ids, np.float32), "terminated": np.zeros(rows, np.uint8)}


def wait_for(learner, model: Model) -> None:
    """Until the training thread has written every batch the learner took."""
    buf, want = learner.buffer, len(model.rows) + model.dropped
    deadline = time.monotonic() + 10
    while buf.inserted + buf.rows_unresolved < want or buf.frames_received < len(model.pixels):
        assert time.monotonic() < deadline, "batches taken but never written"
        time.sleep(0.001)


def check_rows(learner, model: Model) -> None:
    buf = learner.buffer
    with learner._model_lock:
        start, count = (int(x) for x in buf.window_t)
        idx = (start + torch.arange(count)) % buf.capacity
        got = {k: v.numpy().copy() for k, v in buf.gather(idx).items()}
        sampled = buf.sample_indices(256).tolist()
    window = model.rows[len(model.rows) - count:]
    assert [r[0] for r in window] == got["reward"].astype(int).tolist()
    for s in sampled if count else []:
        _, o, x = window[(s - start) % buf.capacity]
        assert model.alive(o) and model.alive(x), "a row with a frame gone was sampled"
    for i, (rid, o, x) in enumerate(window):
        if model.alive(o) and model.alive(x):
            np.testing.assert_array_equal(got["obs"][i], model.stack(o), err_msg=f"row {rid} obs")
            np.testing.assert_array_equal(got["next_obs"][i], model.stack(x),
                                          err_msg=f"row {rid} next_obs")


@pytest.mark.parametrize("seed", [1, 2])
def test_random_frame_batches_agree_with_a_model_of_the_ring(seed):
    rng = np.random.default_rng(seed)
    learner = frame_learner()
    try:
        with grpc.insecure_channel(learner.address()) as channel:
            actors = [Actor(channel, uid, rng, incarnation=100 * uid + 1) for uid in range(1, 4)]
            model, serial, next_row, outcomes = Model(), [0], 0, {0: 0, IA: 0}
            for step in range(200):
                actor = actors[int(rng.integers(len(actors)))]
                if rng.random() < 0.06:
                    actor.restart(new_process=rng.random() < 0.5)
                b = actor.batch(serial)
                rows = range(next_row, next_row + len(b["obs_frame"]))
                ack = actor.client.push(actor.arrays(b, rows))
                ok = model.valid(actor.key, b)
                assert ack.code == (0 if ok else IA), (step, b, ack.message)
                outcomes[ack.code] += 1
                if ok:
                    assert ack.accepted == len(rows)
                    model.take(actor.key, b, rows)
                    next_row += len(rows)
                if step % 5 == 4:
                    wait_for(learner, model)
                    check_rows(learner, model)
            wait_for(learner, model)
            check_rows(learner, model)
            for a in actors:
                a.client.close()
        st = learner.status_dict()
        assert training_alive(learner)
        assert st["received"] == st["inserted"] + st["rows_unresolved"] + st["rows_failed"]
        assert st["rows_unresolved"] == model.dropped > 0 and st["inserted"] == len(model.rows)
        assert st["frames_received"] == len(model.pixels) > 3 * FCAP  # wrapped several times
        assert outcomes[IA] >= 10 and outcomes[0] >= 100
    finally:
        learner.stop()
