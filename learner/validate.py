"""Checks every TransitionBatch before any of it touches the replay buffer."""

from __future__ import annotations

from dataclasses import dataclass, field

import grpc
import numpy as np

from proto import codec
from proto import herd_pb2 as pb


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
    for name in ("obs_shape", "obs_dtype", "action_shape", "action_dtype"):
        a, b = getattr(ours, name), getattr(theirs, name)
        if (a != b) if isinstance(a, str) else (list(a) != list(b)):
            return f"{name}: learner has {a!r}, actor sent {b!r}"
    for name in ("action_low", "action_high"):
        a, b = np.asarray(getattr(ours, name)), np.asarray(getattr(theirs, name))
        if a.shape != b.shape or not np.allclose(a, b, rtol=1e-5, atol=1e-6):
            return f"{name}: learner has {a.tolist()}, actor sent {b.tolist()}"
    return None


def validate(batch: pb.TransitionBatch, session: Session | None, max_batch: int):
    """Decoded field arrays of a well-formed batch; BatchRejected otherwise."""
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
    for name in ("obs", "next_obs", "action", "reward"):
        a = arrays[name]
        if a.dtype.kind == "f" and not np.isfinite(a).all():
            raise BatchRejected(invalid, f"field '{name}' holds NaN or Inf")
    act = arrays["action"].reshape(batch.count, -1)
    slack = 1e-4 * (session.high - session.low) + 1e-6
    if (act < session.low - slack).any() or (act > session.high + slack).any():
        raise BatchRejected(grpc.StatusCode.OUT_OF_RANGE, "action outside the env's bounds")
    if arrays["terminated"].max(initial=0) > 1:
        raise BatchRejected(invalid, "field 'terminated' must hold 0 or 1")
    return arrays
