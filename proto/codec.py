"""Packing numpy arrays into herd.proto messages and back.

The one piece of code actors/ and learner/ share besides the generated stubs: both sides must
agree byte for byte, so it lives with the contract.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from herd.proto import herd_pb2 as pb

TRANSITION_FIELDS = ("obs", "action", "reward", "next_obs", "terminated", "discount")
"""TransitionBatch's row fields in field-number order (6..11)."""
OPTIONAL_FIELDS = ("discount",)
"""Fields a batch may leave empty: no `discount` means one-step rows."""
FRAME_FIELDS = {"frames": 12, "frame_prev": 14, "obs_frame": 15, "next_frame": 16}
"""A pixel batch's frame fields and their field numbers (first_frame, 13, is a scalar)."""
FRAME_STATE_FIELD = 17
"""A pixel batch's frame_state: each new frame's env state, when the learner asks for it."""
FRAME_DTYPE = np.dtype("u1")
FRAME_REF_DTYPE = np.dtype("<i8")
STATE_DTYPE = np.dtype("<f4")
REWARD_DTYPE = np.dtype("<f4")
DISCOUNT_DTYPE = np.dtype("<f4")
TERMINATED_DTYPE = np.dtype("u1")
TOKEN_HEADER = "x-herd-token"
SERVICE = pb.DESCRIPTOR.services_by_name["Learner"].full_name
"""The gRPC service of proto/herd.proto, by its full name (package included)."""
METHOD_PATHS = {m.name: f"/{SERVICE}/{m.name}"
                for m in pb.DESCRIPTOR.services_by_name["Learner"].methods}
"""Each RPC's path on the wire ('/herd.v1.Learner/PushTransitions'), for calls and handlers made
by hand (hand-serialized batches, bytes forwarded as they are)."""


def wire_dtype(name: str) -> np.dtype:
    """The little-endian numpy dtype for a dtype name from an EnvSpec."""
    return np.dtype(name).newbyteorder("<")


def spec_to_proto(
    env_id: str, obs_shape, obs_dtype, action_shape, action_low, action_high, frame_stack: int = 0,
    state_dim: int = 0,
) -> pb.EnvSpec:
    return pb.EnvSpec(
        frame_stack=frame_stack,
        state_dim=state_dim,
        env_id=env_id,
        obs_shape=list(obs_shape),
        obs_dtype=np.dtype(obs_dtype).name,
        action_shape=list(action_shape),
        action_dtype="float32",
        action_low=np.asarray(action_low, np.float32).ravel().tolist(),
        action_high=np.asarray(action_high, np.float32).ravel().tolist(),
    )


def pack_batch(
    arrays: Mapping[str, np.ndarray],
    *,
    session_id: int,
    actor_id: str,
    seq: int,
    policy_version: int,
    obs_dtype: str = "float32",
) -> pb.TransitionBatch:
    """One TransitionBatch from row-aligned arrays (obs, action, reward, next_obs, terminated,
    and optionally discount); a pixel batch gives frames, first_frame, frame_prev, obs_frame
    and next_frame instead of obs and next_obs (and frame_state [F, state_dim] where the
    learner reads the env's state)."""
    if is_pixel_batch(arrays):
        return pb.TransitionBatch.FromString(WireBatch(
            arrays, session_id=session_id, actor_id=actor_id, seq=seq,
            policy_version=policy_version).SerializeToString())
    obs_dt = wire_dtype(obs_dtype)
    count = len(arrays["reward"])
    discount = arrays.get("discount")
    return pb.TransitionBatch(
        session_id=session_id,
        actor_id=actor_id,
        seq=seq,
        policy_version=policy_version,
        count=count,
        obs=np.ascontiguousarray(arrays["obs"], obs_dt).tobytes(),
        action=np.ascontiguousarray(arrays["action"], "<f4").tobytes(),
        reward=np.ascontiguousarray(arrays["reward"], REWARD_DTYPE).tobytes(),
        next_obs=np.ascontiguousarray(arrays["next_obs"], obs_dt).tobytes(),
        terminated=np.ascontiguousarray(arrays["terminated"], TERMINATED_DTYPE).tobytes(),
        discount=b"" if discount is None else np.ascontiguousarray(discount, DISCOUNT_DTYPE).tobytes(),
    )


def is_pixel_batch(arrays: Mapping) -> bool:
    return "frames" in arrays


def is_pixel_spec(spec: pb.EnvSpec) -> bool:
    return spec.frame_stack > 0


WEIGHTS_VERSION_FIELD = pb.PolicyWeights.DESCRIPTOR.fields_by_name["version"].number


def weights_version(wire: bytes) -> int:
    """PolicyWeights.version read off its serialized bytes, the tensors skipped, not parsed: the
    middle hops (an ingest process, a node's relay) forward weights as the bytes they got."""
    pos, end = 0, len(wire)
    while pos < end:
        tag, pos = _read_varint(wire, pos)
        num, kind = tag >> 3, tag & 7
        if kind == 0:
            value, pos = _read_varint(wire, pos)
            if num == WEIGHTS_VERSION_FIELD:
                return value
        elif kind == 2:
            length, pos = _read_varint(wire, pos)
            pos += length
        elif kind in (1, 5):
            pos += 8 if kind == 1 else 4
        else:
            raise ValueError(f"PolicyWeights bytes with wire type {kind} at byte {pos}")
    return 0  # proto3 leaves a version of 0 out


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(buf):
            raise ValueError("PolicyWeights bytes end inside a varint")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _scalar(num: int, value: int) -> bytes:
    """Field `num` as a varint (proto3 leaves zeros out)."""
    return _varint(num << 3) + _varint(value) if value else b""


def _length_delimited(num: int, data) -> list:
    n = memoryview(data).nbytes
    return [_varint(num << 3 | 2), _varint(n), data] if n else []


class WireBatch:
    """A TransitionBatch serialized by hand: the bytes `pack_batch(...).SerializeToString()`
    gives, byte for byte, from one join of the rows.

    The client used to pay protobuf's encoder twice per batch (`ByteSize` for its byte counter
    re-encodes the whole message, then gRPC serializes it): per 128-row Humanoid batch 63 µs
    against 33 µs for this (`bench/wire.py`), and ~1.3 ms in a process whose heap still maps
    every large block afresh (proto/heap.py). The rows are joined once into the body (fields
    6-10); the small head (fields 1-5) is written per send, so a resend after a reconnect can
    carry a new `session_id`. Hand it to gRPC with `request_serializer=WireBatch.SerializeToString`.
    `discount` (field 11) is written only when `arrays` holds it. A pixel batch (`frames` in
    `arrays`) writes fields 7, 8, 10, 11 and the frame fields 12-16 instead of obs/next_obs,
    and frame_state (17) when `arrays` holds it.
    """

    __slots__ = ("_body", "actor_id", "count", "policy_version", "seq", "session_id")

    def __init__(self, arrays: Mapping[str, np.ndarray], *, session_id: int, actor_id: str,
                 seq: int, policy_version: int, obs_dtype: str = "float32"):
        obs_dt = wire_dtype(obs_dtype)
        self.session_id, self.actor_id, self.seq = session_id, actor_id, seq
        self.policy_version, self.count = policy_version, len(arrays["reward"])
        dtypes = (obs_dt, np.dtype("<f4"), REWARD_DTYPE, obs_dt, TERMINATED_DTYPE, DISCOUNT_DTYPE)
        pixel = is_pixel_batch(arrays)
        parts = []
        for num, (name, dt) in enumerate(zip(TRANSITION_FIELDS, dtypes), start=6):
            if name in OPTIONAL_FIELDS and arrays.get(name) is None:
                continue
            if pixel and name in ("obs", "next_obs"):
                continue
            parts += _length_delimited(num, np.ascontiguousarray(arrays[name], dt))
        if pixel:
            parts += _length_delimited(12, np.ascontiguousarray(arrays["frames"], FRAME_DTYPE))
            parts.append(_scalar(13, int(arrays["first_frame"])))
            for name in ("frame_prev", "obs_frame", "next_frame"):
                parts += _length_delimited(FRAME_FIELDS[name],
                                           np.ascontiguousarray(arrays[name], FRAME_REF_DTYPE))
            if arrays.get("frame_state") is not None:
                parts += _length_delimited(FRAME_STATE_FIELD,
                                           np.ascontiguousarray(arrays["frame_state"], STATE_DTYPE))
        self._body = b"".join(parts)

    def _head(self) -> bytes:
        return b"".join([_scalar(1, self.session_id), *_length_delimited(2, self.actor_id.encode()),
                         _scalar(3, self.seq), _scalar(4, self.policy_version), _scalar(5, self.count)])

    def SerializeToString(self) -> bytes:  # protobuf's name: gRPC takes either
        return b"".join([self._head(), self._body])

    @property
    def nbytes(self) -> int:
        return len(self._head()) + len(self._body)


def field_layout(spec: pb.EnvSpec) -> dict[str, tuple[np.dtype, tuple[int, ...]]]:
    """dtype and per-row shape of every TransitionBatch field under `spec`."""
    obs = (wire_dtype(spec.obs_dtype), tuple(spec.obs_shape))
    return {
        "obs": obs,
        "action": (wire_dtype(spec.action_dtype), tuple(spec.action_shape)),
        "reward": (REWARD_DTYPE, ()),
        "next_obs": obs,
        "terminated": (TERMINATED_DTYPE, ()),
        "discount": (DISCOUNT_DTYPE, ()),
    }


def unpack_batch(batch: pb.TransitionBatch, spec: pb.EnvSpec) -> dict[str, np.ndarray]:
    """Zero-copy views of a batch's fields (an empty optional field is left out). Raises
    ValueError when a byte length is wrong. A pixel spec's batch gives frames [F, *obs_shape],
    frame_prev [F], obs_frame and next_frame [count] (int64) and first_frame (an int) in place
    of obs and next_obs, and frame_state [F, state_dim] (float32) where the spec's state_dim is
    set; what the numbers point at is the learner's to check."""
    out = {}
    pixel = is_pixel_spec(spec)
    for name, (dtype, shape) in field_layout(spec).items():
        raw = getattr(batch, name)
        if pixel and name in ("obs", "next_obs"):
            if raw:
                raise ValueError(f"field '{name}' must be empty in a pixel batch (frames carry it)")
            continue
        if not raw and name in OPTIONAL_FIELDS:
            continue
        row = dtype.itemsize * math.prod(shape)  # np.prod costs more than the rest of the loop
        if len(raw) != batch.count * row:
            raise ValueError(
                f"field '{name}' has {len(raw)} bytes; {batch.count} rows of shape {shape} "
                f"{dtype.name} need {batch.count * row}"
            )
        out[name] = np.frombuffer(raw, dtype).reshape((batch.count, *shape))
    if pixel:
        out.update(_unpack_frames(batch, spec))
    elif batch.frames or batch.frame_prev or batch.obs_frame or batch.next_frame or batch.frame_state:
        raise ValueError("frame fields in a batch of a state env (its spec has no frame_stack)")
    return out


def _unpack_frames(batch: pb.TransitionBatch, spec: pb.EnvSpec) -> dict:
    frame = math.prod(spec.obs_shape)
    n_prev = len(batch.frame_prev) // FRAME_REF_DTYPE.itemsize
    if len(batch.frame_prev) % FRAME_REF_DTYPE.itemsize or len(batch.frames) != n_prev * frame:
        raise ValueError(
            f"field 'frames' has {len(batch.frames)} bytes for {len(batch.frame_prev)} bytes of "
            f"frame_prev; each frame is {frame} bytes of shape {tuple(spec.obs_shape)} uint8 with "
            f"one int64 in frame_prev")
    out = {"frames": np.frombuffer(batch.frames, FRAME_DTYPE).reshape((n_prev, *spec.obs_shape)),
           "frame_prev": np.frombuffer(batch.frame_prev, FRAME_REF_DTYPE),
           "first_frame": int(batch.first_frame)}
    for name in ("obs_frame", "next_frame"):
        raw = getattr(batch, name)
        if len(raw) != batch.count * FRAME_REF_DTYPE.itemsize:
            raise ValueError(f"field '{name}' has {len(raw)} bytes; {batch.count} rows need "
                             f"{batch.count * FRAME_REF_DTYPE.itemsize} (int64 each)")
        out[name] = np.frombuffer(raw, FRAME_REF_DTYPE)
    state, dim = batch.frame_state, spec.state_dim
    if not dim and state:
        raise ValueError("field 'frame_state' in a batch whose learner reads no state (its "
                         "handshake reply's state_dim is 0)")
    if dim:
        need = n_prev * dim * STATE_DTYPE.itemsize
        if len(state) != need:
            raise ValueError(f"field 'frame_state' has {len(state)} bytes; {n_prev} frames of "
                             f"{dim} float32 each need {need}")
        out["frame_state"] = np.frombuffer(state, STATE_DTYPE).reshape(n_prev, dim)
    return out


def pack_weights(
    tensors: Mapping[str, np.ndarray], version: int, log_std_min: float, log_std_max: float,
    *, arch: str = "mlp", obs_mean=None, obs_std=None, obs_clip: float = 0.0,
    conv_strides=(),
) -> pb.PolicyWeights:
    """PolicyWeights of `arch`; obs_mean/obs_std (flat) when the network reads normalized obs;
    conv_strides for "conv"."""
    norm = {}
    if obs_mean is not None:
        norm = dict(obs_mean=np.asarray(obs_mean, np.float32).ravel().tolist(),
                    obs_std=np.asarray(obs_std, np.float32).ravel().tolist(), obs_clip=obs_clip)
    return pb.PolicyWeights(
        arch=arch,
        **norm,
        version=version,
        tensors=[
            pb.Tensor(name=k, shape=list(v.shape), data=np.ascontiguousarray(v, "<f4").tobytes())
            for k, v in tensors.items()
        ],
        log_std_min=log_std_min,
        log_std_max=log_std_max,
        conv_strides=list(conv_strides),
    )


def unpack_weights(msg: pb.PolicyWeights) -> list[tuple[str, np.ndarray]]:
    """(name, array) pairs in layer order."""
    return [
        (t.name, np.frombuffer(t.data, "<f4").reshape(tuple(t.shape))) for t in msg.tensors
    ]
