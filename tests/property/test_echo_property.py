"""Echo redaction, as a property: once the boundary has committed a value, whatever JSON it
records next, no conversation text of the recorded form (as the verifier reads it:
:func:`~agentfootprint.logformat.echo.conversation_texts`) quotes the value, and everything
outside the conversation's members is recorded as it was; a version 2 policy changes nothing
but the keys it names."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import example, given
from hypothesis import strategies as st

import agentfootprint as af
from agentfootprint.logformat.commitments import is_commitment
from agentfootprint.logformat.echo import (
    CONVERSATION_KEYS,
    ECHO_MIN_CHARS,
    EchoSearch,
    conversation_texts,
)
from agentfootprint.store.redaction import Boundary

SECRET = "ann.lee@example.com"
NUMBER = 123456789

names = st.sampled_from((*CONVERSATION_KEYS, "role", "name", "id", "note", "items"))
pieces = st.sampled_from(("", "mail ", " now", "{", "[", " ", SECRET, str(NUMBER), "ann.lee"))
texts = st.lists(pieces, max_size=4).map("".join)
scalars = st.none() | st.booleans() | st.integers(-1000, 10**9) | texts


def json_values(draw_text: st.SearchStrategy[str]) -> st.SearchStrategy[Any]:
    return st.recursive(
        scalars,
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.dictionaries(names, inner, max_size=3)
            # walkable JSON text holding more of the same
            | st.dictionaries(names, inner, max_size=2).map(lambda d: orjson.dumps(d).decode())
        ),
        max_leaves=10,
    )


def boundary(version: int = 3) -> Boundary:
    policy = af.RedactionPolicy(keys=["email", "ssn"]).at_version(version)
    made = Boundary(policy)
    made.commit({"email": SECRET, "ssn": NUMBER})  # the run committed both earlier
    return made


def outside_conversation(value: Any, inside: bool = False) -> list[Any]:
    """The scalars of ``value`` outside conversation members (and not in JSON text)."""
    if type(value) is dict:
        return [
            x
            for k, v in sorted(value.items())
            for x in outside_conversation(v, inside or k in CONVERSATION_KEYS)
        ]
    if type(value) is list:
        return [x for v in value for x in outside_conversation(v, inside)]
    return [] if inside or (type(value) is str and value[:1] in "{[") else [value]


@given(json_values(texts))
@example({"content": f"mail {SECRET}"})
@example({"result": [{"note": str(NUMBER)}]})
@example({"arguments": orjson.dumps({"to": SECRET}).decode()})
@example({"content": orjson.dumps([{"content": f"{SECRET}"}]).decode()})
@example({"name": SECRET, "id": str(NUMBER)})
def test_no_conversation_text_quotes_a_committed_value(value: Any) -> None:
    committed = boundary().commit(value)
    for path, _under, text in conversation_texts(committed):
        assert SECRET not in text and str(NUMBER) not in text, (path, text)
    assert outside_conversation(committed) == outside_conversation(value)


@given(json_values(texts))
def test_a_version_2_policy_commits_no_quotation(value: Any) -> None:
    assert boundary(version=2).commit(value) == value  # neither "email" nor "ssn" is a name


@given(st.text(min_size=ECHO_MIN_CHARS, max_size=40))
def test_any_literal_is_found_wherever_the_conversation_quotes_it(secret: str) -> None:
    made = Boundary(af.RedactionPolicy(keys=["email"]))
    made.commit({"email": secret})
    quoted = made.commit({"content": f"<{secret}>", "role": "assistant"})
    assert is_commitment(quoted["content"]) and quoted["role"] == "assistant"


literal_sets = st.lists(
    st.text(alphabet="abcé😀-@.0123", min_size=ECHO_MIN_CHARS, max_size=14), max_size=80
)


@given(literal_sets, st.lists(st.text(alphabet="abcé😀-@.0123", max_size=40), max_size=6))
@example(["aaaaaaaa"] * 2 + [f"{i:08d}" for i in range(300)], ["xx00000299yy", "aaaaaaa"])
def test_the_search_finds_exactly_the_literals_a_text_holds(
    literals: list[str], extra: list[str]
) -> None:
    """Held one by one or in the automaton (more than 32), learned at once or one by one, in
    a fork or not: a text holds a literal exactly when the search finds one, and it is one."""
    at_once = EchoSearch(literals)
    one_by_one = EchoSearch()
    for literal in literals:
        one_by_one.learn([literal])
    forked = EchoSearch(literals[: len(literals) // 2]).fork()
    forked.learn(literals[len(literals) // 2 :])
    texts = [*extra, *(f"<{lit}>" for lit in literals[:5]), *(lit[1:] for lit in literals[:5])]
    for text in texts:
        holds = any(lit in text for lit in literals)
        for search in (at_once, one_by_one, forked):
            found = search.found(text)
            assert (found is not None) == holds, (text, found)
            assert found is None or (found in text and found in literals)
