"""Steps 2.1 to 2.4 of docs/log-format.md's algorithm for run ``R`` ("Verification",
section 9.2): one stored row's envelope, its canonical body, its event hash and its chain link.

A row is the 7-tuple of :class:`~agentfootprint.logformat.chain.RawRow` (run id, seq, type,
ts, body, event hash, chain hash), whatever the source: a store's ``chain_rows`` hands the
tuples over, a ``read`` row is taken apart into one. A hash the file does not keep because the
row determines it (schema 2) is :data:`~agentfootprint.logformat.chain.DERIVED`: it is computed
here, as for any row, and compared with nothing.

Nothing here depends on the run beyond its id and the chain head so far: these are the checks
of the bytes. What a body says (step 2.5 on) is :mod:`agentfootprint.verify.body_checks`'.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from agentfootprint.errors import CanonicalFormError
from agentfootprint.logformat.canonical import canon, parse_canonical
from agentfootprint.logformat.chain import DERIVED, chain_hash, event_hash, row_problem
from agentfootprint.logformat.request import json_kind
from agentfootprint.verify.body_checks import RunCheck

__all__ = [
    "CHAIN_MISMATCH",
    "EVENT_MISMATCH",
    "CanonicalBodies",
    "canonical_body",
    "may_commit",
    "sound_row",
]

EVENT_MISMATCH = "event hash does not match the event"
CHAIN_MISMATCH = "chain hash does not link to the previous event"
#: the bodies remembered as proven canonical: how long each at most, and how many
_PROVEN_BODY_BYTES = 1024
_PROVEN_BODIES = 4096


def canonical_body(check: RunCheck, seq: int, data: bytes) -> dict[str, Any]:
    """Step 2.2: ``data`` is canonical JSON (``canon(parse(data)) == data``, depth limit 255)
    and an object; else **canonical**, or **structure** for a canonical non-object."""
    return _canonical(check, seq, data)[0]


def _canonical(check: RunCheck, seq: int, data: bytes) -> tuple[dict[str, Any], bool]:
    """:func:`canonical_body`, and whether ``parse_canonical`` proved it without the full
    check (then the bytes alone show it, and :class:`CanonicalBodies` may remember them)."""
    try:
        body, proven = parse_canonical(data)  # proven: canon(body) == data, shown in C
    except orjson.JSONDecodeError as exc:
        raise check.fail(seq, f"body is not JSON ({exc})", "canonical") from exc
    except RecursionError as exc:  # parse() recurses over deep arrays holding big numbers
        raise check.fail(seq, "body is not I-JSON (nested too deep)", "canonical") from exc
    if not proven:  # the full check: what it refuses, and why
        try:
            canonical = canon(body)
        except CanonicalFormError as exc:
            raise check.fail(seq, f"body is not I-JSON ({exc})", "canonical") from exc
        if canonical != data:
            raise check.fail(seq, "body is not in canonical form (RFC 8785)", "canonical")
    if not isinstance(body, dict):
        raise check.fail(seq, f"body is {json_kind(body)}, not a JSON object", "structure")
    return body, proven


def may_commit(data: bytes) -> bool:
    """Whether a canonical body may hold a ``$commit`` member at some depth (section 12.5):
    the name reaches canonical bytes only as ``$commit`` or through a ``\\u`` escape at some
    level of JSON-in-JSON, which leaves a backslash. (``find`` is several times faster than
    ``in`` on bytes, which first tries the needle as an integer.)"""
    return data.find(b"$") >= 0 or data.find(b"\\") >= 0


class CanonicalBodies:
    """Step 2.2 for one verifier, remembering small bodies proven canonical by their bytes.

    Whether bytes are a canonical JSON object is a function of the bytes alone, and the runs
    of a conversation repeat many (commit markers, settings): a body seen again is parsed
    without being proven again. A ``run.open`` names its own run, so it never repeats and is
    not kept. Bounded: cleared when full. The value kept is whether the
    bytes may hold a commitment (:func:`may_commit`), or, for a commit marker that holds
    none, its parsed body: a marker is only read (``check_commit``), never kept or changed,
    so one parse serves every repeat of it.
    """

    __slots__ = ("_known",)

    def __init__(self) -> None:
        self._known: dict[bytes, bool | dict[str, Any]] = {}

    def __len__(self) -> int:
        return len(self._known)

    def body(
        self, check: RunCheck, seq: int, type_: str, data: bytes
    ) -> tuple[dict[str, Any], bool]:
        """The row's body (step 2.2's finding if it is not a canonical object) and whether
        it may hold a commitment."""
        known = self._known
        seen = known.get(data)
        if seen is not None:  # proven canonical before: parse() is loads()
            if type(seen) is dict:
                return (seen if type_ == "commit" else orjson.loads(data)), False
            return orjson.loads(data), bool(seen)
        body, proven = _canonical(check, seq, data)
        scan = may_commit(data)
        if proven and len(data) <= _PROVEN_BODY_BYTES and type_ != "run.open":  # never repeats
            if len(known) >= _PROVEN_BODIES:
                known.clear()
            known[data] = body if type_ == "commit" and not scan else scan
        return body, scan


def sound_row(
    check: RunCheck,
    seq: int,
    row: Sequence[Any],
    head: bytes,
    bodies: CanonicalBodies,
    hashes: list[tuple[bytes, bytes]] | None = None,
) -> tuple[dict[str, Any], bool, bytes]:
    """Steps 2.1 to 2.4 for row ``seq`` of ``check``'s run, the chain head before it being
    ``head``: the row's body, whether it may hold a commitment, and the new head. The row's
    event and chain hash, once checked, are appended to ``hashes`` when given (export writes
    them: one computation serves both)."""
    # 2.1: the envelope as stored (types, the run, the seq, a known type, sizes)
    problem = row_problem(row, check.run_id, seq)
    if problem is not None:
        raise check.fail(seq, problem, "rows")
    _, _, type_, ts, data, stored_event, stored_chain = row
    # 2.2: the body is canonical JSON, and an object
    body, scan = bodies.body(check, seq, type_, data)
    # 2.3: the event hash recomputed from R, seq, type, ts and the stored bytes
    event = event_hash(check.run_id, seq, type_, ts, data)
    if stored_event is not DERIVED and event != stored_event:
        raise check.fail(seq, EVENT_MISMATCH, "hash")
    # 2.4: the chain link
    head = chain_hash(head, event)
    if stored_chain is not DERIVED and head != stored_chain:
        raise check.fail(seq, CHAIN_MISMATCH, "chain")
    if hashes is not None:
        hashes.append((event, head))
    return body, scan, head
