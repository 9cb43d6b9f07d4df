"""Checks every TransitionBatch before any of it touches the replay buffer."""

from __future__ import annotations

from dataclasses import dataclass, field

import grpc
import numpy as np

from herd.proto import codec
from herd.proto import herd_pb2 as pb

FLOAT32_MAX = float(np.finfo(np.float32).max)
MAX_ACTOR_ID = 256
"""Longest actor_id (characters) a handshake may name: ids are kept per session and per actor."""


class BatchRejected(Exception):
    """A batch that must not enter the buffer; `code` is the status answered to the actor."""

    def __init__(self, code: grpc.StatusCode, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass
class Session:
    """One handshaken actor connection."""

    session_id: int
    actor_id: str
    spec: pb.EnvSpec
    incarnation: int = 0
    """The actor process's random id from its handshake (0: none, no duplicate detection)."""
    low: np.ndarray = field(init=False)
    high: np.ndarray = field(init=False)

    def __post_init__(self):
        self.low = np.asarray(self.spec.action_low, np.float32)
        self.high = np.asarray(self.spec.action_high, np.float32)


def spec_mismatch(ours: pb.EnvSpec, theirs: pb.EnvSpec) -> str | None:
    """Why an actor's env spec differs from the learner's, or None when they agree."""
    for name in ("env_id", "obs_shape", "obs_dtype", "action_shape", "action_dtype", "frame_stack"):
        a, b = getattr(ours, name), getattr(theirs, name)
        if (a != b) if isinstance(a, (str, int)) else (list(a) != list(b)):
            return f"{name}: learner has {a!r}, actor sent {b!r}"
    if ours.state_dim and ours.state_dim != theirs.state_dim:  # 0: the critics read no state
        return f"state_dim: learner's critics read {ours.state_dim}, actor's env has {theirs.state_dim}"
    for name in ("action_low", "action_high"):
        a, b = np.asarray(getattr(ours, name)), np.asarray(getattr(theirs, name))
        if a.shape != b.shape or not np.allclose(a, b, rtol=1e-5, atol=1e-6):
            return f"{name}: learner has {a.tolist()}, actor sent {b.tolist()}"
    return None


def handshake_refusal(ours: pb.EnvSpec, request: pb.HandshakeRequest):
    """(status code, reason) when a handshake must be refused, else None."""
    if not request.actor_id:
        return grpc.StatusCode.INVALID_ARGUMENT, "actor_id is empty"
    if len(request.actor_id) > MAX_ACTOR_ID:
        return (grpc.StatusCode.INVALID_ARGUMENT,
                f"actor_id has {len(request.actor_id)} characters; at most {MAX_ACTOR_ID}")
    why = spec_mismatch(ours, request.spec)
    if why:
        return grpc.StatusCode.FAILED_PRECONDITION, f"env spec differs: {why}"
    return None


def validate(batch: pb.TransitionBatch, session: Session | None, max_batch: int,
             obs_limit: float = FLOAT32_MAX):
    """Decoded field arrays of a well-formed batch; BatchRejected otherwise.

    `obs_limit`: the largest magnitude the ring's observation dtype holds (65504 for float16):
    a finite observation beyond it would be stored as Inf and poison every later update.
    """
    invalid = grpc.StatusCode.INVALID_ARGUMENT
    if session is None:
        raise BatchRejected(
            grpc.StatusCode.FAILED_PRECONDITION,
            f"unknown session {batch.session_id}: handshake (again) before pushing",
        )
    if batch.actor_id != session.actor_id:
        raise BatchRejected(
            grpc.StatusCode.PERMISSION_DENIED,
            f"batch from actor '{batch.actor_id}' on the session of '{session.actor_id}'",
        )
    if not 0 < batch.count <= max_batch:
        raise BatchRejected(invalid, f"count {batch.count} outside 1..{max_batch}")
    try:
        arrays = codec.unpack_batch(batch, session.spec)
    except ValueError as e:
        raise BatchRejected(invalid, str(e)) from None
    if session.incarnation and batch.seq == 0:
        # dedup counts an incarnation's seqs from 1: a seq 0 would be acked as a duplicate of
        # nothing and dropped
        raise BatchRejected(invalid, "seq 0 from an actor with an incarnation (seqs start at 1)")
    if "frames" in arrays:
        check_frames(arrays, session)
    for name in ("obs", "next_obs", "action", "reward", "discount", "frame_state"):
        a = arrays.get(name)
        if a is None or not a.size or a.dtype.kind != "f":
            continue
        limit = obs_limit if name in ("obs", "next_obs") else FLOAT32_MAX
        # Two reductions and no temporary over the batch's largest fields: NaN fails both
        # comparisons and Inf passes no limit, so this one test covers finiteness too.
        if a.max() <= limit and a.min() >= -limit:
            continue
        if not np.isfinite(a).all():
            raise BatchRejected(invalid, f"field '{name}' holds NaN or Inf")
        raise BatchRejected(grpc.StatusCode.OUT_OF_RANGE,
                            f"field '{name}' holds values beyond the ring's dtype (|x| > {limit:g})")
    act = arrays["action"].reshape(batch.count, -1)
    slack = 1e-4 * (session.high - session.low) + 1e-6
    if (act < session.low - slack).any() or (act > session.high + slack).any():
        raise BatchRejected(grpc.StatusCode.OUT_OF_RANGE, "action outside the env's bounds")
    if arrays["terminated"].max(initial=0) > 1:
        raise BatchRejected(invalid, "field 'terminated' must hold 0 or 1")
    discount = arrays.get("discount")
    if discount is not None and ((discount < 0).any() or (discount > 1).any()):
        raise BatchRejected(invalid, "field 'discount' must lie in [0, 1]")
    return arrays


MAX_FRAME_NUMBER = 2**62
"""Frame numbers stay below this (int64 arithmetic on them never overflows)."""


def check_frames(arrays: dict, session: Session) -> None:
    """A pixel batch's frame numbers (proto/herd.proto): first_frame and the batch's frames below
    MAX_FRAME_NUMBER, frame_prev of frame n in [-1, n), obs_frame and next_frame in [0, the
    batch's newest frame], next_frame after obs_frame. Numbers below first_frame name frames of
    the actor's earlier batches: whether it sent them and the learner still holds them is the
    frame index's question (learner/replay/frames.py FrameIndex), asked before the ack. Adds the
    actor's identity, whose frame numbers these are, and first_frame as numpy scalars."""
    first, prev = arrays["first_frame"], arrays["frame_prev"]
    check_first_frame(first, len(prev))
    # no new frames: first_frame names none; how far the rows may point is the actor's newest
    newest = first + len(prev) - 1 if len(prev) else MAX_FRAME_NUMBER - 1
    if len(prev):
        check_frame_prev(first, prev)
    check_frame_refs(arrays["obs_frame"], arrays["next_frame"], newest)
    arrays["first_frame"] = np.int64(first)
    arrays["actor_id"] = np.str_(session.actor_id)
    arrays["incarnation"] = np.uint64(session.incarnation)


def check_first_frame(first: int, n_frames: int) -> None:
    """first_frame (a uint64 on the wire) and the batch's last frame below MAX_FRAME_NUMBER."""
    if first + max(n_frames - 1, 0) >= MAX_FRAME_NUMBER:
        raise BatchRejected(grpc.StatusCode.INVALID_ARGUMENT,
                            f"first_frame {first} with {n_frames} frames: frame numbers must stay "
                            f"below {MAX_FRAME_NUMBER}")


def check_frame_prev(first: int, prev: np.ndarray) -> None:
    own = first + np.arange(len(prev), dtype=np.int64)
    bad = np.flatnonzero((prev < -1) | (prev >= own))
    if len(bad):
        i = int(bad[0])
        raise BatchRejected(grpc.StatusCode.INVALID_ARGUMENT,
                            f"frame_prev of frame {first + i} is {int(prev[i])}; it must be -1 or "
                            f"an earlier frame's number")


def check_frame_refs(obs: np.ndarray, nxt: np.ndarray, newest: int) -> None:
    invalid = grpc.StatusCode.INVALID_ARGUMENT
    for name, refs in (("obs_frame", obs), ("next_frame", nxt)):
        bad = np.flatnonzero((refs < 0) | (refs > newest))
        if len(bad):
            i = int(bad[0])
            raise BatchRejected(invalid, f"{name} of row {i} is {int(refs[i])}; frames known "
                                         f"from this actor are 0..{newest}")
    bad = np.flatnonzero(nxt <= obs)
    if len(bad):
        i = int(bad[0])
        raise BatchRejected(invalid, f"next_frame of row {i} ({int(nxt[i])}) is not after its "
                                     f"obs_frame ({int(obs[i])})")
