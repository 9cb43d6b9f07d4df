import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from herd.proto import codec

ROOT = Path(__file__).resolve().parents[2]


def _arrays(n, obs_dim=4, act_dim=1, seed=0, discount=False):
    rng = np.random.default_rng(seed)
    out = {
        "obs": rng.normal(size=(n, obs_dim)).astype(np.float32),
        "action": rng.uniform(-1, 1, (n, act_dim)).astype(np.float32),
        "reward": rng.normal(size=n).astype(np.float32),
        "next_obs": rng.normal(size=(n, obs_dim)).astype(np.float32),
        "terminated": rng.integers(0, 2, n).astype(np.uint8),
    }
    if discount:  # n-step rows: g^k for k in 1..3
        out["discount"] = (0.99 ** rng.integers(1, 4, n)).astype(np.float32)
    return out


@pytest.mark.parametrize("discount", [False, True])
def test_batch_round_trip_is_exact(spec, discount):
    arrays = _arrays(37, discount=discount)
    msg = codec.pack_batch(arrays, session_id=3, actor_id="a", seq=9, policy_version=5)
    wire = type(msg).FromString(msg.SerializeToString())
    back = codec.unpack_batch(wire, spec)
    assert (wire.count, wire.seq, wire.policy_version, wire.session_id) == (37, 9, 5, 3)
    assert set(back) == set(arrays)  # no discount sent: none decoded (one-step rows)
    for name in arrays:
        np.testing.assert_array_equal(back[name].reshape(arrays[name].shape), arrays[name])


@pytest.mark.parametrize(("n", "session", "seq", "version", "actor"), [
    (37, 3, 9, 5, "a"), (1, 2**63 - 1, 1, 0, "actor-é-" + "x" * 200), (0, 0, 0, 0, ""),
    (300, 123456789, 2**40, 2**32 + 7, "bench-16-3")])
@pytest.mark.parametrize("discount", [False, True])
def test_hand_serialized_batch_is_protobufs_own_bytes(n, session, seq, version, actor, discount):
    arrays = _arrays(n, obs_dim=7, act_dim=3, seed=n, discount=discount)
    want = codec.pack_batch(arrays, session_id=session, actor_id=actor, seq=seq,
                            policy_version=version).SerializeToString()
    wire = codec.WireBatch(arrays, session_id=session, actor_id=actor, seq=seq, policy_version=version)
    assert wire.SerializeToString() == want
    assert wire.nbytes == len(want) and wire.count == n
    wire.session_id = 77  # a resend after a reconnect carries the new session
    assert codec.pb.TransitionBatch.FromString(wire.SerializeToString()).session_id == 77


def test_wrong_byte_length_is_named(spec):
    msg = codec.pack_batch(_arrays(8), session_id=1, actor_id="a", seq=1, policy_version=0)
    msg.next_obs = msg.next_obs[:-4]
    with pytest.raises(ValueError, match="next_obs"):
        codec.unpack_batch(msg, spec)


def test_weights_round_trip():
    tensors = {"l0.weight": np.arange(6, dtype=np.float32).reshape(2, 3), "l0.bias": np.ones(2, np.float32)}
    msg = codec.pack_weights(tensors, version=7, log_std_min=-5, log_std_max=2)
    back = dict(codec.unpack_weights(type(msg).FromString(msg.SerializeToString())))
    assert msg.version == 7
    for k, v in tensors.items():
        np.testing.assert_array_equal(back[k], v)


def test_generated_stubs_are_current(tmp_path):
    """Fails when proto/herd.proto changed without `make proto`."""
    out = tmp_path / "herd" / "proto"  # as `make proto` does: the path is the import name
    out.mkdir(parents=True)
    (out / "herd.proto").write_text((ROOT / "proto" / "herd.proto").read_text())
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", "-I.", "--python_out=.",
                    "--grpc_python_out=.", "--pyi_out=.", "herd/proto/herd.proto"], cwd=tmp_path, check=True)
    for name in ("herd_pb2.py", "herd_pb2_grpc.py", "herd_pb2.pyi"):
        fresh = (out / name).read_text()
        assert fresh == (ROOT / "proto" / name).read_text(), f"proto/{name} is stale: run `make proto`"


def _pixel_arrays(frames=5, rows=4, state_dim=3, seed=0):
    rng = np.random.default_rng(seed)
    out = {"frames": rng.integers(0, 256, (frames, 3, 4, 4), dtype=np.uint8), "first_frame": 10,
           "frame_prev": np.arange(9, 9 + frames, dtype=np.int64),
           "obs_frame": np.arange(10, 10 + rows, dtype=np.int64),
           "next_frame": np.arange(11, 11 + rows, dtype=np.int64),
           "action": rng.uniform(-1, 1, (rows, 1)).astype(np.float32),
           "reward": rng.normal(size=rows).astype(np.float32),
           "terminated": np.zeros(rows, np.uint8)}
    if state_dim:
        out["frame_state"] = rng.normal(size=(frames, state_dim)).astype(np.float32)
    return out


def _pixel_spec(state_dim):
    return codec.spec_to_proto("toy", (3, 4, 4), "uint8", (1,), [-1.0], [1.0], frame_stack=2,
                               state_dim=state_dim)


def test_frame_state_round_trip_and_protobufs_own_bytes():
    arrays = _pixel_arrays()
    wire = codec.WireBatch(arrays, session_id=1, actor_id="a", seq=2, policy_version=3)
    msg = codec.pb.TransitionBatch.FromString(wire.SerializeToString())
    assert msg.SerializeToString() == wire.SerializeToString()
    back = codec.unpack_batch(msg, _pixel_spec(3))
    np.testing.assert_array_equal(back["frame_state"], arrays["frame_state"])
    np.testing.assert_array_equal(back["frames"], arrays["frames"])


@pytest.mark.parametrize(("sent", "read", "match"), [
    (3, 0, "reads no state"), (0, 3, "frame_state' has 0 bytes"), (2, 3, "frame_state' has 40 bytes")])
def test_frame_state_of_the_wrong_size_is_named(sent, read, match):
    msg = codec.pb.TransitionBatch.FromString(codec.WireBatch(
        _pixel_arrays(state_dim=sent), session_id=1, actor_id="a", seq=1,
        policy_version=0).SerializeToString())
    with pytest.raises(ValueError, match=match):
        codec.unpack_batch(msg, _pixel_spec(read))


def test_frame_state_in_a_state_batch_is_refused(spec):
    msg = codec.pack_batch(_arrays(8), session_id=1, actor_id="a", seq=1, policy_version=0)
    msg.frame_state = np.zeros(4, np.float32).tobytes()
    with pytest.raises(ValueError, match="state env"):
        codec.unpack_batch(msg, spec)


@pytest.mark.parametrize("version", [0, 1, 127, 128, 2**40])
def test_the_weights_version_is_read_off_the_bytes_in_any_field_order(version):
    """The middle hops read PolicyWeights.version without parsing the tensors; a version field
    after the others (protobuf allows any order) is found too."""
    from herd.proto import herd_pb2 as pb

    body = pb.PolicyWeights(tensors=[pb.Tensor(name="w", shape=[300], data=bytes(1200))],
                            log_std_min=-5.0, arch="conv", obs_mean=[1.0, 2.0], conv_strides=[2, 1])
    head = pb.PolicyWeights(version=version)
    for raw in (body.SerializeToString() + head.SerializeToString(),
                head.SerializeToString() + body.SerializeToString()):
        assert pb.PolicyWeights.FromString(raw).version == version
        assert codec.weights_version(raw) == version
    with pytest.raises(ValueError):
        codec.weights_version(head.SerializeToString()[:-1] + b"\x80")

