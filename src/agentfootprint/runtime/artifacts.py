"""Artifacts as a tool sees them: a resolved :class:`Artifact`, what ``present`` hands the
caller, and ``ctx.artifacts`` (docs/artifacts.md). The claim ticket's one form is
:mod:`agentfootprint.store.tickets` (re-exported here).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from agentfootprint.errors import ArtifactStoreError, UsageError
from agentfootprint.logformat.hashing import hexdigest
from agentfootprint.store.artifacts import ArtifactHead, ArtifactStore
from agentfootprint.store.tickets import read_ticket, ticket_text

__all__ = [
    "JSON_MEDIA_TYPE",
    "TEXT_MEDIA_TYPE",
    "Artifact",
    "ArtifactsView",
    "Presented",
    "read_ticket",
    "ticket_text",
]

JSON_MEDIA_TYPE = "application/json"
TEXT_MEDIA_TYPE = "text/plain; charset=utf-8"
#: the kind of a placed result whose tool declares none
DEFAULT_KIND = "tool-result"
_BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def ref_of(random: bytes) -> str:
    """An artifact's ref from 16 random bytes (the run's ``salts`` port): ``art_`` and 22
    base62 characters. Random, never derived from the content: a content-derived ref would
    let one conversation confirm another holds the same bytes."""
    if len(random) < 16:
        raise ValueError("an artifact ref takes 16 random bytes")
    number = int.from_bytes(random[:16], "big")
    digits = []
    for _ in range(22):
        number, digit = divmod(number, 62)
        digits.append(_BASE62[digit])
    return "art_" + "".join(reversed(digits))


@dataclass(frozen=True, kw_only=True, slots=True)
class Artifact:
    """An artifact's bytes and what the record says of them: what a tool that ``wants`` a ref
    receives in the ref's place (its digest checked against the ticket's)."""

    ref: str
    kind: str
    media_type: str
    size: int
    digest: str
    data: bytes = field(repr=False)

    def text(self) -> str:
        """The content as text (UTF-8)."""
        return self.data.decode("utf-8")

    def json(self) -> Any:
        """The content read as JSON."""
        return orjson.loads(self.data)


@dataclass(frozen=True, kw_only=True, slots=True)
class Presented:
    """An artifact the model asked to show the person running the agent (the ``present``
    tool): handed to the caller on ``RunResult.presented``, never to the model."""

    ref: str
    kind: str
    media_type: str
    size: int
    digest: str
    tool_call_id: str
    data: bytes = field(repr=False)


def _refused(what: str) -> UsageError:
    return UsageError(
        f"ctx.artifacts.{what}: this agent has no artifact store; give the agent "
        "artifacts=af.FileArtifacts(directory) (or MemoryArtifacts(), SqliteArtifacts(file)) "
        "and branch on ctx.artifacts.available",
        option="artifacts",
    )


class ArtifactsView:
    """``ctx.artifacts``: the agent's artifact store bound to the run's conversation (a tool
    can neither name nor widen the scope). Without a store every use is refused, naming the
    ``artifacts`` option; ``available`` is the fact to branch on."""

    def __init__(
        self,
        store: ArtifactStore | None = None,
        scope: str = "",
        *,
        clock: Callable[[], int] | None = None,
        random: Callable[[], bytes] | None = None,
        ttl_ms: int | None = None,
        presented: list[Presented] | None = None,
    ) -> None:
        self._store = store
        self._scope = scope
        self._clock = clock
        self._random = random
        self._ttl_ms = ttl_ms
        self._presented = presented
        #: what this call put, by ref (its ticket becomes a minted artifact when the tool
        #: returns it as its result)
        self.put_here: dict[str, ArtifactHead] = {}

    @property
    def available(self) -> bool:
        """The agent has an artifact store."""
        return self._store is not None

    def _ready(self, what: str) -> ArtifactStore:
        if self._store is None:
            raise _refused(what)
        return self._store

    def put(
        self, content: bytes | str, *, kind: str = DEFAULT_KIND, media_type: str | None = None
    ) -> dict[str, Any]:
        """Store ``content`` and return its claim ticket (as a dict). Returned by the tool as
        its whole result, the model reads the ticket and the log records the artifact as
        minted; a ticket the tool does not return is removed when the tool returns."""
        store = self._ready("put")
        data = content.encode("utf-8") if isinstance(content, str) else content
        if not isinstance(data, bytes):
            raise UsageError(
                f"ctx.artifacts.put takes bytes or str, got {type(content).__name__}",
                option="artifacts",
            )
        if media_type is None:
            media_type = TEXT_MEDIA_TYPE if isinstance(content, str) else "application/octet-stream"
        head = self.store_bytes(store, data, kind=kind, media_type=media_type)
        self.put_here[head.ref] = head
        ticket: dict[str, Any] = orjson.loads(
            ticket_text(head, f"stored as artifact {head.ref} ({head.size} bytes)")
        )
        return ticket

    def store_bytes(
        self, store: ArtifactStore, data: bytes, *, kind: str, media_type: str
    ) -> ArtifactHead:
        """Put ``data`` under a fresh ref in this scope; its head."""
        now = self._clock() if self._clock is not None else 0
        head = ArtifactHead(
            scope=self._scope,
            ref=ref_of(self._random() if self._random is not None else secrets.token_bytes(16)),
            kind=kind,
            media_type=media_type,
            size=len(data),
            digest=hexdigest("artifact", data),
            created_at=now,
            expires_at=None if self._ttl_ms is None else now + self._ttl_ms,
        )
        store.put(head, data)
        return head

    def present(self, artifact: Artifact, tool_call_id: str) -> None:
        """Hand ``artifact`` to the person running the agent (``RunResult.presented``)."""
        self._ready("present")
        if self._presented is None:
            raise _refused("present")
        self._presented.append(
            Presented(
                ref=artifact.ref,
                kind=artifact.kind,
                media_type=artifact.media_type,
                size=artifact.size,
                digest=artifact.digest,
                tool_call_id=tool_call_id,
                data=artifact.data,
            )
        )

    def head(self, ref: str) -> ArtifactHead | None:
        """The artifact's head in this conversation, or None (unknown, expired or erased)."""
        return self._ready("head").head(self._scope, ref)

    def get(self, ref: str) -> Artifact | None:
        """The artifact in this conversation, its bytes checked against its digest; None
        when unknown, expired or erased. Bytes that do not hash to the recorded digest are
        refused (:class:`~agentfootprint.errors.ArtifactStoreError`)."""
        store = self._ready("get")
        head = store.head(self._scope, ref)
        if head is None:
            return None
        return checked(store, head)


def checked(store: ArtifactStore, head: ArtifactHead) -> Artifact | None:
    """``head``'s bytes from ``store`` as an :class:`Artifact`, or None when they are gone;
    refused when they do not hash to its digest."""
    data = store.read(head.scope, head.ref)
    if data is None:
        return None
    found = hexdigest("artifact", data)
    if found != head.digest:
        raise ArtifactStoreError(
            f"artifact {head.ref}: the store's bytes hash to {found}, not the recorded "
            f"{head.digest}"
        )
    return artifact_of(head, data)


def artifact_of(head: ArtifactHead | Mapping[str, Any], data: bytes) -> Artifact:
    """An :class:`Artifact` from a head (or a ticket) and its bytes."""
    if isinstance(head, ArtifactHead):
        return Artifact(
            ref=head.ref,
            kind=head.kind,
            media_type=head.media_type,
            size=head.size,
            digest=head.digest,
            data=data,
        )
    return Artifact(
        ref=head["ref"],
        kind=head["kind"],
        media_type=head["media_type"],
        size=head["bytes"],
        digest=head["digest"],
        data=data,
    )
