"""The one mapping from a run's facts to OpenTelemetry GenAI spans, as plain data.

Both exporters go through it: the after-the-fact one (:mod:`agentfootprint.otel.from_log`)
reads the facts from a verified log, the live one (:mod:`agentfootprint.otel.live`) from the
events a listener is handed; each then hands the :class:`SpanDescription` s this module makes
to the one emitter (:mod:`agentfootprint.otel.emit`). Nothing here imports OpenTelemetry, reads
a clock or draws a random number: the same facts give the same spans, ids included, so a
run exported twice from its log gives the same trace twice.

The names are those of the GenAI semantic conventions pinned in :data:`SEMCONV_VERSION`
(Development status there: an instrumentation pins a version and says so in its schema URL),
plus three of agentfootprint's own: the run, the receipt's request digest and, after the
fact, the verifier's outcome. docs/otel.md is the table.

Content (``gen_ai.input.messages``, ``gen_ai.output.messages``, ``gen_ai.system_instructions``,
``gen_ai.tool.call.arguments`` / ``result``) is opt-in, and is only ever the committed form a
fact holds: what the log recorded (or a listener was handed), redacted values as their
commitments.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from agentfootprint.logformat.canonical import canon
from agentfootprint.logformat.shared_lists import as_list

__all__ = [
    "SCHEMA_URL",
    "SEMCONV_VERSION",
    "CallFacts",
    "RunFacts",
    "SpanDescription",
    "ToolFacts",
    "agent_span",
    "chat_span",
    "run_spans",
    "span_id_of",
    "tool_span",
    "trace_id_of",
]

#: the GenAI semantic conventions these spans follow (the last release of the main
#: semantic-conventions repository that holds them; later ones moved them out)
SEMCONV_VERSION = "1.41.0"
SCHEMA_URL = f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}"

# -- attribute names (GenAI semantic conventions, SEMCONV_VERSION) ---------------------------
OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
REQUEST_MODEL = "gen_ai.request.model"
REQUEST_TEMPERATURE = "gen_ai.request.temperature"
CONVERSATION_ID = "gen_ai.conversation.id"
AGENT_ID = "gen_ai.agent.id"
AGENT_NAME = "gen_ai.agent.name"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
CACHE_READ_TOKENS = "gen_ai.usage.cache_read.input_tokens"
CACHE_CREATION_TOKENS = "gen_ai.usage.cache_creation.input_tokens"
FINISH_REASONS = "gen_ai.response.finish_reasons"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
ERROR_TYPE = "error.type"
# content (opt-in), as JSON text: the SDK takes no structured attribute values
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"
TOOL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_RESULT = "gen_ai.tool.call.result"
# agentfootprint's own
RUN_ID = "agentfootprint.run_id"
CALL = "agentfootprint.call"
RECEIPT_REQUEST = "agentfootprint.receipt.request"
RUN_OUTCOME = "agentfootprint.run.outcome"
VERIFY_OUTCOME = "agentfootprint.verify.outcome"

#: every content attribute (what ``content=False`` leaves out)
CONTENT_ATTRIBUTES = frozenset(
    {INPUT_MESSAGES, OUTPUT_MESSAGES, SYSTEM_INSTRUCTIONS, TOOL_ARGUMENTS, TOOL_RESULT}
)

#: ``error.type`` of a tool call whose result is an error (it raised, its arguments were
#: refused, permission was denied), and of a call or run that has no end on the record
TOOL_ERROR = "tool_error"
INCOMPLETE = "incomplete"
#: ``error.type`` when the recorded error names no type (the semantic conventions' fallback)
OTHER_ERROR = "_OTHER"

AttributeValue = str | bool | int | float | tuple[str, ...]


@dataclass(frozen=True, kw_only=True, slots=True)
class RunFacts:
    """One run, as its ``run.open`` and ``run.close`` (or the turn's events) give it."""

    run_id: str
    #: None: not known (a live run whose ``turn_start`` a deferred delivery dropped)
    conversation_id: str | None
    agent_id: str | None
    agent_name: str | None
    provider: str
    model: str
    start_ns: int
    end_ns: int
    #: ``answered``, ``stopped_early``, ``failed``, ``paused``; None while unknown (a run
    #: that never closed, a live run without its ``turn_end``)
    outcome: str | None = None
    #: ``error.type``: the recorded error's type for a failed run
    error: str | None = None
    #: the verifier's outcome (``VALID``, ``VALID_UNSIGNED``, ``UNSEALED``): after the fact only
    verified: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class CallFacts:
    """One model call: its served request's model and temperature, its receipt's request
    digest, the reply's usage and stop reason (None where the record has none)."""

    call: int
    model: str
    start_ns: int
    end_ns: int
    request_digest: str | None = None
    temperature: float | None = None
    usage: Mapping[str, int] | None = None
    finish_reason: str | None = None
    error: str | None = None
    #: committed forms, for the content attributes: the served messages and system pieces
    #: (after the fact only) and the reply (``content``, ``tool_calls``); None: not known
    messages: Sequence[Any] | None = None
    system: Sequence[Any] | None = None
    reply: Mapping[str, Any] | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolFacts:
    """One tool call: which model call asked for it, its name and id, how it ended."""

    call: int | None
    index: int
    tool: Any
    tool_call_id: Any
    start_ns: int
    end_ns: int
    error: str | None = None
    #: committed forms, for the content attributes (``has_content`` False: not known)
    arguments: Any = None
    result: Any = None
    has_content: bool = False


@dataclass(frozen=True, kw_only=True, slots=True)
class SpanDescription:
    """One span, as data: what the emitter makes an OpenTelemetry span of."""

    run_id: str
    #: this span's place in the run (``run``, ``call/<k>``, ``tool/<k>/<i>``), and its parent's
    key: str
    parent: str | None
    name: str
    #: ``internal`` or ``client`` (the semantic conventions' span kind)
    kind: str
    start_ns: int
    end_ns: int
    attributes: dict[str, AttributeValue] = field(default_factory=dict)
    #: ``error.type`` when the operation ended in an error (the span's status is ERROR)
    error: str | None = None

    @property
    def trace_id(self) -> int:
        """The run's trace id (:func:`trace_id_of`)."""
        return trace_id_of(self.run_id)

    @property
    def span_id(self) -> int:
        """This span's id (:func:`span_id_of`: from the run id and the key)."""
        return span_id_of(self.run_id, self.key)

    @property
    def parent_span_id(self) -> int | None:
        return None if self.parent is None else span_id_of(self.run_id, self.parent)

    def to_json(self) -> dict[str, Any]:
        """The span as one JSON object (``agentfootprint otel --json``): ids in hex."""
        return {
            "name": self.name,
            "kind": self.kind,
            "trace_id": f"{self.trace_id:032x}",
            "span_id": f"{self.span_id:016x}",
            "parent_span_id": None
            if self.parent_span_id is None
            else f"{self.parent_span_id:016x}",
            "start_time_unix_nano": self.start_ns,
            "end_time_unix_nano": self.end_ns,
            "status": "ERROR" if self.error is not None else "UNSET",
            "attributes": {
                k: list(v) if isinstance(v, tuple) else v for k, v in self.attributes.items()
            },
        }


def _id(domain: str, *parts: str, size: int) -> int:
    digest = hashlib.sha256(
        b"\x00".join([f"agentfootprint/otel/{domain}".encode(), *(p.encode() for p in parts)])
    ).digest()
    return int.from_bytes(digest[:size], "big") or 1  # an all-zero id is invalid in OTel


def trace_id_of(run_id: str) -> int:
    """The trace id of a run's spans: from the run id alone, so exporting again repeats it."""
    return _id("trace", run_id, size=16)


def span_id_of(run_id: str, key: str) -> int:
    """The span id of the span ``key`` of a run."""
    return _id("span", run_id, key, size=8)


def text(value: Any) -> str:
    """An attribute's string: a string as it is, anything else (a commitment, where the
    policy redacted the value) as its canonical JSON."""
    return value if isinstance(value, str) else json_text(value)


def json_text(value: Any) -> str:
    """``value`` as JSON text: canonical (RFC 8785) when it is I-JSON, else orjson's."""
    try:
        return canon(value).decode("utf-8")
    except (ValueError, TypeError):
        return orjson.dumps(value, default=_plain, option=orjson.OPT_SORT_KEYS).decode("utf-8")


def _plain(value: Any) -> Any:
    listed = as_list(value)
    return listed if listed is not value else type(value).__name__


def _base(run: RunFacts, key: str, parent: str | None) -> dict[str, Any]:
    return {"run_id": run.run_id, "key": key, "parent": parent}


def agent_span(run: RunFacts) -> SpanDescription:
    """``invoke_agent {gen_ai.agent.name}``: the run (the semantic conventions' internal
    agent span: the agent runs in this process)."""
    attributes: dict[str, AttributeValue] = {OPERATION: "invoke_agent", PROVIDER: run.provider}
    if run.agent_id is not None:
        attributes[AGENT_ID] = run.agent_id
    if run.agent_name is not None:
        attributes[AGENT_NAME] = run.agent_name
    if run.conversation_id is not None:
        attributes[CONVERSATION_ID] = run.conversation_id
    attributes[REQUEST_MODEL] = run.model
    attributes[RUN_ID] = run.run_id
    if run.outcome is not None:
        attributes[RUN_OUTCOME] = run.outcome
    if run.error is not None:
        attributes[ERROR_TYPE] = run.error
    if run.verified is not None:
        attributes[VERIFY_OUTCOME] = run.verified
    name = f"invoke_agent {run.agent_name}" if run.agent_name else "invoke_agent"
    return SpanDescription(
        **_base(run, "run", None),
        name=name,
        kind="internal",
        start_ns=run.start_ns,
        end_ns=max(run.start_ns, run.end_ns),
        attributes=attributes,
        error=run.error,
    )


def chat_span(run: RunFacts, call: CallFacts, *, content: bool = False) -> SpanDescription:
    """``chat {gen_ai.request.model}``: one model call, a child of the run's span."""
    attributes: dict[str, AttributeValue] = {
        OPERATION: "chat",
        PROVIDER: run.provider,
        REQUEST_MODEL: call.model,
    }
    if run.conversation_id is not None:
        attributes[CONVERSATION_ID] = run.conversation_id
    attributes[RUN_ID] = run.run_id
    attributes[CALL] = call.call
    if call.request_digest is not None:
        attributes[RECEIPT_REQUEST] = call.request_digest
    if call.temperature is not None:
        attributes[REQUEST_TEMPERATURE] = float(call.temperature)
    if call.usage is not None:
        for key, name in (
            ("input", INPUT_TOKENS),
            ("output", OUTPUT_TOKENS),
            ("cache_read", CACHE_READ_TOKENS),
            ("cache_write", CACHE_CREATION_TOKENS),
        ):
            count = call.usage.get(key)
            if type(count) is int:
                attributes[name] = count
    if call.finish_reason is not None:
        attributes[FINISH_REASONS] = (call.finish_reason,)
    if call.error is not None:
        attributes[ERROR_TYPE] = call.error
    if content:
        if call.system:  # (a request without system pieces has no instructions)
            attributes[SYSTEM_INSTRUCTIONS] = json_text(
                [{"type": "text", "content": _piece_text(p)} for p in call.system]
            )
        if call.messages is not None:
            attributes[INPUT_MESSAGES] = json_text([chat_message(m) for m in call.messages])
        if call.reply is not None:
            attributes[OUTPUT_MESSAGES] = json_text(
                [output_message(call.reply, call.finish_reason)]
            )
    return SpanDescription(
        **_base(run, f"call/{call.call}", "run"),
        name=f"chat {call.model}",
        kind="client",
        start_ns=call.start_ns,
        end_ns=max(call.start_ns, call.end_ns),
        attributes=attributes,
        error=call.error,
    )


def tool_span(run: RunFacts, tool: ToolFacts, *, content: bool = False) -> SpanDescription:
    """``execute_tool {gen_ai.tool.name}``: one tool call, a child of the run's span."""
    name = text(tool.tool)
    attributes: dict[str, AttributeValue] = {
        OPERATION: "execute_tool",
        TOOL_NAME: name,
        TOOL_CALL_ID: text(tool.tool_call_id),
        RUN_ID: run.run_id,
    }
    if tool.call is not None:
        attributes[CALL] = tool.call
    if tool.error is not None:
        attributes[ERROR_TYPE] = tool.error
    if content and tool.has_content:
        attributes[TOOL_ARGUMENTS] = json_text(tool.arguments)
        if tool.result is not None:  # a text result as it is, a commitment as its JSON
            attributes[TOOL_RESULT] = text(tool.result)
    call = "-" if tool.call is None else str(tool.call)
    return SpanDescription(
        **_base(run, f"tool/{call}/{tool.index}", "run"),
        name=f"execute_tool {name}",
        kind="internal",
        start_ns=tool.start_ns,
        end_ns=max(tool.start_ns, tool.end_ns),
        attributes=attributes,
        error=tool.error,
    )


def run_spans(
    run: RunFacts,
    calls: Sequence[CallFacts],
    tools: Sequence[ToolFacts],
    *,
    content: bool = False,
) -> list[SpanDescription]:
    """Every span of a run: its ``invoke_agent`` first, then each call's ``chat`` followed by
    the ``execute_tool`` of each tool call its reply asked for."""
    by_call: dict[int | None, list[ToolFacts]] = {}
    for tool in tools:
        by_call.setdefault(tool.call, []).append(tool)
    spans = [agent_span(run)]
    for call in calls:
        spans.append(chat_span(run, call, content=content))
        spans.extend(tool_span(run, t, content=content) for t in by_call.pop(call.call, ()))
    for rest in by_call.values():  # tool calls no recorded call asked for (none in practice)
        spans.extend(tool_span(run, t, content=content) for t in rest)
    return spans


# -- content: the semantic conventions' message shapes over committed forms -------------------


def _piece_text(piece: Any) -> Any:
    """A served system piece's text (a commitment, or a piece committed whole, as it is)."""
    return piece["text"] if isinstance(piece, dict) and "text" in piece else piece


def chat_message(message: Any) -> dict[str, Any]:
    """A served history message as the conventions' ``ChatMessage`` (``role``, ``parts``).
    A value the policy committed stays its commitment; a message committed whole is one
    text part holding the commitment."""
    if not isinstance(message, dict) or "role" not in message:
        return {"role": "unknown", "parts": [{"type": "text", "content": message}]}
    role = message.get("role")
    parts: list[dict[str, Any]] = []
    content = message.get("content")
    if role == "tool":
        parts.append(
            {"type": "tool_call_response", "id": message.get("tool_call_id"), "response": content}
        )
    else:
        if content not in (None, ""):
            parts.append({"type": "text", "content": content})
        parts.extend(_call_parts(message.get("tool_calls")))
    return {"role": role, "parts": parts}


def output_message(reply: Mapping[str, Any], finish_reason: str | None) -> dict[str, Any]:
    """A recorded reply as the conventions' ``OutputMessage``."""
    parts: list[dict[str, Any]] = []
    content = reply.get("content")
    if content not in (None, ""):
        parts.append({"type": "text", "content": content})
    parts.extend(_call_parts(reply.get("tool_calls")))
    message: dict[str, Any] = {"role": "assistant", "parts": parts}
    if finish_reason is not None:
        message["finish_reason"] = finish_reason
    return message


def _call_parts(calls: Any) -> list[dict[str, Any]]:
    if not isinstance(calls, list | tuple):
        return []
    parts = []
    for call in calls:
        if isinstance(call, dict) and "name" in call:
            parts.append(
                {
                    "type": "tool_call",
                    "id": call.get("id"),
                    "name": call.get("name"),
                    "arguments": call.get("arguments"),
                }
            )
        else:  # a call the policy committed whole
            parts.append({"type": "tool_call", "name": call})
    return parts
