"""The holes an adversarial client found, each answered with its code on a real
learner's port and the buffer untouched; the well-formed neighbours of each bad input pass.

- policy_version above the newest published: taken, clamped for the lag (never a negative lag);
- a finite observation that a float16 ring would store as Inf: OUT_OF_RANGE;
- an actor_id of 900 KiB, an env_id of another env: refused at handshake;
- seq 0 from an actor with an incarnation: refused, never acked-but-dropped;
- a discount outside [0, 1] or not finite: INVALID_ARGUMENT; a good one lands in the ring.
"""

from __future__ import annotations

import grpc
import numpy as np
import pytest

from herd.learner.config import LearnerConfig
from herd.learner.learner import Learner
from herd.learner.rpc.validate import MAX_ACTOR_ID
from herd.proto import codec
from herd.proto import herd_pb2 as pb
from herd.proto import herd_pb2_grpc as pb_grpc
from tests.learner.rpc.test_bad_input import Stream, counters, handshake_refused, rows

IA, FP, OOR = (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.FAILED_PRECONDITION,
               grpc.StatusCode.OUT_OF_RANGE)


@pytest.fixture(scope="module")
def learner(spec):
    lrn = Learner(LearnerConfig.flat(capacity=10_000, min_size=10_000, batch_size=64,
                                hidden_sizes=(32, 32), dtype="float16"), spec)
    yield lrn
    lrn.stop()


def session(channel, spec, actor="a", incarnation=0):
    return pb_grpc.LearnerStub(channel).Handshake(
        pb.HandshakeRequest(actor_id=actor, spec=spec, incarnation=incarnation)).session_id


def batch(sid, seq, arrays=None, version=0, actor="a"):
    return codec.pack_batch(rows(8, seed=seq) if arrays is None else arrays, session_id=sid,
                            actor_id=actor, seq=seq, policy_version=version)


def test_future_policy_version_is_clamped_not_a_negative_lag(learner, channel, spec):
    s = Stream(channel)
    sid = session(channel, spec)
    before = learner.status_dict()
    newest = learner.publisher.version
    for seq, version in enumerate((2**64 - 1, 10**15, newest), start=1):
        ack = s.send(batch(sid, seq, version=version))
        assert ack.code == 0 and ack.accepted == 8, ack.message
    after = learner.status_dict()
    assert after["received"] == before["received"] + 24  # the rows are good data: kept
    assert after["clamped_versions"] == before["clamped_versions"] + 2
    assert 0 <= after["mean_policy_lag"] <= learner.publisher.version
    s.close()


def test_random_action_batches_are_not_policy_lag(learner, channel, spec):
    """policy_version 0 means no policy chose the actions (warm-up): counting it as lag made a
    random-action job's lag grow with every publish (bench/scale.py, 1,441 versions at 150 actors)."""
    s = Stream(channel)
    sid = session(channel, spec, actor="random")
    before = learner.status_dict()
    for seq in range(1, 4):
        ack = s.send(batch(sid, seq, version=0, actor="random"))
        assert ack.code == 0 and ack.accepted == 8, ack.message
    after = learner.status_dict()
    assert after["received"] == before["received"] + 24
    assert after["mean_policy_lag"] == before["mean_policy_lag"]
    s.close()


@pytest.mark.parametrize("value, code", [(1e5, OOR), (-7e4, OOR), (6e4, 0)])
def test_observations_beyond_a_float16_ring(learner, channel, spec, value, code):
    s = Stream(channel)
    sid = session(channel, spec)
    before = counters(learner)
    for field in ("obs", "next_obs"):
        r = rows(8)
        r[field][3, 1] = value
        ack = s.send(batch(sid, 1 if field == "obs" else 2, r))
        assert ack.code == (code.value[0] if code else 0), ack.message
        if code:
            assert field in ack.message and "dtype" in ack.message
    after = counters(learner)
    grew = 0 if code else 16
    assert after["inserted"] == before["inserted"] + grew
    assert np.isfinite(learner.buffer.obs_pair[: learner.buffer.size].float().cpu().numpy()).all()
    s.close()


def test_handshake_bounds_actor_id_and_checks_env_id(learner, channel, spec):
    stub = pb_grpc.LearnerStub(channel)
    sessions = len(learner.ingest.servicer.sessions)
    for actor_id in ("x" * (MAX_ACTOR_ID + 1), "y" * 900 * 1024):
        e = handshake_refused(stub, spec, actor_id)
        assert e.code() == IA and f"at most {MAX_ACTOR_ID}" in e.details()
    e = handshake_refused(stub, spec, env_id="Hopper-v5")
    assert e.code() == FP and "env_id" in e.details()
    assert len(learner.ingest.servicer.sessions) == sessions  # nothing kept of them
    assert session(channel, spec, "x" * MAX_ACTOR_ID)  # the longest allowed id still works


def test_seq_zero_is_refused_with_an_incarnation_taken_without(learner, channel, spec):
    s = Stream(channel)
    before = counters(learner)
    ack = s.send(batch(session(channel, spec, "z", incarnation=5), 0, actor="z"))
    assert ack.code == IA.value[0] and "seq 0" in ack.message and not ack.duplicate
    assert counters(learner) == before
    ack = s.send(batch(session(channel, spec, "z", incarnation=0), 0, actor="z"))
    assert ack.code == 0 and ack.accepted == 8 and not ack.duplicate  # no dedup: taken
    assert counters(learner)["inserted"] == before["inserted"] + 8
    s.close()


@pytest.mark.parametrize("bad", [np.nan, np.inf, -0.1, 1.5])
def test_discount_outside_unit_interval_is_refused(learner, channel, spec, bad):
    s = Stream(channel)
    sid = session(channel, spec)
    before = counters(learner)
    r = rows(8) | {"discount": np.full(8, 0.9, np.float32)}
    r["discount"][4] = bad
    ack = s.send(batch(sid, 1, r))
    assert ack.code == IA.value[0] and "discount" in ack.message
    assert counters(learner) == before
    s.close()


def test_good_discount_lands_in_the_ring(learner, channel, spec):
    s = Stream(channel)
    sid = session(channel, spec)
    r = rows(8) | {"discount": np.linspace(0, 1, 8, dtype=np.float32)}
    r["reward"][:] = 4242.0  # tags these rows in the ring
    assert s.send(batch(sid, 1, r)).code == 0
    counters(learner)  # waits for the ring
    ring = learner.buffer
    tagged = (ring.reward[: ring.size] == 4242.0).nonzero().flatten()
    np.testing.assert_allclose(ring.discount[tagged].cpu().numpy(), r["discount"])
    s.close()
