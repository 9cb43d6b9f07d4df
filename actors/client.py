"""The actor's side of the wire: handshake, a windowed push stream, and a weights watcher.

Nothing is dropped: a batch stays in `pending` until the learner acknowledges it; if the stream
breaks, the client reconnects with exponential backoff and sends every unacknowledged batch
again. A learner that no longer knows the client's session (it forgot an unused one, or
restarted) answers FAILED_PRECONDITION in the ack: the batch stays pending, the stream ends and
the client handshakes again and resends. `push` blocks while `window` batches are
unacknowledged, which bounds memory.
"""

from __future__ import annotations

import collections
import logging
import queue
import random
import secrets
import socket
import threading
import time

import grpc

from herd.proto import codec, keepalive
from herd.proto import herd_pb2 as pb
from herd.proto import herd_pb2_grpc as pb_grpc

log = logging.getLogger("herd.actor")
_CLOSE = object()
UNKNOWN_SESSION = grpc.StatusCode.FAILED_PRECONDITION.value[0]
"""A batch's ack code when the learner does not know the batch's session (learner/rpc/validate.py):
the one ack the client answers with a new handshake, never counted rejected."""
HANDSHAKE_TIMEOUT_S = 60.0
"""A handshake's deadline. A learner that is down refuses the connection at once, one whose
node died is found by keepalive (proto/keepalive.py): what this waits for is a live learner
slow to answer, as when dozens of actors start at once beside a busy ingest loop. A shorter
deadline there only adds a reconnect and a handshake more to the queue."""


class LearnerClient:
    def __init__(self, address: str, actor_id: str, spec: pb.EnvSpec, *, token: str | None = None,
                 window: int = 4, backoff=(0.2, 5.0), max_message_mb: int = 64, on_weights=None,
                 tls_ca: str | None = None, weights_address: str | None = None):
        """`weights_address`: where to watch for weights, when not the learner itself (the
        node's relay, learner/rpc/relay.py, on loopback)."""
        self.address, self.actor_id, self.spec = address, actor_id, spec
        self.window, self.backoff = window, backoff
        self.on_weights = on_weights
        self._metadata = ((codec.TOKEN_HEADER, token),) if token else ()
        limit = max_message_mb * 1024 * 1024
        options = [("grpc.max_send_message_length", limit), ("grpc.max_receive_message_length", limit),
                   *keepalive.CLIENT_OPTIONS]
        creds = None
        if tls_ca:
            with open(tls_ca, "rb") as f:
                creds = grpc.ssl_channel_credentials(root_certificates=f.read())
        self._dial = lambda where: (grpc.secure_channel(where, creds, options=options) if creds
                                    else grpc.insecure_channel(where, options=options))
        self._channel = self._dial(address)
        self._stub = pb_grpc.LearnerStub(self._channel)
        self._weights_channel = (grpc.insecure_channel(weights_address, options=options)
                                 if weights_address else None)
        self._weights_stub = pb_grpc.LearnerStub(self._weights_channel or self._channel)
        self._push_at(address, self._channel)

        self._lock = threading.Condition()
        self._pending: collections.OrderedDict[int, codec.WireBatch] = collections.OrderedDict()
        self._sent_at: dict[int, float] = {}
        self._outbox: queue.Queue | None = None
        self._seq = 0
        self._session = 0
        # this client's random id: with seq, the learner spots a resent batch it already took
        self.incarnation = secrets.randbits(63) or 1
        self.learner_id = ""
        self.policy_version = 0
        self.state_dim = 0  # the last handshake's reply: the learner's critics read the state
        self._handshaken = threading.Event()
        self.stats = collections.Counter()
        self.push_latency_s = 0.0
        self.wait_s = 0.0  # total time push() blocked on a full window
        self.reconnects = 0
        # why each connection ended, "CODE: details" -> times (a stream the learner ended
        # cleanly counts as "ended"): tells a learner restart from a keepalive or a GOAWAY
        self.disconnects: collections.Counter[str] = collections.Counter()
        self._closed = threading.Event()
        self._connected = threading.Event()
        self._threads = [
            threading.Thread(target=self._push_loop, daemon=True, name="herd-push"),
            threading.Thread(target=self._watch_loop, daemon=True, name="herd-weights"),
        ]
        for t in self._threads:
            t.start()

    # ---- stepping thread ----
    def push(self, arrays: dict, policy_version: int) -> None:
        """Queue one batch; blocks while the window is full. Never drops. A pixel batch's
        frame_state goes only to a learner that reads it: its first push waits for the
        handshake's reply to say so."""
        if "frame_state" in arrays:
            while not self._handshaken.wait(0.1):
                if self._closed.is_set():
                    raise RuntimeError("client closed")
            if not self.state_dim:
                arrays = {k: v for k, v in arrays.items() if k != "frame_state"}
        with self._lock:
            if len(self._pending) >= self.window:  # backpressure: the learner is behind
                t0 = time.monotonic()
                self._lock.wait_for(
                    lambda: len(self._pending) < self.window or self._closed.is_set())
                self.wait_s += time.monotonic() - t0
            if self._closed.is_set():
                raise RuntimeError("client closed")
            self._seq += 1
            batch = codec.WireBatch(arrays, session_id=self._session, actor_id=self.actor_id,
                                    seq=self._seq, policy_version=policy_version)
            self._pending[self._seq] = batch
            self._sent_at[self._seq] = time.monotonic()
            self.stats["sent"] += batch.count
            self.stats["bytes_sent"] += batch.nbytes
            if self._outbox is not None:
                self._outbox.put(batch)

    @property
    def in_flight(self) -> int:
        """Batches pushed and not yet acknowledged (at most `window`)."""
        return len(self._pending)

    def flush(self, timeout: float) -> bool:
        """Wait until every pushed batch is acknowledged."""
        with self._lock:
            return self._lock.wait_for(lambda: not self._pending, timeout)

    def close(self) -> None:
        self._closed.set()
        with self._lock:
            self._lock.notify_all()
            if self._outbox is not None:
                self._outbox.put(_CLOSE)
        self._channel.close()
        if self._push_channel is not self._channel:
            self._push_channel.close()
        if self._weights_channel is not None:
            self._weights_channel.close()

    # ---- background threads ----
    def _push_at(self, address: str, channel: grpc.Channel) -> None:
        """Push (and handshake) through `channel`, to `address`."""
        self._push_address, self._push_channel = address, channel
        # batches go out as hand-serialized WireBatch bytes (proto/codec.py), built by one join
        # instead of protobuf's encoder (twice, counting ByteSize)
        self._push_call = channel.stream_stream(
            codec.METHOD_PATHS["PushTransitions"], request_serializer=codec.WireBatch.SerializeToString,
            response_deserializer=pb.PushAck.FromString)

    def _handshake(self) -> None:
        request = pb.HandshakeRequest(actor_id=self.actor_id, spec=self.spec, incarnation=self.incarnation)
        reply = self._stub.Handshake(request, metadata=self._metadata, timeout=HANDSHAKE_TIMEOUT_S)
        # One of several ingest processes is this actor's (ingest_port): push there. None named
        # (a learner restarted with one): push to the address dialled.
        home = f"{self.address.rsplit(':', 1)[0]}:{reply.ingest_port}" if reply.ingest_port else self.address
        if home != self._push_address:
            if self._push_channel is not self._channel:
                self._push_channel.close()
            self._push_at(home, self._channel if home == self.address else self._dial(home))
        if reply.ingest_port:
            reply = pb_grpc.LearnerStub(self._push_channel).Handshake(
                request, metadata=self._metadata, timeout=HANDSHAKE_TIMEOUT_S)
        if self.learner_id and reply.learner_id != self.learner_id:
            log.warning("learner restarted (%s -> %s)", self.learner_id, reply.learner_id)
            self.policy_version = 0  # the new learner's versions may start lower
        self.learner_id = reply.learner_id
        self._session = reply.session_id
        self.state_dim = reply.state_dim
        self._handshaken.set()

    def _requests(self, outbox: queue.Queue):
        while True:
            item = outbox.get()
            if item is _CLOSE:
                return
            yield item

    def _until_listening(self) -> None:
        """Before the first handshake: the learner may still be booting (the actors start beside
        it). Its port is dialled with plain TCP every backoff[0] until it accepts, so the first
        gRPC call finds it listening: each refused call would grow gRPC's channel backoff (1 s,
        x1.6 a time), and the handshake would come seconds after the learner listens."""
        host, _, port = self.address.rpartition(":")
        while not self._closed.is_set():
            try:
                socket.create_connection((host.strip("[]"), int(port)), timeout=1).close()
                return
            except OSError:
                self._closed.wait(self.backoff[0])

    def _push_loop(self) -> None:
        self._until_listening()
        delay = self.backoff[0]
        forgotten = False  # the last stream ended on an unknown session: keep backing off
        while not self._closed.is_set():
            try:
                self._handshake()
                outbox: queue.Queue = queue.Queue()
                with self._lock:  # resend, stamped with the new session, what was never acked
                    for batch in self._pending.values():
                        batch.session_id = self._session
                        outbox.put(batch)
                    self._outbox = outbox
                self._connected.set()
                if not forgotten:
                    delay = self.backoff[0]
                forgotten = False
                acks = self._push_call(self._requests(outbox), metadata=self._metadata)
                for ack in acks:
                    if self._on_ack(ack):
                        forgotten = True
                        break
                if forgotten:
                    acks.cancel()
                    self.stats["rehandshakes"] += 1
                    self.disconnects["FAILED_PRECONDITION: unknown session"] += 1
                    log.info("learner at %s does not know this actor's session; handshaking again "
                             "and resending %d batches in ~%.1fs", self._push_address,
                             len(self._pending), delay)
                else:
                    self.disconnects["ended"] += 1
            except grpc.RpcError as e:
                if self._closed.is_set():
                    return
                self.disconnects[f"{e.code().name}: {e.details()}"[:200]] += 1
                if e.code() in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.FAILED_PRECONDITION):
                    log.error("learner refused this actor: %s", e.details())
                elif e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED:
                    self.stats["refused"] += 1
                    log.warning("learner at %s is full, this actor waits: %s; retrying in %.1fs",
                                self.address, e.details(), delay)
                else:
                    log.info("learner at %s unreachable (%s); retrying in %.1fs",
                             self.address, e.code().name, delay)
            finally:
                self._connected.clear()
                with self._lock:
                    if self._outbox is not None:
                        self._outbox.put(_CLOSE)
                    self._outbox = None
            self.reconnects += 1
            self._closed.wait(delay * (0.5 + random.random()))
            delay = min(delay * 2, self.backoff[1])

    def _on_ack(self, ack: pb.PushAck) -> bool:
        """Book one ack. True when the learner does not know the batch's session: the batch stays
        pending, for the stream to end and the next handshake's session to carry it."""
        with self._lock:
            if ack.code == UNKNOWN_SESSION and ack.seq in self._pending:
                return True
            batch = self._pending.pop(ack.seq, None)
            sent = self._sent_at.pop(ack.seq, None)
            if batch is None:
                return False
            if ack.code == 0:
                self.stats["acked"] += ack.accepted
                self.stats["duplicates"] += ack.duplicate  # its first ack was lost in a reconnect
            else:
                self.stats["rejected"] += batch.count
                self.stats["rejected_batches"] += 1
                log.error("learner rejected batch %d: %s", ack.seq, ack.message)
            if sent is not None:
                self.push_latency_s = 0.9 * self.push_latency_s + 0.1 * (time.monotonic() - sent)
            self._lock.notify_all()
            return False

    def _watch_loop(self) -> None:
        delay = self.backoff[0]
        while not self._closed.is_set():
            try:
                if not self._connected.wait(timeout=0.5):
                    continue
                stream = self._weights_stub.WatchWeights(
                    pb.WatchRequest(actor_id=self.actor_id, have_version=self.policy_version),
                    metadata=self._metadata)
                for weights in stream:
                    delay = self.backoff[0]
                    if weights.version > self.policy_version or self.on_weights is None:
                        if self.on_weights is not None:
                            self.on_weights(weights)
                        self.policy_version = weights.version
            except grpc.RpcError:
                if self._closed.is_set():
                    return
            self._closed.wait(delay * (0.5 + random.random()))
            delay = min(delay * 2, self.backoff[1])
