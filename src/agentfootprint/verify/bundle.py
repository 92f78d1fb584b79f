"""Export bundles: runs' events as stored, in one file an auditor verifies offline.

A bundle is UTF-8 JSON Lines:

1. a manifest line: ``{"agentfootprint_bundle": 1, "format", "canon", "hash", "library",
   "runs": [{"run_id", "conversation_id", "parent_run_id", "events", "head",
   "policy_digest", "requested"}], "policies": {digest: policy}, "counts": {"runs",
   "events"}}``;
2. one line per event, runs in dependency order (a parent before its children), seqs
   in order: ``{"run", "seq", "type", "ts", "body", "event_hash", "chain_hash"}`` where
   ``body`` is the stored canonical body as a JSON string (its UTF-8 bytes are exactly
   the hashed bytes) and hashes are lowercase hex;
3. a trailer line: ``{"end": true, "events": n, "sha256": hex}``, the SHA-256 of every
   byte before the trailer, so a cut or spliced file is refused before verification.

Reading a bundle gives a row source the :class:`~agentfootprint.verify.verifier.Verifier`
takes exactly as it takes a database. Salts and disclosures are never in a bundle.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from agentfootprint.errors import RunNotFoundError, VerificationError
from agentfootprint.verify.canonical import parse
from agentfootprint.verify.verifier import Row, RowSource, parent_of

__all__ = [
    "BUNDLE_MAGIC",
    "BundleRow",
    "BundleRun",
    "BundleSource",
    "is_bundle",
    "write_bundle",
]

BUNDLE_MAGIC = b'{"agentfootprint_bundle":1'
BUNDLE_VERSION = 1


@dataclass(frozen=True, kw_only=True, slots=True)
class BundleRow:
    """One event as the bundle holds it (the verifier's row shape)."""

    run_id: str
    seq: int
    type: str
    ts: int
    body: bytes
    event_hash: bytes
    chain_hash: bytes


@dataclass(frozen=True, kw_only=True, slots=True)
class BundleRun:
    """A run as the manifest lists it (the same attributes as a store's run info)."""

    run_id: str
    conversation_id: str
    parent_run_id: str | None
    opened_at: int
    events: int
    last_type: str
    head: bytes
    requested: bool

    @property
    def closed(self) -> bool:
        return self.last_type == "run.close"


def is_bundle(path: str | os.PathLike[str]) -> bool:
    """Whether the file starts like a bundle (a database starts ``SQLite format 3``)."""
    with open(path, "rb") as handle:
        return handle.read(len(BUNDLE_MAGIC)) == BUNDLE_MAGIC


def _ancestry(source: RowSource, run_ids: Sequence[str]) -> list[tuple[str, list[Row]]]:
    """The runs and all their ancestors, each once, parents before children."""
    ordered: list[tuple[str, list[Row]]] = []
    placed: set[str] = set()
    for run_id in run_ids:
        chain: list[str] = []  # run_id and its unplaced ancestors, nearest first
        current: str | None = run_id
        while current is not None and current not in placed:
            if current in chain:
                raise VerificationError(
                    current, 0, "run.open names a parent cycle", code="ancestry"
                )
            chain.append(current)
            current = parent_of(source, current)
        for ancestor in reversed(chain):
            rows = list(source.read(ancestor))
            if not rows:
                raise RunNotFoundError(f"no run {ancestor!r} to export")
            placed.add(ancestor)
            ordered.append((ancestor, rows))
    return ordered


def write_bundle(
    source: RowSource, run_ids: Sequence[str], out: str | os.PathLike[str], *, library: str
) -> dict[str, Any]:
    """Write the runs (ancestors included) to ``out``; returns the manifest.

    Built by reading events through the source, never by copying database files, so
    nothing but the log's own rows (no free pages, no WAL, no vault) can reach it.
    """
    if not run_ids:
        raise ValueError("export needs at least one run id")
    runs = _ancestry(source, list(dict.fromkeys(run_ids)))
    requested = set(run_ids)
    entries, policies = [], {}
    for run_id, rows in runs:
        opened = parse(rows[0].body)
        parent = opened.get("parent")
        digest = opened.get("policy_digest")
        if digest is not None:
            policies[digest] = opened.get("policy")
        entries.append(
            {
                "run_id": run_id,
                "conversation_id": opened.get("conversation_id"),
                "parent_run_id": parent.get("run_id") if isinstance(parent, dict) else None,
                "opened_at": rows[0].ts,
                "events": len(rows),
                "last_type": rows[-1].type,
                "head": bytes(rows[-1].chain_hash).hex(),
                "policy_digest": digest,
                "requested": run_id in requested,
            }
        )
    total = sum(len(rows) for _, rows in runs)
    manifest = {
        "agentfootprint_bundle": BUNDLE_VERSION,
        "format": "agentfootprint/log/v1",
        "canon": "RFC8785",
        "hash": "SHA-256",
        "library": library,
        "runs": entries,
        "policies": policies,
        "counts": {"runs": len(runs), "events": total},
    }
    digest = hashlib.sha256()
    tmp = Path(f"{os.fspath(out)}.partial")
    with open(tmp, "wb") as handle:

        def emit(line: bytes) -> None:
            digest.update(line)
            handle.write(line)

        # the manifest line starts with the magic: keys are written in this order
        emit(orjson.dumps(manifest) + b"\n")
        for run_id, rows in runs:
            for row in rows:
                emit(
                    orjson.dumps(
                        {
                            "run": run_id,
                            "seq": row.seq,
                            "type": row.type,
                            "ts": row.ts,
                            "body": bytes(row.body).decode("utf-8"),
                            "event_hash": bytes(row.event_hash).hex(),
                            "chain_hash": bytes(row.chain_hash).hex(),
                        }
                    )
                    + b"\n"
                )
        handle.write(
            orjson.dumps({"end": True, "events": total, "sha256": digest.hexdigest()}) + b"\n"
        )
    os.replace(tmp, out)  # nothing half-written is left under the final name
    return manifest


def _row_shape_ok(item: Any) -> bool:
    return (
        isinstance(item, dict)
        and type(item.get("run")) is str
        and type(item.get("seq")) is int
        and type(item.get("type")) is str
        and type(item.get("ts")) is int
        and type(item.get("body")) is str
        and all(
            type(item.get(k)) is str and len(item[k]) == 64 for k in ("event_hash", "chain_hash")
        )
    )


def _manifest_shape_ok(manifest: dict[str, Any]) -> bool:
    counts, runs = manifest.get("counts"), manifest.get("runs")
    return (
        "agentfootprint_bundle" in manifest
        and isinstance(counts, dict)
        and isinstance(runs, list)
        and all(
            isinstance(entry, dict)
            and isinstance(entry.get("run_id"), str)
            and isinstance(entry.get("events"), int)
            and isinstance(entry.get("head"), str)
            for entry in runs
        )
    )


class BundleSource:
    """A bundle opened for verification: ``read(run_id)`` like a store, plus ``runs()``.

    Opening checks the file's framing (manifest, trailer, byte digest, counts, that each
    run's rows match the manifest) and raises :class:`VerificationError` with code
    ``bundle`` on the first problem; the events themselves are checked by the verifier.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        data = self.path.read_bytes()
        lines = data.split(b"\n")
        if not data.startswith(BUNDLE_MAGIC):
            raise self._bad("not an agentfootprint bundle (no manifest line)")
        if not data.endswith(b"\n") or len(lines) < 3:
            raise self._bad("the bundle is truncated (it does not end with its trailer)")
        lines = lines[:-1]
        try:
            trailer = orjson.loads(lines[-1])
            manifest = orjson.loads(lines[0])
        except orjson.JSONDecodeError as exc:
            raise self._bad(f"the bundle is truncated or damaged ({exc})") from exc
        if not isinstance(trailer, dict) or trailer.get("end") is not True:
            raise self._bad("the bundle is truncated (its last line is not the trailer)")
        body_bytes = len(data) - len(lines[-1]) - 1
        if hashlib.sha256(data[:body_bytes]).hexdigest() != trailer.get("sha256"):
            raise self._bad(
                "the bundle's bytes do not match its trailer digest (it was "
                "altered, cut or spliced)"
            )
        if not isinstance(manifest, dict) or not _manifest_shape_ok(manifest):
            raise self._bad("the manifest is malformed (see docs/log-format.md, bundles)")
        version = manifest["agentfootprint_bundle"]
        if type(version) is not int or version != BUNDLE_VERSION:
            raise self._bad(f"unknown bundle version {version!r}")
        self.manifest: dict[str, Any] = manifest
        self._rows: dict[str, list[BundleRow]] = {}
        for number, line in enumerate(lines[1:-1], start=2):
            try:
                item = orjson.loads(line)
                if not _row_shape_ok(item):
                    raise ValueError("fields missing or of the wrong type")
                row = BundleRow(
                    run_id=item["run"],
                    seq=item["seq"],
                    type=item["type"],
                    ts=item["ts"],
                    body=item["body"].encode("utf-8"),
                    event_hash=bytes.fromhex(item["event_hash"]),
                    chain_hash=bytes.fromhex(item["chain_hash"]),
                )
            except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as exc:
                raise self._bad(f"line {number} is not an event row ({exc})") from exc
            self._rows.setdefault(row.run_id, []).append(row)
        events = sum(len(rows) for rows in self._rows.values())
        if trailer.get("events") != events or manifest.get("counts", {}).get("events") != events:
            raise self._bad(
                f"the bundle holds {events} events but its trailer or manifest counts differ"
            )
        self._runs: dict[str, BundleRun] = {}
        for entry in manifest.get("runs", []):
            run_id = entry.get("run_id")
            rows = self._rows.get(run_id, [])
            if (
                len(rows) != entry.get("events")
                or not rows
                or (rows[-1].chain_hash.hex() != entry.get("head"))
            ):
                raise self._bad(
                    f"run {run_id}: the manifest's event count or head differs "
                    "from the rows the bundle holds"
                )
            self._runs[run_id] = BundleRun(
                run_id=run_id,
                conversation_id=entry.get("conversation_id") or "",
                parent_run_id=entry.get("parent_run_id"),
                opened_at=rows[0].ts,
                events=len(rows),
                last_type=rows[-1].type,
                head=rows[-1].chain_hash,
                requested=bool(entry.get("requested")),
            )
        if set(self._runs) != set(self._rows):
            raise self._bad("the bundle holds rows of runs its manifest does not list")

    def _bad(self, reason: str) -> VerificationError:
        return VerificationError("", None, reason, code="bundle", where=f"bundle {self.path}")

    def read(self, run_id: str, *, start: int = 0) -> Iterator[BundleRow]:
        if run_id not in self._rows:
            raise RunNotFoundError(f"no run {run_id!r} in bundle {self.path}")
        return iter(self._rows[run_id][start:])

    def runs(self) -> list[BundleRun]:
        """Every run in the bundle, parents before children."""
        return list(self._runs.values())

    def run_info(self, run_id: str) -> BundleRun:
        if run_id not in self._runs:
            raise RunNotFoundError(f"no run {run_id!r} in bundle {self.path}")
        return self._runs[run_id]

    def close(self) -> None:
        """Nothing to release (the bundle is read whole)."""
