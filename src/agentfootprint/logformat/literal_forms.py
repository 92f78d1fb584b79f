"""The byte strings a literal (a token, a password, an address) takes once an encoder has
written it, and a matcher that finds any of them in bytes.

A secret rarely reaches evidence as its own bytes only: a tool returns it inside JSON (escaped,
perhaps twice), a header carries it in base64, a URL percent-encoded, a debug dump in hex.
:func:`literal_forms` lists each form as the *needle* that any text holding it must contain:
for base64, where the literal's bytes may start at any of three offsets of a 3-byte group, the
characters that depend on the literal's bytes alone, at each offset. :class:`LiteralMatcher`
finds every (literal, form) a byte string holds. Both ``agentfootprint scan`` and the writer's
guards search with them, so what one finds the other would have refused.

What no form catches (docs/redaction.md, "What a literal search cannot see"): a value
compressed, encrypted or hashed; base64 wrapped across lines; a value split across rows,
tokens or chunks; a paraphrase or a change of case; encodings not listed here (UTF-16,
quoted-printable, punycode).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import urllib.parse
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Final

import orjson

from agentfootprint.errors import UsageError

__all__ = [
    "FORMS",
    "MIN_LITERAL_BYTES",
    "Form",
    "LiteralMatcher",
    "MatchedForm",
    "literal_forms",
]

#: the shortest literal searched for, in UTF-8 bytes: a shorter one is ordinary text (and its
#: base64 cores would be two or three characters long, found everywhere)
MIN_LITERAL_BYTES: Final = 6
#: every form's name, in the order :func:`literal_forms` gives them
FORMS: Final = (
    "raw",
    "json",
    "json-ascii",
    "json-slash",
    "json-html",
    "json-twice",
    "base64",
    "base64url",
    "url",
    "url-plus",
    "url-lower",
    "hex",
    "hex-upper",
)
_HTML_SAFE: Final = {ord("<"): "\\u003c", ord(">"): "\\u003e", ord("&"): "\\u0026"}


@dataclass(frozen=True, slots=True, kw_only=True)
class Form:
    """One form of a literal: its name (one of :data:`FORMS`) and the bytes any text holding
    the literal in that form contains."""

    name: str
    needle: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class MatchedForm:
    """A literal found: which one (its index in the matcher's list) and in which form."""

    literal: int
    form: str


def _json_inner(text: str) -> str:
    """``text`` as a canonical JSON string (RFC 8785, as the log writes it), quotes off."""
    return orjson.dumps(text).decode("utf-8")[1:-1]


def _base64_cores(data: bytes, alphabet: bytes | None) -> list[bytes]:
    """The characters of ``data``'s base64 that depend on its bytes alone, for each of the
    three offsets at which ``data`` can start inside a 3-byte group."""
    cores = []
    for offset in range(3):
        encoded = base64.b64encode(bytes(offset) + data, altchars=alphabet)
        first = -(-8 * offset // 6)  # the first character all of whose bits are data's
        last = 8 * (offset + len(data)) // 6  # one past the last such character
        cores.append(encoded[first:last])
    return cores


def literal_forms(literal: str) -> tuple[Form, ...]:
    """Every form of ``literal`` (:data:`FORMS`), each needle once: a form that writes the
    same bytes as an earlier one is left out (a plain token is the same in JSON as raw).

    A :class:`UsageError` for a literal that is not text, has a lone surrogate, or is shorter
    than :data:`MIN_LITERAL_BYTES` in UTF-8 (the message never repeats the literal).
    """
    if not isinstance(literal, str):
        raise UsageError(f"a literal is text, got {type(literal).__name__}", option="literals")
    try:
        raw = literal.encode("utf-8")
    except UnicodeEncodeError:
        raise UsageError(
            "a literal is not Unicode text (it holds a lone surrogate)", option="literals"
        ) from None
    if len(raw) < MIN_LITERAL_BYTES:
        raise UsageError(
            f"a literal of {len(raw)} bytes is shorter than {MIN_LITERAL_BYTES}: its forms "
            "would match ordinary text",
            option="literals",
        )
    inner = _json_inner(literal)
    candidates: list[tuple[str, bytes]] = [
        ("raw", raw),
        ("json", inner.encode("utf-8")),
        ("json-ascii", json.dumps(literal)[1:-1].encode("ascii")),
        ("json-slash", inner.replace("/", "\\/").encode("utf-8")),
        ("json-html", inner.translate(_HTML_SAFE).encode("utf-8")),
        ("json-twice", _json_inner(inner).encode("utf-8")),
    ]
    candidates += [("base64", core) for core in _base64_cores(raw, None)]
    candidates += [("base64url", core) for core in _base64_cores(raw, b"-_")]
    quoted = urllib.parse.quote(raw, safe="")
    candidates += [
        ("url", quoted.encode("ascii")),
        ("url", urllib.parse.quote(raw).encode("ascii")),  # "/" kept, as a path keeps it
        ("url-plus", urllib.parse.quote_plus(raw, safe="").encode("ascii")),
        ("url-lower", re.sub("%[0-9A-F]{2}", lambda m: m.group(0).lower(), quoted).encode()),
        ("hex", binascii.hexlify(raw)),
        ("hex-upper", binascii.hexlify(raw).upper()),
    ]
    seen: set[bytes] = set()
    forms = []
    for name, needle in candidates:
        if needle and needle not in seen:
            seen.add(needle)
            forms.append(Form(name=name, needle=needle))
    return tuple(forms)


class LiteralMatcher:
    """Finds which of ``literals`` a byte string holds, in which forms.

    One regular expression of every needle says whether a string holds any (most hold none);
    only then is each needle looked for, so that literals sharing bytes are all reported.
    """

    __slots__ = ("_any", "_needles", "count", "longest")

    def __init__(self, literals: Sequence[str]) -> None:
        if isinstance(literals, str | bytes) or not literals:
            raise UsageError("give at least one literal to search for", option="literals")
        needles: dict[bytes, list[MatchedForm]] = {}
        for index, literal in enumerate(literals):
            for form in literal_forms(literal):
                needles.setdefault(form.needle, []).append(
                    MatchedForm(literal=index, form=form.name)
                )
        self.count = len(literals)
        #: needle -> what finding it means, the longest needles first
        self._needles = dict(sorted(needles.items(), key=lambda item: -len(item[0])))
        self._any = re.compile(b"|".join(re.escape(needle) for needle in self._needles))
        #: the longest needle's length: a stream read in parts overlaps them by one less
        self.longest = max(map(len, self._needles))

    @property
    def forms(self) -> int:
        """How many distinct needles are searched for."""
        return len(self._needles)

    def find(self, data: bytes) -> list[MatchedForm]:
        """Every (literal, form) ``data`` holds, each once, the longest needles' first."""
        if self._any.search(data) is None:
            return []
        found = (
            match for needle, means in self._needles.items() if needle in data for match in means
        )
        return list(dict.fromkeys(found))  # a form of several needles (base64's alignments) once

    def offsets(self, data: bytes) -> Iterator[tuple[int, int, MatchedForm]]:
        """``(start, end, match)`` for every occurrence of every needle in ``data``
        (overlapping occurrences included)."""
        if self._any.search(data) is None:
            return
        for needle, means in self._needles.items():
            at = data.find(needle)
            while at != -1:
                for found in means:
                    yield at, at + len(needle), found
                at = data.find(needle, at + 1)
