"""The one way a request comes into being, and the receipt digests over it.

``build_request(state, version)`` is a pure projection of committed state under the
projection version a run records (:mod:`agentfootprint.logformat.projection`, re-exported
here): it selects the documented keys and puts them in order; it composes nothing. The
agent sends its result to the provider, the receipt hashes it piece by piece, and the
verifier applies the same projection to the state folded from the log (v2 edits what
``messages`` and ``tools`` serve; v3 adds ``prompt_cache``, request shape 2). The fields
and the state keys they come from: :mod:`~agentfootprint.logformat.projection_v1`.

A state whose projected keys have the wrong JSON type (``model`` not a string,
``params`` not an object, a piece list not an array) projects onto no request:
:class:`ProjectionError`, never a request built from whatever the value happens to be
(a string would otherwise be served character by character).

:class:`RequestHasher` is derived from a projection's field list: the request digest's
members come in the canonical order computed from the field names, and the growing field
(``messages``) keeps its SHA-256 state from call to call.
"""

from __future__ import annotations

import hashlib
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

from agentfootprint.logformat.canonical import canon, canon_object, compact
from agentfootprint.logformat.hashing import domain_prefix, hexdigest
from agentfootprint.logformat.projection import (
    PROJECTION_V1,
    PROJECTION_V3,
    PROJECTIONS,
    Projection,
    ProjectionError,
    build_request,
    json_kind,
    projection,
    recorded_projection,
)
from agentfootprint.logformat.shared_lists import SharedList

__all__ = [
    "PIECE_KINDS",
    "PROJECTION",
    "PROJECTIONS",
    "PROJECTION_V3",
    "REQUEST_VERSION",
    "Projection",
    "ProjectionError",
    "RequestDigests",
    "RequestHasher",
    "build_request",
    "identity_prefix",
    "json_kind",
    "piece_mismatch",
    "projection",
    "recorded_projection",
    "request_digest",
]

#: the request shape of projections 1 and 2 (``v`` in their request digests; 2 under
#: projection 3, which adds ``prompt_cache``: ``Projection.request_version``)
REQUEST_VERSION: Final = PROJECTION_V1.request_version
#: projection v1's piece fields: request field -> (state key, piece tag), in served order
PROJECTION: Final = {f.name: (f.key, f.tag) for f in PROJECTION_V1.pieces}
#: the digest lists every receipt carries (the same for every projection: request shape 2
#: adds a scalar member, no piece list)
PIECE_KINDS: Final = PROJECTION_V1.piece_kinds


def piece_mismatch(call: int, kind: str, claimed: Sequence[str], actual: Sequence[str]) -> str:
    """What a receipt's expanded digest list gets wrong against the rebuilt one."""
    for position, (want, got) in enumerate(zip(claimed, actual, strict=False)):
        if want != got:
            return (
                f"call {call}: {kind} piece {position} was served as {got} "
                f"but the receipt says {want}"
            )
    return (
        f"call {call}: {len(actual)} {kind} pieces were served but the receipt lists {len(claimed)}"
    )


def request_digest(
    model: str,
    params: Any,
    pieces: Mapping[str, Sequence[str]],
    *,
    request_version: int = REQUEST_VERSION,
    scalars: Mapping[str, Any] | None = None,
) -> str:
    """``H(request, canon({v, model, params, system, messages, tools, ...}))`` over piece
    digests; ``scalars``: the other members of the request shape, hashed whole (request shape
    2's ``prompt_cache``).

    The reference definition; :class:`RequestHasher` computes the same digest incrementally.
    """
    members = {
        "v": canon(request_version),
        "model": canon(model),
        "params": canon(params),
        **{kind: _hex_list(pieces[kind]) for kind in PIECE_KINDS},
        **{name: canon(value) for name, value in (scalars or {}).items()},
    }
    return hexdigest("request", canon_object(members))


def _hex_list(digests: Sequence[str]) -> bytes:
    """Canonical bytes of a list of lowercase hex digests (plain ASCII strings)."""
    return orjson.dumps(list(digests))


def identity_prefix(previous: Sequence[Any], current: Sequence[Any], *, spliced: bool) -> int:
    """How many leading items of ``current`` are the very objects of ``previous``.

    State lists are built only by the fold: ``set`` stores a freshly copied or parsed
    value (no object in it was ever in an earlier list) and ``append`` makes
    ``old + fresh tail``. So an object of ``previous`` found at its own position in
    ``current`` got there through appends that carried the whole prefix along: when the
    last and the first objects of ``previous`` sit at their positions, all of them do.
    A list a projection edit can splice (``spliced``: slices of the history around a
    message that is not in it) gives no such guarantee, so it is compared object by object.
    """
    m = len(previous)
    if m == 0:
        return 0
    if not spliced and type(current) is SharedList and current.extends(previous):
        return m  # a version grown from previous: known without reading either
    if (
        not spliced
        and len(current) >= m
        and current[m - 1] is previous[m - 1]
        and current[0] is previous[0]
    ):
        return m  # the usual case (the history grew by appends): O(1)
    flags = list(map(operator.is_, previous, current))
    try:
        return flags.index(False)
    except ValueError:
        return len(flags)


@dataclass(frozen=True, kw_only=True, slots=True)
class RequestDigests:
    """Every digest of one served request: what a receipt asserts (lists: read, don't mutate)."""

    model: str
    params: Any
    request: str
    system: Sequence[str]
    messages: Sequence[str]
    tools: Sequence[str]
    #: ``canon(model)`` and ``canon(params)``, as the request digest hashed them (so a
    #: receipt check compares bytes without canonicalising the served values again)
    model_bytes: bytes = field(default=b"", compare=False, repr=False)
    params_bytes: bytes = field(default=b"", compare=False, repr=False)

    def pieces(self, kind: str) -> Sequence[str]:
        digests: Sequence[str] = getattr(self, kind)
        return digests


def _member(name: str) -> bytes:
    return canon(name) + b":"


# how a request digest member is encoded: the request shape version, a scalar's canonical
# bytes, or a piece list's digests
_VERSION, _SCALAR, _PIECES = 0, 1, 2


def _encoding_of(name: str, scalars: frozenset[str]) -> int:
    if name == "v":
        return _VERSION
    return _SCALAR if name in scalars else _PIECES


#: per projection: its piece fields, scalar names, members before and after the growing
#: field, the version's bytes, the growing field's key and the first head (see
#: RequestHasher._take_layout)
_Layout = tuple[
    tuple[tuple[str, str, bool], ...],
    frozenset[str],
    tuple[str, ...],
    tuple[tuple[bytes, int, str], ...],
    bytes,
    bytes,
    bytes,
]
_LAYOUTS: dict[Projection, _Layout] = {}


class RequestHasher:
    """Hashes the requests of one projection piece by piece, each piece once across calls.

    Committed state is never mutated in place, so a piece object seen in the previous call
    is the same content: its digest is reused instead of canonicalising and hashing it
    again (found at its position in the usual case, by identity when the list was rewritten
    or spliced). The hasher keeps references to the pieces it has seen, so object identity
    stays meaningful.

    The request digest is computed incrementally too: its members are written in canonical
    order, computed from the projection's field names; the bytes before the growing field's
    digest list (for projections 1 to 3 just ``{"messages":[``, since ``messages`` sorts
    first) are hashed once, and the SHA-256 state after the digests already hashed is kept
    and extended by the new ones only.

    The digest lists it returns are
    :class:`~agentfootprint.logformat.shared_lists.SharedList` versions, each grown from the
    previous call's (O(new), its prefix shared), so storing a receipt's lists
    (``compress_digests``) and expanding them again (``expand_digests``) read only what is
    new since that call.
    """

    def __init__(self, version: int | Projection = 1) -> None:
        self._take_layout(version if isinstance(version, Projection) else projection(version))
        #: the last value hashed of each scalar member and piece list, with its canonical
        #: bytes: state values are never mutated in place, so the same object (kept alive
        #: here) is the same bytes
        self._encoded_of: dict[str, tuple[Any, Any, bytes]] = {}
        self._objects: dict[str, Sequence[Any]] = {name: [] for name, _, _ in self._pieces}
        self._digests: dict[str, SharedList] = {name: SharedList() for name, _, _ in self._pieces}
        self._grown_done = 0  # leading digests of the growing field already fed to _grown_sha
        self._grown_sha = hashlib.sha256(self._grown_head)

    def _take_layout(self, spec: Projection) -> None:
        """What depends on the projection only (computed once per version): its piece fields,
        scalar names, the members before and after the growing field, the version's bytes,
        the growing field's key, and the bytes hashed before the growing field's digests
        (members sorting before it depend on the request: none yet, so the first call
        starts over)."""
        self.projection = spec
        layout: _Layout | None = _LAYOUTS.get(spec)
        if layout is None:
            pieces = tuple((f.name, f.tag or "", f.name in spec.edited) for f in spec.pieces)
            scalars = frozenset(f.name for f in spec.fields if f.tag is None)
            position = spec.member_order.index(spec.grows)
            after = tuple(
                (b"," + _member(name), _encoding_of(name, scalars), name)
                for name in spec.member_order[position + 1 :]
            )
            before = tuple(spec.member_order[:position])
            grows_key = _member(spec.grows) + b"["
            head = b"" if before else domain_prefix("request") + b"{" + grows_key
            layout = _LAYOUTS[spec] = (
                pieces,
                scalars,
                before,
                after,
                canon(spec.request_version),
                grows_key,
                head,
            )
        (
            self._pieces,
            self._scalars,
            self._before,
            self._after,
            self._version_bytes,
            self._grows_key,
            self._first_head,
        ) = layout
        self._grown_head = self._first_head

    @property
    def version(self) -> int:
        """The projection version this hasher hashes requests of."""
        return self.projection.version

    def fork(self, version: int | None = None) -> RequestHasher:
        """An independent hasher that starts from this one's cache (for a continued run),
        under projection ``version`` (default: this one's; a continued run may differ)."""
        twin = object.__new__(RequestHasher)
        spec = self.projection if version is None else projection(version)
        if spec is self.projection:  # the same layout (no lookup: a projection hashes slowly)
            twin.projection = spec
            twin._pieces, twin._scalars, twin._before = self._pieces, self._scalars, self._before
            twin._after, twin._version_bytes = self._after, self._version_bytes
            twin._grows_key, twin._first_head = self._grows_key, self._first_head
            twin._grown_head = self._first_head
        else:
            twin._take_layout(spec)
        twin._encoded_of = dict(self._encoded_of)  # canonical bytes depend on the value only
        twin._objects, twin._digests = {}, {}
        for name, tag, _ in twin._pieces:
            if any(n == name and t == tag for n, t, _ in self._pieces):
                twin._objects[name] = self._objects[name]  # lists are replaced, never mutated
                twin._digests[name] = self._digests[name]
            else:
                twin._objects[name], twin._digests[name] = [], SharedList()
        if twin._grown_head == self._grown_head and twin.projection.grows == self.projection.grows:
            twin._grown_done = self._grown_done
            twin._grown_sha = self._grown_sha.copy()
        else:
            twin._grown_done = 0
            twin._grown_sha = hashlib.sha256(twin._grown_head)
        return twin

    def digests(self, request: Mapping[str, Any]) -> RequestDigests:
        lists: dict[str, Sequence[str]] = {}
        kept_grown = 0
        grows = self.projection.grows
        for kind, tag, spliced in self._pieces:
            current = request[kind]
            previous = self._objects[kind]
            known = self._digests[kind]
            if current is previous:  # the very list of the last call: its digests (usual)
                lists[kind] = known
                if kind == grows:
                    kept_grown = len(previous)
                continue
            kept = identity_prefix(previous, current, spliced=spliced)
            if kept == len(previous):  # only appends: hash the new tail
                new = [hexdigest(tag, canon(piece)) for piece in current[kept:]]
            else:  # rewritten: the pieces seen last call keep their digests (by identity)
                seen = {id(p): d for p, d in zip(previous[kept:], known[kept:], strict=True)}
                new = [seen.get(id(p)) or hexdigest(tag, canon(p)) for p in current[kept:]]
            # state lists are replaced, never mutated, so keeping a reference is enough
            shared = type(current) is list or type(current) is SharedList
            self._objects[kind] = current if shared else list(current)
            if kept < len(known):  # rewritten: a list of its own
                out = SharedList.adopt([*known[:kept], *new])
            else:  # grown (or unchanged): the next version of known, O(new)
                out = known.extended(new)
            self._digests[kind] = lists[kind] = out
            if kind == grows:
                kept_grown = kept
        request_digest = self._request_digest(request, lists, kept_grown)
        return RequestDigests(
            model=request["model"],
            params=request["params"],
            request=request_digest,
            system=lists["system"],
            messages=lists["messages"],
            tools=lists["tools"],
            model_bytes=self._canonical("model", request["model"], canon),
            params_bytes=self._canonical("params", request["params"], canon),
        )

    def _canonical(self, name: str, value: Any, encode: Callable[[Any], bytes]) -> bytes:
        """``encode(value)``, remembered for the last value of member ``name`` (by identity)."""
        known = self._encoded_of.get(name)
        if known is not None and known[0] is value and known[1] is encode:
            return known[2]
        data = compact(encode(value))  # kept as long as the hasher
        self._encoded_of[name] = (value, encode, data)
        return data

    def _encoding(self, name: str) -> int:
        return _encoding_of(name, self._scalars)

    def _encoded(
        self, name: str, request: Mapping[str, Any], lists: Mapping[str, Sequence[str]]
    ) -> bytes:
        how = self._encoding(name)
        if how == _VERSION:
            return self._version_bytes
        if how == _SCALAR:
            return self._canonical(name, request[name], canon)
        return self._canonical(name, lists[name], _hex_list)

    def _head(self, request: Mapping[str, Any], lists: Mapping[str, Sequence[str]]) -> bytes:
        """The bytes hashed before the growing field's first digest."""
        parts = [_member(name) + self._encoded(name, request, lists) for name in self._before]
        return (
            domain_prefix("request") + b"{" + b"".join(p + b"," for p in parts) + (self._grows_key)
        )

    def _request_digest(
        self, request: Mapping[str, Any], lists: Mapping[str, Sequence[str]], kept: int
    ) -> str:
        grown = lists[self.projection.grows]
        head = self._grown_head if not self._before else self._head(request, lists)
        if kept < self._grown_done or head != self._grown_head:  # rewritten: start over
            self._grown_sha, self._grown_done, self._grown_head = hashlib.sha256(head), 0, head
        done = self._grown_done
        if len(grown) > done:
            tail = ",".join(f'"{d}"' for d in grown[done:]).encode("ascii")
            self._grown_sha.update(b"," + tail if done else tail)
            self._grown_done = len(grown)
        sha = self._grown_sha.copy()
        parts = [b"]"]
        for key, how, name in self._after:
            parts.append(key)
            if how == _VERSION:
                parts.append(self._version_bytes)
            elif how == _SCALAR:
                parts.append(self._canonical(name, request[name], canon))
            else:
                parts.append(self._canonical(name, lists[name], _hex_list))
        parts.append(b"}")
        sha.update(b"".join(parts))
        return sha.hexdigest()
