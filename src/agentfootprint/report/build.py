"""Building a self-verifying HTML report: a bundle of runs and the page that checks it.

The report is one file: the export bundle of the runs (its bytes exactly, base64), a small
JSON block saying what the command was asked (runs, pinned keys, a diff) and what it found
that a bundle cannot carry, and the page (:file:`verifier.js`, written from
docs/log-format.md, and :file:`page.js`, which shows what the verifier computed). Nothing in
the report is a verdict of this module: the page recomputes every hash, digest and seal
itself. What a database holds beyond its runs' events (its run index, its seal log, a row
a bundle cannot carry) is checked here, by the reference verifier, and handed to the page
as *findings of the command*; the page shows them red, never green.

A Content-Security-Policy allows the page's own two scripts and stylesheet (by their
digests) and nothing else: no fetch, no image, no frame, so an opened report reaches no
network whatever the bundle holds.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import html
import os
import re
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Final

import orjson

from agentfootprint.errors import (
    RecordTooLargeError,
    RunNotFoundError,
    UsageError,
    VerificationError,
)
from agentfootprint.exchange.bundle_write import write_bundle
from agentfootprint.exchange.transfer import open_log
from agentfootprint.local_files import open_regular
from agentfootprint.logformat.commitments import Disclosure
from agentfootprint.seal.signer import PublicKey
from agentfootprint.store.urls import StoreLocation
from agentfootprint.verify.bundle import BundleSource, is_bundle
from agentfootprint.verify.verifier import Verifier

__all__ = ["REPORT_FORMAT", "Report", "report_html"]

#: the version of the report's data block (``af-meta``) the page reads
REPORT_FORMAT: Final = 1
#: failures only a database can have: about the file around the runs, not in their events
_DATABASE_CODES: Final = frozenset({"index", "seal-log"})
#: the page's scripts, in the order they are loaded (the verifier first)
_SCRIPTS: Final = ("verifier.js", "verifier_patterns.js", "verifier_runs.js", "page.js")


@dataclass(frozen=True, kw_only=True)
class Report:
    """A report made: its HTML and what it holds."""

    html: bytes
    runs: tuple[str, ...]  #: the runs embedded (ancestors included), in the bundle's order
    events: int  #: their events
    bundle_bytes: int  #: the size of the embedded bundle
    findings: tuple[dict[str, Any], ...]  #: what the command found that the bundle cannot hold


def report_html(
    source: str | os.PathLike[str] | StoreLocation,
    *,
    run_ids: Sequence[str] = (),
    keys: Sequence[PublicKey] = (),
    diff: tuple[str, str] | None = None,
    disclosures: Sequence[Disclosure] = (),
    library: str,
    on_progress: Callable[[int, int], None] | None = None,
) -> Report:
    """The report of ``source`` (a database, a store URL or an export bundle).

    ``run_ids`` (default: every run) are the runs shown; their ancestors come along. With
    ``diff`` the page opens on the first request where the two runs differ. ``keys`` are
    pinned in the page (the reader can pin more). A database is read only; a bundle is
    embedded byte for byte, whatever it holds (the page says what is wrong with it).
    ``disclosures`` (a disclosures file's, section 12.7) go into the page only where their
    commitment occurs in the embedded runs, and the page opens each only if it hashes to its
    commitment. ``on_progress(done, total)`` counts a database's runs as the reference
    verifier reads them (for its findings).
    """
    wanted = list(dict.fromkeys([*run_ids, *(diff or ())]))
    name = source.shown() if isinstance(source, StoreLocation) else Path(source).name
    path = source.path if isinstance(source, StoreLocation) else source
    if path is not None and is_bundle(path):
        with open_regular(Path(path)) as handle:  # a FIFO or a device: refused, never read
            data = handle.read()
        kind, findings = "bundle", list[dict[str, Any]]()
        embedded = _bundle_runs(path, wanted)
        events = max(data.count(b"\n") - 2, 0)  # less its manifest and trailer lines
    else:
        data, embedded, events, findings = _database_bundle(source, wanted, keys, on_progress)
        kind = "database"
    meta = {
        "report": REPORT_FORMAT,
        "library": library,
        "source": name,
        "source_kind": kind,
        "runs": wanted,
        "diff": list(diff) if diff else None,
        "keys": [key.raw.hex() for key in keys],
        "findings": findings,
        "disclosures": _disclosed(disclosures, data),
    }
    return Report(
        html=_page(data, meta, title=name),
        runs=tuple(embedded),
        events=events,
        bundle_bytes=len(data),
        findings=tuple(findings),
    )


def _disclosed(disclosures: Sequence[Disclosure], data: bytes) -> list[dict[str, Any]]:
    """The disclosures of commitments the bundle holds (each value as its JSON text): a
    disclosures file for many runs puts no other value into the report. The bundle's
    64-digit hex strings are found in one pass (hashes among them: a filter, not a proof;
    the page hashes each disclosure against its commitment)."""
    held = {m.decode("ascii") for m in _HEX64.findall(data)} if disclosures else set()
    return [
        {**d.to_json(), "value": orjson.dumps(d.value).decode("utf-8")}
        for d in disclosures
        if d.commitment in held
    ]


_HEX64: Final = re.compile(rb"(?<![0-9a-f])[0-9a-f]{64}(?![0-9a-f])")


def _bundle_runs(source: str | os.PathLike[str], wanted: list[str]) -> list[str]:
    """The runs a bundle holds (a bundle that cannot be opened is embedded all the same,
    unless runs are named: the page shows what is wrong with it)."""
    try:
        bundle = BundleSource(source)
    except VerificationError:
        if wanted:
            raise
        return []
    with contextlib.closing(bundle):
        found = list(bundle.run_ids())
    missing = [run for run in wanted if run not in found]
    if missing:
        raise RunNotFoundError(f"the bundle holds no run {missing[0]!r}")
    return found


def _database_bundle(
    source: str | os.PathLike[str] | StoreLocation,
    wanted: list[str],
    keys: Sequence[PublicKey],
    on_progress: Callable[[int, int], None] | None,
) -> tuple[bytes, list[str], int, list[dict[str, Any]]]:
    """A bundle of a database's runs, their rows as stored (never refused for failing:
    the page shows where), and the findings only the database can give."""
    with contextlib.closing(open_log(source, option="SOURCE")) as store:
        listed = list(store.run_ids())  # the runs the events hold (never the index)
        missing = [run for run in wanted if run not in listed]
        if missing:
            raise RunNotFoundError(f"no run {missing[0]!r} in {source} (it has no events)")
        chosen = wanted or listed
        if not chosen:
            raise UsageError(f"{source} holds no runs: there is nothing to report")
        errors: dict[str, list[VerificationError]] = {}
        passed: set[str] = set()
        verifier = Verifier(store, trusted_keys=list(keys))
        for run_id, result in verifier.verify_all(on_progress=on_progress):
            if isinstance(result, VerificationError):
                errors.setdefault(run_id, []).append(result)
            else:
                passed.add(run_id)
        try:
            carried: list[VerificationError] = []
            data, embedded, events = _bundle_of(store, chosen)
        except (VerificationError, RecordTooLargeError):  # rows no bundle can carry
            carried, left_out = _uncarried(store, chosen, errors)
            kept = [run for run in chosen if run not in left_out]
            data, embedded, events = _bundle_of(store, kept) if kept else (b"", [], 0)
    shown = {*embedded, *(error.run_id for error in carried)}
    findings = [
        # a finding about a run that passed is told beside its pass (the index); one about
        # a run that did not (its seal log) is its verdict
        {**_finding(error), "replaces": run_id not in passed}
        for run_id, found in errors.items()
        if not wanted or run_id in shown  # every run: the index's strays too
        for error in found
        if error.code in _DATABASE_CODES
    ]
    findings += [{**_finding(error), "replaces": True} for error in carried]
    return data, embedded, events, findings


def _uncarried(
    store: Any, chosen: list[str], verdicts: dict[str, list[VerificationError]]
) -> tuple[list[VerificationError], set[str]]:
    """The runs whose rows no bundle can carry (a stored type a bundle has no form for, a
    record that cannot be decoded), with the reference verifier's verdict on each; a run
    continuing one of them is left out with it."""
    carried: list[VerificationError] = []
    left_out: set[str] = set()
    with tempfile.TemporaryDirectory(prefix="afp-report-") as folder:
        for run_id in chosen:
            try:
                write_bundle(store, [run_id], Path(folder, "probe.afp"), library="probe")
            except (VerificationError, RecordTooLargeError) as exc:
                errors = [e for e in verdicts.get(run_id, []) if e.code not in _DATABASE_CODES]
                if not errors:  # the reference verifier passed what no bundle can carry
                    raise exc
                carried.append(errors[0])
                left_out.add(run_id)
    return carried, left_out


def _bundle_of(store: Any, run_ids: list[str]) -> tuple[bytes, list[str], int]:
    with tempfile.TemporaryDirectory(prefix="afp-report-") as folder:
        out = Path(folder, "runs.afp")
        manifest = write_bundle(store, run_ids, out, library="agentfootprint report")
        runs = [entry["run_id"] for entry in manifest["runs"]]
        return out.read_bytes(), runs, int(manifest["counts"]["events"])


def _finding(error: VerificationError) -> dict[str, Any]:
    return {"run": error.run_id, "code": error.code, "seq": error.seq, "reason": str(error)}


# -- the page ---------------------------------------------------------------------------------


def _asset(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def _csp_hash(text: str) -> str:
    digest = base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")
    return f"'sha256-{digest}'"


def _json_in_html(value: Any) -> str:
    """JSON safe inside a ``<script>`` element: ``<`` only occurs in strings, escaped."""
    return orjson.dumps(value).decode("utf-8").replace("<", "\\u003c")


def _page(bundle: bytes, meta: dict[str, Any], *, title: str) -> bytes:
    scripts = [_asset(name) for name in _SCRIPTS]
    style = _asset("page.css")
    policy = "; ".join(
        (
            "default-src 'none'",
            f"script-src {' '.join(_csp_hash(s) for s in scripts)}",
            f"style-src {_csp_hash(style)}",
            "img-src 'none'",
            "connect-src 'none'",
            "base-uri 'none'",
            "form-action 'none'",
        )
    )
    template = _asset("page.html")
    filled = {
        "CSP": html.escape(policy),
        "TITLE": html.escape(title),
        "STYLE": style,
        "BUNDLE": base64.b64encode(bundle).decode("ascii"),
        "META": _json_in_html(meta),
        "SCRIPTS": "".join(f"<script>{s}</script>\n" for s in scripts),
    }
    # one pass: nothing filled in (a run's text in META) is read as a mark
    return _MARK.sub(lambda mark: filled[mark.group(1)], template).encode("utf-8")


_MARK: Final = re.compile(r"\{\{([A-Z]+)\}\}")
