"""`agentfootprint scan`: a token a tool returned, in several encodings and quoted by the model,
is found in every row and file that holds it; a redacted value is in no byte of the log, only
in the vault; reading changes no file; bad input is one error line that never echoes a literal."""

from __future__ import annotations

import base64
import binascii
import json
import os
import urllib.parse
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import agentfootprint as af
from agentfootprint.cli import EXIT_INVALID, EXIT_OK, EXIT_USAGE, main

TOKEN = "tok/EN+a&b=c_9f2Z-rotated"
SSN = "SSN-078-05-1120-secret"
ABSENT = "never-written-anywhere-42"


@pytest.fixture
def recorded(tmp_path: Path) -> dict[str, Any]:
    """Two runs: a tool returns TOKEN raw, in base64, percent-encoded and in hex (and SSN
    under a redacted key); the model quotes TOKEN in its answer."""
    db, vault = tmp_path / "log.db", tmp_path / "vault.db"
    tool = af.define_tool(
        name="crm",
        description="customer record",
        execute=lambda a: {
            "token": TOKEN,
            "auth": "Basic " + base64.b64encode(f"svc:{TOKEN}".encode()).decode(),
            "link": "https://example.test/cb?t=" + urllib.parse.quote(TOKEN, safe=""),
            "dump": binascii.hexlify(TOKEN.encode()).decode(),
            "ssn": SSN,
        },
    )
    script: list[str | af.LLMResponse] = [
        af.reply(tool_calls=[af.tool_call("crm", {"id": "7"})]),
        f"The token is {TOKEN}.",
        "Nothing more.",
    ]
    agent = af.Agent(
        provider=af.MockProvider(script),
        model="m",
        tools=[tool],
        store=db,
        redact=af.RedactionPolicy(keys=["ssn"]),
        disclosures=vault,
    )
    first = agent.run_sync("look up 7")
    second = agent.run_sync("anything else?", continue_from=first)
    agent.close()
    return {"db": db, "vault": vault, "first": first.run_id, "second": second.run_id}


def literals(tmp_path: Path, *lines: str, name: str = "literals.txt") -> Path:
    path = tmp_path / name
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def scan(*args: object) -> Any:
    return CliRunner().invoke(main, ["scan", *map(str, args)])


def files_of(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {
        p.name: (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(folder.iterdir())
        if p.is_file()
    }


def test_a_token_is_found_in_every_form_and_row(recorded: dict[str, Any], tmp_path: Path) -> None:
    chosen = literals(tmp_path, f"  {TOKEN}  ", "", ABSENT)
    before = files_of(tmp_path)
    result = scan(recorded["db"], "--literals", chosen)
    assert result.exit_code == EXIT_INVALID, result.output
    assert TOKEN not in result.output and ABSENT not in result.output
    assert "literal on line 1:" in result.output and "line 3" not in result.output
    assert "1 of 2 literals found" in result.output
    document = json.loads(scan(recorded["db"], "--literals", chosen, "--json").output)
    assert document["found"] == [0] and document["lines"] == [1, 3]
    rows = document["rows"]
    assert {r["line"] for r in rows} == {1}
    first = {(r["seq"], r["path"]) for r in rows if r["run_id"] == recorded["first"]}
    forms = {r["form"] for r in rows if r["path"] == "history"}
    # the tool result as appended to history: raw, base64 (of "svc:TOKEN"), url, hex
    assert {"raw", "base64", "url", "hex"} <= forms, forms
    # the model's answer quoting it: last_response, history and final_answer
    assert {p for _, p in first} >= {"history", "last_response", "final_answer"}
    # the continuation's run.open does not repeat it; its seed appends the user's turn only
    assert all(r["run_id"] in (recorded["first"], recorded["second"]) for r in rows)
    assert document["read"]["runs"] == 2 and document["read"]["rows"] > 40
    hits = document["bytes"]
    assert hits and {h["file"] for h in hits} <= {str(recorded["db"]), f"{recorded['db']}-wal"}
    assert files_of(tmp_path) == before  # read-only: nothing created, nothing changed


def test_a_redacted_value_is_nowhere_in_the_log_only_in_the_vault(
    recorded: dict[str, Any], tmp_path: Path
) -> None:
    chosen = literals(tmp_path, SSN)
    in_log = scan(recorded["db"], "--literals", chosen)
    assert in_log.exit_code == EXIT_OK, in_log.output
    assert "no literal found" in in_log.output
    assert os.path.getsize(recorded["db"]) > 0
    in_vault = scan(recorded["vault"], "--literals", chosen, "--json")
    assert in_vault.exit_code == EXIT_INVALID
    document = json.loads(in_vault.output)
    assert {d["key"] for d in document["disclosures"]} == {"ssn"}
    assert document["read"]["disclosures"] >= 1 and document["rows"] == []
    text = scan(recorded["vault"], "--literals", chosen)
    assert "disclosure " in text.output and "(key ssn): raw" in text.output
    assert SSN not in text.output


def test_a_bundle_is_scanned_by_its_rows_and_its_bytes(
    recorded: dict[str, Any], tmp_path: Path
) -> None:
    bundle = tmp_path / "audit.afp"
    exported = CliRunner().invoke(
        main, ["export", str(recorded["db"]), "--run", recorded["second"], "--out", str(bundle)]
    )
    assert exported.exit_code == EXIT_OK, exported.output
    document = json.loads(scan(bundle, "--literals", literals(tmp_path, TOKEN), "--json").output)
    assert document["read"]["runs"] == 2 and document["read"]["files"] == [str(bundle)]
    assert {r["form"] for r in document["rows"]} >= {"raw", "base64", "url", "hex"}
    assert document["bytes"] and all(h["file"] == str(bundle) for h in document["bytes"])
    clean = scan(bundle, "--literals", literals(tmp_path, SSN, name="ssn.txt"))
    assert clean.exit_code == EXIT_OK and "no literal found" in clean.output


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (b"", "holds no literal"),
        (b"\n  \n", "holds no literal"),
        (b"abc12\n", "line 1 is shorter than 6 bytes"),
        (b"long-enough-literal\nq7x9\n", "line 2 is shorter than 6 bytes"),
        (b"\xff\xfe-not-utf8-literal\n", "is not UTF-8 text"),
    ],
)
def test_a_bad_literals_file_is_one_error_line(
    recorded: dict[str, Any], tmp_path: Path, content: bytes, fragment: str
) -> None:
    path = tmp_path / "bad.txt"
    path.write_bytes(content)
    result = scan(recorded["db"], "--literals", path)
    assert result.exit_code == EXIT_USAGE
    assert fragment in result.output and "Traceback" not in result.output
    assert "q7x9" not in result.output and "long-enough-literal" not in result.output


def test_targets_that_cannot_be_scanned(recorded: dict[str, Any], tmp_path: Path) -> None:
    chosen = literals(tmp_path, TOKEN)
    text = tmp_path / "notes.txt"
    text.write_text("just text\n")
    refused = scan(text, "--literals", chosen)
    assert refused.exit_code == EXIT_USAGE and "not an SQLite database" in refused.output
    missing = scan(tmp_path / "nope.db", "--literals", chosen)
    assert missing.exit_code == EXIT_USAGE and "does not exist" in missing.output
    no_file = scan(recorded["db"], "--literals", tmp_path / "nope.txt")
    assert no_file.exit_code == EXIT_USAGE and "does not exist" in no_file.output
    no_option = scan(recorded["db"])
    assert no_option.exit_code == EXIT_USAGE and "--literals" in no_option.output
    assert "Traceback" not in refused.output + missing.output + no_file.output
