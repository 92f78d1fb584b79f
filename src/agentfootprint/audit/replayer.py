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
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from agentfootprint.audit.read import Receipt, RunReader
from agentfootprint.core.providers.base import LLMResponse, ToolCall, Usage
from agentfootprint.core.run import ReplayInput
from agentfootprint.errors import ReplayDivergence, UsageError
from agentfootprint.store.base import EventStore, StoredEvent
from agentfootprint.verify.canonical import canon, parse
from agentfootprint.verify.commitments import is_commitment
from agentfootprint.verify.request import PIECE_KINDS, RequestDigests
from agentfootprint.verify.verifier import RowSource

if TYPE_CHECKING:
    from agentfootprint.core.agent import Agent, RunResult

__all__ = ["Recording", "ReplayResult", "copy_ancestry", "replay", "replay_sync"]


@dataclass(frozen=True, kw_only=True, slots=True)
class ReplayResult:
    """A replay that matched the recording call for call."""

    original_run: str
    result: RunResult
    calls_checked: int
    forked_at: int | None = None


class Recording:
    """What a recorded run received: its input, responses, tool results and receipts."""

    def __init__(self, store: RowSource, run_id: str) -> None:
        self.store = store
        self.run_id = run_id
        events = [(e.type, parse(e.body)) for e in store.read(run_id)]
        if not events or events[0][0] != "run.open":
            raise UsageError(f"run {run_id} has no run.open: nothing to replay")
        self.opened: dict[str, Any] = events[0][1]
        parent = self.opened.get("parent")
        self.parent_run_id: str | None = parent["run_id"] if isinstance(parent, dict) else None
        self.message: Any = None
        self.responses: list[dict[str, Any] | None] = []
        self.tool_results: dict[str, tuple[Any, Any, Any, bool]] = {}
        self.reader = RunReader(store)
        # one pass over the folded log: at each commit marker the state includes its writes
        answered = None  # the last_response object before the commit (None: none yet)
        history_before = 0
        for step, state, _ in self.reader._fold(run_id):
            if step.type == "run.open":
                history_before = len(state.get("history", []))
                answered = state.get("last_response")
                continue
            if step.type != "commit":
                continue
            stage = step.body["stage"]
            if stage == "seed":
                history = state.get("history", [])
                first = history[history_before] if len(history) > history_before else {}
                self.message = ReplayInput(
                    user_message=state.get("user_message"), content=first.get("content")
                )
            elif stage == "call-llm":
                response = state.get("last_response")
                self.responses.append(copy.deepcopy(response) if response is not answered else None)
            elif stage == "tool-calls":
                self._note_tools(state.get("history", [])[history_before:])
            answered = state.get("last_response")
            history_before = len(state.get("history", []))
        self.calls = list(self.reader._calls(run_id))  # (recorded request, receipt) per call

    def _note_tools(self, appended: list[Any]) -> None:
        calls: dict[str, tuple[str, Any]] = {}
        for message in appended:
            if not isinstance(message, dict):
                continue
            for call in message.get("tool_calls") or []:
                calls[call["id"]] = (call["name"], call["arguments"])
            if message.get("role") == "tool":
                name, arguments = calls.get(message["tool_call_id"], (message.get("name"), None))
                self.tool_results[message["tool_call_id"]] = (
                    name,
                    arguments,
                    message["content"],
                    bool(message.get("is_error")),
                )

    def response(self, k: int) -> LLMResponse:
        if k >= len(self.responses) or self.responses[k] is None:
            raise ReplayDivergence(
                f"replay of run {self.run_id} asked for call {k}, which the recording "
                f"{'does not have' if k >= len(self.responses) else 'did not answer'}",
                call=k,
                kind="calls",
                original_run=self.run_id,
            )
        recorded = self.responses[k]
        assert recorded is not None
        return LLMResponse(
            content=recorded["content"],
            tool_calls=tuple(
                ToolCall(id=c["id"], name=c["name"], arguments=c["arguments"])
                for c in recorded["tool_calls"]
            ),
            usage=Usage(input=recorded["usage"]["input"], output=recorded["usage"]["output"]),
            stop_reason=recorded["stop_reason"],
        )


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
) -> ReplayDivergence | None:
    """The first difference between a call's recorded receipt and the replayed request."""
    served, receipt = original
    if receipt is None:  # the original kept no receipts: compare the recorded requests
        if served == request:
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
        return ReplayDivergence(
            f"call {call}: {kind} piece {position} {what} (original {len(want)} {kind} pieces, "
            f"replay {len(got)})",
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

    def replaying(self, call: int) -> bool:
        return self.until is None or call < self.until

    def check_receipt(self, call: int, digests: RequestDigests, request: dict[str, Any]) -> None:
        self.call = call
        if not self.replaying(call):
            return
        if call >= len(self.recording.calls):
            raise ReplayDivergence(
                f"call {call}: the replay makes a call the original ({len(self.recording.calls)} "
                "calls) did not",
                call=call,
                kind="calls",
                original_run=self.recording.run_id,
            )
        found = compare(call, self.recording.calls[call], digests, request, self.recording.run_id)
        if found is not None:
            raise found
        self.checked += 1

    def finish(self) -> None:
        """At the end of the replayed run: the original made no more calls than this."""
        if self.until is None and self.checked < len(self.recording.calls):
            raise ReplayDivergence(
                f"the replay made {self.checked} calls, the original {len(self.recording.calls)}",
                call=self.checked,
                kind="calls",
                original_run=self.recording.run_id,
            )

    def tool_answer(self, call: dict[str, Any]) -> tuple[str, bool] | None:
        if not self.replaying(self.call):
            return None
        recorded = self.recording.tool_results.get(call["id"])
        if recorded is None:
            raise ReplayDivergence(
                f"tool call {call['id']} ({call['name']}) is not in the recording",
                call=self.call,
                kind="tool-call",
                original_run=self.recording.run_id,
            )
        name, arguments, content, is_error = recorded
        comparable = not (is_commitment(arguments) or is_commitment(call["arguments"]))
        if name != call["name"] or (
            arguments is not None
            and comparable  # two commitments of one value differ by salt: not comparable
            and _canonical(arguments) != _canonical(call["arguments"])
        ):
            raise ReplayDivergence(
                f"tool call {call['id']}: the replay calls {call['name']} with other arguments "
                f"than the recording ({name})",
                call=self.call,
                kind="tool-call",
                diff=piece_diff(
                    {"name": name, "arguments": arguments},
                    {"name": call["name"], "arguments": call["arguments"]},
                    f"tool call {call['id']}",
                ),
                original_run=self.recording.run_id,
            )
        return content, is_error


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
    agent: Agent, store: RowSource, run_id: str, *, until: int | None = None
) -> ReplayResult:
    """Replay ``run_id`` from ``store`` with ``agent``; raise at the first divergence."""
    if until is not None and (isinstance(until, bool) or not isinstance(until, int) or until < 0):
        raise UsageError(f"until must be a call index >= 0, got {until!r}")
    recording = Recording(store, run_id)
    if recording.message is None:
        raise UsageError(f"run {run_id} has no recorded input (its seed never committed)")
    lineage = None
    if recording.parent_run_id is not None:
        if agent.store is not store:
            copy_ancestry(store, agent.store, recording.parent_run_id)
        lineage = agent._lineage(recording.parent_run_id)
    hooks = _ReplayHooks(recording, until)
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
    )
    return ReplayResult(
        original_run=run_id, result=result, calls_checked=hooks.checked, forked_at=until
    )


def replay_sync(
    agent: Agent, store: RowSource, run_id: str, *, until: int | None = None
) -> ReplayResult:
    """:func:`replay` for code without an event loop."""
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(replay(agent, store, run_id, until=until))
    raise UsageError(
        "replay_sync() was called inside a running event loop; use await agentfootprint.replay(...)"
    )
