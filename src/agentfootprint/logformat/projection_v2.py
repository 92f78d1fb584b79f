"""Request projection v2: v1 plus two optional state keys that edit what is served.

``served_messages`` serves the message list as segments (slices of ``history`` by
reference, and single messages that are not in the history); ``served_tools`` serves a
subset of ``tool_schemas`` by name. The request shape is v1's (request shape 1), so the
request digests of v1 and v2 carry the same ``v``. docs/log-format.md section 8.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final

from agentfootprint.logformat.projection_spec import Edit, Projection, ProjectionError, json_kind
from agentfootprint.logformat.projection_v1 import FIELDS
from agentfootprint.logformat.shared_lists import SharedList

__all__ = ["EDITS", "PROJECTION_V2", "segmented"]


def segmented(
    key: str, source: str, member: str, single: str
) -> Callable[[Sequence[Any], Any], list[Any]]:
    """The edit of state key ``key``: the list read from state key ``source`` served as
    segments, slices of it by reference (``{member: [start, end]}``, end null: to its end) and
    single items that are not in it (``{single: {...}}``), concatenated in order, the slices
    increasing and not overlapping (``served_messages`` here; projection 4's
    ``served_system``)."""

    def serve(items: Sequence[Any], segments: Any) -> list[Any]:
        """``items`` as the segments serve them (the very objects, so the hasher reuses
        their digests); :class:`ProjectionError` naming ``key`` otherwise."""

        def refuse(reason: str) -> ProjectionError:
            return ProjectionError(
                key,
                f"state key {key} {reason}; it must be an array of segments "
                f'{{"{member}": [start, end]}} (end null: to the end of {source}) or '
                f'{{"{single}": {{...}}}}, with {member} slices in increasing, '
                "non-overlapping order",
            )

        if not isinstance(segments, list | tuple | SharedList):
            raise refuse(f"is {json_kind(segments)}, not an array")
        served: list[Any] = []
        floor = 0  # a slice starts at or after the end of the one before it
        for i, segment in enumerate(segments):
            if not isinstance(segment, dict) or len(segment) != 1:
                shape = (
                    f"an object with {len(segment)} members"
                    if isinstance(segment, dict)
                    else json_kind(segment)
                )
                raise refuse(f"[{i}] is {shape}, not an object with one member")
            ((name, value),) = segment.items()
            if name == member:
                try:
                    start, end = _slice(value, len(items), member, source)
                except ValueError as exc:
                    raise refuse(f"[{i}] {exc}") from None
                if start < floor:
                    raise refuse(
                        f"[{i}] slices {source} from {start}, before the end {floor} of the "
                        "slice before it (slices overlap or go back)"
                    )
                served.extend(items[start:end])
                floor = end
            elif name == single:
                if not isinstance(value, dict):
                    raise refuse(f"[{i}] {single} is {json_kind(value)}, not an object")
                served.append(value)
            else:
                raise refuse(f"[{i}] has the unknown member {name!r}")
        return served

    return serve


def _slice(value: Any, length: int, member: str, source: str) -> tuple[int, int]:
    """``[start, end]`` of a slice segment (``end`` null: ``length``); ValueError says why not."""
    if not isinstance(value, list | tuple) or len(value) != 2:
        shape = json_kind(value)
        if isinstance(value, list | tuple):
            shape = f"an array of {len(value)} items"
        raise ValueError(f"{member} is {shape}, not an array [start, end]")
    start, end = value
    if type(start) is not int:
        raise ValueError(f"{member} start is {json_kind(start)}, not an integer")
    if end is None:
        end = length
    elif type(end) is not int:
        raise ValueError(f"{member} end is {json_kind(end)}, not an integer or null")
    if not 0 <= start <= end <= length:
        raise ValueError(
            f"{member} slice [{start}, {end}] is out of range "
            f"(0 <= start <= end <= {length}, the length of {source})"
        )
    return start, end


_served_messages = segmented("served_messages", "history", "history", "message")


def _served_tools(schemas: Sequence[Any], names: Any) -> list[Any]:
    """The schemas ``served_tools`` names, in the order of the names (the very objects)."""

    def refuse(reason: str) -> ProjectionError:
        return ProjectionError(
            "served_tools",
            f"state key served_tools {reason}; it must be an array of distinct tool names, "
            "each the name of exactly one schema of tool_schemas ([] serves no tool)",
        )

    if not isinstance(names, list | tuple | SharedList):
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


#: the edits of v2 (and of every later projection)
EDITS: Final = (
    Edit(field="messages", key="served_messages", apply=_served_messages),
    Edit(field="tools", key="served_tools", apply=_served_tools),
)
#: v2: v1 plus ``served_messages`` and ``served_tools`` (docs/log-format.md section 8).
PROJECTION_V2: Final = Projection(
    version=2, request_version=1, fields=FIELDS, grows="messages", edits=EDITS
)
