"""What every vector builder writes into its index: one entry per file, with the library's
whole-file verdicts (the builders of the pause, provenance and projection-4 sets share it)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import agentfootprint as af
from agentfootprint.exchange.transfer import open_log


@dataclass
class Entry:
    file: str
    about: str
    run: str
    code: str
    seq: int | None
    verdicts: list[list[Any]]


def verdicts(path: Path) -> list[list[Any]]:
    """Whole-file verification by the library (a database or a bundle): ``[run, outcome or
    code, seq]`` each, sorted."""
    out = []
    source = open_log(path)
    try:
        for run, result in af.Verifier(source).verify_all():
            if isinstance(result, af.VerificationError):
                out.append([run, result.code, result.seq])
            else:
                out.append([run, result.outcome.value, None])
    finally:
        source.close()
    return sorted(out, key=str)
