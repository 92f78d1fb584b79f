"""Log format v5 (docs/log-format.md section 5.9) on hand-built logs: a paused run verifies
and its `pending` is checked; its continuation must answer or abandon it; a resume commits
the answer first, within the fields asked; a second answer to one pause is a whole-file
finding; outside v5 none of this is allowed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import agentfootprint as af
from agentfootprint.logformat.log_formats import LOG_FORMAT_V3, LOG_FORMAT_V5
from agentfootprint.store.memory import MemoryStore
from agentfootprint.testing.pause_logs import (
    PENDING,
    close,
    commit,
    paused,
    record,
    resumed,
    unchecked_answers,
    v5_open,
    write,
)


def failure(store: Any, run_id: str) -> af.VerificationError:
    with pytest.raises(af.VerificationError) as caught:
        af.Verifier(store).verify(run_id)
    return caught.value


def test_a_paused_run_and_its_resume_verify() -> None:
    store = MemoryStore()
    parent = paused(store)
    resumed(store, parent)
    verifier = af.Verifier(store)
    first, second = verifier.verify("p"), verifier.verify("r")
    assert first.outcome is af.Outcome.VALID_UNSIGNED and first.close["outcome"] == "paused"
    assert first.log_format == LOG_FORMAT_V5
    assert second.outcome is af.Outcome.VALID_UNSIGNED
    assert second.final_state["resume_answer"] == {"start": "2026-12-24", "nights": 2}
    assert second.final_state["history"] == ["hello"]  # the paused run's state, continued


def test_abandoning_a_pause_is_explicit() -> None:
    store = MemoryStore()
    parent = paused(store)
    record(
        store,
        "a",
        v5_open("a", parent, abandons="req-1"),
        [write(0, "history", ["hello", "something else"]), commit(0, 1, stage="seed")],
        [close(1)],
    )
    assert af.Verifier(store).verify("a").outcome is af.Outcome.VALID_UNSIGNED


@pytest.mark.parametrize(
    ("pending", "close_extra", "words"),
    [
        ({**PENDING, "secret_url": "https://x"}, {}, "does not list"),
        ({k: v for k, v in PENDING.items() if k != "question"}, {}, "'question' missing"),
        ({**PENDING, "kind": "approval"}, {}, "kind 'approval'"),
        ({**PENDING, "request_id": ""}, {}, "request_id is empty"),
        ({**PENDING, "fields": {"a": "text"}}, {}, "not an object"),
        ({**PENDING, "context": []}, {}, "'context' is not dict"),
        (PENDING, {"close_pending": {**PENDING, "question": "Other?"}}, "differs"),
    ],
)
def test_a_malformed_or_different_pending_is_structure(
    pending: dict[str, Any], close_extra: dict[str, Any], words: str
) -> None:
    store = MemoryStore()
    paused(store, pending=pending, **close_extra)
    error = failure(store, "p")
    assert (error.code, error.seq) == ("structure", 5) and words in error.reason


def test_pending_only_on_a_paused_close() -> None:
    store = MemoryStore()
    record(store, "x", v5_open("x"), [commit(0)], [close(1, pending=PENDING)])
    error = failure(store, "x")
    assert error.code == "structure" and "outcome answered" in error.reason


def test_a_paused_close_without_pending_state_is_structure() -> None:
    store = MemoryStore()
    record(store, "x", v5_open("x"), [commit(0)], [close(1, "paused", pending=PENDING)])
    assert "differs from the pending" in failure(store, "x").reason


@pytest.mark.parametrize(
    ("members", "words"),
    [
        ({"resumes": None}, "must resume or abandon"),
        ({"resumes": "req-2"}, "paused on req-1"),
        ({"resumes": None, "abandons": "req-9"}, "paused on req-1"),
    ],
)
def test_a_paused_parent_is_continued_only_by_its_answer(
    members: dict[str, Any], words: str
) -> None:
    store = MemoryStore()
    parent = paused(store)
    opened = v5_open("c", parent, **{k: v for k, v in members.items() if v is not None})
    record(store, "c", opened, [commit(0)], [close(1)])
    error = failure(store, "c")
    assert (error.code, error.seq) == ("ancestry", 0) and words in error.reason


def test_an_answer_needs_a_paused_parent() -> None:
    store = MemoryStore()
    parent = record(store, "p", v5_open("p"), [commit(0)], [close(1)])
    resumed(store, parent)
    error = failure(store, "r")
    assert (error.code, error.seq) == ("ancestry", 0) and "did not pause" in error.reason


@pytest.mark.parametrize(
    ("members", "words"),
    [
        ({"resumes": "req-1", "abandons": "req-1"}, "both resumes and abandons"),
        ({"resumes": ""}, "non-empty string"),
        ({"resumes": 7}, "non-empty string"),
        ({"format": LOG_FORMAT_V3}, "outside format v5"),
    ],
)
def test_resumes_and_abandons_are_well_formed(members: dict[str, Any], words: str) -> None:
    store = MemoryStore()
    parent = paused(store)
    resumed(store, parent, **members)
    error = failure(store, "r")
    assert (error.code, error.seq) == ("structure", 0) and words in error.reason


def test_an_answer_without_a_parent_is_structure() -> None:
    store = MemoryStore()
    record(store, "r", v5_open("r", resumes="req-1"), [commit(0)], [close(1)])
    assert "names no parent" in failure(store, "r").reason


@pytest.mark.parametrize(
    ("stage", "answer", "words"),
    [
        ("seed", None, "the stage 'resume'"),
        ("resume", {"start": "x", "room": "blue"}, "not asked: ['room']"),
        ("resume", ["not", "an", "object"], "not an object"),
    ],
)
def test_a_resume_commits_the_answer_first(stage: str, answer: Any, words: str) -> None:
    store = MemoryStore()
    parent = paused(store)
    resumed(store, parent, stage=stage, answer=answer)
    error = failure(store, "r")
    assert (error.code, error.seq) == ("structure", 2) and words in error.reason


def test_a_resume_that_writes_no_answer_is_structure() -> None:
    store = MemoryStore()
    parent = paused(store)
    record(
        store, "r", v5_open("r", parent, resumes="req-1"), [commit(0, stage="resume")], [close(1)]
    )
    assert "does not set 'resume_answer'" in failure(store, "r").reason


def test_a_committed_answer_is_not_opened() -> None:
    store = MemoryStore()
    parent = paused(store)
    resumed(store, parent, answer={"$commit": "ab" * 32})
    assert af.Verifier(store).verify("r").outcome is af.Outcome.VALID_UNSIGNED


def test_outside_v5_a_paused_outcome_is_structure() -> None:
    store = MemoryStore()
    opened = {**v5_open("x"), "format": LOG_FORMAT_V3}
    record(store, "x", opened, [commit(0)], [close(1, "paused", pending=PENDING)])
    error = failure(store, "x")
    assert error.code == "structure" and "unknown outcome 'paused'" in error.reason


def test_two_answers_to_one_pause_are_a_whole_file_finding(tmp_path: Path) -> None:
    """Each run verifies; the file does not: section 9.5 step 5, code pause (and the CLI
    says so with exit 1)."""
    db = tmp_path / "two.db"
    with af.SqliteStore(db) as store:
        parent = paused(store)
        resumed(store, parent, "r1")
        with pytest.raises(af.PauseAnsweredError):  # the store refuses it ...
            resumed(store, parent, "r2", resumes=None, abandons="req-1")
        with unchecked_answers():  # ... so it is written as a writer that does not check
            resumed(store, parent, "r2", resumes=None, abandons="req-1")
        results = list(af.Verifier(store).verify_all())
    verdicts = {run_id: r for run_id, r in results if isinstance(r, af.RunVerification)}
    assert set(verdicts) == {"p", "r1", "r2"}
    findings = [r for _, r in results if isinstance(r, af.VerificationError)]
    assert [(f.code, f.run_id, f.seq) for f in findings] == [("pause", "p", None)]
    assert "answered by 2 runs (r1, r2)" in findings[0].reason
    from click.testing import CliRunner

    from agentfootprint.cli import EXIT_INVALID, main

    shown = CliRunner().invoke(main, ["verify", str(db)])
    assert shown.exit_code == EXIT_INVALID and "pause" in shown.output
