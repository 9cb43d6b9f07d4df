"""Ingest: batches from the wire to the training thread, in this process or in processes of
their own, behind one interface."""

from __future__ import annotations

from typing import Protocol


class Ingest(Protocol):
    """What the Learner sees of ingest wherever it runs: InProcessIngest (a thread of this
    process, learner/ingest/in_process.py) or IngestProcess (processes of their own,
    learner/ingest/processes.py)."""

    port: int | None
    """Where actors connect (the first process's port, with several)."""

    def take(self, limit: int, timeout: float = 0.0) -> list:
        """Up to `limit` staged blocks for the ring (packed rows; a pixel env's validated
        batches), waiting up to `timeout` s for the first: the training thread's one call."""

    def counts(self) -> dict:
        """The ingest side of the learner's status (per_actor: accepted transitions by actor)."""

    def stop(self, grace: float = 1.0) -> None:
        """Stop serving; what was staged stays for the last take()."""
