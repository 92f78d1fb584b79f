"""``agentfootprint why DB RUN KEY [--at COMMIT]``: the chain of writes behind a key, and the
reads behind each, walked from the verified log (docs/why.md)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from agentfootprint.audit.provenance import why
from agentfootprint.cli import EXIT_INVALID, EXIT_OK, EXIT_USAGE, main
from quickstart_support import quickstart_agent

VECTORS = Path(__file__).resolve().parents[1] / "vectors" / "provenance"


def quickstart(db: Path, **options: Any) -> tuple[str, str]:
    """The README's quickstart (a tool call, then an answer) and its continuation."""
    with quickstart_agent("Yes.", store=db, **options) as agent:
        first = agent.run_sync("What is 2 + 3?")
        second = agent.run_sync("Sure?", continue_from=first)
    return first.run_id, second.run_id


def cli(*args: Any) -> Any:
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture
def recorded(tmp_path: Path) -> tuple[Path, str, str]:
    db = tmp_path / "provenance.db"
    return (db, *quickstart(db, write_provenance="reads-prefix"))


def test_why_the_quickstarts_answer_names_the_tool_results_commit(
    recorded: tuple[Path, str, str],
) -> None:
    db, first, _ = recorded
    shown = cli("why", db, first, "final_answer")
    assert shown.exit_code == EXIT_OK, shown.output
    lines = shown.output.splitlines()
    assert lines[:4] == [
        f"why final_answer in run {first} at commit 13 (reads recorded)",
        "[0] final_answer set at commit 12 prepare-final#1 (seq 31): "
        "read iteration [1], last_response [2]",
        "[1] iteration set at commit 6 tool-calls#1 (seq 20): read iteration [3], "
        "last_response [4]",
        # the answer came from the reply to model call 1, which was served the tool's result
        "[2] last_response set at commit 10 call-llm#2 (seq 26, model call 1): read history "
        "[5], iteration [1], model [6], params [7], system_pieces [8], tool_schemas [9]",
    ]
    assert (
        "[5] history append at commit 6 tool-calls#1 (seq 19): a tool result: add "
        "(call id call_0_0)"
    ) in lines
    assert lines[-1] == "[10] history set at commit 0 seed#1 (seq 4): the user message"

    document = json.loads(cli("why", db, first, "final_answer", "--json").output)
    steps = document["steps"]
    assert document["reads_recorded"] is True and document["messages"] is None
    assert steps[0]["key"] == "final_answer" and steps[0]["commit"] == 12
    tool = [s for s in steps if s["origin"] == "tool-result"]
    assert [(s["commit"], s["stage_run"], s["key"]) for s in tool] == [
        (6, "tool-calls#1", "history")
    ]
    assert tool[0]["tools"] == [{"tool": "add", "tool_call_id": "call_0_0"}]
    # reachable from the answer: answer -> the reply (call 1) -> the history it was served
    by_index = dict(enumerate(steps))
    reply_step = by_index[dict((k, i) for k, i in _sources(steps[0]))["last_response"]]
    assert reply_step["call"] == 1
    assert by_index[dict(_sources(reply_step))["history"]] == tool[0]


def _sources(step: dict[str, Any]) -> list[tuple[str, int]]:
    return [(s["key"], s["step"]) for s in step["sources"]]


def test_without_recorded_reads_it_says_so_and_the_history_stands_in(tmp_path: Path) -> None:
    db = tmp_path / "plain.db"
    first, _ = quickstart(db)
    shown = cli("why", db, first, "final_answer")
    assert shown.exit_code == EXIT_OK, shown.output
    assert "(reads not recorded)" in shown.output and "reads unknown" in shown.output
    assert "history as that stage saw it" in shown.output
    assert "[2] tool      appended at commit 6 tool-calls#1  add (call id call_0_0)" in (
        shown.output
    )
    found = why(db, first, "final_answer")
    assert [s.origin for s in found.steps] == ["reads-unknown"]
    assert found.messages is not None
    assert [(m.role, m.commit) for m in found.messages] == [
        ("user", 0),
        ("assistant", 6),
        ("tool", 6),
    ]


def test_at_a_commit_and_across_a_continuation(recorded: tuple[Path, str, str]) -> None:
    db, first, second = recorded
    at_zero = why(db, first, "history", at=0)
    assert [(s.commit, s.origin) for s in at_zero.steps] == [(0, "user-message")]
    assert at_zero.messages is not None and [m.role for m in at_zero.messages] == ["user"]
    # the continuation inherited its tools: the write that made them is its parent's
    schemas = why(db, second, "tool_schemas")
    assert [(s.run_id, s.commit, s.origin) for s in schemas.steps] == [(first, 3, "nothing-read")]
    started = why(db, second, "final_answer", at=-1)
    assert started.steps[0].run_id == first and started.steps[0].commit == 12
    history = why(db, second, "history")
    assert history.messages is not None
    assert [(m.run_id == first, m.role) for m in history.messages] == [
        (True, "user"),
        (True, "assistant"),
        (True, "tool"),
        (True, "assistant"),
        (False, "user"),
        (False, "assistant"),
    ]
    shown = cli("why", db, second, "tool_schemas")
    assert f"at run {first} commit 3 tools#1" in shown.output


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["nosuchrun", "final_answer"], "no run 'nosuchrun'"),
        (["FIRST", "nosuchkey"], "no key 'nosuchkey'"),
        (["FIRST", "final_answer", "--at", "99"], "not commit 99"),
        (["FIRST", "final_answer", "--at", "3"], "no key 'final_answer'"),  # not yet written
        (["FIRST", "final_answer", "--at", "-2"], "-2"),
    ],
)
def test_a_bad_run_key_or_commit_is_a_usage_error(
    recorded: tuple[Path, str, str], args: list[str], fragment: str
) -> None:
    db, first, _ = recorded
    shown = cli("why", db, *[first if a == "FIRST" else a for a in args])
    assert shown.exit_code == EXIT_USAGE, shown.output
    assert fragment in shown.output and "Traceback" not in shown.output
    assert len(shown.output.strip().splitlines()) == 1


def test_a_log_that_does_not_verify_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    """The forged ``reads`` vector: the run is INVALID, so nothing of it is walked (exit 1),
    in JSON too; the file (a database and a bundle) is read, never changed."""
    for name in ("a-forged-reads-naming-a-key-absent-at-that-commit.db", "reads-out-of-order.afp"):
        placed = tmp_path / name
        shutil.copyfile(VECTORS / name, placed)
        before = hashlib.sha256(placed.read_bytes()).hexdigest()
        shown = cli("why", placed, "run-child", "final_answer")
        assert shown.exit_code == EXIT_INVALID, shown.output
        assert "[structure]" in shown.output and "final_answer set" not in shown.output
        as_json = cli("why", placed, "run-child", "final_answer", "--json")
        assert as_json.exit_code == EXIT_INVALID
        assert json.loads(as_json.stdout)["error"]["code"] == "structure"
        ok = cli("why", placed, "run-root", "final_answer")  # its parent verifies
        assert ok.exit_code == EXIT_OK and "a tool result: add" in ok.output
        assert hashlib.sha256(placed.read_bytes()).hexdigest() == before
        assert not any(p.name.endswith(("-wal", "-shm", "-journal")) for p in tmp_path.iterdir())


def test_a_bundle_answers_as_its_database_does(recorded: tuple[Path, str, str]) -> None:
    db, _, second = recorded
    bundle = db.with_suffix(".afp")
    exported = cli("export", db, "--run", second, "--out", bundle)
    assert exported.exit_code == EXIT_OK, exported.output
    for key in ("final_answer", "history", "usage"):
        assert cli("why", bundle, second, key, "--json").output == (
            cli("why", db, second, key, "--json").output
        )
    assert why(bundle, second, "final_answer").steps[0].run_id == second
