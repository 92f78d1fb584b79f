"""Build the log format v5 vectors (issue 27, docs/log-format.md section 5.9) in
``tests/vectors/pauses/``: ``*.db`` and the index ``pauses.json``.

Run ``python tests/vectors/build_pauses.py`` to rebuild them. No agent records format v5 yet,
so each vector is written row by row (``agentfootprint.testing.pause_logs``): a run that
closes ``paused`` with its ``pending`` question (an input ask with two fields), and the runs
that continue it, valid (a resume, an abandonment) or damaged the way section 5.9 forbids (a
plain continuation, a resume naming another request, an answer to a field not asked, two
answers to one pause...). Each entry of ``pauses.json`` names the run the expected verdict is
about (``run``), that verdict or failure code and its seq (``code``, ``seq``), and every
verdict whole-file verification gives (``verdicts``: run, code, seq). Both verifiers, the
library's and the independent one of ``tests/spec``, must give them
(``tests/spec/test_pause_cases.py``).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import orjson
from vector_index import Entry, verdicts

import agentfootprint as af
from agentfootprint.logformat.commitments import PolicyDocument, commitment_digest
from agentfootprint.logformat.log_formats import LOG_FORMAT_V3
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

HERE = Path(__file__).resolve().parent / "pauses"


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
    with unchecked_answers():  # the stores refuse a second answer: a writer that did not
        resumed(store, parent, "r2", resumes=None, abandons="req-1")


def _retried(store: Any) -> None:
    """A resume whose process died after its run.open (UNSEALED), then the retry that
    answers: not two answers (the first never closed)."""
    parent = paused(store)
    record(store, "r1", v5_open("r1", parent, resumes="req-1"))
    resumed(store, parent, "r2", retries=True)


def _retried_and_both_closed(store: Any) -> None:
    """A retry told wrongly: the first resume was alive, and both closed."""
    parent = paused(store)
    first = record(store, "r1", v5_open("r1", parent, resumes="req-1"))
    resumed(store, parent, "r2", retries=True)
    first.append([write(0, "resume_answer", {"start": "2026-12-24"}), commit(0, 1, "resume")])
    first.append([close(1)])


def _redacted_question(store: Any) -> None:
    """A question whose context holds a value the run's policy commits: the close repeats
    the state's ``pending``, commitment and all, in place (no reuse: section 12.5 step 1)."""
    document = {"v": 3, "keys": ["email"], "patterns": []}
    opened = v5_open(
        "p", policy=document, policy_digest=PolicyDocument.from_json(document).digest()
    )
    hidden = commitment_digest("c2FsdHNhbHRzYWx0c2FsdA", "email", "ann@example.com")
    question = {**PENDING, "context": {"email": {"$commit": hidden}}}
    record(
        store,
        "p",
        opened,
        [write(0, "history", ["hello"]), commit(0, 1)],
        [write(1, "pending", question), commit(1, 1, stage="tool-calls")],
        [close(2, "paused", pending=question)],
    )


#: (file name, build, the run whose verdict is expected, that verdict or failure code)
CASES: list[tuple[str, Build, str, str]] = [
    ("a pause and its resume", _valid, "r", "VALID_UNSIGNED"),
    ("a pause abandoned", _abandoned, "r", "VALID_UNSIGNED"),
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
    ("a resume that never closed, and its retry", _retried, "r2", "VALID_UNSIGNED"),
    ("a retry whose first resume closed too", _retried_and_both_closed, "p", "pause"),
    ("a question holding a redacted value", _redacted_question, "p", "VALID_UNSIGNED"),
]


def build(folder: Path) -> list[Entry]:
    folder.mkdir(parents=True, exist_ok=True)
    entries = []
    for about, make, run, expected in CASES:
        name = re.sub("[^a-z0-9]+", "-", about.lower()).strip("-") + ".db"
        path = folder / name
        for stale in folder.glob(name + "*"):
            stale.unlink()
        with af.SqliteStore(path) as store:
            make(store)
        found = verdicts(path)
        mine = [v for v in found if v[0] == run and v[1] == expected]
        if not mine:
            raise SystemExit(f"{name}: {run} is not {expected}: {found}")
        entries.append(Entry(name, about, run, expected, mine[0][2], found))
    return entries


def main() -> None:
    entries = build(HERE)
    index = orjson.dumps([asdict(e) for e in entries], option=orjson.OPT_INDENT_2)
    (HERE / "pauses.json").write_bytes(index + b"\n")
    print(f"wrote {len(entries)} vectors to {HERE}", file=sys.stderr)


if __name__ == "__main__":
    main()
