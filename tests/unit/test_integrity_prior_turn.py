"""prior-turn-evidence and the answer's evidence extractor: pure functions, upstream's cases."""

from __future__ import annotations

import json
import sys
import threading
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from agentfootprint.errors import UsageError
from agentfootprint.integrity import prior_turn
from agentfootprint.integrity.evidence import (
    _TOKEN_RUN,
    MAX_ANSWER_TOKENS,
    EvidenceIndex,
    Place,
    _js_number,
    _runs,
    answer_values,
    classify_token,
    normalize_token,
    tokenize,
)
from agentfootprint.integrity.prior_turn import CEILING, canary, judge_prior_turn

INVENTORY = [
    {"volume": "vol-0a1b2c3d", "size_mb": 98304.0, "wwpn": "10:00:00:90:fa:12:34:56"},
    {"volume": "vol-9f8e7d6c", "size_mb": 1240, "wwpn": "10:00:00:90:fa:12:34:57"},
]


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def answer(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def lookup(call_id: str, result: Any, *, name: str = "inventory") -> list[dict[str, Any]]:
    """The assistant's call and the tool's result, as the loop appends them."""
    content = result if isinstance(result, str) else json.dumps(result, separators=(",", ":"))
    return [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": call_id, "name": name, "arguments": "{}"}],
        },
        {"role": "tool", "tool_call_id": call_id, "name": name, "content": content},
    ]


def judged(history: list[dict[str, Any]], text: str) -> Any:
    index = EvidenceIndex.of(history)
    return judge_prior_turn(text, index, index.current_turn, index.tool_results_this_turn)


TURN_ONE = [
    user("What volumes do we have?"),
    *lookup("call_inv", INVENTORY),
    answer("vol-0a1b2c3d (98304 MB) and vol-9f8e7d6c (1,240 MB)."),
]


# -- the check ---------------------------------------------------------------------------------


def test_turn_two_answering_from_turn_ones_inventory_files_one_advisory() -> None:
    """Upstream's case: turn 2 makes no tool call and answers from turn 1's inventory."""
    history = [*TURN_ONE, user("Which one is the big one?")]
    found = judged(history, "The big one is vol-0a1b2c3d, at 98,304 MB.")
    assert found.verdict == "checked" and len(found.findings) == 1
    finding = found.findings[0]
    assert (finding.check, finding.kind, finding.seam) == (
        "prior-turn-evidence",
        "prior-turn-evidence",
        "claim",
    )
    assert finding.advisory and not finding.synthetic
    assert finding.subjects == (("answer", "final"),) and finding.predicate == "grounding"
    assert finding.witnesses == ("turn 1", "call_inv")
    assert finding.facts == {
        "count": 2,
        "newest_turn": 1,
        "distance": 1,
        "current_turn": 2,
        "tool_results_this_turn": 0,
    }
    assert finding.message == (
        "the final answer states 2 value(s) the run can ground, and every one of them was "
        "last served in turn 1 or earlier — 1 turn(s) before the turn being answered — while "
        "turn 2, the one being answered, contributed none of them. This turn called no tool "
        "and served no result, so the answer was assembled entirely from the conversation. "
        f"{CEILING} Nothing here blocked the answer, revised it or changed a byte of it."
    )


def test_the_ceiling_is_upstreams_with_the_window_sentence_made_exact() -> None:
    assert CEILING.startswith(
        "An answer that legitimately refers back to an earlier result is indistinguishable, "
        "by evidence alone, from one that has gone stale: this reports WHERE the values came "
        "from and never whether they were still the ones the reader wanted. "
    )
    assert CEILING.endswith(
        "values the run supplied rather than fetched (the prompt, a fact, a recalled passage) "
        "are exempt from grounding and invisible to it. A place to look, never a verdict that "
        "anything is wrong."
    )
    assert "exact" in CEILING and "floor" not in CEILING and "live window" not in CEILING
    assert prior_turn.CHECK == "prior-turn-evidence" and prior_turn.SEAM == "claim"


def test_a_follow_up_whose_lookup_echoes_the_identifier_passes() -> None:
    history = [
        *TURN_ONE,
        user("Is the big one healthy?"),
        *lookup("call_health", {"volume": "vol-0a1b2c3d", "health": "ok"}, name="health"),
    ]
    found = judged(history, "vol-0a1b2c3d is healthy; it holds 98304 MB.")
    assert found.verdict == "checked" and found.findings == ()


def test_a_follow_up_that_fetched_something_else_says_so() -> None:
    history = [
        *TURN_ONE,
        user("And the weather?"),
        *lookup("call_weather", "sunny", name="weather"),
    ]
    finding = judged(history, "Still vol-0a1b2c3d.").findings[0]
    assert finding.facts["tool_results_this_turn"] == 1
    assert (
        "This turn served 1 tool result(s) and the answer states no value from any of them."
        in finding.message
    )


@pytest.mark.parametrize(
    "text",
    [
        "Yes, it is the big one.",  # prose: nothing to extract
        "It has 32G and 48-port switches, 24/7.",  # numbers wearing units: prose
        "",
    ],
)
def test_an_answer_with_no_extractable_value_is_unreachable(text: str) -> None:
    history = [*TURN_ONE, user("Sure?")]
    assert judged(history, text).verdict == "unreachable"


def test_values_no_result_served_are_unreachable_and_turn_zero_too() -> None:
    history = [*TURN_ONE, user("Make one up.")]
    assert judged(history, "vol-ffff0000 with 77777 MB.").verdict == "unreachable"
    index = EvidenceIndex.of(lookup("call_inv", INVENTORY))  # no user message: turn 0
    assert judge_prior_turn("vol-0a1b2c3d", index, 0, 0).verdict == "unreachable"


def test_four_turns_stale_names_distance_four() -> None:
    history = list(TURN_ONE)
    for n in range(2, 5):
        history += [user(f"question {n}"), *lookup(f"call_{n}", f"note {n}", name="notes")]
        history.append(answer(f"answer {n}"))
    history.append(user("question 5"))
    finding = judged(history, "vol-9f8e7d6c, as before.").findings[0]
    assert finding.facts["distance"] == 4 and finding.facts["newest_turn"] == 1
    assert finding.facts["current_turn"] == 5 and finding.witnesses == ("turn 1", "call_inv")
    assert "4 turn(s) before the turn being answered" in finding.message


def test_the_newest_serving_turn_counts() -> None:
    """A value served in turn 1 and again in turn 3 is turn 3's: answering in turn 4 from it
    is one turn stale, not three."""
    history = [
        *TURN_ONE,
        user("q2"),
        answer("fine"),
        user("q3"),
        *lookup("call_again", INVENTORY),
        answer("same"),
        user("q4"),
    ]
    finding = judged(history, "vol-0a1b2c3d").findings[0]
    assert finding.facts["distance"] == 1 and finding.witnesses == ("turn 3", "call_again")


def test_an_error_result_is_not_evidence_and_a_truncated_index_says_nothing() -> None:
    history = [
        user("look up vol-0a1b2c3d"),
        {
            "role": "tool",
            "tool_call_id": "c",
            "name": "inventory",
            "content": "Error: no vol-0a1b2c3d",
            "is_error": True,
        },
        user("and?"),
    ]
    assert judged(history, "vol-0a1b2c3d").verdict == "unreachable"
    index = EvidenceIndex.of(history)
    assert index.tool_results_this_turn == 0 and index.current_turn == 2
    index._truncated = True  # as after MAX_INDEX_CHARS characters of results
    assert judge_prior_turn("vol-0a1b2c3d", index, 2, 0).verdict == "not_applicable"


def test_the_canary_is_caught_and_marked_synthetic() -> None:
    found = canary()
    assert len(found.findings) == 1
    assert found.findings[0].synthetic and found.findings[0].advisory
    assert found.findings[0].facts["distance"] == 1


@given(st.text(max_size=200), st.integers(min_value=-3, max_value=6), st.integers(-1, 5))
def test_the_judge_is_total(text: str, turn: int, results: int) -> None:
    index = EvidenceIndex.of([*TURN_ONE, user(text), *lookup("c2", text)])
    assert judge_prior_turn(text, index, turn, results).verdict in (
        "checked",
        "unreachable",
        "not_applicable",
    )


# -- the index ---------------------------------------------------------------------------------


def test_the_index_grows_with_the_history_and_names_each_place() -> None:
    history = [*TURN_ONE, user("again"), *lookup("call_2", [{"volume": "VOL-0A1B2C3D"}])]
    index = EvidenceIndex()
    index.add(history[:3], 0)
    assert index.places("vol-0a1b2c3d") == [
        Place(turn=1, tool_call_id="call_inv", tool="inventory", history_index=2)
    ]
    index.add(history[2:], 2)  # an overlap is skipped, not indexed twice
    assert index.indexed == len(history)
    assert [(p.turn, p.history_index) for p in index.places("VOL-0a1b2c3d")] == [(1, 2), (2, 6)]
    assert index.places("98304") and index.places("98,304.0") and index.places("1240")
    assert index.places("size_mb")  # keys are served too
    assert not index.places("vol-0a1b2c3")  # token-exact: a prefix is not the value
    with pytest.raises(UsageError, match="gap"):
        index.add([user("later")], len(history) + 1)


def test_a_0x_value_matches_without_its_prefix_both_ways() -> None:
    index = EvidenceIndex.of([user("q"), *lookup("a", "fcid 0xef0101"), *lookup("b", "ab12cd")])
    assert [p.tool_call_id for p in index.places("ef0101")] == ["a"]
    assert [p.tool_call_id for p in index.places("0xef0101")] == ["a"]
    assert [p.tool_call_id for p in index.places("0xab12cd")] == ["b"]


def test_an_absence_does_not_ground_what_it_looked_for() -> None:
    absence = {"af_absent": True, "looked_for": "vol-77aa", "checked": ["pool-0001"]}
    index = EvidenceIndex.of([user("q"), *lookup("a", absence)])
    assert index.places("vol-77aa") == [] and index.places("pool-0001")


def test_a_note_after_the_json_and_a_text_result_are_read_as_text() -> None:
    index = EvidenceIndex.of(
        [user("q"), *lookup("a", '{"n":1}\n[note: see run-0042]'), *lookup("b", "{broken 9999")]
    )
    assert index.places("run-0042") and index.places("9999")


# -- the extractor -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "values"),
    [
        ("32G", []),
        ("47th", []),
        ("2h", []),
        ("48-port", []),
        ("$20/month", []),
        ("24/7", []),
        ("port 123 and po1", []),  # under four digits; an identifier under four characters
        ("41200iops", ["41200"]),
        ("41,200 IOPS.", ["41200"]),
        ("98304.0", ["98304"]),
        ("1,240", ["1240"]),
        ("vol-0a1b2c3d", ["vol-0a1b2c3d"]),
        ("10:00:00:90:fa:12:34:56", ["10:00:00:90:fa:12:34:56"]),
        ("**UCSB-B200-M5**, fc1/3,fc1/4", ["ucsb-b200-m5", "fc1/3", "fc1/4"]),
        ("0xEF0101 then 0xef0101 again", ["0xef0101"]),
        ("esxi-host-alpha", []),  # no digit: invisible to the default
        ('the host "esxi-host-alpha" and “pool-a”', ["esxi-host-alpha", "pool-a"]),  # ours
        ('"abc" and "two words" and "ab"', []),
        ("9007199254740993", ["9007199254740993"]),  # past 15 digits: the digits, exactly
    ],
)
def test_the_extractor(text: str, values: list[str]) -> None:
    assert answer_values(text) == values


def test_normalize_and_classify_as_upstream() -> None:
    assert normalize_token("(98304.0),") == "98304"
    assert normalize_token("+007") == "7"
    assert normalize_token("0.0000001") == "1e-7"  # JavaScript's String(Number(v))
    assert normalize_token("-0") == "0"
    assert normalize_token("'\"") == ""
    assert tokenize("a,b 1,240,5 x|y") == ["a", "b", "1,240,5", "x", "y"]
    assert classify_token("12345") == "12345" and classify_token("123") is None
    assert classify_token("123", min_digits=3) == "123"
    assert classify_token("2024-01-15") == "2024-01-15"
    assert classify_token("abcd") is None


def test_an_answer_contributes_at_most_the_token_budget() -> None:
    text = " ".join(f"id-{n:05d}" for n in range(MAX_ANSWER_TOKENS + 5))
    values = answer_values(text)
    assert len(values) == MAX_ANSWER_TOKENS and values[-1] == f"id-{MAX_ANSWER_TOKENS - 1:05d}"


@given(st.text(st.characters(max_codepoint=127), max_size=200))
@example("".join(map(chr, range(128))))  # every ASCII character, each class's edges among them
@example("a\x0bb\x0cc\x1cd\x1de\x1ff")  # separators str.split would cut at, never tokens
@example("  1,240.5%\t+x@y#z$ ")
def test_ascii_text_is_cut_into_the_runs_the_pattern_finds(text: str) -> None:
    """The ASCII path (a byte table and ``split``) gives exactly the runs of token
    characters :data:`_TOKEN_RUN` finds, in order."""
    assert _runs(text) == _TOKEN_RUN.findall(text)


@given(st.text(max_size=300))
def test_every_value_comes_from_one_of_the_texts_tokens(text: str) -> None:
    """Total, and nothing invented: each value is a token the tokenizer yields for the
    text, or the number a token states (``41200iops`` states ``41200``)."""
    tokens = tokenize(text)
    stated = set(tokens) | {v for t in tokens if (v := classify_token(t)) is not None}
    values = answer_values(text)
    assert set(values) <= stated and len(values) == len(set(values))


@given(
    st.lists(
        st.sampled_from(["vol-0a1b2c3d", "41,200", "prose", '"quoted-x"', "32G", "fc1/3", ","]),
        max_size=30,
    ).map(" ".join)
)
def test_values_keep_first_appearance_order(text: str) -> None:
    values = answer_values(text)
    firsts = [t for t in tokenize(text) if t in values]
    assert values == list(dict.fromkeys(classify_token(t) or t for t in firsts))


_PIECES = st.sampled_from(
    [*"aZk0159 ,.$#:-/()\"'%+@x\n\t", "\u212a", "\u0130", "é", "0x", "1,240", "vol-0a1b", "98304.0"]
)
_TEXTS = st.lists(_PIECES, max_size=12).map("".join) | st.text(max_size=20)
_JSON = st.recursive(
    _TEXTS | st.integers(-(10**20), 10**20) | st.floats(allow_nan=False) | st.booleans(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TEXTS, inner, max_size=4),
    max_leaves=12,
)


def _spelled(value: Any) -> list[tuple[str, set[str]]]:
    """Each string of a JSON value and the forms it spells: a leaf its tokens and itself
    whole, a key itself whole (keys are not tokenized, as upstream)."""
    if isinstance(value, str):
        return [(value, {*tokenize(value), normalize_token(value)})]
    if isinstance(value, list):
        return [pair for member in value for pair in _spelled(member)]
    if isinstance(value, dict):
        keys = [(key, {normalize_token(key)}) for key in value]
        return [*keys, *(pair for member in value.values() for pair in _spelled(member))]
    return []


@example(["\u212a1234"])  # the Kelvin sign lowers to "k": the leaf's whole form is a value
@example(["($1234)", "12,345,", "a,b1234", "98304.0a", {"\u212a1,240": ""}])
@given(st.lists(_JSON, min_size=1, max_size=4) | st.dictionaries(_TEXTS, _JSON, max_size=4))
def test_a_result_grounds_every_value_its_leaves_and_keys_state(value: Any) -> None:
    """The index holds every form an answer value can take from a result: each value a
    leaf states as one of its tokens or whole (upstream indexes a string leaf whole too),
    or a key whole, is found, and found at the result. (A number with a unit glued on
    states the number, which no token spells: ``41200iops`` grounds no ``41200``, as
    upstream: matching is token-exact.)"""
    index = EvidenceIndex.of([user("q"), *lookup("r", value)])
    for text, spelled in _spelled(value):
        for stated in {*answer_values(text), *answer_values(normalize_token(text))} & spelled:
            assert [p.tool_call_id for p in index.places(stated)] == ["r"], (text, stated)


@given(
    st.integers(-(10**15) + 1, 10**15 - 1),
    st.sampled_from(["", "+", "0", "000"]),
)
@example(0, "+")  # "+0"
@example(0, "-")  # "-0": JavaScript prints 0
@example(10**15 - 1, "")  # 15 digits: the last exact in a double
def test_a_plain_integer_is_spelled_as_javascript_prints_its_double(n: int, lead: str) -> None:
    """An integer token of at most 15 digits takes ``str(int(v))``, JavaScript's
    ``String(Number(v))`` of it (``_js_number`` of its double)."""
    token = ("-" if n < 0 else lead) + str(abs(n))
    if len(token.lstrip("+-")) <= 15:
        assert normalize_token(token) == _js_number(float(token))


@given(st.integers(-(10**20), 10**20))
def test_an_integer_leaf_is_its_own_form(n: int) -> None:
    """The index adds an integer leaf as ``str(n)``: what normalizing it would give."""
    assert normalize_token(str(n)) == str(n)


@example("\\u0030xab12")  # a JSON escape spells the prefix
@example("0XAB12")
@given(st.sampled_from(["0xab12", "0XAB12", "\\u0030xab12", "0\\u0078ab12", "ab12"]))
def test_a_0x_form_is_found_without_its_prefix_however_the_result_spells_it(spelled: str) -> None:
    index = EvidenceIndex.of([user("q"), *lookup("r", f'["{spelled}"]')])
    assert [p.tool_call_id for p in index.places("ab12")] == ["r"]  # the prefix dropped
    assert [p.tool_call_id for p in index.places("0xab12")] == ["r"]  # both ways


_VALUES = ["vol-0a1b2c3d", "VOL-9F8E7D6C", "0xef0101", "ef0101", "41200", "1,240", "fc1/3"]


@given(
    st.lists(  # turns: each a list of results, each a few values (JSON rows or text)
        st.lists(
            st.tuples(st.lists(st.sampled_from(_VALUES), max_size=3), st.booleans()),
            max_size=3,
        ),
        min_size=1,
        max_size=4,
    ),
    st.lists(st.sampled_from(_VALUES), max_size=3),
)
@example([[(["vol-0a1b2c3d"], True)], [(["fc1/3"], False)]], ["vol-0a1b2c3d"])  # stale
@example([[(["vol-0a1b2c3d"], True)], [(["fc1/3"], False)]], ["vol-0a1b2c3d", "fc1/3"])
@example([[(["fc1/3"], True)], [(["ef0101"], False), ([], True)]], ["0xef0101"])
def test_the_turns_own_results_decide_as_the_whole_index_does(
    turns: list[list[tuple[list[str], bool]]], stated: list[str]
) -> None:
    """The judge reads only the turn's own results while one of them grounds a value; its
    judgement equals the one made from an index that read every result first."""
    history: list[dict[str, Any]] = []
    for t, results in enumerate(turns):
        history.append(user(f"question {t}"))
        for r, (values, as_rows) in enumerate(results):
            result: Any = [{"id": v} for v in values] if as_rows else " ".join(values) or "none"
            history.extend(lookup(f"c{t}-{r}", result))
    text = "Answer: " + ", ".join(stated)
    lazy = EvidenceIndex.of(history)
    eager = EvidenceIndex.of(history)
    eager.places("anything")  # reads every result
    turn, results = lazy.current_turn, lazy.tool_results_this_turn
    assert judge_prior_turn(text, lazy, turn, results) == judge_prior_turn(
        text, eager, turn, results
    )


@given(
    st.lists(
        st.lists(st.lists(st.sampled_from(_VALUES), max_size=3), max_size=3),
        min_size=1,
        max_size=4,
    ),
    st.lists(st.sampled_from([*_VALUES, "vol-77aa0000", "0xabcdef12"]), max_size=4),
)
@example([[["vol-0a1b2c3d"]], [["fc1/3"], []]], ["vol-0a1b2c3d", "fc1/3", "vol-77aa0000"])
@example([[["ef0101"]], [["41200"]]], ["0xef0101", "41200"])  # an older turn's, unread
def test_serves_is_whether_a_value_has_a_place(
    turns: list[list[list[str]]], asked: list[str]
) -> None:
    """``serves`` (read newest first, the rest only when needed) says what ``places`` says,
    whatever was asked before."""
    history: list[dict[str, Any]] = []
    for t, results in enumerate(turns):
        history.append(user(f"question {t}"))
        for r, values in enumerate(results):
            history.extend(lookup(f"c{t}-{r}", [{"id": v} for v in values]))
    lazy, eager = EvidenceIndex.of(history), EvidenceIndex.of(history)
    for value in asked:
        assert lazy.serves(value) == bool(eager.places(value)), value


def test_one_index_read_by_several_threads_at_once_answers_as_a_fresh_one() -> None:
    """A kept index is read by the turns of its conversation, which may run in threads: its
    results are read into it under its lock, and every answer equals a fresh index's."""
    history: list[dict[str, Any]] = []
    for turn in range(20):
        history.append(user(f"question {turn}"))
        for r in range(3):
            history.extend(lookup(f"c{turn}-{r}", [{"id": f"vol-{turn:02d}{r:02d}aa"}]))
    shared, fresh = EvidenceIndex.of(history), EvidenceIndex.of(history)
    asked = [(f"vol-{t:02d}{r:02d}aa", t) for t in range(20) for r in range(3)]
    expected = [(bool(fresh.places(v)), fresh.served_in_turn([v], t)) for v, t in asked]
    barrier = threading.Barrier(4)
    answers: list[list[tuple[bool, bool]]] = []

    def read() -> None:
        barrier.wait()
        answers.append([(shared.serves(v), shared.served_in_turn([v], t)) for v, t in asked])

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as the interpreter can
    try:
        threads = [threading.Thread(target=read) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert answers == [expected] * 4
