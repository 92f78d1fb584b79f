"""Tool classifiers: the port ``tool_choice`` asks which tool answers the current step.

A classifier is any object with one method, :meth:`ToolClassifier.rank`::

    def rank(self, query: str, candidates: Sequence[ToolCandidate]) -> Ranking: ...

(``async def rank`` is accepted too.) ``query`` is the text of the step (the latest user
message, then the latest assistant text after it, joined by a newline); ``candidates`` are
the tools about to be served, less the ``always_serve`` doors, each by its name and
description, in the order the agent registered them. The answer is a mapping of tool name
to score, or a sequence of ``(name, score)`` pairs: finite numbers, higher is better, each
name a candidate's, at most once. Candidates it leaves out are not ranked. An optional
``name`` attribute names the classifier in ``run.open.options`` (else its class name).

:class:`DescriptionClassifier` is the one shipped (and ``tool_choice``'s default).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = ["DescriptionClassifier", "Ranking", "ToolCandidate", "ToolClassifier"]

#: what ``rank`` returns: scores by tool name, or ``(name, score)`` pairs
Ranking = Mapping[str, float] | Sequence[tuple[str, float]]


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolCandidate:
    """A tool offered to the classifier: its name and description, as served."""

    name: str
    description: str


@runtime_checkable
class ToolClassifier(Protocol):
    """Ranks the candidate tools for the current step (see the module docstring)."""

    def rank(
        self, query: str, candidates: Sequence[ToolCandidate]
    ) -> Ranking | Awaitable[Ranking]: ...


#: words that say nothing about which tool is meant
_STOPWORDS = frozenset(
    {
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "can",
        "do",
        "does",
        "for",
        "from",
        "get",
        "has",
        "have",
        "how",
        "i",
        "in",
        "into",
        "is",
        "it",
        "its",
        "me",
        "my",
        "of",
        "on",
        "or",
        "please",
        "so",
        "some",
        "something",
        "that",
        "the",
        "then",
        "this",
        "to",
        "up",
        "use",
        "using",
        "was",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "will",
        "with",
        "you",
        "your",
    }
)
_SPLIT = re.compile(r"[^0-9a-z]+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def words(text: str) -> frozenset[str]:
    """The distinct content words of ``text``: camelCase and snake_case split, lowercased,
    stop words and one-letter words dropped, a plural ``s`` dropped from words of 4+ letters."""
    found: set[str] = set()
    for word in _SPLIT.split(_CAMEL.sub(" ", text).lower()):
        if len(word) < 2 or word in _STOPWORDS:
            continue
        if len(word) >= 4 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        found.add(word)
    return frozenset(found)


class DescriptionClassifier:
    """A simple, deterministic lexical scorer (the default classifier of ``tool_choice``).

    Each candidate's score is the share of its words (of its name and description, see
    :func:`words`) that the query also uses, rounded to 6 decimals: 0 when they share
    none, 1 when the query uses every one. Every candidate is scored; ties keep the
    candidates' order. It calls nothing and keeps no state: the same query and candidates
    always get the same ranking.
    """

    name = "description"

    def rank(self, query: str, candidates: Sequence[ToolCandidate]) -> list[tuple[str, float]]:
        asked = words(query)
        ranking = []
        for candidate in candidates:
            own = words(candidate.name) | words(candidate.description)
            score = len(own & asked) / len(own) if own else 0.0
            ranking.append((candidate.name, round(score, 6)))
        return ranking

    def __repr__(self) -> str:
        return "DescriptionClassifier()"
