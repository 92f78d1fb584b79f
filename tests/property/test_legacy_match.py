"""Version 1 patterns: the step-counting matcher finds what ``re.search`` finds.

* for random Python ``re`` patterns (lookaround, backreferences, conditionals, atomic
  groups, possessive and lazy repetition, scoped flags) and random keys, the matcher of
  :mod:`agentfootprint.logformat.legacy_match` agrees with ``re.search`` whenever it finishes
  within its steps, and a pattern that backtracks exponentially runs out of them;
* the steps a search takes are a count, the same on every machine and every run.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from agentfootprint.logformat.legacy_match import LegacyPattern, StepsSpent
from examples_budget import scaled

KEY_CHARS = "aAbB_0 \n\u0130i\u212ak\u00e9"
LEAVES = ["a", "b", "A", "i", "k", ".", r"\d", r"\w", r"\s", r"\W", "[a-b]", "[^a]", r"\b",
          r"\B", "^", "$", r"\A", r"\Z", "(?:)", r"\u0130"]  # fmt: skip
WRAPS = ["({})", "(?:{})", "(?i:{})", "(?-i:{})", "(?a:{})", "(?s:{})", "(?m:{})", "(?={})",
         "(?!{})", "(?>{})", "(?:{})*", "(?:{})+", "(?:{})?", "(?:{})*?", "(?:{})+?",
         "(?:{}){{2}}", "(?:{}){{1,3}}?", "(?:{})*+", "(?:{})?+", "(?:{}){{0,2}}+"]  # fmt: skip
BEHIND = ["(?<=a)", "(?<!b)", "(?<=ab|ba)", r"(?<!\d)", "(?<=(a))"]


def python_patterns() -> st.SearchStrategy[str]:
    leaf = st.sampled_from(LEAVES + BEHIND)

    def extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.one_of(
            st.tuples(inner, inner).map("".join),
            st.tuples(inner, inner).map("|".join),
            st.tuples(st.sampled_from(WRAPS), inner).map(lambda t: t[0].format(t[1])),
        )

    body = st.recursive(leaf, extend, max_leaves=7)
    tail = st.sampled_from(["", r"\1", r"(?(1)a|b)", r"(?i:\1)", r"(?(1)\1)"])
    return st.tuples(st.sampled_from(["", "(?i)", "(?a)"]), body, tail).map("".join)


def compiles(pattern: str) -> bool:
    try:
        re.compile(pattern)
    except re.error:
        return False
    return True


@settings(max_examples=scaled(300))
@given(python_patterns(), st.lists(st.text(KEY_CHARS, max_size=7), min_size=1, max_size=5))
@example(r"(?i)(\u0130)\1", ["\u0130i", "\u0130I"])
@example(r"(?:(a)|b)*\1", ["aba", "bb"])
@example(r"(?:a|)*+b", ["aab"])
@example(r"(?:(?=(a))a)*\1", ["aaa"])
@example(r"(?<=(a))b\1", ["aba", "abb"])
@example("(?:)*", [""])
def test_the_matcher_agrees_with_re_search(pattern: str, keys: list[str]) -> None:
    if not compiles(pattern):  # (a backreference before its group, a lookbehind of no width)
        return
    matcher = LegacyPattern(pattern)
    for key in keys:
        matcher.allowance = matcher.steps + 200_000
        try:
            found = matcher.search(key)
        except StepsSpent:
            continue
        assert found == (re.search(pattern, key) is not None), (pattern, key)


@pytest.mark.parametrize(
    ("pattern", "key"),
    [("^(x|x)+$", "x" * 60 + "y"), ("^(a|aa)+$", "a" * 60 + "b"), ("^(a+)+$", "a" * 60 + "b"),
     (r"(\w+\s?)+$", "a" * 60 + "!")],
)  # fmt: skip
def test_exponential_backtracking_runs_out_of_steps(pattern: str, key: str) -> None:
    matcher = LegacyPattern(pattern)
    matcher.allowance = 1_000_000
    with pytest.raises(StepsSpent):
        matcher.search(key)
    assert matcher.steps == 1_000_001


def test_steps_are_a_count() -> None:
    """The same pattern and key take the same steps, every time."""
    counts = []
    for _ in range(3):
        matcher = LegacyPattern("(?i)(^|_)e-?mail($|_)")
        matcher.allowance = 10_000
        assert matcher.search("user_EMAIL") and not matcher.search("mailbox")
        counts.append(matcher.steps)
    assert counts == [64, 64, 64]
