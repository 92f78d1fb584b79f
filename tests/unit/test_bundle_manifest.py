"""Reading a bundle's manifest one run entry at a time, and what opening a bundle keeps.

``stream_manifest`` reads the manifest line in blocks and hands over each element of
``runs`` as it is parsed: it must give exactly what the whole parse gives (same decoder, so
the same values), whatever the blocks, or refuse (``NotStreamed``) wherever the whole parse
fails, so that the reader's verdicts never depend on which of the two read the line. Opening
a bundle and reading its index again hold one block of the manifest, not the line; what
opening keeps per run is a few hundred bytes (``RunTable``).
"""

from __future__ import annotations

import hashlib
import json
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from agentfootprint.verify.bundle import BundleSource
from agentfootprint.verify.bundle_json import _DECODER
from agentfootprint.verify.bundle_manifest import (
    _INDEX_DECODER,
    _MANIFEST_DECODER,
    RUNS,
    BundleIndexEntry,
    NotStreamed,
    _Entry,
    stream_manifest,
)

HEX = "ab" * 32


def _blocks(data: bytes, sizes: list[int]) -> Iterator[bytes]:
    """``data`` cut into blocks of the given sizes in turn (the last size repeated)."""
    at, index = 0, 0
    while at < len(data):
        size = max(1, sizes[min(index, len(sizes) - 1)])
        yield data[at : at + size]
        at, index = at + size, index + 1


def _whole(text: str, decoder: json.JSONDecoder) -> list[tuple[str, Any]] | None:
    """What the stream must give, from the whole parse: None where it must refuse."""
    try:
        value = decoder.decode(text)
    except Exception:  # any failure of the whole parse (it says why): the stream refuses
        return None
    if type(value) is not dict:
        return None
    expected: list[tuple[str, Any]] = []
    for name, member in value.items():
        if name != "runs":
            expected.append((name, member))
        elif type(member) is not list:
            return None
        else:
            expected += [("runs", RUNS)] + [("runs", item) for item in member]
    return expected


def _streamed(data: bytes, sizes: list[int], decoder: json.JSONDecoder) -> Any:
    try:
        return list(stream_manifest(_blocks(data, sizes), decoder))
    except NotStreamed:
        return None


def _entry(index: int, **changed: Any) -> dict[str, Any]:
    return {
        "run_id": f"run-{index:04d}",
        "conversation_id": f"run-{index:04d}",
        "parent_run_id": None,
        "opened_at": 1_700_000_000_000 + index,
        "events": 1,
        "last_type": "run.open",
        "head": HEX,
        "policy_digest": None,
        "requested": True,
        **changed,
    }


def _manifest(runs: int) -> dict[str, Any]:
    return {
        "agentfootprint_bundle": 1,
        "format": "agentfootprint/log/v1",
        "canon": "RFC8785",
        "hash": "SHA-256",
        "library": "test é \u2028",
        "runs": [_entry(i) for i in range(runs)],
        "policies": {},
        "counts": {"runs": runs, "events": runs},
    }


@pytest.mark.parametrize("size", [1, 2, 3, 7, 64, 1 << 16])
@pytest.mark.parametrize("decoder", [_MANIFEST_DECODER, _INDEX_DECODER], ids=["entries", "index"])
def test_a_written_manifest_streams_as_the_whole_parse_at_any_block_size(
    size: int, decoder: json.JSONDecoder
) -> None:
    data = orjson.dumps(_manifest(12)) + b"\n"
    got = _streamed(data, [size], decoder)
    assert got == _whole(data.decode(), decoder)
    kind = _Entry if decoder is _MANIFEST_DECODER else BundleIndexEntry
    assert [type(value) for name, value in got if name == "runs"][1:] == [kind] * 12


_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)
_names = st.sampled_from(["runs", "counts", "library", "a", "é", "runs"]) | st.text(max_size=3)
_spaces = st.sampled_from(["", " ", "\t", "\r\n ", "\u00a0"])  # the last is not JSON's


@st.composite
def _texts(draw: st.DrawFn) -> str:
    """An object, mostly: members (``runs`` mostly an array), any whitespace, escapes or
    not; sometimes cut, spliced or with a character changed."""
    members = draw(st.lists(st.tuples(_names, _json), max_size=5))
    ascii_only = draw(st.booleans())
    parts = []
    for name, value in members:
        if name == "runs" and draw(st.booleans()):
            value = draw(st.lists(_json, max_size=4))
        parts.append(
            json.dumps(name, ensure_ascii=ascii_only)
            + draw(_spaces)
            + ":"
            + draw(_spaces)
            + json.dumps(value, ensure_ascii=ascii_only, indent=draw(st.sampled_from([None, 1])))
        )
    text = "{" + draw(_spaces) + ("," + draw(_spaces)).join(parts) + draw(_spaces) + "}"
    text += draw(st.sampled_from(["", " ", "\n", " x", "}", ","]))
    if draw(st.booleans()):
        at = draw(st.integers(min_value=0, max_value=len(text)))
        text = (
            text[:at]
            + draw(st.sampled_from(["", ",", "]", "\\", '"', "NaN", "1", " "]))
            + text[at + 1 :]
        )
    return text


@given(_texts(), st.lists(st.integers(min_value=1, max_value=9), min_size=1, max_size=6))
@example('{"runs":[1,2.5e3,{"a":[]}],"b":-0.0}', [1])
@example('{"runs":[1],"runs":[]}', [2])
@example('{"a":1,}', [3])
@example('{"a":1.}', [4])
@example('{"a":12}\n', [5])
@example('{"a":NaN}', [1])
@example('{"runs":{}}', [1])
@example("[]", [1])
def test_the_stream_is_the_whole_parse_or_refuses(text: str, sizes: list[int]) -> None:
    data = text.encode("utf-8", "surrogatepass")
    whole = _whole(text, _DECODER) if _utf8(data) else None
    assert _streamed(data, sizes, _DECODER) == whole


def _utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def test_bytes_that_are_not_utf8_are_refused() -> None:
    data = b'{"library":"\xff"}\n'
    assert _streamed(data, [1], _DECODER) is None
    assert _streamed(b'{"library":"\xc3', [1], _DECODER) is None  # cut in a character


# -- what opening keeps ---------------------------------------------------------------------


def _bundle(path: Path, runs: int) -> int:
    """A bundle of ``runs`` runs of one row each, framed as a writer frames it (opening
    checks framing only: nothing here is verified); returns the manifest line's size."""
    lines = []
    manifest = _manifest(runs)
    for index, entry in enumerate(manifest["runs"]):
        chain = hashlib.sha256(b"%d" % index).hexdigest()
        entry["head"] = chain
        body = orjson.dumps({"run_id": entry["run_id"], "conversation_id": entry["run_id"]})
        lines.append(
            orjson.dumps(
                {
                    "run": entry["run_id"],
                    "seq": 0,
                    "type": "run.open",
                    "ts": entry["opened_at"],
                    "body": body.decode(),
                    "event_hash": HEX,
                    "chain_hash": chain,
                }
            )
            + b"\n"
        )
    first = orjson.dumps(manifest) + b"\n"
    data = first + b"".join(lines)
    trailer = {"end": True, "events": runs, "sha256": hashlib.sha256(data).hexdigest()}
    path.write_bytes(data + orjson.dumps(trailer) + b"\n")
    return len(first)


def test_opening_and_the_index_hold_a_block_of_the_manifest_not_the_line(tmp_path: Path) -> None:
    path = tmp_path / "many.afp"
    size = _bundle(path, 6_000)  # a manifest of about 1.5 MB
    tracemalloc.start()
    try:
        source = BundleSource(path)
        kept, peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        entries = sum(1 for _ in source.iter_index_entries())
        _, index_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    with source:
        assert entries == 6_000
        assert source.runs()[-1].conversation_id is source.run_ids()[-1]  # one string
        assert source.index_entries()[5] == BundleIndexEntry(
            run_id="run-0005",
            conversation_id="run-0005",
            parent_run_id=None,
            opened_at=1_700_000_000_005,
        )
    assert peak - kept < size / 4, (peak, kept, size)  # no manifest-sized buffer
    assert index_peak - kept < size / 4, (index_peak, kept, size)
    assert kept < 400 * 6_000, kept  # a few hundred bytes per run (run ids included)


def test_an_index_read_from_a_changed_manifest_fails(tmp_path: Path) -> None:
    path = tmp_path / "b.afp"
    _bundle(path, 3)
    with BundleSource(path) as source:
        data = path.read_bytes()
        path.write_bytes(data.replace(b'"run-0002","parent_run_id"', b'"run-0001","parent_run_id"'))
        with pytest.raises(Exception) as caught:
            list(source.iter_index_entries())
        assert getattr(caught.value, "code", None) == "bundle"
        assert "line 1 is not what it was" in str(caught.value)
