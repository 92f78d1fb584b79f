"""The leak guard, as a property: whatever JSON a run records, and wherever a secret sits in
it in any form the guard knows, what the guard lets through holds no form of the secret; a
value holding none comes back as the very object."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import example, given
from hypothesis import strategies as st

from agentfootprint.logformat.literal_forms import MIN_LITERAL_BYTES, LiteralMatcher, literal_forms
from agentfootprint.runtime.leak_guard import WITHHELD, LeakGuard

secrets = st.text(min_size=1, max_size=24).filter(
    lambda s: (
        len(s.encode("utf-8", "surrogatepass")) >= MIN_LITERAL_BYTES
        and not any(0xD800 <= ord(c) <= 0xDFFF for c in s)
    )
)
texts = st.text(max_size=12).filter(lambda s: not any(0xD800 <= ord(c) <= 0xDFFF for c in s))
scalars = st.none() | st.booleans() | st.integers(-(2**53) + 1, 2**53 - 1) | texts


def json_values(leaf: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.recursive(
        leaf,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
        max_leaves=12,
    )


def dump(value: Any) -> bytes:
    return orjson.dumps(value)


@st.composite
def planted(draw: st.DrawFn) -> tuple[str, Any]:
    """A secret, and a JSON value holding it in strings (and keys), in some of its forms."""
    secret = draw(secrets)
    forms = [f.needle.decode("utf-8") for f in literal_forms(secret)]
    holding = st.builds(
        lambda before, form, after: before + form + after, texts, st.sampled_from(forms), texts
    )
    value = draw(
        st.recursive(
            scalars | holding,
            lambda inner: (
                st.lists(inner, max_size=4) | st.dictionaries(texts | holding, inner, max_size=4)
            ),
            max_leaves=12,
        )
    )
    return secret, [value, draw(holding)]  # at least one string holds it


@given(planted())
@example(("withheld", ["[credential withheld] withheld"]))
@example(("aaaaaa", ["aaaaaaaaaaa", {"aaaaaa": "xaaaaaay"}]))
@example(("ab/cd\\ef", ['x"ab\\/cd\\\\ef"']))
def test_what_the_guard_lets_through_holds_no_form_of_the_secret(case: tuple[str, Any]) -> None:
    secret, value = case
    guard = LeakGuard()
    guard.withhold(secret)
    before = dump(value)
    matcher = LiteralMatcher([secret])
    checked = guard.checked(value, "key")
    assert matcher.find(dump(checked)) == []  # as recorded, no form is left: what `scan` reads
    # noted exactly when the value, as JSON, held a form (a form inside a string can stop
    # being one once the string is escaped again: then neither the guard nor scan sees it)
    assert guard.hits == (["key"] if matcher.find(before) else [])
    assert dump(value) == before  # the value handed in is never changed


@given(secrets, json_values(scalars))
def test_a_value_holding_no_secret_is_the_very_object(secret: str, value: Any) -> None:
    guard = LeakGuard()
    guard.withhold(secret)
    held = LiteralMatcher([secret]).find(dump(value))
    checked = guard.checked(value, "key")
    if held:  # the drawn text spelt the secret by chance: then it is withheld
        assert LiteralMatcher([secret]).find(dump(checked)) == []
    else:
        assert checked is value and guard.hits == []


def test_a_guard_holding_nothing_checks_nothing() -> None:
    guard = LeakGuard()
    value = {"a": WITHHELD}
    assert not guard.active and guard.checked(value, "key") is value


def test_a_secret_too_short_to_search_for_is_refused() -> None:
    guard = LeakGuard()
    try:
        guard.withhold("abc")
    except ValueError as exc:
        assert "shorter than" in str(exc)
    else:
        raise AssertionError("a 3-byte secret was accepted")
