"""What a redaction policy version is: how its patterns are read and how they match a key.

Each policy document version (``run.open.policy.v``) is one instance of
:class:`PatternRules`, defined in its own module (:mod:`~agentfootprint.logformat.policy_v1`:
Python ``re`` under a budget of counted steps; :mod:`~agentfootprint.logformat.policy_v2`:
RE2) and chosen in one place (:func:`agentfootprint.logformat.commitments.pattern_rules`).
docs/log-format.md section 12 is the normative text (appendix C: version 1).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["PatternRules"]


@dataclass(frozen=True, kw_only=True, slots=True)
class PatternRules:
    """The pattern rules of one policy version."""

    version: int
    #: what its patterns are written in, as a refusal names it
    syntax: str
    #: why a pattern is refused (None: it is accepted)
    refusal: Callable[[str], str | None]
    #: a fresh ``search(key)`` over the patterns (None: there are none); a version may raise
    #: from it (version 1: ``MatchBudgetExceeded``)
    searcher: Callable[[Sequence[str]], Callable[[str], bool] | None]
