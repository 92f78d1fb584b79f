"""``agentfootprint evidence DB RUN``: where each value of a run's final answer was served,
from a real two-turn conversation in a SQLite file (docs: the command's --help)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

import agentfootprint as af
from agentfootprint.audit.evidence import evidence
from agentfootprint.cli import EXIT_INVALID, EXIT_OK, EXIT_USAGE, main
from agentfootprint.cli._boundary import BoundaryGroup
from agentfootprint.cli.evidence import evidence_command
from agentfootprint.integrity.evidence import EvidenceIndex
from agentfootprint.integrity.prior_turn import judge_prior_turn
from agentfootprint.testing.tamper import read_rows, rewrite, tampering

INVENTORY = [
    {"volume": "vol-0a1b2c3d", "size_mb": 98304, "wwpn": "10:00:00:90:fa:12:34:56"},
    {"volume": "vol-9f8e7d6c", "size_mb": 1240},
]

TOOL = af.define_tool(
    name="inventory",
    description="List the volumes.",
    input_schema={"type": "object", "properties": {}},
    execute=lambda args: INVENTORY,
)

#: turn 2 answers from turn 1's inventory, with one value no result served
SECOND = "The big one is vol-0a1b2c3d (98,304 MB); its twin would be vol-ffff0000."


def program() -> click.Group:
    """The program the command runs in: ``main`` once it registers ``evidence``, until then
    a group with the same error boundary holding only it."""
    if "evidence" in main.commands:
        return main
    group = BoundaryGroup(name="agentfootprint")
    group.add_command(evidence_command)
    return group


def cli(*args: Any) -> Any:
    return CliRunner().invoke(program(), [str(a) for a in args])


def conversation(db: Path) -> tuple[str, str, dict[str, Any]]:
    """Turn 1 calls the tool and answers; turn 2 (a continuation) answers with no call."""
    replies: list[Any] = [
        af.reply(tool_calls=[af.tool_call("inventory", {}, id="call_inv")]),
        "Two volumes: vol-0a1b2c3d and vol-9f8e7d6c.",
        SECOND,
    ]
    with af.Agent(
        provider=af.MockProvider(replies), model="m", tools=[TOOL], store=str(db)
    ) as agent:
        first = agent.run_sync("What volumes do we have?")
        second = agent.run_sync("Which one is the big one?", continue_from=first)
    return first.run_id, second.run_id, second.state


@pytest.fixture
def recorded(tmp_path: Path) -> tuple[Path, str, str, dict[str, Any]]:
    db = tmp_path / "evidence.db"
    return (db, *conversation(db))


def test_each_value_names_the_result_the_turn_and_the_run_that_served_it(
    recorded: tuple[Path, str, str, dict[str, Any]],
) -> None:
    db, first, second, _ = recorded
    shown = cli("evidence", db, second)
    assert shown.exit_code == EXIT_OK, shown.output
    served = (
        f"  turn 1 (1 turn before): inventory (call id call_inv), history [2], appended at "
        f"run {first} commit 6"
    )
    assert shown.output.splitlines() == [
        f"the final answer of run {second} (turn 2) states 3 values",
        "vol-0a1b2c3d",
        served,
        "98304",
        served,
        "vol-ffff0000",
        "  not found in any result",
    ]

    document = json.loads(cli("evidence", db, second, "--json").output)
    assert document["run_id"] == second and document["answer_turn"] == 2
    assert [v["value"] for v in document["values"]] == ["vol-0a1b2c3d", "98304", "vol-ffff0000"]
    assert document["values"][0]["served"] == [
        {
            "tool": "inventory",
            "tool_call_id": "call_inv",
            "turn": 1,
            "history_index": 2,
            "run_id": first,
            "commit": 6,
        }
    ]
    assert document["values"][2]["served"] == []


def test_the_audit_and_the_check_read_the_same_record(
    recorded: tuple[Path, str, str, dict[str, Any]],
) -> None:
    """The run's own history judged by prior-turn-evidence: distance 1, nothing fetched;
    the first turn's values were served in its own turn."""
    db, first, _, state = recorded
    index = EvidenceIndex.of(state["history"])
    found = judge_prior_turn(SECOND, index, index.current_turn, index.tool_results_this_turn)
    assert [(f.facts["distance"], f.facts["tool_results_this_turn"]) for f in found.findings] == [
        (1, 0)
    ]
    assert found.findings[0].witnesses == ("turn 1", "call_inv")
    lines = evidence(db, first)  # a path is opened read-only
    assert [(line.value, line.newest_turn, line.answer_turn) for line in lines] == [
        ("vol-0a1b2c3d", 1, 1),
        ("vol-9f8e7d6c", 1, 1),
    ]
    shown = cli("evidence", db, first)
    assert "(this turn): inventory (call id call_inv), history [2], appended at commit 6" in (
        shown.output
    )


def test_no_final_answer_an_unknown_run_and_a_broken_log_are_refused(
    recorded: tuple[Path, str, str, dict[str, Any]], tmp_path: Path
) -> None:
    db, first, second, _ = recorded
    failing = tmp_path / "failed.db"
    with af.Agent(provider=af.MockProvider([]), model="m", store=str(failing)) as agent:
        with pytest.raises(af.AgentFootprintError):
            agent.run_sync("hello")
        (failed,) = [info.run_id for info in agent.store.runs()]
    shown = cli("evidence", failing, failed)
    assert shown.exit_code == EXIT_USAGE and "has no final answer" in shown.output
    shown = cli("evidence", db, "nosuchrun")
    assert shown.exit_code == EXIT_USAGE and "no run 'nosuchrun'" in shown.output
    assert "Traceback" not in shown.output

    tampered = tmp_path / "tampered.db"
    tampered.write_bytes(db.read_bytes())
    with tampering(tampered) as connection:  # the result's value changed, hashes recomputed
        rows = [
            (row.type, row.ts, row.body.replace(b"vol-0a1b2c3d", b"vol-0a1b2c3e"))
            for row in read_rows(connection, first)
        ]
        rewrite(connection, first, rows)
    shown = cli("evidence", tampered, second)
    assert shown.exit_code == EXIT_INVALID, shown.output
    assert "does not verify" in shown.output and "vol-" not in shown.output


def test_help_says_what_a_value_is_and_what_this_never_says() -> None:
    shown = cli("evidence", "--help")
    assert shown.exit_code == EXIT_OK
    text = " ".join(shown.output.split())
    assert "Where each value of RUN_ID's final answer was served" in text
    assert '"41,200 IOPS" states 41200' in text and '"48-port"' in text
    assert "not found in any result" in text
    assert "never whether the answer is right" in text
    assert "--json" in text and "Exit codes:" in text
