"""docs/seals.md runs as written: its python block, its console commands (each exit code as
the page says), the printed key and the statement example."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from agentfootprint.cli import EXIT_OK, main
from agentfootprint.seal import Ed25519Signer, build_statement

PAGE = Path(__file__).resolve().parents[2] / "docs" / "seals.md"


def _blocks(kind: str) -> list[str]:
    return re.findall(rf"```{kind}\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.S)


def _python_namespace() -> dict[str, Any]:
    block = _blocks("python")[0]
    namespace: dict[str, Any] = {}
    exec(compile(block, str(PAGE), "exec"), namespace)
    return namespace


def test_the_python_block_runs() -> None:
    namespace = _python_namespace()
    assert namespace["opened"] == namespace["facts"]


def test_the_statement_example_is_what_the_library_builds() -> None:
    statement, envelope = _blocks("json")
    assert json.loads(statement) == build_statement(_python_namespace()["facts"])
    assert sorted(json.loads(envelope)) == ["payload", "payloadType", "signatures"]


def test_the_printed_key_is_the_example_seed() -> None:
    (printed,) = _blocks("text")
    public = Ed25519Signer.from_seed(bytes(32)).public
    assert printed == f"public key: {public.text}\nkey id:     {public.key_id}\n"


def test_the_console_commands_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    block = _blocks("console")[0]
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    commands = [line[2:] for line in block.splitlines() if line.startswith("$ ")]
    assert len(commands) == 6
    for command in commands:
        line, _, comment = command.partition("  # ")
        expected = int(comment.split(":")[0].removeprefix("exit ")) if comment else EXIT_OK
        words = shlex.split(line)
        env = {}
        while "=" in words[0]:
            name, value = words.pop(0).split("=", 1)
            env[name] = value
        assert words[0] == "agentfootprint"
        result = runner.invoke(main, words[1:], env=env)
        assert result.exit_code == expected, (command, result.output)
        if comment:
            assert comment.split(": ", 1)[1] in result.output, (command, result.output)
        else:
            assert "public key: ed25519:" in result.output and "key id:" in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["seal.key", "sealed.key"]


def _run_console_after_section_7(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, console: int, count: int
) -> None:
    """Section 7's python block run in an empty folder, then console block ``console`` of
    the page: each command's exit code and the text its comment shows (``RUN_ID`` is the
    block's ``result.run_id``)."""
    python, block = _blocks("python")[1], _blocks("console")[console]
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {}
    exec(compile(python, str(PAGE), "exec"), namespace)
    commands = [line[2:] for line in block.splitlines() if line.startswith("$ ")]
    assert len(commands) == count
    runner = CliRunner()
    for command in commands:
        line, _, comment = command.partition("  # ")
        code, _, shown = comment.partition(": ")
        words = [namespace["result"].run_id if w == "RUN_ID" else w for w in shlex.split(line)]
        result = runner.invoke(main, words[1:])
        assert result.exit_code == int(code.removeprefix("exit ")), (command, result.output)
        assert shown in result.output, (command, result.output)


def test_sealing_and_verifying_runs_as_section_7_shows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _run_console_after_section_7(tmp_path, monkeypatch, console=1, count=5)


def test_a_bundle_proves_inclusion_as_section_8_shows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _run_console_after_section_7(tmp_path, monkeypatch, console=2, count=3)
