"""Policy version 1 (older logs): Python ``re`` patterns, under a budget of counted steps.

Version 1 documents hold Python ``re`` patterns, which can backtrack exponentially. They
are tried on keys of at most :data:`MAX_PATTERN_KEY` characters, by the step-counting
matcher of :mod:`~agentfootprint.logformat.legacy_match`, within a budget of
:data:`LEGACY_BUDGET_STEPS` plus :data:`LEGACY_BUDGET_STEPS_PER_KEY` per key tried, so a log
gets the same verdict on every machine. docs/log-format.md appendix C.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Final

from agentfootprint.logformat.legacy_match import LegacyPattern, StepsSpent
from agentfootprint.logformat.policy_spec import PatternRules

__all__ = [
    "LEGACY_BUDGET_STEPS",
    "LEGACY_BUDGET_STEPS_PER_KEY",
    "MAX_PATTERN_KEY",
    "RULES",
    "MatchBudgetExceeded",
]

#: version 1 patterns are tried on keys of at most this many characters only
MAX_PATTERN_KEY: Final = 256
#: steps a version 1 policy's matcher may take in its patterns, per run (a step: one node of
#: a pattern tried at one position; log-format appendix C.2): this many to start with ...
LEGACY_BUDGET_STEPS: Final = 1_000_000
#: ... and this many more for every key it tries them on (so the budget is linear in the input)
LEGACY_BUDGET_STEPS_PER_KEY: Final = 1_000


class MatchBudgetExceeded(ValueError):
    """A recorded version 1 (Python ``re``) pattern used up its matcher's time budget."""


def _python_re_refusal(pattern: str) -> str | None:
    try:
        re.compile(pattern)
    except re.error as exc:
        return str(exc)
    except (RecursionError, OverflowError) as exc:
        return type(exc).__name__
    try:
        LegacyPattern(pattern)
    except (ValueError, RecursionError) as exc:  # pragma: no cover - what re parses, it takes
        return f"the version 1 matcher cannot read it: {exc}"
    return None


def _legacy_search(patterns: Sequence[str]) -> Callable[[str], bool] | None:
    if not patterns:
        return None
    compiled = [LegacyPattern(p) for p in patterns]
    budget = [LEGACY_BUDGET_STEPS]
    spent: list[MatchBudgetExceeded] = []

    def exceeded(pattern: str, key: str) -> MatchBudgetExceeded:
        if not spent:  # the first exhaustion is the one every later call reports
            spent.append(
                MatchBudgetExceeded(
                    f"matching the version 1 (Python re) pattern {pattern!r:.120} on a key "
                    f"of {len(key)} characters used up the matcher's budget "
                    f"({LEGACY_BUDGET_STEPS:,} steps plus {LEGACY_BUDGET_STEPS_PER_KEY:,} per "
                    "key tried): the pattern backtracks catastrophically"
                )
            )
        return MatchBudgetExceeded(*spent[0].args)

    def search(key: str) -> bool:
        if len(key) > MAX_PATTERN_KEY:
            return False
        if spent:
            raise exceeded(compiled[0].pattern, key)
        budget[0] += LEGACY_BUDGET_STEPS_PER_KEY
        for pattern in compiled:
            before = pattern.steps
            pattern.allowance = before + budget[0]
            try:
                found = pattern.search(key)
            except StepsSpent:
                raise exceeded(pattern.pattern, key) from None
            budget[0] -= pattern.steps - before
            if found:
                return True
        return False

    return search


RULES: Final = PatternRules(
    version=1,
    syntax="a Python regular expression",
    refusal=_python_re_refusal,
    searcher=_legacy_search,
)
