"""Format v5 (docs/log-format.md section 5.9) taught to the independent verifier from the page:
on hand-built SQLite logs of paused runs and their continuations, valid and damaged, it gives
the library's verdict for every run and every whole-file finding, and the expected code."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import independent_verifier as iv
import pytest

import agentfootprint as af
from agentfootprint.logformat.log_formats import LOG_FORMAT_V3
from agentfootprint.testing.pause_logs import (
    PENDING,
    close,
    commit,
    paused,
    record,
    resumed,
    v5_open,
    write,
)

Build = Callable[[Any], None]


def _valid(store: Any) -> None:
    resumed(store, paused(store))


def _abandoned(store: Any) -> None:
    parent = paused(store)
    opened = v5_open("r", parent, abandons="req-1")
    record(store, "r", opened, [write(0, "history", ["x"]), commit(0, 1, "seed")], [close(1)])


def _plain_continuation(store: Any) -> None:
    record(store, "r", v5_open("r", paused(store)), [commit(0)], [close(1)])


def _other_request(store: Any) -> None:
    resumed(store, paused(store), resumes="req-2")


def _not_paused_parent(store: Any) -> None:
    resumed(store, record(store, "p", v5_open("p"), [commit(0)], [close(1)]))


def _extra_pending_member(store: Any) -> None:
    paused(store, pending={**PENDING, "authorization_url": "https://consent.example"})


def _pending_differs(store: Any) -> None:
    paused(store, close_pending={**PENDING, "question": "Something else?"})


def _pending_on_answered(store: Any) -> None:
    record(store, "p", v5_open("p"), [commit(0)], [close(1, pending=PENDING)])


def _paused_in_v3(store: Any) -> None:
    opened = {**v5_open("p"), "format": LOG_FORMAT_V3}
    record(
        store,
        "p",
        opened,
        [write(0, "pending", PENDING), commit(0, 1)],
        [close(1, "paused", pending=PENDING)],
    )


def _resumes_in_v3(store: Any) -> None:
    resumed(store, paused(store), format=LOG_FORMAT_V3)


def _both_members(store: Any) -> None:
    resumed(store, paused(store), abandons="req-1")


def _answer_not_asked(store: Any) -> None:
    resumed(store, paused(store), answer={"start": "x", "room": "blue"})


def _answer_first_stage(store: Any) -> None:
    resumed(store, paused(store), stage="seed")


def _answer_appended(store: Any) -> None:
    parent = paused(store)
    opened = v5_open("r", parent, resumes="req-1")
    batch = [write(0, "resume_answer", [1], verb="append"), commit(0, 1, "resume")]
    record(store, "r", opened, batch, [close(1)])


def _two_answers(store: Any) -> None:
    parent = paused(store)
    resumed(store, parent, "r1")
    resumed(store, parent, "r2", resumes=None, abandons="req-1")


#: (name, build, run whose verdict is expected, expected verdict or code)
CASES: list[tuple[str, Build, str, str]] = [
    ("a pause and its resume", _valid, "r", iv.VALID),
    ("a pause abandoned", _abandoned, "r", iv.VALID),
    ("a paused parent continued plainly", _plain_continuation, "r", "ancestry"),
    ("a resume naming another request", _other_request, "r", "ancestry"),
    ("a resume of a parent that did not pause", _not_paused_parent, "r", "ancestry"),
    ("pending with a member 5.9 does not list", _extra_pending_member, "p", "structure"),
    ("run.close pending differs from the state's", _pending_differs, "p", "structure"),
    ("pending on an answered close", _pending_on_answered, "p", "structure"),
    ("paused in format v3", _paused_in_v3, "p", "structure"),
    ("resumes in format v3", _resumes_in_v3, "r", "structure"),
    ("resumes and abandons", _both_members, "r", "structure"),
    ("an answer to a field not asked", _answer_not_asked, "r", "structure"),
    ("a resume whose first stage is not resume", _answer_first_stage, "r", "structure"),
    ("a resume that appends its answer", _answer_appended, "r", "structure"),
    ("two answers to one pause", _two_answers, "p", "pause"),
]


def library(path: Path) -> set[tuple[Any, str, int | None]]:
    out = set()
    with af.SqliteStore(path, readonly=True) as store:
        for run, result in af.Verifier(store).verify_all():
            if isinstance(result, af.VerificationError):
                out.add((run, result.code, result.seq))
            else:
                out.add((run, result.outcome.value, None))
    return out


@pytest.mark.parametrize(("name", "build", "target", "expected"), CASES, ids=[c[0] for c in CASES])
def test_both_verifiers_agree(
    tmp_path: Path, name: str, build: Build, target: str, expected: str
) -> None:
    path = tmp_path / "v5.db"
    with af.SqliteStore(path) as store:
        build(store)
    theirs = set(iv.verify_file(path))
    ours = library(path)
    assert ours == theirs, iv.explain_file(path)
    assert expected in {code for run, code, _ in ours if run == target}, sorted(ours, key=str)
