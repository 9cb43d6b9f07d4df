"""The learner's gRPC ingest against a real server on loopback: good batches land, bad ones don't."""

import grpc
import numpy as np
import pytest

from herd.proto import codec
from herd.proto import herd_pb2 as pb
from herd.proto import herd_pb2_grpc as pb_grpc


def _rows(n, seed=0, obs_dim=4):
    rng = np.random.default_rng(seed)
    return {
        "obs": rng.normal(size=(n, obs_dim)).astype(np.float32),
        "action": rng.uniform(-3, 3, (n, 1)).astype(np.float32),
        "reward": np.ones(n, np.float32),
        "next_obs": rng.normal(size=(n, obs_dim)).astype(np.float32),
        "terminated": np.zeros(n, np.uint8),
    }


@pytest.fixture
def wire(make_learner, spec):
    learner = make_learner(min_size=10_000, capacity=10_000)
    channel = grpc.insecure_channel(learner.address())
    stub = pb_grpc.LearnerStub(channel)
    reply = stub.Handshake(pb.HandshakeRequest(actor_id="t0", spec=spec))
    yield learner, stub, reply.session_id
    channel.close()


def _push(stub, batches):
    return list(stub.PushTransitions(iter(batches)))


def _wait_inserted(learner, n, timeout=10.0):
    import time

    deadline = time.monotonic() + timeout
    while learner.buffer.inserted < n and time.monotonic() < deadline:
        time.sleep(0.02)
    return learner.buffer.inserted


def test_good_batches_land_in_the_ring(wire):
    learner, stub, sid = wire
    acks = _push(stub, [codec.pack_batch(_rows(50, s), session_id=sid, actor_id="t0", seq=s + 1,
                                         policy_version=0) for s in range(3)])
    assert [a.code for a in acks] == [0, 0, 0]
    assert [a.seq for a in acks] == [1, 2, 3]
    assert acks[-1].received_total == 150
    assert _wait_inserted(learner, 150) == 150


def _bad(kind, sid):
    b = codec.pack_batch(_rows(16), session_id=sid, actor_id="t0", seq=1, policy_version=0)
    if kind == "wrong_shape":  # 5-dim observations against a 4-dim spec
        b = codec.pack_batch(_rows(16, obs_dim=5), session_id=sid, actor_id="t0", seq=1, policy_version=0)
    elif kind == "wrong_byte_length":
        b.obs = b.obs[:-3]
    elif kind == "nan":
        r = _rows(16)
        r["reward"][3] = np.nan
        b = codec.pack_batch(r, session_id=sid, actor_id="t0", seq=1, policy_version=0)
    elif kind == "count_mismatch":
        b.count = 17
    return b


@pytest.mark.parametrize("kind", ["wrong_shape", "wrong_byte_length", "nan", "count_mismatch"])
def test_malformed_batch_is_invalid_argument_and_leaves_buffer(wire, kind):
    learner, stub, sid = wire
    before = (learner.buffer.size, learner.buffer.inserted, learner.received)
    good = codec.pack_batch(_rows(8), session_id=sid, actor_id="t0", seq=2, policy_version=0)
    acks = _push(stub, [_bad(kind, sid), good])
    assert acks[0].code == grpc.StatusCode.INVALID_ARGUMENT.value[0], acks[0].message
    assert acks[0].accepted == 0 and acks[0].message
    # the same stream keeps working: the good batch after it is taken
    assert acks[1].code == 0 and acks[1].accepted == 8
    assert _wait_inserted(learner, before[1] + 8) == before[1] + 8
    assert learner.received == before[2] + 8
    assert learner.status().rejected_batches == 1


def test_unknown_session_is_failed_precondition(wire):
    learner, stub, sid = wire
    acks = _push(stub, [codec.pack_batch(_rows(4), session_id=sid + 999, actor_id="t0", seq=1,
                                         policy_version=0)])
    assert acks[0].code == grpc.StatusCode.FAILED_PRECONDITION.value[0]
    assert learner.received == 0


def test_handshake_refuses_a_different_env(wire, spec):
    _, stub, _ = wire
    other = pb.EnvSpec()
    other.CopyFrom(spec)
    other.obs_shape[:] = [7]
    with pytest.raises(grpc.RpcError) as e:
        stub.Handshake(pb.HandshakeRequest(actor_id="t1", spec=other))
    assert e.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "obs_shape" in e.value.details()


def test_status_and_weights_stream(wire):
    learner, stub, _ = wire
    st = stub.GetStatus(pb.StatusRequest())
    assert st.learner_id == learner.learner_id and st.replay_capacity == 10_000
    first = next(iter(stub.WatchWeights(pb.WatchRequest(actor_id="t0", have_version=0))))
    assert first.version >= 1 and len(first.tensors) == 6  # 3 Linear layers: weight + bias
