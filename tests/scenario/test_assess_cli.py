"""``agentfootprint assess DB RUN [--json]``: the answer's standing folded from a verified
run's committed record, on any run; for a run recorded with ``answer_layer``, whether what it
recorded equals the fold (a real SQLite file; docs: the command's --help)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

import agentfootprint as af
from agentfootprint.cli import EXIT_INVALID, EXIT_OK, EXIT_USAGE, main
from agentfootprint.cli._boundary import BoundaryGroup
from agentfootprint.cli.assess import assess_command

VECTORS = Path(__file__).resolve().parents[1] / "vectors" / "provenance"
TOOL = af.define_tool(
    name="lookup",
    description="Look the hosts up.",
    input_schema={"type": "object", "properties": {}},
    execute=lambda args: [],
)
LOOKED_UP: list[Any] = [
    af.reply(tool_calls=[af.tool_call("lookup", {})]),
    "Nothing found: host-1234?",
]
NOT_SURE = (
    "Not sure \u2014 a lookup came back empty without saying what it searched; names or "
    "numbers in the answer appear in no tool result."
)


def program() -> click.Group:
    """The program the command runs in: ``main`` once it registers ``assess``, until then a
    group with the same error boundary holding only it."""
    if "assess" in main.commands:
        return main
    group = BoundaryGroup(name="agentfootprint")
    group.add_command(assess_command)
    return group


def cli(*args: Any) -> Any:
    return CliRunner().invoke(program(), [str(a) for a in args])


def recorded(db: Path, **options: Any) -> str:
    with af.Agent(
        provider=af.MockProvider(list(LOOKED_UP)), model="m", tools=[TOOL], store=str(db), **options
    ) as agent:
        return agent.run_sync("Which hosts are down?").run_id


def test_an_armed_run_prints_the_fold_and_that_the_record_equals_it(tmp_path: Path) -> None:
    db = tmp_path / "assess.db"
    run = recorded(db, answer_layer=True)
    shown = cli("assess", db, run)
    assert shown.exit_code == EXIT_OK, shown.output
    assert shown.output.splitlines() == [
        f"assess run {run} (answered)",
        "standing: not-sure",
        "reasons:  empty-undeclared, value-unsupported",
        "checked:  result-shape, names-and-numbers",
        f"line:     {NOT_SURE}",
        "recorded: answer_assessment equals the fold",
    ]
    as_json = cli("assess", db, run, "--json")
    assert as_json.exit_code == EXIT_OK
    document = json.loads(as_json.stdout)
    assert document["standing"] == "not-sure" and document["matches"] is True
    assert document["recorded"] == {
        "standing": "not-sure",
        "reasons": ["empty-undeclared", "value-unsupported"],
        "checked": ["result-shape", "names-and-numbers"],
    }


def test_an_unarmed_run_is_folded_too(tmp_path: Path) -> None:
    db = tmp_path / "plain.db"
    run = recorded(db)
    shown = cli("assess", db, run)
    assert shown.exit_code == EXIT_OK, shown.output
    assert "standing: not-sure" in shown.output
    assert "answer_layer was not armed" in shown.output
    document = json.loads(cli("assess", db, run, "--json").stdout)
    assert document["armed"] is False and "matches" not in document


def test_a_record_that_differs_from_the_fold_exits_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer that recorded another standing (patched here): the log verifies, the fold
    disagrees, exit 1."""
    import agentfootprint.features.answer_layer as layer

    lied = {"standing": "consistent", "reasons": [], "checked": []}
    monkeypatch.setattr(layer, "assess", lambda state, since, index=None: lied)
    db = tmp_path / "lying.db"
    run = recorded(db, answer_layer={"standing_line": True})
    shown = cli("assess", db, run)
    assert shown.exit_code == EXIT_INVALID, shown.output
    assert "recorded: DIFFERS from the fold" in shown.output
    assert json.loads(cli("assess", db, run, "--json").stdout)["matches"] is False


def test_a_log_that_does_not_verify_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    placed = tmp_path / "forged.db"
    shutil.copyfile(VECTORS / "a-forged-reads-naming-a-key-absent-at-that-commit.db", placed)
    before = hashlib.sha256(placed.read_bytes()).hexdigest()
    shown = cli("assess", placed, "run-child")
    assert shown.exit_code == EXIT_INVALID, shown.output
    assert "does not verify" in shown.output and "standing:" not in shown.output
    ok = cli("assess", placed, "run-root")  # its parent verifies
    assert ok.exit_code == EXIT_OK and "standing: " in ok.output
    assert hashlib.sha256(placed.read_bytes()).hexdigest() == before


def test_an_unknown_run_is_a_usage_error(tmp_path: Path) -> None:
    db = tmp_path / "assess.db"
    recorded(db, answer_layer=True)
    shown = cli("assess", db, "no-such-run")
    assert shown.exit_code == EXIT_USAGE, shown.output
    assert "no-such-run" in shown.output and "Traceback" not in shown.output


def test_a_bundle_answers_as_its_database_does(tmp_path: Path) -> None:
    db = tmp_path / "assess.db"
    run = recorded(db, answer_layer=True)
    bundle = tmp_path / "assess.afp"
    exported = CliRunner().invoke(main, ["export", str(db), "--run", run, "--out", str(bundle)])
    assert exported.exit_code == EXIT_OK, exported.output
    assert cli("assess", bundle, run, "--json").output == cli("assess", db, run, "--json").output


def test_help_says_what_it_folds_and_the_exit_codes() -> None:
    shown = cli("assess", "--help")
    assert shown.exit_code == EXIT_OK
    text = " ".join(shown.output.split())
    assert "The answer's standing in RUN_ID, folded from its committed record." in text
    assert 'Never "known"' in text and "this is not a verification" in text
    assert "Exit codes:" in shown.output and "differs from the fold" in text
