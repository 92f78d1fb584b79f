"""Lists that grow by appends and share their prefix: O(new) per append, not O(list).

A conversation's history and a receipt's digest lists only ever grow: each commit appends a
message or two, each call a digest or two. Folding them as fresh lists (``old + new``) copies
the whole prefix at every append, so reading a conversation back costs O(N) per iteration and
O(N^2) in all, and every version kept (a verified run's final state, a hasher's last lists)
holds a copy of its own.

A :class:`SharedList` is one version of such a list: the first ``n`` items of a backing list
shared by every version grown from it. Appending to the newest version extends the backing in
place and makes a new version (O(new)); the older versions still end where they ended, so each
reads as it was made. Appending to an older version (a fork: two runs continued from one
parent) copies its prefix into a backing of its own, once, unless the backing already holds
the very same items next (then the version that ends there is made: equal versions of one
backing compare at once). The items themselves are never copied or changed.

A :class:`SharedList` is read like a list (``len``, indexing, slices, iteration, ``==``) but
is not one: JSON encoders and callers that need a ``list`` get one from :meth:`tolist` or
:func:`plain` (a copy, O(list)). Only the fold's readers that know the type hold them: the
verifier and the request hasher; what they hand to a caller is plain.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, SupportsIndex, overload

__all__ = ["FoldedState", "SharedList", "as_list", "folded", "plain"]

#: extending a backing in place is check-then-act: one lock keeps two threads growing the
#: same version from both taking its next slots (uncontended, it costs a few tens of ns)
_GROWING = threading.Lock()


class SharedList(Sequence[Any]):
    """One version of an append-only list: the first ``n`` items of a shared backing."""

    __slots__ = ("_items", "_n")

    _items: list[Any]
    _n: int

    def __init__(self, items: Iterable[Any] = ()) -> None:
        self._items = list(items)  # a backing of its own
        self._n = len(self._items)

    @classmethod
    def adopt(cls, fresh: list[Any]) -> SharedList:
        """A version over ``fresh`` itself, which becomes its backing: a list nobody else
        holds (just built), so no copy is made."""
        return cls._version(fresh, len(fresh))

    @classmethod
    def _version(cls, items: list[Any], n: int) -> SharedList:
        out = object.__new__(cls)
        out._items = items
        out._n = n
        return out

    def extended(self, tail: Sequence[Any]) -> SharedList:
        """This version's items, then ``tail``: a new version (this one is unchanged).

        O(len(tail)) when this version ends where its backing does (the usual case) or when
        the backing already holds ``tail``'s very items next; otherwise the prefix is copied
        into a new backing (a fork), once.
        """
        k = len(tail)
        if not k:
            return self
        items, n = self._items, self._n
        with _GROWING:
            if len(items) == n:  # the newest version: grow the backing in place
                items.extend(tail)
                return SharedList._version(items, n + k)
            if len(items) >= n + k and all(map(_same, items[n : n + k], tail)):
                return SharedList._version(items, n + k)  # grown the same way before
        return SharedList._version([*items[:n], *tail], n + k)

    def extends(self, other: Sequence[Any]) -> bool:
        """Whether ``other`` is known to be a prefix of this list without reading them: a
        version of the same backing that is not longer."""
        return type(other) is SharedList and other._items is self._items and other._n <= self._n

    def tolist(self) -> list[Any]:
        """A plain list of the items (a copy: O(len))."""
        return self._items[: self._n]

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, index: SupportsIndex) -> Any: ...
    @overload
    def __getitem__(self, index: slice) -> list[Any]: ...
    def __getitem__(self, index: SupportsIndex | slice) -> Any:
        n = self._n
        if isinstance(index, slice):
            start, stop, step = index.indices(n)
            if step == 1:
                return self._items[start:stop] if start < stop else []
            return [self._items[i] for i in range(start, stop, step)]
        i = index.__index__()
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("SharedList index out of range")
        return self._items[i]

    def __iter__(self) -> Iterator[Any]:
        # never iter(self._items): the backing may grow past this version meanwhile
        return itertools.islice(self._items, self._n)

    def __reversed__(self) -> Iterator[Any]:
        # the backing's own reverse iterator (it starts at the backing's length when made,
        # so a version grown meanwhile is not read) past the items newer than this version
        items = self._items
        return itertools.islice(reversed(items), len(items) - self._n, None)

    def __eq__(self, other: object) -> bool:
        if other is self:
            return True
        if type(other) is SharedList:
            if other._items is self._items:
                return other._n == self._n
            return other._n == self._n and self.tolist() == other.tolist()
        if isinstance(other, list):
            return len(other) == self._n and self.tolist() == other
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"SharedList({self.tolist()!r})"

    def __reduce__(self) -> tuple[Any, ...]:  # copies and pickles are plain lists
        return (list, (self.tolist(),))


def _same(held: Any, new: Any) -> bool:
    """An item already in a backing stands for a new one: the very object, or an equal
    string (a digest parsed from a receipt); never merely equal values (``1 == True``)."""
    return held is new or (type(held) is str and type(new) is str and held == new)


def as_list(value: Any) -> Any:
    """``value``, a :class:`SharedList` made a plain list."""
    return value.tolist() if type(value) is SharedList else value


def plain(state: Mapping[str, Any]) -> dict[str, Any]:
    """A state whose top-level :class:`SharedList` values are plain lists (copies)."""
    return {key: as_list(value) for key, value in state.items()}


class FoldedState(Mapping[str, Any]):
    """A state as the verifier folded it, read as plain values: each list a copy, each
    read (a :class:`SharedList` value is read as a ``list``). Holding one pins no copy of
    the history: its lists are versions shared with the rest of the conversation."""

    __slots__ = ("_state",)

    def __init__(self, state: Mapping[str, Any]) -> None:
        self._state = state

    def __getitem__(self, key: str) -> Any:
        return as_list(self._state[key])

    def __iter__(self) -> Iterator[str]:
        return iter(self._state)

    def __len__(self) -> int:
        return len(self._state)

    def __contains__(self, key: object) -> bool:
        return key in self._state

    def __eq__(self, other: object) -> bool:
        if isinstance(other, FoldedState):
            return self._state == other._state
        if isinstance(other, Mapping):
            return plain(self._state) == dict(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"FoldedState({plain(self._state)!r})"

    def folded(self) -> dict[str, Any]:
        """The state as folded (its lists shared, never to be mutated): a new dict."""
        return dict(self._state)


def folded(state: Mapping[str, Any]) -> dict[str, Any]:
    """A state to fold on from: a :class:`FoldedState`'s own (shared) values, else a copy
    of the mapping's top level."""
    if type(state) is FoldedState:
        return state.folded()
    return dict(state)
