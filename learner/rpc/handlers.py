"""The learner's RPCs: handshake, transition ingest, weight streams and status (grpc.aio).

Every method is a coroutine on the ingest event loop (learner/rpc/server.py): an open stream costs
a few objects, not a thread, so a thousand actors' PushTransitions and WatchWeights streams are
as cheap to hold as ten. All session and dedup state lives on that one loop, so it needs no
locks. Every batch is validated before it is handed on through `put`; an invalid one is
answered in its own ack (the stream stays open) and leaves no trace.
"""

from __future__ import annotations

import asyncio
import collections
import secrets
import time
import zlib
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import grpc
import numpy as np
from google.protobuf.message import DecodeError

from herd.learner.rpc.publisher import WeightPublisher
from herd.learner.rpc.validate import BatchRejected, Session, handshake_refusal, validate
from herd.proto import herd_pb2 as pb

if TYPE_CHECKING:  # torch stays out of the ingest processes (learner/ingest/processes.py)
    from herd.learner.replay.frames import FrameIndex

Put = Callable[[dict], Awaitable[bool]]
"""Hands one validated batch (field name -> rows) on; False when there was no room within a
short wait (the caller checks its stream and tries again)."""


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


class WeightStreams:
    """WatchWeights: every stream is sent each version newer than it has, the same bytes for all
    (the learner's servicer, and the per-node relay of learner/rpc/relay.py)."""

    def __init__(self, publisher: WeightPublisher):
        self.publisher = publisher
        self.stopping = False
        self.weight_bytes_sent = 0  # PolicyWeights bytes written to all WatchWeights streams
        self.weight_streams = 0  # WatchWeights streams open now (a relay counts as one)
        self._weights_changed = asyncio.Event()

    def weights_published(self) -> None:
        """Wake every WatchWeights stream (run on the loop: call_soon_threadsafe)."""
        changed, self._weights_changed = self._weights_changed, asyncio.Event()
        changed.set()

    async def WatchWeights(self, request, context):
        have = request.have_version
        self.weight_streams += 1
        try:
            while not self.stopping and not self.publisher.closed:
                changed = self._weights_changed
                newer = self.publisher.newer_wire(have)
                if newer is None:
                    try:
                        await asyncio.wait_for(changed.wait(), 0.5)
                    except TimeoutError:
                        pass
                    continue
                have, wire = newer  # serialized once per version, not once per actor
                self.weight_bytes_sent += len(wire)
                yield wire
        finally:
            self.weight_streams -= 1


class LearnerServicer(WeightStreams):
    # Sessions are random 63-bit ids: unguessable, and one minted before a learner restart is
    # unknown afterwards (FAILED_PRECONDITION) instead of colliding with a new one.
    MAX_SESSIONS = 4_096
    """Sessions kept. Unused ones (handshaken, no batch yet) are forgotten oldest first beyond
    it, never the one a handshake has just made; when sessions in use fill it, a handshake is
    refused with RESOURCE_EXHAUSTED (the actor waits and retries)."""
    MAX_SESSIONS_PER_STREAM = 8
    """Sessions one PushTransitions stream may carry. An actor's connection carries one (after a
    reconnect it handshakes and resends on a new stream): a batch naming more is refused in its
    ack, so no stream can hold the table."""
    UNUSED_SHARE_PER_PEER = 4
    """One connection may hold a quarter of MAX_SESSIONS unused; beyond it that connection's
    oldest unused sessions are forgotten, so a flood of handshakes on one connection displaces
    only its own and never fills the table. A quarter, not one or two: gRPC shares a connection
    between the channels of one process (bench/fanin.py runs hundreds of actors so), and each
    of those actors may wait a while between its handshake and its first batch."""
    RESEND_WINDOW_S = 600.0
    """How long an actor process's dedup books outlive its last session. Its client resends what
    was never acked for as long as it lives (reconnecting every 5 s at most, each handshake
    waiting up to 60 s: actors/client.py); ten minutes lets a partitioned node's actors come back
    without a batch taken twice. A new incarnation does not end the old one's books: a process
    cut off by a partition may still resend."""
    MAX_BOOKS = 100_000
    """Actor processes with dedup books (a session open, or its last gone within the resend
    window); a handshake of a new process beyond it is refused, no book is forgotten early."""

    def __init__(self, spec: pb.EnvSpec, publisher: WeightPublisher, put: Put, *,
                 learner_id: str, max_batch: int, max_actors: int = 0,
                 obs_limit: float = float(np.finfo(np.float32).max),
                 status: Callable[[], pb.LearnerStatus] = pb.LearnerStatus, peers: bool = False,
                 frames: FrameIndex | None = None):
        """`peers`: one of several ingest processes; handshakes wait for `set_peers`.
        `frames`: a pixel env's frame index (learner/replay/frames.py), which places each batch's
        frame references before its ack."""
        super().__init__(publisher)
        self._peers: tuple[list[int], int] = ([], 0)
        self._routed = asyncio.Event()
        if not peers:
            self._routed.set()
        self.spec, self.put = spec, put
        self.learner_id, self.max_batch, self.max_actors = learner_id, max_batch, max_actors
        self.obs_limit, self.status = obs_limit, status
        self.frames = frames
        # batches are placed against the frame ring in the order they are staged (FIFO to the
        # training thread): one placement and its put at a time
        self._placing = asyncio.Lock()
        self.sessions: collections.OrderedDict[int, Session] = collections.OrderedDict()
        self._active: collections.Counter[int] = collections.Counter()  # open streams per session
        self.streaming: collections.Counter[str] = collections.Counter()  # push streams per actor
        # unused sessions (no batch yet) per connection (its peer address), and each one's peer
        self._unused: dict[str, collections.OrderedDict[int, None]] = {}
        self._unused_peer: dict[int, str] = {}
        # (actor_id, incarnation) -> highest seq taken, and a lock per key: an actor process's
        # batches are taken one at a time across its connections, so a resend on a new
        # connection waits for the old connection's attempt at the same batch to settle.
        self.taken: dict[tuple[str, int], int] = {}
        self._key_locks: dict[tuple[str, int], asyncio.Lock] = {}
        self._key_sessions: collections.Counter[tuple[str, int]] = collections.Counter()
        # keys with books whose last session is gone -> since when (time.monotonic), oldest first
        self._ended: collections.OrderedDict[tuple[str, int], float] = collections.OrderedDict()
        self.received: dict[str, int] = {}  # accepted transitions per actor_id
        self.transitions = self.nbytes = self.rejected = self.duplicates = 0
        self.unknown_sessions = 0  # batches sent back for a new handshake (not invalid: resent)
        self.refused_actors = 0  # handshakes and streams turned away at max_actors
        self.clamped_versions = 0  # batches naming a policy newer than the newest published
        self.lags: collections.deque[int] = collections.deque(maxlen=256)

    def set_peers(self, ports: list[int], own: int) -> None:
        """The ingest ports of all processes and this one's (run on the loop)."""
        self._peers = (ports, own)
        self._routed.set()

    def _home(self, actor_id: str) -> int:
        """The port of the ingest process that serves `actor_id`; 0 when it is this one. By a
        stable hash, so every connection of an actor, and its dedup, stays with one process."""
        ports, own = self._peers
        if len(ports) <= 1:
            return 0
        home = ports[zlib.crc32(actor_id.encode()) % len(ports)]
        return 0 if home == own else home

    async def Handshake(self, request, context):
        refusal = handshake_refusal(self.spec, request)
        if refusal:
            await context.abort(*refusal)
        await self._routed.wait()
        home = self._home(request.actor_id)
        if home:
            return pb.HandshakeReply(ingest_port=home, policy_version=self.publisher.version,
                                     max_batch=self.max_batch, learner_id=self.learner_id)
        if self._full(request.actor_id):
            await self._refuse(context)
        why = self._no_room((request.actor_id, request.incarnation) if request.incarnation else None)
        if why:
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, why)
        sid = secrets.randbits(63) or 1
        self._add_session(Session(sid, request.actor_id, self.spec, request.incarnation),
                          context.peer())
        return pb.HandshakeReply(session_id=sid, policy_version=self.publisher.version,
                                 state_dim=self.spec.state_dim,
                                 max_batch=self.max_batch, learner_id=self.learner_id)

    def _full(self, actor_id: str) -> bool:
        return bool(self.max_actors) and actor_id not in self.streaming \
            and len(self.streaming) >= self.max_actors

    async def _refuse(self, context):
        self.refused_actors += 1
        await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED,
                            f"the learner serves its maximum of {self.max_actors} actors "
                            f"(learner.server.max_actors); retry later or raise it")

    def _no_room(self, key: tuple[str, int] | None) -> str | None:
        """Why a handshake (of actor process `key`) cannot have a session now, or None."""
        self._expire_books()
        if len(self._active) >= self.MAX_SESSIONS:
            return (f"the learner's {self.MAX_SESSIONS} sessions are all in use by open streams; "
                    f"retry later")
        if key and key not in self._key_sessions and key not in self._ended \
                and len(self._key_sessions) + len(self._ended) >= self.MAX_BOOKS:
            return (f"the learner keeps duplicate books for {self.MAX_BOOKS} actor processes, "
                    f"each for {self.RESEND_WINDOW_S:.0f} s after its last session; retry later")
        return None

    def _add_session(self, session: Session, peer: str) -> None:
        sid = session.session_id
        self.sessions[sid] = session
        unused = self._unused.setdefault(peer, collections.OrderedDict())
        unused[sid] = None
        self._unused_peer[sid] = peer
        if session.incarnation:
            key = (session.actor_id, session.incarnation)
            self._key_sessions[key] += 1
            self._ended.pop(key, None)
        while len(unused) > max(1, self.MAX_SESSIONS // self.UNUSED_SHARE_PER_PEER):
            self._drop(next(iter(unused)))
        for old in list(self.sessions):  # the table's bound: the oldest unused first
            if len(self.sessions) <= self.MAX_SESSIONS:
                break
            if old != sid and old in self._unused_peer:
                self._drop(old)

    def _mark_used(self, sid: int) -> None:
        """Session `sid` carries its first batch: from now on its stream's life is its own."""
        peer = self._unused_peer.pop(sid, None)
        if peer is not None:
            unused = self._unused[peer]
            del unused[sid]
            if not unused:
                del self._unused[peer]

    def _drop(self, sid: int) -> None:
        """Forget session `sid`; its actor process's books start their resend window when it
        was the last session of that process."""
        self._mark_used(sid)
        session = self.sessions.pop(sid, None)
        if session is None or not session.incarnation:
            return
        key = (session.actor_id, session.incarnation)
        self._key_sessions[key] -= 1
        if self._key_sessions[key] > 0:
            return
        del self._key_sessions[key]
        if key in self.taken:
            self._ended[key] = time.monotonic()
        else:
            self._key_locks.pop(key, None)

    def _expire_books(self) -> None:
        """Forget the books of actor processes whose last session went a resend window ago."""
        cutoff = time.monotonic() - self.RESEND_WINDOW_S
        while self._ended:
            key, since = next(iter(self._ended.items()))
            if since > cutoff:
                break
            del self._ended[key]
            self.taken.pop(key, None)
            self._key_locks.pop(key, None)

    async def PushTransitions(self, request_iterator, context):
        used: set[int] = set()  # a session lives as long as the connection that uses it
        actors: set[str] = set()  # actors this stream counts against max_actors
        try:
            async for batch in request_iterator:
                ack = await self._one(batch, context, used, actors)
                if ack is None:  # stopping, or the client went away while it waited
                    return
                yield ack
        finally:
            for sid in used:
                self._active[sid] -= 1
                if self._active[sid] <= 0:
                    del self._active[sid]
                    self._drop(sid)
            for actor in actors:
                self.streaming[actor] -= 1
                if self.streaming[actor] <= 0:
                    del self.streaming[actor]

    async def _one(self, batch, context, used: set[int], actors: set[str]) -> pb.PushAck | None:
        try:
            if isinstance(batch, Unparsable):
                raise BatchRejected(grpc.StatusCode.INVALID_ARGUMENT,
                                    f"{batch.nbytes} bytes are no TransitionBatch ({batch.why})")
            session = self.sessions.get(batch.session_id)
            if session is not None and batch.session_id not in used:
                if len(used) >= self.MAX_SESSIONS_PER_STREAM:
                    raise BatchRejected(grpc.StatusCode.RESOURCE_EXHAUSTED,
                                        f"this stream already carries {len(used)} sessions, the "
                                        f"most one stream may; push each on its own connection")
                if session.actor_id not in actors:
                    if self._full(session.actor_id):
                        await self._refuse(context)
                    actors.add(session.actor_id)
                    self.streaming[session.actor_id] += 1
                used.add(batch.session_id)
                self._mark_used(batch.session_id)
                self._active[batch.session_id] += 1
            arrays = validate(batch, session, self.max_batch, self.obs_limit)
        except BatchRejected as e:
            if e.code == grpc.StatusCode.FAILED_PRECONDITION:  # an unknown session: the client
                self.unknown_sessions += 1                  # handshakes again and resends it
            else:
                self.rejected += 1
            return pb.PushAck(seq=batch.seq, code=e.code.value[0], message=e.message)
        key = (session.actor_id, session.incarnation) if session.incarnation else None
        try:
            if key is None:
                return await self._take(batch, arrays, context)
            lock = self._key_locks.setdefault(key, asyncio.Lock())
            async with lock:
                if batch.seq <= self.taken.get(key, 0):
                    return self._duplicate(batch)
                ack = await self._take(batch, arrays, context)
                if ack is not None:
                    self.taken[key] = batch.seq
                return ack
        except BatchRejected as e:  # a frame reference the frame index refused
            self.rejected += 1
            return pb.PushAck(seq=batch.seq, code=e.code.value[0], message=e.message)

    async def _take(self, batch, arrays: dict, context) -> pb.PushAck | None:
        # policy_version is only the lag statistic's input: a version above the newest (an
        # actor still acting with weights of the learner before its restart from an older
        # checkpoint, or a lying client) is clamped to the newest; its rows are good
        # off-policy data and are kept.
        newest = self.publisher.version
        version = batch.policy_version
        if version > newest:
            self.clamped_versions += 1
            version = newest
        nbytes = sum(a.nbytes for a in arrays.values())  # rows' bytes, without ByteSize
        if self.frames is not None:
            async with self._placing:
                try:
                    placement = self.frames.place(arrays)
                except ValueError as e:
                    raise BatchRejected(grpc.StatusCode.INVALID_ARGUMENT, str(e)) from None
                arrays["placement"] = placement
                if not await self._put(arrays, context):
                    return None
                self.frames.commit(placement)
        elif not await self._put(arrays, context):
            return None
        self.transitions += batch.count
        self.nbytes += nbytes
        if version:  # version 0: random actions, no policy (the actor counts them so too)
            self.lags.append(newest - version)
        total = self.received.get(batch.actor_id, 0) + batch.count
        self.received[batch.actor_id] = total
        return pb.PushAck(seq=batch.seq, accepted=batch.count, received_total=total)

    async def _put(self, arrays: dict, context) -> bool:
        """Stage `arrays`, waiting while staging is full: the actor's window stalls
        (backpressure). False when the learner stops or the client went away meanwhile."""
        while not await self.put(arrays):
            if self.stopping or context.done():
                return False
        return True

    def _duplicate(self, batch) -> pb.PushAck:
        """A batch taken before whose ack never arrived: acknowledged again, not inserted."""
        self.duplicates += 1
        total = self.received.get(batch.actor_id, 0)
        return pb.PushAck(seq=batch.seq, accepted=batch.count, received_total=total, duplicate=True)

    async def GetStatus(self, request, context):
        return self.status()
