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

import weakref
from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from typing import Any

from agentfootprint.logformat.hashing import is_hex_digest

__all__ = [
    "VERBS",
    "DigestLine",
    "DigestList",
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
) -> None:
    """Apply one write to ``state`` (top level replaced, nested values never mutated: an
    ``append`` makes a new list, so every list anybody was handed keeps its contents)."""
    if verb == "set":
        state[path] = value
    elif verb == "append":
        current = state.get(path)
        if not isinstance(current, list) or not isinstance(value, list):
            raise FoldError(f"append to {path!r} needs an array on both sides")
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


class DigestLine:
    """The lists one :class:`~agentfootprint.logformat.request.RequestHasher` grew from each
    other by appends only: every list of a line is a prefix of every later one. ``latest``
    is the newest (what a receipt that keeps all of an older list and adds the rest names),
    held weakly."""

    __slots__ = ("_latest",)

    def __init__(self) -> None:
        self._latest: weakref.ref[DigestList] | None = None

    @property
    def latest(self) -> DigestList | None:
        return None if self._latest is None else self._latest()

    @latest.setter
    def latest(self, value: DigestList) -> None:
        self._latest = weakref.ref(value)


class DigestList(list[str]):
    """A digest list of a served request on a :class:`DigestLine`, never mutated.

    Knowing that an older list of the same line is its prefix, :func:`compress_digests`
    finds the shared prefix and :func:`expand_digests` the expanded list without reading
    the history (O(new) instead of O(list) per call); equal lists from one line are one
    object, which compares equal at once. Its contents are plain ``str``, and its slices
    plain lists, so nothing written or hashed depends on it being one.
    """

    __slots__ = ("__weakref__", "line")

    def __init__(self, items: Sequence[str] = ()) -> None:
        super().__init__(items)
        self.line = DigestLine()  # a line of its own
        self.line.latest = self

    def grown(self, new: list[str]) -> DigestList:
        """A new list of this line: this one's digests, then ``new``. Only from the line's
        latest list (an older one would fork the line: a new line starts then, a copy).

        The new list is a copy of this one (in C) with ``new`` after it: every list of a line
        stays as it was made, so whoever holds one (a hasher, a verified run) sees it fixed.
        """
        out = DigestList()
        out += self  # one copy, in C
        out += new
        line = self.line
        if line.latest is self:  # on the line: out extends every list of it
            out.line = line
            line.latest = out
        return out

    def __eq__(self, other: object) -> bool:
        return True if other is self else list.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return False if other is self else list.__ne__(self, other)

    __hash__ = None

    def __reduce__(self) -> tuple[Any, ...]:  # copies and pickles are plain lists
        return (list, (list(self),))


def _extends(previous: Sequence[str], current: Sequence[str]) -> bool:
    """``previous`` is known to be a prefix of ``current`` without comparing them: an older
    (or the same) list of the same :class:`DigestLine`."""
    return (
        type(current) is DigestList
        and type(previous) is DigestList
        and previous.line is current.line
        and len(previous) <= len(current)
    )


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


def expand_digests(previous: Sequence[str], stored: Any) -> list[str]:
    """Inverse of :func:`compress_digests`; refuses a malformed list or an overlong ``keep``."""
    problem = digest_list_problem(stored)
    if problem is not None:
        raise FoldError(f"digest list {problem}")
    keep = stored["keep"]
    if not 0 <= keep <= len(previous):
        raise FoldError(f"keep={keep} but the previous list has {len(previous)} digests")
    add = stored["add"]
    if type(previous) is DigestList and keep == len(previous):
        latest = previous.line.latest  # every list of the line extends previous
        if (
            latest is not None
            and len(latest) == keep + len(add)
            and latest[keep:] == add  # only what is new is read
        ):
            return latest
    if keep == len(previous):
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


def continued_lists(lists: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
    """The digest lists a continued run starts from: a :class:`ReceiptLists`' own lists
    (shared, never mutated: the child's receipts replace them), others copied."""
    if isinstance(lists, ReceiptLists):
        return {kind: v if isinstance(v, list) else list(v) for kind, v in lists.lists().items()}
    return {kind: list(v) for kind, v in lists.items()}
