"""Weights reach a node's actors through one relay: each version leaves the learner once for
the node however many actors watch, and every actor still gets the newest version."""

from __future__ import annotations

import time

import numpy as np

from herd.actors.client import LearnerClient
from herd.learner.rpc.relay import WeightRelay
from tests.learner.rpc.test_bad_input import rows

ACTORS = 8


def test_relay_sends_each_version_once_per_node(make_learner, spec):
    learner = make_learner(min_size=1_000, ratio=None, publish_every_s=0.2)
    relay = WeightRelay(learner.address())
    got: dict[int, list[int]] = {k: [] for k in range(ACTORS)}
    clients = [LearnerClient(learner.address(), f"r{k}", spec, weights_address=relay.address(),
                             on_weights=lambda w, k=k: got[k].append(w.version))
               for k in range(ACTORS)]
    try:
        for s in range(20):  # past min_replay_size: updates, then a version every 0.2 s
            clients[s % ACTORS].push(rows(64, seed=s), 0)
        assert all(c.flush(30) for c in clients)
        deadline = time.monotonic() + 30
        while learner.publisher.version < 6 and time.monotonic() < deadline:
            time.sleep(0.05)
        newest = learner.publisher.version
        while min(max(v, default=0) for v in got.values()) < newest and time.monotonic() < deadline:
            time.sleep(0.05)
        assert all(max(v) >= newest for v in got.values()), got  # every actor is current
        wire = len(learner.publisher.newer_wire(0)[1])  # one version's bytes (all the same size)
        out = learner.status_dict()["weight_bytes_sent"]
        assert out % wire == 0 and out // wire <= learner.publisher.version  # once per version
        assert relay.stats()["weight_bytes_sent"] >= ACTORS * 2 * wire  # the relay fans out
        assert sum(len(v) for v in got.values()) * wire > 2 * out
        assert np.all([c.stats["acked"] == c.stats["sent"] for c in clients])
    finally:
        for c in clients:
            c.close()
        relay.stop()
