"""Review of ``findings``, ``assess`` and ``evidence`` on edge logs: a writer who recomputes
every hash can put any shape in an event's payload (events are the writer's word), and the
commands must say what differs, never fail with an internal error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import agentfootprint as af
from agentfootprint.cli import EXIT_INVALID, EXIT_OK
from integrity_support import WWPN, cli, forged, hosts_and_lookup


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """One armed run (every check, the answer layer): a mismatch and an empty lookup."""
    db = tmp_path_factory.mktemp("review") / "runs.db"
    script: list[Any] = [
        af.reply(tool_calls=[af.tool_call("list_hosts", {"q": "all"}, id="c1")]),
        af.reply(tool_calls=[af.tool_call("lookup", {"q": WWPN}, id="c2")]),
        f"The device {WWPN} is on no port.",
    ]
    with af.Agent(
        provider=af.MockProvider(script),
        model="m",
        tools=hosts_and_lookup(),
        store=str(db),
        integrity_posture="dev",
        check_column_types="warn",
        notice_empty_lookups=True,
        answer_layer=True,
    ) as agent:
        run_id = agent.run_sync("Where is the device?").run_id
    return db, run_id


@pytest.mark.parametrize("rows", ["garbage", [1, None, "x"], {"check": "x"}])
def test_a_disposition_of_any_shape_is_printed_and_differs(
    recorded: tuple[Path, str], tmp_path: Path, rows: Any
) -> None:
    def change(body: dict[str, Any]) -> None:
        body["payload"]["rows"] = rows

    db, run_id = recorded
    copy = forged(
        db, run_id, tmp_path / "forged.db", change, event="agentfootprint.integrity.disposition"
    )
    shown = cli("findings", copy, run_id)
    assert shown.exit_code == EXIT_OK, shown.output
    assert "disposition (dev):" in shown.output
    shown = cli("findings", copy, run_id, "--recompute")
    assert shown.exit_code == EXIT_INVALID, shown.output
    assert "  disposition: recorded " in shown.output


def test_a_forged_assessed_event_is_a_difference_for_findings_as_for_assess(
    recorded: tuple[Path, str], tmp_path: Path
) -> None:
    """The answer layer commits the standing and records it as an event; ``assess`` checks
    both against the fold, and ``findings --recompute`` (which once compared the state
    alone, and agreed) does too."""

    def change(body: dict[str, Any]) -> None:
        body["payload"]["standing"] = "consistent"
        body["payload"]["reasons"] = []

    db, run_id = recorded
    copy = forged(
        db, run_id, tmp_path / "forged.db", change, event="agentfootprint.answer.assessed"
    )
    assert cli("assess", copy, run_id).exit_code == EXIT_INVALID
    shown = cli("findings", copy, run_id, "--recompute")
    assert shown.exit_code == EXIT_INVALID, shown.output
    assert "recorded and recomputed agree" not in shown.output
    document = json.loads(cli("findings", copy, run_id, "--recompute", "--json").output)
    assert document["agrees"] is False
    assert any("agentfootprint.answer.assessed" in d for d in document["differences"])


@pytest.mark.parametrize("standing", ["oops", [1, 2], {"standing": "ask", "reasons": 5}])
def test_a_committed_standing_of_any_shape_is_printed_and_differs(
    recorded: tuple[Path, str], tmp_path: Path, standing: Any
) -> None:
    db, run_id = recorded

    def change(body: dict[str, Any]) -> None:
        body["value"] = standing

    copy = forged(db, run_id, tmp_path / "forged.db", change, write="answer_assessment")
    shown = cli("findings", copy, run_id)
    assert shown.exit_code == EXIT_OK, shown.output
    assert "  standing: " in shown.output
    shown = cli("findings", copy, run_id, "--recompute")
    assert shown.exit_code == EXIT_INVALID, shown.output
    assert "  standing: recorded " in shown.output
    document = json.loads(cli("findings", copy, run_id, "--recompute", "--json").output)
    assert document["recorded"]["standing"] == standing and document["agrees"] is False
