"""The pixel wire against a real pixel learner on loopback, as an outside client speaks it: a
frame reference is taken only when it names a frame the actor sent (or the batch carries) and
that frame is still in the ring, for obs and next alike, and is checked before the ack; numbers
outside int64 are an INVALID_ARGUMENT ack on a stream that stays open; a batch whose insert
fails is counted and the training thread goes on.

The frame ring is sized down (48 frames) so that a few batches wrap it.
"""

from __future__ import annotations

import queue
import time

import grpc
import numpy as np
import pytest
import torch

from herd.learner.config import LearnerConfig
from herd.learner.learner import Learner
from herd.learner.replay import frames as frame_replay
from herd.proto import codec
from herd.proto import herd_pb2 as pb
from herd.proto import herd_pb2_grpc as pb_grpc
from tests.learner.test_frame_learner import ACTION, FRAME, assert_refused_alone, pixel_spec, settled
from tests.pixels import DRQ_STEPS

FCAP = 48
IA = grpc.StatusCode.INVALID_ARGUMENT.value[0]


def pixels(actor: int, number: int, tag: int = 0) -> np.ndarray:
    """A frame that says whose it is: actor, number and declaration in its first bytes."""
    f = np.zeros(FRAME, np.uint8)
    f[0, 0, :4] = actor, number % 256, number // 256 % 256, tag
    return f


def frame_learner(**extra) -> Learner:
    """A pixel learner whose frame ring holds FCAP frames; no updates (min_size = capacity)."""
    cfg = LearnerConfig.flat(capacity=1_000, min_size=1_000, ratio=None, device="cpu",
                             feature_dim=16, channels=8, hidden_sizes=(32, 32),
                             batch_size=8, publish_every_s=0.2, **DRQ_STEPS, **extra)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(frame_replay, "default_frame_capacity", lambda *a, **k: FCAP)
        return Learner(cfg, pixel_spec())


@pytest.fixture(scope="module")
def learner():
    lrn = frame_learner()
    yield lrn
    lrn.stop()


class Client:
    """One actor process over one PushTransitions stream; batches written by hand."""

    def __init__(self, channel, actor_id: str, uid: int, incarnation: int = 5):
        self.actor_id, self.uid, self.seq = actor_id, uid, 0
        stub = pb_grpc.LearnerStub(channel)
        self.sid = stub.Handshake(pb.HandshakeRequest(
            actor_id=actor_id, spec=pixel_spec(), incarnation=incarnation)).session_id
        self.q: queue.Queue = queue.Queue()
        self.acks = stub.PushTransitions(iter(self.q.get, None))

    def arrays(self, first: int, prev, obs, nxt, tag: int = 0, reward: float = 0.0) -> dict:
        n = len(obs)
        frames = [pixels(self.uid, first + i, tag) for i in range(len(prev))]
        return {"frames": np.stack(frames) if frames else np.zeros((0, *FRAME), np.uint8),
                "first_frame": first, "frame_prev": np.array(prev, np.int64),
                "obs_frame": np.array(obs, np.int64), "next_frame": np.array(nxt, np.int64),
                "action": np.zeros((n, ACTION), np.float32),
                "reward": np.full(n, reward, np.float32), "terminated": np.zeros(n, np.uint8)}

    def push(self, arrays: dict) -> pb.PushAck:
        self.seq += 1
        self.q.put(codec.pack_batch(arrays, session_id=self.sid, actor_id=self.actor_id,
                                    seq=self.seq, policy_version=0))
        return next(self.acks)

    def episode(self, first: int, n: int, tag: int = 0) -> pb.PushAck:
        """Frames first .. first + n - 1, one episode, a row per step."""
        prev = [-1] + list(range(first, first + n - 1))
        obs = list(range(first, first + n - 1))
        return self.push(self.arrays(first, prev, obs, [o + 1 for o in obs], tag))

    def close(self):
        self.q.put(None)


def training_alive(learner) -> bool:
    return learner.trainer.error is None and learner.trainer._thread.is_alive()


def newest_row(learner) -> dict:
    buf = learner.buffer
    with learner._model_lock:
        got = buf.gather(torch.tensor([(buf.pos - 1) % buf.capacity]))
    return {k: v[0].numpy() for k, v in got.items()}


def stack(uid: int, numbers, tag: int = 0) -> np.ndarray:
    return np.concatenate([pixels(uid, n, tag) for n in numbers])


def test_a_batch_without_frames_reads_frames_of_earlier_batches(learner, channel):
    """F = 0, first_frame 0: its row names frames 5 and 6 of an earlier batch (the training
    thread died on this one)."""
    a = Client(channel, "no-frames", uid=1)
    assert a.episode(0, 8).code == 0
    before = settled(learner)
    ack = a.push(a.arrays(0, [], [5], [6], reward=7.0))
    assert ack.code == 0 and ack.accepted == 1, ack.message
    after = settled(learner)
    assert training_alive(learner)
    assert after["inserted"] == before["inserted"] + 1
    row = newest_row(learner)
    np.testing.assert_array_equal(row["obs"], stack(1, [3, 4, 5]))
    np.testing.assert_array_equal(row["next_obs"], stack(1, [4, 5, 6]))
    assert row["reward"] == 7.0
    assert a.episode(8, 3).accepted == 2  # the stream and the learner go on
    assert settled(learner)["inserted"] == after["inserted"] + 2
    a.close()


@pytest.mark.parametrize("first,obs,nxt", [(8, 7, 8), (0, 7, 8), (8, 7, 2**62 - 1)])
def test_a_frame_not_yet_sent_is_invalid_before_the_ack(learner, channel, first, obs, nxt):
    """F = 0 and a row naming frame 8, which this actor has not sent: refused in its ack."""
    a = Client(channel, f"unsent-{first}-{nxt}", uid=2)
    assert a.episode(0, 8).code == 0
    before = settled(learner)
    ack = a.push(a.arrays(first, [], [obs], [nxt]))
    assert ack.code == IA and ack.accepted == 0 and "next_frame of row 0" in ack.message
    assert_refused_alone(learner, before)
    assert training_alive(learner)
    assert a.episode(8, 3).accepted == 2
    a.close()


@pytest.mark.parametrize("first,frames", [(2**63, 0), (2**64 - 1, 0), (2**63, 1), (2**62, 0)])
def test_frame_numbers_outside_int64_are_invalid_and_the_stream_stays(learner, channel, first,
                                                                       frames):
    a = Client(channel, f"huge-{first}-{frames}", uid=3)
    before = settled(learner)
    ack = a.push(a.arrays(first, [-1] * frames, [0], [1]))
    assert ack.code == IA and "first_frame" in ack.message and "\n" not in ack.message
    assert a.episode(0, 3).accepted == 2  # the same stream
    after = settled(learner)
    assert after["inserted"] == before["inserted"] + 2 and training_alive(learner)
    a.close()


def test_a_row_whose_next_frame_was_overwritten_is_never_stored(learner, channel):
    """An actor declares frames 0..9, again 0..2, then 5..6: frame 3 is still the first
    declaration's. Another actor's frames then overwrite that declaration's frames in the ring;
    a row (2 -> 3) whose obs frame is still there but whose next frame is gone must not be
    stored (its next_obs would be the other actor's frame)."""
    a, b = Client(channel, "redeclares", uid=4), Client(channel, "filler", uid=5)
    assert a.episode(0, 10, tag=1).code == 0
    assert a.episode(0, 3, tag=2).code == 0
    assert a.episode(5, 2, tag=3).code == 0
    assert b.episode(0, FCAP - 8).code == 0  # the first declaration's frames are overwritten
    before = settled(learner)
    ack = a.push(a.arrays(7, [], [2], [3]))
    after = settled(learner)
    assert ack.code == 0 and training_alive(learner)
    assert after["inserted"] == before["inserted"]
    assert after["rows_unresolved"] == before["rows_unresolved"] + 1
    # a frame beyond the newest declaration (5..6) is one this actor has not sent
    ack = a.push(a.arrays(7, [], [2], [7]))
    assert ack.code == IA and "next_frame of row 0" in ack.message
    # both of this declaration's frames there: stored, and read back as sent
    ack = a.push(a.arrays(7, [6], [6], [7], tag=3, reward=3.0))
    assert ack.code == 0 and settled(learner)["inserted"] == before["inserted"] + 1
    row = newest_row(learner)
    np.testing.assert_array_equal(row["obs"], stack(4, [5, 5, 6], tag=3))
    np.testing.assert_array_equal(row["next_obs"], stack(4, [5, 6, 7], tag=3))
    a.close()
    b.close()


def test_a_failing_insert_refuses_its_batch_and_training_goes_on(learner, channel):
    buf = learner.buffer
    write_rows = buf._write_rows

    def failing(arrays, *rest):
        if float(np.asarray(arrays["reward"])[0]) == -123.0:
            raise RuntimeError("injected")
        return write_rows(arrays, *rest)

    a = Client(channel, "failing-insert", uid=6)
    before = settled(learner)
    buf._write_rows = failing
    try:
        bad = a.arrays(0, [-1, 0, 1], [0, 1], [1, 2], reward=-123.0)
        assert a.push(bad).code == 0
        after = settled(learner)
    finally:
        del buf._write_rows
    assert training_alive(learner)
    assert after["insert_failures"] == before["insert_failures"] + 1
    assert after["rows_failed"] == before["rows_failed"] + 2
    assert after["inserted"] == before["inserted"]
    assert a.episode(3, 4).accepted == 3
    last = settled(learner)
    assert last["inserted"] == before["inserted"] + 3
    assert last["received"] == last["inserted"] + last["rows_unresolved"] + last["rows_failed"]
    assert pb_grpc.LearnerStub(channel).GetStatus(pb.StatusRequest()).learner_id
    a.close()


def test_frame_counters_reach_get_status_herd_status_and_metrics_csv(learner, channel, tmp_path):
    """frames_received and rows_unresolved over GetStatus, in `herd status`'s learner panel and
    in a metrics.csv row."""
    import csv
    import io

    from rich.console import Console

    from herd.live import status_view
    from herd.metrics import MetricsWriter
    from herd.progress import progress_row

    a = Client(channel, "counted", uid=8)
    before = settled(learner)
    # this learner never saw frames 3 and 4 of this actor (sent to a learner before a restart)
    assert a.push(a.arrays(10, [], [3], [4])).code == 0
    assert a.episode(10, 4).code == 0
    ls = settled(learner)
    assert ls["rows_unresolved"] == before["rows_unresolved"] + 1
    assert ls["frames_received"] == before["frames_received"] + 4
    got = pb_grpc.LearnerStub(channel).GetStatus(pb.StatusRequest())
    for key in ("frames_received", "rows_unresolved", "insert_failures", "rows_failed"):
        assert getattr(got, key) == ls[key], key
    out = io.StringIO()
    Console(file=out, width=200).print(status_view({"learner": ls, "actors": [], "job_id": "j"}))
    assert f"frames {ls['frames_received']}  rows unresolved {ls['rows_unresolved']}" in out.getvalue()
    row = progress_row({"learner": ls, "actors": []}, None, 1.0, (time.monotonic() - 1, 0, 0, {}))
    writer = MetricsWriter(tmp_path)
    writer.write(row)
    writer.close()
    with open(tmp_path / "metrics.csv") as f:
        (written,) = list(csv.DictReader(f))
    assert int(written["frames_received"]) == ls["frames_received"]
    assert int(written["rows_unresolved"]) == ls["rows_unresolved"]
    a.close()
