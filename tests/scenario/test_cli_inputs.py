"""Every bad input to every command: one ``Error:`` line, exit 2, nothing written.

The sweep gives each command a missing file, a folder, an empty file, a named pipe (FIFO),
``/dev/zero``, a bad option value, a missing argument and an unknown option. Each must end
with exactly one ``Error: ...`` line on stderr (never click's usage block, never a
traceback), exit 2, and leave every file as it was with none created. Most cases run
in-process (click's CliRunner); the FIFO and ``/dev/zero`` cases, which blocked or grew
without bound before, run in one subprocess whose timeout only guards against a hang.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

import agentfootprint as af
from agentfootprint.agent.demo import DEMO_QUESTIONS, build_demo_agent
from agentfootprint.cli import EXIT_INVALID, EXIT_OK, EXIT_USAGE, main

AGENT = "agentfootprint.agent.demo:replay_agent"
PG_VAULT = "postgresql://auditor@localhost:1/nodb?key_file={key}"


@dataclass(frozen=True)
class Base:
    """Good files, made once: a log, its bundle, a vault, a signing key, a checkpoint of the
    log and a consistency proof; ``names`` fills a case's placeholders."""

    folder: Path
    names: dict[str, str]


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Base:
    folder = tmp_path_factory.mktemp("inputs")
    agent = build_demo_agent(folder / "log.db")
    run = agent.run_sync(DEMO_QUESTIONS[0])
    agent.close()
    redacted = build_demo_agent(
        folder / "red.db", redact=af.conversation_redaction(), disclosures=folder / "vault.db"
    )
    redacted.run_sync(DEMO_QUESTIONS[0])
    redacted.close()
    with af.DisclosureVault(folder / "vault.db", readonly=True) as vault:
        (commitment,) = vault.commitments(redacted_run_id(folder / "red.db"))[:1]
    source = af.SqliteStore(folder / "log.db", readonly=True)
    af.export_runs(source, [run.run_id], folder / "log.afp")
    source.close()
    runner = CliRunner()
    made = runner.invoke(main, ["keys", "generate", str(folder / "k.pem")])
    assert made.exit_code == EXIT_OK, made.output
    public = made.output.split("public key: ", 1)[1].split()[0]
    log, key = str(folder / "log.db"), str(folder / "k.pem")
    signed = runner.invoke(main, ["checkpoint", log, "--key", key])
    assert signed.exit_code == EXIT_OK, signed.output
    (folder / "cp.txt").write_text(signed.stdout, encoding="utf-8")
    proved = runner.invoke(
        main,
        ["checkpoint", log, "--key", key, "--since", str(folder / "cp.txt"), "--proof-out",
         str(folder / "proof")],
    )  # fmt: skip
    assert proved.exit_code == EXIT_OK, proved.output
    names = {
        "LOG": log,
        "BUNDLE": str(folder / "log.afp"),
        "VAULT": str(folder / "vault.db"),
        "KEY": key,
        "PUB": public,
        "CP": str(folder / "cp.txt"),
        "PROOF": str(folder / "proof"),
        "RUN": run.run_id,
        "COMMIT": commitment,
        "OUT": str(folder / "out.file"),
        "NEW": str(folder / "new.db"),
        "PGVAULT": PG_VAULT.format(key=key),
    }
    return Base(folder, names)


def redacted_run_id(db: Path) -> str:
    with af.SqliteStore(db, readonly=True) as store:
        return store.run_ids()[0]


def snapshot(folder: Path) -> dict[str, bytes | str]:
    """Every entry under ``folder``: a regular file's bytes, else what it is (a FIFO is
    never read)."""
    found: dict[str, bytes | str] = {}
    for path in sorted(folder.rglob("*")):
        found[str(path.relative_to(folder))] = (
            path.read_bytes() if path.is_file() else "folder" if path.is_dir() else "other"
        )
    return found


def fill(args: list[str], names: dict[str, str], bad: str = "") -> list[str]:
    return [bad if arg == "BAD" else names.get(arg, arg) for arg in args]


def one_error_line(code: int, stdout: str, stderr: str, *, json_out: bool = False) -> None:
    """Exit 2 (or ``code``), exactly one ``Error:`` line on stderr, nothing else printed
    (``--json``: one JSON object on stdout), no traceback, no usage block."""
    shown = stdout + stderr
    assert code == EXIT_USAGE, shown
    assert "Traceback" not in shown and "Usage:" not in shown, shown
    assert "internal error" not in shown, shown
    lines = stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), shown
    if json_out:
        document = json.loads(stdout)
        assert document["exit"] == EXIT_USAGE and document["runs"] == [], document
        assert document["error"]["code"] == "usage", document
    else:
        assert stdout == "", shown


# -- the sweep: file arguments -------------------------------------------------------------

#: commands with a file to read in the place of BAD
INPUTS: dict[str, list[str]] = {
    "runs DB": ["runs", "BAD"],
    "show DB": ["show", "BAD", "RUN"],
    "served DB": ["served", "BAD", "RUN", "0"],
    "served --disclosures": ["served", "LOG", "RUN", "0", "--wire", "--disclosures", "BAD"],
    "state DB": ["state", "BAD", "RUN", "--at", "0"],
    "why DB": ["why", "BAD", "RUN", "final_answer"],
    "tool-calls DB": ["tool-calls", "BAD", "RUN"],
    "verify DB": ["verify", "BAD"],
    "verify --json DB": ["verify", "--json", "BAD"],
    "verify --key": ["verify", "LOG", "--key", "BAD"],
    "verify --disclosures": ["verify", "LOG", "--disclosures", "BAD"],
    "verify --checkpoint": ["verify", "LOG", "--checkpoint", "BAD", "--key", "PUB"],
    "export DB": ["export", "BAD", "--run", "RUN", "--out", "OUT"],
    "export --key": ["export", "LOG", "--run", "RUN", "--out", "OUT", "--key", "BAD"],
    "export --checkpoint": ["export", "LOG", "--run", "RUN", "--out", "OUT", "--checkpoint", "BAD"],
    "import BUNDLE": ["import", "BAD", "NEW"],
    "copy SRC": ["copy", "BAD", "NEW"],
    "disclose VAULT": ["disclose", "BAD", "COMMIT", "--out", "OUT"],
    "erase VAULT": ["erase", "BAD", "COMMIT"],
    "replay DB": ["replay", "BAD", "RUN", "--agent", AGENT],
    "replay --disclosures": ["replay", "LOG", "RUN", "--agent", AGENT, "--disclosures", "BAD"],
    "diff DB_A": ["diff", "BAD", "RUN", "RUN"],
    "diff DB_B": ["diff", "LOG", "RUN", "BAD", "RUN"],
    "keys show": ["keys", "show", "BAD"],
    "checkpoint DB": ["checkpoint", "BAD", "--key", "KEY"],
    "checkpoint --key": ["checkpoint", "LOG", "--key", "BAD"],
    "checkpoint --since": ["checkpoint", "LOG", "--key", "KEY", "--since", "BAD", "--proof-out",
                           "OUT"],
    "consistency OLD": ["consistency", "BAD", "CP", "PROOF", "--key", "PUB"],
    "consistency NEW": ["consistency", "CP", "BAD", "PROOF", "--key", "PUB"],
    "consistency PROOF": ["consistency", "CP", "CP", "BAD", "--key", "PUB"],
    "vault-key rotate NEW_KEY": ["vault-key", "rotate", "PGVAULT", "BAD"],
}  # fmt: skip

#: commands with a file to write (or create) in the place of BAD: a missing one is made
TARGETS: dict[str, list[str]] = {
    "init DB": ["init", "BAD"],
    "demo --db": ["demo", "--db", "BAD"],
    "import DB": ["import", "BUNDLE", "BAD"],
    "copy DST": ["copy", "LOG", "BAD"],
    "export --out": ["export", "LOG", "--run", "RUN", "--out", "BAD"],
    "disclose --out": ["disclose", "VAULT", "COMMIT", "--out", "BAD"],
    "checkpoint --proof-out": ["checkpoint", "LOG", "--key", "KEY", "--since", "CP",
                               "--proof-out", "BAD"],
    "keys generate": ["keys", "generate", "BAD"],
    "vault-key new": ["vault-key", "new", "BAD"],
}  # fmt: skip

#: an empty checkpoint note or proof is not a usage error: it is malformed evidence (an
#: INVALID verdict, exit 1, docs/log-format.md section 9.7)
EMPTY_INVALID = [
    "checkpoint --since",
    "consistency NEW",
    "consistency OLD",
    "consistency PROOF",
    "verify --checkpoint",
]
#: an empty file these cases never read: the demo run has no policy (its vault is not
#: opened); a new master key is read once the database answers (none does here)
EMPTY_UNREAD = ["served --disclosures", "vault-key rotate NEW_KEY"]


def make(folder: Path, kind: str) -> str:
    path = folder / f"bad-{kind}"
    if kind == "folder":
        path.mkdir()
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "zero":
        return "/dev/zero"
    return str(path)


@pytest.fixture
def world(tmp_path: Path, base: Base, monkeypatch: pytest.MonkeyPatch) -> Base:
    """A fresh copy of the base files (the cases must not change them)."""
    folder = tmp_path / "w"
    shutil.copytree(base.folder, folder)
    monkeypatch.chdir(folder)
    names = {
        name: value.replace(str(base.folder), str(folder)) for name, value in base.names.items()
    }
    return Base(folder, names)


def invoke(args: list[str]) -> Result:
    return CliRunner().invoke(main, args)


def check_refused(result: Result, *, json_out: bool = False) -> None:
    assert isinstance(result.exception, SystemExit | None), repr(result.exception)
    one_error_line(result.exit_code, result.stdout, result.stderr, json_out=json_out)


IN_PROCESS = [
    (name, kind)
    for name in INPUTS
    for kind in ("missing", "folder", "empty")
    if not (kind == "empty" and name in EMPTY_INVALID + EMPTY_UNREAD)
] + [(name, "folder") for name in TARGETS]


@pytest.mark.parametrize(("name", "kind"), IN_PROCESS, ids=[f"{n}-{k}" for n, k in IN_PROCESS])
def test_a_bad_file_argument_is_one_error_line(world: Base, name: str, kind: str) -> None:
    bad = make(world.folder, kind)
    args = fill({**INPUTS, **TARGETS}[name], world.names, bad)
    before = snapshot(world.folder)
    check_refused(invoke(args), json_out="--json" in args)
    assert snapshot(world.folder) == before


@pytest.mark.parametrize("name", EMPTY_INVALID)
def test_an_empty_checkpoint_or_proof_is_invalid_evidence(world: Base, name: str) -> None:
    args = fill(INPUTS[name], world.names, make(world.folder, "empty"))
    before = snapshot(world.folder)
    result = invoke(args)
    assert result.exit_code == EXIT_INVALID, result.output
    assert "Traceback" not in result.output and "INVALID" in result.output, result.output
    assert snapshot(world.folder) == before


# -- FIFOs and /dev/zero: one subprocess, a hang guard ---------------------------------------

DRIVER = textwrap.dedent(
    """
    import json, resource, sys
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))  # a read with no bound fails
    from click.testing import CliRunner
    from agentfootprint.cli import main
    for name, args in json.loads(sys.stdin.read()):
        result = CliRunner().invoke(main, args)
        crashed = result.exception is not None and not isinstance(result.exception, SystemExit)
        print(json.dumps({"name": name, "code": result.exit_code, "stdout": result.stdout,
                          "stderr": result.stderr, "crashed": repr(result.exception)
                          if crashed else None}), flush=True)
    """
)

SPECIAL = [
    (name, kind)
    for name in {**INPUTS, **TARGETS}
    for kind in ("fifo", "zero")
    if not (kind == "zero" and name == "keys generate")  # /dev/zero exists: refused as such
] + [("keys generate", "zero")]


@pytest.fixture(scope="module")
def special_results(base: Base, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every FIFO and /dev/zero case, run in one subprocess (cwd: a copy of the base files)."""
    if not hasattr(os, "mkfifo") or not Path("/dev/zero").exists():
        pytest.skip("no named pipes or no /dev/zero here")
    folder = tmp_path_factory.mktemp("special") / "w"
    shutil.copytree(base.folder, folder)
    names = {k: v.replace(str(base.folder), str(folder)) for k, v in base.names.items()}
    fifo = make(folder, "fifo")
    cases = [
        (f"{name}-{kind}", fill({**INPUTS, **TARGETS}[name], names, fifo if kind == "fifo"
                                else "/dev/zero"))
        for name, kind in SPECIAL
    ]  # fmt: skip
    before = snapshot(folder)
    env = {k: v for k, v in os.environ.items() if k != "AGENTFOOTPRINT_DEBUG"}
    try:
        done = subprocess.run(
            [sys.executable, "-c", DRIVER],
            input=json.dumps(cases),
            capture_output=True,
            text=True,
            cwd=folder,
            env=env,
            timeout=240,  # a hang guard only: every case is refused before any read
            check=False,
        )
        output, failure = done.stdout, done.stderr if done.returncode else ""
    except subprocess.TimeoutExpired as exc:
        output = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
        failure = "the driver hung"
    found: dict[str, Any] = {}
    for line in output.splitlines():
        result = json.loads(line)
        found[result["name"]] = result
    return {"results": found, "failure": failure, "unchanged": snapshot(folder) == before}


@pytest.mark.parametrize(("name", "kind"), SPECIAL, ids=[f"{n}-{k}" for n, k in SPECIAL])
def test_a_fifo_or_dev_zero_is_refused_at_once(
    special_results: dict[str, Any], name: str, kind: str
) -> None:
    result = special_results["results"].get(f"{name}-{kind}")
    assert result is not None, f"never finished ({special_results['failure']})"
    assert result["crashed"] is None, result
    one_error_line(
        result["code"],
        result["stdout"],
        result["stderr"],
        json_out="--json" in INPUTS.get(name, []),
    )
    if kind == "fifo" and name not in ("keys generate", "vault-key new"):
        assert "named pipe (FIFO)" in result["stderr"] or "is not a file" in result["stderr"]


def test_fifo_and_dev_zero_cases_change_no_file(special_results: dict[str, Any]) -> None:
    assert not special_results["failure"], special_results["failure"]
    assert special_results["unchanged"]


# -- the sweep: options and arguments --------------------------------------------------------

COMMANDS = [
    ["demo"],
    ["init"],
    ["runs"],
    ["show"],
    ["served"],
    ["state"],
    ["why"],
    ["tool-calls"],
    ["verify"],
    ["export"],
    ["import"],
    ["copy"],
    ["disclose"],
    ["erase"],
    ["replay"],
    ["diff"],
    ["checkpoint"],
    ["consistency"],
    ["keys", "generate"],
    ["keys", "show"],
    ["vault-key", "new"],
    ["vault-key", "rotate"],
    ["scan"],
]

#: bad values, missing values and wrong combinations
BAD_VALUES: dict[str, list[str]] = {
    "served K not a number": ["served", "LOG", "RUN", "x"],
    "served K negative": ["served", "LOG", "RUN", "-1"],
    "state --at not a number": ["state", "LOG", "RUN", "--at", "x"],
    "state --at below -1": ["state", "LOG", "RUN", "--at", "-2"],
    "state without --at": ["state", "LOG", "RUN"],
    "state unknown --path": ["state", "LOG", "RUN", "--at", "0", "--path", "nope"],
    "why --at not a number": ["why", "LOG", "RUN", "final_answer", "--at", "x"],
    "why --at below -1": ["why", "LOG", "RUN", "final_answer", "--at", "-2"],
    "why --at past the last commit": ["why", "LOG", "RUN", "final_answer", "--at", "9999"],
    "why unknown key": ["why", "LOG", "RUN", "nope"],
    "why unknown run": ["why", "LOG", "nosuchrun", "final_answer"],
    "why without KEY": ["why", "LOG", "RUN"],
    "diff --limit 0": ["diff", "LOG", "RUN", "RUN", "--limit", "0"],
    "diff one run": ["diff", "LOG", "RUN"],
    "diff too many": ["diff", "LOG", "RUN", "LOG", "RUN", "RUN"],
    "replay --until negative": ["replay", "LOG", "RUN", "--agent", AGENT, "--until", "-1"],
    "replay without --agent": ["replay", "LOG", "RUN"],
    "replay bad --agent": ["replay", "LOG", "RUN", "--agent", "nomodule"],
    "verify unknown run": ["verify", "LOG", "--run", "nosuchrun"],
    "verify --key not a key": ["verify", "LOG", "--key", "ed25519:nope"],
    "verify --checkpoint without --key": ["verify", "LOG", "--checkpoint", "CP"],
    "verify --checkpoint with --run": ["verify", "LOG", "--checkpoint", "CP", "--key", "PUB",
                                       "--run", "RUN"],
    "verify memory:": ["verify", "memory:"],
    "verify another URL": ["verify", "ftp://x/y"],
    "export without --out": ["export", "LOG", "--run", "RUN"],
    "export --origin without --key": ["export", "LOG", "--run", "RUN", "--out", "OUT",
                                      "--origin", "x"],
    "export --key and --checkpoint": ["export", "LOG", "--run", "RUN", "--out", "OUT",
                                      "--key", "KEY", "--checkpoint", "CP"],
    "export --out the input": ["export", "LOG", "--run", "RUN", "--out", "LOG"],
    "copy into itself": ["copy", "LOG", "LOG"],
    "erase nothing": ["erase", "VAULT"],
    "disclose nothing": ["disclose", "VAULT", "--out", "OUT"],
    "checkpoint --since without --proof-out": ["checkpoint", "LOG", "--key", "KEY",
                                                "--since", "CP"],
    "checkpoint --origin without a value": ["checkpoint", "LOG", "--key", "KEY", "--origin"],
    "checkpoint --passphrase-env unset": ["checkpoint", "LOG", "--key", "KEY",
                                          "--passphrase-env", "AF_TEST_UNSET_VARIABLE"],
    "consistency without --key": ["consistency", "CP", "CP", "PROOF"],
    "keys show not a key": ["keys", "show", "ed25519:AAAA"],
    "keys generate an existing file": ["keys", "generate", "KEY"],
    "vault-key rotate an SQLite vault": ["vault-key", "rotate", "VAULT", "KEY"],
    "scan without --literals": ["scan", "LOG"],
    "scan --literals missing": ["scan", "LOG", "--literals", "nosuchfile.txt"],
    "unknown command": ["nosuchcommand"],
    "unknown option of the group": ["--nosuchoption"],
    "unknown keys command": ["keys", "nosuch"],
}  # fmt: skip

SWEEP = (
    [(f"{' '.join(c)} --bogus", [*c, "--bogus"]) for c in COMMANDS]
    + [(f"{' '.join(c)} with no argument", c) for c in COMMANDS if c != ["demo"]]
    + list(BAD_VALUES.items())
)


@pytest.mark.parametrize(("about", "args"), SWEEP, ids=[about for about, _ in SWEEP])
def test_a_bad_argument_is_one_error_line(world: Base, about: str, args: list[str]) -> None:
    filled = fill(args, world.names)
    before = snapshot(world.folder)
    result = invoke(filled)
    check_refused(result, json_out="--json" in filled)
    assert snapshot(world.folder) == before


def test_a_usage_error_names_where_the_usage_is() -> None:
    result = CliRunner().invoke(main, ["verify", "--bogus"], prog_name="agentfootprint")
    assert result.stderr.startswith("Error: No such option"), result.stderr
    assert result.stderr.endswith(" (see 'agentfootprint verify --help')\n"), result.stderr
    nested = CliRunner().invoke(main, ["keys", "show"], prog_name="agentfootprint")
    assert nested.stderr == (
        "Error: Missing argument 'KEY' (see 'agentfootprint keys show --help')\n"
    ), nested.stderr


def test_a_group_given_nothing_prints_its_help() -> None:
    for args, listing in (
        ([], "Start here:"),
        (["keys"], "Commands:"),
        (["vault-key"], "Commands:"),
    ):
        result = invoke(args)
        assert listing in result.output, args  # the top group lists its commands by section
        assert "Traceback" not in result.output


# -- --origin ------------------------------------------------------------------------------

BAD_ORIGINS = {
    "empty": ("", "it is empty"),
    "a space": ("my log", "it holds a space"),
    "a tab": ("my\tlog", "it holds a space"),
    "a no-break space": ("my\u00a0log", "it holds a space"),
    "a plus": ("my+log", "it holds a '+'"),
    "a control character": ("my\x01log", "control character"),
    "a newline": ("my\nlog", "it holds a space"),
    "too long": ("x" * 1025, "more than 1024"),
}


@pytest.mark.parametrize("about", sorted(BAD_ORIGINS))
@pytest.mark.parametrize("command", ["checkpoint", "export"])
def test_a_bad_origin_is_refused_naming_it(world: Base, command: str, about: str) -> None:
    origin, why = BAD_ORIGINS[about]
    args = fill(
        ["checkpoint", "LOG", "--key", "KEY", "--origin", origin]
        if command == "checkpoint"
        else ["export", "LOG", "--run", "RUN", "--out", "OUT", "--key", "KEY", "--origin", origin],
        world.names,
    )
    before = snapshot(world.folder)
    result = invoke(args)
    check_refused(result)
    assert "--origin" in result.stderr and why in result.stderr, result.stderr
    if about != "too long":
        assert repr(origin) in result.stderr or repr(origin)[1:-1] in result.stderr
    assert snapshot(world.folder) == before


def test_a_good_origin_names_the_checkpoint(world: Base) -> None:
    names = world.names
    result = invoke(["checkpoint", names["LOG"], "--key", names["KEY"], "--origin", "ex.com/l"])
    assert result.exit_code == EXIT_OK, result.output
    assert result.stdout.splitlines()[0] == "ex.com/l"
    assert "\u2014 ex.com/l " in result.stdout
    (world.folder / "mine.txt").write_text(result.stdout, encoding="utf-8")
    checked = invoke(
        ["verify", names["LOG"], "--checkpoint", str(world.folder / "mine.txt"), "--key",
         names["PUB"]]
    )  # fmt: skip
    assert checked.exit_code == EXIT_OK, checked.output
    default = invoke(["checkpoint", names["LOG"], "--key", names["KEY"]])
    assert default.stdout.splitlines()[0] == "agentfootprint/log"


# -- verify --json: one JSON object, whatever happens -----------------------------------------


def json_document(result: Result) -> dict[str, Any]:
    """stdout is exactly one JSON object."""
    document = json.loads(result.stdout)
    assert isinstance(document, dict), result.stdout
    assert result.stdout.strip().startswith("{") and result.stdout.strip().endswith("}")
    return document


def test_verify_json_of_a_bundle_whose_framing_fails_is_one_json_object(world: Base) -> None:
    data = Path(world.names["BUNDLE"]).read_bytes()
    cut = world.folder / "cut.afp"
    cut.write_bytes(data[: len(data) // 2])
    result = invoke(["verify", str(cut), "--json"])
    assert result.exit_code == EXIT_INVALID, result.output
    document = json_document(result)
    assert document["runs"] == [] and document["exit"] == EXIT_INVALID
    assert document["error"]["code"] == "bundle"
    assert document["error"]["run_id"] is None and document["error"]["seq"] is None
    assert "truncated" in document["error"]["reason"]
    assert "INVALID" not in result.stdout and result.stderr == ""
    plain = invoke(["verify", str(cut)])  # without --json: the INVALID line, as before
    assert plain.exit_code == EXIT_INVALID and plain.stdout.startswith("INVALID")


@pytest.mark.parametrize(
    ("about", "args", "reason"),
    [
        ("a missing file", ["verify", "missing.db", "--json"], "does not exist"),
        ("not a log", ["verify", "CP", "--json"], "not an SQLite database"),
        ("a bad --key", ["verify", "LOG", "--json", "--key", "ed25519:x"], "ed25519"),
        ("a missing --checkpoint", ["verify", "LOG", "--json", "--checkpoint", "none", "--key",
                                    "PUB"], "does not exist"),
        ("--checkpoint without --key", ["verify", "LOG", "--json", "--checkpoint", "CP"],
         "--key"),
        ("an unknown run", ["verify", "LOG", "--json", "--run", "nosuchrun"], "nosuchrun"),
        ("an unknown option", ["verify", "LOG", "--json", "--bogus"], "--bogus"),
        ("a disclosures file of the wrong shape", ["verify", "LOG", "--json", "--disclosures",
                                                   "CP"], "disclosures"),
    ],
)  # fmt: skip
def test_verify_json_failures_are_one_json_object(
    world: Base, about: str, args: list[str], reason: str
) -> None:
    result = invoke(fill(args, world.names))
    assert result.exit_code == EXIT_USAGE, result.output
    document = json_document(result)
    assert document == {
        "runs": [],
        "exit": EXIT_USAGE,
        "error": {
            "code": "usage",
            "run_id": None,
            "seq": None,
            "reason": document["error"]["reason"],
        },
    }
    assert reason in document["error"]["reason"], document
    assert len(result.stderr.splitlines()) == 1 and result.stderr.startswith("Error: ")


def test_verify_json_success_is_still_the_verdicts(world: Base) -> None:
    result = invoke(["verify", world.names["LOG"], "--json"])
    assert result.exit_code == EXIT_OK, result.output
    document = json_document(result)
    assert document["exit"] == EXIT_OK and "error" not in document
    assert [run["outcome"] for run in document["runs"]] == ["VALID_UNSIGNED"]
