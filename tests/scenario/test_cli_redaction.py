"""The CLI's export, import, disclose and erase commands, and verify on bundles."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import agentfootprint as af
from agentfootprint.cli import EXIT_INVALID, EXIT_OK, EXIT_USAGE, main


@pytest.fixture
def recorded(tmp_path: Path) -> tuple[Path, Path, str, str]:
    db, vault = tmp_path / "r.db", tmp_path / "v.db"
    tool = af.define_tool(
        name="crm",
        description="customer record",
        execute=lambda a: {"name": "Ann", "ssn": "SECRET-SSN-" + a["id"]},
    )
    script: list[str | af.LLMResponse] = [
        af.reply(tool_calls=[af.tool_call("crm", {"id": "7"})]),
        "found Ann",
        af.reply(tool_calls=[af.tool_call("crm", {"id": "8"})]),
        "found Bob",
    ]
    agent = af.Agent(
        provider=af.MockProvider(script),
        model="m",
        tools=[tool],
        store=db,
        redact=af.RedactionPolicy(keys=["ssn"]),
        disclosures=vault,
    )
    first = agent.run_sync("who is 7?")
    second = agent.run_sync("and 8?", continue_from=first)
    agent.close()
    return db, vault, first.run_id, second.run_id


def test_export_verify_import(recorded: tuple[Path, Path, str, str], tmp_path: Path) -> None:
    db, _, first, second = recorded
    runner = CliRunner()
    bundle = tmp_path / "audit.afp"
    out = runner.invoke(main, ["export", str(db), "--run", second, "--out", str(bundle)])
    assert out.exit_code == EXIT_OK and "exported 2 runs" in out.output
    assert b"SECRET-SSN" not in bundle.read_bytes()
    checked = runner.invoke(main, ["verify", str(bundle)])
    assert checked.exit_code == EXIT_OK and checked.output.count("(not sealed)") == 2
    listed = runner.invoke(main, ["runs", str(bundle)])
    assert first in listed.output and second in listed.output
    shown = runner.invoke(main, ["show", str(bundle), second])
    assert shown.exit_code == EXIT_OK and "seed#1" in shown.output
    assert "SECRET" not in shown.output
    target = tmp_path / "copy.db"
    loaded = runner.invoke(main, ["import", str(bundle), str(target)])
    assert loaded.exit_code == EXIT_OK and "imported 2 runs" in loaded.output
    again = runner.invoke(main, ["import", str(bundle), str(target)])
    assert again.exit_code == EXIT_OK and "imported 0 runs" in again.output
    assert "2 already there" in again.output
    assert runner.invoke(main, ["verify", str(target)]).exit_code == EXIT_OK


def test_damaged_bundles_are_refused(recorded: tuple[Path, Path, str, str], tmp_path: Path) -> None:
    db, _, _, second = recorded
    runner = CliRunner()
    bundle = tmp_path / "audit.afp"
    runner.invoke(main, ["export", str(db), "--run", second, "--out", str(bundle)])
    data = bundle.read_bytes()
    bundle.write_bytes(data[: len(data) // 2])
    cut = runner.invoke(main, ["verify", str(bundle)])
    assert cut.exit_code == EXIT_INVALID and "truncated" in cut.output
    bundle.write_bytes(data.replace(b"found Ann", b"found Eve"))
    edited = runner.invoke(main, ["verify", str(bundle)])
    assert edited.exit_code == EXIT_INVALID and "trailer digest" in edited.output
    refused = runner.invoke(main, ["import", str(bundle), str(tmp_path / "x.db")])
    assert refused.exit_code == EXIT_INVALID


def test_disclose_prove_erase(recorded: tuple[Path, Path, str, str], tmp_path: Path) -> None:
    db, vault, first, _ = recorded
    runner = CliRunner()
    opened = tmp_path / "d.json"
    out = runner.invoke(main, ["disclose", str(vault), "--run", first, "--out", str(opened)])
    assert out.exit_code == EXIT_OK and "disclosures" in out.output
    document = json.loads(opened.read_text())
    assert {d["key"] for d in document["disclosures"]} == {"ssn"}
    proved = runner.invoke(main, ["verify", str(db), "--disclosures", str(opened)])
    assert proved.exit_code == EXIT_OK
    assert 'PROVEN          ssn = "SECRET-SSN-7"' in proved.output
    forged = dict(document)
    forged["disclosures"] = [{**document["disclosures"][0], "value": "SECRET-SSN-9"}]
    (tmp_path / "f.json").write_text(json.dumps(forged))
    lie = runner.invoke(main, ["verify", str(db), "--disclosures", str(tmp_path / "f.json")])
    assert lie.exit_code == EXIT_INVALID and "does not open" in lie.output
    erased = runner.invoke(main, ["erase", str(vault), "--run", first])
    assert erased.exit_code == EXIT_OK and "erased" in erased.output
    assert b"SECRET-SSN-7" not in vault.read_bytes()
    assert runner.invoke(main, ["verify", str(db)]).exit_code == EXIT_OK
    gone = runner.invoke(
        main, ["disclose", str(vault), "--run", first, "--out", str(tmp_path / "g.json")]
    )
    assert gone.exit_code == EXIT_USAGE and "no disclosure" in gone.output
    nothing = runner.invoke(main, ["erase", str(vault)])
    assert nothing.exit_code == EXIT_USAGE
