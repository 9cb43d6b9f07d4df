"""Malformed input on the learner's gRPC port: each kind answered with its own status code,
nothing of it reaches the buffer or the counters, and the stream and other actors go on.

A real in-process learner on loopback; batches built by hand, and raw bytes sent through a
generic channel (identity serializers) where a well-behaved stub could not produce them.
"""

from __future__ import annotations

import queue
import time

import grpc
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from herd.learner.config import LearnerConfig
from herd.learner.learner import Learner
from herd.learner.rpc.handlers import Unparsable, parse_batch
from herd.learner.rpc.server import METHODS
from herd.learner.rpc.validate import BatchRejected, Session, validate
from herd.proto import codec
from herd.proto import herd_pb2 as pb
from herd.proto import herd_pb2_grpc as pb_grpc

IA, FP = grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.FAILED_PRECONDITION
OOR, PD = grpc.StatusCode.OUT_OF_RANGE, grpc.StatusCode.PERMISSION_DENIED
MAX_BATCH = 64


def rows(n, seed=0, obs_dim=4, obs_dtype=np.float32):
    rng = np.random.default_rng(seed)
    return {
        "obs": rng.normal(size=(n, obs_dim)).astype(obs_dtype),
        "action": rng.uniform(-3, 3, (n, 1)).astype(np.float32),
        "reward": np.ones(n, np.float32),
        "next_obs": rng.normal(size=(n, obs_dim)).astype(obs_dtype),
        "terminated": np.zeros(n, np.uint8),
    }


class Stream:
    """One open PushTransitions call: send a batch (message or raw bytes), read its ack."""

    def __init__(self, channel, raw=False):
        self.q: queue.Queue = queue.Queue()
        if raw:
            call = channel.stream_stream(codec.METHOD_PATHS["PushTransitions"],
                                         request_serializer=lambda b: b,
                                         response_deserializer=pb.PushAck.FromString)
        else:
            call = pb_grpc.LearnerStub(channel).PushTransitions
        self.acks = call(iter(self.q.get, None))

    def send(self, batch) -> pb.PushAck:
        self.q.put(batch)
        return next(self.acks)

    def close(self):
        self.q.put(None)
        list(self.acks)


@pytest.fixture(scope="module")
def learner(spec):
    lrn = Learner(LearnerConfig.flat(capacity=10_000, min_size=10_000, batch_size=64,
                                hidden_sizes=(32, 32), max_batch=MAX_BATCH, max_message_mb=1),
                  spec)
    yield lrn
    lrn.stop()


def handshake(channel, spec, actor_id):
    return pb_grpc.LearnerStub(channel).Handshake(
        pb.HandshakeRequest(actor_id=actor_id, spec=spec)).session_id


def counters(learner):
    deadline = time.monotonic() + 5  # let staged rows reach the ring
    while learner.ingest.staging.qsize() and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.05)
    st = learner.status_dict()
    return {k: st[k] for k in ("received", "inserted", "replay_size", "bytes_received")} | {
        "per_actor": dict(learner.servicer.received)}


def rejections(learner):
    """Batches refused as invalid, and those sent back for a new handshake (not invalid: the
    client resends them), apart."""
    st = learner.status_dict()
    return st["rejected_batches"], st["unknown_session_batches"]


def good(sid, actor="a", seq=99, n=8):
    return codec.pack_batch(rows(n, seed=seq), session_id=sid, actor_id=actor, seq=seq,
                            policy_version=0)


def malformed(kind, sid, other_sid):
    """(batch, expected code) for one kind of bad batch on session `sid` of actor 'a'."""
    b = codec.pack_batch(rows(16), session_id=sid, actor_id="a", seq=1, policy_version=0)
    code = IA
    if kind == "wrong_obs_shape":
        b = codec.pack_batch(rows(16, obs_dim=5), session_id=sid, actor_id="a", seq=1,
                             policy_version=0)
    elif kind == "wrong_dtype_float64":
        b = codec.pack_batch(rows(16), session_id=sid, actor_id="a", seq=1, policy_version=0,
                             obs_dtype="float64")
    elif kind == "truncated_bytes":
        b.next_obs = b.next_obs[:-3]
    elif kind == "extra_bytes":
        b.action = b.action + b"\0\0\0\0"
    elif kind == "missing_field":
        b.reward = b""
    elif kind == "count_mismatch":
        b.count = 17
    elif kind == "count_zero":
        b.count = 0
    elif kind == "count_above_max_batch":
        b = codec.pack_batch(rows(MAX_BATCH + 1), session_id=sid, actor_id="a", seq=1,
                             policy_version=0)
    elif kind in ("nan_reward", "inf_obs", "nan_next_obs", "nan_action"):
        r = rows(16)
        field = {"nan_reward": "reward", "inf_obs": "obs", "nan_next_obs": "next_obs",
                 "nan_action": "action"}[kind]
        r[field].reshape(-1)[5] = np.inf if kind == "inf_obs" else np.nan
        b = codec.pack_batch(r, session_id=sid, actor_id="a", seq=1, policy_version=0)
    elif kind == "action_out_of_bounds":
        r = rows(16)
        r["action"][2] = 3.5  # InvertedPendulum: [-3, 3]
        b = codec.pack_batch(r, session_id=sid, actor_id="a", seq=1, policy_version=0)
        code = OOR
    elif kind == "terminated_not_bool":
        r = rows(16)
        r["terminated"][0] = 7
        b = codec.pack_batch(r, session_id=sid, actor_id="a", seq=1, policy_version=0)
    elif kind == "unknown_session":
        b.session_id = 12345
        code = FP
    elif kind == "session_of_another_actor":
        b.session_id = other_sid
        code = PD
    else:
        raise ValueError(kind)
    return b, code


KINDS = ["wrong_obs_shape", "wrong_dtype_float64", "truncated_bytes", "extra_bytes",
         "missing_field", "count_mismatch", "count_zero", "count_above_max_batch", "nan_reward",
         "inf_obs", "nan_next_obs", "nan_action", "action_out_of_bounds", "terminated_not_bool",
         "unknown_session", "session_of_another_actor"]


@pytest.mark.parametrize("kind", KINDS)
def test_malformed_batch_rejected_with_its_code_and_no_trace(learner, channel, spec, kind):
    sid, other = handshake(channel, spec, "a"), handshake(channel, spec, "b")
    s_a, s_b = Stream(channel), Stream(channel)
    s_b.send(good(other, "b", seq=1))  # b's stream is open before, during and after
    before, rejected = counters(learner), rejections(learner)
    bad, code = malformed(kind, sid, other)
    ack = s_a.send(bad)
    assert (ack.code, ack.accepted, ack.seq) == (code.value[0], 0, 1), ack.message
    assert ack.message
    one_more = (0, 1) if kind == "unknown_session" else (1, 0)
    assert counters(learner) == before
    assert rejections(learner) == (rejected[0] + one_more[0], rejected[1] + one_more[1])
    # the same stream, and the other actor, keep working
    assert s_a.send(good(sid, "a", seq=2)).code == 0
    assert s_b.send(good(other, "b", seq=2)).code == 0
    after = counters(learner)
    assert after["received"] == before["received"] + 16
    assert after["inserted"] == before["inserted"] + 16
    s_a.close()
    s_b.close()


def test_garbage_bytes_answered_in_stream(learner, channel, spec):
    sid = handshake(channel, spec, "a")
    raw = Stream(channel, raw=True)
    before = counters(learner)
    for junk in (b"\xff\xff\xff\xff\xff", b"\x0a\xff\x01abc", b"\x07" * 33):
        ack = raw.send(junk)
        assert ack.code == IA.value[0] and "no TransitionBatch" in ack.message
    assert counters(learner) == before
    ack = raw.send(good(sid, "a", seq=5).SerializeToString())
    assert ack.code == 0 and ack.accepted == 8
    raw.close()


def test_oversize_message_ends_only_its_own_stream(learner, channel, spec):
    sid, other = handshake(channel, spec, "a"), handshake(channel, spec, "b")
    s_b = Stream(channel)
    assert s_b.send(good(other, "b", seq=1)).code == 0
    before = counters(learner)
    huge = good(sid, "a", seq=1)
    huge.obs = b"\0" * (2 * 2**20)  # learner.server.max_message_mb=1
    s_a = Stream(channel)
    with pytest.raises(grpc.RpcError) as e:
        s_a.send(huge)
    assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert counters(learner) == before
    assert s_b.send(good(other, "b", seq=2)).code == 0  # other actors unaffected
    s_b.close()


def test_stale_session_after_learner_restart_and_after_stream_end(learner, channel, spec):
    """A session minted by an earlier learner (or an earlier connection) is not honoured."""
    old = Learner(LearnerConfig.flat(capacity=1_000, min_size=1_000, batch_size=8,
                                hidden_sizes=(8,)), spec)
    try:
        with grpc.insecure_channel(old.address()) as ch:
            stale = handshake(ch, spec, "a")
    finally:
        old.stop()
    s = Stream(channel)
    before = counters(learner)
    ack = s.send(good(stale, "a", seq=1))
    assert ack.code == FP.value[0] and "handshake" in ack.message
    sid = handshake(channel, spec, "a")
    assert s.send(good(sid, "a", seq=2)).code == 0
    s.close()
    # the session ended with its connection: reusing it on a new one is refused
    s2 = Stream(channel)
    assert s2.send(good(sid, "a", seq=3)).code == FP.value[0]
    s2.close()
    assert counters(learner)["received"] == before["received"] + 8


def test_the_server_handles_every_rpc_of_the_proto_at_its_path() -> None:
    """The paths come from proto/herd.proto (codec.METHOD_PATHS), the server's table has each."""
    assert set(METHODS) == set(codec.METHOD_PATHS)
    assert codec.METHOD_PATHS["PushTransitions"] == "/herd.v1.Learner/PushTransitions"


def handshake_refused(stub, spec, actor_id: str = "x", **change) -> grpc.RpcError:
    """The error a Handshake gets for `spec` with `change` (field -> value) and `actor_id`."""
    other = pb.EnvSpec()
    other.CopyFrom(spec)
    for field, value in change.items():
        if isinstance(value, list):
            getattr(other, field)[:] = value
        else:
            setattr(other, field, value)
    with pytest.raises(grpc.RpcError) as e:
        stub.Handshake(pb.HandshakeRequest(actor_id=actor_id, spec=other))
    return e.value


def test_bad_handshakes(channel, spec):
    stub = pb_grpc.LearnerStub(channel)
    assert handshake_refused(stub, spec, actor_id="").code() == IA
    e = handshake_refused(stub, spec, obs_dtype="float64")
    assert e.code() == FP and "obs_dtype" in e.details()
    e = handshake_refused(stub, spec, action_high=[30.0])
    assert e.code() == FP and "action_high" in e.details()


@pytest.mark.parametrize("junk", [b"\xff\xff\xff\xff", b"\x0a\x80", b"\x07"])
def test_garbage_bytes_on_unary_methods_are_invalid_argument(learner, channel, junk):
    """Handshake, GetStatus and WatchWeights read raw bytes that are no message of theirs:
    INVALID_ARGUMENT, as any other malformed input (not UNKNOWN); the server serves on."""
    for method, streaming in (("Handshake", False), ("GetStatus", False), ("WatchWeights", True)):
        path = codec.METHOD_PATHS[method]
        call = (channel.unary_stream if streaming else channel.unary_unary)(path)
        with pytest.raises(grpc.RpcError) as e:
            reply = call(junk, timeout=10)
            if streaming:
                next(reply)
        assert e.value.code() == IA, (method, e.value.code(), e.value.details())
        assert "not a valid message" in e.value.details()
    assert pb_grpc.LearnerStub(channel).GetStatus(pb.StatusRequest()).learner_id == learner.learner_id


def test_sessions_do_not_pile_up(learner, channel, spec):
    """Sessions die with their stream and idle ones are bounded: reconnect loops leak nothing."""
    for i in range(50):
        sid = handshake(channel, spec, "churn")
        s = Stream(channel)
        assert s.send(good(sid, "churn", seq=i + 1)).code == 0
        s.close()
    deadline = time.monotonic() + 5
    while learner.ingest.servicer._active and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not learner.ingest.servicer._active
    assert len(learner.ingest.servicer.sessions) < 10


# ---- property-based: the decode/validate path, without a server ----

ANSWERS = {IA, FP, OOR, PD}
FIELDS = ("obs", "action", "reward", "next_obs", "terminated")
quick = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _accepted_is_well_formed(arrays, batch, session):
    n = batch.count
    assert arrays["obs"].shape == (n, 4) and arrays["next_obs"].shape == (n, 4)
    assert arrays["action"].shape == (n, 1) and arrays["reward"].shape == (n,)
    for k in ("obs", "next_obs", "action", "reward"):
        assert np.isfinite(arrays[k]).all()
    assert set(np.unique(arrays["terminated"])) <= {0, 1}
    assert (arrays["action"] >= session.low - 1e-3).all()
    assert (arrays["action"] <= session.high + 1e-3).all()


@quick
@given(count=st.integers(0, 2 * MAX_BATCH),
       fields=st.fixed_dictionaries({f: st.binary(max_size=600) for f in FIELDS}),
       session_known=st.booleans(), actor=st.sampled_from(["a", "b", ""]))
def test_arbitrary_field_bytes_are_accepted_well_formed_or_rejected(spec, count, fields,
                                                                   session_known, actor):
    session = Session(7, "a", spec) if session_known else None
    batch = pb.TransitionBatch(session_id=7, actor_id=actor, seq=1, count=count, **fields)
    try:
        arrays = validate(batch, session, MAX_BATCH)
    except BatchRejected as e:
        assert e.code in ANSWERS and e.message
        return
    _accepted_is_well_formed(arrays, batch, session)


@quick
@given(n=st.integers(1, MAX_BATCH), seed=st.integers(0, 2**31),
       field=st.sampled_from(FIELDS), cut=st.integers(-64, 64).filter(bool))
def test_any_byte_length_error_is_invalid_argument(spec, n, seed, field, cut):
    batch = codec.pack_batch(rows(n, seed), session_id=7, actor_id="a", seq=1, policy_version=0)
    raw = getattr(batch, field)
    setattr(batch, field, raw[:cut] if cut < 0 else raw + bytes(cut))
    with pytest.raises(BatchRejected) as e:
        validate(batch, Session(7, "a", spec), MAX_BATCH)
    assert e.value.code == IA


@quick
@given(n=st.integers(1, MAX_BATCH), seed=st.integers(0, 2**31),
       poison=st.sampled_from([np.nan, np.inf, -np.inf]), field=st.sampled_from(
           ["obs", "next_obs", "action", "reward"]), where=st.integers(0, 10_000))
def test_valid_rows_round_trip_and_any_nonfinite_value_is_refused(spec, n, seed, poison, field,
                                                                    where):
    r = rows(n, seed)
    batch = codec.pack_batch(r, session_id=7, actor_id="a", seq=1, policy_version=0)
    got = validate(batch, Session(7, "a", spec), MAX_BATCH)
    for k in FIELDS:
        np.testing.assert_array_equal(got[k], r[k])
    flat = r[field].reshape(-1)
    flat[where % flat.size] = poison
    bad = codec.pack_batch(r, session_id=7, actor_id="a", seq=1, policy_version=0)
    with pytest.raises(BatchRejected) as e:
        validate(bad, Session(7, "a", spec), MAX_BATCH)
    assert e.value.code == IA


@quick
@given(raw=st.binary(max_size=2_000))
def test_parse_never_raises(raw):
    out = parse_batch(raw)
    assert isinstance(out, (pb.TransitionBatch, Unparsable))


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(junk=st.lists(st.binary(min_size=1, max_size=300), min_size=1, max_size=5))
def test_arbitrary_bytes_on_the_wire_never_enter_the_buffer(learner, channel, spec, junk):
    """Any bytes on the method are answered (never OK) and the stream survives them."""
    sid = handshake(channel, spec, "a")
    raw = Stream(channel, raw=True)
    before = counters(learner)
    for blob in junk:
        assert raw.send(blob).code != 0
    assert counters(learner) == before
    assert raw.send(good(sid, "a", seq=1).SerializeToString()).code == 0
    raw.close()
