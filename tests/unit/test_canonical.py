"""RFC 8785 (JCS) canonical JSON: published vectors, I-JSON refusals, JCS specifics."""

from __future__ import annotations

import datetime as dt
import json
import math
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import pytest
import rfc8785

from agentfootprint.errors import CanonicalFormError
from agentfootprint.logformat.canonical import (
    ENVELOPE_DEPTH,
    MAX_DEPTH,
    MAX_SAFE_INT,
    canon,
    check_ijson,
    parse,
    parse_canonical,
)

VECTORS = Path(__file__).resolve().parents[1] / "data" / "rfc8785"
VECTOR_NAMES = ["arrays", "french", "structures", "unicode", "values", "weird"]


def refusal(value: Any) -> CanonicalFormError:
    """Canonicalise ``value`` expecting a refusal; check_ijson must refuse it the same way."""
    with pytest.raises(CanonicalFormError) as caught:
        canon(value)
    with pytest.raises(CanonicalFormError) as again:
        check_ijson(value)
    assert (again.value.path, again.value.reason) == (caught.value.path, caught.value.reason)
    assert str(caught.value) == f"{caught.value.path}: {caught.value.reason}"
    return caught.value


# --- (a) the published RFC 8785 vectors -------------------------------------------------------


def test_all_vectors_are_present() -> None:
    assert sorted(p.stem for p in (VECTORS / "input").glob("*.json")) == VECTOR_NAMES
    assert sorted(p.stem for p in (VECTORS / "output").glob("*.json")) == VECTOR_NAMES


@pytest.mark.parametrize("name", VECTOR_NAMES)
def test_published_vector(name: str) -> None:
    source = (VECTORS / "input" / f"{name}.json").read_bytes()
    expected = (VECTORS / "output" / f"{name}.json").read_bytes()
    assert not expected.endswith(b"\n")
    assert canon(orjson.loads(source)) == expected
    assert rfc8785.dumps(orjson.loads(source)) == expected
    # Canonical output is a fixed point.
    assert canon(parse(expected)) == expected


# --- (b) integers: I-JSON's +-(2**53 - 1) ----------------------------------------------------


@pytest.mark.parametrize("number", [MAX_SAFE_INT, -MAX_SAFE_INT, 0, -1, 2**32])
def test_safe_integers_accepted(number: int) -> None:
    assert MAX_SAFE_INT == 2**53 - 1
    assert canon(number) == str(number).encode()
    assert canon({"a": [0, number]}) == b'{"a":[0,' + str(number).encode() + b"]}"
    assert check_ijson({"a": [0, number]}) is True


@pytest.mark.parametrize("number", [2**53, -(2**53), 2**64, -(2**64), 10**30])
def test_unsafe_integers_refused(number: int) -> None:
    assert refusal(number).path == "$"
    error = refusal({"a": [0, number]})
    assert error.path == "$.a[1]"
    assert str(number) not in error.reason  # names the path, never the value (it may be secret)
    assert "outside" in error.reason and "string" in error.reason  # says how to fix it


def test_unsafe_integer_deep_path() -> None:
    value = {"outer": {"list": [{"ok": 1}, {"bad": 2**53}]}}
    assert refusal(value).path == "$.outer.list[1].bad"


def test_path_quotes_keys_that_are_not_identifiers() -> None:
    assert refusal({"a b": [2**53]}).path == '$["a b"][0]'
    assert refusal({"1x": 2**53}).path == '$["1x"]'
    assert refusal([{"": 2**53}]).path == '$[0][""]'


# --- (c) non-finite numbers ------------------------------------------------------------------


@pytest.mark.parametrize("number", [math.nan, math.inf, -math.inf])
def test_non_finite_refused(number: float) -> None:
    assert refusal(number).path == "$"
    error = refusal({"x": {"y": [1.5, number]}})
    assert error.path == "$.x.y[1]"
    assert "finite" in error.reason


# --- (d) lone surrogates ---------------------------------------------------------------------


@pytest.mark.parametrize("text", ["\ud800", "a\udfffb", "\udc00\ud83d"])
def test_lone_surrogate_in_value_refused(text: str) -> None:
    error = refusal({"a": ["fine", text]})
    assert error.path == "$.a[1]"
    assert "surrogate" in error.reason


def test_surrogate_pair_as_one_code_point_is_fine() -> None:
    assert canon("\U0001f602") == '"\U0001f602"'.encode()


@pytest.mark.parametrize("key", ["\ud800", "x\udfff"])
def test_lone_surrogate_in_key_refused(key: str) -> None:
    error = refusal({"a": {"fine": 0, key: 1}})
    # The key is not an identifier, so the path quotes it (with the surrogate escaped).
    assert error.path == "$.a[" + json.dumps(key) + "]"
    assert "\\u" in error.path
    assert "surrogate" in error.reason


def test_lone_surrogate_in_top_level_key_refused() -> None:
    assert refusal({"\udc00": {"k": "v"}}).path == '$["\\udc00"]'


# --- (e) non-string keys ---------------------------------------------------------------------


@pytest.mark.parametrize("key", [1, None, ("t", 1), 1.5, True, b"k"])
def test_non_string_key_refused(key: Any) -> None:
    error = refusal({"a": [{"ok": 1, key: 2}]})
    # The path names the object that holds the bad key; the reason names the key's type.
    assert error.path == "$.a[0]"
    assert type(key).__name__ in error.reason
    assert "keys must be strings" in error.reason


# --- (f) values that are not JSON ------------------------------------------------------------


class Thing:
    pass


@pytest.mark.parametrize(
    ("value", "type_name"),
    [
        (dt.datetime(2024, 1, 2, 3, 4, 5), "datetime"),
        (dt.date(2024, 1, 2), "date"),
        (b"bytes", "bytes"),
        (bytearray(b"x"), "bytearray"),
        ({1, 2}, "set"),
        (frozenset(), "frozenset"),
        (Decimal("1.5"), "Decimal"),
        (Thing(), "Thing"),
        (1 + 2j, "complex"),
    ],
)
def test_non_json_type_refused(value: Any, type_name: str) -> None:
    error = refusal({"payload": [None, {"v": value}]})
    assert error.path == "$.payload[1].v"
    assert type_name in error.reason
    assert "not a JSON value" in error.reason


def test_refusal_happens_before_output() -> None:
    # A bad value anywhere refuses the whole document, even after many good values.
    value = {"a": list(range(1000)), "z": {"deep": [Thing()]}}
    assert refusal(value).path == "$.z.deep[0]"


# --- (g) JCS specifics -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("number", "expected"),
    [
        (1.0, b"1"),
        (-0.0, b"0"),
        (0.0, b"0"),
        (1e21, b"1e+21"),
        (1e-7, b"1e-7"),
        (1e20, b"100000000000000000000"),
        (0.000001, b"0.000001"),
        (4.5, b"4.5"),
        (0.1 + 0.2, b"0.30000000000000004"),
        (333333333.33333329, b"333333333.3333333"),
        (5e-324, b"5e-324"),
        (1.7976931348623157e308, b"1.7976931348623157e+308"),
        (-1e-27, b"-1e-27"),
        (9007199254740992.0, b"9007199254740992"),
    ],
)
def test_number_serialisation(number: float, expected: bytes) -> None:
    assert canon(number) == expected
    assert canon([number]) == b"[" + expected + b"]"


def test_key_order_is_utf16_code_units() -> None:
    # U+1F602 is the surrogate pair D83D DE02, which sorts before U+FB33 in UTF-16,
    # although its code point (and UTF-8 bytes) sort after.
    value = {"\ufb33": "dalet", "\U0001f602": "smiley", "\u20ac": "euro", "a": "a"}
    assert check_ijson(value) is False  # astral / high-BMP keys leave the fast path
    expected = '{"a":"a","€":"euro","\U0001f602":"smiley","\ufb33":"dalet"}'.encode()
    assert canon(value) == expected


def test_key_order_below_surrogates_is_code_point_order() -> None:
    value = {"é": 1, "e": 2, "Z": 3, "\u0080": 4, "": 5, "aa": 6, "A": 7, "\u20ac": 8}
    assert check_ijson(value) is True
    assert canon(value) == '{"":5,"A":7,"Z":3,"aa":6,"e":2,"\u0080":4,"é":1,"€":8}'.encode()


def test_literal_characters_stay_literal() -> None:
    assert canon("\u2028\u2029/<>&'\x7f\u0080é€") == '"\u2028\u2029/<>&\'\x7f\u0080é€"'.encode()
    assert canon({"k": "/"}) == b'{"k":"/"}'


def test_control_characters_escaped_as_jcs() -> None:
    value = '\x00\x01\x08\t\n\x0b\x0c\r\x1f "\\'
    expected = b'"\\u0000\\u0001\\b\\t\\n\\u000b\\f\\r\\u001f \\"\\\\"'
    assert canon(value) == expected
    assert canon({value: value}) == b"{" + expected + b":" + expected + b"}"
    assert rfc8785.dumps(value) == expected


def test_all_control_characters_match_reference() -> None:
    text = "".join(chr(c) for c in range(0x20))
    assert check_ijson(text) is True
    assert canon(text) == rfc8785.dumps(text)
    assert canon({text: [text]}) == rfc8785.dumps({text: [text]})


def test_literals_and_whitespace() -> None:
    assert canon(None) == b"null"
    assert canon(True) == b"true"
    assert canon(False) == b"false"
    assert canon({"b": [1, {"d": None, "c": False}], "a": {}}) == (
        b'{"a":{},"b":[1,{"c":false,"d":null}]}'
    )
    assert canon([]) == b"[]"
    assert canon({}) == b"{}"
    assert canon("") == b'""'


def test_bool_is_not_an_integer() -> None:
    assert canon([True, 1, False, 0]) == b"[true,1,false,0]"


# --- (h) tuples ------------------------------------------------------------------------------


def test_tuples_serialise_as_arrays() -> None:
    assert canon((1, "a", None)) == b'[1,"a",null]'
    assert canon({"t": (1, (2, 3), [])}) == b'{"t":[1,[2,3],[]]}'
    assert canon((1.5, ())) == b"[1.5,[]]"  # the slow (rfc8785) path too
    assert canon(()) == b"[]"
    assert canon({"t": (1, [2])}) == canon({"t": [1, [2]]})


def test_tuple_elements_are_checked_with_index_paths() -> None:
    assert refusal({"t": (1, 2, 2**53)}).path == "$.t[2]"


# --- fast path selection and parse ---------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "fast"),
    [
        ({"a": [1, "x", None, True]}, True),
        ({"a": 1.5}, False),
        ([1, [2, [3.0]]], False),
        ({"\ud7ff": 1}, True),
        ({"\ue000": 1}, False),
        ({"\U0001f602": 1}, False),
        ({"k": "\U0001f602\uffff"}, True),  # values may hold any character
        ({"": 1}, True),
    ],
)
def test_check_ijson_fast_path(value: Any, fast: bool) -> None:
    assert check_ijson(value) is fast
    assert canon(value) == rfc8785.dumps(value)


def test_parse_inverts_canon() -> None:
    value = {"a": [1, 2.5, "x\u2028", None, {"\U0001f602": True}], "b": -MAX_SAFE_INT}
    data = canon(value)
    assert parse(data) == value
    assert canon(parse(data)) == data


def nested(depth: int, leaf: Any) -> Any:
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("leaf", [0, 1.5, "s"])
def test_nesting_up_to_max_depth_is_canonicalised(leaf: Any) -> None:
    value = nested(MAX_DEPTH, leaf)
    assert canon(value) == rfc8785.dumps(value)
    assert canon({"k": nested(MAX_DEPTH - 1, leaf)}) == rfc8785.dumps(
        {"k": nested(MAX_DEPTH - 1, leaf)}
    )


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 255, 1000, 5000])
@pytest.mark.parametrize("leaf", [0, 1.5])
def test_values_nested_beyond_max_depth_are_refused(depth: int, leaf: Any) -> None:
    with pytest.raises(CanonicalFormError) as caught:
        check_ijson(nested(depth, leaf))
    assert caught.value.path == "$" + "[0]" * (MAX_DEPTH + 1)
    assert str(MAX_DEPTH) in caught.value.reason


@pytest.mark.parametrize("leaf", [0, 1.5])
def test_log_bodies_may_wrap_a_deepest_value(leaf: Any) -> None:
    """canon() leaves room for the envelope a log body puts around a value."""
    body = nested(ENVELOPE_DEPTH, nested(MAX_DEPTH, leaf))
    assert canon(body) == rfc8785.dumps(body)
    limit = MAX_DEPTH + ENVELOPE_DEPTH
    with pytest.raises(CanonicalFormError) as caught:
        canon(nested(limit + 1, leaf))
    assert caught.value.path == "$" + "[0]" * (limit + 1)
    assert str(limit) in caught.value.reason


def test_parse_converts_long_integers_at_any_depth_orjson_reads() -> None:
    # found while reviewing: the conversion recursed, so ~900-deep arrays holding a 16+
    # digit number overflowed the stack (the verifier called that body non-canonical)
    depth = 1000  # orjson itself refuses beyond 1024
    value = parse(b"[" * depth + b"12345678901234567890" + b"]" * depth)
    for _ in range(depth):
        assert type(value) is list and len(value) == 1
        value = value[0]
    assert value == 1.2345678901234567e19 and type(value) is float


# --- parse_canonical: proving stored bytes canonical without walking the value --------------


@pytest.mark.parametrize(
    ("data", "proven"),
    [
        ('{"a":[1,-2,"x",true,null,{}],"b":"\u00e9\u4e2d"}'.encode(), True),
        (b'{"a":"\\n\\"q\\""}', True),  # escapes JCS writes: a backslash in the bytes
        (b'{"a":"\\u001f"}', True),
        (b'{"a":"1.5","b":"x,1e+5"}', False),  # looks like a float in a string: full check
        (b'{"a":"\xf0\x9f\x98\x82"}', False),  # a lead byte above U+DFFF: full check
        (b"[9007199254740991]", True),
        (b"[1234567890123456]", True),  # 16 digits within range
        (b'{"a":1.0}', False),
        (b'{"a":1.5}', False),
        (b'{"a":1e+21}', False),
        (b'{"a":9007199254740992}', False),
        (b'{"b":1,"a":2}', False),
        (b'{"a": 1}', False),
        (b'"text"', False),  # not an object or array: left to the full check
        (b"7", False),
        (b"[" * 254 + b"]" * 254, True),
        (b"[" * 255 + b"]" * 255, False),  # beyond orjson's writing limit
    ],
)
def test_parse_canonical_proves_only_what_the_full_check_accepts(data: bytes, proven: bool) -> None:
    value, was_proven = parse_canonical(data)
    assert was_proven is proven
    assert value == parse(data)
    if proven:
        assert canon(value) == data


def test_orjson_writes_no_deeper_than_canon_accepts() -> None:
    """parse_canonical leaves the depth limit to orjson: what orjson writes, canon writes."""
    limit = MAX_DEPTH + ENVELOPE_DEPTH
    deepest = None
    for depth in range(limit - 10, limit + 10):
        try:
            orjson.dumps(nested(depth, 0), option=orjson.OPT_SORT_KEYS)
        except orjson.JSONEncodeError:
            break
        deepest = depth
    assert deepest is not None and deepest <= limit
    assert canon(nested(deepest, 0)) == rfc8785.dumps(nested(deepest, 0))


@pytest.mark.parametrize(
    "data",
    [b"", b"0" * 15, b"0" * 16, b"a" + b"9" * 16 + b"b", b"12345678.12345678", b"\xd9" * 20],
)
def test_digit_run_search_matches_the_pattern(data: bytes) -> None:
    from agentfootprint.logformat import canonical

    assert canonical._has_digit_run(data) is (canonical._LONG_INT.search(data) is not None)
