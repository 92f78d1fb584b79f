"""The claim ticket: the one thing about an artifact the log holds (docs/artifacts.md).

A placed result's tool message is the canonical JSON text of exactly these members. The
feature that places results writes it with :func:`ticket_text`; the feature resolving a
wanted ref, a replay reading a ticket back, and ``verify --artifacts`` cross-checking a
minted event all read it with :func:`read_ticket`, so every one of them agrees on one form.
Here, below the runtime, so the verifier's side reads it without importing the runtime.
"""

from __future__ import annotations

from typing import Any, Final

from agentfootprint.logformat.canonical import canon, parse
from agentfootprint.logformat.hashing import is_hex_digest
from agentfootprint.store.artifacts import REF_PATTERN, ArtifactHead

__all__ = ["TICKET_MEMBERS", "read_ticket", "ticket_text"]

#: a ticket's members (``expires_at`` besides, when the artifact states an expiry)
TICKET_MEMBERS: Final = frozenset(
    {"bytes", "digest", "kind", "media_type", "placed", "reason", "ref"}
)


def ticket_text(head: ArtifactHead, reason: str) -> str:
    """The claim ticket for ``head``: canonical JSON text."""
    ticket: dict[str, Any] = {
        "bytes": head.size,
        "digest": head.digest,
        "kind": head.kind,
        "media_type": head.media_type,
        "placed": True,
        "reason": reason,
        "ref": head.ref,
    }
    if head.expires_at is not None:
        ticket["expires_at"] = head.expires_at
    return canon(ticket).decode("utf-8")


def _count(value: Any) -> bool:
    return type(value) is int and value >= 0


def read_ticket(content: Any) -> dict[str, Any] | None:
    """``content`` read as a claim ticket: its members, or None when it is not exactly one
    (the canonical text of exactly the members, ``placed`` true, each of its type; any other
    text is an ordinary result)."""
    if type(content) is not str or not content.startswith('{"bytes":'):
        return None  # (canonical text orders the members: a ticket opens so)
    data = content.encode("utf-8", "surrogatepass")
    try:
        value = parse(data)
        if not isinstance(value, dict) or canon(value) != data:
            return None
    except (ValueError, RecursionError):
        return None
    members = set(value)
    if members != TICKET_MEMBERS and members != TICKET_MEMBERS | {"expires_at"}:
        return None
    if (
        value["placed"] is not True
        or not _count(value["bytes"])
        or ("expires_at" in value and not _count(value["expires_at"]))
        or not all(type(value[k]) is str for k in ("kind", "media_type", "reason", "ref"))
        or not REF_PATTERN.fullmatch(value["ref"])
        or not is_hex_digest(value["digest"])
    ):
        return None
    return value
