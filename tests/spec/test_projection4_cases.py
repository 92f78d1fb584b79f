"""Request projection 4 (docs/log-format.md section 8: ``served_system``, ``served_results``)
taught to the independent verifier from the page: on the projection-4 vectors
(``tests/vectors/projection4``, built by ``build_projection4.py``: runs whose calls are served
system pieces by reference and pieces that are not in ``system_pieces``, valid and damaged),
it gives every verdict the library gives, the one each vector is about among them: every
damaged vector fails with **receipt** at the root run's second receipt, the call whose state
holds the damage. Each file is read and left byte-identical; building the vectors again gives
the same verdicts. Any ``served_system`` and ``served_results`` on the recorded run, receipts
minted for them where the library can build the request: both verifiers agree."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import independent_verifier as iv
import orjson
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from vector_cases import assert_both_verifiers_give, assert_built_again_the_same

import agentfootprint as af
from agentfootprint.exchange.transfer import open_log
from agentfootprint.logformat.canonical import parse
from agentfootprint.logformat.request import ProjectionError, build_request
from projection4_logs import LEDGER, ROOT, Damage, served_run

VECTORS = Path(__file__).resolve().parents[1] / "vectors"
FOLDER = VECTORS / "projection4"
INDEX: list[dict[str, Any]] = orjson.loads((FOLDER / "projection4.json").read_bytes())

sys.path.insert(0, str(VECTORS))
import build_projection4  # noqa: E402


def test_the_index_lists_every_file_and_case() -> None:
    files = {p.name for p in FOLDER.iterdir() if p.suffix in (".db", ".afp")}
    assert {e["file"] for e in INDEX} == files
    assert [e["about"] for e in INDEX[::2]] == [c[0] for c in build_projection4.CASES]
    assert len(INDEX) == 2 * len(build_projection4.CASES)  # each a .db and its .afp
    invalid = [e for e in INDEX if e["code"] not in ("VALID_UNSIGNED", "VALID")]
    assert {(e["run"], e["code"]) for e in invalid} == {(ROOT, "receipt")} and len(invalid) == 14


@pytest.mark.parametrize("entry", INDEX, ids=[e["file"] for e in INDEX])
def test_both_verifiers_give_the_vector_its_verdicts(tmp_path: Path, entry: dict[str, Any]) -> None:
    assert_both_verifiers_give(entry, FOLDER, tmp_path, build_projection4.verdicts)


@pytest.mark.parametrize(
    "entry", [e for e in INDEX if e["code"] == "receipt"], ids=lambda e: e["file"]
)
def test_a_damaged_vector_fails_at_the_receipt_of_the_damaged_call(entry: dict[str, Any]) -> None:
    """The failing seq is the receipt of the root's call 1, the first whose state holds the
    damage (written in commit 4), not an earlier or later row."""
    source = open_log(FOLDER / entry["file"])
    try:
        rows = list(source.read(ROOT))
    finally:
        source.close()
    row = rows[entry["seq"]]
    assert row.type == "receipt" and parse(row.body)["call"] == 1


def _lenient_system(pieces: list[Any], segments: Any) -> list[Any]:
    """served_system read without section 8's refusals: slices clamp, any other member is
    a piece, whatever its value."""
    out: list[Any] = []
    for segment in segments:
        for member, value in segment.items():
            out += pieces[value[0] : value[1]] if member == "system" else [value]
    return out


def _lenient_results(messages: list[Any], replacements: Any) -> list[Any]:
    """served_results read without its refusals: a name no tool result carries is ignored."""
    texts = {r["tool_call_id"]: r["content"] for r in replacements}
    return [
        {**m, "content": texts[m["tool_call_id"]]}
        if m.get("role") == "tool" and m.get("tool_call_id") in texts
        else m
        for m in messages
    ]


LENIENT = {"served_system": _lenient_system, "served_results": _lenient_results}


@pytest.mark.parametrize(
    "entry",
    [e for e in INDEX if e["about"].startswith(("served_system", "served_results"))],
    ids=lambda e: e["file"],
)
def test_only_the_refusal_fails_a_damaged_edit(
    monkeypatch: pytest.MonkeyPatch, entry: dict[str, Any]
) -> None:
    """Each damaged edit's receipt was minted for what a verifier that does not refuse the
    edit rebuilds: the independent verifier with the refusal taken out finds the root
    valid. So the vector fails only in a verifier that refuses as section 8 says."""
    key = entry["about"].split()[0]
    path = FOLDER / entry["file"]
    assert (ROOT, "receipt", entry["seq"]) in iv.verify_file(path)
    reasons = {verdict[0]: reason for verdict, reason in iv.explain_file(path)}
    assert f"state key {key} does not apply" in reasons[ROOT]
    monkeypatch.setattr(iv, key, LENIENT[key])
    assert (ROOT, "VALID_UNSIGNED", None) in iv.verify_file(path)


def test_built_again_the_vectors_give_the_same_verdicts(tmp_path: Path) -> None:
    assert_built_again_the_same(INDEX, build_projection4.build(tmp_path))


# -- section 8's projection 4 under any edit ---------------------------------------------------

INDEXES = st.one_of(st.integers(-1, 4), st.none(), st.booleans(), st.just(1.0), st.just("0"))
SEGMENT = st.one_of(
    st.fixed_dictionaries({"system": st.lists(INDEXES, min_size=2, max_size=2)}),
    st.fixed_dictionaries({"system": st.lists(INDEXES, max_size=3)}),
    st.fixed_dictionaries({"piece": st.sampled_from([LEDGER[0], {}, "text", None, [1]])}),
    st.fixed_dictionaries({"message": st.just(LEDGER[1])}),
    st.fixed_dictionaries({"system": st.just([0, 1]), "piece": st.just(LEDGER[2])}),
    st.just({}),
)


@st.composite
def well_formed(draw: st.DrawFn) -> list[Any]:
    """Segments that apply to the two pieces of system_pieces: slices in order, pieces."""
    out: list[Any] = []
    floor = 0
    for _ in range(draw(st.integers(0, 4))):
        if draw(st.booleans()):
            out.append({"piece": draw(st.sampled_from(LEDGER))})
        else:
            start = draw(st.integers(floor, 2))
            end = draw(st.one_of(st.none(), st.integers(start, 2)))
            out.append({"system": [start, end]})
            floor = 2 if end is None else end
    return out


SERVED_SYSTEM = st.one_of(
    well_formed(), st.lists(SEGMENT, max_size=4), st.just({"system": [0, None]})
)
REPLACEMENT = st.fixed_dictionaries(
    {
        "tool_call_id": st.sampled_from(["call_1", "call_9", 1]),
        "content": st.sampled_from(["a ticket", "", None]),
    }
)
SERVED_RESULTS = st.one_of(
    st.none(),
    st.just([]),
    st.just([{"tool_call_id": "call_1", "content": "another ticket"}]),
    st.lists(REPLACEMENT, max_size=2),
    st.just([{"tool_call_id": "call_1", "content": "t", "role": "tool"}]),
    st.just("call_1"),
)


@given(served_system=SERVED_SYSTEM, served_results=SERVED_RESULTS)
@example(served_system=[{"system": [0, None]}, {"piece": LEDGER[0]}], served_results=None)
@example(
    served_system=[{"piece": LEDGER[0]}, {"system": [1, 2]}],
    served_results=[{"tool_call_id": "call_1", "content": "a ticket"}],
)
@example(served_system=[{"system": [0, 2]}, {"system": [1, None]}], served_results=None)
def test_both_verifiers_agree_on_any_served_system(
    tmp_path_factory: pytest.TempPathFactory, served_system: Any, served_results: Any
) -> None:
    """The root's commit 4 writes the drawn edits; its call 1 is minted for them when the
    library can build that request (else for the run's own): the independent verifier gives
    every verdict the library gives, valid ones among the examples."""
    drawn: dict[str, Any] = {"served_system": served_system}
    if served_results is not None:  # else the run's own (a ticket for call_1)
        drawn["served_results"] = served_results
    written = {(ROOT, build_projection4.EDITED, key): value for key, value in drawn.items()}

    def minted(state: dict[str, Any]) -> dict[str, Any]:
        changed = {**state, **drawn}
        try:
            build_request(changed, version=4)
        except ProjectionError:
            return state
        return changed

    path = tmp_path_factory.mktemp("p4") / "drawn.db"
    with af.SqliteStore(path) as store:
        served_run(store, Damage(written=written, minted={(ROOT, 1): minted}))
    ours = set(map(tuple, build_projection4.verdicts(path)))
    assert ours == set(iv.verify_file(path)), iv.explain_file(path)
