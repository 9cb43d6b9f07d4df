"""Errors raised in Ray actors, as the one line a user reads."""

from __future__ import annotations


def one_line(e: BaseException) -> str:
    """The message of an error raised in a Ray actor (its cause), without Ray's traceback."""
    cause = getattr(e, "cause", None) or e
    return (str(cause).strip().splitlines() or [type(cause).__name__])[0]


def cause_line(e: BaseException) -> str:
    """An error raised in a Ray actor's method as "ValueError: its message's first line"."""
    cause = getattr(e, "cause", None) or e
    return f"{type(cause).__name__}: {one_line(e)}"


def init_error(e: BaseException) -> str:
    """Why a Ray actor's __init__ failed: its exception's own last line ("ValueError: ..."),
    which Ray puts after its traceback; one_line(e) for any other actor error."""
    if getattr(e, "actor_init_failed", False):
        lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
        if lines:
            return lines[-1]
    return one_line(e)


def failure_line(logs: str) -> str | None:
    """The line that says why a job failed: the driver's own "herd: ..." line where it wrote
    one (actors' log lines, a dying process's dump among them, can come after it), else the
    last line; None for empty logs."""
    lines = [ln for ln in logs.strip().splitlines() if ln.strip()]
    ours = [ln for ln in lines if ln.startswith("herd: ")]
    return (ours or lines or [None])[-1]
