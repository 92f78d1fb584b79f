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

A state whose projected keys have the wrong JSON type (``model`` not a string,
``params`` not an object, a piece list not an array) projects onto no request:
:class:`ProjectionError`, never a request built from whatever the value happens to be
(a string would otherwise be served character by character).
"""

from __future__ import annotations

import hashlib
import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import orjson

from agentfootprint.errors import AgentFootprintError, UsageError
from agentfootprint.verify.canonical import canon, canon_object
from agentfootprint.verify.hashing import domain_prefix, hexdigest

__all__ = [
    "PIECE_KINDS",
    "PROJECTION",
    "REQUEST_VERSION",
    "ProjectionError",
    "RequestDigests",
    "RequestHasher",
    "build_request",
    "json_kind",
    "piece_mismatch",
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


class ProjectionError(AgentFootprintError, ValueError):
    """The state projects onto no request: ``model`` absent, or a projected key holding
    the wrong JSON type. ``key`` names the state key."""

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


def _projected(
    state: Mapping[str, Any], key: str, kind: type | tuple[type, ...], default: Any, name: str
) -> Any:
    value = state.get(key, default)
    if not isinstance(value, kind):
        raise ProjectionError(key, f"state key {key} is {json_kind(value)}, not {name}")
    return value


def build_request(state: Mapping[str, Any]) -> dict[str, Any]:
    """Project committed state onto the request the model is served (projection v1).

    Raises :class:`ProjectionError` when there is no ``model`` or a projected key holds
    the wrong JSON type: such a state is served nothing, so it attests nothing.
    """
    if not isinstance(state, Mapping):
        raise UsageError(
            f"state must be a mapping of state keys, not {type(state).__name__}",
            option="state",
        )
    if "model" not in state:
        raise ProjectionError(
            "model", "state has no 'model': the seed stage writes it before any call"
        )
    return {
        "model": _projected(state, "model", str, None, "a string"),
        "params": _projected(state, "params", dict, {}, "an object"),
        "system": _projected(state, "system_pieces", (list, tuple), [], "an array"),
        "messages": _projected(state, "history", (list, tuple), [], "an array"),
        "tools": _projected(state, "tool_schemas", (list, tuple), [], "an array"),
    }


def piece_mismatch(call: int, kind: str, claimed: list[str], actual: list[str]) -> str:
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


def request_digest(model: str, params: Any, pieces: Mapping[str, Sequence[str]]) -> str:
    """``H(request, canon({v, model, params, system, messages, tools}))`` over piece digests.

    The reference definition; :class:`RequestHasher` computes the same digest incrementally.
    """
    members = {
        "v": canon(REQUEST_VERSION),
        "model": canon(model),
        "params": canon(params),
        **{kind: _hex_list(pieces[kind]) for kind in PIECE_KINDS},
    }
    return hexdigest("request", canon_object(members))


def _hex_list(digests: Sequence[str]) -> bytes:
    """Canonical bytes of a list of lowercase hex digests (plain ASCII strings)."""
    return orjson.dumps(list(digests))


def _identity_prefix(previous: Sequence[Any], current: Sequence[Any]) -> int:
    """How many leading items of ``current`` are the very objects of ``previous``.

    State lists are built only by the fold: ``set`` stores a freshly copied or parsed
    value (no object in it was ever in an earlier list) and ``append`` makes
    ``old + fresh tail``. So an object of ``previous`` found at its own position in
    ``current`` got there through appends that carried the whole prefix along: when the
    last and the first objects of ``previous`` sit at their positions, all of them do.
    """
    m = len(previous)
    if m == 0:
        return 0
    if len(current) >= m and current[m - 1] is previous[m - 1] and current[0] is previous[0]:
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
    system: list[str]
    messages: list[str]
    tools: list[str]

    def pieces(self, kind: str) -> list[str]:
        digests: list[str] = getattr(self, kind)
        return digests


class RequestHasher:
    """Hashes requests piece by piece, each piece once across a run's calls.

    Committed state is never mutated in place, so a piece object found at the
    same position as in the previous call is the same content: its digest is
    reused instead of canonicalising and hashing it again. The hasher keeps
    references to the pieces it has seen, so object identity stays meaningful.

    The request digest is computed incrementally too: ``"messages"`` sorts first
    in the canonical request object, so the SHA-256 state after the message
    digests already hashed is kept and extended by the new ones only.
    """

    def __init__(self) -> None:
        self._objects: dict[str, list[Any]] = {kind: [] for kind in PIECE_KINDS}
        self._digests: dict[str, list[str]] = {kind: [] for kind in PIECE_KINDS}
        self._messages_done = 0  # leading message digests already fed to _messages_sha
        self._messages_sha = hashlib.sha256(_REQUEST_PREFIX)

    def fork(self) -> RequestHasher:
        """An independent hasher that starts from this one's cache (for a continued run)."""
        twin = RequestHasher()
        twin._objects = dict(self._objects)  # lists are replaced, never mutated
        twin._digests = dict(self._digests)
        twin._messages_done = self._messages_done
        twin._messages_sha = self._messages_sha.copy()
        return twin

    def digests(self, request: Mapping[str, Any]) -> RequestDigests:
        lists: dict[str, list[str]] = {}
        kept_messages = 0
        for kind, (_key, tag) in PROJECTION.items():
            current = request[kind]
            kept = _identity_prefix(self._objects[kind], current)
            new = [hexdigest(tag, canon(piece)) for piece in current[kept:]]
            # state lists are replaced, never mutated, so keeping a reference is enough
            self._objects[kind] = current if type(current) is list else list(current)
            known = self._digests[kind]
            self._digests[kind] = lists[kind] = (
                known + new if kept == len(known) else known[:kept] + new
            )
            if kind == "messages":
                kept_messages = kept
        return RequestDigests(
            model=request["model"],
            params=request["params"],
            request=self._request_digest(request["model"], request["params"], lists, kept_messages),
            system=lists["system"],
            messages=lists["messages"],
            tools=lists["tools"],
        )

    def _request_digest(
        self, model: str, params: Any, lists: Mapping[str, list[str]], kept: int
    ) -> str:
        messages = lists["messages"]
        if kept < self._messages_done:  # the history was rewritten: start over
            self._messages_sha, self._messages_done = hashlib.sha256(_REQUEST_PREFIX), 0
        done = self._messages_done
        if len(messages) > done:
            tail = ",".join(f'"{d}"' for d in messages[done:]).encode("ascii")
            self._messages_sha.update(b"," + tail if done else tail)
            self._messages_done = len(messages)
        sha = self._messages_sha.copy()
        sha.update(
            b'],"model":'
            + canon(model)
            + b',"params":'
            + canon(params)
            + b',"system":'
            + _hex_list(lists["system"])
            + b',"tools":'
            + _hex_list(lists["tools"])
            + b',"v":'
            + canon(REQUEST_VERSION)
            + b"}"
        )
        return str(sha.hexdigest())


_REQUEST_PREFIX: Final = domain_prefix("request") + b'{"messages":['
