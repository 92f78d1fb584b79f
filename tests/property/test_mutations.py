"""Random mutations of real logs are never VALID, and raise nothing but documented errors.

Four runs are recorded once per module into one SQLite file: a parent and its continuation
(tool calls, a tool error, unicode arguments), a run under a redaction policy (commitments
in tool-call arguments and inside JSON text results) and a ``commit_values="full"`` classic
run. Each example applies one :class:`Mutation` to a fresh copy through a raw ``sqlite3``
connection with the append-only triggers dropped, then verifies the whole file with
``Verifier.verify_all()`` (runs found from the events) and checks:

* a run whose stored rows differ in any way from what was recorded (a value, its SQLite
  type, a row more or less) is INVALID; UNSEALED only when its rows are a strict prefix of
  the recorded ones (rows cut from the end: what a crash leaves, which only a seal can tell
  apart);
* a run whose rows are intact but whose ancestor was mutated is INVALID with ``ancestry``;
* nothing raises but the store's documented errors.

Mutations: *plain* ones change stored values and leave hashes alone (any column of any row:
``seq``, ``type``, ``ts``, ``run_id``, ``body`` -- flipped bytes, SQLite TEXT, another JSON
type, a number --, ``event_hash``, ``chain_hash``; rows dropped, duplicated, swapped);
*rechained* ones change a body's meaning, canonicalise it again and recompute every event
hash and chain link, so that only the checks on what values are and say can catch them (a
projected state key set to an object or a string, a receipt member of another type, a
malformed or opened commitment, a row of another type, a row dropped or repeated).

A mutation is built from plain numbers reduced against the recorded rows, and every choice
it offers changes the stored bytes or types by construction (a replacement equal to what
is there is never offered), so no example is discarded. Rechained changes that the format
deliberately does not bind (``ts``, stage names, event payload contents, dropping an
``event`` row) are not generated: ``docs/log-format.md`` lists what v1 does not protect.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import re
import shutil
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import event, example, given
from hypothesis import strategies as st

import agentfootprint as af
from agentfootprint.logformat.canonical import canon, parse
from agentfootprint.logformat.chain import EVENT_TYPES, shown
from agentfootprint.testing.tamper import Row, plain, read_rows, rewrite, tampering

#: these tests edit or read the schema-1 ``events`` table directly (docs/log-format.md
#: appendix B): every new file of this module is created with storage schema 1
#: (tests/conftest.py)
NEW_FILE_SCHEMA = 1

RUNS = ("parent", "child", "redacted", "full")
COLUMNS = ("seq", "type", "ts", "run_id", "body", "event_hash", "chain_hash")
PROJECTED = ("model", "params", "system_pieces", "history", "tool_schemas")
PIECES = ("system", "messages", "tools")
HEX = "ab" * 32
REMOVE = object()  # a replacement that removes the member

#: Replacement JSON values of every type (some the right type for a member, some not).
ANY_VALUE: tuple[Any, ...] = (
    None,
    True,
    False,
    0,
    -1,
    7,
    1.5,
    "",
    "x",
    "answered",
    HEX,
    HEX.upper(),
    [],
    [1],
    ["x"],
    [{"role": "user", "content": "forged"}],
    {},
    {"k": 1},
    {"keep": 0, "add": []},
    {"keep": 0, "add": [HEX]},
    {"keep": 1, "add": []},
    {"run_id": "nope", "events": 1, "head": HEX},
)
NOT_STRING = tuple(v for v in ANY_VALUE if not isinstance(v, str))
NOT_ARRAY = tuple(v for v in ANY_VALUE if not isinstance(v, list))
NOT_OBJECT = tuple(v for v in ANY_VALUE if not isinstance(v, dict))
NOT_INT = tuple(v for v in ANY_VALUE if type(v) is not int)


@dataclass(frozen=True)
class Mutation:
    """One change to one run, as plain numbers reduced against its recorded rows.

    ``kind``: ``column`` (set one column of row ``seq``; ``pick`` the column, ``variant``
    the replacement), ``drop``, ``duplicate``, ``swap`` (with row ``other``), or rechained:
    ``member`` (``pick`` a checked member of the body, ``variant`` its replacement),
    ``retype``, ``rechained-drop``, ``rechained-duplicate``. ``other`` and ``mask`` also
    place and shape a flipped byte.
    """

    run: str
    kind: str
    seq: int = 0
    pick: int = 0
    variant: int = 0
    other: int = 0
    mask: int = 1


KINDS = (
    "column",
    "drop",
    "duplicate",
    "swap",
    "member",
    "served",
    "retype",
    "rechained-drop",
    "rechained-duplicate",
)


def _mutations(
    run: st.SearchStrategy[str], kind: st.SearchStrategy[str]
) -> st.SearchStrategy[Mutation]:
    return st.builds(
        Mutation,
        run=run,
        kind=kind,
        seq=st.integers(0, 200),
        pick=st.integers(0, 50),
        variant=st.integers(0, 50),
        other=st.integers(0, 10_000),
        mask=st.integers(1, 255),
    )


#: every kind on every run; commitments only where they are (the redacted run)
mutations = _mutations(st.sampled_from(RUNS), st.sampled_from((*KINDS, "commitment"))).map(
    lambda m: dataclasses.replace(m, run="redacted") if m.kind == "commitment" else m
)


class Recorded:
    """The recorded file, its run ids, and each run's rows (decoded and as stored)."""

    def __init__(self, path: Path, ids: dict[str, str], scratch: Path) -> None:
        self.path = path
        self.ids = ids
        self.scratch = scratch
        self.counter = itertools.count()
        conn = sqlite3.connect(path)
        try:
            self.rows = {name: read_rows(conn, run_id) for name, run_id in ids.items()}
            self.stored = stored_runs(conn)
        finally:
            conn.close()
        self.parent_of = {ids["child"]: ids["parent"]}

    def __repr__(self) -> str:  # Hypothesis prints this with each failing example
        return "Recorded(...)"


def stored_runs(conn: sqlite3.Connection) -> dict[str, list[tuple[Any, ...]]]:
    """Every run's rows exactly as stored, each value with its SQLite type (TEXT read as its
    bytes, so text that is not UTF-8 is compared too), keyed as the verifier names the run."""
    conn.text_factory = bytes
    runs: dict[str, list[tuple[Any, ...]]] = {}
    columns = ", ".join(f"{c}, typeof({c})" for c in COLUMNS)
    query = f"SELECT run_id, typeof(run_id), {columns} FROM events ORDER BY run_id, seq"
    for run_id, kind, *values in conn.execute(query):
        if kind == b"text":  # typeof() is TEXT too, so bytes here
            try:
                run_id = run_id.decode("utf-8")
            except UnicodeDecodeError:
                run_id = run_id.decode("utf-8", "surrogateescape")
        runs.setdefault(shown(run_id), []).append(tuple(values))
    return runs


def _lookup(args: dict[str, Any]) -> Any:
    return {"found": args.get("q"), "ssn": "123-45-6789", "items": [1, 2.5, None]}


def _calc(args: Any) -> Any:
    raise ZeroDivisionError("division by zero")


SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}


def _tools() -> list[af.Tool]:
    return [
        af.define_tool(name="lookup", description="look up", input_schema=SCHEMA, execute=_lookup),
        af.define_tool(name="calc", description="compute", input_schema=SCHEMA, execute=_calc),
    ]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    path = tmp_path_factory.mktemp("mutations") / "runs.db"
    store = af.SqliteStore(path)
    agent = af.Agent(
        provider=af.MockProvider(
            [
                af.reply(
                    "let me look",
                    tool_calls=[af.tool_call("lookup", {"q": "x"}), af.tool_call("calc", {"q": 5})],
                ),
                af.reply("again", tool_calls=[af.tool_call("lookup", '{"q": "y é 😀"}')]),
                "the answer",
                af.reply("", tool_calls=[af.tool_call("calc", {"q": "1/0"})]),
                "still the answer",
            ]
        ),
        model="m",
        system=["you are careful", "second piece"],
        tools=_tools(),
        store=store,
        temperature=0.5,
    )
    parent = agent.run_sync("first question")
    child = agent.run_sync("follow up", continue_from=parent)
    redacted = af.Agent(
        provider=af.MockProvider(
            [
                af.reply("", tool_calls=[af.tool_call("lookup", {"q": "ann", "ssn": "999"})]),
                "found her",
            ]
        ),
        model="m",
        system="sys",
        tools=_tools(),
        store=store,
        redact=af.RedactionPolicy(keys=["ssn"]),
    ).run_sync('{"ssn": "555", "ask": "who"}')
    full = af.Agent(
        provider=af.MockProvider(
            [af.reply("", tool_calls=[af.tool_call("lookup", {"q": "z"})]), "done"]
        ),
        model="other",
        system="sys",
        tools=_tools(),
        store=store,
        commit_values="full",
        react_mode="classic",
    ).run_sync("hello")
    ids = {
        "parent": parent.run_id,
        "child": child.run_id,
        "redacted": redacted.run_id,
        "full": full.run_id,
    }
    for run_id, result in af.Verifier(store).verify_all():
        assert isinstance(result, af.RunVerification), (run_id, result)
        assert result.outcome is af.Outcome.VALID_UNSIGNED
    store.close()
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA journal_mode=DELETE")  # one self-contained file to copy
    finally:
        conn.close()
    return Recorded(path, ids, tmp_path_factory.mktemp("copies"))


# -- plain mutations ---------------------------------------------------------------------------


class AsText(bytes):
    """Bytes to store as SQLite TEXT (``CAST(? AS TEXT)``), valid UTF-8 or not."""


#: a canonical-looking body nested past the depth limit, holding a long integer
DEEP = b'{"x":' + b"[" * 950 + b"12345678901234567" + b"]" * 950 + b"}"


def _flipped(data: bytes, position: int, mask: int) -> bytes:
    changed = bytearray(data)
    changed[position % len(changed)] ^= mask
    return bytes(changed)


def _column_values(column: str, value: Any, m: Mutation, count: int) -> list[Any]:
    """Replacements that store differently from ``value`` whatever the column's affinity
    makes of them (no integral float or numeric text in an INTEGER column, no PK clash)."""
    if column == "seq":
        return [count + m.other % 5, -1 - m.other % 5, value + 0.5, f"x{value}", b"\x01", 2**62]
    if column == "ts":
        return [value + 1 + m.other % 1000, value - 1, value + 0.5, "soon", b"\x01", 2**53, 0]
    if column == "type":
        return [*sorted(EVENT_TYPES - {value}), "seal", "", 7, value.encode(), value.upper()]
    if column == "run_id":
        return [f"x{value}", value.encode(), f"{value} ", 12345]
    flipped = _flipped(value, m.other, m.mask)
    if column == "body":
        text = value.decode("utf-8")
        return [
            flipped,
            text,  # the same JSON, stored as TEXT
            flipped.decode("utf-8", "replace"),
            b"[]",
            b"1",
            b'"x"',
            b"null",
            b"{}",
            value + b" ",
            value[:-1],
            b"\xff" + value,
            7,
            1.5,
            canon(list(parse(value).values())),  # canonical, of another JSON type
            DEEP,
            AsText(b"\xff" + value),  # TEXT that is not UTF-8
        ]
    return [flipped, value[:-1], value + b"\x00", value.hex(), 0, 1.5, b"", bytes(32)]


def _differs(new: Any, old: Any) -> bool:
    return type(new) is not type(old) or new != old


def apply_plain(m: Mutation, rows: Sequence[Row], run_id: str, conn: sqlite3.Connection) -> None:
    count = len(rows)
    row = rows[m.seq % count]
    where = (run_id, row.seq)
    if m.kind == "column":
        column = COLUMNS[m.pick % len(COLUMNS)]
        old = run_id if column == "run_id" else getattr(row, column)
        values = [v for v in _column_values(column, old, m, count) if _differs(v, old)]
        new = values[m.variant % len(values)]
        placeholder = "CAST(? AS TEXT)" if isinstance(new, AsText) else "?"
        conn.execute(
            f"UPDATE events SET {column} = {placeholder} WHERE run_id = ? AND seq = ?",
            (bytes(new) if isinstance(new, AsText) else new, *where),
        )
    elif m.kind == "drop":
        conn.execute("DELETE FROM events WHERE run_id = ? AND seq = ?", where)
    elif m.kind == "duplicate":
        conn.execute(
            "INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                run_id,
                count + m.other % 3,
                row.type,
                row.ts,
                row.body,
                row.event_hash,
                row.chain_hash,
            ),
        )
    else:  # swap two rows' seqs
        second = m.other % count
        if second == row.seq:
            second = (second + 1) % count
        update = "UPDATE events SET seq = ? WHERE run_id = ? AND seq = ?"
        conn.execute(update, (-1, run_id, row.seq))
        conn.execute(update, (row.seq, run_id, second))
        conn.execute(update, (second, run_id, -1))


# -- rechained mutations -----------------------------------------------------------------------

Choice = tuple[tuple[str | int, ...], Sequence[Any]]  # a member's path, its replacements
Verdicts = list[tuple[str, af.RunVerification | af.VerificationError]]


def _served(rows: Sequence[Row], index: int) -> bool:
    """Whether the write at ``index`` reaches a later receipt (no set or delete of its key in
    between): a change to its value then changes what that receipt must say."""
    write = rows[index].value
    if write["path"] not in PROJECTED or write["verb"] == "delete":
        return False
    for later in rows[index + 1 :]:
        body = later.value
        if later.type == "receipt" and body["commit"] > write["commit"]:
            return True
        if (
            later.type == "write"
            and body["path"] == write["path"]
            and body["verb"]
            in (
                "set",
                "delete",
            )
        ):
            return False
    return False


def _commitment_choices(body: Any, path: tuple[str | int, ...] = ()) -> list[Choice]:
    """Commitments (direct, or inside JSON text) made malformed, or opened to plaintext under
    the policy key they sit under: ``commitment`` or ``leak``."""
    found: list[Choice] = []
    if isinstance(body, dict):
        for key, child in body.items():
            if isinstance(child, dict) and set(child) == {"$commit"}:
                digest = child["$commit"]
                broken = [{"$commit": digest.upper()}, {"$commit": digest[:-1]}]
                broken.append({"$commit": digest, "extra": 1})
                opened = ["123-45-6789"] if key == "ssn" else []
                found.append(((*path, key), [*broken, *opened]))
            else:
                found.extend(_commitment_choices(child, (*path, key)))
    elif isinstance(body, list):
        for index, child in enumerate(body):
            found.extend(_commitment_choices(child, (*path, index)))
    elif isinstance(body, str):
        hit = re.search(r'\{"\$commit":"([0-9a-f]{64})"\}', body)
        if hit is not None:
            malformed = body.replace(hit.group(1), hit.group(1).upper(), 1)
            choices = [malformed]
            if body[: hit.start()].endswith('"ssn":'):
                choices.append(body[: hit.start()] + '"plain"' + body[hit.end() :])
            found.append((path, choices))
    return found


def _choices(rows: Sequence[Row], index: int, receipted: bool) -> list[Choice]:
    """The members of row ``index`` whose change its own run's checks must catch, each with
    the replacements that do (values that leave it valid but unbound are not offered)."""
    row = rows[index]
    body = row.value
    kind = row.type
    out: list[Choice] = _commitment_choices(body)
    if kind == "receipt":
        for name in ("call", "commit", "model", "params", "request", *PIECES):
            out.append(((name,), (*ANY_VALUE, REMOVE)))
    elif kind == "write":
        out.append((("commit",), (*ANY_VALUE, REMOVE)))
        out.append((("path",), (*NOT_STRING, "", REMOVE)))
        out.append((("verb",), (*NOT_STRING, "frobnicate", REMOVE)))
        out.append((("extra",), ANY_VALUE))
        if body["verb"] == "delete":
            out.append((("value",), ANY_VALUE))
        else:
            out.append((("value",), (REMOVE,)))
            if body["verb"] == "append":
                out.append((("value",), NOT_ARRAY))
            elif body["verb"] == "merge":
                out.append((("value",), NOT_OBJECT))
            if _served(rows, index):
                out.append((("value",), ANY_VALUE))
    elif kind == "commit":
        out.append((("commit",), (*ANY_VALUE, REMOVE)))
        out.append((("writes",), (*ANY_VALUE, REMOVE)))
        out.append((("stage",), (*NOT_STRING, REMOVE)))
        out.append((("stage_run",), (*NOT_STRING, REMOVE)))
    elif kind == "event":
        out.append((("name",), (*NOT_STRING, REMOVE)))
        out.append((("payload",), (*NOT_OBJECT, REMOVE)))
    elif kind == "run.close":
        out.append((("outcome",), (*NOT_STRING, "bogus", REMOVE)))
        out.append((("commits",), (*ANY_VALUE, REMOVE)))
        out.append((("receipts",), (*ANY_VALUE, REMOVE)))
        if receipted:
            out.append((("calls",), (*ANY_VALUE, REMOVE)))
    else:  # run.open
        out.append((("format",), (*ANY_VALUE, REMOVE)))
        out.append((("run_id",), (*ANY_VALUE, REMOVE)))
        continued = body.get("parent") is not None
        conversations = (*ANY_VALUE, REMOVE) if continued else (*NOT_STRING, "", REMOVE)
        out.append((("conversation_id",), conversations))
        for name in ("parent", "policy", "policy_digest"):  # absent reads as null
            present = body.get(name) is not None
            out.append(((name,), (*ANY_VALUE, REMOVE) if present else ANY_VALUE))
    return out


def _at(body: Any, path: tuple[str | int, ...]) -> Any:
    for part in path:
        body = body[part]
    return body


def _replace(body: Any, path: tuple[str | int, ...], new: Any) -> None:
    target = _at(body, path[:-1])
    if new is REMOVE:
        del target[path[-1]]
    else:
        target[path[-1]] = copy.deepcopy(new)


def _is_new(new: Any, body: Any, path: tuple[str | int, ...]) -> bool:
    """Whether putting ``new`` at ``path`` changes the canonical body."""
    parent, last = _at(body, path[:-1]), path[-1]
    present = last in parent if isinstance(parent, dict) else 0 <= int(last) < len(parent)
    if new is REMOVE:
        return present
    return not present or canon(_at(body, path)) != canon(new)


def rechained_rows(m: Mutation, rows: Sequence[Row]) -> list[tuple[str, int, bytes]]:
    forged = plain(rows)
    index = m.seq % len(rows)
    if m.kind == "retype":
        types = sorted(EVENT_TYPES - {rows[index].type})
        _, ts, body = forged[index]
        forged[index] = (types[m.pick % len(types)], ts, body)
    elif m.kind in ("rechained-drop", "rechained-duplicate"):
        bound = [i for i, row in enumerate(rows) if row.type != "event"]  # events are unbound
        index = bound[m.seq % len(bound)]
        if m.kind == "rechained-drop":
            del forged[index]
        else:
            forged.insert(index + 1, forged[index])
    else:  # member, served, commitment
        receipted = rows[0].value.get("options", {}).get("record_receipt") is True
        if m.kind == "served":  # a projected key a later receipt serves
            served = [i for i, row in enumerate(rows) if row.type == "write" and _served(rows, i)]
            index = served[m.seq % len(served)]
            offered: list[Choice] = [(("value",), ANY_VALUE)]
        elif m.kind == "commitment":
            held = [i for i, row in enumerate(rows) if _commitment_choices(row.value)]
            index = held[m.seq % len(held)]
            offered = _commitment_choices(rows[index].value)
        else:
            offered = _choices(rows, index, receipted)
        body = rows[index].value
        members = [
            (path, fresh)
            for path, values in offered
            if (fresh := [v for v in values if _is_new(v, body, path)])
        ]
        path, values = members[m.pick % len(members)]
        new = values[m.variant % len(values)]
        _replace(body, path, new)
        forged[index] = (rows[index].type, rows[index].ts, canon(body))
    return forged


# -- the property ------------------------------------------------------------------------------


def mutate(m: Mutation, recorded: Recorded, path: Path) -> str:
    """Apply ``m`` to the copy at ``path``; the id of the run it changed."""
    run_id = recorded.ids[m.run]
    rows = recorded.rows[m.run]
    with tampering(path) as conn:
        if m.kind in ("column", "drop", "duplicate", "swap"):
            apply_plain(m, rows, run_id, conn)
        else:
            rewrite(conn, run_id, rechained_rows(m, rows))
    return run_id


def _outcomes(m: Mutation, found: Verdicts, changed: set[str]) -> str:
    """``kind: codes`` of the changed runs, for ``--hypothesis-show-statistics``."""
    codes = {
        v.code if isinstance(v, af.VerificationError) else v.outcome.value
        for run_id, v in found
        if run_id in changed
    }
    return f"{m.kind}: {','.join(sorted(codes))}"


def check(m: Mutation, recorded: Recorded) -> None:
    """Mutate a copy, verify the whole file, and hold the verdicts to the rules above."""
    copy_path = recorded.scratch / f"copy{next(recorded.counter)}.db"
    shutil.copyfile(recorded.path, copy_path)
    try:
        mutated = mutate(m, recorded, copy_path)
        conn = sqlite3.connect(copy_path)
        try:
            now = stored_runs(conn)
        finally:
            conn.close()
        changed = {
            r for r in now.keys() | recorded.stored.keys() if now.get(r) != recorded.stored.get(r)
        }
        assert mutated in changed, "not a mutation"
        store = af.SqliteStore(copy_path, readonly=True)
        try:
            try:
                found = list(af.Verifier(store).verify_all())
            except af.StoreError as exc:  # documented: the store could not read the file
                assert "decode" in str(exc).lower() or "utf-8" in str(exc).lower(), exc
                return
        finally:
            store.close()
    finally:
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(f"{copy_path}{suffix}").unlink(missing_ok=True)

    event(_outcomes(m, found, changed))
    verdicts = {
        r: v for r, v in found if not (isinstance(v, af.VerificationError) and v.code == "index")
    }
    findings = [v for _, v in found if isinstance(v, af.VerificationError) and v.code == "index"]
    assert verdicts.keys() == now.keys(), (verdicts.keys(), now.keys())
    for run_id in changed:
        if run_id not in verdicts:  # every row of it moved away: the index still names it
            assert any(f.run_id == run_id for f in findings), (run_id, findings)
            continue
        verdict = verdicts[run_id]
        if isinstance(verdict, af.RunVerification):
            original = recorded.stored.get(run_id, [])
            rows = now[run_id]
            assert verdict.outcome is af.Outcome.UNSEALED, (m, run_id, verdict.outcome)
            assert len(rows) < len(original) and rows == original[: len(rows)], (m, run_id)
    for child, parent in recorded.parent_of.items():
        if parent in changed and child not in changed:
            verdict = verdicts[child]
            assert isinstance(verdict, af.VerificationError), (m, verdict)
            assert verdict.code == "ancestry", (m, verdict)


# Bugs of the verifier before issue 8, each found by this property (what it did then):
@given(m=mutations)
# a row moved to a run id with no index row: RunNotFoundError (ancestors came from the index)
@example(Mutation(run="parent", kind="column", seq=0, pick=3, variant=0))
# the child's run.open under a BLOB run id: RunNotFoundError
@example(Mutation(run="child", kind="column", seq=0, pick=3, variant=1))
# a TEXT body: TypeError (bytes(str)); now rows
@example(Mutation(run="parent", kind="column", seq=3, pick=4, variant=1))
# a TEXT body that is not UTF-8: the store cannot decode it (its documented StoreError)
@example(Mutation(run="full", kind="column", seq=5, pick=4, variant=15))
# a body nested 950 deep around a long integer: RecursionError in parse(); now canonical
@example(Mutation(run="parent", kind="column", seq=1, pick=4, variant=14))
# ts = 2**53: CanonicalFormError out of the event hash; now rows
@example(Mutation(run="parent", kind="column", seq=2, pick=2, variant=5))
# an event hash stored as hex TEXT: TypeError; now rows
@example(Mutation(run="redacted", kind="column", seq=4, pick=5, variant=3))
# history set to an object and re-chained: TypeError in the request hasher; now receipt
@example(Mutation(run="parent", kind="served", seq=2, pick=0, variant=16))
# history set to a string and re-chained: it was hashed character by character; now receipt
@example(Mutation(run="full", kind="served", seq=2, pick=0, variant=8))
def test_a_mutated_log_is_never_valid(recorded: Recorded, m: Mutation) -> None:
    check(m, recorded)
