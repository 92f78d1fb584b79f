"""Malformed logs fail with a code and a seq: never a traceback, never a pass.

Each test builds a log whose hashes are all sound (a forger can recompute them), so only
the checks on what the values *are* stand between the log and a verdict: a folded
``history`` that is an object or a string, a receipt member of the wrong type, a row whose
body is SQLite TEXT, a hash of the wrong length, a ``$commit`` hidden behind escapes.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import agentfootprint as af
from agentfootprint.logformat.canonical import canon
from agentfootprint.logformat.chain import GENESIS, chain_hash, event_hash
from agentfootprint.logformat.commitments import PolicyDocument
from agentfootprint.logformat.fold import compress_digests
from agentfootprint.logformat.limits import MAX_BODY_BYTES
from agentfootprint.logformat.request import PIECE_KINDS, RequestHasher, build_request
from agentfootprint.store.base import EventStore, StoredEvent
from agentfootprint.store.memory import MemoryStore
from agentfootprint.store.writer import RunWriter
from agentfootprint.testing.store_contract import open_body
from agentfootprint.testing.tamper import tampering

#: these tests edit or read the schema-1 ``events`` table directly (docs/log-format.md
#: appendix B): every new file of this module is created with storage schema 1
#: (tests/conftest.py)
NEW_FILE_SCHEMA = 1

HEX = "ab" * 32


def commit(index: int, writes: int = 0) -> tuple[str, dict[str, Any]]:
    return ("commit", {"commit": index, "stage": "s", "stage_run": f"s#{index}", "writes": writes})


def setting(index: int, state: dict[str, Any]) -> list[tuple[str, Any]]:
    """One commit batch that sets every key of ``state``."""
    writes = [
        ("write", {"commit": index, "path": key, "verb": "set", "value": value})
        for key, value in state.items()
    ]
    return [*writes, commit(index, len(writes))]


def receipt_for(state: dict[str, Any], call: int = 0, commit_index: int = 1) -> dict[str, Any]:
    """The receipt a writer would mint for ``state`` (first call of a root run)."""
    served = RequestHasher().digests(build_request(state))
    return {
        "call": call,
        "commit": commit_index,
        "model": served.model,
        "params": served.params,
        "request": served.request,
        **{kind: compress_digests([], served.pieces(kind)) for kind in PIECE_KINDS},
    }


GOOD_STATE: dict[str, Any] = {
    "model": "m",
    "params": {"temperature": 0.5},
    "system_pieces": [{"source": "base", "text": "be brief"}],
    "history": [{"role": "user", "content": "hi"}],
    "tool_schemas": [],
}


def record(store: EventStore, *batches: list[tuple[str, Any]], run_id: str = "r") -> RunWriter:
    writer = RunWriter(store, run_id, clock=lambda: 1_700_000_000_000)
    writer.append([("run.open", open_body(run_id))])
    for batch in batches:
        writer.append(batch)
    return writer


def failure(store: Any, run_id: str = "r") -> af.VerificationError:
    with pytest.raises(af.VerificationError) as caught:
        af.Verifier(store).verify(run_id)
    assert caught.value.run_id == run_id
    return caught.value


def test_the_helpers_build_a_log_that_verifies() -> None:
    store = MemoryStore()
    record(
        store,
        setting(0, GOOD_STATE),
        [("receipt", receipt_for(GOOD_STATE)), commit(1)],
        [("run.close", {"outcome": "answered", "commits": 2, "receipts": 1})],
    )
    assert af.Verifier(store).verify("r").receipts == 1


# -- projected state of the wrong JSON type -------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value", "words"),
    [
        ("history", {"role": "user"}, "state key history is an object, not an array"),
        ("history", "hello", "state key history is a string, not an array"),
        ("history", None, "state key history is null, not an array"),
        ("history", 3, "state key history is a number, not an array"),
        ("system_pieces", {"text": "x"}, "state key system_pieces is an object, not an array"),
        ("system_pieces", "be brief", "state key system_pieces is a string, not an array"),
        ("tool_schemas", "tools", "state key tool_schemas is a string, not an array"),
        ("tool_schemas", {"name": "t"}, "state key tool_schemas is an object, not an array"),
        ("params", [1], "state key params is an array, not an object"),
        ("params", "hot", "state key params is a string, not an object"),
        ("params", None, "state key params is null, not an object"),
        ("model", 7, "state key model is a number, not a string"),
        ("model", None, "state key model is null, not a string"),
        ("model", {"name": "m"}, "state key model is an object, not a string"),
        ("model", ["m"], "state key model is an array, not a string"),
    ],
)
def test_projected_state_of_the_wrong_type_fails_at_the_receipt(
    key: str, value: Any, words: str
) -> None:
    """A string history would be served character by character (and passed); an object
    raised a TypeError. Both fail at the receipt that would project them."""
    state = {**GOOD_STATE, key: value}
    claimed = receipt_for(GOOD_STATE)  # well formed; whatever it claims, nothing is served
    if key == "history" and isinstance(value, str):  # what the old verifier computed
        claimed = receipt_for({**GOOD_STATE, "history": list(value)})
    store = MemoryStore()
    record(store, setting(0, state), [("receipt", claimed), commit(1)])
    error = failure(store)
    assert (error.code, error.seq) == ("receipt", 1 + len(state) + 1), error
    assert words in error.reason


def test_a_wrong_typed_key_that_is_never_served_is_no_failure() -> None:
    """The check is at the projection: a run whose history is a string but makes no call
    served nothing (and receipts nothing)."""
    store = MemoryStore()
    record(store, setting(0, {**GOOD_STATE, "history": "not served"}))
    assert af.Verifier(store).verify("r").outcome is af.Outcome.UNSEALED


def test_build_request_refuses_the_same_states() -> None:
    with pytest.raises(af.AgentFootprintError, match="history is an object"):
        build_request({"model": "m", "history": {}})
    with pytest.raises(af.AgentFootprintError, match="has no 'model'"):
        build_request({})


# -- receipt members: shape is structure, meaning is receipt -----------------------------------


def _receipt_changed(change: dict[str, Any], drop: str | None = None) -> dict[str, Any]:
    body = {**receipt_for(GOOD_STATE), **change}
    if drop is not None:
        del body[drop]
    return body


@pytest.mark.parametrize(
    ("change", "drop"),
    [
        ({}, "call"),
        ({"call": "0"}, None),
        ({"call": False}, None),
        ({}, "commit"),
        ({"commit": 1.5}, None),
        ({}, "model"),
        ({"model": None}, None),
        ({"model": ["m"]}, None),
        ({}, "params"),
        ({"params": None}, None),
        ({"params": []}, None),
        ({}, "request"),
        ({"request": None}, None),
        ({"request": 5}, None),
        ({"request": HEX.upper()}, None),
        ({"request": HEX + "\n"}, None),
        ({"request": HEX[:-2]}, None),
        ({}, "messages"),
        ({"messages": None}, None),
        ({"messages": [HEX]}, None),
        ({"system": {"keep": 0}}, None),
        ({"system": {"keep": True, "add": []}}, None),
        ({"tools": {"keep": 0, "add": "x"}}, None),
        ({"tools": {"keep": 0, "add": [7]}}, None),
        ({"tools": {"keep": 0, "add": ["zz"]}}, None),
        ({"tools": {"keep": 0, "add": [], "extra": 1}}, None),
    ],
)
def test_a_receipt_member_missing_or_of_the_wrong_shape_is_structure(
    change: dict[str, Any], drop: str | None
) -> None:
    store = MemoryStore()
    record(store, setting(0, GOOD_STATE), [("receipt", _receipt_changed(change, drop)), commit(1)])
    error = failure(store)
    assert (error.code, error.seq) == ("structure", 7), error
    assert "receipt body is malformed" in error.reason


@pytest.mark.parametrize(
    "change",
    [
        {"call": 1},
        {"commit": 0},
        {"model": "other"},
        {"params": {}},
        {"request": HEX},
        {"messages": {"keep": 1, "add": []}},
        {"system": {"keep": 0, "add": [HEX]}},
    ],
)
def test_a_well_shaped_receipt_that_disagrees_is_receipt(change: dict[str, Any]) -> None:
    store = MemoryStore()
    record(store, setting(0, GOOD_STATE), [("receipt", _receipt_changed(change)), commit(1)])
    error = failure(store)
    assert (error.code, error.seq) == ("receipt", 7), error


def test_shape_is_checked_before_meaning() -> None:
    """A receipt numbered wrongly *and* missing its request: the shape is reported."""
    store = MemoryStore()
    body = _receipt_changed({"call": 5}, drop="request")
    record(store, setting(0, GOOD_STATE), [("receipt", body), commit(1)])
    assert failure(store).code == "structure"


@pytest.mark.parametrize(
    ("close", "code"),
    [
        ({"outcome": "answered", "commits": 0, "receipts": 0}, "structure"),
        ({"outcome": "answered", "commits": 0, "receipts": 0, "calls": "0"}, "structure"),
        ({"outcome": "answered", "commits": 0, "receipts": 0, "calls": None}, "structure"),
        ({"outcome": "answered", "commits": 0, "receipts": 0, "calls": 2}, "receipt"),
        ({"outcome": 1, "commits": 0, "receipts": 0, "calls": 0}, "structure"),
        ({"outcome": "answered", "commits": "0", "receipts": 0, "calls": 0}, "structure"),
        ({"outcome": "bogus", "commits": 0, "receipts": 0, "calls": 2}, "structure"),
    ],
)
def test_run_close_calls_when_receipts_are_on(close: dict[str, Any], code: str) -> None:
    store = MemoryStore()
    writer = RunWriter(store, "r")
    writer.append([("run.open", {**open_body("r"), "options": {"record_receipt": True}})])
    writer.append([("run.close", close)])
    error = failure(store)
    assert (error.code, error.seq) == (code, 1), error


def test_run_close_calls_are_not_read_when_receipts_are_off() -> None:
    store = MemoryStore()
    record(store, [("run.close", {"outcome": "failed", "commits": 0, "receipts": 0, "calls": "x"})])
    assert af.Verifier(store).verify("r").outcome is af.Outcome.VALID_UNSIGNED


# -- other members of the wrong type ----------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        {"commit": 0, "path": 3, "verb": "set", "value": 1},
        {"commit": 0, "path": ["x"], "verb": "set", "value": 1},
        {"commit": 0, "path": "x", "verb": None, "value": 1},
        {"commit": "0", "path": "x", "verb": "set", "value": 1},
        {"commit": 0, "verb": "set", "value": 1},
    ],
)
def test_a_write_member_of_the_wrong_type_is_structure(body: dict[str, Any]) -> None:
    store = MemoryStore()
    record(store, [("write", body), commit(0, 1)])
    error = failure(store)
    assert (error.code, error.seq) == ("structure", 1), error


@pytest.mark.parametrize(
    "body",
    [
        {"name": "n", "payload": [1]},
        {"name": "n", "payload": "text"},
        {"name": 1, "payload": {}},
        {"payload": {}},
    ],
)
def test_an_event_member_of_the_wrong_type_is_structure(body: dict[str, Any]) -> None:
    store = MemoryStore()
    record(store, [("event", body), commit(0)])
    error = failure(store)
    assert (error.code, error.seq) == ("structure", 1), error


@pytest.mark.parametrize(
    "parent",
    [
        [1, 2],
        "p",
        7,
        {"run_id": "p", "events": 3},
        {"run_id": 5, "events": 3, "head": HEX},
        {"run_id": "p", "events": True, "head": HEX},
        {"run_id": "p", "events": 3, "head": HEX + "\n"},
        {"run_id": "p", "events": 3, "head": " " + HEX[1:]},
    ],
)
def test_a_malformed_parent_reference_is_structure(parent: Any) -> None:
    store = MemoryStore()
    RunWriter(store, "r").append([("run.open", {**open_body("r"), "parent": parent})])
    error = failure(store)
    assert (error.code, error.seq) == ("structure", 0), error


@pytest.mark.parametrize(
    "opened",
    [
        {"policy": "ssn", "policy_digest": HEX},
        {"policy": {"v": 1, "keys": "ssn", "patterns": []}, "policy_digest": HEX},
        {"policy": {"v": 1, "keys": [1], "patterns": []}, "policy_digest": HEX},
        {"policy": {"v": "1", "keys": ["ssn"], "patterns": []}, "policy_digest": HEX},
        {"policy": None, "policy_digest": 5},
    ],
)
def test_a_malformed_policy_is_policy(opened: dict[str, Any]) -> None:
    store = MemoryStore()
    RunWriter(store, "r").append([("run.open", {**open_body("r"), **opened})])
    error = failure(store)
    assert (error.code, error.seq) == ("policy", 0), error


def test_options_of_another_type_mean_no_receipts_were_promised() -> None:
    store = MemoryStore()
    RunWriter(store, "r").append([("run.open", {**open_body("r"), "options": "receipts"})])
    assert af.Verifier(store).verify("r").outcome is af.Outcome.UNSEALED


# -- rows whose stored values are of the wrong type -------------------------------------------


def _sealed_rows(run_id: str = "r") -> list[StoredEvent]:
    store = MemoryStore()
    record(store, setting(0, {"x": 1}), run_id=run_id)
    return list(store.read(run_id))


def _held(rows: list[StoredEvent]) -> MemoryStore:
    """A memory store holding exactly these rows (as a crafted file would hand them over)."""
    store = MemoryStore()
    store._events[rows[0].run_id] = rows
    store._index[rows[0].run_id] = ("r", None)
    return store


def _replaced(row: StoredEvent, **fields: Any) -> StoredEvent:
    return StoredEvent(**{**{k: getattr(row, k) for k in StoredEvent.__slots__}, **fields})


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"body": '{"x":1}'}, "body is text, not bytes"),
        ({"body": None}, "body is null, not bytes"),
        ({"body": 32}, "body is an integer, not bytes"),
        ({"body": bytearray(b"{}")}, "body is a bytearray, not bytes"),
        ({"event_hash": b"\x00" * 31}, "event_hash is 31 bytes, not 32 bytes"),
        ({"event_hash": "00" * 32}, "event_hash is text, not 32 bytes"),
        ({"chain_hash": None}, "chain_hash is null, not 32 bytes"),
        ({"chain_hash": b"\x00" * 33}, "chain_hash is 33 bytes, not 32 bytes"),
        ({"ts": 1.5}, "ts is a real number, not an integer"),
        ({"ts": "1"}, "ts is text, not an integer"),
        ({"ts": True}, "ts is a boolean, not an integer"),
        ({"ts": 2**53}, "outside +-(2**53 - 1)"),
        ({"ts": -(2**60)}, "outside +-(2**53 - 1)"),
        ({"type": None}, "type is null, not text"),
        ({"type": 3}, "type is an integer, not text"),
        ({"type": "seal"}, "unknown event type 'seal'"),
        ({"seq": "1"}, "seq is text, not an integer"),
        ({"seq": 1.0}, "seq is a real number, not an integer"),
        ({"seq": True}, "seq is a boolean, not an integer"),
        ({"run_id": "other"}, "row belongs to run 'other'"),
        ({"run_id": b"r"}, "row belongs to run b'r'"),
    ],
)
def test_a_row_value_of_the_wrong_type_is_rows_at_its_seq(
    fields: dict[str, Any], words: str
) -> None:
    rows = _sealed_rows()
    rows[1] = _replaced(rows[1], **fields)
    error = failure(_held(rows))
    assert (error.code, error.seq) == ("rows", 1), error
    assert words in error.reason


def test_a_body_over_the_size_limit_is_rows_before_it_is_parsed() -> None:
    rows = _sealed_rows()
    rows[1] = _replaced(rows[1], body=b"[" * (MAX_BODY_BYTES + 1))
    error = failure(_held(rows))
    assert (error.code, error.seq) == ("rows", 1) and "over the limit" in error.reason


def test_a_deep_body_holding_a_long_number_is_canonical_not_a_recursion_error() -> None:
    """parse() turns long integers into floats by recursion: a body nested ~900 deep
    overflowed the stack (it is refused anyway: deeper than 255)."""
    body = b'{"x":' + b"[" * 950 + b"12345678901234567" + b"]" * 950 + b"}"
    rows = _sealed_rows()
    rows[1] = _rehashed(rows, 1, body)
    error = failure(_held(rows[:2]))
    assert (error.code, error.seq) == ("canonical", 1), error


def _rehashed(rows: list[StoredEvent], seq: int, body: bytes) -> StoredEvent:
    row = rows[seq]
    digest = event_hash(row.run_id, seq, row.type, row.ts, body)
    previous = rows[seq - 1].chain_hash if seq else GENESIS
    return _replaced(row, body=body, event_hash=digest, chain_hash=chain_hash(previous, digest))


def test_a_run_id_that_is_not_text_is_misuse_when_asked_for() -> None:
    # found in a file's events it is a verdict (rows: test_verify_all); asked for by a
    # caller it is a wrong argument
    with pytest.raises(af.UsageError) as caught:
        af.Verifier(MemoryStore()).verify(b"r")  # type: ignore[arg-type]
    assert caught.value.option == "run_id"


def test_cache_size_is_checked_with_a_usage_error() -> None:
    with pytest.raises(af.UsageError, match="cache_size"):
        af.Verifier(MemoryStore(), cache_size=0)
    with pytest.raises(af.UsageError, match="cache_size"):
        af.Verifier(MemoryStore(), cache_size="3")  # type: ignore[arg-type]


# -- the same on a real SQLite file -----------------------------------------------------------


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "log.db"
    store = af.SqliteStore(path)
    try:
        record(store, setting(0, {"x": 1}), [("run.close", close_body(1))])
    finally:
        store.close()
    yield path


def close_body(commits: int) -> dict[str, Any]:
    return {"outcome": "answered", "commits": commits, "receipts": 0}


def _sqlite_failure(path: Path, run_id: str = "r") -> af.VerificationError:
    store = af.SqliteStore(path)
    try:
        return failure(store, run_id)
    finally:
        store.close()


@pytest.mark.parametrize(
    ("sql", "words"),
    [
        ("UPDATE events SET body = CAST(body AS TEXT) WHERE seq = 1", "body is text"),
        ("UPDATE events SET event_hash = substr(event_hash, 1, 16) WHERE seq = 1", "16 bytes"),
        ("UPDATE events SET chain_hash = hex(chain_hash) WHERE seq = 1", "chain_hash is text"),
        ("UPDATE events SET ts = ts + 0.5 WHERE seq = 1", "ts is a real number"),
        ("UPDATE events SET ts = 'soon' WHERE seq = 1", "ts is text"),
        ("UPDATE events SET type = 7 WHERE seq = 1", "unknown event type '7'"),
    ],
)
def test_crafted_sqlite_columns_are_rows(db: Path, sql: str, words: str) -> None:
    with tampering(db) as conn:
        assert conn.execute(sql).rowcount == 1
    error = _sqlite_failure(db)
    assert (error.code, error.seq) == ("rows", 1), error
    assert words in error.reason


def test_the_crafted_file_is_really_crafted(db: Path) -> None:
    """The TEXT body really is stored as TEXT (the test above is not vacuous)."""
    with tampering(db) as conn:
        conn.execute("UPDATE events SET body = CAST(body AS TEXT) WHERE seq = 1")
    with sqlite3.connect(db) as conn:
        (kind,) = conn.execute("SELECT typeof(body) FROM events WHERE seq = 1").fetchone()
    assert kind == "text"


# -- the $commit pre-filter -------------------------------------------------------------------


def test_an_escaped_commitment_two_levels_deep_is_scanned_without_a_policy() -> None:
    r"""``\u005c\u0075`` spells ``\u`` one level down: the body holds neither ``$`` nor
    ``u0024`` (the old pre-filter skipped it) but a backslash, so it is scanned."""
    level2 = '{"\\u0024commit": "not a digest"}'  # JSON text whose key is spelled \u0024
    escaped = level2.replace('"', '\\"').replace("\\u0024", "\\u005c\\u00750024")
    level1 = '{"note": "' + escaped + '"}'  # JSON text holding level 2 as a string
    assert json.loads(json.loads(level1)["note"]) == {"$commit": "not a digest"}
    write = {"commit": 0, "path": "history", "verb": "set", "value": [{"content": level1}]}
    body = canon(write)
    assert b"$" not in body and b"u0024" not in body and b"\\" in body
    store = MemoryStore()
    record(store, [("write", write)])
    error = failure(store)
    assert (error.code, error.seq) == ("commitment", 1), error
    assert "malformed commitment" in error.reason


def test_a_commitment_behind_one_escape_is_scanned_too() -> None:
    value = '{"\\u0024commit": 5}'
    store = MemoryStore()
    record(store, [("write", {"commit": 0, "path": "note", "verb": "set", "value": value})])
    assert failure(store).code == "commitment"


def test_a_run_id_with_a_lone_surrogate_is_rows_and_shown_escaped() -> None:
    """A store that escapes undecodable bytes hands over such an id; it cannot be hashed."""
    run_id = "r\udcff"
    rows = [_replaced(row, run_id=run_id) for row in _sealed_rows()]
    with pytest.raises(af.VerificationError) as caught:
        af.Verifier(_held(rows)).verify(run_id)
    assert caught.value.code == "rows" and "not UTF-8" in caught.value.reason
    assert caught.value.run_id == repr(run_id)
    str(caught.value).encode("utf-8")  # printable


# -- recorded version 1 patterns that backtrack -----------------------------------------------

LEGACY = {"v": 1, "keys": ["ssn"], "patterns": ["^(a|a)+$"]}  # backtracks: 2**n paths


def _legacy_open(run_id: str = "r") -> dict[str, Any]:
    digest = PolicyDocument.from_json(LEGACY).digest()
    return {**open_body(run_id), "policy": LEGACY, "policy_digest": digest}


def test_a_pattern_that_runs_out_of_its_budget_is_policy_budget_at_that_seq() -> None:
    store = MemoryStore()
    writer = RunWriter(store, "r")
    writer.append([("run.open", _legacy_open())])
    writer.append([write_body(0, "note", {"fine": 1}), commit(0, 1)])
    writer.append([write_body(1, "note", {"a" * 40 + "!": 1}), commit(1, 1)])
    error = failure(store)
    assert (error.code, error.seq) == ("policy-budget", 3), error
    assert "budget" in error.reason


def test_a_malformed_commitment_is_reported_before_the_budget() -> None:
    """Both in one value: the code does not depend on the order the walk meets them."""
    value = {"a" * 40 + "!": 1, "z": {"$commit": "nope"}}
    store = MemoryStore()
    writer = RunWriter(store, "r")
    writer.append([("run.open", _legacy_open())])
    writer.append([write_body(0, "note", value), commit(0, 1)])
    error = failure(store)
    assert (error.code, error.seq) == ("commitment", 1), error


def write_body(index: int, path: str, value: Any) -> tuple[str, dict[str, Any]]:
    return ("write", {"commit": index, "path": path, "verb": "set", "value": value})


def test_a_commitment_digest_with_a_final_newline_is_malformed() -> None:
    store = MemoryStore()
    record(store, [write_body(0, "note", {"$commit": HEX + "\n"}), commit(0, 1)])
    assert failure(store).code == "commitment"
