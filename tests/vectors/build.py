"""Build the negative (and two positive) verification vectors in this folder.

Run ``python tests/vectors/build.py`` to rebuild them. Every vector starts from runs recorded
for real by the library (a scripted provider, a real SQLite file) and is then damaged the way
a forger or a broken copy would: bytes flipped, rows dropped, index rows deleted, bodies
re-encoded and re-chained so only the semantic checks can catch them, bundles crafted with a
correct trailer digest. ``vectors.json`` lists each file with the failure codes whole-file
verification must report and the exit code of ``agentfootprint verify``;
``tests/scenario/test_vectors.py`` runs them all through the database verifier, the bundle
verifier and the CLI.

Kinds: ``db`` (an SQLite log), ``bundle`` (an export bundle), ``file`` (not a log at all:
opening it is refused, exit 2). A ``db`` vector whose damage a bundle can carry also gets a
``bundle`` twin (``NAME.afp``), written from the damaged database without verifying it.
"""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

import agentfootprint as af
from agentfootprint.exchange.bundle_write import write_bundle
from agentfootprint.logformat.commitments import PolicyDocument
from agentfootprint.store.sqlite import SqliteStore
from agentfootprint.testing.tamper import (
    Row,
    new_file_schema,
    plain,
    read_rows,
    reencoded,
    rewrite,
    tampering,
)

HERE = Path(__file__).resolve().parent
SECRET = "123-45-6789"


@dataclass(frozen=True)
class Recorded:
    """The runs of the base database: a root run, its continuation, a redacted run."""

    root: str
    child: str
    redacted: str


@dataclass
class Vector:
    name: str
    kind: str  # db | bundle | file
    codes: list[str]  # failure codes whole-file verification reports (empty: none)
    exit: int
    about: str
    twin: bool = True  # a db vector also written as a bundle
    file: str = field(default="")
    suffix: str = ""  # the file's suffix, when not the kind's own


Damage = Callable[[Path, Recorded], None]
VECTORS: list[tuple[Vector, Damage]] = []


def vector(
    name: str,
    codes: list[str],
    exit: int,
    about: str,
    *,
    kind: str = "db",
    twin: bool = True,
    suffix: str = "",
) -> Callable[[Damage], Damage]:
    def register(damage: Damage) -> Damage:
        spec = Vector(name, kind, sorted(codes), exit, about, twin, suffix=suffix)
        VECTORS.append((spec, damage))
        return damage

    return register


# -- the base recording --------------------------------------------------------------------


def _add(args: dict[str, Any]) -> Any:
    return args["a"] + args["b"]


def _lookup(args: dict[str, Any]) -> Any:
    return {"name": args["name"], "ssn": SECRET}


def record(path: Path) -> Recorded:
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
    lookup = af.define_tool(
        name="lookup",
        description="Look a customer up.",
        input_schema={
            "type": "object",
            "properties": {"name": {"type": "string"}},
            "required": ["name"],
        },
        execute=_lookup,
    )
    script = af.MockProvider(
        [
            af.reply(tool_calls=[af.tool_call("add", {"a": 2, "b": 3})]),
            "2 + 3 = 5.",
            "Still 5.",
        ]
    )
    with af.Agent(
        provider=script, model="m", system="You add.", tools=[add], store=path, temperature=0
    ) as agent:
        root = agent.run_sync("What is 2 + 3?")
        child = agent.run_sync("Sure?", continue_from=root)
    redacting = af.MockProvider(
        [af.reply(tool_calls=[af.tool_call("lookup", {"name": "Ada"})]), "Found Ada."]
    )
    with af.Agent(
        provider=redacting,
        model="m",
        tools=[lookup],
        store=path,
        redact=af.RedactionPolicy(keys=["ssn"]),
    ) as agent:
        redacted = agent.run_sync("Find Ada.")
    return Recorded(root=root.run_id, child=child.run_id, redacted=redacted.run_id)


# -- helpers -------------------------------------------------------------------------------


def rows_of(conn: sqlite3.Connection, run_id: str) -> list[Row]:
    return read_rows(conn, run_id)


def first(rows: list[Row], kind: str, path: str | None = None) -> int:
    """The index of the first row of ``kind`` (a write of ``path`` when given)."""
    for i, row in enumerate(rows):
        if row.type == kind and (path is None or row.value.get("path") == path):
            return i
    raise LookupError(f"no {kind} {path or ''}")


def rechain(
    conn: sqlite3.Connection, run_id: str, change: Callable[[list[Row]], list[Any]]
) -> None:
    """Rewrite a run's rows through ``change`` (rows -> (type, ts, body) triples), re-hashed."""
    rewrite(conn, run_id, change(rows_of(conn, run_id)))


def set_value(rows: list[Row], index: int, value: Any) -> list[Any]:
    out = plain(rows)
    out[index] = reencoded(rows[index], lambda body: body.__setitem__("value", value))
    return out


def craft_bundle(path: Path, manifest: dict[str, Any], lines: list[dict[str, Any]]) -> None:
    """A bundle with a correct trailer digest over whatever manifest and lines it is given."""
    data = orjson.dumps(manifest) + b"\n" + b"".join(orjson.dumps(line) + b"\n" for line in lines)
    trailer = {"end": True, "events": len(lines), "sha256": hashlib.sha256(data).hexdigest()}
    path.write_bytes(data + orjson.dumps(trailer) + b"\n")


def bundle_parts(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    lines = path.read_bytes().split(b"\n")[:-2]
    return orjson.loads(lines[0]), [orjson.loads(line) for line in lines[1:]]


# -- valid and unsealed --------------------------------------------------------------------


@vector("valid", [], 0, "three closed runs (a continuation, a redacted run): all VALID_UNSIGNED")
def _valid(db: Path, runs: Recorded) -> None:
    pass


@vector("unsealed", [], 3, "the child's run.close removed: a crash's consistent prefix, UNSEALED")
def _unsealed(db: Path, runs: Recorded) -> None:
    with tampering(db) as conn:
        conn.execute("DELETE FROM events WHERE run_id = ? AND type = 'run.close'", (runs.child,))


# -- rows, bytes, hashes -------------------------------------------------------------------


@vector("body-changed", ["ancestry", "hash"], 1, "the model name in a write changed, hashes kept")
def _body_changed(db: Path, runs: Recorded) -> None:
    with tampering(db) as conn:
        conn.execute(
            "UPDATE events SET body = CAST(REPLACE(CAST(body AS TEXT), '\"m\"', '\"n\"') AS BLOB) "
            "WHERE run_id = ? AND seq = 2",
            (runs.root,),
        )


@vector("body-not-canonical", ["ancestry", "canonical"], 1, "a body with a space added")
def _not_canonical(db: Path, runs: Recorded) -> None:
    with tampering(db) as conn:
        conn.execute(
            "UPDATE events SET body = CAST(REPLACE(CAST(body AS TEXT), ':', ': ') AS BLOB) "
            "WHERE run_id = ? AND seq = 2",
            (runs.root,),
        )


@vector(
    "body-stored-as-text", ["ancestry", "rows"], 1, "a body stored as TEXT, not BLOB", twin=False
)
def _text_body(db: Path, runs: Recorded) -> None:
    with tampering(db) as conn:
        conn.execute(
            "UPDATE events SET body = CAST(body AS TEXT) WHERE run_id = ? AND seq = 2",
            (runs.root,),
        )


@vector("event-hash-flipped", ["ancestry", "hash"], 1, "one byte of an event hash flipped")
def _event_hash(db: Path, runs: Recorded) -> None:
    with tampering(db) as conn:
        (value,) = conn.execute(
            "SELECT event_hash FROM events WHERE run_id = ? AND seq = 5", (runs.root,)
        ).fetchone()
        flipped = bytes([value[0] ^ 1]) + bytes(value[1:])
        conn.execute(
            "UPDATE events SET event_hash = ? WHERE run_id = ? AND seq = 5", (flipped, runs.root)
        )


@vector("chain-hash-flipped", ["ancestry", "chain"], 1, "one byte of a chain hash flipped")
def _chain_hash(db: Path, runs: Recorded) -> None:
    with tampering(db) as conn:
        (value,) = conn.execute(
            "SELECT chain_hash FROM events WHERE run_id = ? AND seq = 5", (runs.root,)
        ).fetchone()
        flipped = bytes([value[0] ^ 1]) + bytes(value[1:])
        conn.execute(
            "UPDATE events SET chain_hash = ? WHERE run_id = ? AND seq = 5", (flipped, runs.root)
        )


@vector("row-dropped", ["ancestry", "rows"], 1, "a row in the middle of the root run deleted")
def _row_dropped(db: Path, runs: Recorded) -> None:
    with tampering(db) as conn:
        conn.execute("DELETE FROM events WHERE run_id = ? AND seq = 10", (runs.root,))


@vector("rows-swapped", ["ancestry", "hash"], 1, "the bodies of two rows swapped")
def _rows_swapped(db: Path, runs: Recorded) -> None:
    with tampering(db) as conn:
        rows = rows_of(conn, runs.root)
        for seq, other in ((2, 3), (3, 2)):
            conn.execute(
                "UPDATE events SET body = ? WHERE run_id = ? AND seq = ?",
                (rows[other].body, runs.root, seq),
            )


@vector("truncated-in-batch", ["truncated"], 1, "the child's last rows cut inside a commit batch")
def _truncated(db: Path, runs: Recorded) -> None:
    with tampering(db) as conn:
        rows = rows_of(conn, runs.child)
        receipt = max(i for i, row in enumerate(rows) if row.type == "receipt")
        conn.execute(
            "DELETE FROM events WHERE run_id = ? AND seq > ?", (runs.child, rows[receipt].seq)
        )


# -- re-chained forgeries: only the semantic checks can catch them -------------------------


@vector("receipt-changed", ["ancestry", "receipt"], 1, "a receipt's request digest replaced")
def _receipt(db: Path, runs: Recorded) -> None:
    with tampering(db) as conn:

        def change(rows: list[Row]) -> list[Any]:
            out = plain(rows)
            i = first(rows, "receipt")
            out[i] = reencoded(rows[i], lambda body: body.__setitem__("request", "0" * 64))
            return out

        rechain(conn, runs.root, change)


@vector("history-object", ["ancestry", "receipt"], 1, "history folded to an object")
def _history_object(db: Path, runs: Recorded) -> None:
    with tampering(db) as conn:
        rows = rows_of(conn, runs.root)
        i = first(rows, "write", "history")
        rewrite(conn, runs.root, set_value(rows, i, {"0": rows[i].value["value"][0]}))
        _drop_appends(conn, runs.root)


@vector("history-string", ["ancestry", "receipt"], 1, "history folded to a string")
def _history_string(db: Path, runs: Recorded) -> None:
    with tampering(db) as conn:
        rows = rows_of(conn, runs.root)
        i = first(rows, "write", "history")
        rewrite(conn, runs.root, set_value(rows, i, "[]"))
        _drop_appends(conn, runs.root)


def _drop_appends(conn: sqlite3.Connection, run_id: str) -> None:
    """Turn later appends to history into sets, so the fold itself still succeeds."""

    def change(rows: list[Row]) -> list[Any]:
        out = plain(rows)
        for i, row in enumerate(rows):
            if row.type == "write" and row.value.get("verb") == "append":
                out[i] = reencoded(row, lambda body: body.__setitem__("verb", "set"))
        return out

    rechain(conn, run_id, change)


@vector("fold-merge-into-array", ["ancestry", "fold"], 1, "an append re-recorded as a merge")
def _fold(db: Path, runs: Recorded) -> None:
    with tampering(db) as conn:

        def change(rows: list[Row]) -> list[Any]:
            out = plain(rows)
            i = next(
                i for i, r in enumerate(rows) if r.type == "write" and r.value["verb"] == "append"
            )
            out[i] = reencoded(
                rows[i], lambda body: body.update(verb="merge", value={"x": body["value"][0]})
            )
            return out

        rechain(conn, runs.root, change)


@vector("unknown-format", ["ancestry", "structure"], 1, "run.open names another log format")
def _format(db: Path, runs: Recorded) -> None:
    with tampering(db) as conn:

        def change(rows: list[Row]) -> list[Any]:
            out = plain(rows)
            out[0] = reencoded(rows[0], lambda body: body.__setitem__("format", "other/v9"))
            return out

        rechain(conn, runs.root, change)


@vector("event-after-close", ["structure"], 1, "a commit marker appended after run.close")
def _after_close(db: Path, runs: Recorded) -> None:
    with tampering(db) as conn:
        rows = rows_of(conn, runs.child)
        marker = next(r for r in rows if r.type == "commit")
        rewrite(conn, runs.child, [*plain(rows), (marker.type, marker.ts, marker.body)])


@vector("ancestry-wrong-head", ["ancestry"], 1, "the child names another head of its parent")
def _wrong_head(db: Path, runs: Recorded) -> None:
    with tampering(db) as conn:

        def change(rows: list[Row]) -> list[Any]:
            out = plain(rows)
            out[0] = reencoded(rows[0], lambda body: body["parent"].__setitem__("head", "0" * 64))
            return out

        rechain(conn, runs.child, change)


# -- redaction ---------------------------------------------------------------------------


def _redacted_write(rows: list[Row]) -> int:
    """The write whose value holds the tool result (the commitment of the ssn)."""
    return next(i for i, r in enumerate(rows) if r.type == "write" and b"$commit" in r.body)


@vector("policy-digest-changed", ["policy"], 1, "run.open's policy_digest does not match")
def _policy_digest(db: Path, runs: Recorded) -> None:
    with tampering(db) as conn:

        def change(rows: list[Row]) -> list[Any]:
            out = plain(rows)
            out[0] = reencoded(rows[0], lambda body: body.__setitem__("policy_digest", "0" * 64))
            return out

        rechain(conn, runs.redacted, change)


@vector("leak-plaintext", ["leak"], 1, "the secret put back in clear where its commitment was")
def _leak(db: Path, runs: Recorded) -> None:
    with tampering(db) as conn:

        def change(rows: list[Row]) -> list[Any]:
            out = plain(rows)
            i = _redacted_write(rows)
            text = rows[i].body.decode()
            start = text.index('{\\"$commit\\":')
            end = text.index("}", start) + 1
            out[i] = (
                rows[i].type,
                rows[i].ts,
                (text[:start] + f'\\"{SECRET}\\"' + text[end:]).encode(),
            )
            return out

        rechain(conn, runs.redacted, change)


@vector(
    "leak-in-unusual-json",
    ["leak"],
    1,
    'a tool result \'{"ssn": "X", "n": 1e400}\' (RFC 8259 JSON, not I-JSON) stored in clear',
)
def _leak_unusual(db: Path, runs: Recorded) -> None:
    with tampering(db) as conn:
        rows = rows_of(conn, runs.redacted)
        i = first(rows, "write", "user_message")
        rewrite(conn, runs.redacted, set_value(rows, i, '{"ssn": "' + SECRET + '", "n": 1e400}'))


@vector(
    "hidden-malformed-commitment",
    ["ancestry", "commitment"],
    1,
    "a malformed $commit two levels of JSON text deep, written with \\u005c\\u0075 escapes",
)
def _hidden_commitment(db: Path, runs: Recorded) -> None:
    # level 2: {"$commit": "not hex"} with the $ written as \u0024
    level2 = '{"\\u0024commit": "not hex"}'
    # level 1: JSON text holding level 2 as a string, its backslash and u escaped again
    escaped = orjson.dumps(level2).decode().replace("\\\\u", "\\u005c\\u0075")
    level1 = '{"note": ' + escaped + "}"
    with tampering(db) as conn:
        rows = rows_of(conn, runs.root)
        i = first(rows, "write", "user_message")
        rewrite(conn, runs.root, set_value(rows, i, level1))
        body = rows_of(conn, runs.root)[i].body
        assert b"$" not in body and b"u0024" not in body, body


@vector("commitment-reused", ["commitment-reuse"], 1, "one commitment written twice in a run")
def _reuse(db: Path, runs: Recorded) -> None:
    with tampering(db) as conn:
        rows = rows_of(conn, runs.redacted)
        i = _redacted_write(rows)
        text = rows[i].body.decode()
        start = text.index('{\\"$commit\\":')
        digest = text[start + 15 : start + 15 + 64]
        j = first(rows, "write", "user_message")
        rewrite(conn, runs.redacted, set_value(rows, j, {"ssn": {"$commit": digest}}))


@vector(
    "catastrophic-pattern",
    ["ancestry", "policy-budget"],
    1,
    "a recorded Python-re pattern ^(x|x)+$ and a key that backtracks exponentially",
)
def _catastrophic(db: Path, runs: Recorded) -> None:
    policy = PolicyDocument.from_json({"v": 1, "keys": [], "patterns": ["^(x|x)+$"]})
    with tampering(db) as conn:
        rows = rows_of(conn, runs.root)

        def opened(body: dict[str, Any]) -> None:
            body["policy"] = policy.to_json()
            body["policy_digest"] = policy.digest()

        out = plain(rows)
        out[0] = reencoded(rows[0], opened)
        i = first(rows, "write", "user_message")
        out[i] = reencoded(rows[i], lambda body: body.__setitem__("value", {"x" * 60 + "y": 1}))
        rewrite(conn, runs.root, out)  # the child continues the root: it fails ancestry too


# -- the run index (database only: a bundle's manifest is checked by the bundle vectors) -----


@vector(
    "index-row-deleted",
    ["hash", "index"],
    1,
    "a tampered run's runs row deleted: found from its events all the same",
    twin=False,
)
def _index_deleted(db: Path, runs: Recorded) -> None:
    _event_hash_of(db, runs.redacted)
    with tampering(db) as conn:
        conn.execute("DELETE FROM runs WHERE run_id = ?", (runs.redacted,))


def _event_hash_of(db: Path, run_id: str) -> None:
    with tampering(db) as conn:
        conn.execute(
            "UPDATE events SET event_hash = zeroblob(32) WHERE run_id = ? AND seq = 1", (run_id,)
        )


@vector("index-row-without-events", ["index"], 1, "a runs row for a run with no events", twin=False)
def _index_orphan(db: Path, runs: Recorded) -> None:
    with tampering(db) as conn:
        conn.execute("INSERT INTO runs VALUES ('ghost', 'c', NULL, 0)")


@vector(
    "index-conversation-differs",
    ["index"],
    1,
    "a runs row whose conversation_id differs from run.open's",
    twin=False,
)
def _index_conversation(db: Path, runs: Recorded) -> None:
    with tampering(db) as conn:
        conn.execute("UPDATE runs SET conversation_id = 'other' WHERE run_id = ?", (runs.child,))


# -- bundles (crafted with a correct trailer digest) ---------------------------------------


def _from_valid(db: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    out = db.with_suffix(".tmp.afp")
    _export(db, out)
    parts = bundle_parts(out)
    out.unlink()
    return parts


@vector("bundle-child-first", ["bundle"], 1, "a child's rows before its parent's", kind="bundle")
def _child_first(out: Path, runs: Recorded) -> None:
    manifest, lines = _from_valid(out.with_suffix(".db"))
    child = [line for line in lines if line["run"] == runs.child]
    rest = [line for line in lines if line["run"] != runs.child]
    manifest["runs"].sort(key=lambda entry: entry["run_id"] != runs.child)
    craft_bundle(out, manifest, child + rest)


@vector("bundle-unlisted-run", ["bundle"], 1, "rows of a run the manifest omits", kind="bundle")
def _unlisted(out: Path, runs: Recorded) -> None:
    manifest, lines = _from_valid(out.with_suffix(".db"))
    manifest["runs"] = [e for e in manifest["runs"] if e["run_id"] != runs.redacted]
    manifest["counts"]["runs"] -= 1
    craft_bundle(out, manifest, lines)


@vector("bundle-cut", ["bundle"], 1, "the bundle cut in the middle of a line", kind="bundle")
def _cut(out: Path, runs: Recorded) -> None:
    _export(out.with_suffix(".db"), out)
    data = out.read_bytes()
    out.write_bytes(data[: len(data) // 2])


@vector("bundle-byte-changed", ["bundle"], 1, "one byte changed, trailer kept", kind="bundle")
def _byte(out: Path, runs: Recorded) -> None:
    _export(out.with_suffix(".db"), out)
    data = bytearray(out.read_bytes())
    data[len(data) // 2] ^= 1
    out.write_bytes(bytes(data))


@vector(
    "bundle-newer-version",
    [],
    2,
    "a bundle of a newer version than this reader knows: not judged, a usage error",
    kind="file",
    suffix=".afp",
)
def _version(out: Path, runs: Recorded) -> None:
    manifest, lines = _from_valid(out.with_suffix(".db"))
    manifest["agentfootprint_bundle"] = 99
    craft_bundle(out, manifest, lines)


# -- files that are not logs ---------------------------------------------------------------


@vector("not-a-log-text", [], 2, "a text file", kind="file")
def _text(out: Path, runs: Recorded) -> None:
    out.write_bytes(b"not a log\n")


@vector("not-a-log-empty", [], 2, "an empty file", kind="file")
def _empty(out: Path, runs: Recorded) -> None:
    out.write_bytes(b"")


@vector("not-a-log-other-app", [], 2, "another application's SQLite database", kind="file")
def _other_app(out: Path, runs: Recorded) -> None:
    conn = sqlite3.connect(out)
    conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)")
    conn.execute("INSERT INTO notes (text) VALUES ('hello')")
    conn.commit()
    conn.close()


@vector("not-a-log-vault", [], 2, "a disclosure vault given as a log", kind="file")
def _vault(out: Path, runs: Recorded) -> None:
    conn = sqlite3.connect(out)
    conn.execute(
        "CREATE TABLE disclosures (commitment TEXT PRIMARY KEY, run_id TEXT NOT NULL, "
        "key TEXT NOT NULL, salt TEXT NOT NULL, value BLOB NOT NULL)"
    )
    conn.commit()
    conn.close()


@vector(
    "schema-newer", [], 2, "a log whose schema version is newer than this library's", kind="file"
)
def _newer(out: Path, runs: Recorded) -> None:
    shutil.copyfile(out.with_name("base.db"), out)
    conn = sqlite3.connect(out)
    conn.execute("INSERT INTO schema_version VALUES (99, 'from the future', 0)")
    conn.commit()
    conn.close()


@vector("schema-version-text", [], 2, "schema_version holding text", kind="file")
def _schema_text(out: Path, runs: Recorded) -> None:
    shutil.copyfile(out.with_name("base.db"), out)
    conn = sqlite3.connect(out)
    conn.execute("DROP TABLE schema_version")
    conn.execute("CREATE TABLE schema_version (version TEXT, name TEXT, applied_at INTEGER)")
    conn.execute("INSERT INTO schema_version VALUES ('two', 'junk', 0)")
    conn.commit()
    conn.close()


# -- building ------------------------------------------------------------------------------


def _export(db: Path, out: Path) -> None:
    """Write every run found in the events to a bundle, without verifying (a crafted copy)."""
    conn = sqlite3.connect(db)
    ids = [
        r[0] for r in conn.execute("SELECT run_id FROM events GROUP BY run_id ORDER BY MIN(rowid)")
    ]
    conn.close()
    store = SqliteStore(db)
    try:
        write_bundle(store, ids, out, library="agentfootprint vectors")
    finally:
        store.close()


def _compact(db: Path) -> None:
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA journal_mode=DELETE")
    conn.execute("VACUUM")
    conn.close()


def build(target: Path = HERE) -> list[Vector]:
    """The vectors are schema-1 files (their damage edits the ``events`` table): every new
    file is created with storage schema 1 (docs/log-format.md appendix B)."""
    with new_file_schema(1):
        return _build(target)


def _build(target: Path) -> list[Vector]:
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        base = work / "base.db"
        runs = record(base)
        _compact(base)
        built: list[Vector] = []
        for spec, damage in VECTORS:
            if spec.kind == "db":
                db = work / f"{spec.name}.db"
                shutil.copyfile(base, db)
                damage(db, runs)
                _compact(db)
                built.append(_placed(spec, db, target, f"{spec.name}.db"))
                if spec.twin:
                    afp = work / f"{spec.name}.afp"
                    _export(db, afp)
                    twin = Vector(spec.name, "bundle", spec.codes, spec.exit, spec.about)
                    built.append(_placed(twin, afp, target, f"{spec.name}.afp"))
            else:
                suffix = spec.suffix or (".afp" if spec.kind == "bundle" else ".db")
                out = work / f"{spec.name}{suffix}"
                if suffix == ".afp":
                    shutil.copyfile(base, out.with_suffix(".db"))
                damage(out, runs)
                built.append(_placed(spec, out, target, out.name))
    index = [
        {"file": v.file, "kind": v.kind, "codes": v.codes, "exit": v.exit, "about": v.about}
        for v in built
    ]
    (target / "vectors.json").write_bytes(orjson.dumps(index, option=orjson.OPT_INDENT_2) + b"\n")
    return built


def _placed(spec: Vector, source: Path, target: Path, name: str) -> Vector:
    shutil.copyfile(source, target / name)
    return Vector(spec.name, spec.kind, spec.codes, spec.exit, spec.about, spec.twin, file=name)


if __name__ == "__main__":
    for old in [*HERE.glob("*.db"), *HERE.glob("*.afp")]:
        old.unlink()
    made = build()
    print(f"built {len(made)} vectors in {HERE}", file=sys.stderr)
