"""Schema 4 keeps any rows a writer accepts byte for byte (docs/log-format.md section 4).

The writer stores a compact record only when its rebuild equals the body it was handed, so
whatever the rows (the runtime's bodies, near misses of the compact forms, bytes that are not
JSON at all), they read back with the same bodies, ts and hashes, however they are split
into appends, and reading from any seq gives the same rows.
"""

from __future__ import annotations

import itertools
import sqlite3
import tempfile
from contextlib import closing
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentfootprint.logformat.canonical import canon
from agentfootprint.logformat.chain import GENESIS, chain_hash, event_hash
from agentfootprint.store.base import StoredEvent
from agentfootprint.store.sqlite import SqliteStore
from agentfootprint.testing.store_contract import open_body
from agentfootprint.testing.tamper import appends_of, new_file_schema

TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=10)
SAFE = st.integers(0, 2**53 - 1)
NUMBER = st.one_of(SAFE, st.integers(2**53 - 3, 2**53 + 3))
DIGEST = st.binary(min_size=32, max_size=32).map(bytes.hex)
VALUE = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53) + 1, 2**53 - 1) | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=6,
)


def _json(value: Any) -> bytes:
    try:
        return canon(value)
    except (TypeError, ValueError):  # an integer past 2^53 - 1: written as JSON writes it
        import orjson

        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


@st.composite
def bodies(draw: st.DrawFn) -> tuple[str, bytes]:
    kind = draw(st.sampled_from(["write", "commit", "receipt", "event", "run.close", "raw"]))
    if kind == "write":
        body: dict[str, Any] = {
            "commit": draw(NUMBER),
            "path": draw(TEXT),
            "verb": draw(st.sampled_from(["set", "append", "merge", "delete", "other"])),
        }
        if draw(st.booleans()):
            body["value"] = draw(VALUE)
    elif kind == "commit":
        stage = draw(TEXT)
        body = {
            "commit": draw(NUMBER),
            "stage": stage,
            "stage_run": f"{stage}#{draw(NUMBER)}" if draw(st.booleans()) else draw(TEXT),
            "writes": draw(NUMBER),
        }
        if draw(st.booleans()):
            body["decision"] = draw(st.one_of(TEXT, SAFE))
    elif kind == "receipt":
        body = {
            "call": draw(NUMBER),
            "commit": draw(NUMBER),
            "model": draw(TEXT),
            "params": draw(st.dictionaries(TEXT, VALUE, max_size=2)),
            "request": draw(DIGEST),
            **{
                name: {"add": draw(st.lists(DIGEST, max_size=3)), "keep": draw(NUMBER)}
                for name in ("system", "messages", "tools")
            },
        }
    elif kind == "raw":
        return draw(st.sampled_from(["event", "write", "commit"])), draw(st.binary(max_size=40))
    else:
        body = draw(st.dictionaries(TEXT, VALUE, max_size=3))
    data = _json(body)
    # a near miss of the compact forms: a byte changed, added or dropped
    edit = draw(st.sampled_from(["none", "none", "space", "drop", "escape"]))
    if edit == "space" and b"," in data:
        data = data.replace(b",", b", ", 1)
    elif edit == "drop" and len(data) > 2:
        at = draw(st.integers(1, len(data) - 2))
        data = data[:at] + data[at + 1 :]
    elif edit == "escape" and b'":"' in data:
        data = data.replace(b'":"', b'":"\\u0041', 1)
    return kind if kind != "raw" else "event", data


def _chained(run_id: str, rows: list[tuple[str, int, bytes]]) -> list[StoredEvent]:
    head, out = GENESIS, []
    for seq, (type_, ts, body) in enumerate(rows):
        digest = event_hash(run_id, seq, type_, ts, body)
        head = chain_hash(head, digest)
        out.append(
            StoredEvent(
                run_id=run_id,
                seq=seq,
                type=type_,
                ts=ts,
                body=body,
                event_hash=digest,
                chain_hash=head,
            )
        )
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=st.lists(st.tuples(bodies(), st.integers(-(10**6), 10**6)), min_size=1, max_size=12),
    cuts=st.sets(st.integers(1, 12), max_size=4),
    parent_events=SAFE,
    changed=st.sampled_from(["none", "space", "member"]),
)
def test_any_rows_read_back_byte_identical(
    rows: list[tuple[tuple[str, bytes], int]],
    cuts: set[int],
    parent_events: int,
    changed: str,
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "log.db"
        with new_file_schema(4):
            store = SqliteStore(path)
        try:
            root = _chained("root", [("run.open", 1_700_000_000_000, canon(open_body("root")))])
            store.append(root)
            opened = open_body(
                "child",
                "root",
                {"events": parent_events, "head": root[-1].chain_hash.hex(), "run_id": "root"},
            )
            first = canon(opened)
            if changed == "space":
                first = first.replace(b",", b", ", 1)
            elif changed == "member":
                first = first[:-1] + b',"zz":1}'
            ts = 1_700_000_000_000
            triples = [("run.open", ts, first)]
            for (type_, body), delta in rows:
                ts += delta
                triples.append((type_, ts, body))
            events = _chained("child", triples)
            bounds = [0, *sorted(c for c in cuts if c < len(events)), len(events)]
            for start, end in itertools.pairwise(bounds):
                store.append(events[start:end])
            assert list(store.read("child")) == events
            for k in range(len(events) + 1):
                assert list(store.read("child", start=k)) == events[k:]
            assert store.run_info("child").events == len(events)
            assert store.run_info("child").last_type == events[-1].type
        finally:
            store.close()
        with closing(sqlite3.connect(path)) as conn:
            assert sum(a.count for a in appends_of(conn, "child")) == len(events)
