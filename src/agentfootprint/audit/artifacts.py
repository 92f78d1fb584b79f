"""``verify --artifacts``: each artifact a verified run minted, checked against a store.

The log proves what the model was served; an artifact's bytes live elsewhere (an artifact
store, or a version 3 bundle's artifact section), and what ties them to the log is the digest
the ``agentfootprint.artifacts.minted`` event records and the claim ticket in the history
repeats (docs/artifacts.md). This module gives one :class:`ArtifactVerdict` per minted event
of each run that verifies:

* the ticket cross-check: the run's final history holds, for the event's ``tool_call_id``,
  the ticket naming its ref, with equal kind, media type, size, digest and expiry (a log
  re-chained after its ticket was edited verifies on its own, and is caught here);
* the bytes: ``H("artifact", bytes)`` must be the recorded digest; without bytes, the store's
  tombstone says ``expired`` or ``erased``, and nothing at all is ``missing``.

Only events the verifier itself read and verified are checked (:class:`MintedWatch` sees the
rows as the :class:`~agentfootprint.verify.verifier.Verifier` reads them), and nothing here
reads a clock: a stated expiry in the past with the bytes still there is ``ok``, so the
output does not depend on when it runs. The log's own verdict never depends on the store.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from agentfootprint.errors import VerificationError
from agentfootprint.logformat.canonical import parse
from agentfootprint.logformat.chain import Row, RowSource, row_values
from agentfootprint.logformat.hashing import hexdigest, is_hex_digest
from agentfootprint.store.artifacts import REF_PATTERN
from agentfootprint.store.tickets import read_ticket
from agentfootprint.verify.results import RunVerification
from agentfootprint.verify.verifier import Verifier

__all__ = [
    "MINTED",
    "ArtifactSource",
    "ArtifactVerdict",
    "Minted",
    "MintedWatch",
    "Removed",
    "Status",
    "check_artifacts",
    "check_minted",
]

#: the recorded event whose artifacts are checked (docs/artifacts.md, "Events")
MINTED = "agentfootprint.artifacts.minted"
_MINTED_BYTES = b'"agentfootprint.artifacts.minted"'

Status = Literal["ok", "mismatch", "expired", "erased", "missing", "withheld"]
#: the statuses that fail ``verify --artifacts`` (exit 1); the others are facts (``withheld``:
#: a bundle's artifact whose bytes were not exported, section 13.5)
FAILING: frozenset[str] = frozenset({"mismatch", "missing"})

#: what a ticket holds beside ``placed`` and ``reason``, compared with the minted event
_COMPARED = ("ref", "kind", "media_type", "bytes", "digest", "expires_at")


class Removed(Protocol):
    """What a removal left: a store's :class:`~agentfootprint.store.artifacts.Tombstone`, or
    what a bundle says of one (``at`` may be unknown there)."""

    @property
    def digest(self) -> str: ...

    @property
    def reason(self) -> Literal["expired", "erased"]: ...

    @property
    def at(self) -> int | None: ...

    @property
    def note(self) -> str: ...


class ArtifactSource(Protocol):
    """Where an artifact's bytes are looked for: an ``ArtifactStore`` satisfies it, and a
    version 3 bundle offers one. ``read`` gives the bytes as stored (never checked: this
    module hashes them), ``tombstone`` what a removal left. A bundle's artifacts say more
    than a store (each entry's claims, ``withheld``): they are judged by
    :func:`agentfootprint.audit.bundle_artifacts.check_carried`, which builds on
    :func:`check_minted`."""

    def read(self, scope: str, ref: str) -> bytes | None: ...

    def tombstone(self, scope: str, ref: str) -> Removed | None: ...


@dataclass(frozen=True, kw_only=True, slots=True)
class ArtifactVerdict:
    """One minted artifact, checked."""

    run_id: str
    seq: int  #: the seq of the minted event
    scope: str  #: the run's conversation
    ref: str
    tool_call_id: str
    digest: str  #: recorded
    status: Status
    #: the digest of the bytes found, or the other digest a tombstone (or a bundle's entry)
    #: records; None when neither was read
    found: str | None
    detail: str  #: one sentence: why

    @property
    def failed(self) -> bool:
        """``mismatch`` or ``missing``: ``verify --artifacts`` exits 1."""
        return self.status in FAILING

    def as_json(self) -> dict[str, Any]:
        """The verdict as ``verify --json`` prints it."""
        return {
            "run_id": self.run_id,
            "seq": self.seq,
            "scope": self.scope,
            "ref": self.ref,
            "tool_call_id": self.tool_call_id,
            "digest": self.digest,
            "status": self.status,
            "found": self.found,
            "detail": self.detail,
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class Minted:
    """A minted event as the verifier read it: its seq and its payload (unchecked)."""

    seq: int
    payload: Any


class MintedWatch:
    """A row source handed to the :class:`Verifier` in place of ``source``: it forwards every
    read and keeps the minted events of each run whose rows were read to the end (a partial
    read, such as the first row a parent lookup takes, keeps nothing). After the verifier
    says a run verified, :meth:`minted` gives exactly the events it verified."""

    def __init__(self, source: RowSource) -> None:
        self._source = source
        self._seen: dict[str, list[Minted]] = {}

    def __getattr__(self, name: str) -> Any:  # everything else the verifier asks for
        return getattr(self._source, name)

    def read(self, run_id: str, *, start: int = 0) -> Iterable[Row]:
        if start:  # a partial read: nothing is kept from it
            return self._source.read(run_id, start=start)
        return self._watch(run_id, self._source.read(run_id), row_values)

    def chain_rows(self, run_id: str) -> Iterator[Any] | None:
        fetch = getattr(self._source, "chain_rows", None)
        found = fetch(run_id) if callable(fetch) else None
        return None if found is None else self._watch(run_id, found, None)

    def _watch(
        self, run_id: str, rows: Iterable[Any], values: Callable[[Any], tuple[Any, ...]] | None
    ) -> Iterator[Any]:
        """``rows`` as they are, the minted events among them kept once all were read."""
        kept: list[Minted] = []
        for row in rows:
            value = row if values is None else values(row)
            if value[2] == "event":
                payload = _minted_payload(value[4])
                if payload is not None:
                    kept.append(Minted(seq=value[1], payload=payload[0]))
            yield row
        if kept:
            self._seen[run_id] = kept
        else:
            self._seen.pop(run_id, None)

    def minted(self, run_id: str) -> list[Minted]:
        """The minted events of ``run_id`` from its last whole read, in seq order."""
        return self._seen.get(run_id, [])


def _minted_payload(body: Any) -> tuple[Any] | None:
    """``(payload,)`` when ``body`` is a minted event's, else None (the verifier judges the
    body itself: a body it refuses fails the run, and no verdict is read)."""
    if isinstance(body, memoryview):
        body = bytes(body)
    if isinstance(body, str):
        body = body.encode("utf-8", "surrogatepass")
    if not isinstance(body, bytes) or _MINTED_BYTES not in body:
        return None
    try:
        value = parse(body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(value, dict) or value.get("name") != MINTED:
        return None
    return (value.get("payload"),)


def _is_count(value: Any) -> bool:
    return type(value) is int and value >= 0


def _shape_problem(payload: Any) -> str | None:
    """Why a minted payload is not the documented shape, or None."""
    if not isinstance(payload, dict):
        return "its payload is not an object"
    for name in ("ref", "tool_call_id", "kind", "media_type"):
        if type(payload.get(name)) is not str:
            return f"its payload's {name} is not a string"
    if not REF_PATTERN.fullmatch(payload["ref"]):
        return "its payload's ref is not an artifact ref (art_ and 22 characters of 0-9A-Za-z)"
    if not is_hex_digest(payload.get("digest")):
        return "its payload's digest is not 64 lowercase hex digits"
    if not _is_count(payload.get("bytes")):
        return "its payload's bytes is not a non-negative integer"
    if "expires_at" in payload and not _is_count(payload["expires_at"]):
        return "its payload's expires_at is not a non-negative integer"
    return None


class _Tickets:
    """The run's final history's tool messages by ``tool_call_id``, built on first use."""

    def __init__(self, state: Mapping[str, Any]) -> None:
        self._state = state
        self._by_call: dict[str, list[Any]] | None = None

    def of(self, tool_call_id: str) -> list[Any]:
        if self._by_call is None:
            self._by_call = {}
            own = getattr(self._state, "folded", None)  # a FoldedState: no copy of the history
            history = own().get("history") if callable(own) else self._state.get("history")
            for message in history if isinstance(history, Iterable) else ():
                if isinstance(message, dict) and message.get("role") == "tool":
                    call = message.get("tool_call_id")
                    if type(call) is str:
                        self._by_call.setdefault(call, []).append(message.get("content"))
        return self._by_call.get(tool_call_id, [])


def _ticket_problem(payload: dict[str, Any], tickets: _Tickets) -> str | None:
    """Why the history does not hold the ticket the minted event describes, or None."""
    call = payload["tool_call_id"]
    contents = tickets.of(call)
    if not contents:
        return f"the run's history holds no tool message for call {call}"
    read = [ticket for ticket in map(read_ticket, contents) if ticket is not None]
    named = [ticket for ticket in read if ticket.get("ref") == payload["ref"]]
    if not named:
        return f"the run's history holds no ticket naming {payload['ref']} for call {call}" + (
            f" (its ticket names {read[-1].get('ref')})" if read else ""
        )
    ticket = named[-1]
    for name in _COMPARED:
        if ticket.get(name) != payload.get(name):
            return (
                f"the ticket in the history for call {call} has {name} "
                f"{_shown(ticket.get(name))} where the minted event records "
                f"{_shown(payload.get(name))}"
            )
    return None


def _instant(ms: int) -> str:
    """A tombstone's instant (unix ms) as ISO 8601 UTC: read from the store, never a clock."""
    try:
        when = dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)
    except (OverflowError, OSError, ValueError):
        return f"{ms} (unix ms)"
    return when.isoformat(timespec="milliseconds")


def _shown(value: Any) -> str:
    return "none" if value is None else repr(value) if isinstance(value, str) else str(value)


def check_minted(
    verification: RunVerification,
    minted: Iterable[Minted],
    artifacts: ArtifactSource,
) -> Iterator[ArtifactVerdict]:
    """One verdict per minted event of a run that verified (``verification``), in seq order:
    the ticket cross-check first, then the bytes in ``artifacts``."""
    run_id, scope = verification.run_id, verification.conversation_id
    tickets = _Tickets(verification.final_state)
    for event in minted:
        payload = event.payload
        problem = _shape_problem(payload)
        if problem is not None:
            ref = payload.get("ref") if isinstance(payload, dict) else None
            call = payload.get("tool_call_id") if isinstance(payload, dict) else None
            digest = payload.get("digest") if isinstance(payload, dict) else None
            yield ArtifactVerdict(
                run_id=run_id,
                seq=event.seq,
                scope=scope,
                ref=ref if type(ref) is str else "",
                tool_call_id=call if type(call) is str else "",
                digest=digest if type(digest) is str else "",
                status="mismatch",
                found=None,
                detail=f"the minted event is not one the record can check: {problem}",
            )
            continue
        yield _verdict(run_id, event.seq, scope, payload, tickets, artifacts)


def _verdict(
    run_id: str,
    seq: int,
    scope: str,
    payload: dict[str, Any],
    tickets: _Tickets,
    artifacts: ArtifactSource,
) -> ArtifactVerdict:
    ref, digest, size = payload["ref"], payload["digest"], payload["bytes"]

    def verdict(status: Status, detail: str, found: str | None = None) -> ArtifactVerdict:
        return ArtifactVerdict(
            run_id=run_id,
            seq=seq,
            scope=scope,
            ref=ref,
            tool_call_id=payload["tool_call_id"],
            digest=digest,
            status=status,
            found=found,
            detail=detail,
        )

    problem = _ticket_problem(payload, tickets)
    if problem is not None:
        return verdict("mismatch", problem)
    data = artifacts.read(scope, ref)
    if data is not None:
        found = hexdigest("artifact", data)
        if found != digest:
            return verdict(
                "mismatch",
                f"the stored {len(data)} bytes hash to {found}; the log records {digest}",
                found,
            )
        if len(data) != size:  # the digest agrees: only a record that lies about the size
            return verdict(
                "mismatch", f"the stored bytes are {len(data)}; the log records {size}", found
            )
        return verdict("ok", f"the store holds the {size} bytes the recorded digest names", found)
    removed = artifacts.tombstone(scope, ref)
    if removed is None:
        return verdict("missing", "the store holds neither its bytes nor a tombstone")
    if removed.digest != digest:
        return verdict(
            "mismatch",
            f"the store's tombstone records digest {removed.digest}; the log records {digest}",
            removed.digest,
        )
    note = f"; note: {removed.note}" if removed.note else ""
    at = "" if removed.at is None else f" at {_instant(removed.at)}"
    return verdict(removed.reason, f"its bytes were removed{at}{note}")


def check_artifacts(
    source: RowSource,
    artifacts: ArtifactSource,
    *,
    run_ids: Iterable[str] | None = None,
    trusted_keys: Iterable[Any] | None = (),
) -> Iterator[ArtifactVerdict]:
    """Verify the runs of ``source`` (every run, or only ``run_ids`` and their ancestors) and
    check each artifact a verified run (VALID, VALID_UNSIGNED or UNSEALED) minted against
    ``artifacts``. A run that fails verification yields no verdict: its own verdict is the
    log's (:class:`~agentfootprint.verify.verifier.Verifier`), never this module's."""
    for verified, minted in verified_minted(source, run_ids, trusted_keys):
        yield from check_minted(verified, minted, artifacts)


def verified_minted(
    source: RowSource, run_ids: Iterable[str] | None, trusted_keys: Iterable[Any] | None
) -> Iterator[tuple[RunVerification, list[Minted]]]:
    """Each run of ``source`` that verifies (every run, or only ``run_ids``), with the minted
    events the verifier read in it: what an artifact check judges, from verified rows only."""
    watch = MintedWatch(source)
    verifier = Verifier(watch, trusted_keys=trusted_keys)
    if run_ids is None:
        for _, result in verifier.verify_all():
            if isinstance(result, RunVerification):
                yield result, watch.minted(result.run_id)
        return
    for run_id in run_ids:
        try:
            verified = verifier.verify(run_id)
        except VerificationError:
            continue
        yield verified, watch.minted(run_id)
