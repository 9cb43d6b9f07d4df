"""Ingest in this process: the learner's gRPC face, validation, dedup and staging, wired as one
component.

    actors ──gRPC──► LearnerServicer (herd-ingest loop) ──validate, dedup──► pack ──► Staging
    training thread ◄── Staging.take ◄───────────────────────────────────────────────┘

Everything up to Staging runs on the ingest thread: decoding, checks and packing the rows into
the ring's layout (`pack`, the replay buffer's own) are done before the training thread sees a
batch, which then only copies packed rows into the ring. The hand-over is one narrow call each
way: the servicer calls `put`, the training thread calls `take`.
"""

from __future__ import annotations

import asyncio
import collections
import threading
from collections.abc import Callable

import numpy as np

from herd.learner.rpc.handlers import LearnerServicer
from herd.learner.rpc.publisher import WeightPublisher
from herd.learner.rpc.server import Server
from herd.proto import herd_pb2 as pb


class Staging:
    """A bounded hand-over from the ingest loop (async `put`) to the training thread (`take`).

    When full, `put` waits on an asyncio event that `take` sets from the other thread: the
    waiting acks stall (backpressure), the loop keeps serving every other stream.
    """

    def __init__(self, maxsize: int):
        self.maxsize = maxsize
        self._items: collections.deque = collections.deque()
        self._cond = threading.Condition()
        self._space: tuple[asyncio.AbstractEventLoop, asyncio.Event] | None = None

    def qsize(self) -> int:
        return len(self._items)

    async def put(self, item, timeout: float = 0.2) -> bool:
        """Stage `item`; False if there was no room within `timeout` seconds."""
        space = self._offer(item)
        if space is None:
            return True
        try:
            await asyncio.wait_for(space.wait(), timeout)
        except TimeoutError:
            return False
        return self._offer(item) is None

    def _offer(self, item) -> asyncio.Event | None:
        """None once `item` is staged; else the event `take` sets when it makes room."""
        with self._cond:
            if len(self._items) < self.maxsize:
                self._items.append(item)
                self._cond.notify()
                return None
            if self._space is None:
                self._space = (asyncio.get_running_loop(), asyncio.Event())
            return self._space[1]

    def take(self, limit: int, timeout: float = 0.0) -> list:
        """Up to `limit` staged items, oldest first, waiting up to `timeout` for the first."""
        with self._cond:
            if not self._items and timeout:
                self._cond.wait(timeout)
            n = min(limit, len(self._items))
            items = [self._items.popleft() for _ in range(n)]
            space, self._space = (self._space, None) if items else (None, self._space)
        if space is not None and not space[0].is_closed():
            space[0].call_soon_threadsafe(space[1].set)
        return items


class InProcessIngest:
    """Ingest (learner/ingest/__init__.py) on a thread of this process: the gRPC server and its
    servicer; counters for the learner's status."""

    def __init__(self, spec: pb.EnvSpec, publisher: WeightPublisher, pack: Callable, *,
                 learner_id: str, host: str, port: int, token: str | None, max_message_mb: int,
                 max_batch: int, staging_batches: int, max_actors: int = 0,
                 obs_limit: float = float(np.finfo(np.float32).max),
                 tls_cert: str | None = None, tls_key: str | None = None,
                 status: Callable[[], pb.LearnerStatus] = pb.LearnerStatus, frames=None):
        """`pack(rows) -> tensor`: field arrays to packed ring rows, run on the ingest thread.
        `frames`: a pixel env's frame index (LearnerServicer)."""
        self.staging = Staging(staging_batches)

        async def put(arrays: dict) -> bool:
            return await self.staging.put(pack(arrays))

        def servicer():  # built on the loop: its asyncio objects belong there
            return LearnerServicer(spec, publisher, put, learner_id=learner_id,
                                   max_batch=max_batch, max_actors=max_actors,
                                   obs_limit=obs_limit, status=status, frames=frames)

        self.server = Server(servicer, host, port, token, max_message_mb, tls_cert, tls_key)
        self.servicer, self.port = self.server.servicer, self.server.port
        publisher.subscribe(lambda: self.server.call(self.servicer.weights_published))

    def take(self, limit: int, timeout: float = 0.0) -> list:
        """Packed row blocks staged for the ring (the training thread's side)."""
        return self.staging.take(limit, timeout)

    def counts(self) -> dict:
        return counts(self.servicer)

    def stop(self, grace: float = 1.0) -> None:
        self.server.stop(grace)


def counts(s: LearnerServicer) -> dict:
    """The ingest side of the learner's status (per_actor: accepted transitions by actor_id)."""
    lags = list(s.lags)
    return {
        "received": s.transitions,
        "rejected_batches": s.rejected,
        "duplicate_batches": s.duplicates,  # resent after a lost ack, not inserted
        "unknown_session_batches": s.unknown_sessions,  # sent back for a new handshake
        "bytes_received": s.nbytes,
        "mean_policy_lag": float(np.mean(lags)) if lags else 0.0,
        "actors_streaming": len(s.streaming),
        "refused_actors": s.refused_actors,
        "clamped_versions": s.clamped_versions,
        "weight_bytes_sent": s.weight_bytes_sent,
        "weight_streams": s.weight_streams,
        "per_actor": dict(s.received),
    }
