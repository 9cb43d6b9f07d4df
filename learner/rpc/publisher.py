"""Versioned policy weights, handed to every WatchWeights stream as versions advance.

Each version is serialized once, whatever the number of streams, and a middle hop (an ingest
process, a node's relay) publishes the bytes it got (`publish_wire`) without parsing them.
The gRPC event loop that serves the streams (learner/rpc/handlers.py, WeightStreams) reads
`newer_wire` and is woken through `subscribe`, not by a thread per stream waiting on the
condition.
"""

from __future__ import annotations

import threading

from herd.proto import herd_pb2 as pb


class WeightPublisher:
    def __init__(self):
        self._cond = threading.Condition()
        self._version = 0
        self._wire: bytes | None = None  # the latest weights serialized, once for every stream
        self._latest: pb.PolicyWeights | None = None  # the same, parsed (None: not yet)
        self._closed = False
        self._subscribers: list = []

    @property
    def version(self) -> int:
        return self._version

    def publish(self, weights: pb.PolicyWeights) -> None:
        self._set(weights.version, weights.SerializeToString(), weights)

    def publish_wire(self, version: int, wire: bytes) -> None:
        """Serialized weights of `version` as they came (a middle hop: nothing parsed)."""
        self._set(version, wire, None)

    def _set(self, version: int, wire: bytes, weights: pb.PolicyWeights | None) -> None:
        with self._cond:
            self._version, self._wire, self._latest = version, wire, weights
            self._cond.notify_all()
            subscribers = list(self._subscribers)
        for notify in subscribers:
            notify()

    def subscribe(self, notify) -> None:
        """Call `notify()` (from the publishing thread) after every publish and at close."""
        with self._cond:
            self._subscribers.append(notify)

    def _newer(self, have_version: int) -> tuple[int, bytes, pb.PolicyWeights | None] | None:
        """(version, wire, parsed or None) if newer than `have_version` (call under the lock)."""
        if self._wire is None or self._version <= have_version:
            return None
        return self._version, self._wire, self._latest

    def newer_wire(self, have_version: int) -> tuple[int, bytes] | None:
        """(version, serialized PolicyWeights) if newer than `have_version`, without waiting:
        what WeightStreams.WatchWeights sends, the same bytes to every stream."""
        with self._cond:
            newer = self._newer(have_version)
        return newer[:2] if newer else None

    def _wait(self, have_version: int, timeout: float):
        with self._cond:
            self._cond.wait_for(lambda: self._closed or self._newer(have_version) is not None,
                                timeout)
            return self._newer(have_version)

    def wait_newer(self, have_version: int, timeout: float) -> pb.PolicyWeights | None:
        """The latest weights if newer than `have_version`, waiting up to `timeout` seconds."""
        newer = self._wait(have_version, timeout)
        if newer is None:
            return None
        _, wire, weights = newer
        return weights if weights is not None else pb.PolicyWeights.FromString(wire)

    def wait_newer_wire(self, have_version: int, timeout: float) -> tuple[int, bytes] | None:
        """(version, serialized PolicyWeights) as wait_newer, without parsing them."""
        newer = self._wait(have_version, timeout)
        return newer[:2] if newer else None

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
