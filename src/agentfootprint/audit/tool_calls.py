"""Every tool call of a run, from the verified log alone: what was offered, decided, returned.

:func:`tool_calls` verifies the run first (as every read does), then folds its log once.
For each tool call of each model reply it gives the model call ``k`` whose reply asked for
it, the call's id, tool and arguments (as the reply recorded them), the tools offered at
that call (the names in ``served_at(k)["tools"]``, rebuilt from committed state), the
permission decision recorded for it (``agentfootprint.permission.check``: decision, by,
reason; None when no checker was asked), its result (the ``tool`` message the history
recorded, and whether it is an error; None when the run ended before the results were
written: a halt, a failure, a cancellation) and the teardowns recorded for it
(``agentfootprint.tools.session_closed`` / ``session_close_failed``).

Redacted values stay the commitments the log holds. The event kinds and the stage name are
the features' own (their event classes' ``kind``), never copies that could drift from them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from agentfootprint.audit.read import RunReader, Step
from agentfootprint.audit.sources import check_run_id, naming_run, opened
from agentfootprint.features.permission_checker import PermissionCheck
from agentfootprint.features.tool_dispatch import TOOL_CALLS_STAGE
from agentfootprint.features.tool_teardown import SessionClosed, SessionCloseFailed
from agentfootprint.verify.verifier import RowSource, shared_verifier

__all__ = ["ToolCallRecord", "tool_calls"]

#: a teardown event's kind -> the ``event`` name :attr:`ToolCallRecord.teardown` gives it
_TEARDOWNS = {
    SessionClosed.kind: "session_closed",
    SessionCloseFailed.kind: "session_close_failed",
}


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolCallRecord:
    """One tool call of a run, as its verified log records it."""

    call: int  #: the model call whose reply asked for it (``served_at(call)``)
    index: int  #: its position among that reply's tool calls
    tool_call_id: Any
    tool: Any
    arguments: Any
    #: the tool names served at ``call`` (what the model was offered), in served order
    offered: tuple[Any, ...]
    #: ``{"decision", "by", "reason"}`` recorded for it, or None (no checker asked)
    permission: dict[str, Any] | None
    #: the result the model read (None: the run ended before results were recorded)
    result: Any
    is_error: bool | None
    #: the teardown events recorded for it: ``{"event": "session_closed" | ..., ...}``
    teardown: tuple[dict[str, Any], ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        return {
            "call": self.call,
            "index": self.index,
            "tool_call_id": self.tool_call_id,
            "tool": self.tool,
            "arguments": self.arguments,
            "offered": list(self.offered),
            "permission": self.permission,
            "result": self.result,
            "is_error": self.is_error,
            "teardown": list(self.teardown),
        }


def _offered(request: dict[str, Any]) -> tuple[Any, ...]:
    tools = request.get("tools")
    if not isinstance(tools, list):
        return ()
    return tuple(t.get("name") if isinstance(t, dict) else t for t in tools)


class _Collector:
    """One pass over the run: the calls' offered tools, then each tool-calls commit."""

    def __init__(self) -> None:
        self.offered: list[tuple[Any, ...]] = []
        self.records: list[dict[str, Any]] = []
        self.checks: list[dict[str, Any]] = []  # permission events of the commit being read
        self.teardown: dict[Any, list[dict[str, Any]]] = {}
        self.history_before = 0

    def observe(self, step: Step, state: dict[str, Any]) -> None:
        if step.type == "event":
            name, payload = step.body.get("name"), step.body.get("payload")
            if not isinstance(payload, dict):
                return
            if name == PermissionCheck.kind:
                self.checks.append(payload)
            elif isinstance(name, str) and name in _TEARDOWNS:
                entry = {
                    "event": _TEARDOWNS[name],
                    **{k: v for k, v in payload.items() if k != "tool"},
                }
                self.teardown.setdefault(_key(payload.get("tool_call_id")), []).append(entry)
            return
        history = state.get("history")
        history = history if isinstance(history, list) else []
        if step.type == "run.open":
            self.history_before = len(history)
        if step.type != "commit":
            return
        if step.body.get("stage") == TOOL_CALLS_STAGE and self.offered:
            self._tool_calls(history[self.history_before :], state, "error" in step.body)
        self.checks = []
        self.history_before = len(history)

    def _tool_calls(self, appended: list[Any], state: dict[str, Any], failed: bool) -> None:
        assistant = appended[0] if appended and not failed else None
        served = assistant.get("tool_calls") if isinstance(assistant, dict) else None
        if not isinstance(served, list):  # no results written: the reply's own calls
            response = state.get("last_response")
            served = response.get("tool_calls") if isinstance(response, dict) else None
        calls = served if isinstance(served, list) else []
        results = appended[1:] if assistant is not None else []
        checks = {_key(c.get("tool_call_id")): c for c in self.checks}
        for index, raw in enumerate(calls):
            call = raw if isinstance(raw, dict) else {}
            message = results[index] if index < len(results) else None
            message = message if isinstance(message, dict) else None
            check = checks.get(_key(call.get("id")))
            self.records.append(
                {
                    "call": len(self.offered) - 1,
                    "index": index,
                    "tool_call_id": call.get("id"),
                    "tool": call.get("name"),
                    "arguments": call.get("arguments"),
                    "offered": self.offered[-1],
                    "permission": None
                    if check is None
                    else {k: check.get(k) for k in ("decision", "by", "reason")},
                    "result": None if message is None else message.get("content"),
                    "is_error": None if message is None else message.get("is_error", False),
                }
            )

    def finish(self) -> list[ToolCallRecord]:
        return [
            ToolCallRecord(
                **record,
                teardown=tuple(self.teardown.get(_key(record["tool_call_id"]), ())),
            )
            for record in self.records
        ]


def _key(value: Any) -> Any:
    """A hashable key of an id (a commitment, when redacted, is an object)."""
    return value if isinstance(value, str) else repr(value)


def tool_calls(source: RowSource | str | os.PathLike[str], run_id: str) -> list[ToolCallRecord]:
    """Every tool call of ``run_id``, in order, from its verified log alone.

    ``source``: a store or bundle, or the path of one (opened read-only for this call).
    Raises :class:`~agentfootprint.errors.VerificationError` when the run does not verify.
    """
    check_run_id(run_id)
    with opened(source) as rows, naming_run():
        shared_verifier(rows).verify(run_id)
        collector = _Collector()
        for request, _ in RunReader(rows).served_calls(run_id, collector.observe):
            collector.offered.append(_offered(request))
        return collector.finish()
