"""The weight publisher: each version serialized once for every stream; a middle hop (an ingest
process, a node's relay) publishes the bytes it got and serves them as they came."""

from __future__ import annotations

from herd.learner.rpc.publisher import WeightPublisher
from herd.proto import herd_pb2 as pb


def test_weights_published_as_bytes_are_served_as_they_came():
    wire = pb.PolicyWeights(version=7, arch="mlp").SerializeToString()
    pub = WeightPublisher()
    assert pub.newer_wire(0) is None and pub.wait_newer(0, timeout=0) is None
    pub.publish_wire(7, wire)
    assert pub.version == 7 and pub.newer_wire(6) == (7, wire) and pub.newer_wire(7) is None
    assert pub.wait_newer(0, timeout=0) == pb.PolicyWeights(version=7, arch="mlp")
