"""Differential tests: ``canon`` against the ``rfc8785`` reference implementation.

``canon`` writes a value with ``orjson`` (sorted keys) when ``check_ijson`` says the fast
path applies: no floats and every object key's characters below U+D800. These properties
show the fast path gives the same bytes as ``rfc8785.dumps`` wherever it is taken. They
also show that the slow path is taken everywhere else and that canonical bytes
round-trip through ``parse``.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
import rfc8785
from hypothesis import example, given, settings
from hypothesis import strategies as st

from agentfootprint.errors import CanonicalFormError
from agentfootprint.verify.canonical import MAX_SAFE_INT, canon, check_ijson, parse

EXAMPLES = settings(max_examples=300, deadline=None)


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
