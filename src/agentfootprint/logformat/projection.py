"""Request projections: what ``build_request`` selects from committed state, one per version.

A projection is a pure function of committed state; it selects and orders, it composes
nothing. Each run records the version it was served under in ``run.open``
(``projection.version``) and everything that rebuilds a request (the runtime, the verifier,
the read side) dispatches on it: ``if version == 1 ... elif version == 2 ... else`` refuse,
so a log keeps verifying under the projection it recorded, whatever is added later.

Projection v1 serves five state keys; v2 serves the same five request fields and adds two
optional state keys that edit what is served without copying it: ``served_messages`` (the
message list as segments: slices of ``history`` by reference, and single messages that are
not in the history) and ``served_tools`` (a subset of ``tool_schemas`` by name). Both have
the same request shape, so their request digests carry the same ``v`` (``request_version``).
v3 is v2 plus one request field, ``prompt_cache`` (prompt-cache markers read from the
optional state key ``cache_markers``: indices into the served lists), so request shape 2;
its name sorts after ``messages``, which keeps the growing list first in the request
digest (the hasher's SHA-256 state extends call to call, markers moving or not).
docs/log-format.md section 8 is the normative text.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from agentfootprint.errors import AgentFootprintError, UsageError
from agentfootprint.logformat.calls import LOG_FORMAT_V1

__all__ = [
    "CACHE_MARKERS_MAX",
    "PROJECTIONS",
    "PROJECTION_V1",
    "PROJECTION_V2",
    "PROJECTION_V3",
    "Edit",
    "Field",
    "Projection",
    "ProjectionError",
    "build_request",
    "cache_markers",
    "json_kind",
    "projection",
    "recorded_projection",
]


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
    if isinstance(value, list | tuple):
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
            described["edits"] = {e.field: e.key for e in self.edits}
        scalars = {f.name: f.key for f in self.fields if f.tag is None and f.name != f.key}
        if scalars:
            described["fields"] = scalars
        return described


# -- projection v2's edits ------------------------------------------------------------------


def _served_messages(history: Sequence[Any], segments: Any) -> list[Any]:
    """``history`` as ``served_messages`` serves it: slices of it (the very objects, so the
    hasher reuses their digests) and single messages, concatenated in order."""

    def refuse(reason: str) -> ProjectionError:
        return ProjectionError(
            "served_messages",
            f"state key served_messages {reason}; it must be an array of segments "
            '{"history": [start, end]} (end null: to the end of history) or '
            '{"message": {...}}, with history slices in increasing, non-overlapping order',
        )

    if not isinstance(segments, list | tuple):
        raise refuse(f"is {json_kind(segments)}, not an array")
    served: list[Any] = []
    floor = 0  # a history slice starts at or after the end of the one before it
    for i, segment in enumerate(segments):
        if not isinstance(segment, dict) or len(segment) != 1:
            shape = (
                f"an object with {len(segment)} members"
                if isinstance(segment, dict)
                else json_kind(segment)
            )
            raise refuse(f"[{i}] is {shape}, not an object with one member")
        ((member, value),) = segment.items()
        if member == "history":
            try:
                start, end = _history_slice(value, len(history))
            except ValueError as exc:
                raise refuse(f"[{i}] {exc}") from None
            if start < floor:
                raise refuse(
                    f"[{i}] slices history from {start}, before the end {floor} of the "
                    "slice before it (slices overlap or go back)"
                )
            served.extend(history[start:end])
            floor = end
        elif member == "message":
            if not isinstance(value, dict):
                raise refuse(f"[{i}] message is {json_kind(value)}, not an object")
            served.append(value)
        else:
            raise refuse(f"[{i}] has the unknown member {member!r}")
    return served


def _history_slice(value: Any, length: int) -> tuple[int, int]:
    """``[start, end]`` of a history segment (``end`` null: ``length``); ValueError says why not."""
    if not isinstance(value, list | tuple) or len(value) != 2:
        shape = json_kind(value)
        if isinstance(value, list | tuple):
            shape = f"an array of {len(value)} items"
        raise ValueError(f"history is {shape}, not an array [start, end]")
    start, end = value
    if type(start) is not int:
        raise ValueError(f"history start is {json_kind(start)}, not an integer")
    if end is None:
        end = length
    elif type(end) is not int:
        raise ValueError(f"history end is {json_kind(end)}, not an integer or null")
    if not 0 <= start <= end <= length:
        raise ValueError(
            f"history slice [{start}, {end}] is out of range "
            f"(0 <= start <= end <= {length}, the length of history)"
        )
    return start, end


def _served_tools(schemas: Sequence[Any], names: Any) -> list[Any]:
    """The schemas ``served_tools`` names, in the order of the names (the very objects)."""

    def refuse(reason: str) -> ProjectionError:
        return ProjectionError(
            "served_tools",
            f"state key served_tools {reason}; it must be an array of distinct tool names, "
            "each the name of exactly one schema of tool_schemas ([] serves no tool)",
        )

    if not isinstance(names, list | tuple):
        raise refuse(f"is {json_kind(names)}, not an array")
    by_name: dict[str, Any] = {}
    for i, schema in enumerate(schemas):
        name = schema.get("name") if isinstance(schema, dict) else None
        if not isinstance(name, str):
            raise refuse(f"cannot select from tool_schemas: tool_schemas[{i}] has no string name")
        if name in by_name:
            raise refuse(f"cannot select from tool_schemas: two schemas are named {name!r}")
        by_name[name] = schema
    served: list[Any] = []
    seen: set[str] = set()
    for i, name in enumerate(names):
        if not isinstance(name, str):
            raise refuse(f"[{i}] is {json_kind(name)}, not a tool name")
        if name in seen:
            raise refuse(f"names {name!r} twice")
        if name not in by_name:
            raise refuse(f"[{i}] names {name!r}, which no schema of tool_schemas has")
        seen.add(name)
        served.append(by_name[name])
    return served


# -- projection v3's cache markers ----------------------------------------------------------

#: the most markers one request may carry (Anthropic's limit on cache breakpoints)
CACHE_MARKERS_MAX: Final = 4
#: the marker lists, in the order the refusals check them
_MARKED: Final = ("system", "tools", "messages")


def _no_markers() -> dict[str, list[int]]:
    return {"messages": [], "system": [], "tools": []}


def cache_markers(markers: Any, request: Mapping[str, Any]) -> Any:
    """``cache_markers`` as served (the very object): checked against the served lists.

    An object with exactly the members ``system``, ``tools`` and ``messages``, each an
    array of distinct integers in increasing order, each an index into that served list,
    at most :data:`CACHE_MARKERS_MAX` in all; anything else raises :class:`ProjectionError`
    naming ``cache_markers``."""

    def refuse(reason: str) -> ProjectionError:
        return ProjectionError(
            "cache_markers",
            f"state key cache_markers {reason}; it must be an object "
            '{"system": [...], "tools": [...], "messages": [...]} of increasing, distinct '
            f"indices into the served lists, at most {CACHE_MARKERS_MAX} in all",
        )

    if not isinstance(markers, dict):
        raise refuse(f"is {json_kind(markers)}, not an object")
    unknown = sorted(set(markers) - set(_MARKED))
    if unknown:
        raise refuse(f"has the unknown member {unknown[0]!r}")
    total = 0
    for name in _MARKED:
        if name not in markers:
            raise refuse(f"has no {name} member")
        indices = markers[name]
        if not isinstance(indices, list | tuple):
            raise refuse(f"{name} is {json_kind(indices)}, not an array")
        served = len(request[name])
        previous = -1
        for i, index in enumerate(indices):
            if type(index) is not int:
                raise refuse(f"{name}[{i}] is {json_kind(index)}, not an integer")
            if not 0 <= index < served:
                raise refuse(
                    f"{name}[{i}] marks {index}, out of range (0 <= index < {served}, "
                    f"the {name} served)"
                )
            if index <= previous:
                raise refuse(f"{name}[{i}] marks {index} after {previous} (not increasing)")
            previous = index
        total += len(indices)
    if total > CACHE_MARKERS_MAX:
        raise refuse(f"places {total} markers, more than {CACHE_MARKERS_MAX}")
    return markers


# -- the registry ---------------------------------------------------------------------------

_ARRAY: Final = (list, tuple)
_FIELDS_V1: Final = (
    Field(name="model", key="model", tag=None, kind=str, kind_name="a string", default=None),
    Field(name="params", key="params", tag=None, kind=dict, kind_name="an object", default=dict),
    Field(
        name="system",
        key="system_pieces",
        tag="piece/system",
        kind=_ARRAY,
        kind_name="an array",
        default=list,
    ),
    Field(
        name="messages",
        key="history",
        tag="piece/message",
        kind=_ARRAY,
        kind_name="an array",
        default=list,
    ),
    Field(
        name="tools",
        key="tool_schemas",
        tag="piece/tool",
        kind=_ARRAY,
        kind_name="an array",
        default=list,
    ),
)

#: v1: five state keys, served as they are.
PROJECTION_V1: Final = Projection(version=1, request_version=1, fields=_FIELDS_V1, grows="messages")
#: v2: v1 plus ``served_messages`` and ``served_tools`` (docs/log-format.md section 8).
PROJECTION_V2: Final = Projection(
    version=2,
    request_version=1,
    fields=_FIELDS_V1,
    grows="messages",
    edits=(
        Edit(field="messages", key="served_messages", apply=_served_messages),
        Edit(field="tools", key="served_tools", apply=_served_tools),
    ),
)
#: v3: v2 plus the request field ``prompt_cache`` from ``cache_markers`` (request shape 2).
PROJECTION_V3: Final = Projection(
    version=3,
    request_version=2,
    fields=(
        *_FIELDS_V1,
        Field(
            name="prompt_cache",
            key="cache_markers",
            tag=None,
            kind=object,
            kind_name="an object",
            default=_no_markers,
            check=cache_markers,
        ),
    ),
    grows="messages",
    edits=PROJECTION_V2.edits,
)
PROJECTIONS: Final[Mapping[int, Projection]] = {
    1: PROJECTION_V1,
    2: PROJECTION_V2,
    3: PROJECTION_V3,
}


def projection(version: Any) -> Projection:
    """The projection of ``version``; :class:`ProjectionError` for one this code does not know."""
    if type(version) is not int:
        raise ProjectionError(
            "projection", f"projection version is {json_kind(version)}, not an integer"
        )
    if version == 1:
        return PROJECTION_V1
    elif version == 2:
        return PROJECTION_V2
    elif version == 3:
        return PROJECTION_V3
    else:
        raise ProjectionError(
            "projection",
            f"unknown projection version {version} (this version of agentfootprint knows "
            f"{', '.join(map(str, PROJECTIONS))}); verify the log with a newer one",
        )


_ABSENT: Final = object()


def recorded_projection(opened: Mapping[str, Any]) -> Projection:
    """The projection a ``run.open`` body records in its ``projection`` member.

    Format v1 did not require the member (and v1 verifiers applied projection 1 whatever it
    said), so in a v1 log its absence reads as projection 1; from format v2 on it is
    required. Anything else that is not ``{"version": <a known integer>, ...}`` raises
    :class:`ProjectionError` (key ``"projection"``)."""
    member = opened.get("projection", _ABSENT)
    if member is _ABSENT:
        if opened.get("format") == LOG_FORMAT_V1:
            return PROJECTION_V1
        raise ProjectionError(
            "projection",
            "run.open has no projection member (from log format v2 on it names the "
            "projection version the run was served under)",
        )
    if not isinstance(member, dict):
        raise ProjectionError(
            "projection", f"run.open projection is {json_kind(member)}, not an object"
        )
    if "version" not in member:
        raise ProjectionError("projection", "run.open projection has no version member")
    try:
        return projection(member["version"])
    except ProjectionError as exc:
        raise ProjectionError("projection", f"run.open {exc}") from None


def build_request(state: Mapping[str, Any], version: int = 1) -> dict[str, Any]:
    """Project committed state onto the request the model is served, under projection
    ``version`` (1 unless the run recorded another).

    Raises :class:`ProjectionError` when there is no ``model``, a projected key holds the
    wrong JSON type, or an edit does not apply: such a state is served nothing, so it
    attests nothing. An unknown ``version`` raises it too (key ``"projection"``).
    """
    return projection(version).build(state)
