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
#: literals looked for one by one before they join the automaton (a few µs a text)
_RECENT: Final = 32


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

    A conversation that commits a value in every tool call gathers thousands of literals
    (each turn inherits its parent's), and every text it records is searched for all of
    them: they are held in an Aho-Corasick automaton (one pass over the text whatever their
    number), rebuilt once more than :data:`_RECENT` literals wait beside it (those are
    looked for one by one). A child run's search starts as a copy sharing the automaton."""

    __slots__ = ("_automaton", "_literals", "_recent")

    def __init__(self, literals: Iterable[str] = ()) -> None:
        self._literals: dict[str, None] = dict.fromkeys(literals)
        self._automaton: Any = None
        self._recent: list[str] = list(self._literals)
        self._settle()

    def __bool__(self) -> bool:
        return bool(self._literals)

    def __len__(self) -> int:
        return len(self._literals)

    @property
    def literals(self) -> tuple[str, ...]:
        return tuple(self._literals)

    def fork(self) -> EchoSearch:
        """A search that starts with these literals (a continued run's), learning on its own."""
        copy = EchoSearch.__new__(EchoSearch)
        copy._literals = dict(self._literals)
        copy._automaton = self._automaton  # never changed once built: shared
        copy._recent = list(self._recent)
        return copy

    def learn(self, value: Any) -> None:
        """Search for ``value``'s literals from now on (a value just committed)."""
        for literal in literals_of(value):
            if literal not in self._literals:
                self._literals[literal] = None
                self._recent.append(literal)
        self._settle()

    def _settle(self) -> None:
        if len(self._recent) > _RECENT:
            automaton = ahocorasick.Automaton(ahocorasick.STORE_LENGTH)
            for literal in self._literals:
                automaton.add_word(literal)
            automaton.make_automaton()
            self._automaton, self._recent = automaton, []

    def found(self, text: str) -> str | None:
        """A literal ``text`` holds, or None."""
        if len(text) < ECHO_MIN_CHARS:
            return None
        for literal in self._recent:
            if literal in text:
                return literal
        if self._automaton is not None:
            for end, length in self._automaton.iter(text):
                return text[end - length + 1 : end + 1]
        return None


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
