"""Format v6 (docs/log-format.md section 5.10, ``reads`` on writes) taught to the independent
verifier from the page: on the provenance vectors (``tests/vectors/provenance``, built by
``build_provenance.py`` from runs the library recorded with ``write_provenance``, then changed
and re-chained), it gives every verdict the library gives, the one each vector is about among
them: a forged ``reads`` naming a key absent at its commit is INVALID (structure, at the
write), a ``reads`` naming a key its own commit writes after it is VALID. Each file is read and
left byte-identical; building the vectors again gives the same verdicts. Random ``reads`` on a
recorded run: both verifiers agree."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import independent_verifier as iv
import orjson
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from vector_cases import assert_both_verifiers_give, assert_built_again_the_same

from agentfootprint.testing.tamper import plain, read_rows, reencoded, rewrite, tampering

VECTORS = Path(__file__).resolve().parents[1] / "vectors"
FOLDER = VECTORS / "provenance"
INDEX: list[dict[str, Any]] = orjson.loads((FOLDER / "provenance.json").read_bytes())

sys.path.insert(0, str(VECTORS))
import build_provenance  # noqa: E402


def test_the_index_lists_every_file_and_case() -> None:
    files = {p.name for p in FOLDER.iterdir() if p.suffix in (".db", ".afp")}
    assert {e["file"] for e in INDEX} == files
    assert sorted({e["about"] for e in INDEX}) == sorted(
        about for about, _, _, _ in build_provenance.CASES
    )
    forged = [e for e in INDEX if e["about"].startswith("a forged reads")]
    assert {e["code"] for e in forged} == {"structure"} and len(forged) == 2  # .db and .afp


@pytest.mark.parametrize("entry", INDEX, ids=[e["file"] for e in INDEX])
def test_both_verifiers_give_the_vector_its_verdicts(tmp_path: Path, entry: dict[str, Any]) -> None:
    assert_both_verifiers_give(entry, FOLDER, tmp_path, build_provenance.verdicts)


def test_built_again_the_vectors_give_the_same_verdicts(tmp_path: Path) -> None:
    assert_built_again_the_same(INDEX, build_provenance.build(tmp_path))


# -- section 5.10 under random reads ---------------------------------------------------------

KEYS = st.sampled_from(
    ["history", "iteration", "last_response", "final_answer", "usage", "nowhere", "", "é", "😀"]
)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("provenance") / "base.db"
    build_provenance.record(path)
    return path


@settings(max_examples=40, deadline=None)
@given(
    write=st.integers(0, 30),
    reads=st.one_of(st.lists(KEYS, max_size=4), st.none(), st.just(["\uffff", "😀"])),
    keep_order=st.booleans(),
)
@example(write=0, reads=["\uffff", "😀"], keep_order=True)  # code points, not UTF-16 units
@example(write=0, reads=["😀", "\uffff"], keep_order=True)
def test_both_verifiers_agree_on_any_reads(
    tmp_path_factory: pytest.TempPathFactory,
    recorded: Path,
    write: int,
    reads: list[str] | None,
    keep_order: bool,
) -> None:
    """Any write of the continuation given any ``reads`` (sorted or as drawn, or none): the
    independent verifier gives every verdict the library gives."""
    path = tmp_path_factory.mktemp("reads") / "changed.db"
    shutil.copyfile(recorded, path)
    with tampering(path) as conn:
        rows = read_rows(conn, build_provenance.CHILD)
        writes = [i for i, r in enumerate(rows) if r.type == "write"]
        i = writes[write % len(writes)]
        value = reads if reads is None or keep_order else sorted(reads)

        def edit(body: dict[str, Any]) -> None:
            if value is None:
                body.pop("reads", None)
            else:
                body["reads"] = value

        out = plain(rows)
        out[i] = reencoded(rows[i], edit)
        rewrite(conn, build_provenance.CHILD, out)
    ours = set(map(tuple, build_provenance.verdicts(path)))
    assert ours == set(iv.verify_file(path)), iv.explain_file(path)
