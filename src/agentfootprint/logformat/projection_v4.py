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

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Final

from agentfootprint.logformat.projection_spec import Edit, Projection, ProjectionError, json_kind
from agentfootprint.logformat.projection_v2 import EDITS, segmented
from agentfootprint.logformat.projection_v3 import PROJECTION_V3
from agentfootprint.logformat.shared_lists import SharedList

__all__ = ["PROJECTION_V4", "served_results", "served_system"]


#: ``system_pieces`` as ``served_system`` serves it: projection 2's segments over the pieces
served_system = segmented("served_system", "system_pieces", "system", "piece")


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


_MADE_LOCK: Final = threading.Lock()  # (verifiers and runs share it across threads)


def _replaced(message: dict[str, Any], content: str) -> dict[str, Any]:
    key = (id(message), content)
    with _MADE_LOCK:
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
