"""Version 1 policy patterns (Python ``re``), matched under a budget of counted steps.

Version 1 documents, recorded by earlier writers, hold Python ``re`` patterns, which can
backtrack exponentially. A verifier must bound the work, and the verdict must not depend on
the machine: so the bound is a count of steps, not time (log-format appendix C.2).

:class:`LegacyPattern` is a backtracking matcher over Python's own parse of the pattern,
exploring alternatives in the order ``re`` does; each node it tries is one **step**. Single
characters and anchors are tested by ``re`` itself (each compiled alone, with the flags in
force), so their meaning is Python's exactly; the matcher only decides the order of tries,
which does not change whether a match exists. ``tests/property/test_legacy_match.py`` checks
it against ``re.search``.
"""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Callable
from typing import Any, Final

# Python's own parser of ``re`` patterns and its tables (private, untyped; Python >= 3.11)
_parser: Any = importlib.import_module("re._parser")
C: Any = importlib.import_module("re._constants")
_sre: Any = importlib.import_module("_sre")

__all__ = ["MAX_DEPTH", "LegacyPattern", "StepsSpent"]

#: deepest nesting of tries a match may reach before it counts as out of budget
MAX_DEPTH: Final = 20_000

Caps = tuple[tuple[int, int] | None, ...]
Cont = Callable[[int, Caps], bool]
Node = Callable[[int, Caps, Cont], bool]

_TYPE_FLAGS: Final = C.SRE_FLAG_ASCII | C.SRE_FLAG_LOCALE | C.SRE_FLAG_UNICODE
_LEAF_FLAGS: Final = re.IGNORECASE | re.MULTILINE | re.DOTALL | re.ASCII
_CATEGORIES: Final = {
    C.CATEGORY_DIGIT: r"\d",
    C.CATEGORY_NOT_DIGIT: r"\D",
    C.CATEGORY_SPACE: r"\s",
    C.CATEGORY_NOT_SPACE: r"\S",
    C.CATEGORY_WORD: r"\w",
    C.CATEGORY_NOT_WORD: r"\W",
}
_AT: Final = {
    C.AT_BEGINNING: "^",
    C.AT_BEGINNING_STRING: r"\A",
    C.AT_BOUNDARY: r"\b",
    C.AT_NON_BOUNDARY: r"\B",
    C.AT_END: "$",
    C.AT_END_STRING: r"\Z",
}


class StepsSpent(Exception):
    """The matcher used up the steps it was given (or nested its tries too deep)."""


def _char(code: int) -> str:
    return f"\\U{code:08x}"


def _combine(flags: int, add: int, remove: int) -> int:
    if add & _TYPE_FLAGS:
        flags &= ~_TYPE_FLAGS
    return (flags | add) & ~remove


class LegacyPattern:
    """A compiled version 1 pattern; :meth:`search` is ``re.search(pattern, key) is not
    None``, counting steps against a shared allowance."""

    def __init__(self, pattern: str) -> None:
        parsed = _parser.parse(pattern)
        self.pattern = pattern
        self.groups = parsed.state.groups
        self.steps = 0  # taken so far
        self.allowance = 0  # may take
        self._depth = 0
        self._key = ""
        self._leaves: dict[tuple[str, int], re.Pattern[str]] = {}
        self._root = self._sequence(list(parsed), parsed.state.flags)

    def search(self, key: str) -> bool:
        """Whether the pattern is found in ``key``; raises :class:`StepsSpent` once the
        steps taken reach :attr:`allowance`."""
        self._key, self._depth = key, 0
        empty: Caps = (None,) * self.groups
        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(max(limit, 4 * MAX_DEPTH + 1000))
        try:
            return any(self._root(start, empty, _accept) for start in range(len(key) + 1))
        finally:
            sys.setrecursionlimit(limit)

    # -- building the matcher -----------------------------------------------------------

    def _enter(self) -> None:
        self.steps += 1
        if self.steps > self.allowance or self._depth > MAX_DEPTH:
            raise StepsSpent(self.pattern)

    def _sequence(self, items: list[tuple[Any, Any]], flags: int) -> Node:
        nodes = [self._node(op, av, flags) for op, av in items]

        def run(pos: int, caps: Caps, k: Cont, i: int = 0) -> bool:
            if i == len(nodes):
                return k(pos, caps)
            return nodes[i](pos, caps, lambda p, c: run(p, c, k, i + 1))

        return run

    def _leaf(self, source: str, flags: int) -> Node:
        key = (source, flags & _LEAF_FLAGS)
        compiled = self._leaves.get(key)
        if compiled is None:
            compiled = self._leaves[key] = re.compile(source, flags & _LEAF_FLAGS)
        match = compiled.match

        def leaf(pos: int, caps: Caps, k: Cont) -> bool:
            self._enter()
            found = match(self._key, pos)
            return found is not None and k(found.end(), caps)

        return leaf

    def _node(self, op: Any, av: Any, flags: int) -> Node:
        if op is C.LITERAL:
            return self._leaf(_char(av), flags)
        if op is C.NOT_LITERAL:
            return self._leaf(f"[^{_char(av)}]", flags)
        if op is C.ANY:
            return self._leaf(".", flags)
        if op is C.IN:
            return self._leaf(_class(av), flags)
        if op is C.AT:
            return self._leaf(_AT[av], flags)
        if op is C.BRANCH:
            return self._branch([self._sequence(list(b), flags) for b in av[1]])
        if op is C.SUBPATTERN:
            group, add, remove, inner = av
            return self._group(group, self._sequence(list(inner), _combine(flags, add, remove)))
        if op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
            low, high, inner = av
            item = self._sequence(list(inner), flags)
            repeat = self._repeat(low, high, item, greedy=op is not C.MIN_REPEAT)
            return self._atomic(repeat) if op is C.POSSESSIVE_REPEAT else repeat
        if op is C.ATOMIC_GROUP:
            return self._atomic(self._sequence(list(av), flags))
        if op in (C.ASSERT, C.ASSERT_NOT):
            direction, inner = av
            width = inner.getwidth()[0] if direction < 0 else 0  # a lookbehind's is fixed
            return self._assert(width, self._sequence(list(inner), flags), op is C.ASSERT)
        if op is C.GROUPREF:
            return self._reference(av, flags)
        if op is C.GROUPREF_EXISTS:
            group, yes, no = av
            return self._conditional(
                group, self._sequence(list(yes), flags), self._sequence(list(no or []), flags)
            )
        raise ValueError(f"version 1 pattern {self.pattern!r:.120}: unknown construct {op}")

    def _branch(self, branches: list[Node]) -> Node:
        def branch(pos: int, caps: Caps, k: Cont) -> bool:
            self._enter()
            return any(b(pos, caps, k) for b in branches)

        return branch

    def _group(self, group: int | None, inner: Node) -> Node:
        def run(pos: int, caps: Caps, k: Cont) -> bool:
            self._enter()
            if group is None:
                return inner(pos, caps, k)

            def close(end: int, c: Caps) -> bool:
                return k(end, (*c[: group - 1], (pos, end), *c[group:]))

            return inner(pos, caps, close)

        return run

    def _repeat(self, low: int, high: int, item: Node, *, greedy: bool) -> Node:
        """``item`` from ``low`` to ``high`` times; an iteration that matched empty ends the
        repetition (as in ``re``: it could only repeat itself)."""
        unbounded = high == C.MAXREPEAT

        def again(count: int, pos: int, caps: Caps, last: int, k: Cont) -> bool:
            self._enter()
            self._depth += 1
            try:
                if count < low:
                    if pos == last:  # empty: the remaining required iterations are alike
                        count = low
                    else:
                        return item(pos, caps, lambda p, c: again(count + 1, p, c, pos, k))
                more = (unbounded or count < high) and pos != last
                if greedy:
                    if more and item(pos, caps, lambda p, c: again(count + 1, p, c, pos, k)):
                        return True
                    return k(pos, caps)
                if k(pos, caps):
                    return True
                return more and item(pos, caps, lambda p, c: again(count + 1, p, c, pos, k))
            finally:
                self._depth -= 1

        return lambda pos, caps, k: again(0, pos, caps, -1, k)

    def _atomic(self, inner: Node) -> Node:
        def run(pos: int, caps: Caps, k: Cont) -> bool:
            self._enter()
            found: list[tuple[int, Caps]] = []

            def first(end: int, c: Caps) -> bool:
                found.append((end, c))
                return True

            return inner(pos, caps, first) and k(*found[0])

        return run

    def _assert(self, behind: int, inner: Node, positive: bool) -> Node:
        """A lookahead (``behind`` 0) or a lookbehind of that fixed width; a positive one
        keeps the groups its first match set."""

        def run(pos: int, caps: Caps, k: Cont) -> bool:
            self._enter()
            found: list[Caps] = []
            start = pos - behind

            def first(end: int, c: Caps) -> bool:
                found.append(c)
                return True

            ok = start >= 0 and inner(start, caps, first)
            if ok != positive:
                return False
            return k(pos, found[0] if positive else caps)

        return run

    def _reference(self, group: int, flags: int) -> Node:
        fold: Callable[[str], int] | None = None
        if flags & re.IGNORECASE:
            fold = _ascii_lower if flags & re.ASCII else _unicode_lower

        def run(pos: int, caps: Caps, k: Cont) -> bool:
            self._enter()
            span = caps[group - 1]
            if span is None:
                return False
            text = self._key[span[0] : span[1]]
            end = pos + len(text)
            there = self._key[pos:end]
            if len(there) != len(text):
                return False
            if fold is None:
                same = there == text
            else:
                same = all(fold(a) == fold(b) for a, b in zip(there, text, strict=True))
            return same and k(end, caps)

        return run

    def _conditional(self, group: int, yes: Node, no: Node) -> Node:
        def run(pos: int, caps: Caps, k: Cont) -> bool:
            self._enter()
            return (yes if caps[group - 1] is not None else no)(pos, caps, k)

        return run


def _accept(pos: int, caps: Caps) -> bool:
    return True


def _class(items: list[tuple[Any, Any]]) -> str:
    parts = []
    for op, av in items:
        if op is C.NEGATE:
            parts.append("^")
        elif op is C.LITERAL:
            parts.append(_char(av))
        elif op is C.RANGE:
            parts.append(f"{_char(av[0])}-{_char(av[1])}")
        elif op is C.CATEGORY:
            parts.append(_CATEGORIES[av])
        else:  # pragma: no cover - the parser makes no other class item
            raise ValueError(f"unknown class item {op}")
    return "[" + "".join(parts) + "]"


def _ascii_lower(c: str) -> int:
    return int(_sre.ascii_tolower(ord(c)))


def _unicode_lower(c: str) -> int:
    """The simple lowercase mapping ``re`` compares backreferences by (``str.lower`` is the
    full one: U+0130 becomes two characters there, ``i`` here)."""
    return int(_sre.unicode_tolower(ord(c)))
