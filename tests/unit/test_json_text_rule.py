"""The JSON-text rule (``read_json_text``): one classification of strings for the store
boundary, the verifier's scans and the ``$commit`` refusal.

Text / walkable container / opaque JSON text; walkable text is rewritten, opaque text is
committed whole under the nearest enclosing member name, and the verifier calls opaque
text under a policy that is not committed a leak. Linear time, no recursion.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import agentfootprint as af
from agentfootprint.logformat.canonical import MAX_DEPTH, canon, parse
from agentfootprint.logformat.commitments import (
    MAX_TEXT_DEPTH,
    OPAQUE,
    Leak,
    bracket_depth,
    is_commitment,
    iter_commitments,
    iter_leaks,
    nests_too_deep,
    parse_json_container,
    read_json_text,
    scan_redaction,
)
from agentfootprint.store.redaction import Boundary, refuse_reserved_key
from agentfootprint.testing.redaction_strategies import CORNER_CASES, corner_text
from agentfootprint.testing.tamper import plain, read_rows, reencoded, rewrite, tampering

SSN = af.RedactionPolicy(keys=["ssn"])


def nested(depth: int, inner: str = "1") -> str:
    """JSON text of bracket depth ``depth`` (arrays around ``inner``)."""
    return "[" * depth + inner + "]" * depth


# -- the classification ---------------------------------------------------------------------

TEXT = [
    "",
    "plain",
    " ",
    "{",
    "[1,]",
    '{"a":1,}',
    '{"a":NaN}',
    '{"a":Infinity}',
    "[-Infinity]",
    "[1] [2]",
    "[1]x",
    "\ufeff[1]",  # a byte-order mark is not JSON whitespace
    '"[1]"',  # a JSON string, not a container
    "1",
    "\u00a0[1]",  # no-break space: not JSON whitespace
    '{"a":"\ud800"}',  # a lone surrogate in the string itself: not Unicode text
    "[" + "1" * 5000 + ", x]",  # a long number, then not JSON
    '{"a":1e400,}',  # a huge exponent, then not JSON
    "[01]",
    "['a']",
]
OPAQUE_TEXTS = [
    '{"ssn":"X","n":1e400}',
    '{"ssn":"X","n":-1E+400}',
    '{"ssn":"X","n":' + "1" * 400 + "}",
    '{"ssn":"X","n":' + "9" * 5000 + "}",  # beyond Python's int digit limit
    '{"a":1,"a":2}',
    '[{"b":{"x":1,"x":1}}]',
    '{"a":"\\ud800"}',
    '{"\\udc00":1}',
    '["\\ud83d"]',
    nested(MAX_TEXT_DEPTH + 1),
    nested(1100),
    nested(100_000),
    "[" * 300 + "not json at all",  # JSON as far as the depth scan can tell
]
WALKABLE = [
    ('{"a":1}', {"a": 1}),
    (" \n\t\r[1, 2] \r\n", [1, 2]),
    ("[9007199254740991]", [9007199254740991]),
    ("[9007199254740993]", [9007199254740992.0]),  # beyond 2**53: the nearest double
    ("[1.0, -0.0, 1e-400, 2.5e0]", [1, 0, 0, 2.5]),  # integral doubles read as ints
    ("[1" + "0" * 300 + "]", [1e300]),  # wide but finite
    ("[1e308]", [1e308]),
    ('{"\\u0073sn":"X"}', {"ssn": "X"}),
    ('{"a":"\\ud83d\\ude00"}', {"a": "\U0001f600"}),
    ('["[[[[", "]]]]", "\\"[", "\\\\"]', ["[[[[", "]]]]", '"[', "\\"]),
    (nested(MAX_TEXT_DEPTH), None),
    ("{}", {}),
    ("[]", []),
]


@pytest.mark.parametrize("text", TEXT)
def test_text_that_is_not_json_container_text(text: str) -> None:
    assert read_json_text(text) is None
    assert parse_json_container(text) is None


@pytest.mark.parametrize("text", OPAQUE_TEXTS, ids=lambda t: t[:24])
def test_json_text_that_cannot_be_rewritten_is_opaque(text: str) -> None:
    assert read_json_text(text) is OPAQUE
    assert parse_json_container(text) is None  # callers that only walk treat it as text


@pytest.mark.parametrize(("text", "value"), WALKABLE, ids=lambda t: str(t)[:24])
def test_walkable_json_text(text: str, value: Any) -> None:
    found = read_json_text(text)
    assert isinstance(found, dict | list)
    if value is not None:
        assert canon(found) == canon(value)
        assert [type(v) for v in found] == [type(v) for v in value]  # type for type
    assert read_json_text(canon(found).decode()) == found  # a rewrite is walkable again


def test_bracket_depth_counts_outside_strings() -> None:
    assert bracket_depth("") == 0 and bracket_depth("[]") == 1 and bracket_depth("[[1]]") == 2
    assert bracket_depth('["[[[", {"a": "]"}]') == 2
    assert bracket_depth('["\\\\", ["\\"", []]]') == 3  # escaped backslash, escaped quote
    assert bracket_depth("]]][[") == 0 and bracket_depth("]][[[") == 1  # a running count
    assert bracket_depth('"[[[[') == 0  # an unterminated string runs to the end
    assert not nests_too_deep(nested(MAX_TEXT_DEPTH)) and nests_too_deep(nested(251))
    assert nests_too_deep("[{" * 126) and not nests_too_deep("[]" * 5000)


def depth_of(value: Any) -> int:
    """Bracket nesting of ``value`` written as JSON (a container counts one level)."""
    if isinstance(value, dict):
        return 1 + max((depth_of(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((depth_of(v) for v in value), default=0)
    return 0


TRICKY = st.text(alphabet='[]{}"\\/ab\n\u00e9\U0001f600', max_size=6)
JSON_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(2**53) + 1, 2**53 - 1), TRICKY),
    lambda children: st.one_of(
        st.lists(children, max_size=3), st.dictionaries(TRICKY, children, max_size=3)
    ),
    max_leaves=20,
)


@given(value=JSON_VALUES, ascii_only=st.booleans(), indent=st.sampled_from([None, 0, 2]))
@example(value=[["\\", ['"', "["]]], ascii_only=True, indent=None)
def test_bracket_depth_is_the_nesting_of_json_text(
    value: Any, ascii_only: bool, indent: int | None
) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only, indent=indent)
    assert bracket_depth(text) == depth_of(value)


@given(value=JSON_VALUES, wrap=st.sampled_from(["list", "dict"]))
def test_walkable_text_reads_back_as_written(value: Any, wrap: str) -> None:
    container = [value] if wrap == "list" else {"k": value}
    text = json.dumps(container)
    assert read_json_text(text) == container
    assert read_json_text(canon(container).decode()) == container


@given(text=st.text(alphabet='[]{}",:0123456789.eE+-\\u truenalsf\n', max_size=40))
def test_the_rule_agrees_with_the_standard_library(text: str) -> None:
    """Opaque or walkable iff RFC 8259 JSON (the standard library, NaN refused), an object or
    array after whitespace, or deeper than the walk; walkable values are I-JSON."""

    def refuse(name: str) -> Any:
        raise ValueError(name)

    try:
        json.loads(text, parse_constant=refuse, parse_int=float)
        is_json = True
    except (ValueError, RecursionError):
        is_json = False
    found = read_json_text(text)
    container = text.lstrip(" \t\n\r")[:1] in ("{", "[")
    if found is OPAQUE:
        assert container and (is_json or nests_too_deep(text))
    elif found is None:
        assert not (container and is_json)
    else:
        assert container and is_json and not nests_too_deep(text)
        canon(found)  # I-JSON: canon can rewrite it


# -- linear time, no recursion --------------------------------------------------------------

#: inputs built to make a reader quadratic or recursive, and what the rule makes of each; the
#: time each takes is measured in bench/hostile_text.py (linear: twice the size, twice the
#: time), never asserted here
HOSTILE: dict[str, tuple[str, str]] = {
    "deep 2M": (nested(2_000_000), "opaque"),
    "openers 2M": ("[" * 2_000_000, "opaque"),
    "brackets in a string": ('["' + "[" * 2_000_000 + '"]', "container"),
    "escaped quotes": ('["' + '\\"' * 1_000_000 + '"]', "container"),
    "backslashes": ('["' + "\\\\" * 1_000_000 + '"]', "container"),
    "long number": ("[" + "7" * 2_000_000 + "]", "opaque"),
    "long fraction": ("[0." + "7" * 2_000_000 + "]", "container"),
    "many duplicates": ("{" + ",".join(['"a":1'] * 200_000) + "}", "opaque"),
    "surrogate escapes": (json.dumps(["\U0001f600" * 300_000]), "container"),
    "mixed nesting": ("[{" * 500_000, "opaque"),
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_text_is_read_without_recursion_to_its_answer(name: str) -> None:
    text, expected = HOSTILE[name]
    found = read_json_text(text)
    assert ("opaque" if found is OPAQUE else "container" if found is not None else None) == (
        expected
    )


def test_deep_json_text_inside_json_text_never_recurses() -> None:
    """Ten levels of JSON text, each 240 deep: the boundary, the scans and the ``$commit``
    refusal walk it with stacks (Python's recursion limit is 1000)."""
    text = '{"ssn": "X"}'
    for _ in range(10):
        text = nested(240, json.dumps({"inner": text}))
    assert isinstance(read_json_text(text), list)
    boundary = Boundary(SSN)
    committed = boundary.commit({"content": text})
    assert [d.key for d in boundary.take_disclosures()] == ["ssn"]
    assert "X" not in json.dumps(committed).replace("\\", "")
    assert list(iter_leaks(committed, SSN.document.matcher())) == []
    assert [d for d, _, _ in iter_commitments(committed)] != []
    refuse_reserved_key({"content": text}, "result")
    with pytest.raises(af.ReservedKeyError):
        refuse_reserved_key({"content": text.replace("ssn", "$commit")}, "result")


# -- the boundary ---------------------------------------------------------------------------


@pytest.mark.parametrize("text", OPAQUE_TEXTS, ids=lambda t: t[:24])
def test_the_boundary_commits_opaque_text_whole_under_the_nearest_key(text: str) -> None:
    boundary = Boundary(SSN)
    value = {"content": text, "items": [text, {"deeper": [text]}], "keep": "plain"}
    committed = boundary.commit(value)
    assert is_commitment(committed["content"]) and is_commitment(committed["items"][0])
    assert is_commitment(committed["items"][1]["deeper"][0]) and committed["keep"] == "plain"
    disclosures = boundary.take_disclosures()
    assert [d.key for d in disclosures] == ["content", "items", "deeper"]  # members by name
    assert all(d.value == text and d.opens() for d in disclosures)
    assert boundary.commit_entry("user_message", text) == {"$commit": boundary_digest(boundary)}
    assert boundary.commit([text], key="history_notes")[0]["$commit"] == boundary_digest(
        boundary, "history_notes"
    )


def boundary_digest(boundary: Boundary, key: str = "user_message") -> str:
    (disclosure,) = boundary.take_disclosures()
    assert disclosure.key == key
    return disclosure.commitment


def test_opaque_text_inside_walkable_text_is_committed_and_the_outer_rewritten() -> None:
    boundary = Boundary(SSN)
    outer = json.dumps({"meta": '{"x": 1e400}', "q": "keep"})
    committed = boundary.commit({"content": outer})
    inner = parse(committed["content"].encode())
    assert is_commitment(inner["meta"]) and inner["q"] == "keep"
    assert [d.key for d in boundary.take_disclosures()] == ["meta"]


def test_without_a_commitment_walkable_text_is_kept_byte_for_byte() -> None:
    boundary = Boundary(SSN)
    text = '{ "a" : [1.0, 1e-400], "b": "\\u0041" }'
    value = {"content": text}
    assert boundary.commit(value) is value


def test_a_rewrite_one_level_too_deep_commits_the_text_whole() -> None:
    """A commitment of a scalar at the deepest walked level adds a level; the rewrite would
    be opaque to the verifier, so the original text is committed whole instead."""
    boundary = Boundary(SSN)
    deepest = nested(MAX_TEXT_DEPTH - 1, '{"ssn": 1}')
    assert bracket_depth(deepest) == MAX_TEXT_DEPTH
    committed = boundary.commit({"content": deepest})
    assert is_commitment(committed["content"])
    assert [(d.key, d.value) for d in boundary.take_disclosures()] == [("content", deepest)]
    shallower = nested(MAX_TEXT_DEPTH - 2, '{"ssn": 1}')
    rewritten = boundary.commit({"content": shallower})["content"]
    assert isinstance(rewritten, str) and bracket_depth(rewritten) == MAX_TEXT_DEPTH
    assert [d.key for d in boundary.take_disclosures()] == ["ssn"]
    assert list(iter_leaks({"content": rewritten}, SSN.document.matcher())) == []


def test_a_deep_json_string_is_recorded_and_verifies() -> None:
    """The defect: a deep JSON string under a policy failed the run with a
    CanonicalFormError. Now it is committed whole and the run answers and verifies."""
    deep = nested(MAX_DEPTH + 30, '{"ssn": "S3CR3T-deep"}')
    tool = af.define_tool(name="echo", description="d", execute=lambda a: deep)
    agent = af.Agent(
        provider=af.MockProvider([af.reply(tool_calls=[af.tool_call("echo", {})]), "ok"]),
        model="m",
        tools=[tool],
        redact=SSN,
    )
    result = agent.run_sync(deep)
    assert result.outcome == "answered"
    recorded = b"".join(row.body for row in agent.store.read(result.run_id))
    assert b"S3CR3T-deep" not in recorded
    assert af.Verifier(agent.store).verify(result.run_id).outcome is af.Outcome.VALID_UNSIGNED


# -- the verifier's scans -------------------------------------------------------------------


def test_opaque_text_under_a_policy_is_a_leak() -> None:
    matches = SSN.document.matcher()
    value = {"content": '{"n": 1e400}', "list": ["[" * 300]}
    leaks = list(iter_leaks(value, matches))
    assert sorted(leak.path for leak in leaks) == [("content",), ("list", 0)]
    assert all(isinstance(leak, Leak) and leak.opaque for leak in leaks)
    assert "JSON text the boundary commits whole" in leaks[0].message
    key, path = Leak("ssn", ("a", "ssn"))  # unpacks as a pair
    assert (key, path) == ("ssn", ("a", "ssn"))
    assert Leak(key, path).message == "plaintext under the policy key 'ssn' at $.a.ssn"
    assert list(iter_commitments(value)) == []  # opaque text is not searched


def test_commitments_inside_opaque_text_are_text() -> None:
    fake = '{"$commit": "not hex", "n": 1e400}'
    assert list(iter_commitments({"content": fake})) == []
    refuse_reserved_key({"content": fake}, "result")  # opaque: not looked into
    with pytest.raises(af.ReservedKeyError):
        refuse_reserved_key({"content": '{"\\u0024commit": 1}'}, "result")


CORNERED = st.builds(
    lambda value, case: corner_text({"ssn": value, "note": "n"}, case, 260),
    st.text(max_size=5),
    st.sampled_from(CORNER_CASES),
)
SCANNED = st.recursive(
    st.one_of(st.none(), st.integers(-3, 3), st.text(max_size=4), CORNERED),
    lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.dictionaries(st.sampled_from(["ssn", "content", "a", "b"]), children, max_size=3),
        st.lists(children, max_size=2).map(json.dumps),
        st.dictionaries(st.sampled_from(["ssn", "x"]), children, max_size=2).map(json.dumps),
    ),
    max_leaves=12,
)


@given(value=SCANNED)
def test_what_the_boundary_records_the_verifier_finds_clean(value: Any) -> None:
    boundary = Boundary(SSN)
    committed = boundary.commit({"v": value}, key=None)
    canon(committed)  # recordable
    matches = SSN.document.matcher()
    assert list(iter_leaks(committed, matches)) == []
    made = {d.commitment for d in boundary.take_disclosures()}
    assert {d for d, _, _ in iter_commitments(committed)} == made
    assert boundary.commit(committed) is committed  # idempotent


@given(value=SCANNED)
def test_one_scan_finds_what_the_two_iterators_find(value: Any) -> None:
    matches = SSN.document.matcher()
    scan = scan_redaction({"v": value}, matches, ("p",), key="k")
    assert scan.commitments == list(iter_commitments({"v": value}, ("p",), key="k"))
    assert scan.leaks == list(iter_leaks({"v": value}, matches, ("p",), key="k"))
    assert [leak.opaque for leak in scan.leaks] == [
        leak.opaque for leak in iter_leaks({"v": value}, matches, ("p",), key="k")
    ]
    assert scan_redaction({"v": value}, None).leaks == []


# -- a forged log -----------------------------------------------------------------------------


@pytest.mark.unverified
@pytest.mark.parametrize("text", ['{"n": 1e400}', '{"a": 1, "a": 2}', nested(300)])
def test_opaque_text_a_forger_puts_back_in_clear_is_a_leak(tmp_path: Path, text: str) -> None:
    """The writer commits opaque JSON text whole under a policy; a log holding it in clear
    (hashes recomputed) fails with ``leak`` at that row."""
    db = tmp_path / "r.db"
    agent = af.Agent(provider=af.MockProvider(["ok"]), model="m", store=db, redact=SSN)
    run_id = agent.run_sync(text).run_id
    agent.close()
    with tampering(db) as conn:
        rows = read_rows(conn, run_id)
        (seq,) = [r.seq for r in rows if r.type == "write" and r.value["path"] == "user_message"]
        assert is_commitment(rows[seq].value["value"])
        out = plain(rows)
        out[seq] = reencoded(rows[seq], lambda body: body.__setitem__("value", text))
        rewrite(conn, run_id, out)
    store = af.SqliteStore(db, readonly=True)
    with pytest.raises(af.VerificationError) as caught:
        af.Verifier(store).verify(run_id)
    store.close()
    assert (caught.value.code, caught.value.seq) == ("leak", seq)
