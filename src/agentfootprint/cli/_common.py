"""What several commands share: opening a log to read, output files, formatting."""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import orjson

from agentfootprint.errors import FileError, UsageError
from agentfootprint.exchange.transfer import open_log as open_reading
from agentfootprint.local_files import check_regular, kind_of, open_regular, read_bounded
from agentfootprint.seal.note import MAX_NOTE_BYTES
from agentfootprint.store.base import same_file
from agentfootprint.store.sqlite import SQLITE_HEADER
from agentfootprint.store.urls import StoreLocation, is_store_url, parse_store_url, refusal
from agentfootprint.store.vault import DisclosureVault
from agentfootprint.store.vault_base import Vault

__all__ = [
    "DB",
    "INPUT_FILE",
    "TARGET_DB",
    "Database",
    "check_output",
    "db_file",
    "echo_json",
    "open_log",
    "open_vault_argument",
    "read_input",
    "short",
    "when",
    "write_output",
]

if TYPE_CHECKING:  # generic from click 8.4 on; the package supports click 8.1
    _PathType = click.ParamType[Path | StoreLocation]
else:
    _PathType = click.ParamType


#: what a database argument converts to: a file, or a PostgreSQL database's location
Database = Path | StoreLocation


def _regular_file(
    kind: _PathType, path: Path, param: click.Parameter | None, ctx: click.Context | None
) -> Path:
    """``path`` when it is a regular file, else ``kind``'s usage error saying what it is."""
    try:
        check_regular(path)
    except FileError as exc:
        kind.fail(str(exc), param, ctx)
    return path


class _Database(_PathType):
    """A database argument: a file path, or a ``sqlite:///PATH`` URL (percent-decoded;
    :mod:`agentfootprint.store.urls`), converted to the file's :class:`Path`, so that the
    commands (and :func:`check_output`, comparing an output with its inputs) see the real
    file; or a ``postgresql://`` URL, converted to its :class:`StoreLocation` (printed
    without its password). ``memory:`` and every other URL are click usage errors (exit 2),
    and so is a file that must exist and does not, or a folder, with ``click.Path``'s own
    messages.

    A URL's ``durability=`` is checked but does not apply here: reading never writes, and a
    command that writes (import) writes its one transaction at full durability.
    """

    name = "db"

    def __init__(self, *, exists: bool, memory_refusal: str) -> None:
        self._file = click.Path(exists=exists, dir_okay=False, path_type=Path)
        self.memory_refusal = memory_refusal

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> Database:
        if isinstance(value, StoreLocation):
            return value
        if not is_store_url(value):
            return self._regular(self._file.convert(value, param, ctx), param, ctx)
        refused = refusal(value)
        if refused is not None:
            self.fail(refused, param, ctx)
        location = parse_store_url(value)
        if location.kind == "postgresql":
            return location
        if location.kind == "memory":
            self.fail(self.memory_refusal, param, ctx)
        assert location.path is not None
        try:
            return self._regular(self._file.convert(location.path, param, ctx), param, ctx)
        except click.BadParameter as exc:
            self.fail(f"{exc.message} (the file of {value})", param, ctx)

    def _regular(
        self, path: Path, param: click.Parameter | None, ctx: click.Context | None
    ) -> Path:
        """``path`` when it is missing (a target) or a regular file: a FIFO would block
        SQLite's open for ever, a device would never end."""
        return _regular_file(self, path, param, ctx) if os.path.lexists(path) else path

    def shell_complete(
        self, ctx: click.Context, param: click.Parameter, incomplete: str
    ) -> list[Any]:
        return self._file.shell_complete(ctx, param, incomplete)


class InputFile(_PathType):
    """A file argument that is only read (a key, a checkpoint, a proof, a disclosures
    file): it must exist and be a regular file (a FIFO would block the read, a device
    never end), refused at once with a usage error saying what it is instead. The read
    itself is :func:`read_input`, bounded."""

    name = "file"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Path:
        path = value if isinstance(value, Path) else Path(os.fsdecode(value))
        return _regular_file(self, path, param, ctx)

    def shell_complete(
        self, ctx: click.Context, param: click.Parameter, incomplete: str
    ) -> list[Any]:
        return click.Path(dir_okay=False).shell_complete(ctx, param, incomplete)


#: an existing regular file that a command only reads
INPUT_FILE = InputFile()

#: an existing file, or a sqlite:///PATH URL naming one (a folder, a missing file,
#: memory: or another URL is a click usage error, exit 2)
DB = _Database(
    exists=True,
    memory_refusal="memory: is a new, empty in-memory store: there is nothing in it to "
    "read; name a database file (a path or sqlite:///PATH)",
)

#: a database to write into (created if missing): a path or a sqlite:///PATH URL
TARGET_DB = _Database(
    exists=False,
    memory_refusal="memory: is an in-memory store that ends with this command: name a "
    "database file to write (a path or sqlite:///PATH)",
)


def db_file(value: str, what: str) -> Database:
    """The file a database argument names when it is not parsed by click (a path, or a
    ``sqlite:///PATH`` URL), or a PostgreSQL database's location; ``memory:`` and other URLs
    are a :class:`UsageError` naming ``what`` (a URL itself is not echoed: it may hold a
    password). The caller checks that a file is one."""
    if not is_store_url(value):
        return Path(value)
    reason = refusal(value)
    location = parse_store_url(value) if reason is None else None
    if location is not None and location.kind == "postgresql":
        return location
    if location is not None and location.path is not None:
        return Path(location.path)
    raise UsageError(
        f"{what}: {reason or DB.memory_refusal}",
        option=what,
    )


@contextlib.contextmanager
def open_log(path: Database | str) -> Iterator[Any]:
    """A database (opened read-only: never created, migrated or changed) or an export
    bundle, read the same way (``read``, ``runs``, ``run_ids``, ``index_entries``); a path
    or a store URL (:func:`agentfootprint.exchange.transfer.open_log`)."""
    source = open_reading(path)
    with contextlib.closing(source):
        yield source


def open_vault_argument(vault: Database, *, readonly: bool = False) -> Vault:
    """The vault a ``VAULT`` argument names: a :class:`DisclosureVault` file (``readonly``,
    or else an existing one: a command never creates a vault), or a
    :class:`~agentfootprint.store.postgres_vault.PostgresVault`, whose URL names its master
    key file (``?key_file=PATH``)."""
    if isinstance(vault, Path):
        return (
            DisclosureVault(vault, readonly=True)
            if readonly
            else DisclosureVault(vault, create=False)
        )
    from agentfootprint.store.postgres_vault import PostgresVault

    assert vault.postgres is not None
    return PostgresVault(vault.postgres, readonly=readonly, create=False)


def check_output(out: Path, *inputs: Database) -> None:
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
        if isinstance(given, Path) and same_file(out, given):
            raise UsageError(f"--out {out} is the input {given}: refusing to overwrite it")
    kind = kind_of(out.stat().st_mode)
    if kind is not None:  # a FIFO, a device: never replaced by the file written
        raise FileError(
            f"--out {out} is {kind}, not a regular file: name a new file or one to replace",
            path=str(out),
        )
    with contextlib.suppress(OSError), open_regular(out, "--out") as handle:
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


def short(value: Any, limit: int | None = 72) -> str:
    """``value`` as one line of JSON, cut at ``limit`` characters (None: whole)."""
    text = orjson.dumps(value).decode()
    return text if limit is None or len(text) <= limit else text[: limit - 1] + "…"


def echo_json(document: Any, *, sort_keys: bool = False) -> None:
    option = orjson.OPT_INDENT_2 | (orjson.OPT_SORT_KEYS if sort_keys else 0)
    click.echo(orjson.dumps(document, option=option).decode())


def read_input(path: Path, what: str, noun: str, limit: int = MAX_NOTE_BYTES) -> bytes:
    """The bytes of an input file (a signed note, a proof, a disclosures file): a regular
    file, refused above ``limit`` (the most a ``noun`` may be) before it is read."""
    return read_bounded(path, what, limit, noun=noun)
