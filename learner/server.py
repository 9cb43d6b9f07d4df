"""The learner's gRPC face: handshake, transition ingest, weight streams and status.

Runs on gRPC's thread pool. Every batch is validated before it reaches the staging queue; an
invalid one is answered in its own ack (the stream stays open) and leaves no trace.
"""

from __future__ import annotations

import hmac
import itertools
import threading
from concurrent import futures
from typing import Protocol

import grpc

from learner.publisher import WeightPublisher
from learner.validate import BatchRejected, Session, spec_mismatch, validate
from proto import codec
from proto import herd_pb2 as pb
from proto import herd_pb2_grpc as pb_grpc


class Ingest(Protocol):
    """What the server needs from the learner."""

    learner_id: str
    spec: pb.EnvSpec
    publisher: WeightPublisher

    def stage(self, actor_id: str, arrays: dict, policy_version: int, nbytes: int) -> bool: ...

    def count_reject(self) -> None: ...

    def status(self) -> pb.LearnerStatus: ...


class LearnerServicer(pb_grpc.LearnerServicer):
    def __init__(self, ingest: Ingest, max_batch: int):
        self.ingest = ingest
        self.max_batch = max_batch
        self.sessions: dict[int, Session] = {}
        self.received: dict[str, int] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self.stopping = threading.Event()

    def Handshake(self, request, context):
        why = spec_mismatch(self.ingest.spec, request.spec)
        if why:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, f"env spec differs: {why}")
        if not request.actor_id:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "actor_id is empty")
        with self._lock:
            sid = next(self._ids)
            self.sessions[sid] = Session(sid, request.actor_id, self.ingest.spec)
        return pb.HandshakeReply(
            session_id=sid,
            policy_version=self.ingest.publisher.version,
            max_batch=self.max_batch,
            learner_id=self.ingest.learner_id,
        )

    def PushTransitions(self, request_iterator, context):
        for batch in request_iterator:
            try:
                arrays = validate(batch, self.sessions.get(batch.session_id), self.max_batch)
            except BatchRejected as e:
                self.ingest.count_reject()
                yield pb.PushAck(seq=batch.seq, code=e.code.value[0], message=e.message)
                continue
            # Blocks while the staging queue is full: the actor's window stalls (backpressure).
            while not self.ingest.stage(
                batch.actor_id, arrays, batch.policy_version, batch.ByteSize()
            ):
                if self.stopping.is_set() or not context.is_active():
                    return
            with self._lock:
                total = self.received.get(batch.actor_id, 0) + batch.count
                self.received[batch.actor_id] = total
            yield pb.PushAck(seq=batch.seq, accepted=batch.count, received_total=total)

    def WatchWeights(self, request, context):
        have = request.have_version
        publisher = self.ingest.publisher
        while context.is_active() and not self.stopping.is_set() and not publisher.closed:
            weights = publisher.wait_newer(have, timeout=0.5)
            if weights is not None:
                have = weights.version
                yield weights

    def GetStatus(self, request, context):
        return self.ingest.status()


class TokenInterceptor(grpc.ServerInterceptor):
    """Refuses every call whose metadata lacks the job's token (UNAUTHENTICATED)."""

    def __init__(self, token: str):
        self._token = token.encode()

        def deny(request, context):
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong herd token")

        self._deny = deny

    def intercept_service(self, continuation, details):
        sent = dict(details.invocation_metadata or ()).get(codec.TOKEN_HEADER, "")
        if hmac.compare_digest(sent.encode(), self._token):
            return continuation(details)
        handler = continuation(details)
        if handler is None:
            return None
        if handler.request_streaming and handler.response_streaming:
            return grpc.stream_stream_rpc_method_handler(lambda it, ctx: self._deny(None, ctx))
        if handler.response_streaming:
            return grpc.unary_stream_rpc_method_handler(self._deny)
        return grpc.unary_unary_rpc_method_handler(self._deny)


def is_loopback(host: str) -> bool:
    return host in ("127.0.0.1", "localhost", "::1") or host.startswith("127.")


def start_server(servicer: LearnerServicer, host: str, port: int, token: str | None,
                 max_message_mb: int, max_workers: int = 128) -> tuple[grpc.Server, int]:
    """Bind and start; beyond loopback a token is mandatory."""
    if not is_loopback(host) and not token:
        raise ValueError(
            f"learner.host={host!r} exposes the gRPC port beyond loopback: set learner.token"
        )
    limit = max_message_mb * 1024 * 1024
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="herd-grpc"),
        interceptors=[TokenInterceptor(token)] if token else [],
        options=[
            ("grpc.max_receive_message_length", limit),
            ("grpc.max_send_message_length", limit),
        ],
    )
    pb_grpc.add_LearnerServicer_to_server(servicer, server)
    bound = server.add_insecure_port(f"{host}:{port}")
    if bound == 0:
        raise OSError(f"could not bind the learner's gRPC port on {host}:{port}")
    server.start()
    return server, bound
