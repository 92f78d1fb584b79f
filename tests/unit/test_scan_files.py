"""A file swept in parts finds what a search of its whole bytes finds: every occurrence once,
an occurrence across two parts included, whatever the part size (Hypothesis)."""

from __future__ import annotations

import collections
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from agentfootprint.audit.scan import ScanReport, scan_files
from agentfootprint.errors import FileError
from agentfootprint.logformat.literal_forms import LiteralMatcher

LITERALS = ["tok/EN+a&b=c_9f2Z", "ab-ab-ab"]


def _whole_counts(matcher: LiteralMatcher, data: bytes) -> dict[tuple[int, str], list[int]]:
    counts: dict[tuple[int, str], list[int]] = {}
    for start, _, match in sorted(matcher.offsets(data), key=lambda hit: hit[0]):
        key = (match.literal, match.form)
        if key in counts:
            counts[key][1] += 1
        else:
            counts[key] = [start, 1]
    return counts


@given(
    pieces=st.lists(
        st.one_of(
            st.binary(max_size=40),
            st.sampled_from([b"tok/EN+a&b=c_9f2Z", b"ab-ab-ab-ab", b"746f6b2f454e2b61"]),
        ),
        max_size=30,
    ),
    chunk=st.integers(min_value=1, max_value=64),
)
@example(pieces=[b"x" * 10, b"tok/EN+a&b=c_9f2Z"], chunk=12)  # across the first boundary
@example(pieces=[b"ab-ab-ab-ab"], chunk=1)  # overlapping occurrences, one byte a part
def test_parts_find_what_the_whole_finds(
    tmp_path_factory: pytest.TempPathFactory, pieces: list[bytes], chunk: int
) -> None:
    data = b"".join(pieces)
    path = tmp_path_factory.mktemp("scan") / "file.bin"
    path.write_bytes(data)
    matcher = LiteralMatcher(LITERALS)
    report = ScanReport(literals=2, forms=matcher.forms)
    scan_files([path], matcher, report, chunk_bytes=chunk)
    found = {(hit.literal, hit.form): [hit.offset, hit.count] for hit in report.byte_hits}
    assert found == _whole_counts(matcher, data)
    assert report.bytes == len(data) and report.files == [str(path)]


def test_counts_and_first_offsets(tmp_path: Path) -> None:
    path = tmp_path / "f.bin"
    path.write_bytes(b"..tok/EN+a&b=c_9f2Z..tok%2FEN%2Ba%26b%3Dc_9f2Z..tok/EN+a&b=c_9f2Z")
    matcher = LiteralMatcher(LITERALS)
    report = ScanReport(literals=2, forms=matcher.forms)
    scan_files([path], matcher, report, chunk_bytes=7)
    by_form = collections.Counter({hit.form: hit.count for hit in report.byte_hits})
    assert by_form == {"raw": 2, "url": 1}
    assert [hit.offset for hit in report.byte_hits if hit.form == "raw"] == [2]


def test_a_file_that_cannot_be_read_is_a_file_error(tmp_path: Path) -> None:
    matcher = LiteralMatcher(LITERALS)
    report = ScanReport(literals=2, forms=matcher.forms)
    with pytest.raises(FileError, match="cannot read"):
        scan_files([tmp_path / "missing.bin"], matcher, report)
