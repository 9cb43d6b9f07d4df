"""Versioned policy weights, handed to every WatchWeights stream as versions advance.

Each version is serialized once, whatever the number of streams; `subscribe` lets the ingest
event loop wake its streams instead of a thread per stream waiting on the condition.
"""

from __future__ import annotations

import threading

from herd.proto import herd_pb2 as pb


class WeightPublisher:
    def __init__(self):
        self._cond = threading.Condition()
        self._latest: pb.PolicyWeights | None = None
        self._wire = b""  # _latest serialized, once per version for every stream
        self._closed = False
        self._subscribers: list = []

    @property
    def version(self) -> int:
        latest = self._latest
        return latest.version if latest is not None else 0

    def publish(self, weights: pb.PolicyWeights) -> None:
        wire = weights.SerializeToString()
        with self._cond:
            self._latest, self._wire = weights, wire
            self._cond.notify_all()
            subscribers = list(self._subscribers)
        for notify in subscribers:
            notify()

    def subscribe(self, notify) -> None:
        """Call `notify()` (from the publishing thread) after every publish and at close."""
        with self._cond:
            self._subscribers.append(notify)

    def newer_wire(self, have_version: int) -> tuple[int, bytes] | None:
        """(version, serialized PolicyWeights) if newer than `have_version`, without waiting."""
        with self._cond:
            latest, wire = self._latest, self._wire
        return (latest.version, wire) if latest is not None and latest.version > have_version else None

    def _wait(self, have_version: int, timeout: float):
        with self._cond:
            self._cond.wait_for(
                lambda: self._closed
                or (self._latest is not None and self._latest.version > have_version),
                timeout,
            )
            latest, wire = self._latest, self._wire
        return (latest, wire) if latest is not None and latest.version > have_version else None

    def wait_newer(self, have_version: int, timeout: float) -> pb.PolicyWeights | None:
        """The latest weights if newer than `have_version`, waiting up to `timeout` seconds."""
        newer = self._wait(have_version, timeout)
        return newer[0] if newer else None

    def wait_newer_wire(self, have_version: int, timeout: float) -> tuple[int, bytes] | None:
        """(version, serialized PolicyWeights) as wait_newer, serialized once per version for
        every stream (learner/rpc/server.py's WatchWeights sends these bytes as they are)."""
        newer = self._wait(have_version, timeout)
        return (newer[0].version, newer[1]) if newer else None

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            subscribers = list(self._subscribers)
        for notify in subscribers:
            notify()

    @property
    def closed(self) -> bool:
        return self._closed
