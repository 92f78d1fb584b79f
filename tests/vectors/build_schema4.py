"""Build the storage-schema-4 vectors (issue 26) in ``tests/vectors/schema4/``: ``*.db`` and
the index ``schema4.json``.

Run ``python tests/vectors/build_schema4.py`` to rebuild them. Every vector starts from runs
recorded for real in storage schema 4 (docs/log-format.md section 4: one ``appends`` row per
append, rows as compact records): a root run with a tool call, its continuation and the
continuation's continuation. Each is then damaged the way a holder of the file would edit that
layout's bytes, with nothing recomputed: a record, a name, a template, a count, a head, the
data cut or grown, an unknown tag, an oversize varint, a parent key that names no run, a gap
between appends. Each entry of ``schema4.json`` names the run the damage is in (``run``), the
failure code and seq verifying it alone must give (``code``, ``seq``), and the failure codes
whole-file verification reports (``codes``). ``tests/unit/test_schema4_vectors.py`` runs them
all, and builds them again to check that the damage still gives the same verdicts.

They live in a folder of their own: ``vectors.json`` indexes the schema-1 vectors, which the
independent verifier of ``tests/spec`` reads.
"""

from __future__ import annotations

import shutil
import sqlite3
import sys
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import orjson

import agentfootprint as af
from agentfootprint.errors import VerificationError
from agentfootprint.store.sqlite import SqliteStore
from agentfootprint.store.sqlite_records import _Reader, uvarint
from agentfootprint.testing.tamper import Append, appends_of, new_file_schema, set_append, tampering
from agentfootprint.verify.verifier import Verifier

HERE = Path(__file__).resolve().parent / "schema4"


@dataclass(frozen=True)
class Runs:
    root: str
    child: str
    grandchild: str


@dataclass
class Entry:
    file: str
    run: str
    code: str
    seq: int
    codes: list[str]
    about: str


Damage = Callable[[sqlite3.Connection, Runs], str]
VECTORS: list[tuple[str, str, Damage]] = []


def vector(name: str, about: str) -> Callable[[Damage], Damage]:
    def register(damage: Damage) -> Damage:
        VECTORS.append((name, about, damage))
        return damage

    return register


def _add(args: dict[str, Any]) -> Any:
    return args["a"] + args["b"]


def record(path: Path) -> Runs:
    add = af.define_tool(
        name="add",
        description="Add two numbers.",
        input_schema={
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
            "required": ["a", "b"],
        },
        execute=_add,
    )
    script = af.MockProvider(
        [af.reply(tool_calls=[af.tool_call("add", {"a": 2, "b": 3})]), "5.", "Still 5.", "Yes."]
    )
    with (
        new_file_schema(4),
        af.Agent(
            provider=script, model="m", system="You add.", tools=[add], store=path, temperature=0
        ) as agent,
    ):
        root = agent.run_sync("What is 2 + 3?")
        child = agent.run_sync("Sure?", continue_from=root)
        grandchild = agent.run_sync("Really?", continue_from=child)
    return Runs(root.run_id, child.run_id, grandchild.run_id)


def _middle(conn: sqlite3.Connection, run_id: str) -> Append:
    """An append of several rows that is neither the run's first nor its last."""
    appends = appends_of(conn, run_id)
    return next(a for a in appends[1:-1] if a.count > 1)


# -- the damage ------------------------------------------------------------------------------


@vector("valid", "the base recording: every run verifies")
def _valid(conn: sqlite3.Connection, runs: Runs) -> str:
    return runs.root


@vector("record-changed", "one byte of a write's value changed inside an append's data")
def _record(conn: sqlite3.Connection, runs: Runs) -> str:
    target = next(a for a in appends_of(conn, runs.root) if b"What is 2 + 3?" in a.data)
    set_append(conn, target.pos, data=target.data.replace(b"What is 2 + 3?", b"What is 2 + 4?"))
    return runs.root


@vector("name-changed", "a names row's text changed: every body naming it is rebuilt otherwise")
def _name(conn: sqlite3.Connection, runs: Runs) -> str:
    conn.execute("UPDATE names SET text = 'History' WHERE text = 'history'")
    return runs.root


@vector("template-changed", "the continued runs' run.open template changed")
def _template(conn: sqlite3.Connection, runs: Runs) -> str:
    (prefix,) = conn.execute("SELECT prefix FROM opens").fetchone()
    changed = prefix.replace(b'"max_iterations":10', b'"max_iterations":11')
    assert changed != prefix
    conn.execute("UPDATE opens SET prefix = ?", (changed,))
    return runs.child


@vector("count-high", "an append's count one more than its records")
def _count_high(conn: sqlite3.Connection, runs: Runs) -> str:
    target = _middle(conn, runs.root)
    set_append(conn, target.pos, count=target.count + 1)
    return runs.root


@vector("count-low", "an append's count one less than its records: bytes left after them")
def _count_low(conn: sqlite3.Connection, runs: Runs) -> str:
    target = _middle(conn, runs.root)
    set_append(conn, target.pos, count=target.count - 1)
    return runs.root


@vector("head-changed", "an append's stored head changed")
def _head(conn: sqlite3.Connection, runs: Runs) -> str:
    target = _middle(conn, runs.root)
    set_append(conn, target.pos, head=bytes([target.head[0] ^ 1]) + target.head[1:])
    return runs.root


@vector("data-truncated", "an append's data cut inside its last record")
def _truncated(conn: sqlite3.Connection, runs: Runs) -> str:
    target = _middle(conn, runs.root)
    set_append(conn, target.pos, data=target.data[:-3])
    return runs.root


@vector("trailing-bytes", "a byte after an append's last record")
def _trailing(conn: sqlite3.Connection, runs: Runs) -> str:
    target = _middle(conn, runs.root)
    set_append(conn, target.pos, data=target.data + b"\x00")
    return runs.root


@vector("unknown-tag", "an append's first record with a tag no type has")
def _unknown_tag(conn: sqlite3.Connection, runs: Runs) -> str:
    target = _middle(conn, runs.root)
    set_append(conn, target.pos, data=b"\x7f" + target.data[1:])
    return runs.root


@vector("oversize-varint", "an append's first tag written as an 11-byte varint")
def _oversize(conn: sqlite3.Connection, runs: Runs) -> str:
    target = _middle(conn, runs.root)
    tag = target.data[0]
    longer = bytes([(tag & 0x7F) | 0x80]) + b"\x80" * 9 + b"\x00"
    set_append(conn, target.pos, data=longer + target.data[1:])
    return runs.root


@vector("parent-key-missing", "a continued run's run.open record names a run key with no run")
def _parent_key(conn: sqlite3.Connection, runs: Runs) -> str:
    first = appends_of(conn, runs.child)[0]
    reader = _Reader(first.data)
    tag, delta = reader.u(), reader.u()
    assert tag == 3, "the child's run.open is compact"
    template, events, _parent = reader.u(), reader.u(), reader.u()
    rest = first.data[reader.i :]
    data = uvarint(tag) + uvarint(delta) + uvarint(template) + uvarint(events) + uvarint(999_999)
    set_append(conn, first.pos, data=data + rest)
    return runs.child


@vector("appends-gap", "an append moved one seq on: a gap between appends")
def _gap(conn: sqlite3.Connection, runs: Runs) -> str:
    last = appends_of(conn, runs.root)[-1]
    set_append(conn, last.pos, pos=last.pos + 1)
    return runs.root


# -- building --------------------------------------------------------------------------------


def verdicts(path: Path, run_id: str) -> tuple[str, int, list[str]]:
    """``(code, seq)`` of verifying ``run_id`` alone (``VALID``, -1 when it verifies) and
    the failure codes of whole-file verification."""
    with SqliteStore(path, readonly=True) as store:
        try:
            Verifier(store).verify(run_id)
            code, seq = "VALID", -1
        except VerificationError as exc:
            code, seq = exc.code, exc.seq if exc.seq is not None else -1
        codes = sorted(
            {v.code for _, v in Verifier(store).verify_all() if isinstance(v, VerificationError)}
        )
    return code, seq, codes


def build(target: Path = HERE) -> list[Entry]:
    target.mkdir(exist_ok=True)
    entries = []
    with tempfile.TemporaryDirectory() as scratch:
        base = Path(scratch) / "base.db"
        runs = record(base)
        _compact(base)
        for name, about, damage in VECTORS:
            db = Path(scratch) / f"{name}.db"
            shutil.copyfile(base, db)
            with tampering(db) as conn:
                run_id = damage(conn, runs)
            _compact(db)
            code, seq, codes = verdicts(db, run_id)
            shutil.copyfile(db, target / db.name)
            entries.append(Entry(db.name, run_id, code, seq, codes, about))
    index = [asdict(e) for e in entries]
    (target / "schema4.json").write_bytes(orjson.dumps(index, option=orjson.OPT_INDENT_2) + b"\n")
    return entries


def _compact(db: Path) -> None:
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA journal_mode=DELETE")
    conn.execute("VACUUM")
    conn.close()


if __name__ == "__main__":
    for old in HERE.glob("*.db"):
        old.unlink()
    made = build()
    for entry in made:
        print(
            f"{entry.file:<24} {entry.code:<10} seq {entry.seq:>3}  {entry.codes}", file=sys.stderr
        )
