"""The `replay`, `diff` and `state` commands: help text, outcomes and exit codes."""

from __future__ import annotations

import dataclasses
import shutil
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

import agentfootprint as af
from agentfootprint.agent.demo import DEMO_QUESTIONS, build_demo_agent
from agentfootprint.cli import EXIT_DIFFERENT, EXIT_OK, EXIT_USAGE, main

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "golden" / "demo.db"
MODULE = "cli_replay_factories"

FACTORIES = textwrap.dedent(
    """
    import dataclasses

    from agentfootprint.runtime.mock_provider import MockProvider
    from agentfootprint.agent.demo import build_demo_agent


    def demo():
        return build_demo_agent(None)


    def edited():
        agent = build_demo_agent(None)
        system = ("You are a terse travel helper.", *agent.config.system[1:])
        agent.config = dataclasses.replace(agent.config, system=system)
        return agent


    def into_file():
        return build_demo_agent("replays.db")


    def forked():
        return build_demo_agent(None, provider=MockProvider(["A different final answer."]))


    def redacted():
        from agentfootprint.store.redaction import conversation_redaction

        return build_demo_agent(None, redact=conversation_redaction())


    def not_an_agent():
        return "an agent"


    def broken():
        raise RuntimeError("the factory failed")


    class Nested:
        build = staticmethod(demo)


    NOT_CALLABLE = 3
    """
)


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """tmp_path as the current directory, holding the factories module and a golden copy."""
    (tmp_path / f"{MODULE}.py").write_text(FACTORIES, encoding="utf-8")
    shutil.copyfile(GOLDEN, tmp_path / "golden.db")
    monkeypatch.chdir(tmp_path)
    path_before = list(sys.path)
    yield tmp_path
    sys.modules.pop(MODULE, None)
    assert sys.path == path_before  # the command took the current directory off again


@pytest.fixture(scope="module")
def runs() -> list[str]:
    """The golden runs' ids (read in place: a read-only store never writes)."""
    with af.SqliteStore(GOLDEN, readonly=True) as store:
        return [info.run_id for info in store.runs()]


def invoke(runner: CliRunner, *args: str) -> Any:
    return runner.invoke(main, list(args))


@pytest.mark.parametrize(
    ("command", "words"),
    [
        ([], ["replay", "diff", "state"]),
        (
            ["replay"],
            [
                "RUN_ID",
                "--agent",
                "MODULE:FACTORY",
                "current directory",
                "--until",
                "--disclosures",
                "VAULT",
                "--json",
                "no model call",
                "export bundle",
                "0  identical",
                "1  diverged",
                "2  usage",
            ],
        ),
        (
            ["diff"],
            [
                "DB_A RUN_A [DB_B] RUN_B",
                "--json",
                "--limit",
                "call by call",
                "0  identical",
                "1  different",
                "2  usage",
            ],
        ),
        (["state"], ["RUN_ID", "--at", "COMMIT", "-1", "--path", "KEY", "sorted keys", "Exit 2"]),
    ],
)
def test_help_is_accurate(runner: CliRunner, command: list[str], words: list[str]) -> None:
    result = runner.invoke(main, [*command, "--help"])
    assert result.exit_code == 0
    for word in words:
        assert word in result.output, word


# -- replay -------------------------------------------------------------------------------


def test_an_unchanged_agent_replays_identically(
    workdir: Path, runner: CliRunner, runs: list[str]
) -> None:
    for run_id, calls in zip(runs, (4, 2), strict=True):
        result = invoke(runner, "replay", "golden.db", run_id, "--agent", f"{MODULE}:demo")
        assert result.exit_code == EXIT_OK, result.output
        assert result.output.startswith(
            f"REPLAYED  run {run_id}: {calls} calls identical (replay run "
        )
    nested = invoke(runner, "replay", "golden.db", runs[0], "--agent", f"{MODULE}:Nested.build")
    assert nested.exit_code == EXIT_OK, nested.output


def test_an_edited_system_prompt_diverges_with_its_diff(
    workdir: Path, runner: CliRunner, runs: list[str]
) -> None:
    result = invoke(runner, "replay", "golden.db", runs[1], "--agent", f"{MODULE}:edited")
    assert result.exit_code == EXIT_DIFFERENT, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("DIVERGED  call 0: system piece 0  original ")
    assert "replay " in lines[0] and "…" in lines[0]
    assert "call 0: system piece 0 changed" in lines[1]
    assert f"run {runs[1]}, replay run " in lines[2]
    assert "    --- original call 0 system[0]" in lines
    assert '    -  "text": "You are a concise travel helper."' in lines
    assert '    +  "text": "You are a terse travel helper."' in lines


def test_replay_json(workdir: Path, runner: CliRunner, runs: list[str]) -> None:
    same = invoke(runner, "replay", "golden.db", runs[0], "--agent", f"{MODULE}:demo", "--json")
    assert same.exit_code == EXIT_OK
    document = orjson.loads(same.output)
    assert document["outcome"] == "identical" and document["run"] == runs[0]
    assert document["calls_checked"] == 4 and document["divergence"] is None
    assert "368.00 EUR" in document["answer"]

    diverged = invoke(
        runner, "replay", "golden.db", runs[0], "--agent", f"{MODULE}:edited", "--json"
    )
    assert diverged.exit_code == EXIT_DIFFERENT
    document = orjson.loads(diverged.output)
    assert document["outcome"] == "diverged" and document["replay_run"]
    found = document["divergence"]
    assert (found["call"], found["kind"], found["position"]) == (0, "system", 0)
    assert len(found["expected"]) == len(found["actual"]) == 64
    assert found["diff"].startswith("--- original call 0 system[0]")


def test_replay_records_into_the_agents_store(
    workdir: Path, runner: CliRunner, runs: list[str]
) -> None:
    result = invoke(runner, "replay", "golden.db", runs[1], "--agent", f"{MODULE}:into_file")
    assert result.exit_code == EXIT_OK, result.output
    store = af.SqliteStore(workdir / "replays.db")
    try:
        ids = [info.run_id for info in store.runs()]
        replay_run = result.output.rsplit("replay run ", 1)[1].strip(" )\n")
        assert ids == [runs[0], replay_run]  # the parent came along, exactly as recorded
        source = af.SqliteStore(workdir / "golden.db")
        assert af.same_recording(source, runs[1], store, replay_run)
        source.close()
    finally:
        store.close()
    # and the replay is a run like any other: diff it against the original
    same = invoke(runner, "diff", "golden.db", runs[1], "replays.db", replay_run)
    assert same.exit_code == EXIT_OK, same.output
    assert same.output.startswith("IDENTICAL ")


def test_replay_until_forks(workdir: Path, runner: CliRunner, runs: list[str]) -> None:
    result = invoke(
        runner, "replay", "golden.db", runs[0], "--agent", f"{MODULE}:forked", "--until", "3"
    )
    assert result.exit_code == EXIT_OK, result.output
    assert result.output.startswith(f"FORKED    run {runs[0]} at call 3: 3 calls identical")
    assert "then 1 live" in result.output
    assert "answer: A different final answer." in result.output


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("cli_replay_factories", "takes MODULE:FACTORY"),
        (f"{MODULE}:", "takes MODULE:FACTORY"),
        (":demo", "takes MODULE:FACTORY"),
        ("no_such_module_here:demo", "cannot import 'no_such_module_here'"),
        (f"{MODULE}:absent", "has no attribute 'absent'"),
        (f"{MODULE}:NOT_CALLABLE", "is not callable"),
        (f"{MODULE}:not_an_agent", "must return an agentfootprint Agent, it returned str"),
        (f"{MODULE}:broken", "the factory raised RuntimeError: the factory failed"),
    ],
)
def test_bad_factories_are_usage_errors(
    workdir: Path, runner: CliRunner, runs: list[str], spec: str, message: str
) -> None:
    result = invoke(runner, "replay", "golden.db", runs[0], "--agent", spec)
    assert result.exit_code == EXIT_USAGE, result.output
    assert message in result.output


def test_replay_refuses_unknown_runs_and_files(workdir: Path, runner: CliRunner) -> None:
    unknown = invoke(runner, "replay", "golden.db", "nope", "--agent", f"{MODULE}:demo")
    assert unknown.exit_code == EXIT_USAGE and "no run 'nope'" in unknown.output
    no_file = invoke(runner, "replay", "absent.db", "nope", "--agent", f"{MODULE}:demo")
    assert no_file.exit_code == EXIT_USAGE
    no_agent = invoke(runner, "replay", "golden.db", "nope")
    assert no_agent.exit_code == EXIT_USAGE and "--agent" in no_agent.output


def test_replay_from_an_export_bundle(workdir: Path, runner: CliRunner, runs: list[str]) -> None:
    store = af.SqliteStore(workdir / "golden.db")
    af.export_runs(store, [runs[1]], workdir / "demo.afp")
    store.close()
    result = invoke(runner, "replay", "demo.afp", runs[1], "--agent", f"{MODULE}:demo")
    assert result.exit_code == EXIT_OK, result.output
    assert "REPLAYED  run" in result.output


# -- diff ---------------------------------------------------------------------------------


@pytest.fixture
def edited_db(workdir: Path) -> tuple[Path, str]:
    """A live (not replayed) first turn of the demo agent with an edited system prompt."""
    agent = build_demo_agent(workdir / "edited.db")
    system = ("You are a terse travel helper.", *agent.config.system[1:])
    agent.config = dataclasses.replace(agent.config, system=system)
    run_id = agent.run_sync(DEMO_QUESTIONS[0]).run_id
    agent.close()
    return workdir / "edited.db", run_id


def test_diff_exit_codes_and_output(
    workdir: Path, runner: CliRunner, runs: list[str], edited_db: tuple[Path, str]
) -> None:
    same = invoke(runner, "diff", "golden.db", runs[0], runs[0])
    assert same.exit_code == EXIT_OK and same.output.startswith("IDENTICAL ")

    db, edited = edited_db
    different = invoke(runner, "diff", "golden.db", runs[0], str(db), edited)
    assert different.exit_code == EXIT_DIFFERENT, different.output
    lines = different.output.splitlines()
    assert lines[0] == (
        f"DIFFERENT run {runs[0]} (4 calls) and run {edited} (4 calls): 4 differences"
    )
    assert sum(line.startswith("  call ") and " system[0]  A " in line for line in lines) == 4
    assert "    --- A call 0 system[0]" in lines and "    +++ B call 0 system[0]" in lines
    assert '    +  "text": "You are a terse travel helper."' in lines

    two_turns = invoke(runner, "diff", "golden.db", runs[0], runs[1])
    assert two_turns.exit_code == EXIT_DIFFERENT
    assert "  calls: run A made 4 calls, run B 2" in two_turns.output


def test_diff_json_and_limit(
    workdir: Path, runner: CliRunner, runs: list[str], edited_db: tuple[Path, str]
) -> None:
    db, edited = edited_db
    result = invoke(runner, "diff", "golden.db", runs[0], str(db), edited, "--json")
    assert result.exit_code == EXIT_DIFFERENT
    document = orjson.loads(result.output)
    assert document["identical"] is False
    assert (document["run_a"], document["run_b"]) == (runs[0], edited)
    assert [(d["call"], d["kind"], d["position"]) for d in document["differences"]] == [
        (k, "system", 0) for k in range(4)
    ]
    limited = invoke(
        runner, "diff", "golden.db", runs[0], str(db), edited, "--json", "--limit", "2"
    )
    assert len(orjson.loads(limited.output)["differences"]) == 2
    same = invoke(runner, "diff", "golden.db", runs[1], runs[1], "--json")
    assert same.exit_code == EXIT_OK and orjson.loads(same.output)["identical"] is True
    assert invoke(runner, "diff", "golden.db", runs[0], runs[1], "--limit", "0").exit_code == 2


@pytest.mark.parametrize(
    "args",
    [
        ["golden.db", "RUN"],  # too few
        ["golden.db", "a", "golden.db", "b", "c"],  # too many
        ["golden.db", "RUN", "absent.db", "RUN"],  # DB_B missing
        ["golden.db", "nope", "nope"],  # unknown runs
        ["absent.db", "a", "b"],
    ],
)
def test_diff_usage_errors(workdir: Path, runner: CliRunner, args: list[str]) -> None:
    assert invoke(runner, "diff", *args).exit_code == EXIT_USAGE


# -- state --------------------------------------------------------------------------------


def test_state_at_a_commit(workdir: Path, runner: CliRunner, runs: list[str]) -> None:
    start = invoke(runner, "state", "golden.db", runs[0], "--at", "-1")
    assert start.exit_code == EXIT_OK and orjson.loads(start.output) == {}

    seeded = invoke(runner, "state", "golden.db", runs[0], "--at", "0")
    assert seeded.exit_code == EXIT_OK
    state = orjson.loads(seeded.output)
    assert state["user_message"] == DEMO_QUESTIONS[0]
    keys = [line.split('"')[1] for line in seeded.output.splitlines() if line.startswith('  "')]
    assert keys == sorted(keys)  # pretty, sorted keys

    one = invoke(runner, "state", "golden.db", runs[0], "--at", "0", "--path", "user_message")
    assert one.exit_code == EXIT_OK and orjson.loads(one.output) == DEMO_QUESTIONS[0]

    # a continued run starts from its parent's final state
    inherited = invoke(
        runner, "state", "golden.db", runs[1], "--at", "-1", "--path", "final_answer"
    )
    assert inherited.exit_code == EXIT_OK and "368.00 EUR" in orjson.loads(inherited.output)
    store = af.SqliteStore(workdir / "golden.db")
    expected = af.state_at(store, runs[1], 3)
    store.close()
    shown = invoke(runner, "state", "golden.db", runs[1], "--at", "3")
    assert orjson.loads(shown.output) == expected


def test_state_refuses_unknown_runs_commits_and_keys(
    workdir: Path, runner: CliRunner, runs: list[str]
) -> None:
    unknown_run = invoke(runner, "state", "golden.db", "nope", "--at", "0")
    assert unknown_run.exit_code == EXIT_USAGE and "nope" in unknown_run.output
    unknown_commit = invoke(runner, "state", "golden.db", runs[0], "--at", "999")
    assert unknown_commit.exit_code == EXIT_USAGE and "commit 999 does not exist" in (
        unknown_commit.output
    )
    too_low = invoke(runner, "state", "golden.db", runs[0], "--at", "-2")
    assert too_low.exit_code == EXIT_USAGE
    no_key = invoke(runner, "state", "golden.db", runs[0], "--at", "0", "--path", "nope")
    assert no_key.exit_code == EXIT_USAGE and "no key 'nope'" in no_key.output
    assert "user_message" in no_key.output  # the keys there are are listed
    missing_at = invoke(runner, "state", "golden.db", runs[0])
    assert missing_at.exit_code == EXIT_USAGE and "--at" in missing_at.output


def test_state_from_a_bundle(workdir: Path, runner: CliRunner, runs: list[str]) -> None:
    store = af.SqliteStore(workdir / "golden.db")
    af.export_runs(store, [runs[1]], workdir / "demo.afp")
    store.close()
    result = invoke(runner, "state", "demo.afp", runs[1], "--at", "0", "--path", "user_message")
    assert result.exit_code == EXIT_OK and orjson.loads(result.output) == DEMO_QUESTIONS[1]


def test_replay_of_a_redacted_run_with_its_vault(runner: CliRunner, workdir: Path) -> None:
    """Under conversation_redaction the replay needs the original's vault: without it the
    command says so (exit 1), with it every call is identical (exit 0); the vault is read."""
    agent = build_demo_agent(
        "redacted.db", redact=af.conversation_redaction(), disclosures="redacted.vault.db"
    )
    first = agent.run_sync(DEMO_QUESTIONS[0])
    agent.close()
    vault_before = (workdir / "redacted.vault.db").read_bytes()
    replay = ["replay", "redacted.db", first.run_id, "--agent", f"{MODULE}:redacted"]
    without = invoke(runner, *replay)
    assert without.exit_code == EXIT_DIFFERENT, without.output
    assert "DIVERGED" in without.output and "redacted" in without.output
    assert "--disclosures VAULT" in without.output
    with_vault = invoke(runner, *replay, "--disclosures", "redacted.vault.db", "--json")
    assert with_vault.exit_code == EXIT_OK, with_vault.output
    outcome = orjson.loads(with_vault.output)
    assert (outcome["outcome"], outcome["calls_checked"]) == ("identical", 4)
    assert outcome["answer"] == "<redacted>"  # opened from the vault: never printed
    assert (workdir / "redacted.vault.db").read_bytes() == vault_before
    missing = invoke(runner, *replay, "--disclosures", "absent.db")
    assert missing.exit_code == EXIT_USAGE and "absent.db" in missing.output


def test_replay_of_a_log_that_does_not_verify_is_refused(
    runner: CliRunner, workdir: Path, runs: list[str]
) -> None:
    from agentfootprint.testing.tamper import read_rows, tampering

    with tampering(workdir / "golden.db") as conn:
        row = next(r for r in read_rows(conn, runs[0]) if r.type == "write")
        conn.execute(
            "UPDATE events SET body = ? WHERE run_id = ? AND seq = ?",
            (row.body.replace(b"}", b" }", 1), runs[0], row.seq),
        )
    result = invoke(runner, "replay", "golden.db", runs[0], "--agent", f"{MODULE}:demo")
    assert result.exit_code == 1, result.output
    assert result.output.startswith("INVALID") and f"seq {row.seq}" in result.output
    as_json = invoke(runner, "replay", "golden.db", runs[0], "--agent", f"{MODULE}:demo", "--json")
    assert as_json.exit_code == 1
    outcome = orjson.loads(as_json.output)
    assert (outcome["outcome"], outcome["seq"], outcome["replay_run"]) == ("invalid", row.seq, None)
