"""Where given literals sit in evidence: every row of a log or bundle, every disclosure of a
vault, and every byte of their files, each searched in every form an encoder gives a literal
(:mod:`agentfootprint.logformat.literal_forms`).

"Prove the rotated token is nowhere in our evidence": :func:`scan` answers with a
:class:`ScanReport` naming each row (run, seq, type, the state path a write sets), disclosure
(commitment, key) and file offset that holds a literal, and in which form. Rows are read as a
verifier reads them (a bundle's event lines, a database's bodies as their canonical bytes);
the files' own bytes are swept too (an SQLite file with its ``-wal``, a bundle), so text left in
a free page or a checkpoint not yet applied is found as well. A report never holds a literal:
each is named by its index in the list searched for.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from agentfootprint.audit.sources import body_object
from agentfootprint.errors import FileError
from agentfootprint.local_files import open_regular
from agentfootprint.logformat.canonical import canon
from agentfootprint.logformat.literal_forms import LiteralMatcher, MatchedForm
from agentfootprint.store.vault_base import Vault

__all__ = [
    "ByteHit",
    "DisclosureHit",
    "RowHit",
    "ScanReport",
    "scan_files",
    "scan_rows",
    "scan_vault",
    "sqlite_files",
]

#: a file is swept in parts of this size (each overlapping the last by the longest needle)
CHUNK_BYTES: Final = 1 << 20


@dataclass(frozen=True, slots=True, kw_only=True)
class RowHit:
    """A row of a log whose body holds a literal."""

    run_id: str
    seq: int
    type: str
    #: the state path a ``write`` row sets (None for other rows)
    path: str | None
    literal: int
    form: str


@dataclass(frozen=True, slots=True, kw_only=True)
class DisclosureHit:
    """A vault entry whose value (or key) holds a literal."""

    commitment: str
    key: str
    literal: int
    form: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ByteHit:
    """A literal in a file's own bytes: where it first occurs and how many times."""

    file: str
    literal: int
    form: str
    offset: int
    count: int


@dataclass(slots=True, kw_only=True)
class ScanReport:
    """What a scan read and what it found."""

    literals: int
    forms: int
    runs: int = 0
    rows: int = 0
    disclosures: int = 0
    files: list[str] = field(default_factory=list)
    bytes: int = 0
    row_hits: list[RowHit] = field(default_factory=list)
    disclosure_hits: list[DisclosureHit] = field(default_factory=list)
    byte_hits: list[ByteHit] = field(default_factory=list)

    @property
    def found(self) -> bool:
        return bool(self.row_hits or self.disclosure_hits or self.byte_hits)

    def literals_found(self) -> list[int]:
        """The indexes of the literals found anywhere, in order."""
        hits: list[RowHit | DisclosureHit | ByteHit] = [
            *self.row_hits,
            *self.disclosure_hits,
            *self.byte_hits,
        ]
        return sorted({hit.literal for hit in hits})

    def to_json(self) -> dict[str, Any]:
        return {
            "literals": self.literals,
            "forms": self.forms,
            "read": {
                "runs": self.runs,
                "rows": self.rows,
                "disclosures": self.disclosures,
                "files": self.files,
                "bytes": self.bytes,
            },
            "found": self.literals_found(),
            "rows": [dataclasses.asdict(hit) for hit in self.row_hits],
            "disclosures": [dataclasses.asdict(hit) for hit in self.disclosure_hits],
            "bytes": [dataclasses.asdict(hit) for hit in self.byte_hits],
        }


def _as_bytes(value: Any) -> bytes:
    """A stored value as the bytes to search (a crafted file's TEXT body as its UTF-8)."""
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    return str(value).encode("utf-8", "surrogateescape")


def _write_path(type_: Any, body: bytes) -> str | None:
    path = body_object(body).get("path") if type_ == "write" else None
    return path if isinstance(path, str) else None


def scan_rows(source: Any, matcher: LiteralMatcher, report: ScanReport) -> None:
    """Every row of every run of ``source`` (a store or a bundle, read as the verifier reads
    it): its body searched."""
    for run_id in source.run_ids():
        report.runs += 1
        for event in source.read(run_id):
            report.rows += 1
            body = _as_bytes(event.body)
            found = matcher.find(body)
            if not found:
                continue
            path = _write_path(event.type, body)
            report.row_hits += (
                RowHit(
                    run_id=str(event.run_id),
                    seq=int(event.seq),
                    type=str(event.type),
                    path=path,
                    literal=match.literal,
                    form=match.form,
                )
                for match in found
            )


def scan_vault(vault: Vault, matcher: LiteralMatcher, report: ScanReport) -> None:
    """Every disclosure the vault holds: its value (as canonical JSON) and its key."""
    for commitment in vault.commitments():
        disclosure = vault.get(commitment)
        if disclosure is None:  # erased meanwhile
            continue
        report.disclosures += 1
        value, key = canon(disclosure.value), _as_bytes(disclosure.key)
        found = dict.fromkeys([*matcher.find(value), *matcher.find(key)])
        report.disclosure_hits += (
            DisclosureHit(
                commitment=commitment,
                key=disclosure.key,
                literal=match.literal,
                form=match.form,
            )
            for match in found
        )


def sqlite_files(path: Path) -> list[Path]:
    """An SQLite file and those beside it that hold its pages (``-wal``, ``-journal``)."""
    return [path] + [
        side
        for side in (Path(f"{path}-wal"), Path(f"{path}-journal"))
        if side.is_file()  # a symlink or folder of that name is not SQLite's
    ]


def scan_files(
    files: Sequence[Path],
    matcher: LiteralMatcher,
    report: ScanReport,
    *,
    chunk_bytes: int = CHUNK_BYTES,
) -> None:
    """Each file's bytes, read in parts of ``chunk_bytes`` (never whole), every occurrence of
    every form counted once, the first one's offset kept."""
    for path in files:
        counts: dict[tuple[int, str], list[int]] = {}
        for offset, match in _occurrences(path, matcher, report, chunk_bytes):
            key = (match.literal, match.form)
            if key in counts:
                counts[key][1] += 1
            else:
                counts[key] = [offset, 1]
        report.files.append(os.fspath(path))
        for (literal, form), (first, count) in counts.items():
            report.byte_hits.append(
                ByteHit(file=os.fspath(path), literal=literal, form=form, offset=first, count=count)
            )


def _occurrences(
    path: Path, matcher: LiteralMatcher, report: ScanReport, chunk_bytes: int
) -> Iterator[tuple[int, MatchedForm]]:
    """(absolute offset, match) of every occurrence in the file, each once: a part is
    searched with the last bytes of the one before, and an occurrence is taken from the
    part in which it ends."""
    keep = matcher.longest - 1
    tail = b""
    position = 0  # bytes read before this part
    try:
        with open_regular(path) as handle:
            while chunk := handle.read(chunk_bytes):
                report.bytes += len(chunk)
                window = tail + chunk
                base = position - len(tail)
                for start, end, match in matcher.offsets(window):
                    if end > len(tail):  # not wholly inside the part searched before
                        yield base + start, match
                position += len(chunk)
                tail = window[-keep:] if keep else b""
    except OSError as exc:
        raise FileError(f"cannot read {path}: {exc.strerror or exc}", path=str(path)) from exc
