"""A run's spans after the fact, from its verified log: the reference exporter.

The run is verified first (a run that does not verify gives no spans: the
:class:`~agentfootprint.errors.VerificationError`), then folded once. Every fact comes from
its rows: the run from ``run.open`` and ``run.close``, each call's model and temperature from
the request rebuilt from committed state, its request digest from its receipt, its usage and
stop reason from the reply its commit wrote, each tool call from
:func:`~agentfootprint.audit.tool_calls.tool_calls`; every time from the rows' ``ts`` (unix
milliseconds), so the same log always gives the same spans. The run span carries the
verifier's outcome, which only the log can give.

Times: the run from its ``run.open`` to its ``run.close`` (or its last row, never closed);
a call from its receipt (written before the request left) to its commit; a reply's tool
calls from the commit before their ``tool-calls`` commit to that commit (the rows time
batches, not each tool).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from agentfootprint.audit.read import RunReader, Step
from agentfootprint.audit.sources import check_run_id, naming_run, opened
from agentfootprint.audit.tool_calls import ToolCallRecord, tool_calls
from agentfootprint.features.tool_dispatch import TOOL_CALLS_STAGE
from agentfootprint.logformat.calls import commit_calls
from agentfootprint.otel.mapping import (
    INCOMPLETE,
    OTHER_ERROR,
    TOOL_ERROR,
    CallFacts,
    RunFacts,
    SpanDescription,
    ToolFacts,
    run_spans,
    text,
)
from agentfootprint.runtime.events import detached
from agentfootprint.verify.verifier import RowSource, Verifier, shared_verifier

__all__ = ["error_type", "spans_from_log", "trace_from_log"]

_NS = 1_000_000  # a row's ts is in milliseconds


def error_type(record: Any) -> str | None:
    """``error.type`` of a recorded error (``{"type", ...}``): its type, or the conventions'
    fallback when the type is not a string (a policy committed it); None: no error."""
    if record is None:
        return None
    kind = record.get("type") if isinstance(record, dict) else None
    return kind if isinstance(kind, str) and kind else OTHER_ERROR


@dataclass(slots=True)
class _Call:
    start: int
    end: int
    usage: dict[str, int] | None = None
    finish_reason: str | None = None
    error: str | None = None
    reply: dict[str, Any] | None = None


@dataclass(slots=True)
class _Walk:
    """What one pass over the run's events gathers (``observe`` sees each event with the
    state before it, so a commit marker sees its own writes applied)."""

    ts: Mapping[int, int]
    content: bool
    log_format: str = ""
    opened: dict[str, Any] = field(default_factory=dict)
    open_ts: int = 0
    last_ts: int = 0
    close: dict[str, Any] | None = None
    calls: list[_Call] = field(default_factory=list)
    #: the receipts of the batch being read (their ts), and the commits that wrote a reply
    receipts: list[int] = field(default_factory=list)
    replied: set[int] = field(default_factory=set)
    marker_ts: int | None = None
    #: per call: the (start, end) ts of the commit that ran its reply's tool calls
    batches: dict[int, tuple[int, int]] = field(default_factory=dict)

    def observe(self, step: Step, state: dict[str, Any]) -> None:
        ts = self.ts.get(step.seq, self.last_ts)
        self.last_ts = max(self.last_ts, ts)
        body = step.body
        if step.type == "run.open":
            self.opened, self.open_ts = body, ts
            self.log_format = str(body.get("format", ""))
        elif step.type == "receipt":
            self.receipts.append(ts)
        elif step.type == "write":
            if body.get("path") == "last_response":
                self.replied.add(step.commit)
        elif step.type == "commit":
            self._commit(step, state, ts)
        elif step.type == "run.close":
            self.close = body

    def _commit(self, step: Step, state: dict[str, Any], ts: int) -> None:
        body = step.body
        made = commit_calls(self.log_format, body, len(self.receipts))
        before = self.marker_ts if self.marker_ts is not None else ts
        for index in range(made):
            start = self.receipts[index] if index < len(self.receipts) else before
            call = _Call(start=start, end=ts, error=error_type(body.get("error")))
            reply = state.get("last_response") if step.commit in self.replied else None
            if isinstance(reply, dict):
                usage = reply.get("usage")
                call.usage = detached(usage) if isinstance(usage, dict) else None
                reason = reply.get("stop_reason")
                call.finish_reason = reason if isinstance(reason, str) else None
                call.reply = detached(reply) if self.content else None
            self.calls.append(call)
        if body.get("stage") == TOOL_CALLS_STAGE and self.calls:
            self.batches.setdefault(len(self.calls) - 1, (before, ts))
        self.receipts = []
        self.marker_ts = ts

    def finish(self) -> None:
        """Receipts no commit closed (the log ends after a call's write-ahead): calls with
        no end on the record."""
        for start in self.receipts:
            self.calls.append(_Call(start=start, end=self.last_ts, error=INCOMPLETE))
        self.receipts = []


def trace_from_log(
    source: RowSource | str | os.PathLike[str],
    run_id: str,
    *,
    keys: Iterable[Any] = (),
    content: bool = False,
) -> tuple[RunFacts, list[CallFacts], list[ToolFacts]]:
    """The facts of ``run_id``'s spans, from its verified log.

    ``source``: a store or bundle, or the path of one (opened read-only for this call).
    ``keys``: public keys to pin (as ``verify --key``): a run sealed by one is ``VALID``.
    Raises :class:`~agentfootprint.errors.VerificationError` when the run does not verify.
    """
    check_run_id(run_id)
    with opened(source) as rows, naming_run():
        pinned = tuple(keys)
        # the read side's verifier (ancestors verified once per source) unless keys are pinned
        verifier = Verifier(rows, trusted_keys=pinned) if pinned else shared_verifier(rows)
        verified = verifier.verify(run_id)
        ts = {row.seq: row.ts for row in rows.read(run_id)}
        walk = _Walk(ts=ts, content=content)
        served: list[tuple[dict[str, Any], str | None]] = []
        for request, receipt in RunReader(rows, verifier=verifier).served_calls(
            run_id, walk.observe
        ):
            kept = {
                "model": request.get("model"),
                "params": request.get("params"),
                **(
                    {
                        "messages": detached(request["messages"]),
                        "system": detached(request["system"]),
                    }
                    if content
                    else {}
                ),
            }
            served.append((kept, None if receipt is None else receipt.request))
        walk.finish()
        records = tool_calls(rows, run_id)
    run = _run_facts(walk, verified.outcome.value, run_id, verified.conversation_id)
    calls = [_call_facts(k, call, served, content) for k, call in enumerate(walk.calls)]
    tools = [_tool_facts(r, calls, walk.batches) for r in records]
    return run, calls, tools


def spans_from_log(
    source: RowSource | str | os.PathLike[str],
    run_id: str,
    *,
    keys: Iterable[Any] = (),
    content: bool = False,
) -> list[SpanDescription]:
    """``run_id``'s spans, from its verified log (:func:`trace_from_log`), as descriptions:
    deterministic, ids included. ``content``: add the content attributes (committed forms)."""
    run, calls, tools = trace_from_log(source, run_id, keys=keys, content=content)
    return run_spans(run, calls, tools, content=content)


def _run_facts(walk: _Walk, verified: str, run_id: str, conversation_id: str) -> RunFacts:
    opened_body = walk.opened
    agent = opened_body.get("agent")
    agent = agent if isinstance(agent, dict) else {}
    close = walk.close
    outcome = close.get("outcome") if close is not None else None
    failed = outcome == "failed"
    return RunFacts(
        run_id=run_id,
        conversation_id=conversation_id,
        agent_id=None if agent.get("id") is None else text(agent["id"]),
        agent_name=None if agent.get("name") is None else text(agent["name"]),
        provider=text(opened_body.get("provider", "unknown")),
        model=text(opened_body.get("model", "")),
        start_ns=walk.open_ts * _NS,
        end_ns=walk.last_ts * _NS,
        outcome=outcome if isinstance(outcome, str) else None,
        error=(error_type(close.get("error")) or OTHER_ERROR) if failed and close else None,
        verified=verified,
    )


def _call_facts(
    k: int, call: _Call, served: list[tuple[dict[str, Any], str | None]], content: bool
) -> CallFacts:
    request, digest = served[k] if k < len(served) else ({}, None)
    params = request.get("params")
    temperature = params.get("temperature") if isinstance(params, dict) else None
    return CallFacts(
        call=k,
        model=text(request.get("model", "")),
        start_ns=call.start * _NS,
        end_ns=call.end * _NS,
        request_digest=digest,
        temperature=temperature if isinstance(temperature, int | float) else None,
        usage=call.usage,
        finish_reason=call.finish_reason,
        error=call.error,
        messages=request.get("messages") if content else None,
        system=request.get("system") if content else None,
        reply=call.reply,
    )


def _tool_facts(
    record: ToolCallRecord, calls: list[CallFacts], batches: Mapping[int, tuple[int, int]]
) -> ToolFacts:
    if record.is_error is None:
        error: str | None = INCOMPLETE  # the run ended before its result was recorded
    else:
        error = TOOL_ERROR if record.is_error else None
    if record.call in batches:
        start, end = (ts * _NS for ts in batches[record.call])
    else:  # no tool-calls commit after its call (the run ended first): at the call's end
        asked = calls[record.call] if 0 <= record.call < len(calls) else None
        start = end = asked.end_ns if asked is not None else 0
    return ToolFacts(
        call=record.call,
        index=record.index,
        tool=record.tool,
        tool_call_id=record.tool_call_id,
        start_ns=start,
        end_ns=end,
        error=error,
        arguments=record.arguments,
        result=record.result,
        has_content=True,
    )
