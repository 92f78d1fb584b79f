"""Section 13.5 of ``docs/log-format.md`` (a version 3 bundle's artifacts) for the independent
verifier, written from that page alone: the manifest's artifact entries, the artifact lines
that carry the bytes, and the per-artifact verdicts. It imports nothing of ``agentfootprint``
(nor of ``independent_verifier``, which imports it).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from typing import Any

import rfc8785

MAX_SAFE_INT = 2**53 - 1
CHUNK_MAX = 33_554_432  # 32 MiB: the most bytes one artifact line carries
HEX64 = re.compile(r"[0-9a-f]{64}")
REF = re.compile(r"art_[0-9A-Za-z]{22}")
STATUSES = ("ok", "expired", "erased", "missing", "withheld")
MINTED = "agentfootprint.artifacts.minted"
TICKET = {"bytes", "digest", "kind", "media_type", "placed", "reason", "ref"}
COMPARED = ("kind", "media_type", "bytes", "digest", "expires_at")


def _int(x: Any, low: int = 0) -> bool:
    return type(x) is int and low <= x <= MAX_SAFE_INT


def _hex(x: Any) -> bool:
    return isinstance(x, str) and HEX64.fullmatch(x) is not None


def H(tag: str, data: bytes) -> bytes:
    return hashlib.sha256(b"afp/v1/" + tag.encode("ascii") + b"\x00" + data).digest()


def entries_problem(value: Any, listed: set[str]) -> str | None:
    """Section 13.5 "Artifact entries": why ``artifacts`` is not as it says, or None."""
    if not isinstance(value, list):
        return "artifacts is not an array"
    seen = set()
    for e in value:
        keys = {"scope", "ref", "run_id", "seq", "digest", "bytes", "status", "removed"}
        if not isinstance(e, dict) or set(e) != keys:
            return "an artifact entry lacks or adds a member"
        if not all(isinstance(e[k], str) for k in ("scope", "ref", "run_id")):
            return "an artifact entry's scope, ref or run_id is not a string"
        if not (_int(e["seq"]) and _int(e["bytes"]) and _hex(e["digest"])):
            return "an artifact entry's seq, bytes or digest is not as 13.5 says"
        if e["status"] not in STATUSES or not isinstance(e["status"], str):
            return "an artifact entry's status is none of the five"
        removed = e["removed"]
        if e["status"] in ("expired", "erased"):
            if not (
                isinstance(removed, dict)
                and set(removed) == {"at", "note"}
                and _int(removed["at"])
                and isinstance(removed["note"], str)
            ):
                return "an expired or erased entry's removed is not {at, note}"
        elif removed is not None:
            return "removed is not null for a status other than expired and erased"
        if e["run_id"] not in listed:
            return "an artifact entry names a run the manifest does not list"
        if (e["scope"], e["ref"]) in seen:
            return "two artifact entries have the same scope and ref"
        seen.add((e["scope"], e["ref"]))
    return None


def is_artifact_line(value: Any) -> bool:
    """A line of version 3 that is a JSON object with a member named ``artifact``."""
    return isinstance(value, dict) and "artifact" in value


def carried(data: Any) -> bytes | None:
    """An artifact line's ``data``: canonical padded standard base64 of 1 to 32 MiB."""
    if not isinstance(data, str) or not data:
        return None
    try:
        raw = base64.b64decode(data.encode("ascii"), validate=True)
    except (UnicodeEncodeError, binascii.Error, ValueError):
        return None
    if not 1 <= len(raw) <= CHUNK_MAX or base64.b64encode(raw).decode("ascii") != data:
        return None
    return raw


class ArtifactLines:
    """The artifact lines in order: each must be the chunk the entries call for next."""

    def __init__(self, entries: list[dict[str, Any]]) -> None:
        self.entries = entries
        # the ok entries with bytes, in the manifest's order, and where each got to
        self.due = [i for i, e in enumerate(entries) if e["status"] == "ok" and e["bytes"] > 0]
        self.at = 0  # into due
        self.offset = 0
        self.content: dict[int, hashlib._Hash] = {
            i: hashlib.sha256(b"afp/v1/artifact\x00")
            for i, e in enumerate(entries)
            if e["status"] == "ok"
        }

    def line(self, value: Any) -> str | None:
        if not isinstance(value, dict) or set(value) != {"artifact", "offset", "data"}:
            return "an artifact line lacks or adds a member (or an event line follows one)"
        index, offset = value["artifact"], value["offset"]
        if not _int(index) or index >= len(self.entries) or not _int(offset):
            return "an artifact line's artifact or offset is not an index / integer >= 0"
        if self.entries[index]["status"] != "ok":
            return "an artifact line for an entry that is not ok"
        if self.at >= len(self.due) or self.due[self.at] != index:
            return "an artifact line out of the manifest's order, or before the one read ends"
        if offset != self.offset:
            return "an artifact line's offset leaves a gap or overlaps"
        raw = carried(value["data"])
        if raw is None:
            return "an artifact line's data is not canonical base64 of 1 to 32 MiB"
        if offset + len(raw) > self.entries[index]["bytes"]:
            return "an artifact line's bytes run past its entry's bytes"
        self.content[index].update(raw)
        self.offset += len(raw)
        if self.offset == self.entries[index]["bytes"]:
            self.at, self.offset = self.at + 1, 0
        return None

    def end(self) -> str | None:
        if self.at < len(self.due):
            return "an ok entry's lines end short of its bytes, or are missing"
        return None

    def digests(self) -> dict[int, str]:
        """H("artifact", bytes) of each ok entry's carried bytes."""
        return {i: h.hexdigest() for i, h in self.content.items()}


def _ticket(content: Any) -> dict[str, Any] | None:
    """Step 2: a tool message's content read as a ticket, or None."""
    if not isinstance(content, str) or not content.startswith("{"):
        return None
    try:
        value = json.loads(content)
        if not isinstance(value, dict) or rfc8785.dumps(value) != content.encode("utf-8"):
            return None
    except (ValueError, RecursionError, UnicodeEncodeError, rfc8785.CanonicalizationError):
        return None
    if set(value) not in (TICKET, TICKET | {"expires_at"}) or value["placed"] is not True:
        return None
    return value


def _describes(p: Any) -> bool:
    """Step 1."""
    return (
        isinstance(p, dict)
        and all(isinstance(p.get(k), str) for k in ("tool_call_id", "kind", "media_type"))
        and isinstance(p.get("ref"), str)
        and REF.fullmatch(p["ref"]) is not None
        and _hex(p.get("digest"))
        and type(p.get("bytes")) is int
        and p["bytes"] >= 0
        and ("expires_at" not in p or (type(p["expires_at"]) is int and p["expires_at"] >= 0))
    )


def verdict(
    payload: Any,
    scope: str,
    history: Any,
    entries: list[dict[str, Any]],
    digests: dict[int, str],
) -> str:
    """Section 13.5 "Verifying artifacts", steps 1 to 6, for one minted event."""
    if not _describes(payload):
        return "mismatch"
    messages = [
        m
        for m in (history if isinstance(history, list) else [])
        if isinstance(m, dict)
        and m.get("role") == "tool"
        and m.get("tool_call_id") == payload["tool_call_id"]
    ]
    if not messages:
        return "mismatch"
    tickets = [t for t in map(_ticket, (m.get("content") for m in messages)) if t is not None]
    named = [t for t in tickets if t["ref"] == payload["ref"]]
    if not named or any(named[-1].get(k) != payload.get(k) for k in COMPARED):
        return "mismatch"
    found = [i for i, e in enumerate(entries) if e["scope"] == scope and e["ref"] == payload["ref"]]
    if not found:
        return "missing"
    entry = entries[found[0]]
    if entry["digest"] != payload["digest"] or entry["bytes"] != payload["bytes"]:
        return "mismatch"
    if entry["status"] == "ok":
        return "ok" if digests[found[0]] == payload["digest"] else "mismatch"
    return str(entry["status"])


def minted_payload(body: Any) -> tuple[bool, Any]:
    """Whether an ``event`` row's parsed body is a minted event, and its payload."""
    if isinstance(body, dict) and body.get("name") == MINTED:
        return True, body.get("payload")
    return False, None
