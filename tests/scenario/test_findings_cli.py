"""``agentfootprint findings DB RUN [--recompute] [--json]``: a run's integrity findings as
recorded, and recomputed from the log, from real runs in a SQLite file (docs: the command's
--help). Exit codes 0 (printed, agreeing), 1 (a difference, or a log that does not verify),
2 (usage: an unknown run, a missing file); the file is never changed by reading it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

import agentfootprint as af
from agentfootprint.cli import EXIT_INVALID, EXIT_OK, EXIT_USAGE
from agentfootprint.testing.tamper import read_rows, reencoded, rewrite, tampering
from integrity_support import SCHEMA, WWPN, cli, hosts_and_lookup

LABEL = "ganymede-4417"


def grounds() -> list[dict[str, str]]:
    """The app's viewer selection: the one value the model may use without a result."""
    return [{"value": LABEL, "source": "viewer-selection"}]


def record(db: Path) -> dict[str, str]:
    """Three runs in ``db``: ``armed`` (every check, dev posture: a mismatch, an empty
    lookup, an excusal), ``continued`` (turn 2 answers from turn 1: a prior-turn advisory),
    and ``plain`` (no check armed)."""
    script: list[Any] = [
        af.reply(tool_calls=[af.tool_call("list_hosts", {"q": "all"}, id="c1")]),
        af.reply(tool_calls=[af.tool_call("lookup", {"q": WWPN}, id="c2")]),
        af.reply(tool_calls=[af.tool_call("lookup", {"q": LABEL}, id="c3")]),
        f"The device {WWPN} is on no port.",
        f"It is still {WWPN}.",
    ]
    with af.Agent(
        provider=af.MockProvider(script),
        model="m",
        tools=hosts_and_lookup(),
        store=str(db),
        integrity_posture="dev",
        check_column_types="warn",
        notice_empty_lookups=True,
        notice_prior_turn_evidence=True,
        external_grounds=grounds,
    ) as agent:
        armed = agent.run_sync("Where is the device?")
        continued = agent.run_sync("And now?", continue_from=armed)
    plain_tool = af.define_tool(
        name="list_hosts",
        description="List the hosts.",
        input_schema=SCHEMA,
        execute=lambda args: [{"wwpn": WWPN, "lun": ""}],
    )
    replies: list[Any] = [
        af.reply(tool_calls=[af.tool_call("list_hosts", {}, id="c1")]),
        "One host.",
    ]
    with af.Agent(
        provider=af.MockProvider(replies), model="m", tools=[plain_tool], store=str(db)
    ) as agent:
        plain = agent.run_sync("Which hosts?")
    return {"armed": armed.run_id, "continued": continued.run_id, "plain": plain.run_id}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    db = tmp_path_factory.mktemp("findings") / "runs.db"
    return db, record(db)


def files_of(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_the_recorded_findings_excusals_and_ledger_are_printed(
    recorded: tuple[Path, dict[str, str]],
) -> None:
    db, runs = recorded
    shown = cli("findings", db, runs["armed"])
    assert shown.exit_code == EXIT_OK, shown.output
    lines = shown.output.splitlines()
    assert lines[0] == f"run {runs['armed']} (answered)"
    assert lines[1] == "recorded: 2 finding(s)"
    assert lines[2].startswith(
        "  column-type-mismatch at the write seam: 'list_hosts' declares column 'lun' as "
        'number, and 1 of 1 row hold something else — the first is "" (string).'
    )
    assert "This judges TYPE, never MEANING" in lines[2] and "Call id c1." in lines[2]
    assert lines[3].startswith(
        f"  empty-lookup at the write seam (advisory): 'lookup' was called with q = \"{WWPN}\""
    )
    assert lines[4] == f"  excused by viewer-selection: lookup q = {LABEL}"
    assert lines[5] == "  disposition (dev):"
    assert sorted(lines[6:11]) == [  # one row per check, armed or not
        "    column-type-mismatch: checked 1, findings 1, not applicable 2, unreachable 0, "
        "synthetic 1",
        "    empty-lookup: checked 2, findings 1, not applicable 1, unreachable 0, synthetic 1",
        "    missing-column: checked 1, findings 0, not applicable 2, unreachable 0, synthetic 0",
        "    prior-turn-evidence: checked 1, findings 0, not applicable 0, unreachable 0, "
        "synthetic 1",
        "    unsupported-argument: checked 2, findings 0, not applicable 2, unreachable 0, "
        "synthetic 1",
    ]
    assert not any(line.startswith("recomputed") for line in lines)
    assert "agree" not in shown.output and "nothing was checked" not in shown.output


@pytest.mark.parametrize("run", ["armed", "continued", "plain"])
def test_recompute_prints_both_sides_and_they_agree(
    recorded: tuple[Path, dict[str, str]], run: str
) -> None:
    db, runs = recorded
    shown = cli("findings", db, runs[run], "--recompute")
    assert shown.exit_code == EXIT_OK, shown.output
    lines = shown.output.splitlines()
    assert lines[-1] == "recorded and recomputed agree"
    recorded_at = lines.index(next(line for line in lines if line.startswith("recorded: ")))
    recomputed_at = lines.index(next(line for line in lines if line.startswith("recomputed: ")))
    # the recomputed side repeats the recorded one line for line
    assert lines[recorded_at + 1 : recomputed_at] == lines[recomputed_at + 1 : -1]
    assert lines[recorded_at][len("recorded") :] == lines[recomputed_at][len("recomputed") :]


def test_the_continued_run_names_its_prior_turn_advisory(
    recorded: tuple[Path, dict[str, str]],
) -> None:
    db, runs = recorded
    shown = cli("findings", db, runs["continued"])
    assert shown.exit_code == EXIT_OK, shown.output
    lines = shown.output.splitlines()
    assert lines[1] == "recorded: 1 finding(s)"
    assert lines[2].startswith("  prior-turn-evidence at the claim seam (advisory): ")
    assert "1 turn(s) before the turn being answered" in lines[2]


def test_json_is_one_document_of_both_sides(recorded: tuple[Path, dict[str, str]]) -> None:
    db, runs = recorded
    document = json.loads(cli("findings", db, runs["armed"], "--json").output)
    assert document["run_id"] == runs["armed"]
    assert (document["outcome"], document["armed"]) == ("answered", True)
    assert "recomputed" not in document and "agrees" not in document
    side = document["recorded"]
    assert [f["kind"] for f in side["findings"]] == ["column-type-mismatch", "empty-lookup"]
    assert [f["advisory"] for f in side["findings"]] == [False, True]
    assert side["findings"][0]["subjects"] == [{"kind": "tool", "id": "list_hosts"}]
    assert side["findings"][0]["facts"]["column"] == "lun"
    assert side["external_grounds_used"] == [
        {
            "path": "q",
            "source": "viewer-selection",
            "tool": "lookup",
            "tool_call_id": "c3",
            "value": LABEL,
        }
    ]
    assert side["disposition"]["posture"] == "dev"
    assert {r["check"]: r["synthetic"] for r in side["disposition"]["rows"]} == {
        "column-type-mismatch": 1,
        "empty-lookup": 1,
        "missing-column": 0,
        "prior-turn-evidence": 1,
        "unsupported-argument": 1,
    }

    shown = cli("findings", db, runs["armed"], "--recompute", "--json")
    assert shown.exit_code == EXIT_OK
    both = json.loads(shown.output)
    assert (both["agrees"], both["differences"]) == (True, [])
    assert both["recomputed"] == both["recorded"]


def test_a_run_with_nothing_armed_says_nothing_was_checked(
    recorded: tuple[Path, dict[str, str]],
) -> None:
    db, runs = recorded
    shown = cli("findings", db, runs["plain"])
    assert shown.exit_code == EXIT_OK, shown.output
    assert shown.output.splitlines() == [
        f"run {runs['plain']} (answered)",
        "no integrity check was armed in this run: nothing was checked",
        "recorded: 0 finding(s)",
    ]
    document = json.loads(cli("findings", db, runs["plain"], "--json").output)
    assert document["armed"] is False
    assert document["recorded"]["findings"] == []
    assert document["recorded"]["disposition"] is None


def test_unknown_run_and_missing_file_are_usage_errors(
    recorded: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    db, _ = recorded
    shown = cli("findings", db, "nosuchrun")
    assert shown.exit_code == EXIT_USAGE
    assert "no run 'nosuchrun'" in shown.output and "Traceback" not in shown.output
    shown = cli("findings", db, "nosuchrun", "--recompute", "--json")
    assert shown.exit_code == EXIT_USAGE
    missing = tmp_path / "missing.db"
    shown = cli("findings", missing, "run0000")
    assert shown.exit_code == EXIT_USAGE and "Traceback" not in shown.output
    assert not missing.exists()  # never created
    text = tmp_path / "notes.txt"
    text.write_text("not a log\n")
    assert cli("findings", text, "run0000").exit_code == EXIT_USAGE
    assert text.read_text() == "not a log\n"
    assert cli("findings", db).exit_code == EXIT_USAGE  # RUN_ID missing


def test_a_log_that_does_not_verify_shows_nothing_and_exits_1(
    recorded: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    db, runs = recorded
    tampered = tmp_path / "tampered.db"
    shutil.copyfile(db, tampered)
    with tampering(tampered) as connection:  # the producer's rows edited, hashes recomputed
        rows = [
            (row.type, row.ts, row.body.replace(WWPN.encode(), b"10:00:00:90:fa:12:34:57"))
            for row in read_rows(connection, runs["armed"])
        ]
        rewrite(connection, runs["armed"], rows)
    for run in ("armed", "continued"):  # the continuation's parent no longer verifies
        for extra in ((), ("--recompute",), ("--json",)):
            shown = cli("findings", tampered, runs[run], *extra)
            assert shown.exit_code == EXIT_INVALID, shown.output
            assert "does not verify" in shown.output
            assert "finding(s)" not in shown.output and WWPN[:-1] not in shown.output
    assert cli("findings", tampered, runs["plain"]).exit_code == EXIT_OK  # another run


def test_a_forged_finding_verifies_but_recompute_exposes_it(
    recorded: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    """A writer who recomputes every hash can put any words in a finding (events are the
    writer's word); the recompute re-derives the finding from the log and exits 1."""
    db, runs = recorded
    forged = tmp_path / "forged.db"
    shutil.copyfile(db, forged)

    def soothed(body: dict[str, Any]) -> None:
        body["payload"]["message"] = "Every row holds what its tool declares."

    with tampering(forged) as connection:
        rows = []
        for row in read_rows(connection, runs["armed"]):
            mismatch = (
                row.type == "event"
                and b"integrity.context_error" in row.body
                and b'"column-type-mismatch"' in row.body
            )
            rows.append(reencoded(row, soothed) if mismatch else (row.type, row.ts, row.body))
        rewrite(connection, runs["armed"], rows)
    store = af.SqliteStore(forged)
    try:
        assert af.Verifier(store).verify(runs["armed"]).outcome is af.Outcome.VALID_UNSIGNED
    finally:
        store.close()

    shown = cli("findings", forged, runs["armed"])
    assert shown.exit_code == EXIT_OK
    assert "column-type-mismatch at the write seam: Every row holds what its tool declares." in (
        shown.output
    )
    shown = cli("findings", forged, runs["armed"], "--recompute")
    assert shown.exit_code == EXIT_INVALID, shown.output
    lines = shown.output.splitlines()
    assert "1 difference(s):" in lines
    assert lines[-1].startswith("  finding 0: recorded column-type-mismatch")
    assert "recorded and recomputed agree" not in shown.output
    document = json.loads(cli("findings", forged, runs["armed"], "--recompute", "--json").output)
    assert document["agrees"] is False and len(document["differences"]) == 1
    assert document["recomputed"]["findings"][0]["message"].startswith(
        "'list_hosts' declares column 'lun' as number"
    )


def test_reading_never_changes_the_file(
    recorded: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    db, runs = recorded
    folder = tmp_path / "copy"
    folder.mkdir()
    copy = folder / db.name
    shutil.copyfile(db, copy)
    before = files_of(folder)
    for run in (*runs.values(), "nosuchrun"):
        for extra in ((), ("--recompute",), ("--json",), ("--recompute", "--json")):
            cli("findings", copy, run, *extra)
            assert files_of(folder) == before  # bytes equal, no journal left beside it


def test_help_says_what_green_means_and_the_exit_codes() -> None:
    shown = cli("findings", "--help")
    assert shown.exit_code == EXIT_OK
    text = " ".join(shown.output.split())
    assert "The integrity findings of RUN_ID" in text
    assert "Green means no armed check fired; it never means the answer is right." in text
    assert "--recompute" in text and "exit 1 on any difference" in text
    assert "--json" in text
    assert "opened read-only, never changed" in text
    assert "Exit codes:" in text
    assert "0 printed (with --recompute: recorded and recomputed agree)" in text
    assert "1 --recompute found a difference" in text
    assert "unknown run" in text
    listed = " ".join(cli("--help").output.split())
    assert "findings" in listed
