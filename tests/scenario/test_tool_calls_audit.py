"""The tool-call audit, from the log alone: ``agentfootprint.tool_calls`` and ``tool-calls``."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import agentfootprint as af
from agentfootprint.cli import EXIT_INVALID, EXIT_OK, EXIT_USAGE, main
from agentfootprint.features.permission_checker import Decision, PermissionRequest

#: these tests edit or read the schema-1 ``events`` table directly (docs/log-format.md
#: appendix B): every new file of this module is created with storage schema 1
#: (tests/conftest.py)
NEW_FILE_SCHEMA = 1


class Checker:
    name = "policy"

    def check(self, request: PermissionRequest) -> Decision:
        q = request.arguments.get("q")
        if q == "secret":
            return Decision.deny("not for you")
        if q == "stop":
            return Decision.halt("enough")
        return Decision.allow("fine")


def tools() -> list[af.Tool]:
    def lookup(args: Any, ctx: af.ToolContext) -> str:
        ctx.on_teardown(lambda: None)
        return f"rows for {args['q']}"

    return [
        af.define_tool(name="lookup", description="Look something up.", execute=lookup),
        af.define_tool(name="clock", description="The time.", execute=lambda args: "noon"),
    ]


@pytest.fixture
def recorded(tmp_path: Path) -> tuple[Path, str]:
    db = tmp_path / "runs.db"
    replies = [
        af.reply(
            tool_calls=[
                af.tool_call("lookup", {"q": "a"}, id="c1"),
                af.tool_call("lookup", {"q": "secret"}, id="c2"),
            ]
        ),
        af.reply(tool_calls=[af.tool_call("clock", {}, id="c3")]),
        "done",
    ]
    agent = af.Agent(
        provider=af.MockProvider(replies),
        model="m",
        tools=tools(),
        store=db,
        permission_checker=Checker(),
    )
    result = agent.run_sync("go")
    agent.close()
    return db, result.run_id


def test_every_tool_call_with_its_offered_tools_decision_result_and_teardown(
    recorded: tuple[Path, str],
) -> None:
    db, run_id = recorded
    found = af.tool_calls(db, run_id)
    assert [(r.call, r.index, r.tool_call_id, r.tool) for r in found] == [
        (0, 0, "c1", "lookup"),
        (0, 1, "c2", "lookup"),
        (1, 0, "c3", "clock"),
    ]
    first, denied, third = found
    assert first.arguments == {"q": "a"}
    assert first.offered == ("lookup", "clock")
    assert first.offered == tuple(t["name"] for t in af.served_at(db, run_id, 0)["tools"])
    assert first.permission == {"decision": "allow", "by": "policy", "reason": "fine"}
    assert (first.result, first.is_error) == ("rows for a", False)
    assert first.teardown == (
        {"event": "session_closed", "tool_call_id": "c1", "ms": first.teardown[0]["ms"]},
    )
    assert denied.permission == {"decision": "deny", "by": "policy", "reason": "not for you"}
    assert denied.is_error is True and "permission denied by policy" in denied.result
    assert denied.teardown == ()  # it never ran, so it opened nothing
    assert third.offered == ("lookup", "clock") and third.result == "noon"
    with af.SqliteStore(db, readonly=True) as store:  # a store works as well as a path
        assert af.tool_calls(store, run_id) == found


def test_a_halted_call_has_its_decision_and_no_result(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    agent = af.Agent(
        provider=af.MockProvider(
            [af.reply(tool_calls=[af.tool_call("lookup", {"q": "stop"}, id="h")]), "done"]
        ),
        model="m",
        tools=tools(),
        store=db,
        permission_checker=Checker(),
    )
    with pytest.raises(af.PolicyHaltError) as caught:
        agent.run_sync("go")
    agent.close()
    assert caught.value.run_id is not None
    (halted,) = af.tool_calls(db, caught.value.run_id)
    assert halted.permission == {"decision": "halt", "by": "policy", "reason": "enough"}
    assert halted.result is None and halted.is_error is None


def test_a_run_without_a_checker_has_no_decisions() -> None:
    agent = af.Agent(
        provider=af.MockProvider([af.reply(tool_calls=[af.tool_call("clock", {})]), "done"]),
        model="m",
        tools=tools(),
    )
    result = agent.run_sync("go")
    (call,) = af.tool_calls(agent.store, result.run_id)
    assert call.permission is None and call.result == "noon"


def test_the_cli_prints_the_audit_and_its_json(recorded: tuple[Path, str]) -> None:
    db, run_id = recorded
    runner = CliRunner()
    text = runner.invoke(main, ["tool-calls", str(db), run_id])
    assert text.exit_code == EXIT_OK, text.output
    assert "call 0 #1  lookup" in text.output
    assert "offered: lookup, clock" in text.output
    assert "permission: deny by policy" in text.output
    assert "teardown: session_closed" in text.output
    as_json = runner.invoke(main, ["tool-calls", str(db), run_id, "--json"])
    assert as_json.exit_code == EXIT_OK
    assert json.loads(as_json.output) == [r.to_json() for r in af.tool_calls(db, run_id)]


def test_the_cli_refuses_what_it_cannot_audit_without_a_traceback(
    recorded: tuple[Path, str], tmp_path: Path
) -> None:
    db, run_id = recorded
    runner = CliRunner()
    unknown = runner.invoke(main, ["tool-calls", str(db), "nope"])
    assert unknown.exit_code == EXIT_USAGE and "Traceback" not in unknown.output
    missing = runner.invoke(main, ["tool-calls", str(tmp_path / "none.db"), run_id])
    assert missing.exit_code == EXIT_USAGE
    text = tmp_path / "notes.txt"
    text.write_text("not a log")
    assert runner.invoke(main, ["tool-calls", str(text), run_id]).exit_code == EXIT_USAGE
    conn = sqlite3.connect(db)
    conn.execute("DROP TRIGGER events_no_update")
    conn.execute(
        "UPDATE events SET body = CAST(REPLACE(CAST(body AS TEXT), 'not for you', 'fine') "
        "AS BLOB) WHERE run_id = ? AND type = 'event'",
        (run_id,),
    )
    conn.commit()
    conn.close()
    forged = runner.invoke(main, ["tool-calls", str(db), run_id])
    assert forged.exit_code == EXIT_INVALID and "Traceback" not in forged.output
    assert "not for you" not in forged.output and "fine" not in forged.output
    with pytest.raises(af.VerificationError):
        af.tool_calls(db, run_id)


def test_bad_arguments_are_usage_errors(recorded: tuple[Path, str]) -> None:
    db, _ = recorded
    with pytest.raises(af.UsageError, match="run_id"):
        af.tool_calls(db, "")
    with pytest.raises(af.UsageError, match="source"):
        af.tool_calls(42, "r")  # type: ignore[arg-type]
