"""The one way a request comes into being, and the receipt digests over it.

``build_request(state)`` is a pure projection of committed state: it selects the
documented keys and puts them in order; it composes nothing. The agent sends its
result to the provider, the receipt hashes it piece by piece, and the verifier
applies the same function to the state folded from the log. Projection v1:

=============  ==================================  ===========
request field  state key                           default
=============  ==================================  ===========
``model``      ``model``                           (required)
``params``     ``params``                          ``{}``
``system``     ``system_pieces``                   ``[]``
``messages``   ``history``                         ``[]``
``tools``      ``tool_schemas``                    ``[]``
=============  ==================================  ===========
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from agentfootprint.verify.canonical import canon, canon_object
from agentfootprint.verify.hashing import hexdigest

__all__ = [
    "PIECE_KINDS",
    "PROJECTION",
    "REQUEST_VERSION",
    "RequestDigests",
    "RequestHasher",
    "build_request",
    "request_digest",
]

REQUEST_VERSION: Final = 1
#: request field -> (state key, piece tag); the order is the served order of pieces.
PROJECTION: Final = {
    "system": ("system_pieces", "piece/system"),
    "messages": ("history", "piece/message"),
    "tools": ("tool_schemas", "piece/tool"),
}
PIECE_KINDS: Final = tuple(PROJECTION)


def build_request(state: Mapping[str, Any]) -> dict[str, Any]:
    """Project committed state onto the request the model is served (projection v1)."""
    if "model" not in state:
        raise KeyError("state has no 'model': the seed stage writes it before any call")
    return {
        "model": state["model"],
        "params": state.get("params", {}),
        "system": state.get("system_pieces", []),
        "messages": state.get("history", []),
        "tools": state.get("tool_schemas", []),
    }


def request_digest(model: str, params: Any, pieces: Mapping[str, Sequence[str]]) -> str:
    """``H(request, canon({v, model, params, system, messages, tools}))`` over piece digests."""
    members = {
        "v": canon(REQUEST_VERSION),
        "model": canon(model),
        "params": canon(params),
        **{kind: canon(list(pieces[kind])) for kind in PIECE_KINDS},
    }
    return hexdigest("request", canon_object(members))


@dataclass(frozen=True, kw_only=True, slots=True)
class RequestDigests:
    """Every digest of one served request: what a receipt asserts."""

    model: str
    params: Any
    request: str
    system: tuple[str, ...]
    messages: tuple[str, ...]
    tools: tuple[str, ...]

    def pieces(self, kind: str) -> tuple[str, ...]:
        return tuple(getattr(self, kind))


class RequestHasher:
    """Hashes requests piece by piece, each piece once across a run's calls.

    Committed state is never mutated in place, so a piece object found at the
    same position as in the previous call is the same content: its digest is
    reused instead of canonicalising and hashing it again. The hasher keeps
    references to the pieces it has seen, so object identity stays meaningful.
    """

    def __init__(self) -> None:
        self._seen: dict[str, list[tuple[Any, str]]] = {kind: [] for kind in PIECE_KINDS}

    def digests(self, request: Mapping[str, Any]) -> RequestDigests:
        lists: dict[str, tuple[str, ...]] = {}
        for kind, (_key, tag) in PROJECTION.items():
            previous = self._seen[kind]
            current: list[tuple[Any, str]] = []
            for index, piece in enumerate(request[kind]):
                if index < len(previous) and previous[index][0] is piece:
                    current.append(previous[index])
                else:
                    current.append((piece, hexdigest(tag, canon(piece))))
            self._seen[kind] = current
            lists[kind] = tuple(d for _, d in current)
        return RequestDigests(
            model=request["model"],
            params=request["params"],
            request=request_digest(request["model"], request["params"], lists),
            system=lists["system"],
            messages=lists["messages"],
            tools=lists["tools"],
        )
