"""Fixtures shared by the learner's tests over gRPC."""

import grpc
import pytest


@pytest.fixture(scope="module")
def channel(learner):
    """A channel to the module's own `learner` fixture (a real learner on loopback)."""
    with grpc.insecure_channel(learner.address()) as ch:
        yield ch
