"""The one way this library opens a file it is handed to read: a regular file, read under a
size bound.

A path named by a user may be anything: a named pipe (FIFO) whose ``open`` blocks until a
writer appears, a device such as ``/dev/zero`` that never ends, a folder, a socket. Every
input file (key files, checkpoints, consistency proofs, disclosures files, bundles, SQLite
databases, vault master keys) is therefore opened here without blocking (``O_NONBLOCK``:
opening a FIFO returns at once) and checked to be a regular file on the open descriptor
before one byte is read, so a file swapped for a pipe between a check and the open is
caught too. SQLite opens a database by its path: :func:`check_regular` runs just before it.

Whole-file reads are bounded (:func:`read_bounded`): the file's size is checked before it
is read, and never more than the bound plus one byte is read, so a file that grows while
it is read is refused as well. The bound of each kind of file (docs/log-format.md section
9.6): key files ``seal.signer.MAX_KEY_FILE_BYTES``, checkpoints ``note.MAX_NOTE_BYTES``, and
the two below; a bundle is read a line at a time, each line bounded (``limits``).
"""

from __future__ import annotations

import contextlib
import io
import os
import stat
from pathlib import Path
from typing import Final

from agentfootprint.errors import FileError

__all__ = [
    "MAX_DISCLOSURES_BYTES",
    "MAX_PROOF_BYTES",
    "check_regular",
    "kind_of",
    "open_regular",
    "read_bounded",
]

#: Largest consistency proof file: RFC 9162 proofs hold at most 63 hashes (about 2.8 KB
#: as the proof file writes them); the bound leaves room and refuses anything else.
MAX_PROOF_BYTES: Final = 64 * 1024
#: Largest disclosures file (``disclose --out``): four event bodies' worth
#: (``limits.MAX_BODY_BYTES`` each); ``disclose`` refuses to write a larger one.
MAX_DISCLOSURES_BYTES: Final = 256 * 1024 * 1024

#: ``O_NONBLOCK``: open a FIFO without waiting for a writer; ``O_NOCTTY``: a terminal
#: device never becomes the controlling terminal (both absent on Windows)
_OPEN_FLAGS: Final = (
    os.O_RDONLY
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_NOCTTY", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_BINARY", 0)
)


def kind_of(mode: int) -> str | None:
    """What a file of ``mode`` is, in words, when it is not a regular file (None when it
    is one)."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _label(path: Path, what: str) -> str:
    return f"{what} {path}" if what else str(path)


def _not_regular(path: Path, what: str, kind: str, error: type[FileError]) -> FileError:
    return error(
        f"{_label(path, what)} is {kind}, not a regular file: name a regular file (a pipe or "
        "a device may block or never end; copy what it holds to a file first)",
        path=str(path),
    )


def _os_error(exc: OSError, path: Path, what: str, error: type[FileError]) -> FileError:
    if isinstance(exc, FileNotFoundError):
        return error(f"{_label(path, what)} does not exist", path=str(path))
    if isinstance(exc, IsADirectoryError):
        return _not_regular(path, what, "a folder", error)
    if isinstance(exc, PermissionError):
        return error(f"{_label(path, what)} cannot be read: permission denied", path=str(path))
    reason = exc.strerror or type(exc).__name__
    return error(f"{_label(path, what)} cannot be read: {reason}", path=str(path))


def check_regular(
    path: str | os.PathLike[str], what: str = "", *, error: type[FileError] = FileError
) -> os.stat_result:
    """The status of ``path`` when it is an existing regular file (a symbolic link is
    followed); ``error`` (a :class:`FileError`) saying what it is otherwise. For openers
    that take a path (SQLite): check just before handing it over."""
    where = Path(path)
    try:
        info = os.stat(where)
    except OSError as exc:
        raise _os_error(exc, where, what, error) from None
    kind = kind_of(info.st_mode)
    if kind is not None:
        raise _not_regular(where, what, kind, error)
    return info


def open_regular(
    path: str | os.PathLike[str],
    what: str = "",
    *,
    error: type[FileError] = FileError,
    buffer_size: int = io.DEFAULT_BUFFER_SIZE,
) -> io.BufferedReader:
    """``path`` opened for reading (binary, buffered) when it is a regular file, checked on
    the open descriptor; ``error`` naming the file and what it is otherwise. Opening never
    blocks (a FIFO is refused, not waited on). A file that cannot be opened raises the
    ``OSError`` that ``open`` would (the caller words it as it does for ``open``)."""
    where = Path(path)
    fd = os.open(where, _OPEN_FLAGS)
    try:
        kind = kind_of(os.fstat(fd).st_mode)
        if kind is not None:
            raise _not_regular(where, what, kind, error)
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)  # a regular file: reads never waited anyway
        return io.BufferedReader(io.FileIO(fd, "r", closefd=True), buffer_size=buffer_size)
    except BaseException:
        with contextlib.suppress(OSError):
            os.close(fd)
        raise


def read_bounded(
    path: str | os.PathLike[str],
    what: str,
    limit: int,
    *,
    noun: str = "file",
    error: type[FileError] = FileError,
) -> bytes:
    """The whole of regular file ``path``, at most ``limit`` bytes: a larger file (by its
    size, or by what a read finds when it grew meanwhile) is refused with ``error`` before
    more than ``limit + 1`` bytes are read. ``what`` names the argument (``--checkpoint``),
    ``noun`` the kind of file in the refusal."""
    where = Path(path)
    try:
        with open_regular(where, what, error=error) as handle:
            size = os.fstat(handle.fileno()).st_size
            data = b"" if size > limit else handle.read(limit + 1)
    except OSError as exc:
        raise _os_error(exc, where, what, error) from None
    if size > limit or len(data) > limit:
        shown = f"{max(size, len(data))} bytes" if size > limit else f"more than {limit} bytes"
        raise error(
            f"{_label(where, what)} is {shown}, more than a {noun} may be ({limit} bytes at "
            "most): name the right file",
            path=str(where),
        )
    return data
