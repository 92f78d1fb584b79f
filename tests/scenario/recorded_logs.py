"""What the tests of logs recorded by an earlier build share (``tests/data/<set>/``: a file
of runs, ``runs.txt`` naming each, and the script that recorded them): the script loaded as
a module (its agents replay the runs), the runs by name, and a pristine copy of the file."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path
from types import ModuleType

DATA = Path(__file__).resolve().parents[1] / "data"


def maker(name: str, script: str) -> ModuleType:
    """``tests/data/<name>/<script>.py``, loaded (its ``RUNS`` and agent factories)."""
    spec = importlib.util.spec_from_file_location(script, DATA / name / f"{script}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def runs(name: str) -> dict[str, str]:
    """The run id of each recorded run, by its name in ``runs.txt``."""
    lines = (DATA / name / "runs.txt").read_text().splitlines()
    return {run_name: run_id for run_id, run_name in (line.split() for line in lines if line)}


def pristine_copy(source: Path, into: Path) -> Path:
    """A copy of ``source`` in ``into`` (a replay or a store opened for writing uses the copy;
    the data stays as recorded)."""
    copy = into / source.name
    shutil.copyfile(source, copy)
    return copy
