"""A batch resent after its ack was lost (the connection broke after the learner took it) is
acknowledged again but not inserted twice; a new actor process (new incarnation) starts anew."""

from __future__ import annotations

import grpc

from herd.learner.config import LearnerConfig
from herd.learner.learner import Learner
from herd.proto import codec
from herd.proto import herd_pb2 as pb
from herd.proto import herd_pb2_grpc as pb_grpc
from tests.learner.rpc.test_bad_input import Stream, rows


def handshake(channel, spec, actor_id, incarnation):
    return pb_grpc.LearnerStub(channel).Handshake(
        pb.HandshakeRequest(actor_id=actor_id, spec=spec, incarnation=incarnation)).session_id


def batch(sid, seq, n=8):
    return codec.pack_batch(rows(n, seed=seq), session_id=sid, actor_id="a", seq=seq, policy_version=0)


def test_resent_batch_is_acked_not_inserted_again(spec) -> None:
    learner = Learner(LearnerConfig.flat(capacity=10_000, min_size=10_000, batch_size=64,
                                    hidden_sizes=(32, 32)), spec)
    channel = grpc.insecure_channel(learner.address())
    try:
        first = Stream(channel)
        ack = first.send(batch(handshake(channel, spec, "a", 7), seq=1))
        assert ack.accepted == 8 and not ack.duplicate
        first.close()  # as if this ack had been lost with the connection
        again = Stream(channel)
        sid = handshake(channel, spec, "a", 7)  # same actor process, new connection
        dup = again.send(batch(sid, seq=1))
        assert dup.code == 0 and dup.accepted == 8 and dup.duplicate
        assert again.send(batch(sid, seq=2)).duplicate is False
        again.close()
        restarted = Stream(channel)  # a new process of actor "a": its seq starts at 1 again
        ack = restarted.send(batch(handshake(channel, spec, "a", 8), seq=1))
        assert ack.accepted == 8 and not ack.duplicate
        restarted.close()
        st = learner.status_dict()
        assert st["received"] == 24 and st["duplicate_batches"] == 1
        assert learner.servicer.received["a"] == 24
    finally:
        channel.close()
        learner.stop()


def test_without_incarnation_nothing_is_deduplicated(spec) -> None:
    learner = Learner(LearnerConfig.flat(capacity=10_000, min_size=10_000, batch_size=64,
                                    hidden_sizes=(32, 32)), spec)
    channel = grpc.insecure_channel(learner.address())
    try:
        for _ in range(2):
            s = Stream(channel)
            assert not s.send(batch(handshake(channel, spec, "a", 0), seq=1)).duplicate
            s.close()
        assert learner.status_dict()["received"] == 16
    finally:
        channel.close()
        learner.stop()
