"""Format v5 (docs/log-format.md section 5.9) taught to the independent verifier from the page:
on the pause vectors (``tests/vectors/pauses``, built by ``build_pauses.py``: paused runs and
their continuations, valid and damaged), it gives every verdict and whole-file finding the
library gives, and the one each vector is about; each file is read and left byte-identical,
and building the vectors again gives the same verdicts."""

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

VECTORS = Path(__file__).resolve().parents[1] / "vectors"
FOLDER = VECTORS / "pauses"
INDEX: list[dict[str, Any]] = orjson.loads((FOLDER / "pauses.json").read_bytes())

sys.path.insert(0, str(VECTORS))
import build_pauses  # noqa: E402


def test_the_index_lists_every_file_and_case() -> None:
    assert {e["file"] for e in INDEX} == {p.name for p in FOLDER.glob("*.db")}
    assert [e["about"] for e in INDEX] == [about for about, _, _, _ in build_pauses.CASES]


@pytest.mark.parametrize("entry", INDEX, ids=[e["about"] for e in INDEX])
def test_both_verifiers_give_the_vector_its_verdicts(tmp_path: Path, entry: dict[str, Any]) -> None:
    assert_both_verifiers_give(entry, FOLDER, tmp_path, build_pauses.verdicts)


def test_built_again_the_vectors_give_the_same_verdicts(tmp_path: Path) -> None:
    assert_built_again_the_same(INDEX, build_pauses.build(tmp_path))


# -- the rules of section 5.9 under random damage -----------------------------------------

TEXT = st.text(st.characters(codec="utf-8"), max_size=6)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-9, 9) | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=6,
)


@st.composite
def damaged_pending(draw: st.DrawFn) -> dict[str, Any]:
    pending = dict(build_pauses.PENDING)
    how = draw(st.sampled_from(["as is", "drop", "retype", "add"]))
    name = draw(st.sampled_from([*sorted(pending), "service", "context", "url"]))
    if how == "drop":
        pending.pop(name, None)
    elif how in ("retype", "add"):
        pending[name] = draw(JSON)
    return pending


@given(
    pending=damaged_pending(),
    close_differs=st.booleans(),
    members=st.sampled_from(
        [
            {"resumes": "req-1"},
            {"abandons": "req-1"},
            {"resumes": "req-2"},
            {},
            {"resumes": "req-1", "abandons": "req-1"},
            {"resumes": ""},
            {"abandons": 5},
        ]
    ),
    child_format=st.sampled_from([build_pauses.LOG_FORMAT_V3, "agentfootprint/log/v5"]),
    answer=st.one_of(st.dictionaries(st.sampled_from(["start", "nights", "room"]), JSON), JSON),
    stage=st.sampled_from(["resume", "seed"]),
    verb=st.sampled_from(["set", "merge"]),
)
@example(
    pending=dict(build_pauses.PENDING),
    close_differs=False,
    members={"resumes": "req-1"},
    child_format="agentfootprint/log/v5",
    answer={"start": "x"},
    stage="resume",
    verb="set",
)
def test_both_verifiers_agree_on_damaged_pauses(
    tmp_path_factory: pytest.TempPathFactory,
    pending: dict[str, Any],
    close_differs: bool,
    members: dict[str, Any],
    child_format: str,
    answer: Any,
    stage: str,
    verb: str,
) -> None:
    """Any pending, any answer, any way of continuing: the independent verifier gives every
    verdict the library gives (a valid pause and resume among the examples)."""
    path = tmp_path_factory.mktemp("pause") / "damaged.db"
    closing = {**pending, "question": "Another question?"} if close_differs else pending
    with af.SqliteStore(path) as store:
        parent = build_pauses.paused(store, pending=pending, close_pending=closing)
        opened = build_pauses.v5_open("r", parent, **members)
        opened["format"] = child_format
        value = answer if verb == "set" or isinstance(answer, dict) else {"v": answer}
        batch = [build_pauses.write(0, "resume_answer", value, verb=verb)]
        build_pauses.record(
            store, "r", opened, [*batch, build_pauses.commit(0, 1, stage)], [build_pauses.close(1)]
        )
    ours = set(map(tuple, build_pauses.verdicts(path)))
    assert ours == set(iv.verify_file(path)), iv.explain_file(path)
