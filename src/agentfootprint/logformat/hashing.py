"""Domain-separated SHA-256: ``H(tag, b) = SHA-256(b"afp/v1/" + tag + b"\\x00" + b)``.

A digest made for one purpose (a message piece, an event, a chain link) can
never be replayed as a digest of another kind, because the tag is hashed first.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any, Final

__all__ = ["TAGS", "ZERO", "digest", "domain_prefix", "hexdigest", "is_hex_digest"]

_HEX64: Final = re.compile(r"[0-9a-f]{64}")

TAGS: Final = frozenset(
    {
        "piece/system",
        "piece/message",
        "piece/tool",
        "request",
        "event",
        "chain",
        "commit",
        "policy",
        "runleaf",
        "wire/request",
        "wire/response",
        "tools/candidates",
        "seal/answer",
        "seal/wires",
        "ontology",
        "artifact",
    }
)

ZERO: Final = bytes(32)
_PREFIXES: Final = {tag: b"afp/v1/" + tag.encode("ascii") + b"\x00" for tag in TAGS}


def domain_prefix(tag: str) -> bytes:
    """The bytes hashed before the data under ``tag`` (for incremental hashing)."""
    return _PREFIXES[tag]


def digest(tag: str, data: bytes) -> bytes:
    """Return the 32-byte digest of ``data`` under the domain ``tag``."""
    h = hashlib.sha256(_PREFIXES[tag])
    h.update(data)
    return h.digest()


def hexdigest(tag: str, data: bytes) -> str:
    """Lowercase hex of :func:`digest`, the form digests take inside JSON."""
    return digest(tag, data).hex()


def is_hex_digest(value: Any) -> bool:
    """A digest as JSON writes it: a string of exactly 64 lowercase hex digits (matched whole:
    a ``^...$`` pattern would let a final newline through)."""
    return type(value) is str and _HEX64.fullmatch(value) is not None
