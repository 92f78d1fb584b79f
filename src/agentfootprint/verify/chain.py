"""Event and chain hashes (log format v1, section "Chain").

``e_i = H(event, canon({body, run, seq, ts, type}))`` where ``body`` is the
event's canonical body embedded as JSON, and ``c_i = H(chain, c_{i-1} || e_i)``
with ``c_{-1}`` = 32 zero bytes.
"""

from __future__ import annotations

import functools
from typing import Final

from agentfootprint.verify.canonical import MAX_SAFE_INT, canon
from agentfootprint.verify.hashing import ZERO, digest

__all__ = ["EVENT_TYPES", "GENESIS", "chain_hash", "event_envelope", "event_hash"]

GENESIS: Final = ZERO
EVENT_TYPES: Final = frozenset({"run.open", "write", "receipt", "commit", "event", "run.close"})


def event_hash(run_id: str, seq: int, type_: str, ts: int, body: bytes) -> bytes:
    """The digest of one event; ``body`` must already be canonical bytes."""
    return digest("event", event_envelope(run_id, seq, type_, ts, body))


@functools.lru_cache(maxsize=1024)
def _canon_text(text: str) -> bytes:
    return canon(text)


def _canon_int(number: int) -> bytes:
    if type(number) is not int or not -MAX_SAFE_INT <= number <= MAX_SAFE_INT:
        return canon(number)  # refuses with the usual error
    return str(number).encode("ascii")


def event_envelope(run_id: str, seq: int, type_: str, ts: int, body: bytes) -> bytes:
    """``canon({"body", "run", "seq", "ts", "type"})`` assembled from canonical parts.

    Byte-equal to ``canon_object`` over the same members (a unit test holds them
    together); the run id and type are canonicalised once, integers are checked.
    """
    return (
        b'{"body":'
        + body
        + b',"run":'
        + _canon_text(run_id)
        + b',"seq":'
        + _canon_int(seq)
        + b',"ts":'
        + _canon_int(ts)
        + b',"type":'
        + _canon_text(type_)
        + b"}"
    )


def chain_hash(previous: bytes, event: bytes) -> bytes:
    """Link ``event`` (an event hash) onto the chain whose head is ``previous``."""
    return digest("chain", previous + event)
