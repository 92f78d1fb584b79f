"""Run mypy over a snippet a user would write, the way the tests that check typed signatures
need it: with the project's config and cache (CI runs mypy before the tests, so only the
snippet is new), its own errors by line."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def mypy_errors(snippet: Path, text: str) -> tuple[int, dict[int, str], str]:
    """mypy's exit status over ``text`` written to ``snippet``, the snippet's own errors by
    line (by file name: mypy may print the path its cache recorded), and its whole output."""
    api = pytest.importorskip("mypy.api")
    snippet.write_text(text, encoding="utf-8")
    limit = sys.getrecursionlimit()  # mypy raises it for the whole process: put it back
    try:
        out, err, status = api.run(
            [
                "--config-file",
                os.fspath(ROOT / "pyproject.toml"),
                "--cache-dir",
                os.fspath(ROOT / ".mypy_cache"),
                "--no-error-summary",
                os.fspath(snippet),
            ]
        )
    finally:
        sys.setrecursionlimit(limit)
    errors = [line.split(": error: ", 1) for line in out.splitlines() if ": error: " in line]
    by_line = {
        int(where.rsplit(":", 1)[1]): message
        for where, message in errors
        if Path(where.rsplit(":", 1)[0]).name == snippet.name
    }
    return status, by_line, out + err
