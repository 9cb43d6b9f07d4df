"""The learner's session table and dedup books, bounded without forgetting what is still needed,
over raw gRPC against a real learner on loopback:

- one stream that names more sessions than its bound gets RESOURCE_EXHAUSTED acks for the
  extra ones, and a new actor still gets in;
- a flood of handshakes on one connection forgets that connection's own unused sessions, never
  another actor's session waiting for its first push;
- an actor process's dedup outlives any number of other actor processes coming and going, for as
  long as it may resend; after its sessions have been gone for the resend window it is forgotten.

The table's bound is set low (LearnerServicer.MAX_SESSIONS) so that a few dozen handshakes reach it.
"""

from __future__ import annotations

import grpc
import pytest

from herd.learner.config import LearnerConfig
from herd.learner.learner import Learner
from herd.learner.rpc.handlers import LearnerServicer
from herd.proto import codec
from herd.proto import herd_pb2 as pb
from herd.proto import herd_pb2_grpc as pb_grpc
from tests.learner.rpc.test_bad_input import Stream, counters, rows

BOUND = 64
RE = grpc.StatusCode.RESOURCE_EXHAUSTED.value[0]


@pytest.fixture(scope="module")
def learner(spec):
    lrn = Learner(LearnerConfig.flat(capacity=10_000, min_size=10_000, batch_size=64,
                                     hidden_sizes=(32, 32)), spec)
    yield lrn
    lrn.stop()


@pytest.fixture
def bound(monkeypatch):
    monkeypatch.setattr(LearnerServicer, "MAX_SESSIONS", BOUND)


def channel_of(learner):
    """A connection of its own (gRPC would share one between channels of the same target)."""
    return grpc.insecure_channel(learner.address(), options=[("grpc.use_local_subchannel_pool", 1)])


def handshake(ch, spec, actor, incarnation=0) -> int:
    return pb_grpc.LearnerStub(ch).Handshake(
        pb.HandshakeRequest(actor_id=actor, spec=spec, incarnation=incarnation)).session_id


def batch(sid, actor, seq=1, n=4):
    return codec.pack_batch(rows(n, seed=seq), session_id=sid, actor_id=actor, seq=seq,
                            policy_version=0)


def test_one_stream_naming_many_sessions_leaves_room_for_new_actors(learner, spec, bound):
    flood = channel_of(learner)
    s = Stream(flood)
    codes = []
    for i in range(BOUND + 1):
        sid = handshake(flood, spec, f"flood-{i}")
        codes.append(s.send(batch(sid, f"flood-{i}")).code)
    assert codes.count(0) >= 1 and codes.count(RE) >= BOUND + 1 - 16
    with channel_of(learner) as ch:
        for k in range(3):  # new actors, each on its own connection and stream
            sid = handshake(ch, spec, f"newcomer-{k}")
            t = Stream(ch)
            ack = t.send(batch(sid, f"newcomer-{k}"))
            assert ack.code == 0 and ack.accepted == 4, ack.message
            t.close()
    s.close()
    flood.close()


def test_a_handshake_flood_forgets_only_its_own_unused_sessions(learner, spec, bound):
    with channel_of(learner) as ch, channel_of(learner) as flood:
        sid = handshake(ch, spec, "patient")  # handshaken; its first push comes later
        stub = pb_grpc.LearnerStub(flood)
        for i in range(3 * BOUND):
            stub.Handshake(pb.HandshakeRequest(actor_id=f"idle-{i}", spec=spec))
        # the flood holds its share of the table, the rest stays free for other connections
        held = [s for s in learner.ingest.servicer.sessions.values() if s.actor_id.startswith("idle-")]
        assert len(held) == BOUND // 4
        t = Stream(ch)
        ack = t.send(batch(sid, "patient"))
        assert ack.code == 0, ack.message
        t.close()


def test_dedup_outlives_many_other_actor_processes(learner, spec, bound):
    with channel_of(learner) as ch:
        sid = handshake(ch, spec, "resender", incarnation=7)
        s = Stream(ch)
        assert s.send(batch(sid, "resender", seq=1)).accepted == 4
        s.close()  # the connection breaks before its ack arrived, as far as the actor knows
        for i in range(BOUND + 8):  # other actor processes come and go meanwhile
            other = handshake(ch, spec, f"passer-{i}", incarnation=1000 + i)
            t = Stream(ch)
            assert t.send(batch(other, f"passer-{i}")).code == 0
            t.close()
        before = counters(learner)
        sid = handshake(ch, spec, "resender", incarnation=7)  # the same process reconnects
        s = Stream(ch)
        ack = s.send(batch(sid, "resender", seq=1))
        assert ack.code == 0 and ack.duplicate, "a batch taken before was taken again"
        assert counters(learner)["received"] == before["received"]
        assert s.send(batch(sid, "resender", seq=2)).accepted == 4  # new batches go on
        s.close()


def test_dedup_is_forgotten_after_the_resend_window(learner, spec, monkeypatch):
    servicer = learner.ingest.servicer
    monkeypatch.setattr(LearnerServicer, "RESEND_WINDOW_S", 0.0)
    with channel_of(learner) as ch:
        sid = handshake(ch, spec, "gone", incarnation=11)
        s = Stream(ch)
        assert s.send(batch(sid, "gone", seq=3)).accepted == 4
        s.close()
        assert ("gone", 11) in servicer.taken
        handshake(ch, spec, "later", incarnation=12)  # a handshake sweeps expired books
        assert ("gone", 11) not in servicer.taken
        assert ("gone", 11) not in servicer._key_locks


def test_handshakes_wait_while_sessions_in_use_or_books_fill_the_table(learner, spec, monkeypatch):
    """Refused with RESOURCE_EXHAUSTED (the client waits and retries), never forgetting a session
    in use or a book within its window; room again once a stream ends or a window passes."""
    servicer = learner.ingest.servicer
    monkeypatch.setattr(LearnerServicer, "MAX_SESSIONS", len(servicer._active) + 2)
    with channel_of(learner) as ch:
        streams = []
        for i in range(2):
            sid = handshake(ch, spec, f"busy-{i}")
            streams.append(Stream(ch))
            assert streams[-1].send(batch(sid, f"busy-{i}")).code == 0
        with pytest.raises(grpc.RpcError) as e:
            handshake(ch, spec, "one-too-many")
        assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "in use" in e.value.details()
        streams.pop().close()
        assert handshake(ch, spec, "one-too-many")
        streams.pop().close()
        books = len(servicer._key_sessions) + len(servicer._ended)
        monkeypatch.setattr(LearnerServicer, "MAX_BOOKS", books + 1)
        sid = handshake(ch, spec, "booked", incarnation=21)
        s = Stream(ch)
        assert s.send(batch(sid, "booked")).code == 0
        s.close()  # its books stay for the resend window
        with pytest.raises(grpc.RpcError) as e:
            handshake(ch, spec, "unbooked", incarnation=22)
        assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "duplicate books" in e.value.details()
        sid = handshake(ch, spec, "booked", incarnation=21)  # the booked process itself: yes
        s = Stream(ch)
        assert s.send(batch(sid, "booked", seq=1)).duplicate
        s.close()
        monkeypatch.setattr(LearnerServicer, "RESEND_WINDOW_S", 0.0)
        assert handshake(ch, spec, "unbooked", incarnation=22)
