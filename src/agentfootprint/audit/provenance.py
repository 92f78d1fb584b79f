"""Why a state key holds its value: the chain of writes, and the reads behind each.

:func:`why` verifies the run first (and its ancestors), then walks its verified events,
never an index. It starts from the commit that last wrote the key at or before a given
commit, and goes back, write by write:

* a run recorded with ``write_provenance="reads-prefix"`` (log format v6) names on each
  write the keys its stage had read before it (docs/log-format.md section 5.10); each read
  key leads to the write that last gave it its value before that commit (in the same commit
  when the key did not exist before it; in the parent run when the run inherited it);
* the walk stops at a **tool result** (a ``history`` write holding a ``tool`` message), at
  the **user message** (a ``history`` write holding the ``user`` message, or
  ``user_message``), and at a write whose stage read nothing (its value came from the stage's
  code, the agent's configuration or a port);
* without recorded reads (any other log format) the walk says so and stops at the first
  write; element-level provenance stands in: each message of ``history`` as that stage saw
  it, with the commit that appended it (in every log: no option needed).

The honest limit: in an agent loop almost every write follows a model call, which read
``history`` and every other served key, so key-level provenance is coarse (the chain says
which keys could have mattered, never which did). :func:`why` names each step's read keys
and the writes they lead to; it cannot say more than the log.
"""

from __future__ import annotations

import os
from bisect import bisect_right
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

from agentfootprint.audit.sources import check_run_id, naming_run, opened
from agentfootprint.errors import UsageError
from agentfootprint.logformat.canonical import parse
from agentfootprint.logformat.log_formats import log_format
from agentfootprint.logformat.shared_lists import as_list
from agentfootprint.verify.verifier import RowSource, Verifier, shared_verifier

__all__ = ["Message", "Step", "Why", "why"]

#: the state key the conversation is held in (every projection's ``messages``)
HISTORY: Final = "history"
#: what a step's value came from
TOOL_RESULT, USER_MESSAGE = "tool-result", "user-message"
NOTHING_READ, READS, READS_UNKNOWN = "nothing-read", "reads", "reads-unknown"


@dataclass(frozen=True, kw_only=True, slots=True)
class Step:
    """One write on the chain: which commit wrote ``key``, and where its value came from."""

    run_id: str
    commit: int
    stage_run: str
    seq: int
    key: str
    verb: str
    #: the model call the commit made (its reply is among what it wrote), or None
    call: int | None
    #: the keys its stage read before it (log format v6), None when not recorded
    reads: tuple[str, ...] | None
    #: ``tool-result``, ``user-message``, ``nothing-read``, ``reads`` (followed) or
    #: ``reads-unknown`` (not recorded: the walk stops here)
    origin: str
    #: each read key and the step (its index in :attr:`Why.steps`) that gave it its value
    sources: tuple[tuple[str, int], ...] = ()
    #: the tool results it wrote: ``{"tool", "tool_call_id"}`` each
    tools: tuple[dict[str, Any], ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "commit": self.commit,
            "stage_run": self.stage_run,
            "seq": self.seq,
            "key": self.key,
            "verb": self.verb,
            "call": self.call,
            "reads": None if self.reads is None else list(self.reads),
            "origin": self.origin,
            "sources": [{"key": k, "step": i} for k, i in self.sources],
            "tools": list(self.tools),
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class Message:
    """One message of ``history`` and the commit that appended it (element-level)."""

    index: int
    role: Any
    run_id: str
    commit: int
    stage_run: str
    #: a tool message's tool and call id (None for other roles)
    tool: Any = None
    tool_call_id: Any = None

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "role": self.role,
            "run_id": self.run_id,
            "commit": self.commit,
            "stage_run": self.stage_run,
            "tool": self.tool,
            "tool_call_id": self.tool_call_id,
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class Why:
    """The answer of :func:`why`: ``steps[0]`` is the write asked about."""

    run_id: str
    key: str
    at: int
    #: every run on the chain recorded its writes' reads (log format v6)
    reads_recorded: bool
    steps: tuple[Step, ...]
    #: ``history`` with each message's appending commit: the key's own messages when the
    #: key is ``history``, else history as the first step's stage saw it when its reads
    #: were not recorded; None otherwise
    messages: tuple[Message, ...] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "key": self.key,
            "at": self.at,
            "reads_recorded": self.reads_recorded,
            "steps": [s.to_json() for s in self.steps],
            "messages": None if self.messages is None else [m.to_json() for m in self.messages],
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class _Write:
    seq: int
    commit: int
    path: str
    verb: str
    value: Any
    reads: tuple[str, ...] | None


@dataclass(kw_only=True, slots=True)
class _Run:
    """One verified run's writes, by key, and its commits' stages and calls."""

    run_id: str
    parent: str | None
    start: Mapping[str, Any]
    commits: int
    stage_runs: list[str] = field(default_factory=list)
    calls: dict[int, int] = field(default_factory=dict)
    by_key: dict[str, list[_Write]] = field(default_factory=dict)

    def last(self, key: str, before: int) -> _Write | None:
        """The last write of ``key`` in a commit before ``before``."""
        writes = self.by_key.get(key, [])
        i = bisect_right([w.commit for w in writes], before - 1)
        return writes[i - 1] if i else None


def why(
    source: RowSource | str | os.PathLike[str],
    run_id: str,
    key: str,
    *,
    at: int | None = None,
    verifier: Verifier | None = None,
) -> Why:
    """Why ``key`` holds its value in run ``run_id`` at commit ``at`` (default: the run's
    last): the run is verified first (a failure raises
    :class:`~agentfootprint.errors.VerificationError`); an unknown run, a commit out of
    range or a key not in the state there raise :class:`~agentfootprint.errors.UsageError`."""
    check_run_id(run_id)
    if not isinstance(key, str) or not key:
        raise UsageError(f"why: the key must be a non-empty string, got {key!r}")
    if at is not None and (isinstance(at, bool) or not isinstance(at, int) or at < -1):
        raise UsageError(f"why: at must be a commit (-1 or more), got {at!r}")
    with opened(source) as rows, naming_run():
        return _Walk(rows, verifier or shared_verifier(rows)).answer(run_id, key, at)


class _Walk:
    def __init__(self, source: RowSource, verifier: Verifier) -> None:
        self.source = source
        self.verifier = verifier
        self.runs: dict[str, _Run] = {}
        self.elements: dict[tuple[str, str], list[tuple[Any, tuple[str, int]]]] = {}

    def run(self, run_id: str) -> _Run:
        found = self.runs.get(run_id)
        if found is not None:
            return found
        verified = self.verifier.verify(run_id)  # ancestors first; a failure raises
        parent = verified.ancestors[-1] if verified.ancestors else None
        start: Mapping[str, Any] = (
            self.verifier.verify(parent).final_state if parent is not None else {}
        )
        run = _Run(run_id=run_id, parent=parent, start=start, commits=verified.commits)
        records = log_format(verified.log_format).records_reads
        for row in self.source.read(run_id):
            body = parse(row.body)
            if row.type == "write":
                reads = tuple(body["reads"]) if records else None
                write = _Write(
                    seq=row.seq,
                    commit=body["commit"],
                    path=body["path"],
                    verb=body["verb"],
                    value=body.get("value"),
                    reads=reads,
                )
                run.by_key.setdefault(write.path, []).append(write)
            elif row.type == "receipt":
                run.calls.setdefault(body["commit"], body["call"])
            elif row.type == "commit":
                run.stage_runs.append(body["stage_run"])
                if "call" in body and type(body["call"]) is int:
                    run.calls.setdefault(body["commit"], body["call"])
        self.runs[run_id] = run
        return run

    # -- where a key's value came from -------------------------------------------------------

    def producer(self, run: _Run, key: str, before: int) -> tuple[_Run, _Write] | None:
        """The write that gave ``key`` its value as a commit ``before`` started: in this
        run, else (inherited) in its ancestors."""
        while True:
            write = run.last(key, before)
            if write is not None:
                return (run, write) if write.verb != "delete" else None
            if run.parent is None or key not in run.start:
                return None
            run = self.run(run.parent)
            before = run.commits

    def elements_of(self, run: _Run, key: str, upto: int) -> list[tuple[Any, tuple[str, int]]]:
        """``key``'s items after commit ``upto``, each with (run, commit) that put it there:
        an append's items are its commit's; a ``set`` keeps the origins of the items it
        leaves as they were (a full-mode writer records the history whole each time). The
        runs it was inherited through are folded oldest first (no recursion)."""
        chain = [run]  # the run, then the ancestors it inherited the key through
        while (
            chain[-1].parent is not None
            and key in chain[-1].start
            and (chain[-1].parent, key) not in self.elements
        ):
            chain.append(self.run(chain[-1].parent))
        oldest = chain[-1]
        inherited = oldest.parent is not None and key in oldest.start
        items = self.elements[(oldest.parent, key)] if inherited and oldest.parent else []
        for where in reversed(chain):
            last = upto if where is run else where.commits - 1
            items = _folded(where, key, items, last)
            if last >= where.commits - 1:
                self.elements[(where.run_id, key)] = items
        return items

    def messages(self, run: _Run, upto: int) -> tuple[Message, ...]:
        found = []
        for index, (value, (run_id, commit)) in enumerate(self.elements_of(run, HISTORY, upto)):
            item = value if isinstance(value, dict) else {}
            role = item.get("role")
            found.append(
                Message(
                    index=index,
                    role=role,
                    run_id=run_id,
                    commit=commit,
                    stage_run=self.run(run_id).stage_runs[commit],
                    tool=item.get("name") if role == "tool" else None,
                    tool_call_id=item.get("tool_call_id") if role == "tool" else None,
                )
            )
        return tuple(found)

    # -- the walk ---------------------------------------------------------------------------

    def answer(self, run_id: str, key: str, at: int | None) -> Why:
        run = self.run(run_id)
        last = run.commits - 1
        at = last if at is None else at
        if at > last:
            raise UsageError(
                f"why: run {run_id} has {run.commits} commits (0 to {last}), not commit {at}"
            )
        first = self.producer(run, key, at + 1)
        if first is None:
            raise UsageError(
                f"why: no key {key!r} in the state of run {run_id} at commit {at} (see "
                f"`agentfootprint state DB {run_id} --at {at}`)"
            )
        steps: list[Step] = []
        index = {(first[0].run_id, first[1].seq): 0}
        queue: deque[tuple[_Run, _Write]] = deque([first])
        while queue:  # breadth first: each write once, numbered as it is first reached
            where, write = queue.popleft()
            origin, tools = self.origin(where, write)
            sources = []
            for read in (write.reads or ()) if origin == READS else ():
                found = self.source_of(where, write, read)
                if found is None:  # (a verified v6 log names only keys that existed)
                    continue
                at_seq = (found[0].run_id, found[1].seq)
                if at_seq not in index:
                    index[at_seq] = len(index)
                    queue.append(found)
                sources.append((read, index[at_seq]))
            steps.append(
                Step(
                    run_id=where.run_id,
                    commit=write.commit,
                    stage_run=where.stage_runs[write.commit],
                    seq=write.seq,
                    key=write.path,
                    verb=write.verb,
                    call=where.calls.get(write.commit),
                    reads=write.reads,
                    origin=origin,
                    sources=tuple(sources),
                    tools=tools,
                )
            )
        root_run, root = first
        messages = None
        if key == HISTORY:
            messages = self.messages(root_run, root.commit)
        elif root.reads is None:  # element-level provenance stands in for the reads
            messages = self.messages(root_run, root.commit - 1)
        return Why(
            run_id=run_id,
            key=key,
            at=at,
            reads_recorded=all(s.reads is not None for s in steps),
            steps=tuple(steps),
            messages=messages,
        )

    def source_of(self, run: _Run, write: _Write, key: str) -> tuple[_Run, _Write] | None:
        """The write a read of ``key`` by ``write``'s stage saw: the one that gave the key
        its value before the commit (in this run or, inherited, an ancestor's; when the
        same commit also writes the key, the log cannot say which value the stage read: the
        earlier is named), else the same commit's own (the key did not exist before it)."""
        earlier = self.producer(run, key, write.commit)
        if earlier is not None:
            return earlier
        for same in run.by_key.get(key, []):
            if same.commit == write.commit and same is not write and same.verb != "delete":
                return run, same
        return None

    def origin(self, run: _Run, write: _Write) -> tuple[str, tuple[dict[str, Any], ...]]:
        if write.path == HISTORY and write.verb in ("set", "append"):
            new = write.value if isinstance(write.value, list) else []
            if write.verb == "set":  # what it added to what was there (a full-mode set)
                before = [v for v, _ in self.elements_of(run, HISTORY, write.commit - 1)]
                new = new[_same_prefix(before, new) :]
            items = [m for m in new if isinstance(m, dict)]
            tools = tuple(
                {"tool": m.get("name"), "tool_call_id": m.get("tool_call_id")}
                for m in items
                if m.get("role") == "tool"
            )
            if tools:
                return TOOL_RESULT, tools
            if any(m.get("role") == "user" for m in items):
                return USER_MESSAGE, ()
        if write.path == "user_message":
            return USER_MESSAGE, ()
        if write.reads is None:
            return READS_UNKNOWN, ()
        return (READS if write.reads else NOTHING_READ), ()


def _folded(
    run: _Run, key: str, items: list[tuple[Any, tuple[str, int]]], upto: int
) -> list[tuple[Any, tuple[str, int]]]:
    """``items`` (a list's items and their origins) after ``run``'s writes of ``key`` up to
    commit ``upto``: a new list (``items`` is left as it was)."""
    out = list(items)
    for write in run.by_key.get(key, []):
        if write.commit > upto:
            break
        origin = (run.run_id, write.commit)
        if write.verb == "append":
            out.extend((v, origin) for v in write.value)
        elif write.verb == "set" and isinstance(write.value, list):
            kept = _same_prefix([v for v, _ in out], write.value)
            out = out[:kept] + [(v, origin) for v in write.value[kept:]]
        else:  # deleted, or set to what is not a list
            out = []
    return out


def _same_prefix(old: list[Any], new: list[Any]) -> int:
    """How many leading items ``new`` keeps from ``old`` (equal as JSON)."""
    n = 0
    for a, b in zip(old, new, strict=False):
        if a is not b and _json(a) != _json(b):
            break
        n += 1
    return n


def _json(value: Any) -> bytes:
    return orjson.dumps(value, default=as_list, option=orjson.OPT_SORT_KEYS)
