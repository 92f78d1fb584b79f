"""The pattern subset a version 2 redaction policy is made with (log-format section 12.1).

RE2 "with default options" leaves an auditor guessing at program-size budgets, Unicode
tables, ``\\C`` and case folding. New policies therefore use a small subset of RE2 whose
meaning is fixed here, character by character: :func:`check_pattern` refuses anything else
(naming the construct and its position), and :func:`python_equivalent` writes the same
pattern as a flag-free Python ``re`` pattern that matches exactly the same keys, so an
auditor can match with either engine (``tests/property/test_pattern_subset.py`` proves the
two agree). Recorded policies are not checked against the subset: a log keeps verifying
under the patterns earlier writers accepted.

The subset: literals; the escapes ``\\t \\n \\r \\f \\v \\xHH`` and a backslash before ASCII
punctuation; ``.`` (anything but a line feed); classes ``[...]``/``[^...]`` of single
characters, ranges and ``\\d \\w \\s \\D \\W \\S`` (ASCII meaning); the anchors ``^ \\A``
(start of the key), ``$ \\z`` (end of the key), ``\\b \\B`` (ASCII word boundary); groups
``(...)``, ``(?:...)``, ``(?i:...)``; alternation; ``* + ?`` and ``{n}``, ``{n,}``,
``{n,m}`` (each may be lazy: a trailing ``?``) with counts up to :data:`MAX_COUNT`; the flag
``(?i)`` only at the very start. Under ``i``, only ASCII characters may be written: an ASCII
letter also matches its other case, ``k``/``K`` also U+212A (KELVIN SIGN) and ``s``/``S``
also U+017F (LATIN SMALL LETTER LONG S), as in RE2's Unicode simple case folding.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass
from typing import Final

__all__ = [
    "MAX_COUNT",
    "MAX_NESTING",
    "MAX_PATTERN_LENGTH",
    "MAX_SIZE",
    "PatternRefused",
    "check_pattern",
    "python_equivalent",
]

#: longest pattern, in code points
MAX_PATTERN_LENGTH: Final = 500
#: largest count in ``{n}``, ``{n,}``, ``{n,m}``
MAX_COUNT: Final = 100
#: most items once counted repetitions are written out (``x{n,m}`` counts ``x`` m times,
#: ``x{n,}`` n + 1 times); with :data:`MAX_PATTERN_LENGTH` it bounds RE2's program size
MAX_SIZE: Final = 1000
#: deepest nesting of groups
MAX_NESTING: Final = 32

_MAX_CODE_POINT: Final = 0x10FFFF
_PUNCTUATION: Final = frozenset(string.punctuation) - {"_"}
_CONTROL_ESCAPES: Final = {"t": 0x09, "n": 0x0A, "r": 0x0D, "f": 0x0C, "v": 0x0B}
_WORD: Final = ((0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A))
_PERL: Final = {
    "d": ((0x30, 0x39),),
    "s": ((0x09, 0x0A), (0x0C, 0x0D), (0x20, 0x20)),
    "w": _WORD,
}
#: RE2's case folding of ASCII letters reaches these two code points beyond ASCII
_FOLD_EXTRA: Final = {0x6B: 0x212A, 0x73: 0x017F}
_WORD_CLASS: Final = "[0-9A-Za-z_]"
_BOUNDARY: Final = f"(?:(?<={_WORD_CLASS})(?!{_WORD_CLASS})|(?<!{_WORD_CLASS})(?={_WORD_CLASS}))"
_NOT_BOUNDARY: Final = (
    f"(?:(?<={_WORD_CLASS})(?={_WORD_CLASS})|(?<!{_WORD_CLASS})(?!{_WORD_CLASS}))"
)
_ANCHORS: Final = {"A": r"\A", "z": r"\Z", "b": _BOUNDARY, "B": _NOT_BOUNDARY}

Ranges = list[tuple[int, int]]


class PatternRefused(ValueError):
    """A pattern outside the version 2 subset: ``construct`` at ``position`` (0-based)."""

    def __init__(self, pattern: str, position: int, construct: str) -> None:
        self.pattern = pattern
        self.position = position
        self.construct = construct
        super().__init__(
            f"pattern {pattern!r:.120} at position {position}: {construct} is outside the "
            "version 2 pattern subset (docs/log-format.md section 12.1)"
        )


def check_pattern(pattern: str) -> None:
    """Raise :class:`PatternRefused` unless ``pattern`` is in the subset."""
    _Parser(pattern).parse()


def python_equivalent(pattern: str) -> str:
    """A Python ``re`` pattern, without flags, that ``re.search`` finds in exactly the keys
    where RE2 finds ``pattern`` (which must be in the subset)."""
    return _Parser(pattern).parse()


@dataclass(slots=True)
class _Piece:
    text: str  # the Python translation
    size: int  # items once counted repetitions are written out (at least 1)
    repeatable: bool  # an anchor is not


class _Parser:
    """Recursive descent over the subset's grammar, writing the Python translation."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self.at = 0
        self.fold = False
        self.depth = 0

    def refuse(self, construct: str, position: int | None = None) -> PatternRefused:
        return PatternRefused(self.pattern, self.at if position is None else position, construct)

    def parse(self) -> str:
        p = self.pattern
        if not isinstance(p, str) or not p:
            raise PatternRefused(str(p), 0, "an empty pattern")
        if len(p) > MAX_PATTERN_LENGTH:
            raise self.refuse(f"a pattern longer than {MAX_PATTERN_LENGTH} characters", 0)
        for i, c in enumerate(p):
            if 0xD800 <= ord(c) <= 0xDFFF:
                raise self.refuse("a lone surrogate", i)
        if p.startswith("(?i)"):
            self.fold, self.at = True, 4
        body = self.alternation()
        if self.at < len(p):  # only an unmatched ")" stops the top level early
            raise self.refuse("an unmatched ')'")
        if body.size > MAX_SIZE:
            raise self.refuse(
                f"a pattern of {body.size} items once its counted repetitions are written "
                f"out (at most {MAX_SIZE})",
                0,
            )
        return body.text

    def peek(self, ahead: int = 0) -> str:
        i = self.at + ahead
        return self.pattern[i] if i < len(self.pattern) else ""

    def alternation(self) -> _Piece:
        branches = [self.concatenation()]
        while self.peek() == "|":
            self.at += 1
            branches.append(self.concatenation())
        if len(branches) == 1:
            return branches[0]
        size = sum(b.size for b in branches) + len(branches) - 1
        return _Piece("(?:" + "|".join(b.text for b in branches) + ")", size, True)

    def concatenation(self) -> _Piece:
        parts: list[_Piece] = []
        while self.peek() not in ("", "|", ")"):
            parts.append(self.quantified(self.atom()))
        if not parts:
            return _Piece("", 1, True)
        return _Piece("".join(p.text for p in parts), sum(p.size for p in parts), True)

    def quantified(self, piece: _Piece) -> _Piece:
        start = self.at
        c = self.peek()
        if c in ("*", "+", "?"):
            self.at += 1
            times, text = 1, c
        elif c == "{":
            low, high = self.counts()
            times = max(high if high is not None else low + 1, 1)
            text = self.pattern[start : self.at]
        else:
            return piece
        if not piece.repeatable:
            raise self.refuse("a repetition of an anchor", start)
        if self.peek() == "?":
            self.at += 1
            text += "?"
        if self.peek() in ("*", "+", "?", "{"):
            what = "a possessive repetition" if self.peek() == "+" else "a repeated repetition"
            raise self.refuse(what)
        return _Piece(f"(?:{piece.text}){text}", piece.size * times, True)

    def counts(self) -> tuple[int, int | None]:
        start = self.at
        found = re.compile(r"\{([0-9]+)(,([0-9]*))?\}").match(self.pattern, self.at)
        if found is None:
            raise self.refuse("a '{' that is not a repetition {n}, {n,} or {n,m} (write \\{)")
        self.at = found.end()
        low = int(found.group(1))
        high = low if found.group(2) is None else (int(found.group(3)) if found.group(3) else None)
        if max(low, high or 0) > MAX_COUNT:
            raise self.refuse(f"a repetition count over {MAX_COUNT}", start)
        if high is not None and high < low:
            raise self.refuse("a repetition {n,m} with m < n", start)
        return low, high

    def atom(self) -> _Piece:
        c, start = self.peek(), self.at
        if c == "(":
            return self.group()
        if c == "[":
            return _Piece(_class_text(self.char_class()), 1, True)
        self.at += 1
        if c == ".":
            return _Piece(r"[^\n]", 1, True)
        if c == "^":
            return _Piece(r"\A", 1, False)
        if c == "$":
            return _Piece(r"\Z", 1, False)
        if c in ("*", "+", "?", "{"):
            raise self.refuse(f"a repetition {c!r} with nothing to repeat", start)
        if c in ("]", "}"):
            raise self.refuse(f"an unescaped {c!r} (write \\{c})", start)
        if c == "\\":
            e = self.peek()
            if e in _ANCHORS:
                self.at += 1
                return _Piece(_ANCHORS[e], 1, False)
            if e in _PERL or e.lower() in _PERL:
                self.at += 1
                return _Piece(_class_text(self.perl(e)), 1, True)
            return self.literal(self.escape(start), start)
        return self.literal(ord(c), start)

    def literal(self, code: int, start: int | None = None) -> _Piece:
        if self.fold:
            if code > 0x7F:
                raise self.refuse("a non-ASCII character under (?i)", start)
            folded = _folded([(code, code)])
            if folded != [(code, code)]:
                return _Piece(_class_text(folded), 1, True)
        return _Piece(re.escape(chr(code)), 1, True)

    def escape(self, start: int) -> int:
        """The character a backslash escape (after ``\\``, at ``self.at``) stands for."""
        e = self.peek()
        if e == "":
            raise self.refuse("a trailing backslash", start)
        self.at += 1
        if e in _PUNCTUATION:
            return ord(e)
        if e in _CONTROL_ESCAPES:
            return _CONTROL_ESCAPES[e]
        if e == "x":
            digits = self.pattern[self.at : self.at + 2]
            if len(digits) == 2 and all(d in string.hexdigits for d in digits):
                self.at += 2
                return int(digits, 16)
            raise self.refuse("an escape \\x not followed by two hex digits (\\xHH)", start)
        names = {
            "p": "a Unicode class \\p",
            "P": "a Unicode class \\P",
            "C": "the escape \\C (any byte)",
            "Q": "a quoted run \\Q...\\E",
            "E": "the escape \\E",
            "Z": "the escape \\Z (RE2 refuses it; write \\z or $)",
        }
        if e.isdigit():
            raise self.refuse("a backreference or octal escape \\" + e, start)
        raise self.refuse(names.get(e, f"the escape {chr(92) + e!r}"), start)

    def perl(self, e: str) -> Ranges:
        ranges = _folded(list(_PERL[e.lower()])) if self.fold else list(_PERL[e.lower()])
        return _complement(ranges) if e.isupper() else ranges

    def group(self) -> _Piece:
        start = self.at
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise self.refuse(f"groups nested more than {MAX_NESTING} deep", start)
        saved = self.fold
        if self.pattern.startswith("(?:", start):
            self.at += 3
        elif self.pattern.startswith("(?i:", start):
            self.at += 4
            self.fold = True
        elif self.peek(1) == "?":
            kinds = {
                "=": "a lookahead (?=",
                "!": "a negative lookahead (?!",
                "<": "a lookbehind or named group (?<",
                "P": "a named group (?P",
                "#": "a comment (?#",
                ">": "an atomic group (?>",
            }
            kind = kinds.get(self.peek(2), "a flag group (only (?i) at the start, or (?i:...))")
            raise self.refuse(kind, start)
        else:
            self.at += 1
        inner = self.alternation()
        if self.peek() != ")":
            raise self.refuse("a '(' without its ')'", start)
        self.at += 1
        self.fold = saved
        self.depth -= 1
        return _Piece(f"(?:{inner.text})", inner.size, True)

    def char_class(self) -> Ranges:
        start = self.at
        self.at += 1
        negated = self.peek() == "^"
        if negated:
            self.at += 1
        ranges: Ranges = []
        first = True
        while True:
            c, at = self.peek(), self.at
            if c == "":
                raise self.refuse("a '[' without its ']'", start)
            if c == "]":
                if first:
                    raise self.refuse("an empty class or a ']' first in it (write \\])", at)
                self.at += 1
                break
            first = False
            if c == "[":
                raise self.refuse("a '[' inside a class (write \\[; no [:alpha:] classes)", at)
            if c == "\\" and (self.peek(1) in _PERL or self.peek(1).lower() in _PERL):
                self.at += 2
                ranges.extend(self.perl(self.pattern[at + 1]))
                continue
            low = self.class_char()
            if self.peek() == "-" and self.peek(1) not in ("]", ""):
                self.at += 1
                high = self.class_char()
                if high < low:
                    raise self.refuse("a range whose end comes before its start", at)
            else:
                high = low
            if self.fold and high > 0x7F:
                raise self.refuse("a non-ASCII character under (?i)", at)
            ranges.append((low, high))
        ranges = _folded(ranges) if self.fold else _normal(ranges)
        return _complement(ranges) if negated else ranges

    def class_char(self) -> int:
        c, at = self.peek(), self.at
        if c == "\\":
            self.at += 1
            if self.peek() in ("b", "B", "A", "z"):
                raise self.refuse("an anchor or \\b inside a class", at)
            return self.escape(at)
        if c == "[":
            raise self.refuse("a '[' inside a class (write \\[; no [:alpha:] classes)", at)
        self.at += 1
        return ord(c)


def _normal(ranges: Ranges) -> Ranges:
    """Sorted, disjoint, non-adjacent ranges."""
    out: Ranges = []
    for low, high in sorted(ranges):
        if out and low <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], high))
        else:
            out.append((low, high))
    return out


def _folded(ranges: Ranges) -> Ranges:
    """Ranges (ASCII) with RE2's case folding: the other case of every ASCII letter, and
    U+212A for k, U+017F for s."""
    extra: Ranges = []
    for low, high in ranges:
        for code in range(low, min(high, 0x7F) + 1):
            c = chr(code)
            if c.isascii() and c.isalpha():
                other = ord(c.swapcase())
                extra.append((other, other))
                more = _FOLD_EXTRA.get(ord(c.lower()))
                if more is not None:
                    extra.append((more, more))
    return _normal([*ranges, *extra])


def _complement(ranges: Ranges) -> Ranges:
    out: Ranges = []
    at = 0
    for low, high in _normal(ranges):
        if low > at:
            out.append((at, low - 1))
        at = high + 1
    if at <= _MAX_CODE_POINT:
        out.append((at, _MAX_CODE_POINT))
    return out


def _class_text(ranges: Ranges) -> str:
    if not ranges:
        return "(?!)"
    items = "".join(
        f"\\U{low:08x}" if low == high else f"\\U{low:08x}-\\U{high:08x}" for low, high in ranges
    )
    return f"[{items}]"
