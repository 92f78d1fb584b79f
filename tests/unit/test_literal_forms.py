"""The forms a literal takes once encoded, and the matcher that finds them: every encoder's
output around a literal holds one of its needles (Hypothesis), and text without it holds none."""

from __future__ import annotations

import base64
import binascii
import json
import re
import urllib.parse
from collections.abc import Callable

import orjson
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from agentfootprint.errors import UsageError
from agentfootprint.logformat.literal_forms import (
    FORMS,
    MIN_LITERAL_BYTES,
    LiteralMatcher,
    literal_forms,
)

#: text a literal can be: any Unicode scalar values (no lone surrogate), 6 UTF-8 bytes or more
LITERALS = st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=40).filter(
    lambda text: len(text.encode("utf-8")) >= MIN_LITERAL_BYTES
)
AROUND = st.text(st.characters(exclude_categories=("Cs",)), max_size=20)


def _go_json(text: str) -> bytes:
    """Go's encoding/json: canonical escapes, and <, >, & as \\u003c, \\u003e, \\u0026."""
    inner = orjson.dumps(text).decode()
    for char, escape in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026")):
        inner = inner.replace(char, escape)
    return inner.encode()


#: an encoder a tool or a library applies to a whole text (the literal inside it)
ENCODERS: dict[str, Callable[[str], bytes]] = {
    "raw": lambda text: text.encode(),
    "json (orjson, the log's canonical form)": lambda text: orjson.dumps(text),
    "json (Python, ensure_ascii)": lambda text: json.dumps(text).encode(),
    "json with \\/": lambda text: orjson.dumps(text).replace(b"/", b"\\/"),
    "json (Go, HTML-safe)": _go_json,
    "json inside json": lambda text: orjson.dumps(orjson.dumps(text).decode()),
    "base64": lambda text: base64.b64encode(text.encode()),
    "base64url": lambda text: base64.urlsafe_b64encode(text.encode()),
    "url": lambda text: urllib.parse.quote(text, safe="").encode(),
    "url, / kept": lambda text: urllib.parse.quote(text).encode(),
    "url with +": lambda text: urllib.parse.quote_plus(text).encode(),
    "url, lowercase escapes": lambda text: re.sub(
        "%[0-9A-F]{2}", lambda m: m.group(0).lower(), urllib.parse.quote(text, safe="")
    ).encode(),
    "hex": lambda text: binascii.hexlify(text.encode()),
    "hex, uppercase": lambda text: binascii.hexlify(text.encode()).upper(),
}


@pytest.mark.parametrize("encoder", sorted(ENCODERS))
@given(literal=LITERALS, before=AROUND, after=AROUND)
@example(literal='quote " and \\ back', before="", after="")
@example(literal="tab\tnew\nline", before="x", after="y")
@example(literal="émoji 😀 ünïcode", before="prefix ", after=" suffix")
@example(literal="a/b?c=d&e<f>", before="https://h/", after="#frag")
@example(literal="sk-live-0123456789abcdef", before="Bearer ", after="")
@example(literal="\u2028line sep\u2029", before="", after="")
def test_every_encoding_around_a_literal_is_found(
    encoder: str, literal: str, before: str, after: str
) -> None:
    encoded = ENCODERS[encoder](before + literal + after)
    found = LiteralMatcher([literal]).find(encoded)
    assert found, f"{encoder}: not found"
    assert {match.literal for match in found} == {0}


@given(literal=LITERALS, prefix=st.binary(max_size=5), suffix=st.binary(max_size=5))
def test_base64_at_any_alignment(literal: str, prefix: bytes, suffix: bytes) -> None:
    data = prefix + literal.encode() + suffix
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        assert LiteralMatcher([literal]).find(encode(data))


@given(literal=LITERALS)
def test_each_needle_once_and_forms_named(literal: str) -> None:
    forms = literal_forms(literal)
    needles = [form.needle for form in forms]
    assert len(needles) == len(set(needles))
    assert forms[0].name == "raw" and forms[0].needle == literal.encode()
    assert all(form.name in FORMS and form.needle for form in forms)


@given(literals=st.lists(LITERALS, min_size=1, max_size=5, unique=True), filler=AROUND)
def test_every_literal_of_a_list_is_reported(literals: list[str], filler: str) -> None:
    """Literals sharing bytes (one inside another) are each reported, not the first alone."""
    text = filler.join(literals).encode()
    found = LiteralMatcher(literals).find(text)
    assert {match.literal for match in found} == set(range(len(literals)))


def test_a_near_miss_is_not_found() -> None:
    matcher = LiteralMatcher(["sk-live-0123456789abcdef"])
    near = [
        b"sk-live-0123456789abcdeF",
        b"sk-live-0123456789abcde",
        base64.b64encode(b"sk-live-0123456789abcdeX")[:10],
        binascii.hexlify(b"sk-live-0123456789abcd"),
        b'{"token":"sk-live-0123456789abcd ef"}',
    ]
    for text in near:
        assert matcher.find(text) == [], text
    assert matcher.find(b"nothing here at all") == []


def test_offsets_give_every_occurrence_with_its_end() -> None:
    matcher = LiteralMatcher(["abcabc"])
    hits = [
        (start, end) for start, end, match in matcher.offsets(b"abcabcabc") if match.form == "raw"
    ]
    assert hits == [(0, 6), (3, 9)]


@pytest.mark.parametrize(
    ("literals", "fragment"),
    [
        ([], "at least one literal"),
        ("a-string-not-a-list", "at least one literal"),
        (["q7x9z"], "shorter than 6"),
        (["ok-literal", "q7x9"], "shorter than 6"),
        (["lone \ud800 surrogate"], "lone surrogate"),
        ([b"bytes-literal"], "a literal is text"),
    ],
)
def test_refused_literals_are_named_without_their_text(literals: object, fragment: str) -> None:
    with pytest.raises(UsageError) as raised:
        LiteralMatcher(literals)  # type: ignore[arg-type]
    assert fragment in str(raised.value)
    assert raised.value.option == "literals"
    if isinstance(literals, list):
        for literal in literals:
            if isinstance(literal, str) and len(literal) > 3:
                assert literal not in str(raised.value)


def test_six_utf8_bytes_is_enough_even_in_two_characters() -> None:
    assert literal_forms("ééé")  # 3 characters, 6 bytes
    with pytest.raises(UsageError):
        literal_forms("éé")
