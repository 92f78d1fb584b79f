"""The README's quickstart runs as written (docs move with code)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


def test_quickstart_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    assert blocks, "README has no python block"
    monkeypatch.chdir(tmp_path)
    exec(compile(blocks[0], "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert "2 + 3 = 5." in out and "4 + 4 = 8. True" in out
    assert "Outcome.VALID_UNSIGNED" in out
    assert (tmp_path / "runs.db").exists()


def test_readme_starts_with_the_two_commands() -> None:
    head = README.read_text(encoding="utf-8")[:600]
    assert "agentfootprint demo" in head and "pytest" in head
