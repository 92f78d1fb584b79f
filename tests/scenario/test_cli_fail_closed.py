"""Every command fails closed on every hostile input.

For each command and each input it must refuse (a missing path, a folder, an empty file, a
text file, another application's SQLite database, a vault where a log is wanted and a log
where a vault is, a log with a TEXT body, a newer schema version, a ``schema_version``
table holding text, outputs it must not write, disclosures documents of the wrong shape):
the documented exit code, one ``Error:`` line (or an ``INVALID`` verdict), never a
traceback or an internal error, and every file in the folder byte-identical afterwards
with no new file beside it. Most cases run in-process (click's CliRunner); the read-only
folder cases and a few end-to-end ones run ``python -m agentfootprint.cli`` in a
subprocess (as root, without the capability that lets root ignore permissions).
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner, Result

import agentfootprint as af
from agentfootprint.agent.demo import DEMO_QUESTIONS, build_demo_agent
from agentfootprint.cli import EXIT_INVALID, EXIT_OK, EXIT_USAGE, main
from agentfootprint.cli._boundary import one_line
from agentfootprint.testing.permissions import unprivileged as without_dac

#: these tests edit or read the schema-1 ``events`` table directly (docs/log-format.md
#: appendix B): every new file of this module is created with storage schema 1
#: (tests/conftest.py)
NEW_FILE_SCHEMA = 1

AGENT = "agentfootprint.agent.demo:replay_agent"


@dataclass(frozen=True)
class Base:
    """Real files recorded once: a demo log (two runs), its bundle, a vault."""

    folder: Path
    first: str
    second: str
    commitment: str


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Base:
    folder = tmp_path_factory.mktemp("base")
    agent = build_demo_agent(folder / "log.db")
    first = agent.run_sync(DEMO_QUESTIONS[0])
    second = agent.run_sync(DEMO_QUESTIONS[1], continue_from=first)
    agent.close()
    redacted = build_demo_agent(
        folder / "redacted.db", redact=af.conversation_redaction(), disclosures=folder / "vault.db"
    )
    run = redacted.run_sync(DEMO_QUESTIONS[0])
    redacted.close()
    source = af.SqliteStore(folder / "log.db", readonly=True)
    af.export_runs(source, [second.run_id], folder / "log.afp")
    source.close()
    with sqlite3.connect(folder / "vault.db") as conn:
        (commitment,) = conn.execute(
            "SELECT commitment FROM disclosures WHERE run_id = ? LIMIT 1", (run.run_id,)
        ).fetchone()
    conn.close()
    return Base(folder, first.run_id, second.run_id, commitment)


class World:
    """A fresh folder holding copies of the base files, and hostile files made on demand."""

    def __init__(self, folder: Path, base: Base) -> None:
        self.folder = folder
        self.base = base
        for name in ("log.db", "log.afp", "vault.db"):
            shutil.copyfile(base.folder / name, folder / name)

    def path(self, name: str) -> str:
        return str(self.folder / name)

    def make(self, kind: str) -> str:
        """The hostile file ``kind`` (built in the folder) as a command-line argument."""
        path = self.folder / f"hostile-{kind}.db"
        if kind == "missing":
            pass
        elif kind == "folder":
            path.mkdir()
        elif kind == "empty":
            path.write_bytes(b"")
        elif kind == "text":
            path.write_text("not a database\n", encoding="utf-8")
        elif kind == "other-app":
            with sqlite3.connect(path) as conn:
                conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
                conn.execute("INSERT INTO customers (name) VALUES ('Ann')")
            conn.close()
        elif kind == "vault":
            shutil.copyfile(self.folder / "vault.db", path)
        elif kind == "log":
            shutil.copyfile(self.folder / "log.db", path)
        else:
            shutil.copyfile(self.folder / "log.db", path)
            with sqlite3.connect(path) as conn:
                _damage(conn, kind, self.base.first)
            conn.close()
        return str(path)

    def snapshot(self) -> dict[str, bytes | None]:
        """Every entry under the folder: a file's bytes, None for a folder."""
        return {
            str(p.relative_to(self.folder)): None if p.is_dir() else p.read_bytes()
            for p in sorted(self.folder.rglob("*"))
        }


def _damage(conn: sqlite3.Connection, kind: str, run_id: str) -> None:
    if kind == "text-body":  # one write row's body stored as TEXT, not BLOB
        conn.execute("DROP TRIGGER events_no_update")
        conn.execute(
            "UPDATE events SET body = CAST(body AS TEXT) WHERE run_id = ? AND seq = "
            "(SELECT MIN(seq) FROM events WHERE run_id = ? AND type = 'write')",
            (run_id, run_id),
        )
    elif kind == "text-body-last":  # the run's close row as TEXT (what `runs` reads)
        conn.execute("DROP TRIGGER events_no_update")
        conn.execute(
            "UPDATE events SET body = CAST(body AS TEXT) WHERE run_id = ? AND seq = "
            "(SELECT MAX(seq) FROM events WHERE run_id = ?)",
            (run_id, run_id),
        )
    elif kind == "index-text":  # the run index holding text where a timestamp belongs
        conn.execute("DROP TRIGGER runs_no_update")
        conn.execute("UPDATE runs SET opened_at = 'yesterday' WHERE run_id = ?", (run_id,))
    elif kind == "schema-newer":
        conn.execute("INSERT INTO schema_version VALUES (99, 'from the future', 0)")
    elif kind == "schema-text":
        conn.execute("DROP TABLE schema_version")
        conn.execute("CREATE TABLE schema_version (version TEXT, name TEXT, applied_at INTEGER)")
        conn.execute("INSERT INTO schema_version VALUES ('two', 'initial', 0)")
    else:
        raise AssertionError(f"unknown hostile kind {kind}")


@pytest.fixture
def world(tmp_path: Path, base: Base, monkeypatch: pytest.MonkeyPatch) -> World:
    folder = tmp_path / "w"
    folder.mkdir()
    monkeypatch.chdir(tmp_path)  # a replay factory's store, if any, would land here
    return World(folder, base)


def run(args: list[str]) -> Result:
    return CliRunner().invoke(main, args)


def check(result: Result, code: int, *fragments: str, verdict: bool = False) -> None:
    """Exit ``code``, no traceback, no internal error, the fragments said; an error (a
    click usage error too) is one ``Error:`` line on stderr, never click's usage block."""
    shown = result.stdout + result.stderr
    assert result.exit_code == code, shown
    assert isinstance(result.exception, SystemExit | None), repr(result.exception)
    assert "Traceback" not in shown and "internal error" not in shown, shown
    for fragment in fragments:
        assert fragment in shown, (fragment, shown)
    if code in (EXIT_OK,) or verdict:
        return
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), shown


@contextlib.contextmanager
def unchanged(world: World) -> Iterator[None]:
    """Every file under the world's folder byte-identical afterwards, and no new one."""
    before = world.snapshot()
    yield
    assert world.snapshot() == before


# -- hostile logs -----------------------------------------------------------------------

#: what each file kind is refused as (the message says what it is instead)
NOT_A_LOG = {
    "missing": "does not exist",
    "folder": "is a directory",
    "empty": "an empty file",
    "text": "not an SQLite database",
    "other-app": "another application (tables: customers)",
    "vault": "a disclosure vault",
    "schema-newer": "newer than this library",
    "schema-text": "schema_version",
}

#: every command reading a log, with the run it names ("R" is replaced by a real run id)
LOG_COMMANDS: dict[str, Callable[[str, World], list[str]]] = {
    "runs": lambda db, w: ["runs", db],
    "runs --pending": lambda db, w: ["runs", db, "--pending"],
    "show": lambda db, w: ["show", db, w.base.first],
    "served": lambda db, w: ["served", db, w.base.first, "0"],
    "state": lambda db, w: ["state", db, w.base.first, "--at", "0"],
    "why": lambda db, w: ["why", db, w.base.first, "final_answer"],
    "verify": lambda db, w: ["verify", db],
    "verify --run": lambda db, w: ["verify", db, "--run", w.base.first],
    "export": lambda db, w: ["export", db, "--run", w.base.first, "--out", w.path("out.afp")],
    "diff": lambda db, w: ["diff", db, w.base.first, w.base.first],
    "diff DB_B": lambda db, w: ["diff", w.path("log.db"), w.base.first, db, w.base.first],
    "replay": lambda db, w: ["replay", db, w.base.first, "--agent", AGENT],
}


@pytest.mark.parametrize("kind", sorted(NOT_A_LOG))
@pytest.mark.parametrize("command", sorted(LOG_COMMANDS))
def test_a_file_that_is_not_a_readable_log_is_refused(
    world: World, command: str, kind: str
) -> None:
    db = world.make(kind)
    args = LOG_COMMANDS[command](db, world)
    fragment = NOT_A_LOG[kind]
    if command == "diff DB_B" and kind in ("missing", "folder"):
        fragment = "is not a file"
    with unchanged(world):
        check(run(args), EXIT_USAGE, fragment)


@pytest.mark.parametrize(
    ("command", "code"),
    [
        ("runs", EXIT_OK),  # lists without verifying
        ("runs --pending", EXIT_OK),  # so does its list of open questions
        ("show", EXIT_INVALID),
        ("served", EXIT_INVALID),
        ("state", EXIT_INVALID),
        ("why", EXIT_INVALID),
        ("verify", EXIT_INVALID),
        ("verify --run", EXIT_INVALID),
        ("export", EXIT_INVALID),
        ("diff", EXIT_INVALID),
        ("diff DB_B", EXIT_INVALID),
        ("replay", EXIT_INVALID),
    ],
)
@pytest.mark.parametrize("kind", ["text-body", "text-body-last"])
def test_a_log_with_a_text_body_is_invalid_for_every_command(
    world: World, kind: str, command: str, code: int
) -> None:
    db = world.make(kind)
    args = LOG_COMMANDS[command](db, world)
    verdict = command.startswith(("verify", "diff", "replay"))
    fragments = (
        ("INVALID",)
        if verdict
        else ()
        if code == EXIT_OK
        else ("not exported",)
        if command == "export"
        else ("does not verify",)
    )
    with unchanged(world):
        check(run(args), code, *fragments, verdict=verdict)


def test_an_index_row_of_the_wrong_type(world: World) -> None:
    """`verify` reports the row (code index); `runs`, which lists the index, refuses the
    file as damaged; a run's own commands, which verify the run, are unaffected."""
    db, first = world.make("index-text"), world.base.first
    with unchanged(world):
        check(run(["verify", db]), EXIT_INVALID, "[index]", "yesterday", verdict=True)
        check(run(["runs", db]), EXIT_USAGE, "wrong type")
        check(run(["show", db, first]), EXIT_OK)
        check(run(["verify", db, "--run", first]), EXIT_OK)


def test_verify_of_a_log_with_no_runs_says_so(world: World) -> None:
    af.SqliteStore(world.folder / "new.db").close()
    with unchanged(world):
        check(run(["verify", world.path("new.db")]), 0, "no runs to verify")
    with unchanged(world):
        check(run(["runs", world.path("new.db")]), 0, "no runs")


def test_read_only_commands_leave_a_good_log_as_it_was(world: World) -> None:
    """The good cases too: reading never writes (no -wal, no -shm, no migration)."""
    first, second = world.base.first, world.base.second
    for source in ("log.db", "log.afp"):
        db = world.path(source)
        for args in (
            ["runs", db],
            ["show", db, second],
            ["served", db, second, "0"],
            ["state", db, second, "--at", "0"],
            ["why", db, second, "final_answer"],
            ["verify", db],
            ["diff", db, second, second],
            ["replay", db, second, "--agent", AGENT],
        ):
            with unchanged(world):
                check(run(args), EXIT_OK)
    check(run(["export", world.path("log.db"), "--run", first, "--out", world.path("x.afp")]), 0)


# -- writing into hostile files ----------------------------------------------------------


def test_a_log_created_elsewhere_is_refused_as_a_target(world: World) -> None:
    for kind, fragment in [
        ("folder", "is a directory"),
        ("text", "not an SQLite database"),
        ("other-app", "another application (tables: customers)"),
        ("vault", "a disclosure vault"),
        ("schema-newer", "newer than this library"),
        ("schema-text", "schema_version"),
    ]:
        target = world.make(kind)
        for args in (["demo", "--db", target], ["import", world.path("log.afp"), target]):
            with unchanged(world):
                check(run(args), EXIT_USAGE, fragment)
    missing_folder = world.path("absent/new.db")
    for args in (
        ["demo", "--db", missing_folder],
        ["import", world.path("log.afp"), missing_folder],
    ):
        with unchanged(world):
            check(run(args), EXIT_USAGE, "absent")


@pytest.mark.parametrize(
    ("kind", "fragment"),
    [
        ("missing", "does not exist"),
        ("folder", "is a directory"),
        ("empty", "an empty file"),
        ("text", "not an agentfootprint export bundle"),
        ("other-app", "an SQLite database"),
        ("vault", "an SQLite database"),
        ("log", "export its runs to a bundle first"),
    ],
)
def test_import_refuses_a_bundle_that_is_not_one(world: World, kind: str, fragment: str) -> None:
    bundle = world.make(kind)
    with unchanged(world):
        check(run(["import", bundle, world.path("new.db")]), EXIT_USAGE, fragment)


def test_import_of_a_bundle_that_does_not_verify_creates_nothing(world: World) -> None:
    data = (world.folder / "log.afp").read_bytes()
    (world.folder / "bad.afp").write_bytes(data[: len(data) // 2])
    with unchanged(world):
        args = ["import", world.path("bad.afp"), world.path("new.db")]
        check(run(args), EXIT_INVALID, "truncated")


# -- outputs that must not be written ----------------------------------------------------


def _outputs(world: World) -> dict[str, Callable[[str], list[str]]]:
    first, commitment = world.base.first, world.base.commitment
    return {
        "export": lambda out: ["export", world.path("log.db"), "--run", first, "--out", out],
        "disclose": lambda out: ["disclose", world.path("vault.db"), commitment, "--out", out],
    }


@pytest.mark.parametrize("command", ["export", "disclose"])
@pytest.mark.parametrize(
    ("out", "fragment"),
    [
        ("absent/x.out", "absent"),  # a missing folder
        ("hostile-folder.db", "is a directory"),  # an existing folder
        ("log.db", "refusing to overwrite"),  # an existing log: never overwritten
        ("vault.db", "refusing to overwrite"),
    ],
)
def test_outputs_that_cannot_or_must_not_be_written(
    world: World, command: str, out: str, fragment: str
) -> None:
    if out == "hostile-folder.db":
        world.make("folder")
    args = _outputs(world)[command](world.path(out))
    with unchanged(world):
        check(run(args), EXIT_USAGE, fragment)


def test_an_output_that_is_the_input_is_refused(world: World) -> None:
    first = world.base.first
    same = ["export", world.path("log.db"), "--run", first, "--out", world.path("log.db")]
    with unchanged(world):
        check(run(same), EXIT_USAGE, "is the input")


# -- vaults ------------------------------------------------------------------------------

NOT_A_VAULT = {
    "missing": "does not exist",
    "folder": "is a directory",
    "empty": "an empty file",
    "text": "not an SQLite database",
    "other-app": "another application (tables: customers)",
    "log": "an agentfootprint log",
}


@pytest.mark.parametrize("kind", sorted(NOT_A_VAULT))
@pytest.mark.parametrize("command", ["disclose", "erase", "replay --disclosures"])
def test_a_file_that_is_not_a_vault_is_refused(world: World, command: str, kind: str) -> None:
    vault = world.make(kind)
    args = {
        "disclose": ["disclose", vault, world.base.commitment, "--out", world.path("d.json")],
        "erase": ["erase", vault, world.base.commitment],
        "replay --disclosures": [
            "replay",
            world.path("log.db"),
            world.base.first,
            "--agent",
            AGENT,
            "--disclosures",
            vault,
        ],
    }[command]
    with unchanged(world):
        check(run(args), EXIT_USAGE, NOT_A_VAULT[kind])


# -- disclosures documents ---------------------------------------------------------------

BAD_DISCLOSURES: list[tuple[str, bytes]] = [
    ("empty", b""),
    ("not JSON", b"{"),
    ("not UTF-8", b"\xff\xfe{}"),
    ("an array", b"[]"),
    ("null", b"null"),
    ("no version", b'{"disclosures": []}'),
    ("another version", b'{"agentfootprint_disclosures": 2, "disclosures": []}'),
    ("version as text", b'{"agentfootprint_disclosures": "1", "disclosures": []}'),
    ("disclosures a number", b'{"agentfootprint_disclosures": 1, "disclosures": 5}'),
    ("disclosures null", b'{"agentfootprint_disclosures": 1, "disclosures": null}'),
    ("disclosures a string", b'{"agentfootprint_disclosures": 1, "disclosures": "abc"}'),
    ("disclosures an object", b'{"agentfootprint_disclosures": 1, "disclosures": {"a": 1}}'),
    ("item not an object", b'{"agentfootprint_disclosures": 1, "disclosures": [1]}'),
    ("item missing members", b'{"agentfootprint_disclosures": 1, "disclosures": [{"key": "k"}]}'),
    (
        "item with a bad commitment",
        b'{"agentfootprint_disclosures": 1, "disclosures": '
        b'[{"commitment": "x", "salt": "s", "key": "k", "value": 1}]}',
    ),
    (
        "item with a salt not a string",
        b'{"agentfootprint_disclosures": 1, "disclosures": [{"commitment": "' + b"0" * 64 + b'", '
        b'"salt": 1, "key": "k", "value": 1}]}',
    ),
]


@pytest.mark.parametrize(("about", "data"), BAD_DISCLOSURES, ids=[a for a, _ in BAD_DISCLOSURES])
def test_a_disclosures_file_of_the_wrong_shape_is_refused(
    world: World, about: str, data: bytes
) -> None:
    (world.folder / "d.json").write_bytes(data)
    args = ["verify", world.path("log.db"), "--disclosures", world.path("d.json")]
    with unchanged(world):
        check(run(args), EXIT_USAGE, "d.json")


@pytest.mark.parametrize("kind", ["vault", "log"])
def test_a_database_given_as_disclosures_file_is_named(world: World, kind: str) -> None:
    args = ["verify", world.path("log.db"), "--disclosures", world.make(kind)]
    with unchanged(world):
        check(run(args), EXIT_USAGE, "is an SQLite database", "disclose")


# -- the boundary itself ----------------------------------------------------------------


def test_an_unexpected_error_is_one_line_and_debug_reraises(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("boom\nsecond line")

    monkeypatch.setattr("agentfootprint.cli.verifying.Verifier", broken)
    monkeypatch.delenv("AGENTFOOTPRINT_DEBUG", raising=False)
    result = run(["verify", world.path("log.db")])
    assert result.exit_code == EXIT_USAGE and "Traceback" not in result.output
    assert result.stderr == (
        "Error: internal error: RuntimeError: boom | second line (please report it, "
        "with AGENTFOOTPRINT_DEBUG=1 set for the traceback)\n"
    )
    monkeypatch.setenv("AGENTFOOTPRINT_DEBUG", "1")
    raised = run(["verify", world.path("log.db")])
    assert isinstance(raised.exception, RuntimeError)


def test_an_os_error_names_its_path(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    def full(*args: Any, **kwargs: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", "/somewhere/x.afp")

    monkeypatch.setattr("agentfootprint.cli.transfer.export_runs", full)
    args = ["export", world.path("log.db"), "--run", world.base.first, "--out", "x.afp"]
    result = run(args)
    check(result, EXIT_USAGE)
    assert result.stderr == "Error: /somewhere/x.afp: No space left on device\n"


def test_messages_are_one_line_with_control_characters_escaped() -> None:
    assert one_line("run a\nb\x1b[31m\rc") == "run a | b\\x1b[31m\\rc"
    assert one_line("  tab\tand é  ") == "tab\tand é"


def test_help_documents_every_exit_code_and_the_debug_variable() -> None:
    result = run(["--help"])
    assert result.exit_code == 0
    for words in (
        "0  success",
        "1  INVALID",
        "2  usage or I/O",
        "3  UNSEALED",
        "AGENTFOOTPRINT_DEBUG=1",
    ):
        assert words in result.output, words
    for command in (
        "runs",
        "show",
        "served",
        "state",
        "why",
        "export",
        "import",
        "disclose",
        "erase",
    ):
        shown = run([command, "--help"]).output
        assert "Exit codes:" in shown and "2  usage error" in shown, command


# -- end to end: a subprocess, read-only folders ------------------------------------------


def cli(
    args: list[str], cwd: Path, *, unprivileged: bool = False
) -> subprocess.CompletedProcess[str]:
    """``python -m agentfootprint.cli ARGS``; ``unprivileged``: as root, without the
    capabilities that let root ignore file permissions."""
    command = [sys.executable, "-m", "agentfootprint.cli", *args]
    if unprivileged:
        command = without_dac(command)
    env = {k: v for k, v in os.environ.items() if k != "AGENTFOOTPRINT_DEBUG"}
    return subprocess.run(
        command, cwd=cwd, capture_output=True, text=True, timeout=120, check=False, env=env
    )


@pytest.fixture
def read_only(world: World) -> Iterator[Path]:
    """The world's folder made read-only; skipped where permissions cannot bind us."""
    folder = world.folder
    folder.chmod(0o555)
    try:
        if os.geteuid() == 0 and shutil.which("setpriv") is None:
            pytest.skip("running as root without setpriv: cannot drop CAP_DAC_OVERRIDE")
        probe = cli(["demo", "--db", str(folder / "probe.db")], folder, unprivileged=True)
        if (folder / "probe.db").exists():
            pytest.skip("permissions do not bind this process (cannot drop CAP_DAC_OVERRIDE)")
        assert probe.returncode == EXIT_USAGE, probe.stderr
        yield folder
    finally:
        folder.chmod(0o755)


def test_end_to_end_in_a_read_only_folder(world: World, read_only: Path) -> None:
    first, second = world.base.first, world.base.second
    before = world.snapshot()
    log = str(read_only / "log.db")
    for args in (["verify", log], ["runs", log], ["show", log, second]):
        done = cli(args, read_only, unprivileged=True)
        assert done.returncode == EXIT_OK, done
        assert "Traceback" not in done.stdout + done.stderr
    for args in (
        ["export", log, "--run", first, "--out", str(read_only / "x.afp")],
        ["disclose", str(read_only / "vault.db"), world.base.commitment, "--out", "d.json"],
        ["import", str(read_only / "log.afp"), str(read_only / "new.db")],
        ["demo", "--db", str(read_only / "new.db")],
        ["erase", str(read_only / "vault.db"), world.base.commitment],
    ):
        done = cli(args, read_only, unprivileged=True)
        assert done.returncode == EXIT_USAGE, done
        assert done.stderr.startswith("Error: ") and done.stderr.count("\n") == 1, done.stderr
        assert "Traceback" not in done.stdout + done.stderr
    assert world.snapshot() == before


@pytest.mark.parametrize("kind", ["text", "other-app", "schema-text", "text-body"])
def test_end_to_end_verify_of_hostile_files(world: World, kind: str) -> None:
    path = world.make(kind)
    before = world.snapshot()
    done = cli(["verify", path], world.folder)
    assert done.returncode == (EXIT_INVALID if kind == "text-body" else EXIT_USAGE), done
    assert "Traceback" not in done.stdout + done.stderr
    assert world.snapshot() == before


def test_end_to_end_json_outputs_stay_json(world: World) -> None:
    """A replay's --json of a log that does not verify is still one JSON document."""
    path = world.make("text-body")
    done = cli(["replay", path, world.base.first, "--agent", AGENT, "--json"], world.folder)
    assert done.returncode == EXIT_INVALID, done
    assert orjson.loads(done.stdout)["outcome"] == "invalid"
