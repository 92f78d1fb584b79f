"""Reading a run's record in tests: its recorded events, its ``run.open``, how it closed.

Each reads the log as stored (the events, never the index) and, for the outcome, from a run
that verifies, so a test asserting on them asserts on evidence.
"""

from __future__ import annotations

from typing import Any

from agentfootprint.logformat.canonical import parse
from agentfootprint.store.base import EventReader
from agentfootprint.verify.verifier import Verifier

__all__ = ["outcome", "recorded_events", "run_open"]


def recorded_events(store: EventReader, run_id: str, kind: str) -> list[dict[str, Any]]:
    """The payloads of ``run_id``'s recorded ``event`` rows of ``kind``, in log order."""
    found = []
    for row in store.read(run_id):
        if row.type == "event":
            body = parse(row.body)
            if body["name"] == kind:
                found.append(body["payload"])
    return found


def run_open(store: EventReader, run_id: str) -> dict[str, Any]:
    """``run_id``'s ``run.open`` body."""
    opened: dict[str, Any] = parse(next(iter(store.read(run_id))).body)
    return opened


def outcome(store: EventReader, run_id: str) -> Any:
    """How ``run_id`` closed (``answered``, ``stopped_early``, ``failed``), from a log that
    verifies (a run that does not raises its VerificationError)."""
    verified = Verifier(store).verify(run_id)
    assert verified.close is not None, f"run {run_id} never closed"
    return verified.close["outcome"]
