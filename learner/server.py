"""The learner's gRPC face: handshake, transition ingest, weight streams and status.

Runs on gRPC's thread pool. Every batch is validated before it reaches the staging queue; an
invalid one is answered in its own ack (the stream stays open) and leaves no trace.
"""

from __future__ import annotations

import collections
import contextlib
import hmac
import secrets
import threading
from concurrent import futures
from typing import Protocol

import grpc
from google.protobuf.message import DecodeError

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


class Unparsable:
    """What the tolerant deserializer hands the servicer for bytes that are no TransitionBatch."""

    seq = 0

    def __init__(self, nbytes: int, why: str):
        self.nbytes, self.why = nbytes, why


def parse_batch(raw: bytes):
    """TransitionBatch.FromString that never raises: garbage is answered in-stream
    (INVALID_ARGUMENT) instead of gRPC aborting the whole call with INTERNAL."""
    try:
        return pb.TransitionBatch.FromString(raw)
    except (DecodeError, ValueError, RuntimeError) as e:
        return Unparsable(len(raw), f"{type(e).__name__}: {e}")


class LearnerServicer(pb_grpc.LearnerServicer):
    # Sessions are random 63-bit ids: unguessable, and one minted before a learner restart is
    # unknown afterwards (FAILED_PRECONDITION) instead of colliding with a new one.
    MAX_SESSIONS = 4_096
    """Handshaken sessions kept; the oldest are forgotten first (its actor handshakes again)."""

    def __init__(self, ingest: Ingest, max_batch: int):
        self.ingest = ingest
        self.max_batch = max_batch
        self.sessions: collections.OrderedDict[int, Session] = collections.OrderedDict()
        self.received: dict[str, int] = {}
        # accepted transitions per session (actor incarnation), bounded like `sessions`
        self.session_received: collections.OrderedDict[int, tuple[str, int]] = collections.OrderedDict()
        self._active: collections.Counter[int] = collections.Counter()  # open streams per session
        # (actor_id, incarnation) -> highest seq staged, and a lock per key: an actor process's
        # batches are taken one at a time across its connections, so a resend on a new
        # connection waits for the old connection's attempt at the same batch to settle.
        self.taken: collections.OrderedDict[tuple[str, int], int] = collections.OrderedDict()
        self._key_locks: dict[tuple[str, int], threading.Lock] = {}
        self.duplicates = 0
        self._lock = threading.Lock()
        self.stopping = threading.Event()

    def Handshake(self, request, context):
        why = spec_mismatch(self.ingest.spec, request.spec)
        if why:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, f"env spec differs: {why}")
        if not request.actor_id:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "actor_id is empty")
        with self._lock:
            sid = secrets.randbits(63) or 1
            self.sessions[sid] = Session(sid, request.actor_id, self.ingest.spec, request.incarnation)
            self.session_received[sid] = (request.actor_id, 0)
            self._forget_idle()
        return pb.HandshakeReply(
            session_id=sid,
            policy_version=self.ingest.publisher.version,
            max_batch=self.max_batch,
            learner_id=self.ingest.learner_id,
        )

    def _forget_idle(self) -> None:
        """Bound the session table: drop the oldest sessions no open stream uses (their actors
        handshake again on their next connection)."""
        for sid in list(self.sessions):
            if len(self.sessions) <= self.MAX_SESSIONS:
                break
            if not self._active[sid]:
                del self.sessions[sid]
        while len(self.session_received) > self.MAX_SESSIONS:
            self.session_received.popitem(last=False)
        while len(self.taken) > self.MAX_SESSIONS:
            key, _ = self.taken.popitem(last=False)
            self._key_locks.pop(key, None)

    def PushTransitions(self, request_iterator, context):
        used: set[int] = set()  # a session lives as long as the connection that uses it
        try:
            yield from self._ingest_stream(request_iterator, context, used)
        finally:
            with self._lock:
                for sid in used:
                    self._active[sid] -= 1
                    if self._active[sid] <= 0:
                        del self._active[sid]
                        self.sessions.pop(sid, None)

    def _ingest_stream(self, request_iterator, context, used: set[int]):
        for batch in request_iterator:
            try:
                if isinstance(batch, Unparsable):
                    raise BatchRejected(grpc.StatusCode.INVALID_ARGUMENT,
                                        f"{batch.nbytes} bytes are no TransitionBatch ({batch.why})")
                with self._lock:
                    session = self.sessions.get(batch.session_id)
                    if session is not None and batch.session_id not in used:
                        used.add(batch.session_id)
                        self._active[batch.session_id] += 1
                arrays = validate(batch, session, self.max_batch)
            except BatchRejected as e:
                self.ingest.count_reject()
                yield pb.PushAck(seq=batch.seq, code=e.code.value[0], message=e.message)
                continue
            key = (session.actor_id, session.incarnation) if session.incarnation else None
            # the rows' bytes, counted without ByteSize (which re-encodes the whole message)
            payload = sum(a.nbytes for a in arrays.values())
            with self._key_lock(key):
                if key is not None and batch.seq <= self.taken.get(key, 0):
                    ack = self._duplicate(batch)
                else:
                    # Blocks while the staging queue is full: the actor's window stalls
                    # (backpressure).
                    while not self.ingest.stage(
                        batch.actor_id, arrays, batch.policy_version, payload
                    ):
                        if self.stopping.is_set() or not context.is_active():
                            return
                    ack = self._taken(batch, key)
            yield ack

    def _key_lock(self, key):
        if key is None:
            return contextlib.nullcontext()
        with self._lock:
            return self._key_locks.setdefault(key, threading.Lock())

    def _taken(self, batch, key) -> pb.PushAck:
        with self._lock:
            if key is not None:
                self.taken[key] = batch.seq
                self.taken.move_to_end(key)
            total = self.received.get(batch.actor_id, 0) + batch.count
            self.received[batch.actor_id] = total
            actor, n = self.session_received.get(batch.session_id, (batch.actor_id, 0))
            self.session_received[batch.session_id] = (actor, n + batch.count)
        return pb.PushAck(seq=batch.seq, accepted=batch.count, received_total=total)

    def _duplicate(self, batch) -> pb.PushAck:
        """A batch staged before whose ack never arrived: acknowledged again, not inserted."""
        with self._lock:
            self.duplicates += 1
            total = self.received.get(batch.actor_id, 0)
        return pb.PushAck(seq=batch.seq, accepted=batch.count, received_total=total, duplicate=True)

    def WatchWeights(self, request, context):
        have = request.have_version
        publisher = self.ingest.publisher
        while context.is_active() and not self.stopping.is_set() and not publisher.closed:
            newer = publisher.wait_newer_wire(have, timeout=0.5)
            if newer is not None:  # serialized once per version, not once per actor
                have, wire = newer
                yield wire

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


def add_servicer(servicer: LearnerServicer, server: grpc.Server) -> None:
    """The generated registration, except that PushTransitions parses tolerantly (parse_batch)."""
    handlers = {
        "Handshake": grpc.unary_unary_rpc_method_handler(
            servicer.Handshake, request_deserializer=pb.HandshakeRequest.FromString,
            response_serializer=pb.HandshakeReply.SerializeToString),
        "PushTransitions": grpc.stream_stream_rpc_method_handler(
            servicer.PushTransitions, request_deserializer=parse_batch,
            response_serializer=pb.PushAck.SerializeToString),
        "WatchWeights": grpc.unary_stream_rpc_method_handler(
            servicer.WatchWeights, request_deserializer=pb.WatchRequest.FromString,
            response_serializer=bytes),  # WatchWeights yields the publisher's serialized bytes
        "GetStatus": grpc.unary_unary_rpc_method_handler(
            servicer.GetStatus, request_deserializer=pb.StatusRequest.FromString,
            response_serializer=pb.LearnerStatus.SerializeToString),
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("herd.v1.Learner", handlers),))


def server_credentials(tls_cert: str | None, tls_key: str | None) -> grpc.ServerCredentials | None:
    """TLS credentials from PEM files, or None for a plaintext port."""
    if not tls_cert and not tls_key:
        return None
    if not (tls_cert and tls_key):
        raise ValueError("learner.tls_cert and learner.tls_key go together")
    with open(tls_key, "rb") as k, open(tls_cert, "rb") as c:
        return grpc.ssl_server_credentials([(k.read(), c.read())])


def start_server(servicer: LearnerServicer, host: str, port: int, token: str | None,
                 max_message_mb: int, max_workers: int = 128, tls_cert: str | None = None,
                 tls_key: str | None = None) -> tuple[grpc.Server, int]:
    """Bind and start; beyond loopback a token is mandatory. TLS when a cert and key are given."""
    if not is_loopback(host) and not token:
        raise ValueError(
            f"learner.host={host!r} exposes the gRPC port beyond loopback: set learner.token"
        )
    creds = server_credentials(tls_cert, tls_key)
    limit = max_message_mb * 1024 * 1024
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="herd-grpc"),
        interceptors=[TokenInterceptor(token)] if token else [],
        options=[
            ("grpc.max_receive_message_length", limit),
            ("grpc.max_send_message_length", limit),
            # A port already held by a live process fails the bind, instead of two servers
            # (say, a restarted learner beside a stale one) sharing it silently.
            ("grpc.so_reuseport", 0),
        ],
    )
    add_servicer(servicer, server)
    address = f"{host}:{port}"
    bound = (server.add_secure_port(address, creds) if creds is not None
             else server.add_insecure_port(address))
    if bound == 0:
        raise OSError(f"could not bind the learner's gRPC port on {host}:{port}")
    server.start()
    return server, bound
