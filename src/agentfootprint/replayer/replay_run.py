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

import contextlib
import functools
import itertools
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from agentfootprint.agent.agent import Agent
from agentfootprint.audit.divergence import (
    REDACTED,
    VAULT_HINT,
    commitments_alike,
    compare,
    describe_row,
    masked,
    piece_diff,
)
from agentfootprint.audit.sources import (
    check_index,
    check_run_id,
    naming_run,
    opened,
    renamed,
)
from agentfootprint.errors import (
    ContinuationError,
    FileError,
    ReplayDivergence,
    RunNotFoundError,
    UsageError,
    VerificationError,
)
from agentfootprint.features.registry import live_only_kinds
from agentfootprint.logformat.calls import commit_calls
from agentfootprint.logformat.canonical import canon, parse
from agentfootprint.logformat.commitments import (
    iter_commitments,
)
from agentfootprint.logformat.request import RequestDigests
from agentfootprint.replayer.recording import RecordedToolCall, Recording, holds_commitment
from agentfootprint.runtime.ports import LiveModel, Ports
from agentfootprint.runtime.provider import LLMResponse, Request
from agentfootprint.runtime.sync_loop import loop_running, run_sync
from agentfootprint.store.base import EventStore, StoredEvent
from agentfootprint.store.redaction import ReplayCommitments
from agentfootprint.store.vault import DisclosureVault
from agentfootprint.store.vault_base import Vault
from agentfootprint.verify.verifier import RowSource, Verifier, shared_verifier

if TYPE_CHECKING:
    from agentfootprint.agent.agent import RunResult

__all__ = [
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
    #: the answer as it may be printed (``<redacted>`` when the run's policy covers it)
    answer_shown: str = ""


class _ReplayHooks:
    """What the run consults: receipts to check, recorded tool results to answer with."""

    def __init__(
        self,
        recording: Recording,
        until: int | None,
        on_progress: Callable[[int, int], None] | None = None,
    ) -> None:
        self.recording = recording
        self.until = until
        self.checked = 0
        #: told (calls checked, calls to check) after each call replayed
        self.on_progress = on_progress
        self.call = -1  # the call whose response the loop is acting on
        self.tool_index = 0  # the next tool call of that response
        self.decided: dict[str, int] = {}  # the recorded decisions answered, by kind
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
        self.redacting = False  # the replay records under a policy
        #: keys and patterns of the original's policy the agent's own policy lacks
        self.policy_gap: list[str] = []
        self.live = False  # a fork asked its live provider

    def replaying(self, call: int) -> bool:
        return self.until is None or call < self.until

    def check_receipt(self, call: int, digests: RequestDigests, request: dict[str, Any]) -> None:
        self.call = call
        self.tool_index = 0
        self._check_policy(call)
        if not self.replaying(call):
            self.live = True
            if self.commitments is not None:  # the live part commits with fresh salts only
                self.commitments.live = True
            return
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
        if self.on_progress is not None:
            calls = len(self.recording.calls)
            self.on_progress(self.checked, calls if self.until is None else min(self.until, calls))

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

    def finish(self, store: RowSource, run_id: str, close: dict[str, Any]) -> None:
        """At the end of the replayed run (``close``: the body its ``run.close`` will have):
        the original made no more calls than this, and the replay recorded what the
        original recorded, row for row (a fork that went live is a new branch: not checked)."""
        self._check_policy(self.checked)
        if self.live:
            return
        if self.checked < len(self.recording.calls):
            raise ReplayDivergence(
                f"the replay made {self.checked} calls, the original {len(self.recording.calls)}",
                call=self.checked,
                kind="calls",
                original_run=self.recording.run_id,
            )
        self._same_record(store, run_id, close)

    def _same_record(self, store: RowSource, run_id: str, close: dict[str, Any]) -> None:
        """Every row but ``run.open`` and the wire exchanges byte for byte, the close the
        replay is about to write included: what is not served (recorded findings such as
        ``args_invalid``, state the model never sees, the close) must match too, or it is
        not the original's recording."""
        original = [e for e in self.recording.store.read(self.recording.run_id) if _compared(e)]
        replayed: list[Any] = [e for e in store.read(run_id) if _compared(e)]
        replayed.append(_Closing(body=canon(close)))
        commits = _commits(original, self.recording.log_format)
        calls = 0
        for index, (a, b) in enumerate(itertools.zip_longest(original, replayed)):
            if a is None or b is None or (a.type, bytes(a.body)) != (b.type, bytes(b.body)):
                before = parse(a.body) if a is not None else None
                after = parse(b.body) if b is not None else None
                hint = ""
                if (
                    before is not None
                    and after is not None
                    and canon(commitments_alike(before)) == canon(commitments_alike(after))
                ):
                    hint = "; the rows differ only in commitments (redacted values): " + (
                        self.explain(before, after)
                    )
                stage, made = commits[index] if index < len(commits) else (None, 0)
                # rows of a model-calling commit belong to that call; later ones act on its
                # reply
                call = calls if made else max(calls - 1, 0)
                where = f"stage {stage}" if stage is not None else "the close"
                raise ReplayDivergence(
                    f"call {call}: every request matched, but the recording differs at row "
                    f"{index + 1} ({where}): the original recorded "
                    f"{describe_row(a)}, the replay {describe_row(b)}{hint}",
                    call=call,
                    kind="record",
                    position=index + 1,
                    diff=piece_diff(before, after, f"row {index + 1}"),
                    original_run=self.recording.run_id,
                )
            if a.type == "commit":
                calls += commits[index][1]

    def tool_call(self, call: dict[str, Any]) -> RecordedToolCall | None:
        """The recorded tool call ``call`` must be, in order (None: a fork's live part)."""
        if not self.replaying(self.call):
            return None
        k, index = self.call, self.tool_index
        self.tool_index += 1
        tool_calls = self.recording.tool_calls
        # before any call of its own, a resume finishes its parent's paused batch
        recorded = (
            self.recording.resumed if k < 0 else (tool_calls[k] if k < len(tool_calls) else None)
        )
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
        if holds_commitment(call["arguments"]):
            raise ReplayDivergence(
                f"call {k}: tool call {index} has redacted arguments the replay cannot open; "
                + VAULT_HINT,
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

    def decision(self, kind: str, question: dict[str, Any]) -> dict[str, Any] | None:
        """The original's next recorded decision of ``kind``, which must be for the same
        question (None in a fork's live part: the decider is asked)."""
        if not self.replaying(self.call):
            return None
        index = self.decided.get(kind, 0)
        recorded = self.recording.decisions.get(kind, [])
        call = max(self.call + 1, 0)  # the decision is taken before the next call
        if index >= len(recorded):
            raise ReplayDivergence(
                f"call {call}: the replay asks for decision {index} of {kind} "
                f"({self._shown(question)!r}); the original recorded {len(recorded)}",
                call=call,
                kind="decision",
                position=index,
                original_run=self.recording.run_id,
            )
        entry = recorded[index]
        if not isinstance(entry, dict):
            raise ReplayDivergence(
                f"call {call}: the original's decision {index} of {kind} is not an object",
                call=call,
                kind="decision",
                position=index,
                original_run=self.recording.run_id,
            )
        theirs = {key: entry.get(key) for key in question}
        if holds_commitment(theirs):
            raise ReplayDivergence(
                f"call {call}: decision {index} of {kind} was asked about redacted values the "
                "replay cannot open; " + VAULT_HINT,
                call=call,
                kind="redacted",
                position=index,
                original_run=self.recording.run_id,
            )
        if canon(theirs) != canon(question):
            raise ReplayDivergence(
                f"call {call}: decision {index} of {kind} is asked about something else than "
                "in the original (diff below); the original's answer does not apply",
                call=call,
                kind="decision",
                position=index,
                diff=piece_diff(self._shown(theirs), self._shown(question), f"{kind} {index}"),
                original_run=self.recording.run_id,
            )
        self.decided[kind] = index + 1
        return entry

    def answer(self, entry: RecordedToolCall) -> tuple[Any, bool]:
        """The recorded result, for a call the replay would run its tool on."""
        if entry.paused:
            raise self._departure(
                f"call {self.call}: tool call {self.tool_index - 1} "
                f"({self._shown_call(entry)}): the replay would run the tool, the original "
                "paused there for a person's answer (its run closed paused)",
                self.tool_index - 1,
            )
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
        if entry.is_error is None:
            raise ReplayDivergence(
                f"call {self.call}: tool call {self.tool_index - 1}: whether the recorded result "
                "is an error is redacted; " + VAULT_HINT,
                call=self.call,
                kind="redacted",
                position=self.tool_index - 1,
                original_run=self.recording.run_id,
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
        return masked(value, self.redacts) if self.redacting else value

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
                return VAULT_HINT
            opened_before.append(canon(found.value))
        if not all(digest in made or digest in original for digest in replayed):
            return VAULT_HINT
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
            + VAULT_HINT,
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


@dataclass(frozen=True, slots=True)
class _Closing:
    """The ``run.close`` a replay is about to write, as a row to compare."""

    body: bytes
    type: str = "run.close"


def _compared(row: Any) -> bool:
    """Rows a replay must reproduce: all but ``run.open`` (it names the run and what it
    replays), ``run.seal`` (a signature over the run's own head, by whoever records it) and
    the events of what only a live run does outside the process (the kinds features declare
    live-only: the original's HTTP attempts, its tools' teardowns; a replay makes none, and
    the original's evidence stays in the original's log)."""
    if row.type == "run.open" or row.type == "run.seal":
        return False
    if row.type == "event" and any(kind in bytes(row.body) for kind in _live_only_bytes()):
        body = parse(row.body)
        return not (isinstance(body, dict) and body.get("name") in live_only_kinds())
    return True


@functools.cache
def _live_only_bytes() -> tuple[bytes, ...]:
    return tuple(f'"{kind}"'.encode() for kind in live_only_kinds())


def _commits(rows: list[Any], log_format: str) -> list[tuple[str | None, int]]:
    """For each row, the stage of the commit it belongs to (its marker's, which follows it)
    and how many model calls that commit made (from its receipts or its marker); None and 0
    for rows outside commits (the close)."""
    found: list[tuple[str | None, int]] = [(None, 0)] * len(rows)
    batch: list[int] = []
    receipts = 0
    for index, row in enumerate(rows):
        if row.type in ("run.open", "run.close"):
            batch, receipts = [], 0
            continue
        batch.append(index)
        if row.type == "receipt":
            receipts += 1
        if row.type == "commit":
            body = parse(row.body)
            stage = body.get("stage") if isinstance(body, dict) else None
            calls = commit_calls(log_format, body, receipts) if isinstance(body, dict) else 0
            for member in batch:
                found[member] = (stage if isinstance(stage, str) else None, calls)
            batch, receipts = [], 0
    return found


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


class _RecordedModel:
    """The model port of a replay: each request is checked against the original's receipt
    before it is served, and answered with the original's reply; from call ``until`` on (a
    fork) the agent's own provider answers."""

    name = "replay"
    checks_requests = True

    def __init__(self, hooks: _ReplayHooks, live: Any) -> None:
        self.hooks = hooks
        self.live = LiveModel(live)
        self.provider = self  # what the run-closed observers are told served the run

    def check(self, call: int, digests: RequestDigests, recorded: dict[str, Any]) -> None:
        self.hooks.check_receipt(call, digests, recorded)

    async def complete(self, call: int, request: Request, *, on_token: Any = None) -> LLMResponse:
        if not self.hooks.replaying(call):
            return await self.live.complete(call, request, on_token=on_token)
        return self.hooks.recording.response(call)

    def recorded(self, call: int) -> bool:
        return self.hooks.replaying(call)


class _RecordedDecisions:
    """The deciders answer as the original's did (checked question by question)."""

    def __init__(self, hooks: _ReplayHooks) -> None:
        self.hooks = hooks

    def recorded(self, kind: str, question: dict[str, Any]) -> dict[str, Any] | None:
        return self.hooks.decision(kind, question)


class _RecordedTools:
    """The tools port of a replay: each call checked against the recording, in order, and
    answered with the recorded result (a fork's live part runs its tools)."""

    def __init__(self, hooks: _ReplayHooks) -> None:
        self.hooks = hooks

    def expect(self, call: dict[str, Any]) -> Any:
        return self.hooks.tool_call(call)

    def answer(self, expected: Any) -> tuple[Any, bool]:
        return self.hooks.answer(expected)

    def not_run(self, expected: Any, content: str) -> None:
        self.hooks.not_run(expected, content)


def copy_ancestry(source: RowSource, target: EventStore, run_id: str) -> None:
    """Copy ``run_id`` and its ancestors (exact rows) into ``target`` where it lacks them.

    The chain is the verified one (each ``run.open`` names its parent; a run index is not
    evidence), and a run ``target`` already holds must be that very run (same events, same
    head): a replay never continues another run of the same id.

    The usual store holds the chain from the root up to some run without a gap (a replay of
    run ``k`` finds every run but its parent). The chain is looked up from its newest run
    back to the first one ``target`` holds (one read each: a replay of run ``k`` makes two,
    however large the store), and only that run is verified there and compared: its
    ``run.open`` names its parent's events and head, which its verification checks against
    ``target``'s parent, and so on to the root, so one comparison covers every older one. A
    replay of run ``k`` so costs O(1) reads and verifications, not O(k) (nor a listing of
    the store). That check comes before anything is copied. When it fails because an older
    ancestor is missing (a store that took a child without its parent), every run of the
    chain is looked up, the missing ones are copied oldest first, and each run held past a
    gap is checked once its ancestors are there.
    """
    verifier = shared_verifier(source)
    verified = verifier.verify(run_id)
    chain = (*verified.ancestors, run_id)
    newest = next((i for i in range(len(chain) - 1, -1, -1) if _holds(target, chain[i])), -1)
    if newest >= 0:
        try:
            _check_same_run(verifier, target, chain[newest])
        except ContinuationError:
            if all(_holds(target, ancestor) for ancestor in chain[:newest]):
                raise  # no gap below it: the run held is not the original's
            _copy_past_gaps(verifier, source, target, chain)
            return
    for ancestor in chain[newest + 1 :]:
        target.append([StoredEvent.copy_of(row) for row in source.read(ancestor)])


def _copy_past_gaps(
    verifier: Verifier, source: RowSource, target: EventStore, chain: tuple[str, ...]
) -> None:
    """The chain into a store that holds some of it with gaps: the runs held from the root
    on are checked with one comparison (their newest), then each missing run is copied and
    each run held past a gap checked once its ancestors are in ``target``."""
    held = [_holds(target, ancestor) for ancestor in chain]
    prefix = held.index(False)  # a gap exists: some run is missing
    if prefix:
        _check_same_run(verifier, target, chain[prefix - 1])
    for index, (ancestor, there) in enumerate(zip(chain, held, strict=True)):
        if not there:
            target.append([StoredEvent.copy_of(row) for row in source.read(ancestor)])
        elif index >= prefix:
            _check_same_run(verifier, target, ancestor)


def _holds(target: EventStore, run_id: str) -> bool:
    """Whether ``target`` holds events of ``run_id`` (from the events: a read, never the
    run index)."""
    try:
        return next(iter(target.read(run_id)), None) is not None
    except RunNotFoundError:
        return False


def _check_same_run(verifier: Verifier, target: EventStore, run_id: str) -> None:
    """``target``'s run ``run_id`` verifies and is the original's (same events, same head)."""
    original = verifier.verify(run_id)
    try:
        present = shared_verifier(target).verify(run_id)
    except VerificationError as exc:
        raise ContinuationError(
            f"cannot replay onto run {run_id}: the agent's store holds a run of that id "
            f"that does not verify ({exc}); replay into another store"
        ) from exc
    if (present.events, present.head) != (original.events, original.head):
        raise ContinuationError(
            f"cannot replay onto run {run_id}: the agent's store holds another run of "
            "that id (its events differ from the original log's); replay into another "
            "store"
        )


async def replay(
    agent: Agent,
    store: RowSource | str | os.PathLike[str],
    run_id: str,
    *,
    until: int | None = None,
    disclosures: Vault | str | os.PathLike[str] | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> ReplayResult:
    """Replay ``run_id`` from ``store`` with ``agent``; raise at the first divergence.

    ``store``: the original's log, or its path (a database or bundle, opened read-only).
    ``disclosures``: the vault of the original run (default: the agent's own), or its path
    (opened read-only). A run recorded under a redaction policy replays byte for byte when
    its commitments can be opened; without the vault, only where no recorded commitment
    has to be copied. ``on_progress(done, total)`` is told after each call replayed and
    checked (``total``: the calls to replay).
    """
    if not isinstance(agent, Agent):
        raise UsageError(
            f"agent: expected the agentfootprint Agent to replay with, got {type(agent).__name__}",
            option="agent",
        )
    check_run_id(run_id)
    if until is not None:
        check_index(until, "until", 0, "the call index to fork at")
    with opened(store, "store") as source, _original_vault(disclosures, agent) as vault:
        return await _replay(agent, source, run_id, until, vault, on_progress)


@contextlib.contextmanager
def _original_vault(
    disclosures: Vault | str | os.PathLike[str] | None, agent: Agent
) -> Iterator[Vault | None]:
    """The original's vault: given, the agent's own, or opened read-only from a path (and
    closed afterwards). A replay only reads it."""
    if disclosures is None or isinstance(disclosures, Vault):
        yield disclosures if disclosures is not None else agent.vault
        return
    if not isinstance(disclosures, str | os.PathLike):
        raise UsageError(
            "disclosures: expected the original's vault (a DisclosureVault or another Vault, "
            f"or the path of one), got {type(disclosures).__name__}",
            option="disclosures",
        )
    path = os.fspath(disclosures)
    if not isinstance(path, str) or not path or not os.path.isfile(path):
        raise FileError(
            f"disclosures: no vault at {path!r} (name the vault file the original run kept)",
            path=str(path),
            option="disclosures",
        )
    try:
        vault = DisclosureVault(path, readonly=True)
    except FileError as exc:  # NotAVaultError: a log, another database, not SQLite
        raise renamed(exc, "disclosures") from exc
    try:
        yield vault
    finally:
        vault.close()


async def _replay(
    agent: Agent,
    store: RowSource,
    run_id: str,
    until: int | None,
    vault: Vault | None,
    on_progress: Callable[[int, int], None] | None = None,
) -> ReplayResult:
    # the original is evidence first: a log that does not verify is not replayed
    with naming_run():
        shared_verifier(store).verify(run_id)
    recording = Recording(store, run_id, vault=vault)
    if recording.resumes is not None:
        if recording.answer is None:
            raise UsageError(
                f"run {run_id} resumes a pause, but its answer cannot be read (redacted: "
                "replay with the disclosure vault)"
            )
    elif recording.message is None:
        raise UsageError(f"run {run_id} has no recorded input (its seed never committed)")
    lineage = None
    if recording.parent_run_id is not None:
        if agent.store is not store:
            copy_ancestry(store, agent.store, recording.parent_run_id)
        lineage = agent._lineage(recording.parent_run_id, vault)
    hooks = _ReplayHooks(recording, until, on_progress)
    own = agent._policy(lineage)
    recorded_under = agent._policy(lineage, hooks.policy)
    if recorded_under is not None:
        hooks.redacts = recorded_under.document.matcher()
        hooks.redacting = True
    if hooks.policy is not None:
        # keys by what the agent's policy matches; patterns as written (two patterns cannot
        # be told equivalent)
        covers = own.document.matcher() if own is not None else (lambda key: False)
        hooks.policy_gap = [
            *(f"key {k!r}" for k in hooks.policy["keys"] if not covers(k)),
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
    own_ports = agent.config.ports
    ports = Ports(
        model=_RecordedModel(hooks, agent.config.provider),
        tools=_RecordedTools(hooks),
        decisions=_RecordedDecisions(hooks),
        clock=own_ports.clock,
        run_ids=own_ports.run_ids,
        salts=own_ports.salts,
        recorded_salts=hooks.commitments,
    )
    result = await agent._execute(
        recording.message,
        lineage,
        ports=ports,
        open_extra=link,
        replayed_policy=hooks.policy,
        log_format=recording.log_format,
        finish=hooks.finish,
        resume=recording.answer if recording.resumes is not None else None,
        run_time=recording.time_input,
    )
    return ReplayResult(
        original_run=run_id,
        result=result,
        calls_checked=hooks.checked,
        forked_at=until,
        answer_shown=REDACTED if hooks.redacts("final_answer") else result.answer,
    )


def replay_sync(
    agent: Agent,
    store: RowSource | str | os.PathLike[str],
    run_id: str,
    *,
    until: int | None = None,
    disclosures: Vault | str | os.PathLike[str] | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> ReplayResult:
    """:func:`replay` for code without an event loop (on the thread's loop, as
    ``Agent.run_sync``)."""
    if not loop_running():
        return run_sync(
            replay(
                agent, store, run_id, until=until, disclosures=disclosures, on_progress=on_progress
            )
        )
    raise UsageError(
        "replay_sync() was called inside a running event loop; use await agentfootprint.replay(...)"
    )
