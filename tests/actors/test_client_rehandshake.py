"""A learner that forgot an actor's session: the actor's client handshakes again and delivers
its batches once each, nothing counted rejected, the books exact (acked = received = inserted).

A real learner on loopback whose session table is bounded low: handshakes of other actors, each
on its own connection, push the client's unused session out of it before its first batch. A
stub learner (a real gRPC server) that forgets every session shows the client backing off
between its handshakes, and that a malformed batch's ack is still a rejection.
"""

from __future__ import annotations

import threading
import time
from concurrent import futures

import grpc
import numpy as np

from herd.actors.client import LearnerClient
from herd.learner.rpc.handlers import LearnerServicer
from herd.proto import herd_pb2 as pb
from herd.proto import herd_pb2_grpc as pb_grpc
from tests.learner.ingest.test_backpressure import _rows

BOUND = 4


def _wait(ok, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not ok() and time.monotonic() < deadline:
        time.sleep(0.02)
    return ok()


def _crowd_out(learner, spec, n):
    """`n` other actors handshake, each on a connection of its own, and push nothing."""
    for i in range(n):
        with grpc.insecure_channel(learner.address(),
                                   options=[("grpc.use_local_subchannel_pool", 1)]) as ch:
            pb_grpc.LearnerStub(ch).Handshake(pb.HandshakeRequest(actor_id=f"crowd-{i}", spec=spec))


def test_a_forgotten_session_is_handshaken_again_and_nothing_is_lost(make_learner, spec, monkeypatch):
    monkeypatch.setattr(LearnerServicer, "MAX_SESSIONS", BOUND)
    learner = make_learner(min_size=50_000, capacity=50_000)
    servicer = learner.ingest.servicer
    client = LearnerClient(learner.address(), "forgotten", spec, window=4, backoff=(0.05, 0.5))
    try:
        assert _wait(client._connected.is_set), "the client never handshook"
        first = client._session
        _crowd_out(learner, spec, BOUND + 1)
        assert first not in servicer.sessions, "the client's unused session is still known"
        batches, rows = 3, 16
        for s in range(batches):
            client.push(_rows(rows, s), policy_version=0)
        assert client.flush(timeout=20)
        sent = client.stats["sent"]
        assert sent == batches * rows
        assert client.stats["rejected"] == 0 and client.stats["acked"] == sent
        assert client.stats["rehandshakes"] >= 1 and client._session != first
        assert client.disconnects["FAILED_PRECONDITION: unknown session"] >= 1
        assert _wait(lambda: learner.buffer.inserted >= sent)
        assert learner.received == sent and learner.buffer.inserted == sent
        got = np.sort(learner.buffer.reward[:sent].cpu().numpy())  # each batch once, none twice
        np.testing.assert_array_equal(got, np.repeat(np.arange(batches, dtype=np.float32), rows))
    finally:
        client.close()


class _Forgetful(pb_grpc.LearnerServicer):
    """Answers every batch with `code` (and takes it when 0); counts handshakes."""

    def __init__(self):
        self.code, self.handshakes, self.taken = grpc.StatusCode.FAILED_PRECONDITION, 0, []
        self.lock = threading.Lock()

    def Handshake(self, request, context):
        with self.lock:
            self.handshakes += 1
            return pb.HandshakeReply(session_id=self.handshakes, learner_id="stub", max_batch=64)

    def PushTransitions(self, request_iterator, context):
        for batch in request_iterator:
            with self.lock:
                if self.code == grpc.StatusCode.OK:
                    self.taken.append(batch.seq)
                    yield pb.PushAck(seq=batch.seq, accepted=batch.count)
                else:
                    yield pb.PushAck(seq=batch.seq, code=self.code.value[0], message="no")


def test_a_learner_that_keeps_forgetting_is_handshaken_with_backoff(spec):
    stub = _Forgetful()
    server = grpc.server(futures.ThreadPoolExecutor(8))
    pb_grpc.add_LearnerServicer_to_server(stub, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    client = LearnerClient(f"127.0.0.1:{port}", "a", spec, window=2, backoff=(0.05, 0.4))
    try:
        client.push(_rows(8, 0), policy_version=0)
        time.sleep(2.0)
        # backoff 0.05 s doubling to 0.4 s: about 7 handshakes in 2 s, not one per 0.05 s (~40)
        assert 3 <= stub.handshakes <= 15, stub.handshakes
        assert client.stats["rehandshakes"] >= 2 and client.stats["rejected"] == 0
        assert client.in_flight == 1 and not client.stats["acked"]
        with stub.lock:
            stub.code = grpc.StatusCode.OK
        assert client.flush(timeout=10)
        assert client.stats["acked"] == 8 and stub.taken == [1]
        with stub.lock:  # malformed data stays a rejection: no handshake again for it
            stub.code, before = grpc.StatusCode.INVALID_ARGUMENT, stub.handshakes
        client.push(_rows(8, 1), policy_version=0)
        assert client.flush(timeout=10)
        assert client.stats["rejected"] == 8 and client.stats["rejected_batches"] == 1
        assert stub.handshakes == before
    finally:
        client.close()
        server.stop(0)
