"""The version 2 pattern subset (log-format section 12.1): RE2 and Python ``re`` agree on it.

* every pattern the subset's grammar makes is accepted, compiles with RE2, and RE2's search
  and ``re.search`` of :func:`python_equivalent` agree on every key (a differential
  property over random patterns and keys of the characters where engines differ);
* every single-character item, under ``(?i)`` and without, matches the same code points in
  both engines (all of them were checked once; the test checks where folding reaches);
* the largest patterns the limits allow compile with RE2 into a bounded program (counted
  in RE2 instructions, not time);
* constructs outside the subset are refused, naming the construct and its position.
"""

from __future__ import annotations

import re
import string

import pytest
import re2
from hypothesis import example, given, settings
from hypothesis import strategies as st

import agentfootprint as af
from agentfootprint.store.pattern_subset import (
    MAX_COUNT,
    MAX_PATTERN_LENGTH,
    MAX_SIZE,
    PatternRefused,
    check_pattern,
    python_equivalent,
)
from examples_budget import scaled

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False

#: characters where case folding, word classes, line ends and UTF-8 lengths differ
KEY_CHARS = "aAbkKsSiI_0-9 \n\t\x0b\u212a\u017f\u0130\u0131\u00e9\u00c9\u4e2d\U0001f600.$"
ATOMS = [
    "a",
    "k",
    "S",
    "i",
    "_",
    "0",
    "-",
    "\u00e9",
    ".",
    r"\d",
    r"\w",
    r"\s",
    r"\D",
    r"\W",
    r"\S",
    r"\.",
    r"\$",
    r"\n",
    r"\x6B",
    "[a-k]",
    "[^s]",
    r"[\w\-]",
    r"[^\W\d]",
    "[I-i]",
    r"[\x00-\x2f]",
]
#: characters with a meaning of their own in a pattern
SPECIAL = "\\[](){}|*+?.^$"
ANCHORS = ["^", "$", r"\A", r"\z", r"\b", r"\B"]
QUANTIFIERS = ["*", "+", "?", "*?", "+?", "??", "{2}", "{0,3}", "{1,}", "{2,3}?"]


def _fold_safe(atom: str) -> bool:
    return atom.isascii()


def patterns() -> st.SearchStrategy[str]:
    """Patterns of the subset's grammar (no non-ASCII character under ``(?i)``: those are
    made apart, without the flag)."""
    leaf = st.sampled_from([a for a in ATOMS if _fold_safe(a)] + ANCHORS)

    def extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.one_of(
            st.tuples(inner, inner).map("".join),
            st.tuples(inner, inner).map("|".join),
            st.tuples(st.sampled_from(["(", "(?:", "(?i:"]), inner).map(lambda t: f"{t[0]}{t[1]})"),
            st.tuples(inner, st.sampled_from(QUANTIFIERS)).map(lambda t: f"(?:{t[0]}){t[1]}"),
        )

    body = st.recursive(leaf, extend, max_leaves=8)
    return st.tuples(st.sampled_from(["", "(?i)"]), body).map("".join)


def agree(pattern: str, key: str) -> None:
    check_pattern(pattern)
    found = re2.compile(pattern, _OPTIONS).search(key) is not None
    assert found == (re.search(python_equivalent(pattern), key) is not None), (pattern, key)


@settings(max_examples=scaled(300))
@given(patterns(), st.lists(st.text(KEY_CHARS, max_size=8), min_size=1, max_size=6))
@example("(?i)k", ["\u212a"])
@example("(?i)s$", ["\u017f", "s\n"])
@example("(?i)i", ["\u0130", "\u0131"])  # Python's (?i)i also takes these two; RE2 does not
@example(r"\b", ["\u00e9", "\u212a"])
@example(r"(?i)\w", ["\u212a", "\u0130"])
@example(r"\s", ["\x0b"])  # RE2's \s has no vertical tab, Python's has
@example("a$", ["a\n"])  # RE2's $ is the end of the key, Python's also before a final \n
def test_re2_and_the_python_equivalent_agree(pattern: str, keys: list[str]) -> None:
    for key in keys:
        agree(pattern, key)


@given(
    st.text(st.characters(codec="utf-8", exclude_characters=SPECIAL), min_size=1),
    st.text(KEY_CHARS + "\u00e9\u4e2d", max_size=6),
)
def test_literal_text_without_the_flag_agrees(text: str, key: str) -> None:
    """Literal characters of any script (without ``(?i)``)."""
    agree(text, key)
    agree(text, key + text)


ITEMS = [
    r"\d", r"\w", r"\s", r"\D", r"\W", r"\S", ".", "[a-z]", "[^a-z]", r"[\W]", r"[^\W]",
    r"[^\w\d]", r"[\Sa]", r"[^\D]", "[k]", "[^s]", "[^K]", r"[\x00-\x7f]", r"[^\x00-\x7f]",
    "[_]", "[@-`]", "[Z-a]", r"\x6b", "[-a]", "[a-]", "\u00e9", "[\u00e0-\u00ff]",
]  # fmt: skip


@pytest.fixture(scope="module")
def characters() -> str:
    """Every code point below U+0600 and from U+1E00 to U+21FF (Latin, Greek, Cyrillic and
    the letter-like symbols, where case folding reaches from ASCII), and a sample of the
    rest: every 509th code point, the last one, and none of the surrogates."""
    codes = [*range(0x600), *range(0x1E00, 0x2200), *range(0x2200, 0x110000, 509), 0x10FFFF]
    return "".join(chr(c) for c in codes if not 0xD800 <= c <= 0xDFFF)


def _matched(compiled: re.Pattern[str] | re2._Regexp, text: str) -> set[str]:
    return {m.group() for m in compiled.finditer(text)}


def test_every_single_character_item_matches_the_same_code_points(characters: str) -> None:
    printable = [c for c in string.printable if not c.isspace()]
    items = ITEMS + [re.escape(c) if c != "_" else c for c in printable]
    for flag in ("", "(?i)"):
        for item in items:
            pattern = flag + item
            try:
                check_pattern(pattern)
            except PatternRefused:
                assert flag and not item.isascii(), pattern
                continue
            ours = _matched(re.compile(python_equivalent(pattern)), characters)
            theirs = _matched(re2.compile(pattern, _OPTIONS), characters)
            assert ours == theirs, (pattern, sorted(ours ^ theirs)[:5])


@pytest.mark.parametrize(
    "pattern",
    [
        "(?:" + "(?:.){10}" * 10 + ")",  # 100 dots
        "(?i)(?:(?:[^k]){10}){10}" + "(?:[^\\W\\d]){100}" * 8,
        "(?:(?:(?:.)" + "{10}){10})" + "{10}",
        "(?i)" + "[^a-z]{100}" * 9 + "\\W{99}",
        "(?:\u00e9|[^\u00e0-\u00ff]){100}" + "\\S{100}" * 7,
    ],
)
def test_the_largest_patterns_compile_into_a_bounded_program(pattern: str) -> None:
    """Counted, not timed: the limits keep RE2's program small, far below what RE2's default
    memory budget allows (a pattern of the subset always compiles with default options)."""
    check_pattern(pattern)
    assert len(pattern) <= MAX_PATTERN_LENGTH
    assert re2.compile(pattern, _OPTIONS).programsize < 60_000


@pytest.mark.parametrize(
    ("pattern", "position", "words"),
    [
        ("(?<=x)y", 0, "lookbehind"),
        ("a(?=x)", 1, "lookahead"),
        ("(?P<n>a)", 0, "named group"),
        (r"(a)\1", 3, "backreference"),
        (r"\pL", 0, "Unicode class"),
        (r"\C", 0, "\\C"),
        (r"\Qa.b\E", 0, "\\Q"),
        (r"x\Z", 1, "\\Z"),
        ("(?m)^a", 0, "flag group"),
        ("a(?i)b", 1, "flag group"),
        ("(?s:.)", 0, "flag group"),
        ("a*+", 2, "possessive"),
        ("a**", 2, "repeated repetition"),
        ("*a", 0, "nothing to repeat"),
        ("^*", 1, "repetition of an anchor"),
        ("a{,3}", 1, "'{'"),
        ("a{3,1}", 1, "m < n"),
        (f"a{{{MAX_COUNT + 1}}}", 1, f"count over {MAX_COUNT}"),
        ("(?:a{100}){11}", 0, f"at most {MAX_SIZE}"),
        ("[[:alpha:]]", 1, "'[' inside a class"),
        ("[]a]", 1, "empty class"),
        ("[z-a]", 1, "end comes before its start"),
        ("(?i)\u00e9", 4, "non-ASCII character under (?i)"),
        ("(?i:[a-\u00e9])", 5, "non-ASCII character under (?i)"),
        ("(a", 0, "without its ')'"),
        ("a)", 1, "unmatched ')'"),
        ("[ab", 0, "without its ']'"),
        ("a]", 1, "unescaped ']'"),
        ("\\", 0, "trailing backslash"),
        (r"\x4", 0, "\\xHH"),
        ("(" * 33 + "a" + ")" * 33, 32, "nested more than 32"),
        ("a" * (MAX_PATTERN_LENGTH + 1), 0, "longer than"),
        ("\ud800", 0, "lone surrogate"),
    ],
)
def test_constructs_outside_the_subset_are_refused(pattern: str, position: int, words: str) -> None:
    with pytest.raises(PatternRefused, match=re.escape(words)) as caught:
        check_pattern(pattern)
    assert caught.value.position == position and caught.value.pattern == pattern
    with pytest.raises(af.UsageError, match=re.escape(words)):
        af.RedactionPolicy(patterns=[pattern])
