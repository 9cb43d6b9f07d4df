"""A per-node weights relay: one WatchWeights stream from the learner, served to every actor of
its node, so that the learner's outbound weight bytes grow with nodes, not actors.

    learner ──1 stream per node──► WeightRelay (one per node, loopback) ──► the node's actors

Why a relay and not Ray's object store: actors already speak WatchWeights, so they need only
another address (LearnerClient(weights_address=...)); a relay works wherever gRPC does (the
bench, docker-compose, `ray start` by hand) and holds each version once, serialized once. The
object store would ship a version to a node once too, but every actor would need a Ray call
per version to learn its ObjectRef. bench/fanin.py --relay measures the learner's bytes per
publish with one.

The relay serves what it has: a learner restarted from an older checkpoint publishes lower
versions, which reach the node's actors once they pass the last version the relay had.
"""

from __future__ import annotations

import logging
import random
import threading

import grpc

from herd.learner.rpc.handlers import WeightStreams
from herd.learner.rpc.publisher import WeightPublisher
from herd.learner.rpc.server import Server
from herd.proto import codec, keepalive
from herd.proto import herd_pb2 as pb

log = logging.getLogger("herd.relay")


class WeightRelay:
    """Follows the learner at `learner_address`; serves WatchWeights on host:port (loopback
    by default: the node's own actors)."""

    def __init__(self, learner_address: str, *, host: str = "127.0.0.1", port: int = 0,
                 token: str | None = None, tls_ca: str | None = None, max_message_mb: int = 64,
                 name: str = "relay"):
        """`token`: the job's, sent to the learner and asked of the node's actors; `tls_ca`:
        the learner's CA when its port is TLS (the relay's own loopback port is plaintext)."""
        self.learner_address, self.name = learner_address, name
        self.publisher = WeightPublisher()
        self.server = Server(lambda: WeightStreams(self.publisher), host, port, token,
                             max_message_mb)
        self.port = self.server.port
        self.publisher.subscribe(lambda: self.server.call(self.server.servicer.weights_published))
        self._metadata = ((codec.TOKEN_HEADER, token),) if token else ()
        limit = max_message_mb * 2**20
        options = [("grpc.max_receive_message_length", limit), *keepalive.CLIENT_OPTIONS]
        if tls_ca:
            with open(tls_ca, "rb") as f:
                creds = grpc.ssl_channel_credentials(root_certificates=f.read())
            self._channel = grpc.secure_channel(learner_address, creds, options=options)
        else:
            self._channel = grpc.insecure_channel(learner_address, options=options)
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._follow, name="herd-relay", daemon=True)
        self._thread.start()

    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _follow(self) -> None:
        watch = self._channel.unary_stream(codec.METHOD_PATHS["WatchWeights"],
                                           request_serializer=pb.WatchRequest.SerializeToString)
        delay = 0.2
        while not self._closed.is_set():
            try:
                stream = watch(pb.WatchRequest(actor_id=self.name, have_version=self.publisher.version),
                               metadata=self._metadata)
                for raw in stream:
                    delay = 0.2
                    self.publisher.publish_wire(codec.weights_version(raw), raw)
            except grpc.RpcError as e:
                if self._closed.is_set():
                    return
                log.info("relay: learner at %s unreachable (%s); retrying in %.1fs",
                         self.learner_address, e.code().name, delay)
            self._closed.wait(delay * (0.5 + random.random()))
            delay = min(2 * delay, 5.0)

    def stats(self) -> dict:
        return {"policy_version": self.publisher.version,
                "weight_bytes_sent": self.server.servicer.weight_bytes_sent,
                "weight_streams": self.server.servicer.weight_streams}

    def stop(self) -> None:
        self._closed.set()
        self._channel.close()
        self.publisher.close()
        self.server.stop(grace=0.5)
        self._thread.join(timeout=10)
