"""Differential tests: ``canon`` against the ``rfc8785`` reference implementation.

``canon`` writes a value with ``orjson`` (sorted keys) when ``check_ijson`` says the fast
path applies: no floats and every object key's characters below U+D800. These properties
show the fast path gives the same bytes as ``rfc8785.dumps`` wherever it is taken. They
also show that the slow path is taken everywhere else and that canonical bytes
round-trip through ``parse``.
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson
import pytest
import rfc8785
from hypothesis import example, given, settings
from hypothesis import strategies as st

from agentfootprint.errors import CanonicalFormError, VerificationError
from agentfootprint.logformat.canonical import (
    MAX_DEPTH,
    MAX_SAFE_INT,
    canon,
    check_ijson,
    parse,
    parse_canonical,
)
from agentfootprint.verify.body_checks import RunCheck
from agentfootprint.verify.verifier import Verifier
from examples_budget import scaled

EXAMPLES = settings(max_examples=scaled(300), deadline=None)


def _valid_text(text: str) -> bool:
    """True when ``text`` has no lone surrogate (it encodes as UTF-8)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


SAFE_INTS = st.integers(min_value=-MAX_SAFE_INT, max_value=MAX_SAFE_INT)
UNSAFE_INTS = st.integers(min_value=MAX_SAFE_INT + 1) | st.integers(max_value=-MAX_SAFE_INT - 1)
EDGE_INTS = st.sampled_from([0, 1, -1, MAX_SAFE_INT, -MAX_SAFE_INT, 2**31, 2**32, -(2**52)])
FLOATS = st.floats(allow_nan=False, allow_infinity=False)
# Default st.text() draws no surrogates (category Cs); the filter is a guard.
TEXT = st.text().filter(_valid_text)

# Keys that keep the fast path: every character below U+D800.
LOW_KEYS = st.text(alphabet=st.characters(max_codepoint=0xD7FF))
# Keys that mix the orders that differ: astral characters (UTF-16 surrogate pairs, which
# sort below U+E000..U+FFFF in UTF-16 but above them by code point) and the high BMP.
TRICKY_CHARS = st.one_of(
    st.sampled_from(["a", "é", "\u20ac", "\ud7ff", "\ue000", "\ufb33", "\uffff"]),
    st.sampled_from(["\U00010000", "\U0001f602", "\U0010ffff"]),
    st.characters(min_codepoint=0xE000, max_codepoint=0xFFFF),
    st.characters(min_codepoint=0x10000),
    st.characters(max_codepoint=0x7F),
)
WIDE_KEYS = st.text(alphabet=TRICKY_CHARS, max_size=6)
ALL_KEYS = st.one_of(TEXT, WIDE_KEYS)
SURROGATE_OR_ASCII = st.characters(categories=["Cs"]) | st.characters(max_codepoint=0x7F)


def json_values(
    keys: st.SearchStrategy[str],
    floats: st.SearchStrategy[float] | None = FLOATS,
    text: st.SearchStrategy[str] = TEXT,
) -> st.SearchStrategy[Any]:
    """I-JSON values; with ``floats=None`` no float is ever drawn."""
    scalars = st.none() | st.booleans() | SAFE_INTS | EDGE_INTS | text
    if floats is not None:
        scalars = scalars | floats
    return st.recursive(
        scalars,
        lambda children: (
            st.lists(children, max_size=6)
            | st.lists(children, max_size=4).map(tuple)
            | st.dictionaries(keys, children, max_size=6)
        ),
        max_leaves=40,
    )


def _walk(value: Any) -> tuple[bool, bool]:
    """Return (contains a float, has an object key with a character at or above U+D800)."""
    has_float = False
    high_key = False
    stack = [value]
    while stack:
        item = stack.pop()
        if type(item) is float:
            has_float = True
        elif isinstance(item, dict):
            high_key = high_key or any(key and max(key) >= "\ud800" for key in item)
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return has_float, high_key


# --- (a) canon == rfc8785 -----------------------------------------------------------------


@EXAMPLES
@given(json_values(LOW_KEYS, floats=None))
def test_fast_path_matches_reference(value: Any) -> None:
    """The orjson fast path is taken here, and it is byte-identical to rfc8785."""
    assert check_ijson(value) is True
    reference = rfc8785.dumps(value)
    assert orjson.dumps(value, option=orjson.OPT_SORT_KEYS) == reference
    assert canon(value) == reference


@EXAMPLES
@given(json_values(LOW_KEYS, floats=None, text=st.text(alphabet=TRICKY_CHARS)))
def test_fast_path_matches_reference_with_astral_values(value: Any) -> None:
    """Astral and high-BMP characters in string values do not leave the fast path."""
    assert check_ijson(value) is True
    assert canon(value) == rfc8785.dumps(value)


@EXAMPLES
@given(json_values(ALL_KEYS))
def test_canon_matches_reference(value: Any) -> None:
    assert canon(value) == rfc8785.dumps(value)


@EXAMPLES
@given(json_values(WIDE_KEYS))
def test_canon_matches_reference_with_astral_and_high_bmp_keys(value: Any) -> None:
    assert canon(value) == rfc8785.dumps(value)


@EXAMPLES
@given(st.dictionaries(WIDE_KEYS, SAFE_INTS, min_size=2, max_size=8))
def test_key_order_is_utf16(value: dict[str, int]) -> None:
    out = canon(value)
    assert out == rfc8785.dumps(value)
    keys = list(orjson.loads(out))
    assert keys == sorted(value, key=lambda k: k.encode("utf-16-be"))


# --- (b) round trip ------------------------------------------------------------------------


@EXAMPLES
@example(3.4028236692090828e38)  # a lone float JCS writes as digits past 2**64 (parse crashed)
@given(json_values(ALL_KEYS))
def test_round_trip(value: Any) -> None:
    data = canon(value)
    assert canon(parse(data)) == data


@pytest.mark.parametrize(
    "number", [2.0**53, -(2.0**53), 2.0**63, 1e19, 1e20, -1e20, 1e21, 2.0**64, 1e300]
)
def test_round_trip_large_integral_floats(number: float) -> None:
    # JCS writes these doubles as plain digits ("9007199254740992"); parse must read
    # them back as floats, not as integers outside I-JSON's range.
    data = canon([number, {"n": number}])
    assert parse(data) == [number, {"n": number}]
    assert type(parse(data)[0]) is float
    assert canon(parse(data)) == data


@pytest.mark.parametrize("number", [0, 1, -1, MAX_SAFE_INT, -MAX_SAFE_INT])
def test_parse_keeps_safe_integers_as_int(number: int) -> None:
    assert type(parse(canon([number]))[0]) is int


# --- (c) check_ijson and the fast path --------------------------------------------------


@EXAMPLES
@given(json_values(ALL_KEYS))
def test_check_ijson_is_fast_exactly_without_floats_or_high_keys(value: Any) -> None:
    has_float, high_key = _walk(value)
    assert check_ijson(value) is (not has_float and not high_key)


@EXAMPLES
@given(json_values(LOW_KEYS, floats=None), FLOATS, st.data())
def test_check_ijson_false_whenever_a_float_is_present(
    value: Any, number: float, data: Any
) -> None:
    assert check_ijson(value) is True
    # Put the float at a drawn position: inside the value if it is a container, else beside it.
    where = data.draw(st.sampled_from(["list", "dict", "tuple", "inside"]))
    if where == "list":
        holder: Any = [value, number]
    elif where == "dict":
        holder = {"v": value, "f": number}
    elif where == "tuple":
        holder = (value, (number,))
    elif isinstance(value, dict):
        holder = {**value, data.draw(LOW_KEYS): number}
    elif isinstance(value, list):
        holder = [*value, number]
    else:
        holder = [[value], {"deep": [number]}]
    assert check_ijson(holder) is False
    assert canon(holder) == rfc8785.dumps(holder)


class _Text(str):
    """A str subclass: not a JSON value (refused as one, like any other type)."""


#: leaves that are not I-JSON, each refused by both walks
BAD_LEAVES = st.one_of(
    UNSAFE_INTS,
    st.sampled_from([float("nan"), float("inf"), -float("inf")]),
    st.text(alphabet=SURROGATE_OR_ASCII, min_size=1).filter(lambda t: not _valid_text(t)),
    st.builds(_Text, st.text(max_size=3)),
    st.sampled_from([b"x", object(), {1, 2}, 1j]),
)
#: values mixing good and bad leaves, tuples, astral and high keys, keys that are not text
MIXED = st.recursive(
    st.none() | st.booleans() | SAFE_INTS | FLOATS | TEXT | BAD_LEAVES,
    lambda children: (
        st.lists(children, max_size=5)
        | st.lists(children, max_size=3).map(tuple)
        | st.dictionaries(ALL_KEYS, children, max_size=5)
        | st.dictionaries(
            st.one_of(st.integers(0, 3), st.builds(_Text, st.text(max_size=2)), TEXT),
            children,
            max_size=2,
        )
    ),
    max_leaves=25,
)


@EXAMPLES
@given(MIXED)
@example([1, {"a": [2**53]}])
@example({"k": ["ok", "\ud800"]})
@example({"\ud800": 1})
@example({"é": 1.5, "\ue000": [None]})
@example({"a": 1, _Text("b"): 2})  # a key that is a str subclass
@example({"a": [1], 2: "b"})
@example({"é": [1], "\U0001f600": 2})  # astral: off the fast path
@example({"ascii": 1, "\ud7ff": {"x": True}})  # high BMP below the surrogates: still fast
def test_the_quick_scan_refuses_and_takes_the_fast_path_as_the_plain_walk_does(
    value: Any,
) -> None:
    """``check_ijson``'s quick scan (no paths kept) against ``_locate``, the plain walk that
    names the path it refuses: both refuse the same values, and accept the others with the
    same answer for the fast path."""
    _agrees_with_the_plain_walk(value)


@settings(deadline=None)
@given(st.integers(MAX_DEPTH - 2, MAX_DEPTH + 2), st.sampled_from(["list", "dict", "tuple"]))
def test_the_quick_scan_refuses_nesting_where_the_plain_walk_does(depth: int, kind: str) -> None:
    value: Any = [1]
    for _ in range(depth):
        value = {"k": value} if kind == "dict" else [value] if kind == "list" else (value,)
    _agrees_with_the_plain_walk(value)


def _agrees_with_the_plain_walk(value: Any) -> None:
    from agentfootprint.logformat.canonical import _locate

    try:
        plain: bool | None = _locate(value, (), MAX_DEPTH)
    except CanonicalFormError:
        plain = None
    if plain is None:
        with pytest.raises(CanonicalFormError):
            check_ijson(value)
    else:
        assert check_ijson(value) is plain


# --- refusals never leak another exception type ------------------------------------------


@EXAMPLES
@given(json_values(LOW_KEYS, text=st.text(alphabet=SURROGATE_OR_ASCII)))
def test_lone_surrogate_values_are_refused_with_a_path(value: Any) -> None:
    # Only string values carry surrogates here (keys are clean).
    has_lone = False
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            has_lone = has_lone or not _valid_text(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    if has_lone:
        with pytest.raises(CanonicalFormError) as caught:
            canon(value)
        assert caught.value.path.startswith("$")
        assert "surrogate" in caught.value.reason
    else:
        assert canon(value) == rfc8785.dumps(value)


@EXAMPLES
@given(UNSAFE_INTS, st.lists(SAFE_INTS, max_size=5))
def test_unsafe_integers_refused_at_their_index(number: int, prefix: list[int]) -> None:
    with pytest.raises(CanonicalFormError) as caught:
        canon({"xs": [*prefix, number]})
    assert caught.value.path == f"$.xs[{len(prefix)}]"


# --- (d) parse_canonical: the verifier's fast proof that stored bytes are canonical -------
#
# ``parse_canonical(data)`` says True only when it proved ``canon(value) == data`` without a
# Python walk; the verifier then skips the full check. These properties hold it to the full
# check, ``canon(parse(data)) == data``, on canonical bytes of generated values and on byte
# mutations of them: it never proves what the full check refuses, returns what ``parse``
# returns, and the verifier's body check gives the same verdict (the same code and reason)
# as the check it replaced.


def _full_check(data: bytes) -> bool | str:
    """The check the fast proof stands in for: True, False (not canonical) or the refusal."""
    try:
        value = parse(data)
    except orjson.JSONDecodeError:
        return "not json"
    except RecursionError:
        return "too deep"
    try:
        return canon(value) == data
    except CanonicalFormError:
        return "not i-json"


def _proof(data: bytes) -> tuple[Any, bool] | str:
    try:
        return parse_canonical(data)
    except orjson.JSONDecodeError:
        return "not json"
    except RecursionError:
        return "too deep"


def _assert_agrees(data: bytes) -> bool:
    """The fast proof against the full check on ``data``; returns whether it proved it."""
    full, proof = _full_check(data), _proof(data)
    if isinstance(full, str) and full in ("not json", "too deep"):
        assert proof == full
        return False
    assert not isinstance(proof, str)
    value, proven = proof
    if proven:
        assert full is True, data
    assert _typed(value) == _typed(parse(data))
    return proven


def _typed(value: Any) -> Any:
    """``value`` with each scalar tagged by its type (``1 == 1.0 == True`` in Python)."""
    if isinstance(value, dict):
        return {key: _typed(child) for key, child in value.items()}
    if isinstance(value, list | tuple):
        return [_typed(child) for child in value]
    return (type(value).__name__, value)


def _reference_body_check(data: bytes) -> tuple[str, str] | Any:
    """The verifier's body check as it was before the fast proof (the full check always)."""
    try:
        body = parse(data)
    except orjson.JSONDecodeError as exc:
        return ("canonical", f"body is not JSON ({exc})")
    except RecursionError:
        return ("canonical", "body is not I-JSON (nested too deep)")
    try:
        canonical = canon(body)
    except CanonicalFormError as exc:
        return ("canonical", f"body is not I-JSON ({exc})")
    if canonical != data:
        return ("canonical", "body is not in canonical form (RFC 8785)")
    if not isinstance(body, dict):
        return ("structure", "not a JSON object")
    return _typed(body)


def _verifier_body_check(data: bytes) -> tuple[str, str] | Any:
    try:
        body = Verifier._canonical_body(RunCheck("r", {}), 1, data)
    except VerificationError as exc:
        reason = "not a JSON object" if exc.code == "structure" else exc.reason
        return (exc.code, reason)
    return _typed(body)


# Canonical bodies of every kind the generators draw, objects and arrays at the top.
CANONICAL_BYTES = st.one_of(
    json_values(ALL_KEYS),
    json_values(WIDE_KEYS),
    json_values(LOW_KEYS, floats=None),
    st.dictionaries(ALL_KEYS, json_values(ALL_KEYS), max_size=4),
).map(canon)

# What a mutation writes: the bytes that change a token's kind (a float, an exponent, a
# 16-digit run, an escape, a string's end, a character at or above U+E000), and any byte.
MUTATION_BYTES = st.one_of(
    st.sampled_from(
        [b".", b"e", b"E", b"+", b"-", b"0", b"1", b"9", b'"', b"\\", b" ", b",", b":", b"[",
         b"]", b"{", b"}", b".0", b"e+1", b"e-1", b"1.0", b"1e+16", b"-0", b"0" * 16,
         b"9007199254740992", b"9007199254740991", b"12345678901234567890", b"\\u0041",
         b"\\ud800", b"\\ud83d\\ude02", b"\\/", b"\\u00e9", "\ue000".encode(),
         "\U0001f602".encode(), "\ud7ff".encode(), b"\xed\xa0\x80", b"\xff", b"\x00",
         b"\x7f", b"true", b"null"]
    ),
    st.binary(min_size=1, max_size=3),
)  # fmt: skip


@st.composite
def mutated_bytes(draw: st.DrawFn) -> bytes:
    """Canonical bytes with one to three edits: insert, replace or delete at drawn places."""
    data = draw(CANONICAL_BYTES)
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        at = draw(st.integers(min_value=0, max_value=len(data)))
        edit = draw(st.sampled_from(["insert", "replace", "delete"]))
        if edit == "delete":
            data = data[:at] + data[at + draw(st.integers(min_value=1, max_value=4)) :]
        else:
            piece = draw(MUTATION_BYTES)
            data = data[:at] + piece + data[at + (len(piece) if edit == "replace" else 0) :]
    return data


@st.composite
def other_serialisations(draw: st.DrawFn) -> bytes:
    """JSON for a generated value that is usually not canonical yet parses: orjson unsorted or
    by code point, the standard library (exponents, escapes, ``ensure_ascii``), indented, or
    canonical bytes with a number's form changed right after one of its digits."""
    value = draw(json_values(ALL_KEYS))
    how = draw(st.sampled_from(["orjson", "orjson-sorted", "stdlib", "ascii", "indent", "num"]))
    if how == "orjson":
        return orjson.dumps(value)
    if how == "orjson-sorted":
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    if how in ("stdlib", "ascii"):
        return json.dumps(
            value, separators=(",", ":"), sort_keys=True, ensure_ascii=how == "ascii"
        ).encode()
    if how == "indent":
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2)
    data = canon(value)
    digits = [i + 1 for i in range(len(data)) if data[i : i + 1].isdigit()]
    if not digits:
        return data
    at = draw(st.sampled_from(digits))
    piece = draw(st.sampled_from([b".0", b".5", b"e+1", b"e-1", b"E1", b"0" * 15, b"00"]))
    return data[:at] + piece + data[at:]


@EXAMPLES
@example(b'{"a":1.5e+300}')
@example(b'{"n":12345678901234567}')
@given(other_serialisations())
def test_parse_canonical_agrees_with_the_full_check_on_other_serialisations(data: bytes) -> None:
    _assert_agrees(data)


@EXAMPLES
@example({"\ue000": 1, "\U00010000": 2})  # orjson's code-point order, not JCS's UTF-16 order
@example({"a": 1.0, "b": [1e16, 1e-7, -0.0, 5e-324]})
@example([2.0**53, {"n": 1e21}])
@given(json_values(ALL_KEYS))
def test_parse_canonical_agrees_with_the_full_check_on_canonical_bytes(value: Any) -> None:
    data = canon(value)
    proven = _assert_agrees(data)
    read = parse(data)  # canon writes an integral float as digits: [0.0] reads back as [0]
    fast_domain = isinstance(read, dict | list) and _walk(read) == (False, False)
    if not fast_domain:
        assert not proven, "a float or a key at or above U+D800 is never proven"
    elif re.search(rb"[\xee-\xff]", data) is None and not re.search(rb"[:,[]-?[0-9]+[.eE]", data):
        # nothing in a string looks like a character above U+DFFF or a float token
        assert proven, "canon's own fast path wrote these bytes: the proof must see that"


@EXAMPLES
@example(b'{"\xee\x80\x80":1,"\xf0\x90\x80\x80":2}')  # orjson's key order; JCS's is the reverse
@example(b'{"a":1.0}')  # orjson writes 1.0, JCS writes 1
@example(b'{"a":1e+16}')  # orjson's exponent form, JCS writes digits
@example(b"[1e+21,1.5]")
@example(b'{"a":-0}')
@example(b'{"a":9007199254740992}')  # just beyond I-JSON; orjson reads an int
@example(b'{"a":18446744073709551616}')  # beyond 64 bits; orjson reads a float
@example(b'{"a":"\\ud800"}')  # a lone surrogate escape
@example(b'{"a":"\\u0041"}')  # an escape JCS does not write
@example(b'{"a":"\\/"}')
@example(b'{"a" :1}')
@example(b'{"b":1,"a":2}')
@example(b'{"a":1,"a":1}')  # a repeated member
@example(b"[" * 254 + b"]" * 254)  # orjson writes no deeper than 254 levels
@example(b"[" * 256 + b"]" * 256)
@example(b"1")
@example(b'"s"')
@given(mutated_bytes())
def test_parse_canonical_never_proves_what_the_full_check_refuses(data: bytes) -> None:
    _assert_agrees(data)


@EXAMPLES
@example(b'{"a":1.0}')
@example(b'{"a":[1,2]}')
@example(b"[1]")
@example(b'{"a":9007199254740992}')
@given(st.one_of(CANONICAL_BYTES, mutated_bytes(), other_serialisations()))
def test_verifier_body_check_gives_the_verdict_of_the_full_check(data: bytes) -> None:
    """The verifier's canonical step accepts exactly the bytes the full check accepts, and
    refuses the rest with the same code and reason."""
    assert _verifier_body_check(data) == _reference_body_check(data)


@settings(max_examples=scaled(1000), deadline=None)
@example(1e16)
@example(-0.0)
@example(5e-324)
@example(1.7976931348623157e308)
@given(FLOATS)
def test_orjson_writes_every_float_with_a_point_or_a_signed_exponent(number: float) -> None:
    """What parse_canonical's cheap float test relies on: a float token holds "." or "e+" or
    "e-" after its digits (and _FLOAT_TOKEN finds it after a separator)."""
    token = orjson.dumps(number)
    assert re.fullmatch(rb"-?[0-9]+(\.[0-9]+)?(e[+-][0-9]+)?", token), token
    assert b"." in token or b"e+" in token or b"e-" in token
    _, proven = parse_canonical(b"[" + token + b"]")
    assert proven is False
