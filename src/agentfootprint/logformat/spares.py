"""Growing a list by appends without copying its prefix, with nothing anybody holds changed.

Every version of an append-grown list (the ``history`` state key, a receipt's digest list)
is a list object of its own, never mutated while anyone holds it: that is what keeps a
stage's view, a served request, a ``RunResult.state`` and a verified final state fixed.
Made as ``base + tail`` each version costs a copy of the whole list, and later the free of
an older one: O(history) per call, the superlinear part of a long conversation (issue 13).

A :class:`Spares` pool keeps the versions it made. When CPython's reference count says a
pooled list is referenced by the pool alone, nobody can see it: catching it up to ``base``
and appending ``tail`` in place is indistinguishable from making a new list, and costs only
what it lacks (the items appended since it was a version, then ``tail``). A list anybody
holds (a state, a request, a hasher, a cache, a caller) is never touched, so every value
handed out keeps the contents it had, exactly as with copies.

A spare is reused only when it is known to be a prefix of ``base`` in O(1), by the rule the
receipt hasher relies on (``verify.request._identity_prefix``): state lists are made only by
the fold (``set`` stores fresh objects, ``append`` keeps the old items and adds fresh ones),
so a list whose first and last objects sit at their own positions in ``base`` is its prefix
(the middle one is checked too).
Digest lists use their line instead (:class:`~agentfootprint.logformat.fold.DigestLine`).

Where reference counts say nothing reliable (another interpreter, a free-threaded build),
:data:`ENABLED` is False and every version is a copy, as before.
"""

from __future__ import annotations

import sys
import sysconfig
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

__all__ = ["ENABLED", "MIN_POOLED", "Spares", "sole"]


def _refs(pool: deque[Any], index: int) -> int:
    """References to ``pool[index]``: the pool's own and this call's argument, when only the
    pool holds it (calibrated below with this very function)."""
    return sys.getrefcount(pool[index])


def _calibrated() -> int | None:
    """What :func:`_refs` returns for an item only a deque holds; None when reference counts
    cannot tell a held item from a free one here."""
    if sys.implementation.name != "cpython" or sysconfig.get_config_var("Py_GIL_DISABLED"):
        return None
    probe: deque[Any] = deque([[]])
    alone = _refs(probe, 0)
    held = probe[0]
    if _refs(probe, 0) != alone + 1:
        return None
    del held
    return alone if _refs(probe, 0) == alone else None


_SOLE = _calibrated()
#: in-place reuse is on (CPython with the GIL); off, every version is a copy
ENABLED = _SOLE is not None
#: pooled lists looked at from each end per version made
_SCAN = 3
#: lists shorter than this are copied (a copy of a few items costs less than a look)
MIN_POOLED = 64


def sole(pool: deque[Any], index: int) -> bool:
    """``pool[index]`` is referenced by ``pool`` alone: nobody else can see it."""
    return _SOLE is not None and _refs(pool, index) == _SOLE


class Spares:
    """The versions one owner (an agent, a verifier, a digest line) made, for reuse.

    ``capacity`` bounds how many it keeps: at least the number of versions its owner's
    caches hold at once plus a few, so a version whose last holder dropped it is still
    pooled and comes back as a spare instead of being freed (a free is O(list) too).
    A pool only ever keeps lists alive that are one of its owner's versions.
    """

    __slots__ = ("_lists", "_lock", "capacity")

    def __init__(self, capacity: int = 32) -> None:
        self.capacity = capacity
        self._lists: deque[list[Any]] = deque()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._lists)

    def extended(self, base: list[Any], tail: list[Any]) -> list[Any]:
        """A list equal to ``base + tail`` that nobody else references (``base`` untouched):
        a spare caught up in place when one is free and a prefix of ``base``, else a copy."""
        return self.grown(base, tail, lambda spare: _is_state_prefix(spare, base), list)

    def grown(
        self,
        base: list[Any],
        tail: list[Any],
        prefix: Callable[[list[Any]], bool],
        make: Callable[[], list[Any]],
    ) -> list[Any]:
        """``base + tail`` in a free spare for which ``prefix(spare)`` holds (it is a prefix
        of ``base``), or in a new list from ``make()``; kept in the pool either way."""
        if not ENABLED or len(base) < MIN_POOLED:  # a short list: a copy costs less
            out = make()
            out += base
            out += tail
            return out
        with self._lock:
            spare = self._take(base, prefix)
            if spare is None:
                spare = make()
                spare += base
                self._keep()
            else:
                spare += base[len(spare) :]
            spare += tail
            self._lists.append(spare)
            return spare

    def _take(self, base: list[Any], prefix: Callable[[list[Any]], bool]) -> list[Any] | None:
        """A free pooled list, out of the pool: caught up from when it is a prefix of
        ``base``, else emptied (a free list of another line still saves an allocation).

        The newest few are looked at first (the versions a run made a call or two ago, which
        nobody holds any more), then the oldest few (versions whose long holder, a cache
        entry, let go of them): a bounded look, O(1) per version whatever the pool holds.
        """
        pool = self._lists
        size = len(pool)
        for index in (*range(size - 1, max(size - 1 - _SCAN, -1), -1), *range(min(_SCAN, size))):
            if not sole(pool, index):
                continue
            spare = pool[index]
            del pool[index]
            if len(spare) > len(base) or not prefix(spare):
                del spare[:]
            return spare
        return None

    def _keep(self) -> None:
        """Room for one more: the oldest pooled list goes (a held one first: dropping the
        pool's reference to it frees nothing)."""
        pool = self._lists
        if len(pool) < self.capacity:
            return
        for index in range(len(pool)):
            if not sole(pool, index):
                del pool[index]
                return
        pool.popleft()


def _is_state_prefix(spare: list[Any], base: list[Any]) -> bool:
    """``spare`` is a prefix of ``base`` (both state lists made by the fold), known in O(1):
    its last, first and middle objects sit at their positions in ``base``."""
    m = len(spare)
    return m == 0 or (
        spare[m - 1] is base[m - 1] and spare[0] is base[0] and spare[m // 2] is base[m // 2]
    )
