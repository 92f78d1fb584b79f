"""Every CLI command that takes a database takes a ``sqlite:///PATH`` URL too.

A real run is recorded (by an agent given a store URL) into a file of a temporary folder;
each command is then given the file as a relative URL (three slashes), an absolute one
(four) and a percent-encoded one, and must do exactly what it does with the path. A URL
naming a missing file, ``memory:`` where a file is read, and another scheme
(``postgresql://``) are usage errors: exit 2, one message, no traceback, nothing created.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

import agentfootprint as af
from agentfootprint.agent.demo import DEMO_QUESTIONS, build_demo_agent
from agentfootprint.cli import EXIT_OK, EXIT_USAGE, main

AGENT = "agentfootprint.agent.demo:replay_agent"
#: PostgreSQL URLs that parse, on a port nothing listens on: the connection is refused
UNREACHABLE = "could not be reached"


@dataclass(frozen=True)
class Recorded:
    folder: Path
    first: str
    second: str
    commitment: str


@pytest.fixture
def recorded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Recorded:
    """Two demo runs in ``my log.db`` and one redacted run (its vault ``vault.db``), recorded
    through store URLs; the working directory is the folder."""
    monkeypatch.chdir(tmp_path)
    agent = build_demo_agent("sqlite:///my%20log.db")
    first = agent.run_sync(DEMO_QUESTIONS[0])
    second = agent.run_sync(DEMO_QUESTIONS[1], continue_from=first)
    agent.close()
    redacted = build_demo_agent(
        "sqlite:///redacted.db?durability=normal",
        redact=af.conversation_redaction(),
        disclosures="vault.db",
    )
    run = redacted.run_sync(DEMO_QUESTIONS[0])
    redacted.close()
    vault = af.DisclosureVault(tmp_path / "vault.db", readonly=True)
    commitment = vault.commitments(run.run_id)[0]
    vault.close()
    return Recorded(tmp_path, first.run_id, second.run_id, commitment)


def run(args: list[str]) -> Result:
    return CliRunner().invoke(main, args)


def check(result: Result, code: int, *fragments: str) -> str:
    shown = result.stdout + result.stderr
    assert result.exit_code == code, shown
    assert "Traceback" not in shown and "internal error" not in shown, shown
    for fragment in fragments:
        assert fragment in shown, (fragment, shown)
    return shown


def snapshot(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def spellings(recorded: Recorded) -> list[str]:
    """The log as a relative URL, an absolute one, and a plain path (the reference)."""
    return [
        "sqlite:///my%20log.db",
        f"sqlite:///{recorded.folder}/my%20log.db",  # tmp_path is absolute: four slashes
        "my log.db",
    ]


def test_read_commands_take_a_url(recorded: Recorded) -> None:
    first, second = recorded.first, recorded.second
    before = snapshot(recorded.folder)
    outputs: dict[str, set[str]] = {}
    for db in spellings(recorded):
        for name, args in {
            "verify": ["verify", db],
            "verify --run": ["verify", db, "--run", second],
            "runs": ["runs", db],
            "show": ["show", db, second],
            "served": ["served", db, second, "0"],
            "state": ["state", db, second, "--at", "0"],
            "tool-calls": ["tool-calls", db, first],
            "diff": ["diff", db, first, "sqlite:///my%20log.db", first],
            "replay": ["replay", db, second, "--agent", AGENT],
        }.items():
            shown = check(run(args), EXIT_OK)
            outputs.setdefault(name, set()).add(shown.replace(db, "DB"))
    # the same output whichever spelling (the replay records a new run: compare its verdict)
    for name, seen in outputs.items():
        if name != "replay":
            assert len(seen) == 1, (name, seen)
    assert "(not sealed)" in next(iter(outputs["verify"]))
    assert snapshot(recorded.folder) == before  # read-only: nothing created or changed


def test_a_redacted_run_and_its_vault_by_url(recorded: Recorded) -> None:
    with af.SqliteStore("redacted.db", readonly=True) as store:
        (run_id,) = [r.run_id for r in store.runs()]
    check(run(["verify", "sqlite:///redacted.db?durability=normal"]), EXIT_OK, "VALID")
    check(
        run(["replay", "sqlite:///redacted.db", run_id, "--agent", AGENT, "--disclosures", "v"]),
        EXIT_USAGE,
        "does not exist",
    )
    out = recorded.folder / "d.json"
    check(
        run(["disclose", "sqlite:///vault.db", recorded.commitment, "--out", str(out)]),
        EXIT_OK,
    )
    assert recorded.commitment in out.read_text()
    check(
        run(["served", "sqlite:///redacted.db", run_id, "0", "--wire"]),
        EXIT_USAGE,
        "--disclosures VAULT",
    )
    check(
        run(["disclose", "sqlite:///nope.db", recorded.commitment, "--out", "x.json"]),
        EXIT_USAGE,
        "does not exist",
    )
    check(run(["erase", "memory:", recorded.commitment]), EXIT_USAGE, "nothing in it to read")
    check(run(["erase", "sqlite:///vault.db", recorded.commitment]), EXIT_OK)


def test_export_and_import_by_url(recorded: Recorded) -> None:
    bundle = recorded.folder / "runs.afp"
    check(
        run(["export", "sqlite:///my%20log.db", "--run", recorded.second, "--out", str(bundle)]),
        EXIT_OK,
        "exported 2 runs",
    )
    check(run(["verify", f"sqlite:///{bundle}"]), EXIT_OK, "VALID")  # the file decides
    # the output must not be an input: the URL's file is what is compared
    check(
        run(["export", "sqlite:///my%20log.db", "--run", recorded.first, "--out", "my log.db"]),
        EXIT_USAGE,
        "is the input",
    )
    check(run(["import", str(bundle), "sqlite:///new%20one.db"]), EXIT_OK, "imported 2 runs")
    assert (recorded.folder / "new one.db").is_file()
    check(run(["import", str(bundle), "sqlite:///new%20one.db"]), EXIT_OK, "imported 0 runs")
    check(run(["verify", "sqlite:///new%20one.db"]), EXIT_OK, "VALID")
    absolute = f"sqlite:///{recorded.folder}/abs.db"
    check(run(["import", "runs.afp", absolute]), EXIT_OK, "imported 2 runs")
    with af.SqliteStore(recorded.folder / "abs.db", readonly=True) as store:
        assert {r.run_id for r in store.runs()} == {recorded.first, recorded.second}


def test_demo_and_checkpoint_by_url(recorded: Recorded) -> None:
    check(run(["demo", "--db", "sqlite:///demo.db"]), EXIT_OK, "Recorded to demo.db")
    check(run(["keys", "generate", "k"]), EXIT_OK)
    check(run(["checkpoint", "sqlite:///demo.db", "--key", "k"]), EXIT_OK, "agentfootprint/demo")


@pytest.mark.parametrize(
    "args",
    [
        ["verify", "DB"],
        ["runs", "DB"],
        ["show", "DB", "r"],
        ["export", "DB", "--run", "r", "--out", "x.afp"],
        ["replay", "DB", "r", "--agent", AGENT],
        ["checkpoint", "DB", "--key", "vault.db"],  # an existing file: DB is refused first
        ["diff", "DB", "r", "r"],
        ["diff", "my log.db", "r", "DB", "r"],
        ["disclose", "DB", "c", "--out", "x.json"],
        ["import", "DB", "new.db"],
    ],
    ids=lambda args: "diff DB_B" if args[1] != "DB" else args[0],
)
@pytest.mark.parametrize(
    ("db", "fragment"),
    [
        ("sqlite:///missing.db", "does not exist"),
        ("sqlite:///absent/x.db", "does not exist"),
        ("sqlite:///.", "is a directory"),
        ("memory:", "nothing in it to read"),
        ("postgresql://auditor:secret@127.0.0.1:9/runs", UNREACHABLE),
        ("postgres://127.0.0.1:9/runs", UNREACHABLE),
        ("mysql://db.example/runs", "unknown store URL scheme 'mysql'"),
        ("sqlite://host/runs.db", "no host or port"),
        ("sqlite:runs.db", "three slashes"),
        ("sqlite:///my%20log.db?mode=ro", "unknown query parameter 'mode'"),
    ],
    ids=[
        "missing",
        "missing-folder",
        "folder",
        "memory",
        "postgresql",
        "postgres",
        "mysql",
        "host",
        "two-slashes",
        "query",
    ],
)
def test_what_cannot_be_read_is_a_usage_error(
    recorded: Recorded, args: list[str], db: str, fragment: str
) -> None:
    args = [db if a == "DB" else a for a in args]
    if args[0] == "diff" and args[1] != db and fragment in ("does not exist", "is a directory"):
        fragment = "is not a file"  # DB_B is not a click argument: its own message
    if fragment == UNREACHABLE:  # a URL that parses is only refused when it is connected to
        fragment = {
            "checkpoint": "is not a PKCS8 PEM private key",  # the key is read first
            "import": "is a PostgreSQL database, not a bundle",
            "disclose": "key_file",  # a PostgreSQL vault's URL names its master key
        }.get(args[0], fragment)
    before = snapshot(recorded.folder)
    shown = check(run(args), EXIT_USAGE, fragment)
    assert "secret" not in shown  # a URL's password is never echoed
    assert snapshot(recorded.folder) == before


@pytest.mark.parametrize(
    ("db", "fragment"),
    [
        ("memory:", "ends with this command"),
        ("postgresql://127.0.0.1:9/runs", UNREACHABLE),
        ("sqlite:///absent/new.db", "absent"),
        ("sqlite:///.", "is a directory"),
    ],
)
def test_what_cannot_be_written_is_a_usage_error(
    recorded: Recorded, db: str, fragment: str
) -> None:
    check(
        run(["export", "my log.db", "--run", recorded.first, "--out", "runs.afp"]),
        EXIT_OK,
    )
    before = snapshot(recorded.folder)
    check(run(["import", "runs.afp", db]), EXIT_USAGE, fragment)
    check(run(["demo", "--db", db]), EXIT_USAGE, fragment)
    assert snapshot(recorded.folder) == before


def test_paths_with_colons_stay_paths(recorded: Recorded) -> None:
    """Only the URL forms are URLs: a file whose name holds a colon is read as a file."""
    (recorded.folder / "a:b.db").write_bytes((recorded.folder / "my log.db").read_bytes())
    check(run(["verify", "a:b.db"]), EXIT_OK, "VALID")
    check(run(["runs", "./sqlite:x.db"]), EXIT_USAGE, "does not exist")
