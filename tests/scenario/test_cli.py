"""The `agentfootprint` command: help text, demo, inspection and verify exit codes."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

import agentfootprint as af
from agentfootprint.cli import EXIT_INVALID, EXIT_OK, EXIT_UNSEALED, EXIT_USAGE, main
from agentfootprint.cli._boundary import first_sentence
from agentfootprint.store.writer import RunWriter
from agentfootprint.testing.store_contract import open_body

#: these tests edit or read the schema-1 ``events`` table directly (docs/log-format.md
#: appendix B): every new file of this module is created with storage schema 1
#: (tests/conftest.py)
NEW_FILE_SCHEMA = 1


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture
def demo_db(tmp_path: Path, runner: CliRunner) -> Path:
    db = tmp_path / "demo.db"
    result = runner.invoke(main, ["demo", "--db", str(db)])
    assert result.exit_code == EXIT_OK, result.output
    return db


def run_ids(db: Path) -> list[str]:
    with af.SqliteStore(db, readonly=True) as store:
        return [info.run_id for info in store.runs()]


@pytest.mark.parametrize(
    ("command", "words"),
    [
        (
            [],
            [
                "demo",
                "runs",
                "show",
                "served",
                "verify",
                "export",
                "import",
                "disclose",
                "erase",
                "receipt",
            ],
        ),
        (["demo"], ["--db", "agentfootprint.db", "scripted", "verify", "not an agentfootprint"]),
        (["runs"], ["DB", "export bundle", "opened", "read-only", "run index", "2  usage"]),
        (
            ["show"],
            [
                "RUN_ID",
                "timeline",
                "commitments",
                "verified first",
                "1  the run does",
                "--full",
                "--json",
            ],
        ),
        (["served"], ["call K", "rebuilt from the log", "receipt attests", "verified first"]),
        (
            ["tool-calls"],
            [
                "RUN_ID",
                "--json",
                "tools offered",
                "permission decision",
                "verified first",
                "1  the run",
            ],
        ),
        (
            ["verify"],
            [
                "--run",
                "--disclosures",
                "0  every run verified",
                "1  a run, the run index",
                "2  usage",
                "not a log",
                "newer",
                "3  all consistent",
                "export bundle",
                "read-only",
                "found from the events",
            ],
        ),
        (
            ["export"],
            ["--run", "--out", "ancestors", "salts and the vault never", "1  a run, or DB's"],
        ),
        (
            ["export"],
            ["--key", "--origin", "--checkpoint", "inclusion proof", "a run sealed"],
        ),
        (
            ["export"],
            ["--artifacts", "STORE", "(version 3)", "digests only", "checks them offline"],
        ),
        (["import"], ["BUNDLE", "already in DB", "exit 1", "DB is not a log"]),
        (["import"], ["its runs only", "no artifact bytes"]),
        (["copy"], ["SRC", "DST", "--run", "losslessly", "read-only", "1  a run does not verify"]),
        (["init"], ["DB", "postgresql://", "SELECT", "schema version", "refused"]),
        (["vault-key"], ["master key", "new", "rotate"]),
        (["vault-key", "new"], ["PATH", "never overwritten", "0600"]),
        (["vault-key", "rotate"], ["VAULT", "NEW_KEY", "key_file=OLD", "destroyed", "0  rotated"]),
        (
            ["verify"],
            ["--key", "--require-signature", "--checkpoint", "--json", "VALID", "pinned"],
        ),
        (
            ["verify"],
            ["--require-inclusion", "export --key", "which leaf of which"],
        ),
        (
            ["checkpoint"],
            ["DB", "--key", "--origin", "--since", "--proof-out", "signed checkpoint", "never"],
        ),
        (["consistency"], ["OLD", "NEW", "PROOF", "--key", "CONSISTENT", "PROOF alone"]),
        (
            ["disclose"],
            ["VAULT", "COMMITMENTS", "--run", "--out", "[salt, key, value]", "not a disclosure"],
        ),
        (["erase"], ["VAULT", "secure delete", "still verifies", "not a disclosure vault"]),
        (
            ["report"],
            [
                "SOURCE",
                "--out",
                "--key",
                "--diff",
                "verifies the runs of SOURCE",
                "not a verification",
            ],
        ),
        (
            ["otel"],
            [
                "RUN_ID",
                "--endpoint",
                "--json",
                "--content",
                "verified first",
                "read-only",
                "1.41.0",
                "1  the run does not verify",
                'pip install "agentfootprint[otel]"',
            ],
        ),
        (["runs"], ["--pending", "closed paused", "resumes or abandons", "never changed"]),
        (
            ["verify"],
            ["--artifacts", "STORE", "ARTIFACT", "mismatch", "erased", "missing", "when it runs"],
        ),
        (["artifacts"], ["STORE", "list", "erase", "never created", "--scope"]),
        (
            ["artifacts", "erase"],
            ["--scope", "--ref", "--reason", "tombstone", "still verifies", "reports the artifact"],
        ),
        (["artifacts", "list"], ["--scope", "--json", "read-only", "oldest first", "2  usage"]),
        (
            ["why"],
            [
                "KEY",
                "--at",
                "--json",
                "a tool result",
                'write_provenance="reads-prefix"',
                "almost every write",
                "1  the run (or one it continues) does not verify",
                "KEY not in the state",
            ],
        ),
        (
            ["scan"],
            ["DB|BUNDLE|VAULT", "--literals", "base64", "-wal", "never by its text", "1  a lit"],
        ),
        (
            [],
            ["Exit codes", "0  success", "1  INVALID", "2  usage or I/O", "3  UNSEALED"],
        ),
        ([], ["never create, migrate or change a file", "AGENTFOOTPRINT_DEBUG=1"]),
        ([], ["postgresql://USER@HOST:PORT/DBNAME"]),
    ],
)
def test_help_is_accurate(runner: CliRunner, command: list[str], words: list[str]) -> None:
    result = runner.invoke(main, [*command, "--help"])
    assert result.exit_code == 0
    for word in words:
        assert word in result.output


def test_version(runner: CliRunner) -> None:
    result = runner.invoke(main, ["--version"])
    assert result.exit_code == 0 and af.__version__ in result.output


def test_demo_records_a_verified_two_turn_conversation(demo_db: Path, runner: CliRunner) -> None:
    ids = run_ids(demo_db)
    assert len(ids) == 2
    store = af.SqliteStore(demo_db)
    child = store.run_info(ids[1])
    assert child.parent_run_id == ids[0] and child.conversation_id == ids[0]
    store.close()
    again = runner.invoke(main, ["demo", "--db", str(demo_db)])
    assert again.exit_code == EXIT_OK
    assert "368.00 EUR" in again.output and "292.50 EUR" in again.output
    assert again.output.count("\nVALID ") == 2 and "; key pinned)" in again.output
    key = again.output.split("--key ", 1)[1].split()[0]  # the demo's own public key
    assert key.startswith("ed25519:") and "PRIVATE" not in again.output
    assert "stages: seed x1" in again.output and "call-llm x4" in again.output
    assert len(run_ids(demo_db)) == 4
    # the replay command the demo suggests works as printed: both calls identical
    line = next(
        x for x in again.output.splitlines() if x.strip().startswith("agentfootprint replay")
    )
    replayed = runner.invoke(main, line.split()[1:])
    assert replayed.exit_code == EXIT_OK, replayed.output
    assert "REPLAYED" in replayed.output and "2 calls identical" in replayed.output


def test_runs_show_served(demo_db: Path, runner: CliRunner) -> None:
    first, second = run_ids(demo_db)
    listing = runner.invoke(main, ["runs", str(demo_db)])
    assert listing.exit_code == 0
    assert first in listing.output and f"parent={first}" in listing.output
    assert listing.output.count(" sealed  conversation=") == 2 and "answered" in listing.output
    shown = runner.invoke(main, ["show", str(demo_db), first])
    assert shown.exit_code == 0
    assert "seed#1" in shown.output and "route#1 -> tool-calls" in shown.output
    assert "receipt call 0" in shown.output and "event  agentfootprint.validation" in shown.output
    assert '"outcome":"answered"' in shown.output
    served = runner.invoke(main, ["served", str(demo_db), second, "0"])
    assert served.exit_code == 0
    assert '"model": "scripted-travel-model"' in served.output
    assert "And if I bring 250 GBP instead?" in served.output


def test_show_and_served_refuse_unknown_things(demo_db: Path, runner: CliRunner) -> None:
    missing = runner.invoke(main, ["show", str(demo_db), "nope"])
    assert missing.exit_code == EXIT_USAGE and "no run 'nope'" in missing.output
    first = run_ids(demo_db)[0]
    no_call = runner.invoke(main, ["served", str(demo_db), first, "99"])
    assert no_call.exit_code == EXIT_USAGE and "no call 99" in no_call.output
    no_file = runner.invoke(main, ["verify", str(demo_db.parent / "absent.db")])
    assert no_file.exit_code == EXIT_USAGE


def test_verify_exit_codes(demo_db: Path, runner: CliRunner) -> None:
    ok = runner.invoke(main, ["verify", str(demo_db)])
    assert ok.exit_code == EXIT_OK and ok.output.count("\n") == 2
    assert [line.split()[0] for line in ok.output.splitlines()] == ["VALID", "VALID"]
    first = run_ids(demo_db)[0]
    one = runner.invoke(main, ["verify", str(demo_db), "--run", first])
    assert one.exit_code == EXIT_OK and one.output.startswith("VALID  ")
    assert one.output.count("\n") == 1
    unknown = runner.invoke(main, ["verify", str(demo_db), "--run", "nope"])
    assert unknown.exit_code == EXIT_USAGE

    store = af.SqliteStore(demo_db)
    RunWriter(store, "crashed").append([("run.open", open_body("crashed"))])
    store.close()
    unsealed = runner.invoke(main, ["verify", str(demo_db)])
    assert unsealed.exit_code == EXIT_UNSEALED and "UNSEALED" in unsealed.output

    conn = sqlite3.connect(demo_db)
    conn.execute("DROP TRIGGER events_no_update")
    conn.execute(
        "UPDATE events SET body = CAST(REPLACE(CAST(body AS TEXT), 'Lisbon', 'Lisbom') "
        "AS BLOB) WHERE run_id = ? AND type = 'write'",
        (first,),
    )
    conn.commit()
    conn.close()
    broken = runner.invoke(main, ["verify", str(demo_db)])
    assert broken.exit_code == EXIT_INVALID
    assert f"INVALID         run {first} seq" in broken.output
    assert "event hash does not match" in broken.output


def test_empty_database(tmp_path: Path, runner: CliRunner) -> None:
    db = tmp_path / "empty.db"
    af.SqliteStore(db).close()
    before = db.read_bytes()
    assert "no runs" in runner.invoke(main, ["runs", str(db)]).output
    result = runner.invoke(main, ["verify", str(db)])
    assert result.exit_code == EXIT_OK and "no runs to verify" in result.output
    assert db.read_bytes() == before and sorted(tmp_path.iterdir()) == [db]


def test_verify_finds_runs_from_the_events_not_the_index(demo_db: Path, runner: CliRunner) -> None:
    """A run whose index row was deleted is still verified, and the missing row reported."""
    first, second = run_ids(demo_db)
    conn = sqlite3.connect(demo_db)
    conn.execute("DROP TRIGGER runs_no_delete")
    conn.execute("DELETE FROM runs WHERE run_id = ?", (first,))
    conn.commit()
    conn.close()
    result = runner.invoke(main, ["verify", str(demo_db)])
    assert result.exit_code == EXIT_INVALID, result.output
    lines = result.output.splitlines()
    assert any(line.startswith("VALID           run " + first) for line in lines), lines
    assert any(line.startswith("INVALID") and first in line for line in lines), lines
    listed = runner.invoke(main, ["runs", str(demo_db)])
    assert listed.exit_code == EXIT_OK
    assert f"{first}  (events but no row in the run index)" in listed.output
    assert second in listed.output


@pytest.mark.parametrize(
    ("command", "words"),
    [
        ([], ["keys"]),
        (["keys"], ["generate", "show", "Ed25519", "mode 0600", "public key only"]),
        (
            ["keys", "generate"],
            [
                "PATH",
                "--passphrase-env",
                "a key file is never overwritten",
                "appears whole",
                "its key id, never the",
                "0  the key file was written",
                "2  usage error: PATH exists",
            ],
        ),
        (
            ["keys", "show"],
            [
                "KEY",
                "--passphrase-env",
                "--pem",
                "never the private key",
                "ed25519:",
                "0  the public key was printed",
                "2  usage error",
            ],
        ),
    ],
)
def test_keys_help_is_accurate(runner: CliRunner, command: list[str], words: list[str]) -> None:
    result = runner.invoke(main, [*command, "--help"])
    assert result.exit_code == 0
    for word in words:
        assert word in result.output


def test_show_full_and_json_give_every_value_whole(demo_db: Path, runner: CliRunner) -> None:
    first = run_ids(demo_db)[0]
    cut = runner.invoke(main, ["show", str(demo_db), first])
    full = runner.invoke(main, ["show", str(demo_db), first, "--full"])
    as_json = runner.invoke(main, ["show", str(demo_db), first, "--json"])
    assert cut.exit_code == full.exit_code == as_json.exit_code == 0
    document = json.loads(as_json.output)
    assert document["run_id"] == first and document["verdict"] == "VALID_UNSIGNED"
    store = af.SqliteStore(demo_db, readonly=True)
    try:
        rows = list(store.read(first))
    finally:
        store.close()
    listed = [document["opened"]] + [
        row for commit in document["commits"] for row in [*commit["rows"], commit]
    ]
    listed += [document["close"], document["seal"]]
    assert [r["seq"] for r in listed] == [row.seq for row in rows]  # every row, in order
    assert all(
        json.loads(bytes(row.body)) == r["body"] for row, r in zip(rows, listed, strict=True)
    )
    # the longest written value, cut in the plain timeline, is whole with --full
    longest = max(
        (orjson.dumps(r["body"]["value"]).decode() for r in listed if r["type"] == "write"),
        key=len,
    )
    assert len(longest) > 72 and longest not in cut.output and longest in full.output
    both = runner.invoke(main, ["show", str(demo_db), first, "--full", "--json"])
    assert both.exit_code == EXIT_USAGE


def test_the_top_help_is_grouped_with_a_start_line_and_nothing_cut(runner: CliRunner) -> None:
    shown = runner.invoke(main, ["--help"], terminal_width=80)
    assert shown.exit_code == 0
    text = shown.output
    titles = ["Start here:", "Inspect a log:", "Verify:", "Share with an auditor:"]
    titles += ["Replay against new code:", "Keys and stores:"]
    assert [text.index(t) for t in titles] == sorted(text.index(t) for t in titles)
    assert "Other commands:" not in text  # every command has its section
    listed = [
        line.split()[0]
        for line in text.split("Start here:")[1].split("Exit codes")[0].splitlines()
        if line.startswith("  ") and not line.startswith("   ") and line.split()
    ]
    commands = sorted(main.commands)
    assert sorted(n for n in listed if n in main.commands) == commands
    assert "..." not in text.split("Start here:")[1].split("Exit codes")[0]  # nothing cut
    flat = "".join(text.split())
    for name in commands:  # each listed with its first sentence whole
        assert "".join(first_sentence(main.commands[name]).split()) in flat, name


VECTORS = Path(__file__).resolve().parents[1] / "vectors"


@pytest.mark.parametrize(
    ("vector", "pinned", "exit_code", "words"),
    [
        (
            "sealed-unpinned.db",
            None,
            EXIT_OK,
            ["VALID"] * 3,
        ),
        ("sealed-valid.db", "signer", EXIT_OK, ["VALID"] * 3),
        ("sealed-untrusted-key.db", "other", EXIT_OK, ["VALID"] * 3),
        ("unsealed.db", None, EXIT_UNSEALED, ["VALID", "UNSEALED", "VALID"]),
    ],
)
def test_verify_says_in_words_what_the_outcome_codes_mean(
    tmp_path: Path,
    runner: CliRunner,
    vector: str,
    pinned: str | None,
    exit_code: int,
    words: list[str],
) -> None:
    """The text line says VALID for both VALID and VALID_UNSIGNED, then in parentheses
    whether the run is sealed and whether a pinned key sealed it; never "unsigned" beside
    "sealed". The exit codes and the ``--json`` machine codes stay as they were."""
    from agentfootprint.testing.seals import OTHER, SIGNER

    path = tmp_path / vector
    path.write_bytes((VECTORS / vector).read_bytes())
    keys = {"signer": SIGNER, "other": OTHER}
    key = ["--key", keys[pinned].public.text] if pinned else []
    shown = runner.invoke(main, ["verify", str(path), *key])
    assert shown.exit_code == exit_code, shown.output
    lines = shown.output.splitlines()
    assert [line.split()[0] for line in lines] == words
    for line in lines:
        assert not ("unsigned" in line.lower() and "sealed" in line.lower()), line
        assert line.index(" run ") == 15  # the verdict column keeps its width
    expected = {
        "sealed-unpinned.db": f"(sealed by key {SIGNER.key_id}; key not pinned: verify --key "
        "KEY checks who sealed it)",
        "sealed-valid.db": f"(sealed by key {SIGNER.key_id}; key pinned)",
        "sealed-untrusted-key.db": f"(sealed by key {SIGNER.key_id}; key not pinned: none of "
        "the keys given with --key)",
    }
    if vector in expected:
        assert all(line.endswith(expected[vector]) for line in lines), lines
    else:  # recorded without a signer; the child's close removed
        assert [line.rsplit(" (", 1)[1] for line in lines] == [
            "not sealed)",
            "never closed: its writer stopped before run.close, as after a crash)",
            "not sealed)",
        ]
    required = runner.invoke(main, ["verify", str(path), *key, "--require-signature"])
    assert required.exit_code == (exit_code if pinned == "signer" else EXIT_INVALID)
    as_json = runner.invoke(main, ["verify", str(path), *key, "--json"])
    assert as_json.exit_code == exit_code
    runs = json.loads(as_json.output)["runs"]
    codes = {
        "sealed-unpinned.db": ["VALID_UNSIGNED"] * 3,
        "sealed-valid.db": ["VALID"] * 3,
        "sealed-untrusted-key.db": ["VALID_UNSIGNED"] * 3,
        "unsealed.db": ["VALID_UNSIGNED", "UNSEALED", "VALID_UNSIGNED"],
    }[vector]
    assert [run["outcome"] for run in runs] == codes
    assert all(run["sealed"] is vector.startswith("sealed-") for run in runs)
    assert all(run["key_pinned"] is (pinned == "signer") for run in runs)
