"""`agentfootprint runs --pending`: the questions a log still waits on (log format v5), read
from the events of a database or a bundle, never from the run index; a pause that a run
resumes or abandons is not listed, one continued plainly (which verify refuses) still is."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

import agentfootprint as af
from agentfootprint.audit.pauses import open_questions
from agentfootprint.cli import EXIT_OK, main
from agentfootprint.testing.pause_logs import PENDING, paused, record, resumed, v5_open

VECTORS = Path(__file__).resolve().parents[1] / "vectors" / "pauses"


def runs(*args: object) -> str:
    result = CliRunner().invoke(main, ["runs", *map(str, args)])
    assert result.exit_code == EXIT_OK, result.output
    return result.output


@pytest.mark.parametrize(
    ("vector", "listed"),
    [
        ("a-pause-and-its-resume.db", False),
        ("a-pause-abandoned.db", False),
        ("a-paused-parent-continued-plainly.db", True),
        ("a-resume-naming-another-request.db", True),
    ],
)
def test_a_pause_is_open_until_a_run_names_its_request(
    tmp_path: Path, vector: str, listed: bool
) -> None:
    db = tmp_path / vector
    shutil.copyfile(VECTORS / vector, db)
    before = db.read_bytes()
    shown = runs(db, "--pending")
    line = 'p  request="req-1"  kind="input"  tool="book"  question="Which dates?"'
    assert (line in shown) is listed and ("no open questions" in shown) is not listed
    assert db.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == [vector]


def test_an_answer_that_never_closed_leaves_the_question_open_and_is_named(
    tmp_path: Path,
) -> None:
    db = tmp_path / "retry.db"
    shutil.copyfile(VECTORS / "a-resume-that-never-closed-and-its-retry.db", db)
    assert "no open questions" in runs(db, "--pending")  # the retry closed: answered
    with af.SqliteStore(db) as store:
        parent = paused(store, "p9", pending={**PENDING, "request_id": "req-9"})
        record(store, "dead", v5_open("dead", parent, resumes="req-9"))
    with af.SqliteStore(db, readonly=True) as reader:
        (question,) = open_questions(reader)
    assert (question.run_id, question.unclosed) == ("p9", ("dead",))
    assert "began-answering-never-closed=dead" in runs(db, "--pending")


def test_open_questions_of_a_database_and_of_its_bundle(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    with af.SqliteStore(db) as store:
        resumed(store, paused(store, "p1"), "r1")
        paused(store, "p2", pending={**PENDING, "request_id": "req-9", "question": "Which room?"})
    with af.SqliteStore(db, readonly=True) as reader:
        questions = [(q.run_id, q.pending["request_id"]) for q in open_questions(reader)]
    assert questions == [("p2", "req-9")]
    shown = runs(db, "--pending")
    assert "p2" in shown and "Which room?" in shown and "fields=nights,start" in shown
    assert "p1" not in shown
    bundle = tmp_path / "p2.afp"
    out = CliRunner().invoke(main, ["export", str(db), "--run", "p2", "--out", str(bundle)])
    assert out.exit_code == EXIT_OK, out.output
    assert "Which room?" in runs(bundle, "--pending")
    listed = runs(db)  # the plain listing names the outcome
    assert "paused" in listed and "answered" in listed
