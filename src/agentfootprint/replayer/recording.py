"""What a recorded run received, read back for a replay: input, replies, tool results.

:class:`Recording` folds the original's log once and keeps what a replay answers with: the
input (both recorded forms), each call's reply, each reply's tool calls with the results the
original gave and whether it ran the tool, the receipts, and, given the disclosure vault, the
opened values and the salts of every commitment the run recorded (in log order).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from agentfootprint.audit.divergence import VAULT_HINT
from agentfootprint.audit.read import RunReader, Step
from agentfootprint.errors import ReplayDivergence
from agentfootprint.features.tool_dispatch import (
    RESUME_STAGE,
    TOOL_CALLS_STAGE,
    results_recorded,
)
from agentfootprint.features.turn import SEED_STAGE
from agentfootprint.logformat.calls import commit_calls
from agentfootprint.logformat.commitments import (
    COMMIT_KEY,
    Disclosure,
    is_commitment,
    iter_commitments,
    parse_json_container,
)
from agentfootprint.logformat.log_formats import LOG_FORMAT_V1
from agentfootprint.runtime.events import ArgsInvalid
from agentfootprint.runtime.provider import LLMResponse, ToolCall, Usage
from agentfootprint.runtime.run import ReplayInput
from agentfootprint.store.vault_base import Vault
from agentfootprint.verify.verifier import RowSource

__all__ = ["RecordedToolCall", "Recording", "holds_commitment", "ordered_commitments"]


@dataclass(frozen=True, kw_only=True, slots=True)
class RecordedToolCall:
    """One tool call of the recording and how the original answered it."""

    id: Any  #: a string, or a commitment when the policy names ``id`` (no vault)
    name: Any  #: likewise for ``name``
    arguments: Any  #: as the model sent them (from the recorded reply)
    content: Any
    is_error: bool | None  #: None: the flag is redacted (no vault)
    #: whether the original executed the tool (False: refused by argument validation, no
    #: such tool, arguments not JSON; None: cannot tell, the evidence is redacted)
    ran: bool | None
    #: the original paused at this call (log format v5): it has no result in this run
    paused: bool = False


class Recording:
    """What a recorded run received: its input, responses, tool results and receipts.

    With a disclosure ``vault``, the commitments in what the run received are opened (so
    the replay handles the values the original handled) and the salts of every commitment
    the run recorded are kept for the replay's boundary (:attr:`salts`).
    """

    def __init__(self, store: RowSource, run_id: str, *, vault: Vault | None = None):
        self.store = store
        self.run_id = run_id
        self.vault = vault
        self.message: ReplayInput | None = None
        self.responses: list[dict[str, Any] | None] = []
        #: per call, the tool calls of its reply as the original answered them (None: the
        #: original ran no tool of that reply, it ended the turn there)
        self.tool_calls: list[list[RecordedToolCall] | None] = []
        self.opened: dict[str, Any] = {}
        self.parent_run_id: str | None = None
        #: a run that answers its parent's pause (``run.open.resumes``): the answer its
        #: ``resume`` stage committed, and the tool calls of the paused batch it finished
        #: (from the paused call on), with the results it gave
        self.resumes: str | None = None
        self.answer: dict[str, Any] | None = None
        self.resumed: list[RecordedToolCall] | None = None
        #: the run's own clock as its caller gave it (``run(..., time=...)``), read back
        #: from the clock row the ``time`` option filed; None: not given
        self.time_input: dict[str, Any] | None = None
        self._paused_reply: Any = None
        self._paused_done = 0
        #: the ``pending`` of the state before the commit being read (a commit that writes
        #: it anew pauses the run: the fold replaces a written value, never mutates one)
        self._pending: Any = None
        #: commitments of the starting state (a continued run's inheritance)
        self.inherited: set[str] = set()
        #: disclosures of the commitments the run recorded, in the order it recorded them:
        #: its own first, then those it inherited and recorded again
        self.salts: list[Disclosure] = []
        self._inherited_salts: list[Disclosure] = []
        #: why a call the original made got no reply (its commit's error), by call
        self.failures: dict[int, str] = {}
        self._redacted = False
        self._seen: set[str] = set()
        self._history_before = 0
        self._events: list[dict[str, Any]] = []
        #: every recorded event's payload by kind, in log order (opened with the vault): a
        #: replay's deciders answer from them (:class:`~agentfootprint.runtime.ports.DecisionPort`)
        self.decisions: dict[str, list[Any]] = {}
        #: the original's log format (a replay records in it) and the receipts of the
        #: commit being read (they mark its model call)
        self.log_format: str = LOG_FORMAT_V1
        self._batch_receipts = 0
        self.reader = RunReader(store)
        # one pass over the folded log: (recorded request, receipt) per call, and the rest
        self.calls = list(self.reader.served_calls(run_id, observe=self._observe))
        # an inherited commitment recorded again (a fresh walk of a value the parent
        # committed, like a tool schema) comes after the run's own of the same key and value
        self.salts += self._inherited_salts

    def _reveal(self, value: Any) -> Any:
        return value if self.vault is None or not self._redacted else self.vault.reveal(value)

    def _observe(self, step: Step, state: dict[str, Any]) -> None:
        """One event of the original, with the state before it (after, for a marker)."""
        if self._redacted and self.vault is not None and step.type != "receipt":
            self._keep_salts(step.body)
        if step.type == "receipt":
            self._batch_receipts += 1
            return
        if step.type == "run.open":
            self.opened = step.body
            fmt = step.body.get("format")
            self.log_format = fmt if isinstance(fmt, str) else LOG_FORMAT_V1
            parent = step.body.get("parent")
            self.parent_run_id = parent["run_id"] if isinstance(parent, dict) else None
            self._redacted = step.body.get("policy") is not None
            if self._redacted:
                self.inherited = {digest for digest, _, _ in iter_commitments(state)}
            self._history_before = len(state.get("history", []))
            self._pending = state.get("pending")
            resumes = step.body.get("resumes")
            if isinstance(resumes, str):
                self.resumes = resumes
                self._paused_reply = self._reveal(copy.deepcopy(state.get("last_response")))
                self._paused_done = results_recorded(state.get("history", []))
            return
        if step.type == "event":
            self._events.append(step.body)
            name = step.body.get("name")
            if isinstance(name, str):
                self.decisions.setdefault(name, []).append(self._reveal(step.body.get("payload")))
            return
        if step.type != "commit":
            return
        stage = step.body["stage"]
        calls, self._batch_receipts = (
            commit_calls(self.log_format, step.body, self._batch_receipts),
            0,
        )
        if stage in (SEED_STAGE, RESUME_STAGE):
            self.time_input = _given_time(state.get("time_rows"), stage == RESUME_STAGE)
        if stage == SEED_STAGE:
            history = state.get("history", [])
            # the person's message the seed appended (after the "was not run" results of a
            # pause this turn abandons, which the seed appends first)
            first = next(
                (
                    m
                    for m in history[self._history_before :]
                    if isinstance(m, dict) and m.get("role") == "user"
                ),
                {},
            )
            self.message = ReplayInput(
                user_message=self._reveal(state.get("user_message")),
                content=self._reveal(first.get("content")),
            )
        elif calls:
            # answered unless the stage failed (a reply equal to the previous one rewrites
            # nothing, so the marker, not the state, tells)
            answered = "error" not in step.body and "last_response" in state
            if not answered:
                self.failures[len(self.responses)] = _failure(step.body.get("error"))
            response = state.get("last_response")
            self.responses.append(self._reveal(copy.deepcopy(response)) if answered else None)
            self.tool_calls.append(None)
        elif stage == RESUME_STAGE and self.resumes is not None:
            answer = self._reveal(copy.deepcopy(state.get("resume_answer")))
            self.answer = answer if isinstance(answer, dict) else None
        elif stage == TOOL_CALLS_STAGE and (self.tool_calls or self.resumed is None):
            appended = state.get("history", [])[self._history_before :]
            paused = state.get("pending") is not self._pending and "pending" in state
            if self.tool_calls:
                answers = self._answers(self.responses[-1], appended[1:], state, paused)
                self.tool_calls[-1] = answers
            elif self.resumes is not None:  # the paused batch, from the paused call on
                self.resumed = self._answers(
                    self._paused_reply, appended, state, paused, skip=self._paused_done
                )
        self._events = []
        self._history_before = len(state.get("history", []))
        self._pending = state.get("pending")

    def _keep_salts(self, body: Any) -> None:
        for digest in ordered_commitments(body):
            if digest in self._seen:
                continue
            self._seen.add(digest)
            assert self.vault is not None
            found = self.vault.get(digest)
            if found is not None and found.opens():
                inherited = digest in self.inherited
                (self._inherited_salts if inherited else self.salts).append(found)

    def _answers(
        self,
        reply: Any,
        appended: list[Any],
        state: dict[str, Any],
        paused: bool,
        *,
        skip: int = 0,
    ) -> list[RecordedToolCall]:
        """The tool calls of ``reply`` (from call ``skip`` on), in order, with the results
        the original gave (``appended``: the results its commit added to the history); with
        ``paused``, the call after them is where the original paused.

        The loop appends the assistant's turn and then one result per tool call, in the
        reply's order: results are taken by position (not by role, id or name, any of which
        a policy may have committed). Ids, names and arguments come from the recorded reply.
        """
        raw_calls = reply.get("tool_calls") if isinstance(reply, dict) else None
        calls = (raw_calls if isinstance(raw_calls, list) else [])[skip:]
        results = self._reveal(appended)
        findings = [
            payload
            for event in map(self._reveal, self._events)
            if isinstance(event, dict)
            and event.get("name") == ArgsInvalid.kind
            and isinstance(payload := event.get("payload"), dict)
        ]
        # one args_invalid event per call enforce refused, in call order; when their ids or
        # modes stay redacted, which error results were refusals cannot be told
        legible = all(
            isinstance(p.get("tool_call_id"), str) and isinstance(p.get("mode"), str)
            for p in findings
        )
        messages = [result if isinstance(result, dict) else {} for result in results]
        flags = [_error_flag(message) for message in messages]
        ids = [
            (calls[i].get("id") if i < len(calls) and isinstance(calls[i], dict) else None)
            or message.get("tool_call_id")
            for i, message in enumerate(messages)
        ]
        refusals = _refusals(
            [p for p in findings if p.get("mode") == "enforce"], ids, messages, flags
        )
        schemas = self._reveal(state.get("tool_schemas", []))
        names = [s.get("name") if isinstance(s, dict) else None for s in schemas]
        answers = []
        for i, message in enumerate(messages):
            raw = calls[i] if i < len(calls) and isinstance(calls[i], dict) else {}
            call_id = ids[i]
            name = raw.get("name", message.get("name"))
            arguments = raw.get("arguments")
            is_error = flags[i]
            ran: bool | None
            if i in refusals:
                ran = False
            elif is_error is not False and not legible:
                ran = None  # which error results were refusals cannot be told
            elif not all(isinstance(n, str) for n in [*names, name]):
                ran = None  # a tool name is redacted
            elif name not in names:
                ran = False
            elif isinstance(arguments, str):
                ran = _parses(arguments)
            else:
                ran = None if holds_commitment(arguments) else True
            answers.append(
                RecordedToolCall(
                    id=call_id,
                    name=name,
                    arguments=arguments,
                    content=message.get("content"),
                    is_error=is_error,
                    ran=ran,
                )
            )
        if paused and len(answers) < len(calls) and isinstance(calls[len(answers)], dict):
            raw = calls[len(answers)]
            answers.append(
                RecordedToolCall(
                    id=raw.get("id"),
                    name=raw.get("name"),
                    arguments=raw.get("arguments"),
                    content=None,
                    is_error=None,
                    ran=False,
                    paused=True,
                )
            )
        return answers

    def response(self, k: int) -> LLMResponse:
        if k >= len(self.responses) or self.responses[k] is None:
            failed = self.failures.get(k)
            why = (
                "which the recording does not have"
                if k >= len(self.responses)
                else "which failed in the original (nothing to answer it with; the calls "
                f"before it matched): {failed}"
            )
            raise ReplayDivergence(
                f"replay of run {self.run_id} asked for call {k}, {why}",
                call=k,
                kind="calls",
                original_run=self.run_id,
            )
        recorded = self.responses[k]
        assert recorded is not None
        redacted = _redacted_reply_structure(recorded)
        if redacted is not None:
            raise ReplayDivergence(
                f"call {k}: the recorded reply's {redacted} is redacted, so the reply cannot be "
                "rebuilt; " + VAULT_HINT,
                call=k,
                kind="redacted",
                original_run=self.run_id,
            )
        return LLMResponse(
            content=recorded["content"],
            tool_calls=tuple(
                ToolCall(id=c["id"], name=c["name"], arguments=c["arguments"])
                for c in recorded["tool_calls"]
            ),
            usage=Usage(
                input=recorded["usage"]["input"],
                output=recorded["usage"]["output"],
                cache_read=recorded["usage"].get("cache_read"),
                cache_write=recorded["usage"].get("cache_write"),
            ),
            stop_reason=recorded["stop_reason"],
        )


def _redacted_reply_structure(reply: dict[str, Any]) -> str | None:
    """What of a recorded reply the loop needs as plain values is a commitment, if any."""
    calls = reply.get("tool_calls")
    if not isinstance(calls, list):
        return "tool_calls"
    for call in calls:
        if not isinstance(call, dict):
            return "tool call"
        for field in ("id", "name"):
            if not isinstance(call.get(field), str):
                return f"tool call {field}"
    usage = reply.get("usage")
    if not isinstance(usage, dict) or not all(
        type(usage.get(field)) is int for field in ("input", "output")
    ):
        return "usage"
    return None


def ordered_commitments(value: Any) -> Iterator[str]:
    """The commitments in ``value`` in the order a boundary creates them (members by sorted
    name, depth first; JSON text inside strings included). Walked with a stack of (lazy)
    iterators, however deep the value."""
    stack: list[Iterator[Any]] = [iter((value,))]
    while stack:
        item = next(stack[-1], _END)
        if item is _END:
            stack.pop()
            continue
        kind = type(item)
        if kind is dict:
            if is_commitment(item):
                yield item[COMMIT_KEY]
            else:
                stack.append(map(item.__getitem__, sorted(item)))
        elif kind is list:
            stack.append(iter(item))
        elif kind is str and COMMIT_KEY in item:
            inner = parse_json_container(item)
            if inner is not None:
                stack.append(iter((inner,)))


_END: Any = object()


def _error_flag(message: dict[str, Any]) -> bool | None:
    """A tool message's ``is_error`` (absent: False; a commitment left closed: None)."""
    flag = message.get("is_error", False)
    return flag if isinstance(flag, bool) else None


def _refusals(
    findings: list[dict[str, Any]],
    ids: list[Any],
    messages: list[dict[str, Any]],
    flags: list[bool | None],
) -> set[int]:
    """Which results were refused by ``enforce``: each finding (in call order) goes to the
    next error result with its id; among several, the one whose text names its issues (a
    tool that raised may share the id of a refused call)."""
    refused: set[int] = set()
    start = 0
    for finding in findings:
        candidates = [
            i
            for i in range(start, len(messages))
            if ids[i] == finding.get("tool_call_id") and flags[i] is not False
        ]
        if not candidates:
            continue
        issues = [i.get("message") for i in finding.get("issues") or [] if isinstance(i, dict)]
        named = [
            i
            for i in candidates
            if isinstance(messages[i].get("content"), str)
            and all(isinstance(m, str) and m in messages[i]["content"] for m in issues)
        ]
        chosen = (named or candidates)[0]
        refused.add(chosen)
        start = chosen + 1
    return refused


def _failure(error: Any) -> str:
    """A recorded error record, as a line (its type, and its message when not redacted)."""
    if not isinstance(error, dict):
        return "no error was recorded"
    message = error.get("message")
    text = str(error.get("type", "error"))
    return f"{text}: {message}" if isinstance(message, str) else text


def _given_time(rows: Any, resuming: bool) -> dict[str, Any] | None:
    """What the caller gave the run as its clock, from the row its first stage filed (the
    turn's ``clock``, or a resume's ``clock-on-resume``)."""
    wanted = "clock-on-resume" if resuming else "clock"
    row = next(
        (
            r
            for r in reversed(rows if isinstance(rows, list) else [])
            if isinstance(r, dict) and r.get("row") == wanted
        ),
        None,
    )
    if row is None:
        return None
    given: dict[str, Any] = {}
    if row.get("now_source") == "run":
        given["now"] = row.get("now")
    if (row.get("zone_source") == "run") if not resuming else ("zone" in row):
        given["zone"] = row.get("zone")
    return given or None


def holds_commitment(value: Any) -> bool:
    return next(ordered_commitments(value), None) is not None


def _parses(text: str) -> bool:
    try:
        orjson.loads(text)
    except orjson.JSONDecodeError:
        return False
    return True
