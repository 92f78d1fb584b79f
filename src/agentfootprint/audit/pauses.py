"""The questions a log still waits on: runs closed ``paused`` (log format v5,
docs/log-format.md section 5.9) that no closed run resumes or abandons yet (a run that began
answering and never closed, its process dead, is no answer: it is named, to be retried).

Read from the events, never from the run index: each run's ``run.open`` names the parent it
continues, each paused run's ``run.close`` its ``pending`` question. Nothing is verified here
(``agentfootprint runs --pending`` lists, as ``runs`` does; ``verify`` judges): a listing
for the people who must answer, not evidence.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from agentfootprint.audit.sources import body_object

__all__ = ["OpenQuestion", "open_questions"]


@dataclass(frozen=True, slots=True, kw_only=True)
class OpenQuestion:
    """A paused run and the question it waits on (its ``run.close`` ``pending``, as recorded:
    under a redaction policy, its committed form)."""

    run_id: str
    conversation_id: str
    pending: dict[str, Any]
    #: runs that began answering it and never closed (``resume(..., retry=True)`` once gone)
    unclosed: tuple[str, ...] = ()


def open_questions(source: Any) -> Iterator[OpenQuestion]:
    """Every run of ``source`` (a store or a bundle) that closed ``paused`` and whose question
    no closed run of the source resumes or abandons (a child's ``run.open`` naming it and its
    ``request_id``), in the order the runs opened."""
    paused: dict[str, OpenQuestion] = {}
    continued: set[tuple[str, Any]] = set()  # (parent, the request its child names)
    began: dict[tuple[str, Any], list[str]] = {}  # the same, by children that never closed
    for run_id in source.run_ids():
        opened: dict[str, Any] = {}
        last = None  # the run's run.close row (read as the rows go: nothing kept but it)
        for row in source.read(run_id):
            if row.seq == 0:
                opened = body_object(row.body)
            elif row.type == "run.close":
                last = row
        parent = opened.get("parent")
        answers = opened.get("resumes", opened.get("abandons"))
        if isinstance(parent, dict) and isinstance(parent.get("run_id"), str) and answers:
            # (a plain continuation answers nothing)
            if last is not None:
                continued.add((parent["run_id"], answers))
            else:
                began.setdefault((parent["run_id"], answers), []).append(run_id)
        close = body_object(last.body) if last is not None else {}
        pending = close.get("pending")
        if close.get("outcome") == "paused" and isinstance(pending, dict):
            conversation = opened.get("conversation_id")
            paused[run_id] = OpenQuestion(
                run_id=run_id,
                conversation_id=conversation if isinstance(conversation, str) else "",
                pending=pending,
            )
    for run_id, question in paused.items():
        asked = (run_id, question.pending.get("request_id"))
        if asked not in continued:
            yield OpenQuestion(
                run_id=question.run_id,
                conversation_id=question.conversation_id,
                pending=question.pending,
                unclosed=tuple(began.get(asked, ())),
            )
