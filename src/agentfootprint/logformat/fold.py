"""Folding the log back into state: the write verbs and the receipt delta rule.

These are format-level rules, shared by the verifier (which rebuilds requests)
and the read side (``state_at``, ``served_at``). They never import the runtime.

Write verbs (path = a top-level state key in log format v1):

* ``set``: the key takes ``value``;
* ``append``: the key holds an array; ``value`` (an array) is its new tail;
* ``merge``: the key holds an object; ``value``'s members replace or add members;
* ``delete``: the key is removed (it must exist).

Receipt digest lists are stored as ``{"keep": n, "add": [...]}``: the first
``n`` digests of the previous receipt's list of that kind, then ``add`` (64 lowercase
hex digits each).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from typing import Any

from agentfootprint.logformat.hashing import is_hex_digest
from agentfootprint.logformat.shared_lists import SharedList

__all__ = [
    "VERBS",
    "FoldError",
    "ReceiptLists",
    "apply_write",
    "compress_digests",
    "continued_lists",
    "digest_list_problem",
    "expand_digests",
]

VERBS = ("set", "append", "merge", "delete")


class FoldError(ValueError):
    """A write or receipt cannot be applied to the state it follows."""


def apply_write(
    state: MutableMapping[str, Any],
    path: str,
    verb: str,
    value: Any,
    *,
    shared: bool = False,
) -> None:
    """Apply one write to ``state`` (top level replaced, nested values never mutated: an
    ``append`` makes a new list, so every list anybody was handed keeps its contents).

    ``shared``: an ``append`` makes a :class:`SharedList` version, O(new) (a plain list
    appended to becomes one, copied once); an appended :class:`SharedList` grows as one
    whatever ``shared`` says. Otherwise ``old + new``, O(list): state a caller mutates."""
    if verb == "set":
        state[path] = value
    elif verb == "append":
        current = state.get(path)
        if not isinstance(value, list):
            raise FoldError(f"append to {path!r} needs an array on both sides")
        if type(current) is SharedList:
            state[path] = current.extended(value)
        elif not isinstance(current, list):
            raise FoldError(f"append to {path!r} needs an array on both sides")
        elif shared:
            state[path] = SharedList.adopt(current + value)
        else:
            state[path] = current + value
    elif verb == "merge":
        current = state.get(path)
        if not isinstance(current, dict) or not isinstance(value, dict):
            raise FoldError(f"merge into {path!r} needs an object on both sides")
        state[path] = {**current, **value}
    elif verb == "delete":
        if path not in state:
            raise FoldError(f"delete of {path!r}, which is not in state")
        del state[path]
    else:
        raise FoldError(f"unknown write verb {verb!r}")


def _extends(previous: Sequence[str], current: Sequence[str]) -> bool:
    """``previous`` is known to be a prefix of ``current`` without comparing them: an older
    (or the same) version of the same :class:`SharedList`."""
    return type(current) is SharedList and current.extends(previous)


def compress_digests(previous: Sequence[str], current: Sequence[str]) -> dict[str, Any]:
    """Store ``current`` as the longest prefix shared with ``previous`` plus a tail."""
    if _extends(previous, current):  # the usual case: grown by appends, known without reading
        return {"keep": len(previous), "add": list(current[len(previous) :])}
    limit = min(len(previous), len(current))
    if previous[:limit] == current[:limit]:  # the usual case, compared in C
        keep = limit
    else:
        keep = next(i for i, (a, b) in enumerate(zip(previous, current, strict=False)) if a != b)
    return {"keep": keep, "add": list(current[keep:])}


def digest_list_problem(stored: Any) -> str | None:
    """Why ``stored`` is not a stored digest list ``{keep: int, add: [hex, ...]}`` (None: it is).

    The shape only; whether ``keep`` fits the previous list is :func:`expand_digests`'.
    """
    if not isinstance(stored, dict) or set(stored) != {"keep", "add"}:
        return "must be an object with exactly the members keep and add"
    if type(stored["keep"]) is not int:
        return "keep must be an integer"
    add = stored["add"]
    if not isinstance(add, list):
        return "add must be an array"
    for index, item in enumerate(add):
        if not is_hex_digest(item):
            return f"add[{index}] is not 64 lowercase hex digits"
    return None


def expand_digests(previous: Sequence[str], stored: Any) -> Sequence[str]:
    """Inverse of :func:`compress_digests`; refuses a malformed list or an overlong ``keep``."""
    problem = digest_list_problem(stored)
    if problem is not None:
        raise FoldError(f"digest list {problem}")
    keep = stored["keep"]
    if not 0 <= keep <= len(previous):
        raise FoldError(f"keep={keep} but the previous list has {len(previous)} digests")
    add = stored["add"]
    if keep == len(previous):
        if type(previous) is SharedList:  # the next version (shared when the hasher's is)
            return previous.extended(add)
        out = list(previous)
        out.extend(add)
        return out
    return [*previous[:keep], *add]


class ReceiptLists(Mapping[str, tuple[str, ...]]):
    """A run's last receipt digest lists, read as tuples (a verified run's ``receipt_lists``).

    The lists are the verifier's own (never mutated): a continued run goes on from them
    (:func:`continued_lists`), and a tuple is made only for a kind that is read, once, so
    verifying a run costs no copy of its digest lists (O(history) per run otherwise).
    """

    __slots__ = ("_lists", "_tuples")

    def __init__(self, lists: Mapping[str, Sequence[str]]) -> None:
        self._lists: dict[str, Sequence[str]] = dict(lists)
        self._tuples: dict[str, tuple[str, ...]] = {}

    def __getitem__(self, kind: str) -> tuple[str, ...]:
        made = self._tuples.get(kind)
        if made is None:
            made = self._tuples[kind] = tuple(self._lists[kind])
        return made

    def __iter__(self) -> Iterator[str]:
        return iter(self._lists)

    def __len__(self) -> int:
        return len(self._lists)

    def __repr__(self) -> str:
        return f"ReceiptLists({ {kind: len(v) for kind, v in self._lists.items()} } digests)"

    def lists(self) -> dict[str, Sequence[str]]:
        """The lists themselves, by kind (read them, never mutate them)."""
        return dict(self._lists)


def continued_lists(lists: Mapping[str, Sequence[str]]) -> dict[str, Sequence[str]]:
    """The digest lists a continued run starts from: a :class:`ReceiptLists`' own lists
    (shared, never mutated: the child's receipts replace them), others copied."""
    if isinstance(lists, ReceiptLists):
        return {
            kind: v if type(v) is SharedList or isinstance(v, list) else list(v)
            for kind, v in lists.lists().items()
        }
    return {kind: list(v) for kind, v in lists.items()}
