"""Bytes kept long are held at their size: orjson (3.12 and later) returns its output in the
buffer it grew (4 KiB for a 20-byte result), so a store or cache keeping it holds that
buffer. Counted with tracemalloc (allocations, not time)."""

from __future__ import annotations

import tracemalloc

import orjson
from hypothesis import given
from hypothesis import strategies as st

from agentfootprint.logformat.canonical import compact
from agentfootprint.logformat.chain import event_hash


@given(st.binary(max_size=3000))
def test_compact_bytes_are_the_same_bytes(data: bytes) -> None:
    assert compact(data) == data and type(compact(data)) is bytes


def _traced(make: object) -> int:
    tracemalloc.start()
    try:
        kept = make()  # type: ignore[operator]
        size = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert kept
    return size


def test_kept_json_is_held_at_its_size() -> None:
    raw = _traced(lambda: [orjson.dumps(f"run-{i}") for i in range(1000)])
    kept = _traced(lambda: [compact(orjson.dumps(f"run-{i}")) for i in range(1000)])
    assert kept < 100 * 1000  # about 50 bytes each, whatever orjson's buffer
    assert kept <= raw


def test_the_run_id_cache_holds_ids_at_their_size() -> None:
    """The event hash keeps the canonical form of the last 1,024 run ids it hashed."""
    event_hash("warm", 0, "commit", 1, b"{}")
    size = _traced(lambda: [event_hash(f"run-{i}", 0, "commit", 1, b"{}") for i in range(1024)])
    assert size < 1024 * 1024  # 4 MiB when the ids were kept in orjson's buffers
