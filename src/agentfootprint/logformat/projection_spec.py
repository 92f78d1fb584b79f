"""What a request projection is: the fields it serves, the edits it applies, its refusals.

Each projection version is one instance of :class:`Projection`, defined in its own module
(:mod:`~agentfootprint.logformat.projection_v1`, ``_v2``, ``_v3``) and chosen in one place
(:func:`agentfootprint.logformat.projection.projection`). Everything that hashes or builds a
request (``RequestHasher``, the verifier, the read side) reads a version through this shape
only, never by its number. docs/log-format.md section 8 is the normative text.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentfootprint.errors import AgentFootprintError, UsageError
from agentfootprint.logformat.shared_lists import SharedList

__all__ = ["Edit", "Field", "Projection", "ProjectionError", "json_kind"]


class ProjectionError(AgentFootprintError, ValueError):
    """The state projects onto no request (``model`` absent, a projected key holding the wrong
    JSON type, an edit that does not apply), or a projection version nobody knows. ``key``
    names the state key (``"projection"`` for a version)."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(reason)
        self.key = key


def json_kind(value: Any) -> str:
    """The JSON type of a parsed value, with its article: what messages call it."""
    if isinstance(value, bool):
        return "a boolean"
    if value is None:
        return "null"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list | tuple | SharedList):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, int | float):
        return "a number"
    return f"a {type(value).__name__} (not JSON)"


@dataclass(frozen=True, kw_only=True, slots=True)
class Field:
    """One member of the served request: read from state key ``key``.

    ``tag`` is the digest tag of its pieces (the member is a list hashed piece by piece), or
    None for a scalar member hashed whole. ``default`` makes the value when the key is absent
    (None: the key is required). ``check``, for a field whose value depends on the others
    as served (cache markers index the served lists): ``check(value, request)`` returns the
    served value or raises :class:`ProjectionError`, once every edit is applied."""

    name: str
    key: str
    tag: str | None
    kind: type | tuple[type, ...]
    kind_name: str
    default: Callable[[], Any] | None
    check: Callable[[Any, Mapping[str, Any]], Any] | None = None

    def project(self, state: Mapping[str, Any]) -> Any:
        if self.key in state:
            value = state[self.key]
        elif self.default is None:
            raise ProjectionError(
                self.key, f"state has no {self.key!r}: the seed stage writes it before any call"
            )
        else:
            value = self.default()
        if not isinstance(value, self.kind):
            raise ProjectionError(
                self.key, f"state key {self.key} is {json_kind(value)}, not {self.kind_name}"
            )
        return value


@dataclass(frozen=True, kw_only=True, slots=True)
class Edit:
    """An optional state key that changes what one piece field serves (projection v2)."""

    field: str  #: the request field it edits
    key: str  #: the state key holding the edit; absent: the field is served unedited
    apply: Callable[[Sequence[Any], Any], list[Any]]  #: (the field's list, the edit) -> served


@dataclass(frozen=True, kw_only=True, slots=True)
class Projection:
    """One projection version: its request fields, their state keys, and its edits."""

    version: int
    #: the request *shape*: the ``v`` hashed in the request digest
    request_version: int
    fields: tuple[Field, ...]
    #: the piece field whose digest list extends call to call (the hasher keeps its state)
    grows: str
    edits: tuple[Edit, ...] = ()
    pieces: tuple[Field, ...] = field(init=False)
    #: the fields checked against the served request after the edits: (name, check)
    checks: tuple[tuple[str, Callable[[Any, Mapping[str, Any]], Any]], ...] = field(init=False)
    #: the request digest's members in canonical (code point) order, ``v`` among them
    member_order: tuple[str, ...] = field(init=False)
    #: the piece fields' names, in served order (a receipt's digest lists)
    piece_kinds: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        names = [f.name for f in self.fields]
        if "v" in names or len(set(names)) != len(names):
            raise ValueError(f"projection {self.version}: field names must be unique, not 'v'")
        pieces = tuple(f for f in self.fields if f.tag is not None)
        if self.grows not in [f.name for f in pieces]:
            raise ValueError(f"projection {self.version}: {self.grows!r} is not a piece field")
        object.__setattr__(self, "pieces", pieces)
        checks = tuple((f.name, f.check) for f in self.fields if f.check is not None)
        object.__setattr__(self, "checks", checks)
        object.__setattr__(self, "member_order", tuple(sorted([*names, "v"])))
        object.__setattr__(self, "piece_kinds", tuple(f.name for f in pieces))

    @property
    def edited(self) -> frozenset[str]:
        """The fields an edit can splice: their served list is not always the last one plus
        appends (the hasher compares them object by object)."""
        return frozenset(e.field for e in self.edits)

    def build(self, state: Mapping[str, Any]) -> dict[str, Any]:
        """The request served from ``state``; :class:`ProjectionError` when there is none."""
        if type(state) is not dict and not isinstance(state, Mapping):  # (an ABC test is slow)
            raise UsageError(
                f"state must be a mapping of state keys, not {type(state).__name__}",
                option="state",
            )
        request = {f.name: f.project(state) for f in self.fields}
        for edit in self.edits:
            if edit.key in state:
                request[edit.field] = edit.apply(request[edit.field], state[edit.key])
        for name, check in self.checks:
            request[name] = check(request[name], request)
        return request

    def describe(self) -> dict[str, Any]:
        """What ``run.open`` records as its ``projection`` member."""
        described: dict[str, Any] = {
            "version": self.version,
            "keys": {f.name: f.key for f in self.pieces},
        }
        if self.edits:
            # a field edited by one key names it; by several (v4's messages), all, in order
            keys: dict[str, list[str]] = {}
            for e in self.edits:
                keys.setdefault(e.field, []).append(e.key)
            described["edits"] = {f: k[0] if len(k) == 1 else k for f, k in keys.items()}
        scalars = {f.name: f.key for f in self.fields if f.tag is None and f.name != f.key}
        if scalars:
            described["fields"] = scalars
        return described
