"""The arguments of the read side: a log given as a source or a path, run ids, indexes.

Every audit entry point takes its log as a source object (a store, a bundle, anything with
``read``) or as a path: a path is opened for reading only (a bundle as a bundle, anything
else as a SQLite log with ``readonly=True``, so the file is never changed) and closed when
the call returns. Each bad argument is refused with a :class:`UsageError` (a
:class:`FileError` for a file that cannot be used) whose message and ``option`` name it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

from agentfootprint.errors import FileError, RunNotFoundError, UsageError
from agentfootprint.exchange.transfer import open_log
from agentfootprint.logformat.canonical import parse
from agentfootprint.store.urls import is_store_url, parse_store_url
from agentfootprint.verify.verifier import RowSource

__all__ = [
    "body_object",
    "check_index",
    "check_run_id",
    "is_source",
    "naming_run",
    "opened",
    "renamed",
]


def body_object(raw: object) -> dict[str, Any]:
    """A row body as an object, for the listings that do not verify (``runs``, ``runs
    --pending``, ``scan``): ``{}`` when it is not bytes, not JSON or not an object."""
    if not isinstance(raw, bytes):
        return {}
    try:
        value = parse(raw)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def is_source(value: Any) -> bool:
    """Whether ``value`` reads runs (a store, a bundle source)."""
    return not isinstance(value, str | os.PathLike) and callable(getattr(value, "read", None))


def renamed(exc: FileError, argument: str) -> FileError:
    """``exc`` (same type) with the argument it came from named."""
    if exc.option == argument:
        return exc
    return type(exc)(f"{argument}: {exc}", path=exc.path, option=argument)


@contextlib.contextmanager
def opened(source: Any, argument: str = "source") -> Iterator[RowSource]:
    """``source`` as a row source: as it is, or opened from a path (read only) and closed on
    exit."""
    if is_source(source):
        yield source
        return
    if not isinstance(source, str | os.PathLike):
        raise UsageError(
            f"{argument}: expected a log (a store, a BundleSource) or the path of a database "
            f"or bundle, got {type(source).__name__}",
            option=argument,
        )
    path = os.fspath(source)
    if not isinstance(path, str) or not path:
        raise UsageError(f"{argument}: expected a file path, got {source!r}", option=argument)
    if is_store_url(path):
        location = parse_store_url(path, option=argument)
        if location.kind == "memory":
            raise UsageError(
                f"{argument}: memory: holds no runs to read: name a database or bundle",
                option=argument,
            )
        if location.kind == "postgresql":  # a database, opened read-only by open_log
            with _opened_log(location, argument) as reader:
                yield reader
            return
        assert location.path is not None
        path = location.path
    if not os.path.exists(path):
        raise FileError(
            f"{argument}: no such file {path} (name a database or bundle that exists)",
            path=path,
            option=argument,
        )
    if os.path.isdir(path):
        raise FileError(
            f"{argument}: {path} is a folder, not a database or bundle", path=path, option=argument
        )
    with _opened_log(path, argument) as reader:
        yield reader


@contextlib.contextmanager
def _opened_log(where: Any, argument: str) -> Iterator[Any]:
    """:func:`~agentfootprint.exchange.transfer.open_log` of a file path or a parsed location,
    its errors naming ``argument``; closed on exit."""
    try:
        reader: Any = open_log(where, option=argument)
    except FileError as exc:
        raise renamed(exc, argument) from exc
    except OSError as exc:
        raise FileError(
            f"{argument}: cannot read {where}: {exc.strerror or exc}",
            path=str(where),
            option=argument,
        ) from exc
    try:
        yield reader
    finally:
        close = getattr(reader, "close", None)
        if callable(close):
            close()


@contextlib.contextmanager
def naming_run(argument: str = "run_id") -> Iterator[None]:
    """A run the call was asked about and the log does not hold: the message names the
    argument (the run's ancestors are checked by verification, which says so itself)."""
    try:
        yield
    except RunNotFoundError as exc:
        if str(exc).startswith(f"{argument}: "):
            raise
        raise RunNotFoundError(f"{argument}: {exc}") from exc


def check_run_id(run_id: Any, argument: str = "run_id") -> str:
    """A run id must be a non-empty str (an unknown one is the store's RunNotFoundError)."""
    if not isinstance(run_id, str) or not run_id:
        raise UsageError(
            f"{argument}: expected a run id (a non-empty str), got {run_id!r}", option=argument
        )
    return run_id


def check_index(value: Any, argument: str, minimum: int, what: str) -> int:
    """An integer index ``>= minimum`` (never a bool)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise UsageError(
            f"{argument} ({what}) must be an integer >= {minimum}, got {value!r}",
            option=argument,
        )
    return value
