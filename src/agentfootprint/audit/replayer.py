"""Replay: re-execute a recorded run with new code, no model call, stop at the first change.

``replay(agent, store, run_id)`` runs ``agent`` (its current code and configuration) on
the recorded run's input. A replay provider answers call ``k`` with the response the
original received at call ``k``; each tool call is answered with its recorded result (no
tool runs). Before each call the request the new code built is hashed and compared with
the original's receipt ``k``, piece by piece: the first difference raises
:class:`ReplayDivergence` naming the call, the piece and both digests, with a unified diff
of the recorded content from both logs. The replay is itself a recorded run (``run.open``
names ``replay_of``), closed as failed when it diverged.

``replay(..., until=k)`` forks: calls before ``k`` are replayed and checked, call ``k``
onward goes to the agent's own provider and tools, and ``run.open`` names ``fork_of``.

What legitimately differs between a run and its unchanged replay: the run id, the ``ts``
of every row, and ``run.open`` (which names the run and what it replays). Receipts and
write values are byte-identical (see ``same_recording``).
"""

from __future__ import annotations

import copy
import difflib
import itertools
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from agentfootprint.audit.read import Receipt, RunReader, _Step
from agentfootprint.core.events import ArgsInvalid
from agentfootprint.core.providers.base import LLMResponse, ToolCall, Usage
from agentfootprint.core.run import ReplayInput
from agentfootprint.errors import ReplayDivergence, UsageError
from agentfootprint.store.base import EventStore, StoredEvent
from agentfootprint.store.redaction import ReplayCommitments
from agentfootprint.store.vault import DisclosureVault, open_vault
from agentfootprint.verify.canonical import canon, parse
from agentfootprint.verify.commitments import (
    COMMIT_KEY,
    Disclosure,
    is_commitment,
    iter_commitments,
    parse_json_container,
)
from agentfootprint.verify.request import PIECE_KINDS, RequestDigests
from agentfootprint.verify.verifier import Row, RowSource, shared_verifier

if TYPE_CHECKING:
    from agentfootprint.core.agent import Agent, RunResult

__all__ = [
    "RecordedToolCall",
    "Recording",
    "ReplayResult",
    "copy_ancestry",
    "replay",
    "replay_sync",
]


@dataclass(frozen=True, kw_only=True, slots=True)
class ReplayResult:
    """A replay that matched the recording call for call."""

    original_run: str
    result: RunResult
    calls_checked: int
    forked_at: int | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class RecordedToolCall:
    """One tool call of the recording and how the original answered it."""

    id: Any  #: a string, or a commitment when the policy names ``id`` (no vault)
    name: Any  #: likewise for ``name``
    arguments: Any  #: as the model sent them (from the recorded reply)
    content: Any
    is_error: bool
    #: whether the original executed the tool (False: refused by argument validation, no
    #: such tool, arguments not JSON; None: cannot tell, the evidence is redacted)
    ran: bool | None


class Recording:
    """What a recorded run received: its input, responses, tool results and receipts.

    With a disclosure ``vault``, the commitments in what the run received are opened (so
    the replay handles the values the original handled) and the salts of every commitment
    the run recorded are kept for the replay's boundary (:attr:`salts`).
    """

    def __init__(self, store: RowSource, run_id: str, *, vault: DisclosureVault | None = None):
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
        #: commitments of the starting state (a continued run's inheritance)
        self.inherited: set[str] = set()
        #: disclosures of the commitments the run recorded, in the order it recorded them:
        #: its own first, then those it inherited and recorded again
        self.salts: list[Disclosure] = []
        self._inherited_salts: list[Disclosure] = []
        #: why a call the original made got no reply (its call-llm commit's error), by call
        self.failures: dict[int, str] = {}
        self._redacted = False
        self._seen: set[str] = set()
        self._history_before = 0
        self._events: list[dict[str, Any]] = []
        self.reader = RunReader(store)
        # one pass over the folded log: (recorded request, receipt) per call, and the rest
        self.calls = list(self.reader._calls(run_id, observe=self._observe))
        # an inherited commitment recorded again (a fresh walk of a value the parent
        # committed, like a tool schema) comes after the run's own of the same key and value
        self.salts += self._inherited_salts

    def _reveal(self, value: Any) -> Any:
        return value if self.vault is None or not self._redacted else self.vault.reveal(value)

    def _observe(self, step: _Step, state: dict[str, Any]) -> None:
        """One event of the original, with the state before it (after, for a marker)."""
        if self._redacted and self.vault is not None and step.type != "receipt":
            self._keep_salts(step.body)
        if step.type == "run.open":
            self.opened = step.body
            parent = step.body.get("parent")
            self.parent_run_id = parent["run_id"] if isinstance(parent, dict) else None
            self._redacted = step.body.get("policy") is not None
            if self._redacted:
                self.inherited = {digest for digest, _, _ in iter_commitments(state)}
            self._history_before = len(state.get("history", []))
            return
        if step.type == "event":
            self._events.append(step.body)
            return
        if step.type != "commit":
            return
        stage = step.body["stage"]
        if stage == "seed":
            history = state.get("history", [])
            first = history[self._history_before] if len(history) > self._history_before else {}
            self.message = ReplayInput(
                user_message=self._reveal(state.get("user_message")),
                content=self._reveal(first.get("content")),
            )
        elif stage == "call-llm":
            # answered unless the stage failed (a reply equal to the previous one rewrites
            # nothing, so the marker, not the state, tells)
            answered = "error" not in step.body and "last_response" in state
            if not answered:
                self.failures[len(self.responses)] = _failure(step.body.get("error"))
            response = state.get("last_response")
            self.responses.append(self._reveal(copy.deepcopy(response)) if answered else None)
            self.tool_calls.append(None)
        elif stage == "tool-calls" and self.tool_calls:
            appended = state.get("history", [])[self._history_before :]
            self.tool_calls[-1] = self._answers(appended, state)
        self._events = []
        self._history_before = len(state.get("history", []))

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

    def _answers(self, appended: list[Any], state: dict[str, Any]) -> list[RecordedToolCall]:
        """The tool calls of the last reply, in order, with the results the original gave.

        The loop appends the assistant's turn and then one result per tool call, in the
        reply's order: results are taken by position (not by role, id or name, any of which
        a policy may have committed). Ids, names and arguments come from the recorded reply.
        """
        reply = self.responses[-1] if self.responses else None
        raw_calls = reply.get("tool_calls") if isinstance(reply, dict) else None
        calls = raw_calls if isinstance(raw_calls, list) else []
        results = self._reveal(appended[1:])
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
        refused = [p["tool_call_id"] for p in findings if p.get("mode") == "enforce"]
        schemas = self._reveal(state.get("tool_schemas", []))
        names = [s.get("name") if isinstance(s, dict) else None for s in schemas]
        answers = []
        for i, result in enumerate(results):
            raw = calls[i] if i < len(calls) and isinstance(calls[i], dict) else {}
            message = result if isinstance(result, dict) else {}
            call_id = raw.get("id", message.get("tool_call_id"))
            name = raw.get("name", message.get("name"))
            arguments = raw.get("arguments")
            is_error = message.get("is_error") is True
            ran: bool | None
            if refused and refused[0] == call_id and is_error:  # a refusal is an error result
                refused.pop(0)
                ran = False
            elif is_error and not legible:
                ran = None
            elif not all(isinstance(n, str) for n in [*names, name]):
                ran = None  # a tool name is redacted
            elif name not in names:
                ran = False
            elif isinstance(arguments, str):
                ran = _parses(arguments)
            else:
                ran = None if _holds_commitment(arguments) else True
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
                "rebuilt; " + _VAULT_HINT,
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
            usage=Usage(input=recorded["usage"]["input"], output=recorded["usage"]["output"]),
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
    name, depth first; JSON text inside strings included)."""
    kind = type(value)
    if kind is dict:
        if is_commitment(value):
            yield value[COMMIT_KEY]
            return
        for key in sorted(value):
            yield from ordered_commitments(value[key])
    elif kind is list:
        for item in value:
            yield from ordered_commitments(item)
    elif kind is str and COMMIT_KEY in value:
        inner = parse_json_container(value)
        if inner is not None:
            yield from ordered_commitments(inner)


def _commitments_alike(value: Any) -> Any:
    """``value`` with every commitment replaced by one placeholder (JSON text included)."""
    kind = type(value)
    if kind is dict:
        if is_commitment(value):
            return {COMMIT_KEY: "*"}
        return {k: _commitments_alike(v) for k, v in value.items()}
    if kind is list:
        return [_commitments_alike(v) for v in value]
    if kind is str and COMMIT_KEY in value:
        inner = parse_json_container(value)
        if inner is not None:
            return _commitments_alike(inner)
    return value


REDACTED = "<redacted>"


def _masked(value: Any, redacts: Callable[[str], bool]) -> Any:
    """``value`` with what sits under a redacted key replaced by ``<redacted>`` (JSON text
    inside strings included; commitments are shown as they are)."""
    kind = type(value)
    if kind is dict:
        if is_commitment(value):
            return value
        return {
            k: REDACTED if redacts(k) and not is_commitment(v) else _masked(v, redacts)
            for k, v in value.items()
        }
    if kind is list:
        return [_masked(v, redacts) for v in value]
    if kind is str:
        inner = parse_json_container(value)
        if inner is not None:
            masked = _masked(inner, redacts)
            return value if masked == inner else canon(masked).decode("utf-8")
    return value


def _failure(error: Any) -> str:
    """A recorded error record, as a line (its type, and its message when not redacted)."""
    if not isinstance(error, dict):
        return "no error was recorded"
    message = error.get("message")
    text = str(error.get("type", "error"))
    return f"{text}: {message}" if isinstance(message, str) else text


def _holds_commitment(value: Any) -> bool:
    return next(ordered_commitments(value), None) is not None


def _parses(text: str) -> bool:
    try:
        orjson.loads(text)
    except orjson.JSONDecodeError:
        return False
    return True


def _pretty(value: Any) -> list[str]:
    text = orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode()
    return (text + "\n").splitlines(keepends=True)


def piece_diff(before: Any, after: Any, label: str) -> str:
    """A unified diff of two recorded values, as readable JSON."""
    return "".join(
        difflib.unified_diff(
            _pretty(before), _pretty(after), fromfile=f"original {label}", tofile=f"replay {label}"
        )
    )


def compare(
    call: int,
    original: tuple[dict[str, Any], Receipt | None],
    digests: RequestDigests,
    request: dict[str, Any],
    run_id: str,
    explain: Callable[[Any, Any], str] | None = None,
) -> ReplayDivergence | None:
    """The first difference between a call's recorded receipt and the replayed request.

    ``explain(before, after)`` says more when two pieces differ only in commitments."""
    served, receipt = original
    if receipt is None:  # the original kept no receipts: compare the recorded requests
        if canon(served) == canon(request):  # as JSON: True is not 1
            return None
        return ReplayDivergence(
            f"call {call}: the request differs from the original's",
            call=call,
            kind="request",
            diff=piece_diff(served, request, f"call {call}"),
            original_run=run_id,
        )
    for field in ("model", "params"):
        if canon(getattr(receipt, field)) != canon(getattr(digests, field)):
            return ReplayDivergence(
                f"call {call}: {field} differs: {getattr(receipt, field)!r} was served, the "
                f"replay serves {getattr(digests, field)!r}",
                call=call,
                kind=field,
                expected=str(getattr(receipt, field)),
                actual=str(getattr(digests, field)),
                original_run=run_id,
            )
    for kind in PIECE_KINDS:
        want, got = list(getattr(receipt, kind)), digests.pieces(kind)
        if want == got:
            continue
        position = next(
            (i for i, (a, b) in enumerate(zip(want, got, strict=False)) if a != b),
            min(len(want), len(got)),
        )
        before = served[kind][position] if position < len(served[kind]) else None
        after = request[kind][position] if position < len(request[kind]) else None
        what = "added" if before is None else "removed" if after is None else "changed"
        hint = ""
        if (
            before is not None
            and after is not None
            and canon(_commitments_alike(before)) == canon(_commitments_alike(after))
        ):
            hint = "; the pieces differ only in commitments (redacted values): " + (
                explain(before, after) if explain is not None else _VAULT_HINT
            )
        return ReplayDivergence(
            f"call {call}: {kind} piece {position} {what} (original {len(want)} {kind} pieces, "
            f"replay {len(got)}){hint}",
            call=call,
            kind=kind,
            position=position,
            expected=want[position] if position < len(want) else None,
            actual=got[position] if position < len(got) else None,
            diff=piece_diff(before, after, f"call {call} {kind}[{position}]"),
            original_run=run_id,
        )
    if receipt.request != digests.request:  # pieces equal, so only the encoding could differ
        return ReplayDivergence(
            f"call {call}: request digest differs",
            call=call,
            kind="request",
            expected=receipt.request,
            actual=digests.request,
            original_run=run_id,
        )
    return None


class _ReplayHooks:
    """What the run consults: receipts to check, recorded tool results to answer with."""

    def __init__(self, recording: Recording, until: int | None) -> None:
        self.recording = recording
        self.until = until
        self.checked = 0
        self.call = -1  # the call whose response the loop is acting on
        self.tool_index = 0  # the next tool call of that response
        #: the original's policy document (the replay records under it too) and what the
        #: replay's boundary consults, when the original ran under a policy
        self.policy: dict[str, Any] | None = recording.opened.get("policy")
        self.commitments = (
            None
            if self.policy is None
            else ReplayCommitments(recording.salts, recording.inherited, self.reused)
        )
        #: keys the replay records under (set by replay()): values under them are never shown
        self.redacts: Callable[[str], bool] = lambda key: False
        #: keys and patterns of the original's policy the agent's own policy lacks
        self.policy_gap: list[str] = []

    def replaying(self, call: int) -> bool:
        return self.until is None or call < self.until

    def check_receipt(self, call: int, digests: RequestDigests, request: dict[str, Any]) -> None:
        self.call = call
        self.tool_index = 0
        if not self.replaying(call):
            if self.commitments is not None:  # the live part commits with fresh salts only
                self.commitments.live = True
            return
        self._check_policy(call)
        if call >= len(self.recording.calls):
            raise ReplayDivergence(
                f"call {call}: the replay makes a call the original ({len(self.recording.calls)} "
                "calls) did not",
                call=call,
                kind="calls",
                original_run=self.recording.run_id,
            )
        found = compare(
            call,
            self.recording.calls[call],
            digests,
            request,
            self.recording.run_id,
            self.explain,
        )
        if found is not None:
            raise found
        self.checked += 1

    def _check_policy(self, call: int) -> None:
        if self.policy_gap:
            gap, self.policy_gap = self.policy_gap, []
            raise ReplayDivergence(
                "the agent's redaction policy lacks what the original was recorded under ("
                + ", ".join(gap)
                + "): its runs would record those values in clear (this replay recorded them "
                "committed, under the original's policy)",
                call=call,
                kind="policy",
                original_run=self.recording.run_id,
            )

    def finish(self, store: RowSource, run_id: str) -> None:
        """At the end of the replayed run: the original made no more calls than this, and
        (not for a fork) the replay recorded what the original recorded, row for row."""
        if self.until is not None:
            return
        self._check_policy(self.checked)
        if self.checked < len(self.recording.calls):
            raise ReplayDivergence(
                f"the replay made {self.checked} calls, the original {len(self.recording.calls)}",
                call=self.checked,
                kind="calls",
                original_run=self.recording.run_id,
            )
        self._same_record(store, run_id)

    def _same_record(self, store: RowSource, run_id: str) -> None:
        """Every row but ``run.open`` (and the close, not written yet) byte for byte: what is
        not served (recorded findings such as ``args_invalid``, state the model never sees)
        must match too, or the replay is not the original's recording."""
        original = [
            e for e in self.recording.store.read(self.recording.run_id) if e.type != "run.open"
        ]
        replayed = [e for e in store.read(run_id) if e.type != "run.open"]
        calls = commits = 0
        for index, (a, b) in enumerate(itertools.zip_longest(original, replayed)):
            if a is not None and a.type == "run.close" and b is None:
                return  # the replay's close is written after this check
            if a is None or b is None or (a.type, bytes(a.body)) != (b.type, bytes(b.body)):
                mine = a if a is not None else b
                assert mine is not None
                before = parse(a.body) if a is not None else None
                after = parse(b.body) if b is not None else None
                hint = ""
                if (
                    before is not None
                    and after is not None
                    and canon(_commitments_alike(before)) == canon(_commitments_alike(after))
                ):
                    hint = "; the rows differ only in commitments (redacted values): " + (
                        self.explain(before, after)
                    )
                raise ReplayDivergence(
                    f"call {calls}: every request matched, but the recording differs at row "
                    f"{index + 1} (commit {commits}): the original recorded "
                    f"{_row(a)}, the replay {_row(b)}{hint}",
                    call=calls,
                    kind="record",
                    position=index + 1,
                    diff=piece_diff(before, after, f"row {index + 1}"),
                    original_run=self.recording.run_id,
                )
            calls += a.type == "receipt"
            commits += a.type == "commit"

    def tool_call(self, call: dict[str, Any]) -> RecordedToolCall | None:
        """The recorded tool call ``call`` must be, in order (None: a fork's live part)."""
        if not self.replaying(self.call):
            return None
        k, index = self.call, self.tool_index
        self.tool_index += 1
        tool_calls = self.recording.tool_calls
        recorded = tool_calls[k] if 0 <= k < len(tool_calls) else None
        if recorded is None or index >= len(recorded):
            answered = (
                "the original ran none of this reply's tool calls: it ended the turn here"
                if recorded is None
                else f"the original answered {len(recorded)} tool calls of this reply"
            )
            raise self._departure(
                f"call {k}: tool call {index} ({self._shown_call(call)}) is not in the "
                f"recording ({answered})",
                index,
            )
        entry = recorded[index]
        if _holds_commitment(call["arguments"]):
            raise ReplayDivergence(
                f"call {k}: tool call {index} has redacted arguments the replay cannot open; "
                + _VAULT_HINT,
                call=k,
                kind="redacted",
                position=index,
                original_run=self.recording.run_id,
            )
        mine = {"id": call["id"], "name": call["name"], "arguments": call["arguments"]}
        theirs = {"id": entry.id, "name": entry.name, "arguments": entry.arguments}
        if (
            canon(theirs["id"]) != canon(mine["id"])
            or canon(theirs["name"]) != canon(mine["name"])
            or _canonical(entry.arguments) != _canonical(call["arguments"])
        ):
            raise self._departure(
                f"call {k}: tool call {index} departs from the recording: the replay calls "
                f"{self._shown_call(call)}, the original {self._shown_call(theirs)}",
                index,
                piece_diff(self._shown(theirs), self._shown(mine), f"call {k} tool call {index}"),
            )
        return entry

    def answer(self, entry: RecordedToolCall) -> tuple[Any, bool]:
        """The recorded result, for a call the replay would run its tool on."""
        if entry.ran is False:
            raise self._departure(
                f"call {self.call}: tool call {self.tool_index - 1} "
                f"({self._shown_call(entry)}): the replay would run the tool, the original did "
                "not (it answered with the recorded error below: arguments refused by "
                "validation, no such tool, or arguments that are not JSON)",
                self.tool_index - 1,
                piece_diff(
                    self._shown({"content": entry.content}),
                    {"content": "(the tool's result)"},
                    "tool result",
                ),
            )
        return entry.content, entry.is_error

    def not_run(self, entry: RecordedToolCall, content: str) -> None:
        """The replay answers a call without running its tool: so must the original have."""
        if entry.ran is True:
            raise self._departure(
                f"call {self.call}: tool call {self.tool_index - 1} "
                f"({self._shown_call(entry)}): the original ran the tool, the replay does not",
                self.tool_index - 1,
                piece_diff(
                    self._shown({"content": entry.content}),
                    self._shown({"content": content}),
                    "tool result",
                ),
            )

    def _shown(self, value: Any) -> Any:
        """``value`` as a divergence may print it: what the replay's policy redacts is
        replaced (the opened values of a vault never reach a message or a log)."""
        return _masked(value, self.redacts)

    def _shown_call(self, call: Any) -> str:
        if isinstance(call, RecordedToolCall):
            call = {"id": call.id, "name": call.name}
        shown = self._shown({"id": call["id"], "name": call["name"]})
        return f"{shown['name']}, {shown['id']}"

    def explain(self, before: Any, after: Any) -> str:
        """Two pieces that differ only in commitments: opened where possible (the values
        are compared, never printed)."""
        vault, made = self.recording.vault, self.commitments.made if self.commitments else {}
        original = [d for d, _, _ in iter_commitments(before)]
        replayed = [d for d, _, _ in iter_commitments(after)]
        if not original and not replayed:
            return "they differ in their encoding only"
        opened_before: list[bytes] = []
        for digest in original:
            found = vault.get(digest) if vault is not None else None
            if found is None or not found.opens():
                return _VAULT_HINT
            opened_before.append(canon(found.value))
        if not all(digest in made or digest in original for digest in replayed):
            return _VAULT_HINT
        opened_after = [
            opened_before[original.index(d)] if d in original else canon(made[d]) for d in replayed
        ]
        if opened_before == opened_after:
            return "they hide the same values under other salts (committed in another order)"
        return "a redacted value changed (both sides opened with the disclosures; not printed)"

    def reused(self, digest: str, key: str | None) -> None:
        """The boundary is about to record a recorded commitment in a second place."""
        where = f" under {key!r}" if key is not None else ""
        raise ReplayDivergence(
            f"call {max(self.call, 0)}: the replay records the original's commitment "
            f"{digest[:16]}...{where} in a second place, where the original recorded a "
            "commitment of its own; whether both hide one value is known only by opening them: "
            + _VAULT_HINT,
            call=max(self.call, 0),
            kind="redacted",
            expected=None,
            actual=digest,
            original_run=self.recording.run_id,
        )

    def _departure(self, message: str, index: int, diff: str = "") -> ReplayDivergence:
        return ReplayDivergence(
            message,
            call=self.call,
            kind="tool-call",
            position=index,
            diff=diff,
            original_run=self.recording.run_id,
        )


def _row(event: Row | None) -> str:
    if event is None:
        return "nothing more"
    body = parse(event.body)
    if event.type == "event" and isinstance(body, dict):
        return f"event {body.get('name')}"
    if event.type == "commit" and isinstance(body, dict):
        return f"the marker of stage {body.get('stage')}"
    if event.type == "write" and isinstance(body, dict):
        return f"the write {body.get('verb')} {body.get('path')!r}"
    return f"a {event.type}"


_VAULT_HINT = (
    "replay with the disclosure vault the original was recorded with "
    "(replay(..., disclosures=VAULT) or --disclosures VAULT)"
)


def _canonical(arguments: Any) -> bytes:
    """Arguments as JSON compares them (``1.0`` and ``1`` alike), JSON text parsed first."""
    try:
        return canon(_arguments(arguments))
    except ValueError:
        return repr(arguments).encode()


def _arguments(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            return raw
    return raw


class _ReplayProvider:
    """Answers from the recording; from call ``until`` on, asks the live provider."""

    name = "replay"

    def __init__(self, recording: Recording, live: Any, until: int | None) -> None:
        self.recording = recording
        self.live = live
        self.until = until
        self.calls = 0

    async def complete(self, request: Any) -> LLMResponse:
        call = self.calls
        self.calls += 1
        if self.until is not None and call >= self.until:
            response: LLMResponse = await self.live.complete(request)
            return response
        return self.recording.response(call)


def copy_ancestry(source: RowSource, target: EventStore, run_id: str) -> None:
    """Copy a run's ancestors (exact rows) into ``target`` when it lacks them."""
    chain: list[str] = []
    current: str | None = run_id
    while current is not None:
        try:
            target.run_info(current)
            break
        except KeyError:
            chain.append(current)
        first = next(iter(source.read(current)))
        parent = parse(first.body).get("parent")
        current = parent["run_id"] if isinstance(parent, dict) else None
    for ancestor in reversed(chain):
        rows = [
            StoredEvent(
                run_id=e.run_id,
                seq=e.seq,
                type=e.type,
                ts=e.ts,
                body=e.body,
                event_hash=e.event_hash,
                chain_hash=e.chain_hash,
            )
            for e in source.read(ancestor)
        ]
        target.append(rows)


async def replay(
    agent: Agent,
    store: RowSource,
    run_id: str,
    *,
    until: int | None = None,
    disclosures: DisclosureVault | str | os.PathLike[str] | None = None,
) -> ReplayResult:
    """Replay ``run_id`` from ``store`` with ``agent``; raise at the first divergence.

    ``disclosures``: the vault of the original run (default: the agent's own). A run
    recorded under a redaction policy replays byte for byte when its commitments can be
    opened; without the vault, only where no recorded commitment has to be copied.
    """
    if until is not None and (isinstance(until, bool) or not isinstance(until, int) or until < 0):
        raise UsageError(f"until must be a call index >= 0, got {until!r}")
    if isinstance(disclosures, str | os.PathLike) and not os.path.isfile(disclosures):
        raise UsageError(f"disclosures: no vault at {os.fspath(disclosures)!r}")
    vault = open_vault(disclosures) if disclosures is not None else agent.vault
    try:
        return await _replay(agent, store, run_id, until, vault)
    finally:
        if vault is not None and vault is not agent.vault and vault is not disclosures:
            vault.close()  # opened here from a path


async def _replay(
    agent: Agent,
    store: RowSource,
    run_id: str,
    until: int | None,
    vault: DisclosureVault | None,
) -> ReplayResult:
    # the original is evidence first: a log that does not verify is not replayed
    shared_verifier(store).verify(run_id)
    recording = Recording(store, run_id, vault=vault)
    if recording.message is None:
        raise UsageError(f"run {run_id} has no recorded input (its seed never committed)")
    lineage = None
    if recording.parent_run_id is not None:
        if agent.store is not store:
            copy_ancestry(store, agent.store, recording.parent_run_id)
        lineage = agent._lineage(recording.parent_run_id, vault)
    hooks = _ReplayHooks(recording, until)
    own = agent._policy(lineage)
    recorded_under = agent._policy(lineage, hooks.policy)
    if recorded_under is not None:
        hooks.redacts = recorded_under.document.matcher()
    if hooks.policy is not None:
        hooks.policy_gap = [
            *(f"key {k!r}" for k in hooks.policy["keys"] if own is None or k not in own.keys),
            *(
                f"pattern {p!r}"
                for p in hooks.policy["patterns"]
                if own is None or p not in own.patterns
            ),
        ]
    link = (
        {"replay_of": run_id}
        if until is None
        else {"fork_of": {"run_id": run_id, "at_call": until}}
    )
    result = await agent._execute(
        recording.message,
        lineage,
        provider=_ReplayProvider(recording, agent.config.provider, until),
        replay=hooks,
        open_extra=link,
        replayed_policy=hooks.policy,
    )
    return ReplayResult(
        original_run=run_id, result=result, calls_checked=hooks.checked, forked_at=until
    )


def replay_sync(
    agent: Agent,
    store: RowSource,
    run_id: str,
    *,
    until: int | None = None,
    disclosures: DisclosureVault | str | os.PathLike[str] | None = None,
) -> ReplayResult:
    """:func:`replay` for code without an event loop."""
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(replay(agent, store, run_id, until=until, disclosures=disclosures))
    raise UsageError(
        "replay_sync() was called inside a running event loop; use await agentfootprint.replay(...)"
    )
