"""Hand-built logs of format v5 (docs/log-format.md section 5.9): a paused run and the runs
that continue it, written row by row through :class:`RunWriter` into any store, so both
verifiers (the library's and the independent one of ``tests/spec``) can be given the same
logs, valid ones and each kind of damage (agents write v5 too: a pause of ``credentials``)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any
from unittest import mock

from agentfootprint.logformat.log_formats import LOG_FORMAT_V5
from agentfootprint.store.writer import RunWriter
from agentfootprint.testing.store_contract import open_body

__all__ = [
    "PENDING",
    "close",
    "commit",
    "paused",
    "record",
    "resumed",
    "unchecked_answers",
    "v5_open",
    "write",
]


@contextlib.contextmanager
def unchecked_answers() -> Iterator[None]:
    """Write as a writer that does not check one answer per pause (the stores' guard off,
    in this block only): how a log with two answers to one pause is made, for the verifier
    to report it (docs/log-format.md section 9.5 step 5)."""
    import agentfootprint.store.memory as memory
    import agentfootprint.store.sqlite_layout as sqlite_layout

    def accept(run_id: str, parent: str, answered_by: str | None) -> None:
        return None

    with (
        mock.patch.object(sqlite_layout, "refuse_second_answer", accept),
        mock.patch.object(memory, "refuse_second_answer", accept),
    ):
        yield


PENDING: dict[str, Any] = {
    "request_id": "req-1",
    "kind": "input",
    "tool_call_id": "call_1",
    "tool": "book",
    "question": "Which dates?",
    "fields": {"start": {"type": "string", "description": "first night"}, "nights": {}},
}


def v5_open(run_id: str, parent: RunWriter | None = None, **members: Any) -> dict[str, Any]:
    reference = None
    if parent is not None:
        reference = {"run_id": parent.run_id, "events": parent.seq, "head": parent.head.hex()}
    body = open_body(run_id, parent.run_id if parent else None, reference)
    return {**body, "format": LOG_FORMAT_V5, **members}


def commit(index: int, writes: int = 0, stage: str = "s") -> tuple[str, dict[str, Any]]:
    body = {"commit": index, "stage": stage, "stage_run": f"{stage}#1", "writes": writes}
    return ("commit", body)


def write(index: int, path: str, value: Any, verb: str = "set") -> tuple[str, dict[str, Any]]:
    return ("write", {"commit": index, "path": path, "verb": verb, "value": value})


def close(commits: int, outcome: str = "answered", **extra: Any) -> tuple[str, dict[str, Any]]:
    body = {"outcome": outcome, "commits": commits, "receipts": 0, "calls": 0, **extra}
    return ("run.close", body)


def record(store: Any, run_id: str, opened: dict[str, Any], *batches: list[Any]) -> RunWriter:
    writer = RunWriter(store, run_id)
    writer.append([("run.open", opened)])
    for batch in batches:
        writer.append(batch)
    return writer


def paused(store: Any, run_id: str = "p", pending: Any = None, **close_extra: Any) -> RunWriter:
    value = PENDING if pending is None else pending
    return record(
        store,
        run_id,
        v5_open(run_id),
        [write(0, "history", ["hello"]), commit(0, 1)],
        [write(1, "pending", value), commit(1, 1, stage="tool-calls")],
        [close(2, "paused", pending=close_extra.pop("close_pending", value), **close_extra)],
    )


def resumed(
    store: Any,
    parent: RunWriter,
    run_id: str = "r",
    answer: Any = None,
    stage: str = "resume",
    **members: Any,
) -> RunWriter:
    given = {"resumes": "req-1"} | members
    opened = v5_open(run_id, parent, **{k: v for k, v in given.items() if v is not None})
    value = {"start": "2026-12-24", "nights": 2} if answer is None else answer
    return record(
        store,
        run_id,
        opened,
        [write(0, "resume_answer", value), commit(0, 1, stage=stage)],
        [close(1)],
    )
