"""Request projection v3: v2 plus the request field ``prompt_cache`` (request shape 2).

``prompt_cache`` holds prompt-cache markers read from the optional state key
``cache_markers``: indices into the served lists, checked once every edit is applied. Its
name sorts after ``messages``, which keeps the growing list first in the request digest (the
hasher's SHA-256 state extends call to call, markers moving or not). docs/log-format.md
section 8.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from agentfootprint.logformat.projection_spec import Field, Projection, ProjectionError, json_kind
from agentfootprint.logformat.projection_v1 import FIELDS
from agentfootprint.logformat.projection_v2 import EDITS

__all__ = ["CACHE_MARKERS_MAX", "PROJECTION_V3", "cache_markers"]

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


#: v3: v2 plus the request field ``prompt_cache`` from ``cache_markers`` (request shape 2).
PROJECTION_V3: Final = Projection(
    version=3,
    request_version=2,
    fields=(
        *FIELDS,
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
    edits=EDITS,
)
