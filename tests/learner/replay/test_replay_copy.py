"""RingCopy (learner/replay/ring.py): the checkpoint's host copy of the ring, chunk by chunk while
the writer goes on between chunks (a lock whose every entry lets the "writer" insert first stands
in for the training thread; the copy starts under the lock, as Learner.save starts it)."""

from __future__ import annotations

import threading

import numpy as np
import torch

from herd.learner.replay.ring import ReplayBuffer
from tests.learner.rows import tagged_rows

OBS, ACT, CAP = 5, 3, 1000


def copy_out(buf: ReplayBuffer, writer, chunk: int) -> dict:
    copy = buf.start_copy(chunk)
    while copy.remaining:
        with writer:
            copy.step()
    return copy.result()


class WriterBetweenChunks:
    """A lock: before each chunk the writer gets in and inserts `per_chunk` new rows."""

    def __init__(self, buf: ReplayBuffer, per_chunk: int, first_id: int):
        self.buf, self.per_chunk, self.next_id = buf, per_chunk, first_id
        self.lock, self.entries = threading.Lock(), 0

    def __enter__(self):
        self.buf.extend(tagged_rows(np.arange(self.next_id, self.next_id + self.per_chunk), OBS, ACT))
        self.next_id += self.per_chunk
        self.entries += 1
        self.lock.acquire()

    def __exit__(self, *exc):
        self.lock.release()


def whole(saved: dict) -> torch.Tensor:
    """Each saved row's id, checked to be one row's fields (not two rows' mixed)."""
    n = saved["size"]
    ids = saved["obs_pair"][:n, 0]
    assert torch.equal(saved["obs_pair"][:n, 8], ids + 0.5)  # next_obs starts at the pad (8)
    assert torch.equal(saved["rest"][:n, ACT], ids * 2)  # reward
    return ids


def test_a_copy_ahead_of_the_writer_is_the_ring_at_the_mark_and_restores_it():
    buf = ReplayBuffer(CAP, (OBS,), ACT, torch.device("cpu"))
    buf.extend(tagged_rows(np.arange(1700), OBS, ACT))  # full, wrapped: pos 700
    expect = {k: (v.clone() if torch.is_tensor(v) else v)
                                for k, v in buf.state_dict().items()}
    writer = WriterBetweenChunks(buf, per_chunk=30, first_id=10_000)
    saved = copy_out(buf, writer, chunk=100)
    assert writer.entries == 9 and buf.inserted == 1700 + 270  # the writer really went on
    assert saved["overtaken"] == 0
    for k in ("pos", "size", "inserted"):
        assert saved[k] == expect[k]
    assert torch.equal(saved["obs_pair"], expect["obs_pair"]) and torch.equal(saved["rest"], expect["rest"])
    again = ReplayBuffer(CAP, (OBS,), ACT, torch.device("cpu"))
    again.load_state_dict(saved)
    assert (again.pos, again.size, again.inserted) == (700, CAP, 1700)
    assert sorted(again.obs[:, 0].tolist()) == list(range(700, 1700))


def test_a_writer_faster_than_the_copy_leaves_whole_newer_rows_and_counts_them():
    buf = ReplayBuffer(CAP, (OBS,), ACT, torch.device("cpu"))
    buf.extend(tagged_rows(np.arange(1000), OBS, ACT))  # full, pos 0
    writer = WriterBetweenChunks(buf, per_chunk=150, first_id=10_000)
    saved = copy_out(buf, writer, chunk=100)
    ids = whole(saved)
    newer = int((ids >= 10_000).sum())
    assert saved["overtaken"] == newer > 0
    # the rest are the mark's rows, each in its own slot
    old = ids[ids < 10_000]
    assert torch.equal(old, torch.arange(1000, dtype=old.dtype)[ids < 10_000])


def test_free_slots_take_the_writer_first():
    buf = ReplayBuffer(CAP, (OBS,), ACT, torch.device("cpu"))
    buf.extend(tagged_rows(np.arange(600), OBS, ACT))  # 400 free slots
    writer = WriterBetweenChunks(buf, per_chunk=60, first_id=10_000)
    saved = copy_out(buf, writer, chunk=100)  # 5 more chunks, 300 rows: into free slots
    assert saved["size"] == 600 and saved["overtaken"] == 0
    assert torch.equal(whole(saved), torch.arange(600, dtype=saved["obs_pair"].dtype))
