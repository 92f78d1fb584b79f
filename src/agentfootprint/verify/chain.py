"""Event and chain hashes (log format v1, section "Chain").

``e_i = H(event, canon({body, run, seq, ts, type}))`` where ``body`` is the
event's canonical body embedded as JSON, and ``c_i = H(chain, c_{i-1} || e_i)``
with ``c_{-1}`` = 32 zero bytes.
"""

from __future__ import annotations

from typing import Final

from agentfootprint.verify.canonical import canon, canon_object
from agentfootprint.verify.hashing import ZERO, digest

__all__ = ["EVENT_TYPES", "GENESIS", "chain_hash", "event_hash"]

GENESIS: Final = ZERO
EVENT_TYPES: Final = frozenset({"run.open", "write", "receipt", "commit", "event", "run.close"})


def event_hash(run_id: str, seq: int, type_: str, ts: int, body: bytes) -> bytes:
    """The digest of one event; ``body`` must already be canonical bytes."""
    members = {
        "body": body,
        "run": canon(run_id),
        "seq": canon(seq),
        "ts": canon(ts),
        "type": canon(type_),
    }
    return digest("event", canon_object(members))


def chain_hash(previous: bytes, event: bytes) -> bytes:
    """Link ``event`` (an event hash) onto the chain whose head is ``previous``."""
    return digest("chain", previous + event)
