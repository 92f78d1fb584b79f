"""Request projections: what ``build_request`` selects from committed state, and the one place
that chooses the version.

A projection is a pure function of committed state; it selects and orders, it composes
nothing. Each run records the version it was served under in ``run.open``
(``projection.version``) and everything that rebuilds a request (the runtime, the verifier,
the read side) gets it from :func:`projection` or :func:`recorded_projection`, the only
code that branches on the number: ``if version == 1 ... elif ... else`` refuse, so a log
keeps verifying under the projection it recorded, whatever is added later. Each version is
one module: :mod:`~agentfootprint.logformat.projection_v1` (five state keys),
:mod:`~agentfootprint.logformat.projection_v2` (edits: ``served_messages``,
``served_tools``), :mod:`~agentfootprint.logformat.projection_v3` (``prompt_cache``, request
shape 2); what they share is :mod:`~agentfootprint.logformat.projection_spec`.
docs/log-format.md section 8 is the normative text.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from agentfootprint.logformat.log_formats import known_log_format
from agentfootprint.logformat.projection_spec import (
    Edit,
    Field,
    Projection,
    ProjectionError,
    json_kind,
)
from agentfootprint.logformat.projection_v1 import PROJECTION_V1
from agentfootprint.logformat.projection_v2 import PROJECTION_V2
from agentfootprint.logformat.projection_v3 import CACHE_MARKERS_MAX, PROJECTION_V3, cache_markers
from agentfootprint.logformat.projection_v4 import PROJECTION_V4

__all__ = [
    "CACHE_MARKERS_MAX",
    "PROJECTIONS",
    "PROJECTION_V1",
    "PROJECTION_V2",
    "PROJECTION_V3",
    "PROJECTION_V4",
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

#: every projection this version serves and verifies, by version
PROJECTIONS: Final[Mapping[int, Projection]] = {
    1: PROJECTION_V1,
    2: PROJECTION_V2,
    3: PROJECTION_V3,
    4: PROJECTION_V4,
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
    elif version == 4:
        return PROJECTION_V4
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
        recorded_in = known_log_format(opened.get("format"))
        if recorded_in is not None and recorded_in.implied_projection is not None:
            return projection(recorded_in.implied_projection)
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
