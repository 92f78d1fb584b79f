"""Echo redaction (docs/log-format.md section 12.8): a value committed earlier in a run, quoted
verbatim in the conversation's text later, is committed there too (policy version 3).

One definition, read by the writer's boundary (what it commits) and by the verifier's echo
check (what it calls a leak): the **literals** of a value (its strings of at least
:data:`ECHO_MIN_CHARS` code points and its numbers whose text is at least that long) and the
**conversation text** of a recorded value (text under one of :data:`CONVERSATION_KEYS`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, Final

import ahocorasick

from agentfootprint.logformat.canonical import canon
from agentfootprint.logformat.commitments import COMMIT_KEY, OPAQUE, read_json_text
from agentfootprint.logformat.shared_lists import SharedList

__all__ = [
    "CONVERSATION_KEYS",
    "ECHO_MIN_CHARS",
    "EchoSearch",
    "conversation_texts",
    "literals_of",
]

#: the shortest literal searched for: shorter strings (a name, a country, a year) would
#: commit ordinary text wherever they occur
ECHO_MIN_CHARS: Final = 8

#: every member the conversation's text travels under, in state, events and error records
CONVERSATION_KEYS: Final = (
    "content",
    "arguments",
    "user_message",
    "final_answer",
    "message",
    "answer",
    "result",
)
_CONVERSATION: Final = frozenset(CONVERSATION_KEYS)
#: literals looked for one by one before they join an automaton (a few µs a text)
_RECENT: Final = 32
#: clean texts remembered (then forgotten all at once)
_CLEAN_TEXTS: Final = 4096


def literals_of(value: Any) -> list[str]:
    """The literals of ``value``, once each, in the order of a walk (members by sorted name,
    depth first): strings of at least 8 code points and number texts of at least 8 characters,
    at any depth of objects and arrays (not member names, not JSON text inside a string)."""
    found: dict[str, None] = {}
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is str:
            if len(item) >= ECHO_MIN_CHARS:
                found[item] = None
        elif kind is dict:
            stack.extend(item[k] for k in sorted(item, reverse=True))
        elif kind is list or kind is tuple:
            stack.extend(reversed(item))
        elif kind is int or kind is float:  # (a bool is neither)
            text = canon(item).decode("ascii")
            if len(text) >= ECHO_MIN_CHARS:
                found[text] = None
        elif kind is SharedList:  # a state list held as versions
            stack.extend(reversed(item.tolist()))
    return list(found)


class EchoSearch:
    """The literals of the values a run committed, and the search of a text for them.

    A conversation that commits values in every tool call gathers thousands of literals (each
    turn inherits its parent's), and every text it records is searched for all of them. They
    are held in two Aho-Corasick automata (one pass over a text whatever their number): a
    large one, rebuilt only when the small one has grown past a quarter of its size (so each
    literal is inserted a bounded number of times over a conversation), and a small one of
    the literals learned since, rebuilt once more than :data:`_RECENT` wait beside it (those
    are looked for one by one). An automaton is never changed once built, so a continued
    run's search (:meth:`fork`) shares them and copies nothing but the few waiting."""

    __slots__ = ("_big", "_clean", "_count", "_recent", "_sizes", "_small")

    def __init__(self, literals: Iterable[str] = ()) -> None:
        self._big: Any = None
        self._small: Any = None
        self._sizes = (0, 0)  # literals in the big and the small automaton
        self._recent: list[str] = list(dict.fromkeys(literals))
        #: texts found to hold none of the literals, with how many there were then (a text
        #: recorded in several bodies, a reply in the history, the state and the events, is
        #: searched once)
        self._clean: dict[str, int] = {}
        self._count = len(self._recent)  # literals held, all told
        self._settle()

    def __bool__(self) -> bool:
        return self._count > 0

    def __len__(self) -> int:
        return self._count

    def fork(self) -> EchoSearch:
        """A search that starts with these literals (a continued run's), learning on its own."""
        copy = EchoSearch.__new__(EchoSearch)
        copy._big, copy._small, copy._sizes = self._big, self._small, self._sizes
        copy._recent = list(self._recent)
        copy._count = self._count
        copy._clean = {}
        return copy

    def learn(self, value: Any) -> None:
        """Search for ``value``'s literals from now on (a value just committed)."""
        if type(value) is str:  # most committed values: no walk
            if len(value) >= ECHO_MIN_CHARS and not self._knows(value):
                self._recent.append(value)
                self._count += 1
                self._settle()
            return
        learned = False
        for literal in literals_of(value):
            if not self._knows(literal):
                self._recent.append(literal)
                self._count += 1
                learned = True
        if learned:
            self._settle()

    def _knows(self, literal: str) -> bool:
        return (
            literal in self._recent
            or (self._small is not None and self._small.exists(literal))
            or (self._big is not None and self._big.exists(literal))
        )

    def _settle(self) -> None:
        if len(self._recent) <= _RECENT:
            return
        pending = [*(self._small.keys() if self._small is not None else ()), *self._recent]
        big = self._sizes[0]
        if len(pending) > big // 4:  # the big one grows by a quarter at least: rebuilt
            everything = [*(self._big.keys() if self._big is not None else ()), *pending]
            self._big, self._small = _automaton(everything), None
            self._sizes = (len(everything), 0)
        else:
            self._small = _automaton(pending)
            self._sizes = (big, len(pending))
        self._recent = []

    def found(self, text: str) -> str | None:
        """A literal ``text`` holds, or None."""
        known = self._count
        if not known or len(text) < ECHO_MIN_CHARS or self._clean.get(text) == known:
            return None
        for literal in self._recent:
            if literal in text:
                return literal
        for automaton in (self._small, self._big):
            if automaton is not None:
                for end, length in automaton.iter(text):
                    return text[end - length + 1 : end + 1]
        if len(self._clean) >= _CLEAN_TEXTS:
            self._clean.clear()
        self._clean[text] = known
        return None


def _automaton(literals: list[str]) -> Any:
    automaton = ahocorasick.Automaton(ahocorasick.STORE_LENGTH)
    for literal in literals:
        automaton.add_word(literal)
    automaton.make_automaton()
    return automaton


def conversation_texts(
    value: Any, name: str | None = None, path: tuple[str | int, ...] = ()
) -> Iterator[tuple[tuple[str | int, ...], str, str]]:
    """``(path, nearest member name, text)`` of each conversation text in ``value`` (a scanned
    value whose own name is ``name``, at ``path``: an append's state key), in walk order
    (members in the order held, depth first; into walkable JSON text, not into commitments or
    opaque text). Texts shorter than a literal are skipped. Iterative: no recursion however
    deep the value or its JSON text."""
    start = name is not None and name in _CONVERSATION
    stack: list[tuple[Any, tuple[str | int, ...], str | None, bool]] = [(value, path, name, start)]
    while stack:
        item, path, under, inside = stack.pop()
        kind = type(item)
        if kind is dict:
            if COMMIT_KEY in item:
                continue  # a commitment (or a malformed one: the scans report it)
            stack.extend(
                (item[k], (*path, k), k, inside or k in _CONVERSATION) for k in reversed(list(item))
            )
        elif kind is list:
            stack.extend((item[i], (*path, i), under, inside) for i in range(len(item) - 1, -1, -1))
        elif kind is str:
            inner = read_json_text(item)
            if inner is None:
                if inside and len(item) >= ECHO_MIN_CHARS:
                    yield path, under or "", item
            elif inner is not OPAQUE:
                stack.append((inner, path, under, inside))
