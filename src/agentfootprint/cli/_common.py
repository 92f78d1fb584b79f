"""What several commands share: opening a log to read, output files, formatting."""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import orjson

from agentfootprint.errors import FileError, UsageError
from agentfootprint.store.base import same_file
from agentfootprint.store.sqlite import SQLITE_HEADER
from agentfootprint.store.transfer import open_log as open_reading
from agentfootprint.verify.note import MAX_NOTE_BYTES

__all__ = [
    "DB",
    "check_output",
    "echo_json",
    "open_log",
    "short",
    "when",
    "write_output",
]

#: an existing file (a folder or a missing path is a click usage error, exit 2)
DB = click.Path(exists=True, dir_okay=False, path_type=Path)


@contextlib.contextmanager
def open_log(path: Path) -> Iterator[Any]:
    """A database (opened read-only: never created, migrated or changed) or an export
    bundle, read the same way (``read``, ``runs``, ``run_ids``, ``index_entries``)."""
    source = open_reading(path)
    with contextlib.closing(source):
        yield source


def check_output(out: Path, *inputs: Path) -> None:
    """Refuse an output path that would destroy evidence (an input of the command, or an
    existing SQLite file: a log or a vault), a folder, or one in a missing folder."""
    if out.is_dir():
        raise FileError(f"--out {out} is a folder: name the file to write", path=str(out))
    folder = out.parent if str(out.parent) else Path(".")
    if not folder.is_dir():
        raise FileError(f"--out {out}: the folder {folder} does not exist", path=str(out))
    if not out.exists():
        return
    for given in inputs:
        if same_file(out, given):
            raise UsageError(f"--out {out} is the input {given}: refusing to overwrite it")
    with contextlib.suppress(OSError), out.open("rb") as handle:
        if handle.read(len(SQLITE_HEADER)) == SQLITE_HEADER:
            raise FileError(
                f"--out {out} is an SQLite database (a log or a vault?): refusing to "
                "overwrite it; choose another file name",
                path=str(out),
            )


def write_output(out: Path, data: bytes) -> None:
    """Write ``data`` to ``out`` whole or not at all (a temporary file beside it, renamed;
    removed again if anything fails)."""
    folder = out.parent if str(out.parent) else Path(".")
    handle, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".partial", dir=folder)
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
        os.replace(tmp, out)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def when(ts: object) -> str:
    """A millisecond timestamp as ISO 8601 UTC (as it is, if it is not one)."""
    if isinstance(ts, bool) or not isinstance(ts, int):
        return repr(ts)
    try:
        return dt.datetime.fromtimestamp(ts / 1000, tz=dt.UTC).isoformat(timespec="milliseconds")
    except (OverflowError, OSError, ValueError):
        return str(ts)


def short(value: Any, limit: int = 72) -> str:
    text = orjson.dumps(value).decode()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def echo_json(document: Any, *, sort_keys: bool = False) -> None:
    option = orjson.OPT_INDENT_2 | (orjson.OPT_SORT_KEYS if sort_keys else 0)
    click.echo(orjson.dumps(document, option=option).decode())


def read_small(path: Path, what: str, limit: int = MAX_NOTE_BYTES) -> bytes:
    """The bytes of a small input file (a signed note, a proof), refused above ``limit``
    before it is read."""
    if path.stat().st_size > limit:
        raise UsageError(f"{what} {path} is larger than a {what.strip('-')} may be")
    return path.read_bytes()
