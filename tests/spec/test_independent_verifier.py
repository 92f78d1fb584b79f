"""The independent verifier (written from docs/log-format.md alone) against the vectors and
against the reference verifier, on recorded runs, random single mutations of them and
hand-made cases that probe what the page says (or leaves open).

Only this module imports agentfootprint: to record runs, to damage them, and for the
reference verdicts. Where the two disagree, the page decides which one is fixed.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import shutil
import sqlite3
import tempfile
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import independent_verifier as iv
import pytest
import rfc8785
from hypothesis import HealthCheck, example, given, note, settings
from hypothesis import strategies as st

import agentfootprint as af
from agentfootprint.seal.ed25519_keys import SMALL_ORDER_ENCODINGS, key_problem
from agentfootprint.testing import redaction_strategies as rs
from agentfootprint.testing import strategies as runs_st
from agentfootprint.testing import tamper
from agentfootprint.testing.seals import OTHER, SIGNER
from agentfootprint.verify.verifier import VerificationError, Verifier
from examples_budget import scaled

VECTORS = Path(__file__).parent.parent / "vectors"


def slow(examples: int) -> settings:
    """Few examples (the suite runs on two cores), no deadline: each one records runs."""
    return settings(
        max_examples=scaled(examples),
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


# --- verdicts of both verifiers, in one shape ---------------------------------------------

Verdicts = tuple[dict[Any, tuple[str, int | None]], list[tuple[Any, int | None]]]


def shown(run_id: Any) -> Any:
    return run_id if isinstance(run_id, str) or run_id is None else repr(run_id)


def orphan(run_id: Any) -> Any:
    """A run whose ``run_key`` has no ``run_keys`` row (the orphan rule of section 4) has no
    id, and the page leaves its name open: the independent verifier's ``("no run_keys row",
    key)`` is named as the reference shows it (the repr of a text with a lone surrogate)."""
    if isinstance(run_id, tuple) and run_id[:1] == ("no run_keys row",):
        return repr(f"\udcffrun_key={run_id[1]}")
    return run_id


def mine(path: Path, keys: tuple[Any, ...] = ()) -> Verdicts:
    """``({run: (outcome or code, seq)}, [(run, seq) of each index finding])``; ``keys``
    (signers) pin the checkpoint signers of a version 2 bundle (section 13.4)."""
    runs: dict[Any, tuple[str, int | None]] = {}
    index = []
    for run, code, seq in iv.verify_file(path, [k.public.raw for k in keys]):
        if code == "index":
            index.append((shown(orphan(run)), seq))
        else:
            outcome = code in (iv.VALID, iv.UNSEALED, iv.SIGNED)
            runs[shown(orphan(run))] = (code, None if outcome else seq)
    return runs, sorted(index, key=str)


def reference(path: Path, keys: tuple[Any, ...] = ()) -> Verdicts:
    """The same from ``Verifier(source, trusted_keys=...).verify_all()``: the keys pin seals
    and checkpoints in both."""
    try:
        source: Any = (
            af.BundleSource(path)
            if path.read_bytes().startswith(iv.BUNDLE_PREFIX)
            else af.SqliteStore(path, readonly=True)
        )
    except VerificationError as e:
        return {None: (e.code, None)}, []
    except af.UsageError:
        return {None: ("usage", None)}, []
    runs: dict[Any, tuple[str, int | None]] = {}
    index = []
    try:
        verifier = Verifier(source, trusted_keys=[k.public for k in keys])
        for run, result in verifier.verify_all():
            if isinstance(result, VerificationError) and result.code == "index":
                index.append((shown(run), result.seq))
            elif isinstance(result, VerificationError):
                runs[shown(run)] = (result.code, result.seq)
            else:
                runs[shown(run)] = (result.outcome.value, None)
    finally:
        source.close()
    return runs, sorted(index, key=str)


def exit_code(verdicts: list[iv.Verdict]) -> int:
    """Section 9.6, from the verdicts."""
    found = {code for _, code, _ in verdicts}
    if found & {"usage", "file"}:
        return 2
    if found - {iv.VALID, iv.UNSEALED, iv.SIGNED}:
        return 1
    return 3 if iv.UNSEALED in found else 0


# --- (a) the vectors ----------------------------------------------------------------------


def vector_entries() -> list[Any]:
    entries = json.loads((VECTORS / "vectors.json").read_text())
    return [pytest.param(e, id=e["file"]) for e in entries]


@pytest.mark.parametrize("entry", vector_entries())
def test_vector(entry: dict[str, Any]) -> None:
    path = VECTORS / entry["file"]
    assert path.exists(), f"vectors.json lists {entry['file']}, which is not in tests/vectors"
    beside = [Path(f"{path}{suffix}") for suffix in ("-wal", "-shm", "-journal")]
    before = [p.exists() for p in beside]
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    verdicts = iv.verify_file(path)
    if entry["kind"] == "file":
        assert verdicts == [(None, "usage", None)], iv.explain_file(path)
    else:
        assert iv.failure_codes(verdicts) == set(entry["codes"]), iv.explain_file(path)
    assert exit_code(verdicts) == entry["exit"]
    # section 4: a reader creates nothing beside the file and never writes it
    assert [p.exists() for p in beside] == before
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest


SCHEMA4 = VECTORS / "schema4"
SCHEMA4_ENTRIES = json.loads((SCHEMA4 / "schema4.json").read_text())


def test_every_schema4_vector_is_listed() -> None:
    assert sorted(p.name for p in SCHEMA4.glob("*.db")) == sorted(
        e["file"] for e in SCHEMA4_ENTRIES
    )


@pytest.mark.parametrize("entry", SCHEMA4_ENTRIES, ids=[e["file"] for e in SCHEMA4_ENTRIES])
def test_schema4_vector(entry: dict[str, Any]) -> None:
    """Storage schema 4 (section 4), damaged the way a holder of the file edits its bytes
    (tests/vectors/build_schema4.py): the damaged run alone gives the listed code and seq, the
    whole file the listed codes, and both verifiers agree on every verdict."""
    path = SCHEMA4 / entry["file"]
    beside = [Path(f"{path}{suffix}") for suffix in ("-wal", "-shm", "-journal")]
    before = [p.exists() for p in beside]
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    code = iv.VALID if entry["code"] == "VALID" else entry["code"]
    seq = None if entry["seq"] == -1 else entry["seq"]
    alone = iv.verify_runs(path, [entry["run"]])
    assert alone == [(entry["run"], code, seq)], iv.explain_file(path)
    assert iv.failure_codes(iv.verify_file(path)) == set(entry["codes"]), iv.explain_file(path)
    assert mine(path) == reference(path), iv.explain_file(path)
    assert [p.exists() for p in beside] == before
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest


def test_worked_example_digests() -> None:
    """Section 11's hand computation, with the verifier's own functions."""
    body = b'{"commit":0,"path":"agent","value":{"id":"agent","name":"Agent"},"verb":"set"}'
    run = "01a229b7a9caf5a1f290dc6ff7ab90ab"
    assert iv.parse_body(body, 1) == {
        "commit": 0,
        "path": "agent",
        "value": {"id": "agent", "name": "Agent"},
        "verb": "set",
    }
    e1 = iv.event_hash(run, 1, "write", 1795996232138, body)
    c0 = bytes.fromhex("696e48386f0a797677e807650c19a7511d3e049dec27e864d1d0db5699eb3d15")
    assert e1.hex() == "817e950867c4cbc35749a6e78ad98b5b7dee193f4f6f5ec619656c59b2a458e9"
    assert iv.H("chain", c0 + e1).hex() == (
        "fcea682419a7714a90d3409448ade5891d627cd0feb1fa043ccc9c17586933f7"
    )
    policy = {"v": 2, "keys": ["ssn"], "patterns": ["(?i)(^|_)e-?mail($|_)"]}
    digest = "9a83169c4c57476a3b8983ebeefbaef6f949e245041c03bf95ea32ed2179aa30"
    matcher = iv.check_policy(policy, digest)
    assert matcher is not None
    assert matcher.matches("ssn") and matcher.matches("user_email")
    assert not matcher.matches("SSN")


# --- recording runs ------------------------------------------------------------------------


@contextmanager
def scratch() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as folder:
        yield Path(folder)


def record_spec(spec: Any, path: Path) -> None:
    store = af.SqliteStore(path)
    try:
        runs_st.run_spec(spec, store)
    finally:
        store.close()


def record_planted(spec: Any, path: Path) -> None:
    store = af.SqliteStore(path)
    try:
        agent, _ = rs.build_planted_agent(spec, store=store, redact=rs.key_policy())
        rs.run_planted(agent, spec)
    finally:
        store.close()


def test_reading_creates_nothing() -> None:
    """Section 4: a live log (its -wal there) is read with mode=ro, a closed one with
    immutable=1; neither read creates or changes a file."""
    with scratch() as folder:
        store = af.SqliteStore(folder / "live.db")
        try:
            af.Agent(provider=af.MockProvider(["hello"]), model="m", store=store).run_sync("hi")
            live = sorted(p.name for p in folder.iterdir())
            assert "live.db-wal" in live
            assert [code for _, code, _ in iv.verify_file(folder / "live.db")] == [iv.VALID]
            assert sorted(p.name for p in folder.iterdir()) == live
        finally:
            store.close()
        digest = hashlib.sha256((folder / "live.db").read_bytes()).hexdigest()
        assert [code for _, code, _ in iv.verify_file(folder / "live.db")] == [iv.VALID]
        assert sorted(p.name for p in folder.iterdir()) == ["live.db"]
        assert hashlib.sha256((folder / "live.db").read_bytes()).hexdigest() == digest


# --- (b) recorded runs verify exactly when the reference says so -------------------------


SCHEMAS = st.sampled_from((1, 2, 4))  # the storage schemas a new file may be created with


@slow(30)
@given(runs_st.run_specs(max_turns=3), SCHEMAS)
def test_recorded_runs_agree(spec: Any, schema: int) -> None:
    with scratch() as folder, tamper.new_file_schema(schema):
        record_spec(spec, folder / "log.db")
        ours, theirs = mine(folder / "log.db"), reference(folder / "log.db")
        assert ours == theirs
        assert all(code == iv.VALID for code, _ in ours[0].values()) == all(
            code == iv.VALID for code, _ in theirs[0].values()
        )


class MarkFirstMessage:
    """A cache strategy of its own: the first message, and the last tool."""

    def markers(self, served: Any) -> dict[str, list[int]]:
        return {"messages": [0], "tools": [len(served["tools"]) - 1] if served["tools"] else []}


@pytest.mark.parametrize(
    "strategy", ["breakpoints", MarkFirstMessage()], ids=["breakpoints", "own"]
)
def test_recorded_runs_with_cache_markers_agree(strategy: Any) -> None:
    """Projection 3 end to end: the markers a stage wrote, served as ``prompt_cache`` and
    hashed under request shape 2, verify under this page's rules as under the reference."""
    tool = af.define_tool(name="lookup", description="Look up.", execute=lambda args: "rows")
    script = [af.reply(tool_calls=[af.tool_call("lookup", {"q": "a"})]), "done"]
    with scratch() as folder:
        agent = af.Agent(
            provider=af.MockProvider(script),
            model="m",
            system=["one", "two"],
            tools=[tool],
            store=str(folder / "log.db"),
            cache_strategy=strategy,
        )
        try:
            result = agent.run_sync("go")
        finally:
            agent.close()
        assert result.calls == 2
        ours, theirs = mine(folder / "log.db"), reference(folder / "log.db")
        assert ours == theirs == ({result.run_id: (iv.VALID, None)}, [])


@slow(25)
@given(rs.planted_runs(rfc8259=True), SCHEMAS)
def test_redacted_runs_agree(spec: Any, schema: int) -> None:
    with scratch() as folder, tamper.new_file_schema(schema):
        record_planted(spec, folder / "log.db")
        assert mine(folder / "log.db") == reference(folder / "log.db")


# --- (c) single random mutations -------------------------------------------------------

MUTATIONS = (
    "flip body",
    "flip event_hash",
    "flip chain_hash",
    "drop row",
    "cut tail",
    "drop row, re-chained",
    "swap rows, re-chained",
    "repeat row, re-chained",
    "re-encode body, re-chained",
    "replace a commitment, re-chained",
)


RAW_CUTS = ("drop row", "cut tail")


def run_ids(path: Path) -> list[str]:
    with closing(sqlite3.connect(path)) as conn:
        q = "SELECT run_id FROM events GROUP BY run_id ORDER BY MIN(rowid)"
        if tamper.layout_of(conn) in (2, 4):
            q = "SELECT run_id FROM run_keys ORDER BY run_key"
        return [r for (r,) in conn.execute(q)]


def mutate_v2(conn: sqlite3.Connection, kind: str, run: str, i: int, data: st.DataObject) -> str:
    """The raw mutations in storage schema 2 (section 4), which keeps no event hash and a
    chain hash only on each batch's last row: a flipped body (or, for a compact commit
    marker, its commit number), a changed ts ("flip event_hash": what the event hash binds)
    or a flipped stored head ("flip chain_hash", the head ending row ``i``'s batch), a
    dropped row, a cut tail."""
    (key,) = conn.execute("SELECT run_key FROM run_keys WHERE run_id = ?", (run,)).fetchone()
    pos = (key << 32) + i
    body, ts = conn.execute("SELECT body, ts FROM rows WHERE pos = ?", (pos,)).fetchone()
    if kind == "flip body" and body is None:
        conn.execute("UPDATE rows SET commit_no = commit_no + 1 WHERE pos = ?", (pos,))
    elif kind == "flip body":
        raw = bytearray(body)
        raw[data.draw(st.integers(0, len(raw) - 1), label="byte")] ^= 1 << data.draw(
            st.integers(0, 7), label="bit"
        )
        conn.execute("UPDATE rows SET body = ? WHERE pos = ?", (bytes(raw), pos))
    elif kind == "flip event_hash":
        conn.execute("UPDATE rows SET ts = ? WHERE pos = ?", ((ts or 0) - 1, pos))
    elif kind == "flip chain_hash":
        (at, head) = conn.execute(
            "SELECT pos, head FROM rows WHERE pos >= ? AND head IS NOT NULL ORDER BY pos LIMIT 1",
            (pos,),
        ).fetchone()
        raw = bytearray(head)
        raw[data.draw(st.integers(0, 31), label="byte")] ^= 1 << data.draw(
            st.integers(0, 7), label="bit"
        )
        conn.execute("UPDATE rows SET head = ? WHERE pos = ?", (bytes(raw), at))
    elif kind == "drop row":
        conn.execute("DELETE FROM rows WHERE pos = ?", (pos,))
    else:
        conn.execute("DELETE FROM rows WHERE pos BETWEEN ? AND ?", (pos, (key << 32) | 0xFFFFFFFF))
    return f"{kind} at {(run, i)} (schema 2)"


#: schema 4's own raw mutations (section 4, "Schema version 4"): a column of an ``appends``
#: row, its data cut or grown, and a row of the tables records name
V4_MUTATIONS = ("appends column", "appends data", "names row", "opens row", "run_keys row")


def flipped_bit(raw: bytes, data: st.DataObject) -> bytes:
    out = bytearray(raw)
    out[data.draw(st.integers(0, len(out) - 1), label="byte")] ^= 1 << data.draw(
        st.integers(0, 7), label="bit"
    )
    return bytes(out)


def free_pos(conn: sqlite3.Connection, pos: int) -> bool:
    return conn.execute("SELECT 1 FROM appends WHERE pos = ?", (pos,)).fetchone() is None


def mutate_v4(conn: sqlite3.Connection, kind: str, run: str, i: int, data: st.DataObject) -> str:
    """The raw mutations in storage schema 4 (section 4), which keeps no event hash and one
    head per ``appends`` row, on the ``appends`` row holding row ``i``: a flipped bit of its
    data ("flip body"), its ts moved ("flip event_hash": what the event hashes bind), a
    flipped bit of its head ("flip chain_hash"), the row dropped, the run cut from it; and
    :data:`V4_MUTATIONS`."""
    appends = tamper.appends_of(conn, run)
    at = next(a for a in reversed(appends) if a.seq <= i)
    done = f"{kind} at {(run, i)} (schema 4, the appends row at seq {at.seq})"
    if kind == "flip body":
        tamper.set_append(conn, at.pos, data=flipped_bit(at.data, data))
    elif kind == "flip event_hash":
        tamper.set_append(conn, at.pos, ts=at.ts - 1)
    elif kind == "flip chain_hash":
        tamper.set_append(conn, at.pos, head=flipped_bit(at.head, data))
    elif kind == "drop row":
        conn.execute("DELETE FROM appends WHERE pos = ?", (at.pos,))
    elif kind == "cut tail":
        conn.execute("DELETE FROM appends WHERE pos BETWEEN ? AND ?", (at.pos, at.pos | 0xFFFFFFFF))
    elif kind == "appends column":
        changes: list[tuple[str, Any]] = [
            ("count", at.count + 1),
            ("count", at.count - 1),
            ("count", f"{at.count}x"),  # INTEGER affinity keeps only what is no number
            ("count", at.count + 0.5),
            ("ts", at.ts + 1),
            ("ts", at.ts + 0.5),
            ("ts", f"{at.ts}x"),
            ("head", at.head[:31]),
            ("head", at.head.hex()),
            ("data", at.data.decode("latin-1")),
        ]
        changes += [("pos", p) for p in (at.pos - 1, at.pos + 1) if free_pos(conn, p)]
        column, value = data.draw(st.sampled_from(changes), label="column")
        tamper.set_append(conn, at.pos, **{column: value})
        done += f": {column} = {value!r:.40}"
    elif kind == "appends data":
        how = data.draw(st.sampled_from(("cut", "grow", "insert")), label="how")
        cut = data.draw(st.integers(0, len(at.data) - 1), label="at")
        extra = data.draw(st.binary(min_size=1, max_size=4), label="bytes")
        changed = {
            "cut": at.data[:cut],
            "grow": at.data + extra,
            "insert": at.data[:cut] + extra + at.data[cut:],
        }[how]
        tamper.set_append(conn, at.pos, data=changed)
        done += f": {how} {cut} {extra!r}"
    else:
        table = kind.split()[0]
        key, columns = {"names": ("id", ["text"]), "opens": ("id", ["prefix", "middle", "suffix"]),
                        "run_keys": ("run_key", ["run_id"])}[table]  # fmt: skip
        ids = [k for (k,) in conn.execute(f"SELECT {key} FROM {table}")]
        if not ids:  # a file with no continued run has no template
            return mutate_v4(conn, "names row", run, i, data)
        row = data.draw(st.sampled_from(ids), label="row")
        column = data.draw(st.sampled_from(columns), label="column")
        how = data.draw(st.sampled_from(("delete", "blob", "text", "long", "other")), label="how")
        where = f"WHERE {key} = {row}"
        other = data.draw(st.text(min_size=1, max_size=6), label="other")
        limit = {"names": 256, "opens": 16_384, "run_keys": 1_024}[table]
        longer = f"CAST({column} || ? AS BLOB)" if table == "opens" else f"{column} || ?"
        statement, args = {
            "delete": (f"DELETE FROM {table} {where}", ()),
            "blob": (f"UPDATE {table} SET {column} = CAST({column} AS BLOB) {where}", ()),
            "text": (f"UPDATE {table} SET {column} = CAST({column} AS TEXT) {where}", ()),
            "long": (f"UPDATE {table} SET {column} = {longer} {where}", ("x" * limit,)),
            # a fresh run id (run_keys.run_id is UNIQUE), another text or template part
            "other": (f"UPDATE {table} SET {column} = ? {where}",
                      (f"{other}-{row}" if table == "run_keys"
                       else other.encode() if table == "opens" else other,)),
        }[how]  # fmt: skip
        conn.execute(statement, args)
        done = f"{kind}: {statement} {args!r:.40}"
    return done


def commitment_sites(value: Any, at: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Where ``value`` holds an object with ``$commit`` (inside JSON text too: step "text")."""
    if isinstance(value, dict) and "$commit" in value:
        yield at
    elif isinstance(value, dict | list):
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for k, item in items:
            yield from commitment_sites(item, (*at, k))
    elif isinstance(value, str) and value.lstrip()[:1] in ("{", "["):
        with contextlib.suppress(ValueError, RecursionError):
            yield from commitment_sites(json.loads(value), (*at, "text"))


def replaced(value: Any, at: tuple[Any, ...], new: Any) -> Any:
    if not at:
        return new
    if at[0] == "text":
        return json.dumps(replaced(json.loads(value), at[1:], new), ensure_ascii=False)
    copy = value.copy()
    copy[at[0]] = replaced(value[at[0]], at[1:], new)
    return copy


def recommit(body: dict[str, Any], data: st.DataObject, digests: list[str]) -> None:
    """Replace one commitment of ``body``: by clear text, another digest of the log, a
    malformed one, a fresh digest, or the same one wrapped in an array."""
    at = data.draw(st.sampled_from(list(commitment_sites(body))), label="commitment")
    how = data.draw(st.sampled_from(("clear", "reuse", "upper", "extra", "fresh", "wrapped")))
    old = body
    for step in at:
        old = json.loads(old) if step == "text" else old[step]
    new = {
        "clear": "S3CR3T",
        "reuse": {"$commit": data.draw(st.sampled_from(digests))},
        "upper": {"$commit": str(old["$commit"]).upper()},
        "extra": {**old, "x": 1},
        "fresh": {"$commit": f"{data.draw(st.integers(0, 2**256 - 1)):064x}"},
        "wrapped": [old],
    }[how]
    changed = replaced(body, at, new)
    body.clear()
    body.update(changed)


def change_body(action: str, pick: int, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(body: dict[str, Any]) -> None:
        names = sorted(body)
        name = names[pick % len(names)] if names else "extra"
        if action == "set":
            body[name] = value
        elif action == "delete":
            body.pop(name, None)
        elif action == "add":
            body["extra"] = value
        elif isinstance(body.get(name), int) and not isinstance(body.get(name), bool):
            body[name] += 1 if pick % 2 else -1

    return change


def mutate(path: Path, data: st.DataObject) -> str:
    """Damage one run of the log at ``path`` once; returns what was done."""
    run = data.draw(st.sampled_from(run_ids(path)), label="run")
    with tamper.tampering(path) as conn:
        layout = tamper.layout_of(conn)
        kinds = MUTATIONS + (V4_MUTATIONS if layout == 4 else ())
        kind = data.draw(st.sampled_from(kinds), label="mutation")
        rows = tamper.read_rows(conn, run)
        committed = [i for i, r in enumerate(rows) if b"$commit" in r.body]
        if kind.startswith("replace") and not committed:
            kind = "re-encode body, re-chained"
        i = data.draw(st.sampled_from(committed) if kind.startswith("replace") else
                      st.integers(0, len(rows) - 1), label="row")  # fmt: skip
        row, where = rows[i], (run, rows[i].seq)
        if layout == 4 and (kind.startswith("flip") or kind in RAW_CUTS + V4_MUTATIONS):
            return mutate_v4(conn, kind, run, i, data)
        if layout == 2 and (kind.startswith("flip") or kind in RAW_CUTS):
            return mutate_v2(conn, kind, run, i, data)
        if kind.startswith("flip"):
            column = kind.split()[1]
            raw = bytearray(getattr(row, column))
            at = data.draw(st.integers(0, len(raw) - 1), label="byte")
            raw[at] ^= 1 << data.draw(st.integers(0, 7), label="bit")
            q = f"UPDATE events SET {column} = ? WHERE run_id = ? AND seq = ?"
            conn.execute(q, (bytes(raw), *where))
        elif kind == "drop row":
            conn.execute("DELETE FROM events WHERE run_id = ? AND seq = ?", where)
        elif kind == "cut tail":
            conn.execute("DELETE FROM events WHERE run_id = ? AND seq >= ?", where)
        else:
            plain = tamper.plain(rows)
            if kind.startswith("drop") and len(plain) > 1:
                del plain[i]
            elif kind.startswith("swap"):
                j = min(i + 1, len(plain) - 1)
                plain[i], plain[j] = plain[j], plain[i]
            elif kind.startswith("repeat"):
                plain.insert(i, plain[i])
            elif kind.startswith("re-encode"):
                action = data.draw(st.sampled_from(("set", "delete", "add", "nudge")))
                value = data.draw(runs_st.json_values(max_leaves=3), label="value")
                pick = data.draw(st.integers(0, 50), label="member")
                plain[i] = tamper.reencoded(row, change_body(action, pick, value))
            elif kind.startswith("replace"):
                every = (r for rid in run_ids(path) for r in tamper.read_rows(conn, rid))
                found = b" ".join(r.body for r in every if b"$commit" in r.body)
                digests = sorted({d.decode() for d in re.findall(rb"[0-9a-f]{64}", found)})
                plain[i] = tamper.reencoded(row, lambda body: recommit(body, data, digests))
            tamper.rewrite(conn, run, plain)
    return f"{kind} at {where}"


@slow(100)
@given(st.data())
def test_mutations_agree(data: st.DataObject) -> None:
    with scratch() as folder:
        path = folder / "log.db"
        with tamper.new_file_schema(data.draw(SCHEMAS, label="schema")):
            if data.draw(st.booleans(), label="redacted"):
                planted = data.draw(rs.planted_runs(rfc8259=True), label="planted run")
                record_planted(planted, path)
            else:
                record_spec(data.draw(runs_st.run_specs(max_turns=2), label="spec"), path)
        note(mutate(path, data))
        assert mine(path) == reference(path)


# --- (d) hand-made cases: what the page says, and where it is silent ----------------------


def lookup(arguments: Any) -> Any:
    return {"ssn": "123-45-6789", "name": "Ann", "note": json.dumps({"ssn": "x"})}


@pytest.fixture(scope="module")
def base_log(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """A root run under a policy (a tool result with secrets), and its continuation."""
    path = tmp_path_factory.mktemp("spec") / "base.db"
    with tamper.new_file_schema(1):  # the cases below edit the schema-1 events table
        return _record_base_log(path)


def lookup_tool() -> af.Tool:
    return af.define_tool(
        name="lookup",
        description="look up",
        execute=lookup,
        input_schema={"type": "object", "properties": {"q": {"type": "string"}}},
    )


def lookup_script() -> af.MockProvider:
    """A tool call, its answer, and the continuation's answer."""
    return af.MockProvider(
        [af.reply(tool_calls=[af.tool_call("lookup", {"q": "ann"})]), "done", "again"]
    )


def _record_base_log(path: Path) -> tuple[Path, list[str]]:
    tool, provider = lookup_tool(), lookup_script()
    store = af.SqliteStore(path)
    agent = af.Agent(
        provider=provider,
        model="m",
        system="sys",
        tools=[tool],
        store=store,
        temperature=0.5,
        redact=af.RedactionPolicy(keys=["ssn"], patterns=["(?i)token"]),
    )
    first = agent.run_sync("hi")
    second = agent.run_sync("more", continue_from=first)
    store.close()
    with closing(sqlite3.connect(path)) as conn:  # the layout the cases below index into
        q = "SELECT group_concat(type, ' ') FROM events WHERE run_id = ? ORDER BY seq"
        layout = [conn.execute(q, (r.run_id,)).fetchone()[0].split() for r in (first, second)]
    assert len(layout[0]) == 35 and len(layout[1]) == 21
    assert [layout[0][i] for i in (8, 14, 18, 19, 25, 27, 34)] == [
        "commit",
        "receipt",
        "commit",
        "write",
        "receipt",
        "write",
        "run.close",
    ]
    return path, [first.run_id, second.run_id]


Rows = list[list[Any]]  # [type, ts, body (a dict, or bytes as they are)]


def edit(change: Callable[[Rows], Any], which: int = 0) -> Callable[[Path, list[str]], None]:
    """Re-encode run ``which``'s rows after ``change`` and re-chain them."""

    def apply(path: Path, ids: list[str]) -> None:
        with tamper.tampering(path) as conn:
            rows = [[r.type, r.ts, json.loads(r.body)] for r in tamper.read_rows(conn, ids[which])]
            change(rows)
            plain = [(t, ts, b if isinstance(b, bytes) else rfc8785.dumps(b)) for t, ts, b in rows]
            tamper.rewrite(conn, ids[which], plain)

    return apply


def sql(statement: str) -> Callable[[Path, list[str]], None]:
    def apply(path: Path, ids: list[str]) -> None:
        with tamper.tampering(path) as conn:
            for one in statement.format(A=ids[0], B=ids[1]).split(";"):
                conn.execute(one)

    return apply


def with_policy(policy: dict[str, Any]) -> Callable[[Rows], None]:
    def change(rows: Rows) -> None:
        rows[0][2]["policy"] = policy
        rows[0][2]["policy_digest"] = iv.H("policy", rfc8785.dumps(policy)).hex()

    return change


def both(*changes: Callable[[Rows], Any]) -> Callable[[Rows], None]:
    def change(rows: Rows) -> None:
        for c in changes:
            c(rows)

    return change


def nested(depth: int, leaf: bytes) -> bytes:
    """The seed's ``iteration`` write with its value nested ``depth`` arrays deep."""
    value = b"[" * depth + leaf + b"]" * depth
    return b'{"commit":0,"path":"iteration","value":' + value + b',"verb":"set"}'


def reused(rows: Rows) -> str:
    """A commitment the root run wrote at seq 19 (inside the tool result's JSON text)."""
    return json.loads(rows[19][2]["value"][1]["content"])["ssn"]["$commit"]


def sets(seq: int, **members: Any) -> Callable[[Rows], None]:
    return lambda rows: rows[seq][2].update(members)


# The root run (A): 1-7 seed writes (2 model, 5 user_message, 6 iteration, 7 usage), 8 its
# marker, 14 and 25 receipts, 18 a marker with a decision, 19 the tool result, 27 a usage
# write, 34 run.close. The continuation (B) has 21 events.


def pops(seq: int, member: str) -> Callable[[Rows], None]:
    return lambda rows: rows[seq][2].pop(member)


def replaces(seq: int, type_: str, body: Any) -> Callable[[Rows], None]:
    return lambda rows: rows.__setitem__(seq, [type_, rows[seq][1], body])


def inserts(at: int, type_: str, body: Callable[[Rows], Any]) -> Callable[[Rows], None]:
    return lambda rows: rows.insert(at, [type_, rows[at][1], body(rows)])


def options(**members: Any) -> Callable[[Rows], None]:
    return lambda rows: rows[0][2]["options"].update(members)


def digest_list(**members: Any) -> Callable[[Rows], None]:
    return lambda rows: rows[14][2]["system"].update(members)


def parent(**members: Any) -> Callable[[Path, list[str]], None]:
    return edit(lambda rows: rows[0][2]["parent"].update(members), which=1)


def stored(seq: int, assignment: str) -> Callable[[Path, list[str]], None]:
    return sql(f"UPDATE events SET {assignment} WHERE run_id = '{{A}}' AND seq = {seq}")


def policy_and(policy: dict[str, Any], change: Callable[[Rows], Any]) -> Any:
    return edit(both(with_policy(policy), change))


def two_receipts(rows: Rows) -> None:
    """Section 8: several receipts MAY share one commit (rebuilt from the same state)."""
    again = json.loads(json.dumps(rows[14][2]))
    again["call"] = 1
    for kind in ("system", "messages", "tools"):  # keep everything the first one listed
        again[kind] = {"keep": len(again[kind]["add"]), "add": []}
    rows.insert(15, ["receipt", rows[14][1], again])
    rows[26][2]["call"] = 2
    rows[35][2].update(receipts=3, calls=3)


def fmt(version: int) -> Callable[[Rows], None]:
    return lambda rows: rows[0][2].update(format=f"agentfootprint/log/v{version}")


def projection(version: Any) -> Callable[[Rows], None]:
    return lambda rows: rows[0][2]["projection"].update(version=version)


def marked(rows: Rows, calls: int | None = None, drop: int | None = None) -> None:
    """Format v2 with receipts off (section 5.6): each receipt becomes a ``call`` member on
    the commit marker of its batch (numbered from 0; ``drop``: that one left unmarked), and
    run.close counts the calls (``calls``: a wrong count)."""
    rows[0][2].update(format="agentfootprint/log/v2")
    rows[0][2]["options"]["record_receipt"] = False
    k, pending = 0, 0
    for row in rows:
        if row[0] == "receipt":
            pending += 1
        elif row[0] == "commit" and pending:
            if k != drop:
                row[2]["call"] = k
            k, pending = k + 1, 0
        elif row[0] == "run.close":
            row[2].update(receipts=0, calls=k if calls is None else calls)
    rows[:] = [r for r in rows if r[0] != "receipt"]


def first_call(value: Any) -> Callable[[Rows], None]:
    """Format v2, receipts off, and the first call marker says ``value``."""

    def change(rows: Rows) -> None:
        marked(rows)
        next(r for r in rows if r[0] == "commit" and "call" in r[2])[2]["call"] = value

    return change


def reminted(version: int, *, unchecked: bool = False, **state: Any) -> Callable[[Rows], None]:
    """Projection ``version``, ``state`` keys set by the seed commit, and every receipt minted
    again for what that projection serves (with this page's functions: keep 0, add all).
    ``unchecked``: the receipts hash ``cache_markers`` as ``prompt_cache`` whether or not
    they apply (what a verifier that skipped the checks would accept)."""

    def change(rows: Rows) -> None:
        rows[0][2]["projection"]["version"] = version
        seed = next(i for i, r in enumerate(rows) if r[0] == "commit")
        for key, value in state.items():
            rows.insert(seed, ["write", rows[seed][1], {"commit": 0, "path": key, "verb": "set",
                                                        "value": value}])  # fmt: skip
            seed += 1
            rows[seed][2]["writes"] += 1
        folded: dict[str, Any] = {}
        pending: list[Any] = []
        for seq, (type_, _, body) in enumerate(rows):
            if type_ == "write":
                pending.append(body)
            elif type_ == "commit":
                for w in pending:
                    iv.apply_write(folded, w["path"], w["verb"], w.get("value"))
                pending = []
            elif type_ == "receipt":
                if unchecked:
                    unmarked = {k: v for k, v in folded.items() if k != "cache_markers"}
                    model, params, digests = iv.build_request(unmarked, seq, version)
                    digests["prompt_cache"] = folded["cache_markers"]
                else:
                    model, params, digests = iv.build_request(folded, seq, version)
                doc = {"v": 2 if version >= 3 else 1, "model": model, "params": params, **digests}
                body.update(
                    model=model, params=params, request=iv.H("request", rfc8785.dumps(doc)).hex()
                )
                body.update(
                    {k: {"keep": 0, "add": d} for k, d in digests.items() if k != "prompt_cache"}
                )

    return change


V1_TOK, V2_TOK = ({"v": v, "keys": ["ssn"], "patterns": ["^tok$"]} for v in (1, 2))
EVENT = {"name": "x", "payload": {}}
# (name, damage, the run whose verdict is expected: A, or its continuation B, the verdict)
FINDING = {"source": "findings", "text": "Established: Ann's record was found."}
MARK_SYSTEM = {"system": [0], "tools": [], "messages": []}
TICKET = {"tool_call_id": "t", "content": "[ticket: the result is kept on the record]"}
SERVED_TOOL_RESULT = [
    {"history": [0, None]},
    {"message": {"role": "tool", "tool_call_id": "t", "name": "lookup", "content": "raw"}},
]

CASES = [
    ("depth 255, scalar leaf", edit(replaces(6, "write", nested(254, b"1"))), "A", iv.VALID),
    ("depth 256, scalar leaf", edit(replaces(6, "write", nested(255, b"1"))), "A", "canonical"),
    ("depth 255, empty leaf", edit(replaces(6, "write", nested(254, b"[]"))), "A", iv.VALID),
    ("decision not a string", edit(sets(18, decision=5)), "A", iv.VALID),
    ("marker error not an object", edit(sets(18, error="boom")), "A", iv.VALID),
    ("run.close iterations not an int", edit(sets(34, iterations="two")), "A", iv.VALID),
    ("run.open agent missing", edit(pops(0, "agent")), "A", iv.VALID),
    ("calls missing, receipts on", edit(pops(34, "calls")), "A", "structure"),
    (
        "receipts off: calls not read",
        edit(both(fmt(1), options(record_receipt=False), sets(34, calls="x"))),
        "A",
        iv.VALID,
    ),
    (
        "record_receipt 1 is not true",
        edit(both(fmt(1), options(record_receipt=1), pops(34, "calls"))),
        "A",
        iv.VALID,
    ),
    ("a write with an empty path", edit(sets(6, path="")), "A", "structure"),
    ("a write with an unknown verb", edit(sets(6, verb="frob")), "A", "fold"),
    (  # 12.5 scans set, append and merge writes only (found by this verifier; fixed)
        "unknown verb, malformed commitment",
        edit(sets(6, verb="frob", value={"$commit": "zz"})),
        "A",
        "fold",
    ),
    ("a delete with a value", edit(sets(5, verb="delete")), "A", "structure"),
    ("receipt keep a boolean", edit(digest_list(keep=False)), "A", "structure"),
    ("receipt with a member not listed", edit(sets(14, extra=1)), "A", iv.VALID),
    ("a digest list with a third member", edit(digest_list(x=1)), "A", "structure"),
    ("params null in state, projected", edit(sets(3, value=None)), "A", "receipt"),
    ("history null, never projected", edit(sets(31, path="history", value=None)), "A", iv.VALID),
    ("a body [], hashes kept", stored(3, "body = CAST('[]' AS BLOB)"), "A", "structure"),
    ("run.open body [], hashes kept", stored(0, "body = CAST('[]' AS BLOB)"), "A", "structure"),
    (
        "a body 300 [ deep",
        stored(3, "body = CAST(printf('%.*c', 300, '[') AS BLOB)"),
        "A",
        "canonical",
    ),
    ("ts a REAL", stored(3, "ts = ts + 0.5"), "A", "rows"),
    ("a body stored as TEXT", stored(3, "body = CAST(body AS TEXT)"), "A", "rows"),
    ("parent with an extra member", parent(x=1), "B", iv.VALID),
    ("parent events a boolean", parent(events=True), "B", "structure"),
    ("a parent not in the log", parent(run_id="nope"), "B", "ancestry"),
    (
        "a run naming itself",
        edit(lambda r: r[0][2]["parent"].update(run_id=r[0][2]["run_id"]), 1),
        "B",
        "ancestry",
    ),
    ("continuing a failed run", edit(sets(34, outcome="failed")), "B", "ancestry"),
    (
        "keys in code point order",
        edit(with_policy({"v": 2, "keys": ["\uffff", "\U0001f600"], "patterns": []})),
        "A",
        iv.VALID,
    ),
    (
        "keys in UTF-16 order only",
        edit(with_policy({"v": 2, "keys": ["\U0001f600", "\uffff"], "patterns": []})),
        "A",
        "policy",
    ),
    (
        "a policy with no key or pattern",
        edit(with_policy({"v": 2, "keys": [], "patterns": []})),
        "A",
        iv.VALID,
    ),
    (
        "a policy with the key $commit",
        edit(with_policy({"v": 2, "keys": ["$commit"], "patterns": []})),
        "A",
        iv.VALID,
    ),
    (
        "policy v true",
        edit(with_policy({"v": True, "keys": ["ssn"], "patterns": []})),
        "A",
        "policy",
    ),
    (
        "version 2 lookbehind",
        edit(with_policy({"v": 2, "keys": [], "patterns": ["(?<=a)b"]})),
        "A",
        "policy",
    ),
    (
        "version 1 lookbehind",
        edit(with_policy({"v": 1, "keys": [], "patterns": ["(?<=a)b"]})),
        "A",
        iv.VALID,
    ),
    (
        "policy_digest upper case",
        edit(lambda r: r[0][2].update(policy_digest=r[0][2]["policy_digest"].upper())),
        "A",
        "policy",
    ),
    ("version 1 $ before a newline", policy_and(V1_TOK, sets(7, value={"tok\n": 1})), "A", "leak"),
    ("version 2 $ at the end only", policy_and(V2_TOK, sets(7, value={"tok\n": 1})), "A", iv.VALID),
    (
        "version 1, a 301-char key",
        policy_and(V1_TOK | {"patterns": ["^t+$"]}, sets(7, value={"t" * 301: 1})),
        "A",
        iv.VALID,
    ),
    ("version 2, a 305-char key", edit(sets(7, value={"token" * 61: 1})), "A", "leak"),
    ("a malformed commitment", edit(sets(7, value={"ssn": {"$commit": "x"}})), "A", "commitment"),
    (
        "a reused commitment in a leak",
        edit(lambda r: r[27][2].update(value={"ssn": {"x": {"$commit": reused(r)}}})),
        "A",
        "commitment-reuse",
    ),
    (
        "a payload reusing a commitment",
        edit(
            inserts(22, "event", lambda r: {"name": "x", "payload": {"k": {"$commit": reused(r)}}})
        ),
        "A",
        "commitment-reuse",
    ),
    (
        "a commitment twice in a body",
        edit(sets(27, value={"k": {"$commit": "a" * 64}, "b": [{"$commit": "a" * 64}]})),
        "A",
        "commitment-reuse",
    ),
    ("JSON text 251 deep", edit(sets(5, value="[" * 251 + "]" * 251)), "A", "leak"),
    ("JSON text 250 deep", edit(sets(5, value="[" * 250 + "]" * 250)), "A", iv.VALID),
    ("JSON text after a BOM is text", edit(sets(5, value='\ufeff{"ssn":1}')), "A", iv.VALID),
    ("JSON text after whitespace", edit(sets(5, value=' \n{"ssn":1}')), "A", "leak"),
    ("JSON text with NaN is text", edit(sets(5, value='{"ssn":NaN}')), "A", iv.VALID),
    ("JSON text, a name twice", edit(sets(5, value='{"a":1,"a":2}')), "A", "leak"),
    (
        "JSON text, a 300-digit integer",
        edit(sets(5, value='{"a":' + "9" * 300 + "}")),
        "A",
        iv.VALID,
    ),
    ("an event after a write", edit(inserts(20, "event", lambda r: EVENT)), "A", "structure"),
    (
        "the log ends inside a batch",
        edit(lambda r: r.__setitem__(slice(33, 35), [["event", r[33][1], EVENT]])),
        "A",
        "truncated",
    ),
    ("two receipts in one commit", edit(two_receipts), "A", iv.VALID),
    # -- format v2 and projection v2 (sections 5.2, 5.6, 8)
    ("format v2, receipts on", edit(fmt(2)), "A", iv.VALID),
    ("format v2, a call marker too", edit(both(fmt(2), sets(18, call=0))), "A", "structure"),
    ("format v1 ignores a call member", edit(both(fmt(1), sets(18, call="x"))), "A", iv.VALID),
    ("format v4, not sealed", edit(fmt(4)), "A", iv.VALID),
    ("format v5, nothing paused", edit(fmt(5)), "A", iv.VALID),
    ("format v6", edit(fmt(6)), "A", "structure"),
    (
        "a seal member in format v3",
        edit(both(fmt(3), sets(0, seal={"key_id": "0" * 64}))),
        "A",
        "structure",
    ),
    (
        "v4 naming a signer, closed without a seal",
        edit(both(fmt(4), sets(0, seal={"key_id": "0" * 64}))),
        "A",
        "seal",
    ),
    # -- format v3 (section 6): a log may end after the receipt written ahead of a call
    (
        "format v3, cut after a write-ahead receipt",
        edit(both(fmt(3), lambda r: r.__delitem__(slice(26, None)))),
        "A",
        iv.UNSEALED,
    ),
    (
        "format v2, cut after a receipt",
        edit(both(fmt(2), lambda r: r.__delitem__(slice(26, None)))),
        "A",
        "truncated",
    ),
    (
        "format v3, cut after a receipt and an event",
        edit(both(fmt(3), lambda r: r.__setitem__(slice(26, None), [["event", r[26][1], EVENT]]))),
        "A",
        "truncated",
    ),
    ("format v2, receipts off, marked", edit(marked), "A", iv.VALID),
    ("format v2, a call unmarked", edit(lambda r: marked(r, drop=1)), "A", "structure"),
    ("format v2, calls miscounted", edit(lambda r: marked(r, calls=3)), "A", "structure"),
    ("format v2, calls missing", edit(both(marked, pops(-1, "calls"))), "A", "structure"),
    ("format v2, markers out of order", edit(first_call(1)), "A", "structure"),
    ("format v2, call a boolean", edit(first_call(True)), "A", "structure"),
    ("format v2, call a string", edit(first_call("0")), "A", "structure"),
    (
        "format v2, record_receipt 1 is not true",
        edit(both(fmt(2), options(record_receipt=1))),
        "A",
        "structure",
    ),
    (
        "format v2, a receipt with receipts off",
        edit(both(fmt(2), options(record_receipt=False))),
        "A",
        "structure",
    ),
    (
        "format v1, receipts off, stage names not read",
        edit(lambda r: (marked(r), r[0][2].update(format="agentfootprint/log/v1"))),
        "A",
        iv.VALID,
    ),
    ("projection 2, nothing edited", edit(projection(2)), "A", iv.VALID),
    ("projection 5", edit(projection(5)), "A", "structure"),
    ("projection version a string", edit(projection("1")), "A", "structure"),
    ("projection version true", edit(projection(True)), "A", "structure"),
    ("projection not an object", edit(sets(0, projection=[1])), "A", "structure"),
    ("format v1, no projection", edit(both(fmt(1), pops(0, "projection"))), "A", iv.VALID),
    ("format v2, no projection", edit(both(fmt(2), pops(0, "projection"))), "A", "structure"),
    (
        "projection 2, the whole history by reference",
        edit(both(projection(2), sets(7, path="served_messages", value=[{"history": [0, None]}]))),
        "A",
        iv.VALID,
    ),
    (
        "projection 1 ignores served_messages",
        edit(sets(7, path="served_messages", value=[{"history": [1, None]}])),
        "A",
        iv.VALID,
    ),
    (
        "projection 2, a window, receipts minted for it",
        edit(
            reminted(
                2,
                served_messages=[
                    {"message": {"role": "user", "content": "x"}},
                    {"history": [1, None]},
                ],
            )
        ),
        "A",
        iv.VALID,
    ),
    (
        "projection 2, a tool subset, receipts minted for it",
        edit(reminted(2, served_tools=[])),
        "A",
        iv.VALID,
    ),
    (
        "projection 1, receipts minted for a v2 window",
        edit(both(reminted(2, served_messages=[{"history": [1, None]}]), projection(1))),
        "A",
        "receipt",
    ),
    (
        "projection 2, a window",
        edit(both(projection(2), sets(7, path="served_messages", value=[{"history": [1, None]}]))),
        "A",
        "receipt",
    ),
    (
        "projection 2, a slice past the end",
        edit(both(projection(2), sets(7, path="served_messages", value=[{"history": [0, 9]}]))),
        "A",
        "receipt",
    ),
    (
        "projection 2, the one tool by name",
        edit(both(projection(2), sets(7, path="served_tools", value=["lookup"]))),
        "A",
        iv.VALID,
    ),
    (
        "projection 2, every tool withheld",
        edit(both(projection(2), sets(7, path="served_tools", value=[]))),
        "A",
        "receipt",
    ),
    (
        "projection 2, a tool named twice",
        edit(both(projection(2), sets(7, path="served_tools", value=["lookup", "lookup"]))),
        "A",
        "receipt",
    ),
    # -- projection v3: prompt-cache markers, request shape 2 (section 8)
    ("projection 3, receipts of request shape 1", edit(projection(3)), "A", "receipt"),
    ("projection 3, no markers, receipts minted for it", edit(reminted(3)), "A", iv.VALID),
    (
        "projection 3, markers, receipts minted for them",
        edit(reminted(3, cache_markers={"system": [], "tools": [0], "messages": [0]})),
        "A",
        iv.VALID,
    ),
    (
        "projection 3, four markers on five served messages",
        edit(
            reminted(
                3,
                served_messages=[
                    {"message": {"role": "user", "content": str(i)}} for i in range(5)
                ],
                cache_markers={"system": [], "tools": [], "messages": [0, 1, 2, 4]},
            )
        ),
        "A",
        iv.VALID,
    ),
    (
        "projection 3, five markers",
        edit(
            both(
                reminted(
                    3,
                    served_messages=[
                        {"message": {"role": "user", "content": str(i)}} for i in range(5)
                    ],
                ),
                sets(
                    7,
                    path="cache_markers",
                    value={"system": [], "tools": [], "messages": [0, 1, 2, 3, 4]},
                ),
            )
        ),
        "A",
        "receipt",
    ),
    (
        "projection 2 ignores cache_markers",
        edit(both(projection(2), sets(7, path="cache_markers", value=5))),
        "A",
        iv.VALID,
    ),
    (
        "projection 3, markers minted unchecked that apply",
        edit(
            reminted(3, unchecked=True, cache_markers={"system": [], "tools": [0], "messages": []})
        ),
        "A",
        iv.VALID,
    ),
    *(
        (
            f"projection 3, cache_markers {label}",
            edit(reminted(3, unchecked=True, cache_markers=value)),
            "A",
            "receipt",
        )
        for label, value in (
            ("not an object", [0]),
            ("without tools", {"system": [], "messages": [0]}),
            ("with another member", {"system": [], "tools": [], "messages": [], "x": []}),
            ("marking past the end", {"system": [], "tools": [], "messages": [9]}),
            ("marking a system piece past the end", {"system": [5], "tools": [], "messages": []}),
            ("with a boolean index", {"system": [], "tools": [], "messages": [True]}),
            ("with a fraction", {"system": [], "tools": [], "messages": [0.5]}),
            ("negative", {"system": [], "tools": [], "messages": [-1]}),
            ("twice the same", {"system": [], "tools": [0, 0], "messages": []}),
            ("a list that is a string", {"system": "0", "tools": [], "messages": []}),
        )
    ),
    # -- projection v4: served_system, served_results (section 8)
    ("projection 4, receipts of request shape 1", edit(projection(4)), "A", "receipt"),
    ("projection 4, no edits, receipts minted for it", edit(reminted(4)), "A", iv.VALID),
    (
        "projection 4, a piece after the system pieces, receipts minted for it",
        edit(reminted(4, served_system=[{"system": [0, None]}, {"piece": FINDING}])),
        "A",
        iv.VALID,
    ),
    (
        "projection 4, a piece in place of the system pieces, marked",
        edit(reminted(4, served_system=[{"piece": FINDING}], cache_markers=MARK_SYSTEM)),
        "A",
        iv.VALID,
    ),
    (
        "projection 4, no system piece served, a marker on the one of system_pieces",
        edit(reminted(4, unchecked=True, served_system=[], cache_markers=MARK_SYSTEM)),
        "A",
        "receipt",
    ),
    (
        "projection 4, a tool result replaced, receipts minted for it",
        edit(reminted(4, served_messages=SERVED_TOOL_RESULT, served_results=[TICKET])),
        "A",
        iv.VALID,
    ),
    (
        "projection 3 ignores served_system",
        edit(both(reminted(3), sets(7, path="served_system", value=5))),
        "A",
        iv.VALID,
    ),
    (
        "projection 3 ignores served_results",
        edit(both(reminted(3), sets(7, path="served_results", value=5))),
        "A",
        iv.VALID,
    ),
    *(
        (
            f"projection 4, served_system {label}",
            edit(both(reminted(4), sets(7, path="served_system", value=value))),
            "A",
            "receipt",
        )
        for label, value in (
            ("not an array", {"system": [0, None]}),
            ("past the end", [{"system": [0, 2]}]),
            ("overlapping", [{"system": [0, 1]}, {"system": [0, None]}]),
            ("going back", [{"system": [1, 1]}, {"piece": FINDING}, {"system": [0, 1]}]),
            ("with a wrong member", [{"message": FINDING}]),
            ("with two members", [{"system": [0, 1], "piece": FINDING}]),
            ("with a piece that is not an object", [{"piece": "x"}]),
            ("with a boolean start", [{"system": [False, None]}]),
            ("with a fraction end", [{"system": [0, 1.5]}]),
        )
    ),
    *(
        (
            f"projection 4, served_results {label}",
            edit(
                both(
                    reminted(4, served_messages=SERVED_TOOL_RESULT),
                    sets(7, path="served_results", value=value),
                )
            ),
            "A",
            "receipt",
        )
        for label, value in (
            ("not an array", TICKET),
            ("naming no served tool result", [{**TICKET, "tool_call_id": "u"}]),
            ("naming one twice", [TICKET, TICKET]),
            ("with another member", [{**TICKET, "role": "tool"}]),
            ("with a content that is not a string", [{**TICKET, "content": ["x"]}]),
        )
    ),
    (
        "an UNSEALED parent",
        sql("DELETE FROM events WHERE run_id = '{A}' AND seq = 34"),
        "B",
        "ancestry",
    ),
]


@pytest.mark.parametrize(
    ("name", "damage", "target", "expected"),
    CASES,
    ids=[c.values[0] if hasattr(c, "values") else c[0] for c in CASES],
)
def test_case(
    base_log: tuple[Path, list[str]], name: str, damage: Any, target: str, expected: str
) -> None:
    path, ids = base_log
    with scratch() as folder:
        copy = folder / "case.db"
        shutil.copy(path, copy)
        damage(copy, ids)
        ours, theirs = mine(copy), reference(copy)
        assert ours[0][ids["AB".index(target)]][0] == expected, iv.explain_file(copy)
        assert ours == theirs


def test_index_cases(base_log: tuple[Path, list[str]]) -> None:
    """Section 9.5 step 3 on crafted index rows: type and value, presence, order."""
    path, (a, b) = base_log
    cases = {
        "UPDATE runs SET conversation_id = CAST(conversation_id AS BLOB) WHERE run_id = '{A}'": [
            (a, 0)
        ],
        "UPDATE runs SET run_id = CAST(run_id AS BLOB) WHERE run_id = '{A}'": [
            (a, None),
            (repr(a.encode()), None),
        ],
        "DELETE FROM runs WHERE run_id = '{B}'": [(b, None)],
        "INSERT INTO runs VALUES ('ghost', 'ghost', NULL, 1)": [("ghost", None)],
        # a run that failed is checked for presence only
        "UPDATE events SET body = CAST('[]' AS BLOB) WHERE run_id = '{A}' AND seq = 3;"
        "UPDATE runs SET opened_at = 5, conversation_id = 'x' WHERE run_id = '{A}'": [],
    }
    for statement, expected in cases.items():
        with scratch() as folder:
            copy = folder / "case.db"
            shutil.copy(path, copy)
            sql(statement)(copy, [a, b])
            ours = mine(copy)
            assert ours[1] == sorted(expected, key=str), statement
            assert ours == reference(copy), statement


# --- bundles -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def bundle_lines(base_log: tuple[Path, list[str]], tmp_path_factory: Any) -> list[bytes]:
    path, ids = base_log
    out = tmp_path_factory.mktemp("bundle") / "runs.afp"
    store = af.SqliteStore(path, readonly=True)
    try:
        af.export_runs(store, [ids[1]], out)
    finally:
        store.close()
    return out.read_bytes().split(b"\n")[:-1]


def rebuilt(lines: list[bytes], trailer: bool = True) -> bytes:
    """The lines, with the trailer's SHA-256 recomputed (a crafted bundle, not a cut one)."""
    data = b"".join(line + b"\n" for line in lines[:-1])
    last = json.loads(lines[-1])
    if trailer:
        last["sha256"] = hashlib.sha256(data).hexdigest()
    return data + json.dumps(last, separators=(",", ":")).encode() + b"\n"


def line_edit(i: int, old: bytes, new: bytes) -> Callable[[list[bytes]], None]:
    def change(lines: list[bytes]) -> None:
        assert old in lines[i]
        lines[i] = lines[i].replace(old, new, 1)

    return change


def member_edit(i: int, change: Callable[[dict[str, Any]], Any]) -> Callable[[list[bytes]], None]:
    def apply(lines: list[bytes]) -> None:
        value = json.loads(lines[i])
        change(value)
        lines[i] = json.dumps(value, separators=(",", ":")).encode()

    return apply


BUNDLE_CASES = [
    ("as exported", lambda lines: None, True, set()),
    (
        "manifest with a space after the version's colon",
        line_edit(0, b'e":1,', b'e": 1,'),
        True,
        {"bundle"},
    ),
    (
        "members in another order",
        member_edit(0, lambda m: m.update(format=m.pop("format"))),
        True,
        set(),
    ),
    ("version 4 (not judged)", line_edit(0, b'e":1,', b'e":4,'), True, {"usage"}),
    (
        "version 4 with a wrong trailer (still not judged)",
        line_edit(0, b'e":1,', b'e":4,'),
        False,
        {"usage"},
    ),
    # version 3 is known (section 13.5): its manifest needs artifacts
    ("version 3 without artifacts", line_edit(0, b'e":1,', b'e":3,'), True, {"bundle"}),
    # version 2 is known: its manifest needs a checkpoint and every entry an inclusion
    ("version 2 without a checkpoint", line_edit(0, b'e":1,', b'e":2,'), True, {"bundle"}),
    (
        "version 1 with a checkpoint",
        member_edit(0, lambda m: m.update(checkpoint="x")),
        True,
        {"bundle"},
    ),
    (
        "version 1 with an entry's inclusion",
        member_edit(0, lambda m: m["runs"][0].update(inclusion=None)),
        True,
        {"bundle"},
    ),
    ("version 0", line_edit(0, b'e":1,', b'e":0,'), True, {"bundle"}),
    ("version 1.0", line_edit(0, b'e":1,', b'e":1.0,'), True, {"bundle"}),
    ("policies an array", member_edit(0, lambda m: m.update(policies=[])), True, {"bundle"}),
    (
        "an entry's last_type wrong (informational)",
        member_edit(0, lambda m: m["runs"][0].update(last_type="write")),
        True,
        set(),
    ),
    (
        "an entry's requested not a boolean",
        member_edit(0, lambda m: m["runs"][0].update(requested=1)),
        True,
        {"bundle"},
    ),
    (
        "an entry's opened_at wrong",
        member_edit(0, lambda m: m["runs"][0].update(opened_at=5)),
        True,
        {"index"},
    ),
    (
        "counts.events wrong",
        member_edit(0, lambda m: m["counts"].update(events=5)),
        True,
        {"bundle"},
    ),
    (
        "a member name twice in an event line",
        line_edit(3, b'"seq":2,', b'"seq":2,"seq":2,'),
        True,
        {"bundle"},
    ),
    ("seq 2.0", line_edit(3, b'"seq":2,', b'"seq":2.0,'), True, {"bundle"}),
    ("whitespace between tokens", line_edit(3, b'"seq":2,', b'"seq" : 2 ,'), True, set()),
    (
        "a lone surrogate escape in a body",
        line_edit(3, b'"body":"{', b'"body":"\\ud800{'),
        True,
        {"bundle"},
    ),
    (
        "a run's lines out of seq order",
        lambda lines: lines.__setitem__(slice(2, 4), [lines[3], lines[2]]),
        True,
        {"rows", "ancestry"},
    ),
    ("an empty line", lambda lines: lines.insert(3, b""), True, {"bundle"}),
    ("the trailer's end 1", line_edit(-1, b'"end":true', b'"end":1'), True, {"bundle"}),
    (
        "the version read from the prefix",
        lambda lines: lines.insert(0, b'{"agentfootprint_bundle":4,'),
        True,
        {"usage"},
    ),
]


@pytest.mark.parametrize(
    ("name", "change", "trailer", "expected"), BUNDLE_CASES, ids=[c[0] for c in BUNDLE_CASES]
)
def test_bundle_case(
    bundle_lines: list[bytes], name: str, change: Any, trailer: bool, expected: set[str]
) -> None:
    lines = list(bundle_lines)
    change(lines)
    with scratch() as folder:
        path = folder / "case.afp"
        path.write_bytes(rebuilt(lines, trailer))
        ours = iv.verify_file(path)
        assert iv.failure_codes(ours) == expected, iv.explain_file(path)
        assert mine(path) == reference(path)


# --- bundles of version 2 (section 13.4): inclusion proofs under a checkpoint --------------

ORIGIN = "example.com/log"


@dataclass(frozen=True)
class Bundle2:
    """A version 2 bundle's lines, its runs by role (``A`` a sealed root, ``B`` its sealed
    continuation, ``U`` a run without a seal) and the exporting database's leaves."""

    lines: list[bytes]
    ids: dict[str, str]
    leaves: list[bytes]


@pytest.fixture(scope="module")
def bundle2(tmp_path_factory: pytest.TempPathFactory) -> Bundle2:
    from agentfootprint.exchange.transfer import export_runs
    from agentfootprint.verify.checkpoint import log_leaves

    folder = tmp_path_factory.mktemp("bundle2")
    path, out = folder / "sealed.db", folder / "runs.afp"
    script = af.MockProvider(["one", "two"])
    with af.Agent(provider=script, model="m", store=path, signer=SIGNER) as agent:
        a = agent.run_sync("hi")
        b = agent.run_sync("more", continue_from=a)
    with af.Agent(provider=af.MockProvider(["plain"]), model="m", store=path) as agent:
        u = agent.run_sync("plain")
    store = af.SqliteStore(path, readonly=True)
    try:
        export_runs(store, [a.run_id, b.run_id, u.run_id], out, signer=SIGNER, origin=ORIGIN)
        leaves = log_leaves(Verifier(store))
    finally:
        store.close()
    lines = out.read_bytes().split(b"\n")[:-1]
    assert json.loads(lines[0])["agentfootprint_bundle"] == 2 and len(leaves) == 2
    return Bundle2(lines, {"A": a.run_id, "B": b.run_id, "U": u.run_id}, leaves)


Change2 = Callable[[list[bytes], Bundle2], None]


def manifest2(change: Callable[[dict[str, Any], Bundle2], Any]) -> Change2:
    def apply(lines: list[bytes], b: Bundle2) -> None:
        manifest = json.loads(lines[0])
        change(manifest, b)
        lines[0] = json.dumps(manifest, separators=(",", ":")).encode()

    return apply


def entry_of(manifest: dict[str, Any], run_id: str) -> dict[str, Any]:
    return next(e for e in manifest["runs"] if e["run_id"] == run_id)


def entry2(role: str, change: Callable[[dict[str, Any]], Any]) -> Change2:
    return manifest2(lambda m, b: change(entry_of(m, b.ids[role])))


def inclusion2(role: str, change: Callable[[dict[str, Any]], Any]) -> Change2:
    return entry2(role, lambda e: change(e["inclusion"]))


def flipped(h: str) -> str:
    return ("1" if h[0] == "0" else "0") + h[1:]


def swap_inclusions(first: str, second: str) -> Change2:
    def change(m: dict[str, Any], b: Bundle2) -> None:
        one, two = entry_of(m, b.ids[first]), entry_of(m, b.ids[second])
        one["inclusion"], two["inclusion"] = two["inclusion"], one["inclusion"]

    return manifest2(change)


def note_of(make: Callable[[Bundle2], bytes]) -> Change2:
    """The manifest's checkpoint replaced by ``make``'s note."""
    return manifest2(lambda m, b: m.update(checkpoint=make(b).decode("utf-8")))


def note_text(change: Callable[[str], str]) -> Change2:
    """The manifest's checkpoint (a string) edited by ``change``."""
    return manifest2(lambda m, b: m.update(checkpoint=change(m["checkpoint"])))


def signed_note(leaves: list[bytes], *signers: Any, origin: str = ORIGIN) -> bytes:
    """A checkpoint of ``leaves`` with one signature line per signer, in order."""
    import base64

    from agentfootprint.verify.checkpoint import checkpoint_of

    note = checkpoint_of(leaves, signers[0], origin)
    text = note[: note.index(b"\n\n") + 1]
    for signer in signers[1:]:
        kid = hashlib.sha256(origin.encode() + b"\n\x01" + signer.public.raw).digest()[:4]
        blob = base64.b64encode(kid + signer.sign(text)).decode()
        note += f"\u2014 {origin} {blob}\n".encode()
    return note


def signature_changed(variant: str, line: int = -1) -> Change2:
    """A signature line's 64-byte signature replaced by a Wycheproof variant."""
    import base64

    from agentfootprint.testing.seals import signature_variants

    def change(note: str) -> str:
        text, _, block = note.partition("\n\n")
        signatures = block[:-1].split("\n")
        prefix, _, blob = signatures[line].rpartition(" ")
        raw = base64.b64decode(blob)
        bad = signature_variants(raw[4:])[variant]
        signatures[line] = f"{prefix} {base64.b64encode(raw[:4] + bad).decode()}"
        return text + "\n\n" + "\n".join(signatures) + "\n"

    return note_text(change)


def noncanonical_root(note: str) -> str:
    """The root line spelled with non-zero padding bits (the same 32 bytes decoded)."""
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    lines = note.split("\n")
    root = lines[2]
    lines[2] = root[:-2] + alphabet[alphabet.index(root[-2]) ^ 1] + root[-1]
    return "\n".join(lines)


def text_lines(change: Callable[[list[str]], Any]) -> Callable[[str], str]:
    """The note's text lines (before the blank line) edited in place."""

    def apply(note: str) -> str:
        text, _, signatures = note.partition("\n\n")
        lines = text.split("\n")
        change(lines)
        return "\n".join(lines) + "\n\n" + signatures

    return apply


def keep_runs(*roles: str) -> Change2:
    """Only the runs of ``roles`` (their lines and entries), counts and trailer fixed."""

    def apply(lines: list[bytes], b: Bundle2) -> None:
        keep = {b.ids[r] for r in roles}
        events = [line for line in lines[1:-1] if json.loads(line)["run"] in keep]
        manifest = json.loads(lines[0])
        manifest["runs"] = [e for e in manifest["runs"] if e["run_id"] in keep]
        manifest["counts"] = {"runs": len(manifest["runs"]), "events": len(events)}
        trailer = json.loads(lines[-1])
        trailer["events"] = len(events)
        dumped = [json.dumps(x, separators=(",", ":")).encode() for x in (manifest, trailer)]
        lines[:] = [dumped[0], *events, dumped[1]]

    return apply


def cut_last(role: str, count: int = 1) -> Change2:
    """The last ``count`` event lines of a run removed, its entry and the counts fixed."""

    def apply(lines: list[bytes], b: Bundle2) -> None:
        at = [i for i, line in enumerate(lines[1:-1], 1) if json.loads(line)["run"] == b.ids[role]]
        for i in reversed(at[-count:]):
            del lines[i]
        last = json.loads(lines[at[-count] - 1])
        manifest = json.loads(lines[0])
        entry = entry_of(manifest, b.ids[role])
        entry.update(
            events=entry["events"] - count, head=last["chain_hash"], last_type=last["type"]
        )
        manifest["counts"]["events"] -= count
        trailer = json.loads(lines[-1])
        trailer["events"] -= count
        lines[0] = json.dumps(manifest, separators=(",", ":")).encode()
        lines[-1] = json.dumps(trailer, separators=(",", ":")).encode()

    return apply


def rechained(role: str, change: Callable[[dict[str, Any]], Any]) -> Change2:
    """A run's ``run.open`` body edited by ``change``, its lines' hashes recomputed (so only
    the edit is judged) and its entry's head with them."""

    def apply(lines: list[bytes], b: Bundle2) -> None:
        run, chain = b.ids[role], bytes(32)
        for i, line in enumerate(lines[1:-1], 1):
            event = json.loads(line)
            if event["run"] != run:
                continue
            if event["seq"] == 0:
                body = json.loads(event["body"])
                change(body)
                event["body"] = rfc8785.dumps(body).decode()
            e = iv.event_hash(run, event["seq"], event["type"], event["ts"], event["body"].encode())
            chain = iv.H("chain", chain + e)
            event.update(event_hash=e.hex(), chain_hash=chain.hex())
            lines[i] = json.dumps(event, separators=(",", ":")).encode()
        manifest2(lambda m, _: entry_of(m, run).update(head=chain.hex()))(lines, b)

    return apply


def both2(*changes: Change2) -> Change2:
    def apply(lines: list[bytes], b: Bundle2) -> None:
        for change in changes:
            change(lines, b)

    return apply


def leaf_of(data: bytes) -> bytes:
    from agentfootprint.seal.merkle import leaf_hash

    return leaf_hash(data)


def want(file: str | None = None, **roles: str) -> dict[str, str]:
    """Expected verdicts by role: A, B and U VALID_UNSIGNED unless given; ``file``: the
    whole-file finding of a checkpoint no run relies on (run "")."""
    out = {"A": iv.VALID, "B": iv.VALID, "U": iv.VALID, **roles}
    return out | ({"": file} if file else {})


FRAMING = {None: "bundle"}
MALFORMED = want(A="note/malformed", B="ancestry")
NO_KEY, PINNED = (), (SIGNER,)
BUNDLE2_CASES: list[tuple[str, Change2, tuple[Any, ...], dict[Any, str]]] = [
    ("as exported", lambda lines, b: None, NO_KEY, want()),
    ("as exported, its signer pinned", lambda lines, b: None, PINNED, want()),
    ("as exported, another key pinned", lambda lines, b: None, (OTHER,), want()),
    # the proofs (step 3)
    (
        "A's proof hash flipped",
        inclusion2("A", lambda i: i["proof"].__setitem__(0, flipped(i["proof"][0]))),
        NO_KEY,
        want(A="merkle/inclusion", B="ancestry"),
    ),
    (
        "B's proof hash flipped",
        inclusion2("B", lambda i: i["proof"].__setitem__(0, flipped(i["proof"][0]))),
        PINNED,
        want(B="merkle/inclusion"),
    ),
    (
        "A's leaf index 1",
        inclusion2("A", lambda i: i.update(leaf=1)),
        NO_KEY,
        want(A="merkle/inclusion", B="ancestry"),
    ),
    (
        "B's leaf index 0",
        inclusion2("B", lambda i: i.update(leaf=0)),
        NO_KEY,
        want(B="merkle/inclusion"),
    ),
    (
        "A's leaf index the size",
        inclusion2("A", lambda i: i.update(leaf=2)),
        NO_KEY,
        want(A="merkle/inclusion", B="ancestry"),
    ),
    (
        "A's leaf index 2^53 - 1",
        inclusion2("A", lambda i: i.update(leaf=2**53 - 1)),
        NO_KEY,
        want(A="merkle/inclusion", B="ancestry"),
    ),
    (
        "the two proofs swapped",
        swap_inclusions("A", "B"),
        NO_KEY,
        want(A="merkle/inclusion", B="ancestry"),
    ),
    (
        "A's proof hash dropped",
        inclusion2("A", lambda i: i["proof"].pop()),
        NO_KEY,
        want(A="merkle/inclusion", B="ancestry"),
    ),
    (
        "A's proof hash added",
        inclusion2("A", lambda i: i["proof"].append("0" * 64)),
        NO_KEY,
        want(A="merkle/inclusion", B="ancestry"),
    ),
    (
        "A's proof 54 hashes",
        inclusion2("A", lambda i: i.update(proof=["0" * 64] * 54)),
        NO_KEY,
        want(A="merkle/inclusion", B="ancestry"),
    ),
    # null or not (steps 2 and 3)
    (
        "inclusion null on sealed A",
        entry2("A", lambda e: e.update(inclusion=None)),
        NO_KEY,
        want(A="inclusion", B="ancestry"),
    ),
    (
        "inclusion null on sealed B",
        entry2("B", lambda e: e.update(inclusion=None)),
        PINNED,
        want(B="inclusion"),
    ),
    (
        "A's inclusion on unsealed U",
        manifest2(
            lambda m, b: entry_of(m, b.ids["U"]).update(
                inclusion=entry_of(m, b.ids["A"])["inclusion"]
            )
        ),
        NO_KEY,
        want(U="inclusion"),
    ),
    ("U cut to UNSEALED", cut_last("U"), NO_KEY, want(U=iv.UNSEALED)),
    (
        "U cut to UNSEALED, with an inclusion",
        both2(cut_last("U"), entry2("U", lambda e: e.update(inclusion={"leaf": 0, "proof": []}))),
        NO_KEY,
        want(U="inclusion"),
    ),
    ("A's seal cut (section 9 first)", cut_last("A"), NO_KEY, want(A="seal", B="ancestry")),
    (  # a sealed run cut with its close and seal verifies UNSEALED: its proof must go too
        "A cut to UNSEALED, its inclusion kept",
        cut_last("A", 2),
        NO_KEY,
        want(A="inclusion", B="ancestry"),
    ),
    (
        "A cut to UNSEALED, its inclusion null",
        both2(cut_last("A", 2), entry2("A", lambda e: e.update(inclusion=None))),
        NO_KEY,
        want(A=iv.UNSEALED, B="ancestry"),
    ),
    (
        "U in format v4 naming no signer",
        rechained("U", lambda body: body.update(format="agentfootprint/log/v4")),
        NO_KEY,
        want(),
    ),
    (
        "U in format v4 naming no signer, with A's inclusion",
        both2(
            rechained("U", lambda body: body.update(format="agentfootprint/log/v4")),
            manifest2(
                lambda m, b: entry_of(m, b.ids["U"]).update(
                    inclusion=entry_of(m, b.ids["A"])["inclusion"]
                )
            ),
        ),
        NO_KEY,
        want(U="inclusion"),
    ),
    ("U rechained, nothing changed", rechained("U", lambda body: None), PINNED, want()),
    # the checkpoint (step 1, then step 3)
    (
        "a checkpoint of size 1",
        note_of(lambda b: signed_note(b.leaves[:1], SIGNER)),
        PINNED,
        want(A="merkle/inclusion", B="ancestry"),
    ),
    (
        "a checkpoint of size 3",
        note_of(lambda b: signed_note([*b.leaves, leaf_of(b"x")], SIGNER)),
        PINNED,
        want(A="merkle/inclusion", B="ancestry"),
    ),
    (
        "a checkpoint of size 2, another root",
        note_of(lambda b: signed_note([b.leaves[0], leaf_of(b"x")], SIGNER)),
        PINNED,
        want(A="merkle/inclusion", B="ancestry"),
    ),
    (
        "signed by OTHER only, SIGNER pinned (unproven)",
        note_of(lambda b: signed_note(b.leaves, OTHER)),
        PINNED,
        want(),
    ),
    (
        "signed by OTHER only, no key pinned",
        note_of(lambda b: signed_note(b.leaves, OTHER)),
        NO_KEY,
        want(),
    ),
    (
        "signed by OTHER, OTHER pinned",
        note_of(lambda b: signed_note(b.leaves, OTHER)),
        (OTHER,),
        want(),
    ),
    (
        "signed by OTHER and SIGNER, both pinned",
        note_of(lambda b: signed_note(b.leaves, OTHER, SIGNER)),
        (SIGNER, OTHER),
        want(),
    ),
    (
        "another origin",
        note_of(lambda b: signed_note(b.leaves, SIGNER, origin="example.com/other")),
        PINNED,
        want(),
    ),
    (
        "a repeated signature line",
        note_text(lambda n: n + n[n.index("\n\n") + 2 :]),
        PINNED,
        want(),
    ),
    (
        "a pinned key's signature flipped",
        signature_changed("InvalidSignature (flipped bit of R)"),
        PINNED,
        want(A="note/signature", B="ancestry"),
    ),
    (
        "a pinned key's signature S + L",
        signature_changed("SignatureMalleability (S + L)"),
        PINNED,
        want(A="note/signature", B="ancestry"),
    ),
    (
        "a pinned key's signature truncated",
        signature_changed("TruncatedSignature"),
        PINNED,
        want(A="note/signature", B="ancestry"),
    ),
    (
        "a bad signature, no key pinned (unproven)",
        signature_changed("InvalidSignature (flipped bit of R)"),
        NO_KEY,
        want(),
    ),
    (
        "a bad signature by OTHER (not pinned), then SIGNER's",
        both2(
            note_of(lambda b: signed_note(b.leaves, OTHER, SIGNER)),
            signature_changed("InvalidSignature (all zero)", 0),
        ),
        PINNED,
        want(),
    ),
    (
        "SIGNER's, then a bad one by OTHER, both pinned",
        both2(
            note_of(lambda b: signed_note(b.leaves, SIGNER, OTHER)),
            signature_changed("InvalidSignature (all zero)"),
        ),
        (SIGNER, OTHER),
        want(A="note/signature", B="ancestry"),
    ),
    (
        "an extension line (the signature breaks)",
        note_text(text_lines(lambda ls: ls.append("ext"))),
        PINNED,
        want(A="note/signature", B="ancestry"),
    ),
    (
        "an extension line, no key pinned",
        note_text(text_lines(lambda ls: ls.append("ext"))),
        NO_KEY,
        want(),
    ),
    # malformed notes (docs/merkle.md section 5)
    ("a checkpoint that is no note", note_text(lambda n: "not a note"), NO_KEY, MALFORMED),
    (
        "a note with no signature line",
        note_text(lambda n: n[: n.index("\n\n") + 2]),
        NO_KEY,
        MALFORMED,
    ),
    ("a note not ending in a newline", note_text(lambda n: n[:-1]), NO_KEY, MALFORMED),
    ("a CR in the note", note_text(lambda n: n.replace("\n", "\r\n", 1)), NO_KEY, MALFORMED),
    (
        "a TAB in the origin",
        note_text(text_lines(lambda ls: ls.__setitem__(0, "example.com\tlog"))),
        NO_KEY,
        MALFORMED,
    ),
    (
        "a unit separator (0x1f) in an extension line",
        note_text(text_lines(lambda ls: ls.append("e\x1fx"))),
        NO_KEY,
        MALFORMED,
    ),
    (  # "a control character" is read as Go's note reads it: ASCII controls only
        "a DEL in an extension line",
        note_text(text_lines(lambda ls: ls.append("e\x7fx"))),
        NO_KEY,
        want(),
    ),
    (
        "a NEL (U+0085) in an extension line",
        note_text(text_lines(lambda ls: ls.append("e\x85x"))),
        NO_KEY,
        want(),
    ),
    (
        "an origin ending in a no-break space",
        note_text(text_lines(lambda ls: ls.__setitem__(0, ORIGIN + "\u00a0"))),
        NO_KEY,
        MALFORMED,
    ),
    (
        "a signature line's name with a plus",
        note_text(lambda n: n.replace(f"\u2014 {ORIGIN} ", "\u2014 a+b ")),
        NO_KEY,
        MALFORMED,
    ),
    (
        "a signature line's name with a no-break space",
        note_text(lambda n: n.replace(f"\u2014 {ORIGIN} ", "\u2014 a\u00a0b ")),
        NO_KEY,
        MALFORMED,
    ),
    (
        "another key's line (another name): ignored",
        note_text(lambda n: n + n[n.index("\n\n") + 2 :].replace(ORIGIN, "witness")),
        PINNED,
        want(),
    ),
    (
        "an origin with a trailing space",
        note_text(text_lines(lambda ls: ls.__setitem__(0, ORIGIN + " "))),
        NO_KEY,
        MALFORMED,
    ),
    ("an empty origin", note_text(text_lines(lambda ls: ls.__setitem__(0, ""))), NO_KEY, MALFORMED),
    (
        "a size with a leading zero",
        note_text(text_lines(lambda ls: ls.__setitem__(1, "02"))),
        NO_KEY,
        MALFORMED,
    ),
    (
        "a size beyond 2^53 - 1",
        note_text(text_lines(lambda ls: ls.__setitem__(1, str(2**53)))),
        NO_KEY,
        MALFORMED,
    ),
    ("a root in non-canonical base64", note_text(noncanonical_root), NO_KEY, MALFORMED),
    (
        "a root of 31 bytes",
        note_text(text_lines(lambda ls: ls.__setitem__(2, "A" * 40 + "AA=="))),
        NO_KEY,
        MALFORMED,
    ),
    ("no root line", note_text(text_lines(lambda ls: ls.pop())), NO_KEY, MALFORMED),
    ("an empty extension line", note_text(text_lines(lambda ls: ls.append(""))), NO_KEY, MALFORMED),
    (
        "two spaces in a signature line",
        note_text(lambda n: n.replace(f"{ORIGIN} ", f"{ORIGIN}  ")),
        NO_KEY,
        MALFORMED,
    ),
    (
        "a signature line without the em dash",
        note_text(lambda n: n.replace("\u2014 ", "- ")),
        NO_KEY,
        MALFORMED,
    ),
    (
        "a signature of 4 bytes",
        note_text(lambda n: n[: n.rindex(" ") + 1] + "AAAAAA==\n"),
        NO_KEY,
        MALFORMED,
    ),
    (
        "101 signature lines",
        note_text(lambda n: n + n[n.index("\n\n") + 2 :] * 100),
        NO_KEY,
        MALFORMED,
    ),
    ("100 signature lines", note_text(lambda n: n + n[n.index("\n\n") + 2 :] * 99), PINNED, want()),
    (
        "a malformed note, A's inclusion null",
        both2(note_text(lambda n: "x"), entry2("A", lambda e: e.update(inclusion=None))),
        NO_KEY,
        want(A="inclusion", B="ancestry", file="note/malformed"),
    ),
    (
        "a malformed note, A's seal cut",
        both2(note_text(lambda n: "x"), cut_last("A")),
        NO_KEY,
        want(A="seal", B="ancestry", file="note/malformed"),
    ),
    # a checkpoint no run relies on: one whole-file finding
    ("only U", keep_runs("U"), NO_KEY, {"U": iv.VALID}),
    (
        "only U, a malformed note",
        both2(keep_runs("U"), note_text(lambda n: "x")),
        NO_KEY,
        {"U": iv.VALID, "": "note/malformed"},
    ),
    (
        "only U, a bad pinned signature",
        both2(keep_runs("U"), signature_changed("TruncatedSignature")),
        PINNED,
        {"U": iv.VALID, "": "note/signature"},
    ),
    (
        "only U, signed by OTHER, SIGNER pinned",
        both2(keep_runs("U"), note_of(lambda b: signed_note(b.leaves, OTHER))),
        PINNED,
        {"U": iv.VALID},
    ),
    (
        "only U, with A's inclusion",
        both2(
            keep_runs("A", "U"),
            manifest2(
                lambda m, b: entry_of(m, b.ids["U"]).update(
                    inclusion=entry_of(m, b.ids["A"])["inclusion"]
                )
            ),
        ),
        NO_KEY,
        {"A": iv.VALID, "U": "inclusion"},
    ),
    ("only A", keep_runs("A"), PINNED, {"A": iv.VALID}),
    ("only B (its parent missing)", keep_runs("B"), PINNED, {"B": "ancestry"}),
    # framing (13.1, 13.2): the members of version 2, and their JSON types
    (
        "version 4 (not judged)",
        manifest2(lambda m, b: m.update(agentfootprint_bundle=4)),
        NO_KEY,
        {None: "usage"},
    ),
    (
        "version 3 with the checkpoint and inclusions but no artifacts",
        manifest2(lambda m, b: m.update(agentfootprint_bundle=3)),
        NO_KEY,
        FRAMING,
    ),
    (
        "version 1 with the checkpoint and inclusions",
        manifest2(lambda m, b: m.update(agentfootprint_bundle=1)),
        NO_KEY,
        FRAMING,
    ),
    (
        "version 1 with inclusions only",
        manifest2(lambda m, b: (m.update(agentfootprint_bundle=1), m.pop("checkpoint"))),
        NO_KEY,
        FRAMING,
    ),
    (
        "version 1, checkpoint and inclusions removed",
        manifest2(
            lambda m, b: (
                m.update(agentfootprint_bundle=1),
                m.pop("checkpoint"),
                [e.pop("inclusion") for e in m["runs"]],
            )
        ),
        PINNED,
        want(),
    ),
    (
        "version 2 without a checkpoint",
        manifest2(lambda m, b: m.pop("checkpoint")),
        NO_KEY,
        FRAMING,
    ),
    ("a checkpoint null", manifest2(lambda m, b: m.update(checkpoint=None)), NO_KEY, FRAMING),
    ("a checkpoint an object", manifest2(lambda m, b: m.update(checkpoint={})), NO_KEY, FRAMING),
    (
        "a checkpoint of 262 145 bytes",
        note_text(text_lines(lambda ls: ls.append("x" * (262_145 - 170)))),
        NO_KEY,
        FRAMING,
    ),
    ("a v2 entry without inclusion", entry2("U", lambda e: e.pop("inclusion")), NO_KEY, FRAMING),
    ("an inclusion with another member", inclusion2("A", lambda i: i.update(x=1)), NO_KEY, FRAMING),
    ("an inclusion without proof", inclusion2("A", lambda i: i.pop("proof")), NO_KEY, FRAMING),
    ("an inclusion an array", entry2("A", lambda e: e.update(inclusion=[0, []])), NO_KEY, FRAMING),
    ("a leaf a string", inclusion2("A", lambda i: i.update(leaf="0")), NO_KEY, FRAMING),
    ("a leaf 0.0", inclusion2("A", lambda i: i.update(leaf=0.0)), NO_KEY, FRAMING),
    ("a leaf true", inclusion2("A", lambda i: i.update(leaf=True)), NO_KEY, FRAMING),
    ("a leaf null", inclusion2("A", lambda i: i.update(leaf=None)), NO_KEY, FRAMING),
    ("a leaf -1", inclusion2("A", lambda i: i.update(leaf=-1)), NO_KEY, FRAMING),
    ("a leaf 2^53", inclusion2("A", lambda i: i.update(leaf=2**53)), NO_KEY, FRAMING),
    ("a proof a string", inclusion2("A", lambda i: i.update(proof="0" * 64)), NO_KEY, FRAMING),
    ("a proof null", inclusion2("A", lambda i: i.update(proof=None)), NO_KEY, FRAMING),
    (
        "a proof hash in capitals",
        inclusion2("A", lambda i: i.update(proof=[i["proof"][0].upper()])),
        NO_KEY,
        FRAMING,
    ),
    (
        "a proof hash of 63 digits",
        inclusion2("A", lambda i: i.update(proof=[i["proof"][0][1:]])),
        NO_KEY,
        FRAMING,
    ),
    ("a proof hash an integer", inclusion2("A", lambda i: i.update(proof=[0])), NO_KEY, FRAMING),
    (
        "a proof of 55 hashes",
        inclusion2("A", lambda i: i.update(proof=["0" * 64] * 55)),
        NO_KEY,
        FRAMING,
    ),
]


def reference_inclusions(path: Path, keys: tuple[Any, ...]) -> dict[str, Any]:
    """Each verified run's inclusion as the reference proves it, in the shape of
    :func:`iv.inclusions`."""
    source = af.BundleSource(path)
    out: dict[str, Any] = {}
    try:
        for run, result in Verifier(source, trusted_keys=[k.public for k in keys]).verify_all():
            if not isinstance(result, VerificationError):
                i = result.inclusion
                out[run] = i and {
                    "leaf": i.leaf,
                    "size": i.size,
                    "origin": i.origin,
                    "root": i.root.hex(),
                    "signed_by": tuple(i.signed_by),
                }
    finally:
        source.close()
    return out


@pytest.mark.parametrize(
    ("name", "change", "keys", "expected"), BUNDLE2_CASES, ids=[c[0] for c in BUNDLE2_CASES]
)
def test_bundle2_case(
    bundle2: Bundle2, name: str, change: Change2, keys: tuple[Any, ...], expected: dict[Any, str]
) -> None:
    """Section 13.4 on a real version 2 bundle and crafted changes of it (the trailer's
    SHA-256 recomputed): both verifiers give the same verdicts, the expected ones, and
    prove the same inclusions."""
    lines = list(bundle2.lines)
    change(lines, bundle2)
    raw = [k.public.raw for k in keys]
    if SIGNER in keys:  # the signer pinned: the runs it sealed are VALID (section 9.2 step 4.4)
        expected = {r: iv.SIGNED if r in "AB" and c == iv.VALID else c for r, c in expected.items()}
    with scratch() as folder:
        path = folder / "case.afp"
        path.write_bytes(rebuilt(lines))
        ours = mine(path, keys)
        assert ours == reference(path, keys), iv.explain_file(path, raw)
        got = {run: code for run, (code, _) in ours[0].items()}
        assert got == {bundle2.ids.get(r, r): code for r, code in expected.items()}, got
        assert ours[1] == []
        if None in expected:
            return
        proven = iv.inclusions(path, raw)
        assert proven == reference_inclusions(path, keys)
        reasons = {run: reason for (run, _, _), reason in iv.explain_file(path, raw)}
        for run, inclusion in proven.items():
            sealed = run in (bundle2.ids["A"], bundle2.ids["B"]) and got[run] in (
                iv.VALID,
                iv.SIGNED,
            )
            assert (inclusion is not None) == (sealed and "version 1" not in name), run
            if inclusion is not None:
                signed = "signed by pinned key" in reasons[run]
                assert signed == bool(inclusion["signed_by"]), reasons[run]


HASHES = st.binary(min_size=32, max_size=32).map(bytes.hex)


def random_inclusion(data: st.DataObject, inclusion: dict[str, Any] | None) -> Any:
    """One random change of an entry's inclusion (or a made-up one for a null)."""
    if inclusion is None:
        return data.draw(
            st.none()
            | st.fixed_dictionaries(
                {"leaf": st.integers(0, 4), "proof": st.lists(HASHES, max_size=3)}
            )
        )
    proof = list(inclusion["proof"])
    kind = data.draw(st.sampled_from(["leaf", "replace", "drop", "insert", "null", "same"]))
    if kind == "leaf":
        return {"leaf": data.draw(st.integers(0, 2**53 - 1) | st.integers(0, 4)), "proof": proof}
    if kind == "replace" and proof:
        proof[data.draw(st.integers(0, len(proof) - 1))] = data.draw(HASHES)
    elif kind == "drop" and proof:
        proof.pop(data.draw(st.integers(0, len(proof) - 1)))
    elif kind == "insert":
        proof.insert(data.draw(st.integers(0, len(proof))), data.draw(HASHES))
    elif kind == "null":
        return None
    return {"leaf": inclusion["leaf"], "proof": proof}


@slow(60)
@given(st.data())
def test_random_inclusion_changes_agree(bundle2: Bundle2, data: st.DataObject) -> None:
    """Random changes of the proofs, the leaf indexes and the checkpoint's tree and signer:
    both verifiers give the same verdicts and prove the same inclusions."""
    manifest = json.loads(bundle2.lines[0])
    for entry in manifest["runs"]:
        if data.draw(st.booleans(), label=f"change {entry['run_id']}"):
            entry["inclusion"] = random_inclusion(data, entry["inclusion"])
    if data.draw(st.booleans(), label="another checkpoint"):
        leaves = data.draw(st.permutations(bundle2.leaves))
        leaves = leaves[: data.draw(st.integers(0, 2))] + [
            leaf_of(bytes([i])) for i in range(data.draw(st.integers(0, 3)))
        ]
        signers = data.draw(st.lists(st.sampled_from([SIGNER, OTHER]), min_size=1, max_size=2))
        manifest["checkpoint"] = signed_note(leaves, *signers).decode()
    keys = data.draw(st.sampled_from([(), (SIGNER,), (OTHER,), (SIGNER, OTHER)]))
    lines = [json.dumps(manifest, separators=(",", ":")).encode(), *bundle2.lines[1:]]
    with scratch() as folder:
        path = folder / "case.afp"
        path.write_bytes(rebuilt(lines))
        ours = mine(path, keys)
        note(str(iv.explain_file(path, [k.public.raw for k in keys])))
        assert ours == reference(path, keys)
        assert iv.inclusions(path, [k.public.raw for k in keys]) == reference_inclusions(path, keys)


@pytest.mark.parametrize("origin", ["example.com/l og", "example.com/l+og"])
def test_an_origin_that_is_no_key_name_is_unproven(bundle2: Bundle2, origin: str) -> None:
    # found by the independent verifier: the reference refused it as a usage error (exit 2)
    # once a key was pinned; no key can be named so, so the inclusion is unproven
    lines = list(bundle2.lines)
    note_text(text_lines(lambda ls: ls.__setitem__(0, origin)))(lines, bundle2)
    with scratch() as folder:
        path = folder / "case.afp"
        path.write_bytes(rebuilt(lines))
        pinned = {bundle2.ids[r]: (iv.SIGNED if r in "AB" else iv.VALID, None) for r in "ABU"}
        assert mine(path, PINNED) == (pinned, [])
        assert [
            i and i["signed_by"] for i in iv.inclusions(path, [SIGNER.public.raw]).values()
        ] == [
            (),
            (),
            None,
        ]
        assert mine(path, PINNED) == reference(path, PINNED)


def own_note(b: Bundle2) -> bytes:
    return json.loads(b.lines[0])["checkpoint"].encode("utf-8")


def downgraded(m: dict[str, Any], b: Bundle2) -> None:
    """Version 1: no checkpoint, no inclusions."""
    m.update(agentfootprint_bundle=1)
    m.pop("checkpoint")
    for entry in m["runs"]:
        entry.pop("inclusion")


def no_change(lines: list[bytes], b: Bundle2) -> None:
    pass


KEPT_CASES: list[tuple[str, Change2, Callable[[Bundle2], bytes], str]] = [
    ("the bundle's own checkpoint", no_change, own_note, "CONSISTENT"),
    (
        "a checkpoint of size 1",
        no_change,
        lambda b: signed_note(b.leaves[:1], SIGNER),
        "checkpoint",
    ),
    (
        "a checkpoint of size 3",
        no_change,
        lambda b: signed_note([*b.leaves, leaf_of(b"x")], SIGNER),
        "checkpoint",
    ),
    (
        "a fork: the same size, another root",
        no_change,
        lambda b: signed_note([b.leaves[0], leaf_of(b"x")], SIGNER),
        "checkpoint",
    ),
    (
        "another origin",
        no_change,
        lambda b: signed_note(b.leaves, SIGNER, origin="example.com/other"),
        "checkpoint",
    ),
    (
        "the kept note signed by OTHER",
        no_change,
        lambda b: signed_note(b.leaves, OTHER),
        "note/unverified",
    ),
    ("the kept note malformed", no_change, lambda b: b"junk", "note/malformed"),
    (
        "the kept note's signature bad",
        no_change,
        lambda b: own_note(b).replace(b"\n\n", b"\next\n\n"),
        "note/signature",
    ),
    (
        "the bundle's checkpoint signed by OTHER, the same tree",
        note_of(lambda b: signed_note(b.leaves, OTHER)),
        own_note,
        "CONSISTENT",
    ),
    (
        "the bundle's checkpoint with an extension line, the same tree",
        note_text(text_lines(lambda ls: ls.append("ext"))),
        own_note,
        "CONSISTENT",
    ),
    ("the bundle's checkpoint malformed", note_text(lambda n: "x"), own_note, "note/malformed"),
    ("a version 1 bundle", manifest2(downgraded), own_note, "checkpoint"),
    (
        "a version 1 bundle, the kept note by OTHER",
        manifest2(downgraded),
        lambda b: signed_note(b.leaves, OTHER),
        "note/unverified",
    ),
]


@pytest.mark.parametrize(
    ("name", "change", "make", "expected"), KEPT_CASES, ids=[c[0] for c in KEPT_CASES]
)
def test_bundle_against_a_kept_checkpoint(
    bundle2: Bundle2, name: str, change: Change2, make: Any, expected: str
) -> None:
    """Section 13.4 "Against a checkpoint kept elsewhere" (``verify BUNDLE --key PUB
    --checkpoint NOTE``): the same verdict as the reference's ``same_tree``."""
    from agentfootprint.verify.checkpoint import same_tree

    lines = list(bundle2.lines)
    change(lines, bundle2)
    note = make(bundle2)
    with scratch() as folder:
        path = folder / "case.afp"
        path.write_bytes(rebuilt(lines))
        assert iv.check_bundle_checkpoint(path, note, SIGNER.public.raw) == expected
        source = af.BundleSource(path)
        try:
            same_tree(source, note, [SIGNER.public])
            theirs = "CONSISTENT"
        except VerificationError as e:
            theirs = e.code
        finally:
            source.close()
        assert theirs == expected


# --- (e) storage schema 2 (section 4): rows rebuilt from the leaner layout ------------------


@pytest.fixture(scope="module")
def v2_log(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A run with a tool call (batches of several rows, compact empty commit markers) in a
    file created with storage schema 2."""
    path = tmp_path_factory.mktemp("spec2") / "v2.db"
    tool = af.define_tool(name="lookup", description="look up", execute=lookup)
    script = [af.reply(tool_calls=[af.tool_call("lookup", {"q": "ann"})]), "done"]
    with tamper.new_file_schema(2):
        store = af.SqliteStore(path)
        try:
            agent = af.Agent(provider=af.MockProvider(script), model="m", tools=[tool], store=store)
            run_id = agent.run_sync("hi").run_id
        finally:
            store.close()
    with closing(sqlite3.connect(path)) as conn:
        assert tamper.layout_of(conn) == 2
        compact = "SELECT COUNT(*) FROM rows WHERE body IS NULL AND stage IS NOT NULL"
        assert conn.execute(compact).fetchone()[0] > 0
        heads = conn.execute("SELECT COUNT(*), SUM(head IS NOT NULL) FROM rows").fetchone()
        assert 1 < heads[1] < heads[0]  # several batches, some of several rows
    return path, run_id


#: (name, statements with {lo}/{hi} the run's pos range, expected code or outcome)
V2_CASES = [
    ("as recorded", "", iv.VALID),
    ("a type code no schema has", "UPDATE rows SET type = 8 WHERE pos = {lo} + 1", "rows"),
    (
        "a type name instead of its code",
        "UPDATE rows SET type = 'write' WHERE pos = {lo} + 1",
        "rows",
    ),
    ("no ts on the first row", "UPDATE rows SET ts = NULL WHERE pos = {lo}", "rows"),
    (
        "no ts right after a head",
        "UPDATE rows SET ts = NULL WHERE pos = (SELECT MIN(pos) + 1 FROM rows WHERE pos "
        "BETWEEN {lo} AND {hi} AND head IS NOT NULL)",
        "rows",
    ),
    (
        "the last row without its head",
        "UPDATE rows SET head = NULL WHERE pos = (SELECT MAX(pos) FROM rows WHERE pos "
        "BETWEEN {lo} AND {hi})",
        "rows",
    ),
    (
        "a head dropped inside the run (two batches read as one: nothing lost)",
        "UPDATE rows SET head = NULL WHERE pos = (SELECT MIN(pos) FROM rows WHERE pos "
        "BETWEEN {lo} AND {hi} AND head IS NOT NULL)",
        iv.VALID,
    ),
    (
        "a head changed",
        "UPDATE rows SET head = zeroblob(32) WHERE pos = (SELECT MIN(pos) FROM rows WHERE pos "
        "BETWEEN {lo} AND {hi} AND head IS NOT NULL)",
        "chain",
    ),
    (
        "a head that is text",
        "UPDATE rows SET head = hex(head) WHERE pos = (SELECT MIN(pos) FROM rows WHERE pos "
        "BETWEEN {lo} AND {hi} AND head IS NOT NULL)",
        "rows",
    ),
    (
        "a stored ts changed mid-batch (caught at the batch's head)",
        "UPDATE rows SET ts = 1 WHERE pos = (SELECT MIN(pos) + 2 FROM rows WHERE pos "
        "BETWEEN {lo} AND {hi})",
        None,
    ),
    (
        "a compact commit number that is text",
        "UPDATE rows SET commit_no = 'one' WHERE pos = (SELECT MIN(pos) FROM rows WHERE pos "
        "BETWEEN {lo} AND {hi} AND body IS NULL)",
        "rows",
    ),
    (
        "a compact commit k past 2^53 - 1",
        "UPDATE rows SET stage_k = 9007199254740992 WHERE pos = (SELECT MIN(pos) FROM rows "
        "WHERE pos BETWEEN {lo} AND {hi} AND body IS NULL)",
        "rows",
    ),
    (
        "a compact commit with no stage",
        "UPDATE rows SET stage = NULL WHERE pos = (SELECT MIN(pos) FROM rows WHERE pos "
        "BETWEEN {lo} AND {hi} AND body IS NULL)",
        "rows",
    ),
    (
        "a compact commit's number changed",
        "UPDATE rows SET commit_no = commit_no + 1 WHERE pos = (SELECT MIN(pos) FROM rows "
        "WHERE pos BETWEEN {lo} AND {hi} AND body IS NULL)",
        None,
    ),
    (
        "commit columns beside a stored body",
        "UPDATE rows SET stage = 'x', commit_no = 1, stage_k = 1 WHERE pos = {lo} + 1",
        "rows",
    ),
    (
        "a compact body on a row that is no commit",
        "UPDATE rows SET type = 2 WHERE pos = (SELECT MIN(pos) FROM rows WHERE pos "
        "BETWEEN {lo} AND {hi} AND body IS NULL)",
        "rows",
    ),
    ("a row dropped", "DELETE FROM rows WHERE pos = {lo} + 3", "rows"),
    ("the run key's row gone", "DELETE FROM run_keys WHERE run_key = {key}", "rows"),
]


@pytest.mark.parametrize(("name", "statements", "expected"), V2_CASES, ids=[c[0] for c in V2_CASES])
def test_schema_2_case(
    v2_log: tuple[Path, str], name: str, statements: str, expected: str | None
) -> None:
    """Section 4's rebuilding rules, case by case: the independent verifier reads schema 2
    from the page alone and agrees with the reference (None: some failure, either code)."""
    path, run_id = v2_log
    with scratch() as folder:
        copy = folder / "case.db"
        shutil.copy(path, copy)
        with tamper.tampering(copy) as conn:
            (key,) = conn.execute(
                "SELECT run_key FROM run_keys WHERE run_id = ?", (run_id,)
            ).fetchone()
            lo, hi = key << 32, (key << 32) | 0xFFFFFFFF
            if statements:
                conn.executescript(statements.format(lo=lo, hi=hi, key=key))
        ours, theirs = mine(copy), reference(copy)
        if expected == "rows" and name == "the run key's row gone":
            # a run named by no run_keys row: each verifier names it its own way
            assert [v for v, _ in ours[0].values()] == ["rows"], iv.explain_file(copy)
            assert [v for v, _ in theirs[0].values()] == ["rows"]
            return
        (verdict,) = ours[0].values()
        if expected is None:
            assert verdict[0] not in (iv.VALID, iv.UNSEALED, iv.SIGNED), iv.explain_file(copy)
        else:
            assert verdict[0] == expected, iv.explain_file(copy)
        assert ours == theirs, iv.explain_file(copy)


# --- (e2) storage schema 4 (section 4): rows rebuilt from appends rows and their records ----


@dataclass(frozen=True)
class V4Log:
    """A file created with storage schema 4: ``ids`` a root run with a tool call under a
    policy (``A``), its continuation (``B``) and the continuation's (``C``), whose
    ``run.open`` records name a template in ``opens`` and their parent's run key."""

    path: Path
    ids: dict[str, str]


@pytest.fixture(scope="module")
def v4_log(tmp_path_factory: pytest.TempPathFactory) -> V4Log:
    path = tmp_path_factory.mktemp("spec4") / "v4.db"
    script = [af.reply(tool_calls=[af.tool_call("lookup", {"q": "ann"})]), "done", "b", "c"]
    with (
        tamper.new_file_schema(4),
        af.Agent(
            provider=af.MockProvider(script),
            model="m",
            tools=[lookup_tool()],
            store=path,
            redact=af.RedactionPolicy(keys=["ssn"]),
        ) as agent,
    ):
        a = agent.run_sync("hi")
        b = agent.run_sync("more", continue_from=a)
        c = agent.run_sync("again", continue_from=b)
    ids = {"A": a.run_id, "B": b.run_id, "C": c.run_id}
    with closing(sqlite3.connect(path)) as conn:
        assert tamper.layout_of(conn) == 4
        firsts = {role: tamper.appends_of(conn, rid)[0].data[0] for role, rid in ids.items()}
        assert firsts["B"] == firsts["C"] == 3  # run.open in form 1 (tag 2 x 1 + 1)
        assert conn.execute("SELECT COUNT(*) FROM opens").fetchone()[0] >= 1
        assert len(tamper.appends_of(conn, a.run_id)) > 2
    return V4Log(path, ids)


def uv(n: int) -> bytes:
    """``uvarint`` (section 4, "Records"), written here from the page."""
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def record(tag: int, fields: bytes, delta: bytes = b"\x00") -> bytes:
    return uv(tag) + delta + fields


def name_id(conn: sqlite3.Connection, text: str) -> int:
    (found,) = conn.execute("SELECT id FROM names WHERE text = ?", (text,)).fetchone()
    return int(found)


Records = Callable[[sqlite3.Connection], bytes]
Damage4 = Callable[[sqlite3.Connection, dict[str, str]], None]


def after_close(
    records: Records, rebuilt: tuple[str, bytes] | None = None, count: int = 1
) -> Damage4:
    """One ``appends`` row after run A's last row holding ``records``; its head the chain
    hash of ``rebuilt`` (type, body), the row the page says a reader rebuilds (zeros when
    none is expected). A row that decodes fails **structure** (nothing follows ``run.close``,
    section 9.2 step 6) or, not JSON, **canonical**; one that does not, **rows**."""
    from agentfootprint.logformat.chain import chain_hash, event_hash

    def apply(conn: sqlite3.Connection, ids: dict[str, str]) -> None:
        last = tamper.appends_of(conn, ids["A"])[-1]
        seq, ts = last.seq + last.count, tamper.read_rows(conn, ids["A"])[-1].ts
        head = bytes(32)
        if rebuilt is not None:
            head = chain_hash(last.head, event_hash(ids["A"], seq, rebuilt[0], ts, rebuilt[1]))
        conn.execute(
            "INSERT INTO appends VALUES (?, ?, ?, ?, ?)",
            (last.pos - last.seq + seq, count, ts, head, records(conn)),
        )

    return apply


def sql4(statement: str) -> Damage4:
    """SQL with ``{A}`` (a run id), ``{A_key}``, ``{A_lo}``, ``{A_hi}`` (its pos range)."""

    def apply(conn: sqlite3.Connection, ids: dict[str, str]) -> None:
        names: dict[str, Any] = {}
        for role, rid in ids.items():
            (key,) = conn.execute(
                "SELECT run_key FROM run_keys WHERE run_id = ?", (rid,)
            ).fetchone()
            names |= {role: rid, f"{role}_key": key, f"{role}_lo": key << 32,
                      f"{role}_hi": (key << 32) | 0xFFFFFFFF}  # fmt: skip
        conn.executescript(statement.format(**names))

    return apply


EVENT = b'{"name":"x","payload":{}}'
WHOLE_EVENT = ("event", EVENT)
DIGEST_A = bytes(range(32))
A_RANGE = "pos BETWEEN {A_lo} AND {A_hi}"
FIRST_OF_A = f"(SELECT MIN(pos) FROM appends WHERE {A_RANGE})"
MIDDLE_OF_A = f"(SELECT MIN(pos) FROM appends WHERE {A_RANGE} AND pos > {FIRST_OF_A})"


def middle(assignment: str) -> Damage4:
    """An assignment to run A's second ``appends`` row."""
    return sql4(f"UPDATE appends SET {assignment} WHERE pos = {MIDDLE_OF_A}")


def event(delta: bytes = b"\x00", tag: bytes = b"\x08") -> Records:
    """An event record in form 0 (tag 8), with the delta and tag bytes given."""
    return lambda conn: tag + delta + uv(len(EVENT)) + EVENT


def write_record(c: int, verb: int, value: bytes | None = None, path: int | None = None) -> Records:
    """A write in form 1 (tag 5) of ``path`` (a names id; None: the id of ``history``)."""
    opt = b"\x00" if value is None else uv(len(value) + 1) + value

    def build(conn: sqlite3.Connection) -> bytes:
        named = name_id(conn, "history") if path is None else path
        return record(5, uv(c) + uv(named) + uv(verb) + opt)

    return build


def commit_record(decision: bytes) -> Records:
    """A commit marker in form 1 (tag 11): commit 0, stage ``history``, k 3, no writes."""
    return lambda c: record(11, uv(0) + uv(name_id(c, "history")) + uv(3) + uv(0) + decision)


def receipt_record(p: bytes) -> Records:
    """A receipt in form 1 (tag 7): commit 0, model ``m``, call 0, and ``p``."""
    return lambda conn: record(7, uv(0) + uv(name_id(conn, "m")) + uv(0) + uv(len(p)) + p)


def receipt_p(*counts: int, digests: int = 0, params: bytes = b"{}") -> bytes:
    return b"".join(map(uv, counts)) + DIGEST_A + DIGEST_A * digests + params


RECEIPT_BODY = (
    b'{"call":0,"commit":0,"messages":{"add":["' + DIGEST_A.hex().encode() + b'"],"keep":2},'
    b'"model":"m","params":{},"request":"' + DIGEST_A.hex().encode() + b'","system":{"add":[],'
    b'"keep":1},"tools":{"add":[],"keep":0}}'
)
DELETED = b'{"commit":0,"path":"history","value":1,"verb":"delete"}'
LARGEST = b'{"commit":9007199254740991,"path":"history","verb":"delete"}'
DECIDED = '{"commit":0,"decision":"é","stage":"history","stage_run":"history#3","writes":0}'
RECEIPT = receipt_p(1, 0, 2, 1, 0, 0, digests=1)


def cases(role: str, expected: str, damages: dict[str, Damage4]) -> list[Any]:
    return [(name, damage, role, expected) for name, damage in damages.items()]


#: (name, damage, the run whose verdict is named, that verdict); both verifiers must agree
#: on every run and index finding of the file
# fmt: off
V4_CASES = [
    *cases("C", iv.VALID, {"as recorded": sql4("")}),
    # the columns of an appends row: its first row a NULL body
    *cases("A", "rows", {
        "count 0": sql4(f"UPDATE appends SET count = 0 WHERE pos = {FIRST_OF_A}"),
        "count as text": middle("count = 'four'"),  # INTEGER affinity keeps no number as text
        "count as real": middle("count = count + 0.5"),
        "ts as real": middle("ts = ts + 0.5"),
        "ts as text": middle("ts = ts || 'x'"),
        "head of 31 bytes": middle("head = substr(head, 2)"),
        "head as text": middle("head = hex(head)"),
        "data as text": middle("data = CAST(data AS TEXT)"),
        "data empty": middle("data = x''"),
        "an appends row dropped": sql4(f"DELETE FROM appends WHERE pos = {MIDDLE_OF_A}"),
        "the first appends row dropped": sql4(f"DELETE FROM appends WHERE pos = {FIRST_OF_A}"),
    }),
    # the tables records name: a name, a template, a parent's run key
    *cases("A", "rows", {
        "a name as a blob": sql4(
            "UPDATE names SET text = CAST(text AS BLOB) WHERE text = 'history'"),
        "a name of 257 bytes": sql4(
            "UPDATE names SET text = 'history' || printf('%250s', '') WHERE text = 'history'"),
        "a name not UTF-8": sql4(
            "UPDATE names SET text = CAST(x'ff' AS TEXT) WHERE text = 'history'"),
        "a names row deleted": sql4("DELETE FROM names WHERE text = 'history'"),
    }),
    *cases("A", "chain", {
        "a name of 256 bytes (within the limit)": sql4(
            "UPDATE names SET text = 'history' || printf('%249s', '') WHERE text = 'history'"),
    }),
    *cases("B", "rows", {
        "a template part as text": sql4("UPDATE opens SET prefix = CAST(prefix AS TEXT)"),
        "a template over 16,384 bytes": sql4("UPDATE opens SET suffix = suffix || zeroblob(16384)"),
        "a template deleted": sql4("DELETE FROM opens"),
        "the parent's id as a blob": sql4(
            "UPDATE run_keys SET run_id = CAST(run_id AS BLOB) WHERE run_key = {A_key}"),
        "the parent's id over 1,024 bytes": sql4(
            "UPDATE run_keys SET run_id = run_id || printf('%1000s', '') WHERE run_key = {A_key}"),
        "the parent's run_keys row deleted (an orphan)": sql4(
            "DELETE FROM run_keys WHERE run_key = {A_key}"),
    }),
    *cases("B", iv.VALID, {
        "a run's own id changed": sql4("UPDATE run_keys SET run_id = 'x' WHERE run_key = {C_key}"),
    }),
    # records after run A's close, each decoding as the page says (structure, or canonical
    # for a body that is not JSON) or not at all (rows)
    *cases("A", "structure", {
        "an event whole": after_close(event(), WHOLE_EVENT),
        "a tag not written in fewest bytes": after_close(event(tag=b"\x88\x00"), WHOLE_EVENT),
        "a delta of 10 bytes": after_close(event(b"\x80" * 9 + b"\x00"), WHOLE_EVENT),
        "a run.open whole": after_close(event(tag=b"\x02"), ("run.open", EVENT)),
        "a delete with a value": after_close(write_record(0, 4, b"1"), ("write", DELETED)),
        "a commit of 2^53 - 1": after_close(write_record(2**53 - 1, 4), ("write", LARGEST)),
        "a decision": after_close(commit_record(uv(3) + b"\xc3\xa9"), ("commit", DECIDED.encode())),
        "a receipt": after_close(receipt_record(RECEIPT), ("receipt", RECEIPT_BODY)),
        "a count past the records (the first row decodes)": after_close(event(), count=2),
    }),
    *cases("A", "canonical", {
        "a receipt's params not JSON": after_close(receipt_record(RECEIPT[:-2])),
    }),
    *cases("A", "rows", {
        "a delta of 11 bytes": after_close(event(b"\x80" * 10 + b"\x00")),
        "a delta past 2^64 - 1": after_close(event(b"\x80" * 9 + b"\x02")),
        "a first delta not 0": after_close(event(b"\x02")),
        "code 0": after_close(event(tag=b"\x00")),
        "code 8": after_close(event(tag=b"\x10")),
        "an event in form 1": after_close(event(tag=b"\x09")),
        "a run.close in form 1": after_close(event(tag=b"\x0d")),
        "a run.open in form 1 past seq 0": after_close(
            lambda c: record(3, uv(1) + uv(1) + uv(1) + bytes(32))),
        "a verb 5": after_close(write_record(0, 5)),
        "a commit of 2^53": after_close(write_record(2**53, 4)),
        "a path id no SQLite integer holds": after_close(write_record(0, 4, path=2**64 - 1)),
        "a path id naming no row": after_close(write_record(0, 4, path=99_999)),
        "a decision not UTF-8": after_close(commit_record(uv(2) + b"\xff")),
        "a receipt's p ending in its request digest": after_close(
            receipt_record(receipt_p(0, 0, 0, 0, 0, 0)[:-3])),
        "a receipt's counts past its p": after_close(
            receipt_record(receipt_p(0, 0, 0, 2, 0, 0, digests=1, params=b""))),
        "a receipt's keep of 2^53": after_close(receipt_record(receipt_p(2**53, 0, 0, 0, 0, 0))),
        "a byte after the records": after_close(
            lambda c: event()(c) + b"\x00", WHOLE_EVENT),
    }),
]
# fmt: on


@pytest.mark.parametrize(
    ("name", "damage", "role", "expected"), V4_CASES, ids=[c[0] for c in V4_CASES]
)
def test_schema_4_case(v4_log: V4Log, name: str, damage: Damage4, role: str, expected: str) -> None:
    """Section 4's schema-4 rules, case by case: a column, a table records name, a crafted
    record; the independent verifier reads them from the page alone and agrees with the
    reference on every verdict of the file."""
    with scratch() as folder:
        copy = folder / "case.db"
        shutil.copy(v4_log.path, copy)
        with tamper.tampering(copy) as conn:
            damage(conn, v4_log.ids)
        ours, theirs = mine(copy), reference(copy)
        assert ours[0][v4_log.ids[role]][0] == expected, iv.explain_file(copy)
        assert ours == theirs, iv.explain_file(copy)


@slow(60)
@given(st.data())
def test_schema_4_raw_mutations_agree(v4_log: V4Log, data: st.DataObject) -> None:
    """Schema 4's raw mutations alone (:func:`mutate_v4`: a flip, a cut, a column, the data,
    a names, opens or run_keys row) on a file whose continued runs name a template and their
    parent's run key: both verifiers agree."""
    raw = ("flip body", "flip event_hash", "flip chain_hash", *RAW_CUTS, *V4_MUTATIONS)
    with scratch() as folder:
        copy = folder / "case.db"
        shutil.copy(v4_log.path, copy)
        run = data.draw(st.sampled_from(sorted(v4_log.ids.values())), label="run")
        with tamper.tampering(copy) as conn:
            last = tamper.read_rows(conn, run)[-1].seq
            row = data.draw(st.integers(0, last), label="row")
            note(mutate_v4(conn, data.draw(st.sampled_from(raw), label="kind"), run, row, data))
        assert mine(copy) == reference(copy), iv.explain_file(copy)


#: (name, SQL, the verdict of every run; None: the file is a usage error)
V4_KINDS = [
    ("migration 5 recorded", "INSERT INTO schema_version VALUES (5, 'future', 0)", None),
    ("no names table", "DROP TABLE names", None),
    ("no opens table", "DROP TABLE opens", None),
    ("no appends table", "DROP TABLE appends", None),
    ("opens without suffix", "ALTER TABLE opens DROP COLUMN suffix", None),
    ("appends without data", "ALTER TABLE appends DROP COLUMN data", None),
    ("migration 4 not recorded", "DELETE FROM schema_version WHERE version = 4", None),
    ("migration 2 instead", "UPDATE schema_version SET version = 2", None),
    (
        "migration 3 beside it (the seal log)",
        "INSERT INTO schema_version VALUES (3, 'seal log', 0)",
        iv.VALID,
    ),
    (
        "schema_version without a version column",
        "DROP TABLE schema_version; CREATE TABLE schema_version (v INTEGER)",
        None,
    ),
    (
        "schema-1 tables beside it",
        "CREATE TABLE events (run_id, seq, type, ts, body, event_hash, chain_hash)",
        iv.VALID,
    ),
    (
        "schema-2 tables and migration 2 beside it (migration 4 decides)",
        "CREATE TABLE rows (pos, type, ts, body, head, stage, commit_no, stage_k); "
        "INSERT INTO schema_version VALUES (2, 'leaner rows', 0)",
        iv.VALID,
    ),
]


@pytest.mark.parametrize(("name", "statement", "expected"), V4_KINDS, ids=[c[0] for c in V4_KINDS])
def test_schema_4_file_kind(v4_log: V4Log, name: str, statement: str, expected: str | None) -> None:
    """Section 4 "What a file is", steps 3 and 4, on a schema-4 file: one whose migration 4
    is recorded but lacks its tables, or that records a migration above 4, is not judged (a
    usage error, exit 2) by either verifier; tables of other layouts beside its own change
    nothing."""
    with scratch() as folder:
        copy = folder / "case.db"
        shutil.copy(v4_log.path, copy)
        with closing(sqlite3.connect(copy)) as conn:
            conn.executescript(statement)
            conn.commit()
        ours, theirs = mine(copy), reference(copy)
        if expected is None:
            assert ours == theirs == ({None: ("usage", None)}, []), iv.explain_file(copy)
        else:
            assert {v for v, _ in ours[0].values()} == {expected}, iv.explain_file(copy)
            assert ours == theirs


def test_a_schema_2_file_with_migration_4_recorded_is_not_a_log(v2_log: tuple[Path, str]) -> None:
    with scratch() as folder:
        copy = folder / "case.db"
        shutil.copy(v2_log[0], copy)
        with closing(sqlite3.connect(copy)) as conn:
            conn.execute("INSERT INTO schema_version VALUES (4, 'appends', 0)")
            conn.commit()
        assert mine(copy) == reference(copy) == ({None: ("usage", None)}, [])


# --- (f) sealed runs (format v4, section 5.8 and 9.2 step 4) ----------------------------------


@pytest.fixture(scope="module", params=[2, 4], ids=["schema2", "schema4"])
def sealed_log(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> tuple[Path, list[str]]:
    """A sealed root run with a tool call under a policy, and its sealed continuation, in a
    file of storage schema 2 or 4 (migration 3, the seal log, on either)."""
    from agentfootprint.seal import Ed25519Signer

    path = tmp_path_factory.mktemp("sealed") / "sealed.db"
    tool, provider = lookup_tool(), lookup_script()
    with (
        tamper.new_file_schema(request.param),
        af.Agent(
            provider=provider,
            model="m",
            tools=[tool],
            store=path,
            redact=af.RedactionPolicy(keys=["ssn"]),
            signer=Ed25519Signer.from_seed(bytes(32)),
        ) as agent,
    ):
        first = agent.run_sync("hi")
        second = agent.run_sync("more", continue_from=first)
    return path, [first.run_id, second.run_id]


def _seal_of(rows: Rows) -> dict[str, Any]:
    return json.loads(rows[-1][2]["dsse"])


def _resealed(change: Callable[[dict[str, Any]], None]) -> Callable[[Rows], None]:
    """The seal's statement changed by ``change`` (the signature no longer matters: no key
    is pinned in these cases, the facts decide)."""
    import base64

    def apply(rows: Rows) -> None:
        envelope = _seal_of(rows)
        statement = json.loads(base64.b64decode(envelope["payload"]))
        change(statement)
        envelope["payload"] = base64.b64encode(rfc8785.dumps(statement)).decode()
        rows[-1][2]["dsse"] = json.dumps(envelope, separators=(",", ":"), sort_keys=True)

    return apply


def _envelope(change: Callable[[dict[str, Any]], None]) -> Callable[[Rows], None]:
    def apply(rows: Rows) -> None:
        envelope = _seal_of(rows)
        change(envelope)
        rows[-1][2]["dsse"] = json.dumps(envelope, separators=(",", ":"), sort_keys=True)

    return apply


def _predicate(**members: Any) -> Callable[[dict[str, Any]], None]:
    return lambda statement: statement["predicate"].update(members)


SEALED_CASES = [
    ("as recorded", lambda rows: None, iv.VALID),
    ("the seal removed", lambda rows: rows.pop(), "seal"),
    ("a row after the seal", lambda rows: rows.append(rows[-2]), "structure"),
    ("the seal before the close", lambda rows: rows.insert(-2, rows.pop()), "structure"),
    ("two seals", lambda rows: rows.append(rows[-1]), "structure"),
    ("a seal body with another member", lambda rows: rows[-1][2].update(x=1), "structure"),
    ("a seal body that is not a string", lambda rows: rows[-1][2].update(dsse=5), "structure"),
    ("the signer's key id dropped", lambda rows: rows[0][2].pop("seal"), "structure"),
    ("a seal in a v3 run", fmt(3), "structure"),
    ("options edited (the head moves)", sets(0, model="n"), "seal"),
    ("the event count", _resealed(_predicate(events=3)), "seal"),
    ("the outcome", _resealed(_predicate(outcome="failed")), "seal"),
    ("the receipt count", _resealed(_predicate(receipts=0)), "seal"),
    ("the policy digest", _resealed(_predicate(policy_digest=None)), "seal"),
    ("the final answer", _resealed(_predicate(final_answer_digest="0" * 64)), "seal"),
    ("the subject name", _resealed(lambda s: s["subject"][0].update(name="run:x")), "seal"),
    ("another payload type", _envelope(lambda e: e.update(payloadType="x")), "seal"),
    ("no keyid", _envelope(lambda e: e["signatures"][0].pop("keyid")), "seal"),
    ("a seal that is not JSON", lambda rows: rows[-1][2].update(dsse="{"), "seal"),
]


def _both_on_a_copy(path: Path, ids: list[str], damage: Any) -> tuple[Verdicts, Verdicts]:
    """Both verifiers' verdicts on a damaged copy of the sealed log (they must agree)."""
    with scratch() as folder:
        copy = folder / "case.db"
        shutil.copy(path, copy)
        damage(copy, ids)
        ours, theirs = mine(copy), reference(copy)
        assert ours == theirs, iv.explain_file(copy)
        return ours, theirs


@pytest.mark.parametrize(
    ("name", "change", "expected"), SEALED_CASES, ids=[case[0] for case in SEALED_CASES]
)
def test_sealed_case(
    sealed_log: tuple[Path, list[str]], name: str, change: Any, expected: str
) -> None:
    path, ids = sealed_log
    ours, _ = _both_on_a_copy(path, ids, edit(change))
    assert ours[0][ids[0]][0] == expected


def _sealer() -> Any:
    """The sealed_log fixture's signer."""
    from agentfootprint.seal import Ed25519Signer

    return Ed25519Signer.from_seed(bytes(32))


def _sig(envelope: dict[str, Any], index: int = 0) -> bytes:
    import base64

    return base64.b64decode(envelope["signatures"][index]["sig"])


def _flip_sig(envelope: dict[str, Any]) -> None:
    import base64

    sig = _sig(envelope)
    envelope["signatures"][0]["sig"] = base64.b64encode(bytes([sig[0] ^ 1]) + sig[1:]).decode()


def _url_safe(envelope: dict[str, Any]) -> None:
    import base64

    envelope["payload"] = base64.urlsafe_b64encode(base64.b64decode(envelope["payload"])).decode()
    for signature in envelope["signatures"]:
        signature["sig"] = base64.urlsafe_b64encode(base64.b64decode(signature["sig"])).decode()


def _bits_after_the_data(envelope: dict[str, Any]) -> None:
    """The sig's last character before its padding with a bit set that encodes no data (a
    64-byte signature: 86 characters and ``==``, the 86th holding 2 bits of data)."""
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    text = envelope["signatures"][0]["sig"]
    last = alphabet[alphabet.index(text[85]) | 1]
    envelope["signatures"][0]["sig"] = text[:85] + last + text[86:]


def _unpinned_second(envelope: dict[str, Any]) -> None:
    import base64

    other = {"keyid": OTHER.key_id, "sig": base64.b64encode(bytes(64)).decode()}
    envelope["signatures"].append(other)


def _keyless_copy(envelope: dict[str, Any]) -> None:
    envelope["signatures"].append({"sig": envelope["signatures"][0]["sig"]})


KEYED_SEAL_CASES = [
    ("as recorded, its signer pinned", lambda rows: None, "sealer", iv.SIGNED),
    ("as recorded, another key pinned", lambda rows: None, "other", iv.VALID),
    ("a signature bit flipped, its signer pinned", _envelope(_flip_sig), "sealer", "seal"),
    ("a signature bit flipped, another key pinned", _envelope(_flip_sig), "other", iv.VALID),
    ("a signature bit flipped, no key pinned", _envelope(_flip_sig), None, iv.VALID),
    ("a second signature, by a key not pinned", _envelope(_unpinned_second), "sealer", iv.SIGNED),
    ("a copy of the signature without keyid", _envelope(_keyless_copy), "sealer", iv.SIGNED),
    ("the URL-safe alphabet", _envelope(_url_safe), "sealer", iv.SIGNED),
    ("a sig with bits after its data", _envelope(_bits_after_the_data), None, "seal"),
    ("a sig with bits after its data, pinned", _envelope(_bits_after_the_data), "sealer", "seal"),
]


@pytest.mark.parametrize(
    ("name", "change", "pinned", "expected"),
    KEYED_SEAL_CASES,
    ids=[case[0] for case in KEYED_SEAL_CASES],
)
def test_sealed_case_with_pinned_keys(
    sealed_log: tuple[Path, list[str]], name: str, change: Any, pinned: str | None, expected: str
) -> None:
    """Section 9.2 step 4.4: the seal's signatures under the caller's pinned keys, checked by
    both verifiers from the page (seals.md section 3: a signature naming a pinned key must
    verify, one naming another key is skipped, one without keyid is tried against each)."""
    path, ids = sealed_log
    keys = {"sealer": (_sealer(),), "other": (OTHER,), None: ()}[pinned]
    with scratch() as folder:
        copy = folder / "case.db"
        shutil.copy(path, copy)
        edit(change)(copy, ids)
        ours = mine(copy, keys)
        assert ours == reference(copy, keys), iv.explain_file(copy, [k.public.raw for k in keys])
    assert ours[0][ids[0]][0] == expected


SEAL_LOG_CASES = [
    ("a leaf dropped", "DELETE FROM seal_log WHERE run_id = '{B}'", "seal-log"),
    ("a leaf renumbered", "UPDATE seal_log SET leaf = 7 WHERE run_id = '{B}'", "seal-log"),
    ("a leaf of no run", "INSERT INTO seal_log VALUES (2, 'ghost')", "seal-log"),
    (  # an order only: without a checkpoint, nothing to find
        "leaves swapped",
        "DELETE FROM seal_log; INSERT INTO seal_log VALUES (0, '{B}'); "
        "INSERT INTO seal_log VALUES (1, '{A}')",
        iv.VALID,
    ),
    (
        "a leaf id as a blob",
        "UPDATE seal_log SET run_id = CAST(run_id AS BLOB) WHERE leaf = 1",
        "seal-log",
    ),
]


@pytest.mark.parametrize(
    ("name", "statement", "expected"), SEAL_LOG_CASES, ids=[c[0] for c in SEAL_LOG_CASES]
)
def test_seal_log_case(
    sealed_log: tuple[Path, list[str]], name: str, statement: str, expected: str
) -> None:
    """Section 9.5 step 4 on crafted seal log rows: both verifiers give the same findings."""
    path, ids = sealed_log
    ours, _ = _both_on_a_copy(path, ids, sql(statement))
    assert expected in {code for code, _ in ours[0].values()}


def test_a_sealed_tail_cut_is_a_seal_log_finding_for_both(
    sealed_log: tuple[Path, list[str]],
) -> None:
    path, ids = sealed_log
    ours, _ = _both_on_a_copy(path, ids, edit(lambda rows: rows.__delitem__(slice(-2, None)), 1))
    assert ours[0][ids[1]][0] == "seal-log"


def test_checkpoint_vectors_agree_with_the_independent_check() -> None:
    """Section 9.7 implemented from the page: each checkpoint vector of tests/vectors
    (seals.json) gets the verdict the reference gives."""
    from agentfootprint.testing.seals import SIGNER

    entries = json.loads((VECTORS / "seals.json").read_text())
    checked = 0
    for entry in entries:
        if not entry["checkpoint"]:
            continue
        note = (VECTORS / entry["checkpoint"]).read_bytes()
        verdict = iv.check_checkpoint(VECTORS / entry["file"], note, SIGNER.public.raw)
        assert verdict == (entry["checkpoint_code"] or "CONSISTENT"), entry["about"]
        checked += 1
    assert checked >= 6


@pytest.mark.parametrize(("before", "after"), [(1, 1), (1, 2), (2, 3), (3, 7), (4, 8), (5, 6)])
def test_consistency_proofs_agree_with_the_independent_check(
    tmp_path: Path, before: int, after: int
) -> None:
    """Section 9.7's proof file checked from the page: the reference's proofs are CONSISTENT
    for the independent check, and each single-hash change or size swap is refused by both."""
    from agentfootprint.seal.merkle import consistency_proof, leaf_hash
    from agentfootprint.testing.seals import SIGNER
    from agentfootprint.verify.checkpoint import (
        check_consistency,
        checkpoint_of,
        consistency_file,
        parse_consistency_file,
    )

    leaves = [leaf_hash(bytes([i])) for i in range(after)]
    old = checkpoint_of(leaves[:before], SIGNER, "example.com/spec")
    new = checkpoint_of(leaves, SIGNER, "example.com/spec")
    proof = consistency_file(before, after, consistency_proof(leaves, before))
    assert iv.check_consistency_file(old, new, proof, SIGNER.public.raw) == "CONSISTENT"
    check_consistency(old, new, proof, [SIGNER.public])
    _, _, hashes = parse_consistency_file(proof)
    for index in range(len(hashes)):
        changed = list(hashes)
        changed[index] = bytes(32)
        damaged = consistency_file(before, after, changed)
        assert iv.check_consistency_file(old, new, damaged, SIGNER.public.raw) != "CONSISTENT"
        with pytest.raises(VerificationError):
            check_consistency(old, new, damaged, [SIGNER.public])
    if before != after:
        swapped = consistency_file(after, before, hashes)
        assert iv.check_consistency_file(new, old, swapped, SIGNER.public.raw) != "CONSISTENT"
        with pytest.raises(VerificationError):
            check_consistency(new, old, swapped, [SIGNER.public])


PROVEN = json.loads((VECTORS / "proven.json").read_text())


@pytest.mark.parametrize("entry", PROVEN, ids=[e["file"] for e in PROVEN])
def test_proven_vector(entry: dict[str, Any]) -> None:
    """Each inclusion-proof bundle vector (proven.json, build_proven.py) through the
    independent verifier: the codes the entry lists, the same verdicts as the reference, and
    the kept checkpoint's verdict (section 13.4)."""
    from agentfootprint.testing.seals import OTHER, SIGNER

    signers = {"signer": SIGNER, "other": OTHER}
    keys = tuple(signers[k] for k in entry["keys"])
    path = VECTORS / entry["file"]
    ours = mine(path, keys)
    assert ours == reference(path, keys), iv.explain_file(path)
    codes = sorted(
        {code for code, _ in ours[0].values() if code not in (iv.VALID, iv.UNSEALED, iv.SIGNED)}
    )
    assert codes == entry["codes"], entry["about"]
    if entry["checkpoint"]:
        note = (VECTORS / entry["checkpoint"]).read_bytes()
        verdict = iv.check_bundle_checkpoint(path, note, SIGNER.public.raw)
        assert verdict == (entry["checkpoint_code"] or "CONSISTENT"), entry["about"]


# --- (g) the sealed vectors, per run and with keys that prove nothing ------------------------

SEALS = json.loads((VECTORS / "seals.json").read_text())


def _pinned(names: list[str]) -> list[bytes]:
    """seals.json's key names as raw keys (vector_support.KEYS, read without judging them)."""
    import base64

    from agentfootprint.testing.seals import OTHER, SIGNER

    texts = {
        "signer": SIGNER.public.text,
        "other": OTHER.public.text,
        "small-order": "ed25519:AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
        "non-canonical": "ed25519:7v///////////////////////////////////////38=",
    }
    return [base64.b64decode(texts[name].removeprefix("ed25519:")) for name in names]


@pytest.mark.parametrize("entry", SEALS, ids=[e["file"] for e in SEALS])
def test_sealed_vector(entry: dict[str, Any]) -> None:
    """Each sealed vector (seals.json, build_seals.py) through the independent verifier with
    the entry's keys: the codes and outcomes it lists, the exit, each run once, the run it
    names verified alone (section 9.2 step 5), and a key that proves nothing refused (usage,
    exit 2; seals.md section 1)."""
    path = VECTORS / entry["file"]
    keys = _pinned(entry["keys"])
    verdicts = iv.verify_file(path, keys)
    assert exit_code(verdicts) == entry["exit"], iv.explain_file(path, keys)
    if entry["refused"]:
        assert verdicts == [(None, "usage", None)]
        assert iv.verify_runs(path, ["any"], keys) == [(None, "usage", None)]
        return
    assert sorted(iv.failure_codes(verdicts)) == entry["codes"], iv.explain_file(path, keys)
    outcomes = {code for _, code, _ in verdicts if code in (iv.VALID, iv.UNSEALED, iv.SIGNED)}
    assert sorted(outcomes) == sorted(entry["outcomes"])
    runs = [run for run, _, _ in verdicts]
    assert len(runs) == len(set(runs)) == 3, verdicts  # each run once: no finding beside
    if entry["run"]:
        ((run, code, seq),) = iv.verify_runs(path, [entry["run"]], keys)
        assert (run, code) == (entry["run"], entry["run_code"])
        assert exit_code([(run, code, seq)]) == entry["run_exit"]


def test_a_forged_run_verifies_under_a_small_order_key_unless_it_is_refused() -> None:
    """Why the keys are refused: the forged vector's seal verifies under its key in OpenSSL."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    for name, file in (
        ("small-order", "sealed-forged-small-order-key.db"),
        ("non-canonical", "sealed-forged-non-canonical-key.db"),
    ):
        (key,) = _pinned([name])
        source = iv.open_source(VECTORS / file)
        try:
            for run in source.run_keys():
                rows = source.rows(run)
                if rows[-1][2] != "run.seal":
                    continue
                parsed = iv.envelope_of(json.loads(rows[-1][4])["dsse"])
                assert not isinstance(parsed, str)
                env, payload, signatures = parsed
                kind = env["payloadType"].encode()
                message = b"DSSEv1 %d %b %d %b" % (len(kind), kind, len(payload), payload)
                for keyid, sig in signatures:
                    if keyid == hashlib.sha256(key).hexdigest():
                        Ed25519PublicKey.from_public_bytes(key).verify(sig, message)  # forged
                        assert iv.pinned_key_problem(key) is not None
        finally:
            source.close()


@settings(max_examples=scaled(300), deadline=None)
@given(st.binary(min_size=32, max_size=32) | st.sampled_from(SMALL_ORDER_ENCODINGS))
@example(bytes(32)).via("y = 0: a point of order 4")
@example(b"\xee" + b"\xff" * 30 + b"\x7f").via("y = p + 1: the identity, not canonical")
def test_both_verifiers_refuse_the_same_keys(raw: bytes) -> None:
    """seals.md section 1 implemented twice: the same 32 bytes are refused by both."""
    assert (iv.pinned_key_problem(raw) is None) == (key_problem(raw) is None), raw.hex()


JSON_VECTORS = json.loads((VECTORS / "json.json").read_text())


@pytest.mark.parametrize("entry", JSON_VECTORS, ids=[e["file"] for e in JSON_VECTORS])
def test_json_vector(entry: dict[str, Any]) -> None:
    """The ``verify --json`` vectors (json.json) through the independent verifier: the same
    exit, and the failure code the JSON object carries (a bundle's framing: section 13.2)."""
    path = VECTORS / entry["file"]
    verdicts = iv.verify_file(path, _pinned(entry["keys"]))
    assert exit_code(verdicts) == entry["exit"]
    codes = {code for _, code, _ in verdicts}
    assert entry["code"] in codes, verdicts
