"""Request projection v4: v3 plus the optional state keys ``served_system`` and
``served_results``.

``served_system`` serves the system list as segments, as ``served_messages`` serves the
messages: slices of ``system_pieces`` by reference (``{"system": [start, end]}``) and single
pieces that are not in it (``{"piece": {...}}``), concatenated in order. A feature serves a
piece for one request only this way (the findings ledger's piece), committed state first, so
the receipt covers it and the verifier rebuilds it.

``served_results`` replaces, on the wire only, the ``content`` of served tool results:
``[{"tool_call_id": id, "content": text}, ...]``, each naming exactly one served message of
role ``tool`` (after ``served_messages`` chose them); the history is never edited (the
findings ledger's tickets for results the model judged noise or ruled out). The request
shape is v3's (request shape 2). docs/log-format.md section 8.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Final

from agentfootprint.logformat.projection_spec import Edit, Projection, ProjectionError, json_kind
from agentfootprint.logformat.projection_v2 import EDITS
from agentfootprint.logformat.projection_v3 import PROJECTION_V3
from agentfootprint.logformat.shared_lists import SharedList

__all__ = ["PROJECTION_V4", "served_results", "served_system"]


def served_system(pieces: Sequence[Any], segments: Any) -> list[Any]:
    """``system_pieces`` as ``served_system`` serves it: slices of it (the very objects) and
    single pieces, concatenated in order; :class:`ProjectionError` naming the key when the
    segments are not of that shape."""

    def refuse(reason: str) -> ProjectionError:
        return ProjectionError(
            "served_system",
            f"state key served_system {reason}; it must be an array of segments "
            '{"system": [start, end]} (end null: to the end of system_pieces) or '
            '{"piece": {...}}, with system slices in increasing, non-overlapping order',
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
        ((member, value),) = segment.items()
        if member == "system":
            start, end = _slice(value, len(pieces), refuse, i)
            if start < floor:
                raise refuse(
                    f"[{i}] slices system_pieces from {start}, before the end {floor} of the "
                    "slice before it (slices overlap or go back)"
                )
            served.extend(pieces[start:end])
            floor = end
        elif member == "piece":
            if not isinstance(value, dict):
                raise refuse(f"[{i}] piece is {json_kind(value)}, not an object")
            served.append(value)
        else:
            raise refuse(f"[{i}] has the unknown member {member!r}")
    return served


def _slice(value: Any, length: int, refuse: Any, i: int) -> tuple[int, int]:
    if not isinstance(value, list | tuple) or len(value) != 2:
        shape = json_kind(value)
        if isinstance(value, list | tuple):
            shape = f"an array of {len(value)} items"
        raise refuse(f"[{i}] system is {shape}, not an array [start, end]")
    start, end = value
    if type(start) is not int:
        raise refuse(f"[{i}] system start is {json_kind(start)}, not an integer")
    if end is None:
        end = length
    elif type(end) is not int:
        raise refuse(f"[{i}] system end is {json_kind(end)}, not an integer or null")
    if not 0 <= start <= end <= length:
        raise refuse(
            f"[{i}] system slice [{start}, {end}] is out of range "
            f"(0 <= start <= end <= {length}, the length of system_pieces)"
        )
    return start, end


def served_results(messages: Sequence[Any], replacements: Any) -> list[Any]:
    """The served messages with the ``content`` of the tool results ``served_results`` names
    replaced (new message objects; the others the very objects); :class:`ProjectionError`
    naming the key when a replacement is malformed or names no served tool result, or one
    named twice."""

    def refuse(reason: str) -> ProjectionError:
        return ProjectionError(
            "served_results",
            f"state key served_results {reason}; it must be an array of objects "
            '{"tool_call_id": id, "content": text}, each naming exactly one served message of '
            "role tool, each id once",
        )

    if not isinstance(replacements, list | tuple | SharedList):
        raise refuse(f"is {json_kind(replacements)}, not an array")
    by_id: dict[str, str] = {}
    for i, replacement in enumerate(replacements):
        if not isinstance(replacement, dict) or replacement.keys() != {"tool_call_id", "content"}:
            raise refuse(f"[{i}] is not an object with exactly tool_call_id and content")
        call_id, content = replacement["tool_call_id"], replacement["content"]
        if not isinstance(call_id, str) or not isinstance(content, str):
            raise refuse(f"[{i}] has a tool_call_id or content that is not a string")
        if call_id in by_id:
            raise refuse(f"[{i}] names {call_id!r} a second time")
        by_id[call_id] = content
    served: list[Any] = []
    found: dict[str, int] = {}
    for message in messages:
        call_id = message.get("tool_call_id") if type(message) is dict else None
        if type(call_id) is str and call_id in by_id and message.get("role") == "tool":
            found[call_id] = found.get(call_id, 0) + 1
            message = _replaced(message, by_id[call_id])
        served.append(message)
    for i, call_id in enumerate(by_id):
        if found.get(call_id) != 1:
            many = found.get(call_id, 0)
            raise refuse(
                f"[{i}] names {call_id!r}, which {'no' if not many else f'{many}'} served "
                f"tool result{'' if many == 1 else 's'} carr{'ies' if many == 1 else 'y'}"
            )
    return served


#: the replaced messages made lately, by the message and the content: the same message
#: replaced by the same content is the same object at every build, so the request hasher
#: keeps its digest (by identity) instead of hashing every ticket again at every call
_MADE: OrderedDict[tuple[int, str], tuple[Any, dict[str, Any]]] = OrderedDict()
_MADE_MAX: Final = 4096


def _replaced(message: dict[str, Any], content: str) -> dict[str, Any]:
    key = (id(message), content)
    made = _MADE.get(key)
    if made is not None and made[0] is message:  # (held: its id cannot be another's)
        _MADE.move_to_end(key)
        return made[1]
    replaced = {**message, "content": content}
    _MADE[key] = (message, replaced)
    if len(_MADE) > _MADE_MAX:
        _MADE.popitem(last=False)
    return replaced


#: v4: v3 plus ``served_system`` and ``served_results`` (docs/log-format.md section 8),
#: request shape 2. The edits apply in this order: served_messages, served_tools,
#: served_results (on the messages served_messages chose), served_system.
PROJECTION_V4: Final = Projection(
    version=4,
    request_version=PROJECTION_V3.request_version,
    fields=PROJECTION_V3.fields,
    grows="messages",
    edits=(
        *EDITS,
        Edit(field="messages", key="served_results", apply=served_results),
        Edit(field="system", key="served_system", apply=served_system),
    ),
)
