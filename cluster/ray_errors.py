"""Errors raised in Ray actors, as the one line a user reads."""

from __future__ import annotations


def one_line(e: BaseException) -> str:
    """The message of an error raised in a Ray actor (its cause), without Ray's traceback."""
    cause = getattr(e, "cause", None) or e
    return (str(cause).strip().splitlines() or [type(cause).__name__])[0]
