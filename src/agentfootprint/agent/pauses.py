"""A paused run as its caller sees it, and the checks on a person's answer.

A run that needs a person closes ``paused`` (docs/log-format.md section 5.9) and its
:class:`~agentfootprint.agent.agent.RunResult` carries :class:`Pending`: the question, as the
log records it, plus what only the caller may see (a consent URL). The answer goes to
``agent.resume(run, answer)``; it must be a JSON object, within the fields asked.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from agentfootprint.errors import CanonicalFormError, UsageError
from agentfootprint.logformat.canonical import check_ijson
from agentfootprint.runtime.events import detached
from agentfootprint.store.redaction import refuse_reserved_key

__all__ = ["Pending", "checked_answer"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Pending:
    """The question a paused run waits on (``RunResult.pending``)."""

    #: names the question in the conversation; ``resume`` answers it
    request_id: str
    #: ``"consent"`` (a person must authorize a service) or ``"input"`` (give values)
    kind: str
    #: the tool call the question holds up, and its tool
    tool_call_id: str
    tool: str
    #: what the person is asked
    question: str
    #: the values asked for (an ``"input"`` question): field name -> JSON Schema
    fields: dict[str, Any] | None = None
    #: what the host keeps with the question
    context: dict[str, Any] | None = None
    #: the service a consent is for
    service: str | None = None
    #: where the person authorizes the service (a consent): handed to the caller only,
    #: never recorded (None when the run was read back from the log)
    authorization_url: str | None = field(default=None, repr=False, compare=False)

    @classmethod
    def from_record(cls, record: Mapping[str, Any], private: Mapping[str, str]) -> Pending:
        """From the ``pending`` the run recorded (its live value) and the caller-only part."""
        return cls(
            request_id=record["request_id"],
            kind=record["kind"],
            tool_call_id=record["tool_call_id"],
            tool=record["tool"],
            question=record["question"],
            fields=detached(record["fields"]) if "fields" in record else None,
            context=detached(record["context"]) if "context" in record else None,
            service=record.get("service"),
            authorization_url=private.get("authorization_url"),
        )


def checked_answer(answer: Any, pending: Mapping[str, Any]) -> dict[str, Any]:
    """``answer`` as a resume records it: a JSON object (None: ``{}``, a consent given),
    whose members are among the question's ``fields`` when it asked for fields; else a
    :class:`UsageError` naming what is wrong."""
    if answer is None:
        answer = {}
    if not isinstance(answer, Mapping):
        raise UsageError(
            "resume() argument 'answer' must be a JSON object (a dict of the fields asked, "
            f"or None for a consent given), got {type(answer).__name__}",
            option="answer",
        )
    try:
        check_ijson(answer, ("answer",))
    except CanonicalFormError as exc:
        raise UsageError(f"resume() argument 'answer' cannot be recorded: {exc}") from exc
    refuse_reserved_key(answer, "answer")
    fields = pending.get("fields")
    if isinstance(fields, Mapping):
        unasked = sorted(str(name) for name in answer if name not in fields)
        if unasked:
            raise UsageError(
                f"resume() argument 'answer' holds fields the question did not ask for: "
                f"{unasked}; it asked for {sorted(fields)}",
                option="answer",
            )
    return detached(dict(answer))
