"""Hand-built logs served under request projection 4 (docs/log-format.md section 8:
``served_system``, ``served_results``): runs written row by row through ``RunWriter`` into a
real store, each receipt minted by the library's ``RequestHasher`` from the state its rows
fold to, as the runtime mints it. No feature is needed: the state is what a feature (the
findings ledger) would commit, built by hand, so both verifiers and the report's page can be
given the same logs, valid ones and each kind of damage.

A run is a list of :class:`Step` (one commit each; ``call``: a receipt at the start of its
batch, for the state before it). Damage is said apart from the run: ``written`` replaces a
write's value in the rows only (the receipts still minted for the value the run meant),
``minted`` changes the state one call's receipt is minted from, and ``served`` the request it
hashes (a writer that hashed something else than the state serves: what a lenient reading of
a damaged edit would serve, so that only a verifier that refuses the edit fails the receipt).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from agentfootprint.logformat.fold import compress_digests
from agentfootprint.logformat.log_formats import LOG_FORMAT_V3
from agentfootprint.logformat.request import PIECE_KINDS, RequestHasher, build_request, projection
from agentfootprint.store.writer import RunWriter

__all__ = [
    "CHILD",
    "ROOT",
    "Damage",
    "Minter",
    "Step",
    "fold",
    "opened",
    "served_run",
    "write_run",
]

ROOT, CHILD = "run-root", "run-child"
T0 = 1_800_000_000_000

SYSTEM = [
    {"source": "base", "text": "You answer questions about the city museum."},
    {"source": "rules", "text": "Quote the tool's answer; never guess opening hours."},
]
LOOKUP = {
    "name": "lookup",
    "description": "Look a fact up in the museum's pages.",
    "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}},
}
LEDGER = [
    {"source": "findings", "text": "Open question: the museum's opening hours."},
    {"source": "findings", "text": "Established: the museum opens at 9 (lookup, call_1)."},
    {"source": "findings", "text": "Established: closed on Mondays; Sundays not yet known."},
]
TICKET = "[result of call_1 kept on the record: 1 fact filed in the ledger]"

Write = tuple[str, str, Any]  # (path, verb, value); value None for a delete


@dataclass(frozen=True)
class Step:
    """One commit: its stage, its writes, and whether a model call (a receipt) opens it."""

    stage: str
    writes: tuple[Write, ...] = ()
    call: bool = False


@dataclass(frozen=True)
class Damage:
    """What a damaged vector changes: ``written[(run, commit, path)]`` is the value the rows
    hold instead of the run's; ``minted[(run, call)]`` the state change a receipt is minted
    from instead of the state the rows fold to, ``served[(run, call)]`` the change to the
    request built from it before it is hashed; ``unchecked`` calls are minted without the
    projection's checks on ``cache_markers`` (as a writer that skipped them)."""

    written: Mapping[tuple[str, int, str], Any] = field(default_factory=dict)
    minted: Mapping[tuple[str, int], Callable[[dict[str, Any]], dict[str, Any]]] = field(
        default_factory=dict
    )
    served: Mapping[tuple[str, int], Callable[[dict[str, Any]], dict[str, Any]]] = field(
        default_factory=dict
    )
    unchecked: frozenset[tuple[str, int]] = frozenset()


def fold(state: dict[str, Any], writes: Sequence[Write]) -> dict[str, Any]:
    """The state after ``writes`` (new values are fresh copies, as a fold parses them)."""
    out = dict(state)
    for path, verb, value in writes:
        fresh = orjson.loads(orjson.dumps(value))
        if verb == "set":
            out[path] = fresh
        elif verb == "append":
            out[path] = [*out.get(path, []), *fresh]
        elif verb == "delete":
            out.pop(path, None)
        else:
            raise ValueError(f"no verb {verb!r} here")
    return out


class Minter:
    """Mints receipts as the writer does, call after call, under one projection: the
    digests of ``build_request(state)`` by one ``RequestHasher``, stored as ``keep``/``add``
    against the previous call's lists (a continued run's against its parent's last)."""

    def __init__(self, version: int = 4) -> None:
        self.version = version
        self.hasher = RequestHasher(version)
        self.previous: dict[str, Sequence[str]] = {kind: [] for kind in PIECE_KINDS}

    def fork(self) -> Minter:
        twin = Minter(self.version)
        twin.hasher, twin.previous = self.hasher.fork(), dict(self.previous)
        return twin

    def receipt(
        self,
        state: Mapping[str, Any],
        call: int,
        commit: int,
        *,
        unchecked: bool = False,
        served_as: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        if unchecked:  # the markers served as they are, checked against nothing
            markers = state["cache_markers"]
            request = build_request(
                {k: v for k, v in state.items() if k != "cache_markers"}, version=self.version
            )
            request["prompt_cache"] = markers
        else:
            request = build_request(state, version=self.version)
        if served_as is not None:
            request = served_as(request)
        served = self.hasher.digests(request)
        body: dict[str, Any] = {
            "call": call,
            "commit": commit,
            "model": served.model,
            "params": served.params,
            "request": served.request,
        }
        for kind in PIECE_KINDS:
            body[kind] = compress_digests(self.previous[kind], served.pieces(kind))
            self.previous[kind] = served.pieces(kind)
        return body


def opened(run_id: str, parent: RunWriter | None = None, version: int = 4) -> dict[str, Any]:
    reference = None
    if parent is not None:
        reference = {"run_id": parent.run_id, "events": parent.seq, "head": parent.head.hex()}
    return {
        "format": LOG_FORMAT_V3,
        "run_id": run_id,
        "conversation_id": ROOT,
        "parent": reference,
        "agent": {"id": "agent", "name": "Museum helper"},
        "model": "m-museum",
        "provider": "mock",
        "options": {"record_receipt": True},
        "projection": projection(version).describe(),
        "policy": None,
        "policy_digest": None,
        "library": "agentfootprint vectors",
        "canon": "RFC8785",
        "hash": "SHA-256",
        "clock": {"ts": "unix-ms"},
    }


def write_run(
    store: Any,
    run_id: str,
    steps: Sequence[Step],
    minter: Minter,
    *,
    state: dict[str, Any] | None = None,
    parent: RunWriter | None = None,
    damage: Damage | None = None,
) -> tuple[RunWriter, dict[str, Any]]:
    """Write one run of ``steps``; returns its writer and the state it meant to end with."""
    damage = damage or Damage()
    ticks = itertools.count(T0 + (10_000 if parent is not None else 0))
    writer = RunWriter(store, run_id, clock=lambda: next(ticks))
    writer.append([("run.open", opened(run_id, parent, minter.version))])
    state = dict(state or {})
    calls = 0
    for commit, step in enumerate(steps):
        batch: list[tuple[str, Any]] = []
        if step.call:
            change = damage.minted.get((run_id, calls))
            served_from = change(dict(state)) if change is not None else state
            body = minter.receipt(
                served_from,
                calls,
                commit,
                unchecked=(run_id, calls) in damage.unchecked,
                served_as=damage.served.get((run_id, calls)),
            )
            batch.append(("receipt", body))
            calls += 1
        for path, verb, value in step.writes:
            row: dict[str, Any] = {"commit": commit, "path": path, "verb": verb}
            if verb != "delete":
                row["value"] = damage.written.get((run_id, commit, path), value)
            batch.append(("write", row))
        marker = {
            "commit": commit,
            "stage": step.stage,
            "stage_run": f"{step.stage}#{commit}",
            "writes": len(step.writes),
        }
        batch.append(("commit", marker))
        writer.append(batch)
        state = fold(state, step.writes)
    close = {"outcome": "answered", "commits": len(steps), "receipts": calls, "calls": calls}
    writer.append([("run.close", close)])
    return writer, state


def _assistant(text: str, *calls: dict[str, Any]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = list(calls)
    return message


ASKED = {"id": "call_1", "name": "lookup", "arguments": {"q": "opening hours"}}
RESULT = {
    "role": "tool",
    "tool_call_id": "call_1",
    "name": "lookup",
    "content": "Opening hours: 9:00-17:00, Tuesday to Sunday. Closed on Mondays. " * 4,
}

#: the root run: a request-only piece after a slice (call 0); a slice that drops a piece, a
#: changed piece and a tool result replaced on the wire (call 1)
ROOT_STEPS = (
    Step(
        "seed",
        (
            ("model", "set", "m-museum"),
            ("params", "set", {"temperature": 0}),
            ("system_pieces", "set", SYSTEM),
            ("tool_schemas", "set", [LOOKUP]),
            ("history", "set", [{"role": "user", "content": "When does the museum open?"}]),
        ),
    ),
    Step("findings", (("served_system", "set", [{"system": [0, None]}, {"piece": LEDGER[0]}]),)),
    Step("call-llm", (("history", "append", [_assistant("", ASKED)]),), call=True),
    Step("tool-calls", (("history", "append", [RESULT]),)),
    Step(
        "findings",
        (
            ("served_system", "set", [{"system": [0, 1]}, {"piece": LEDGER[1]}]),
            ("served_results", "set", [{"tool_call_id": "call_1", "content": TICKET}]),
        ),
    ),
    Step(
        "call-llm",
        (
            ("history", "append", [_assistant("It opens at 9.")]),
            ("final_answer", "set", "It opens at 9."),
        ),
        call=True,
    ),
)
#: its continuation: the edits deleted (system_pieces served whole: the piece removed), then
#: a piece before a slice
CHILD_STEPS = (
    Step(
        "seed",
        (
            ("history", "append", [{"role": "user", "content": "And on Sundays?"}]),
            ("served_system", "delete", None),
            ("served_results", "delete", None),
        ),
    ),
    Step("call-llm", (("history", "append", [_assistant("Let me check Sundays.")]),), call=True),
    Step("findings", (("served_system", "set", [{"piece": LEDGER[2]}, {"system": [1, None]}]),)),
    Step(
        "call-llm",
        (("history", "append", [_assistant("Open on Sundays.")]),),
        call=True,
    ),
)


def served_run(
    store: Any,
    damage: Damage | None = None,
    extra: Mapping[tuple[str, int], Sequence[Write]] | None = None,
) -> None:
    """The root run and its continuation (``extra[(run, commit)]``: writes added to that
    commit, in the rows and in the state the receipts are minted from)."""
    added = extra or {}

    def steps(run_id: str, base: Sequence[Step]) -> list[Step]:
        return [
            Step(s.stage, (*s.writes, *added.get((run_id, i), ())), s.call)
            for i, s in enumerate(base)
        ]

    minter = Minter()
    root, state = write_run(store, ROOT, steps(ROOT, ROOT_STEPS), minter, damage=damage)
    write_run(
        store,
        CHILD,
        steps(CHILD, CHILD_STEPS),
        minter.fork(),
        state=state,
        parent=root,
        damage=damage,
    )
