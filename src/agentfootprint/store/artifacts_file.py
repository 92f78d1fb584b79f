"""An artifact store in a directory: one file per artifact's bytes, plain JSON beside it.

Layout (docs/artifacts.md, "Stores")::

    agentfootprint-artifacts.json        {"agentfootprint_artifacts": 1}, written at creation
    <sha256 hex of the scope's UTF-8>/   one directory per scope (any scope string is safe)
        <ref>.bin                        the content, as put
        <ref>.head.json                  canonical JSON of the head, plus its put sequence
        <ref>.tomb.json                  once removed: the tombstone (.bin and .head.json go)

Every file is written to a temporary name in its directory, synced and renamed into place
(``os.replace``), the head last: a put interrupted at any point leaves no visible artifact
(the head is what makes one). A removal writes the tombstone first, then deletes head and
content: a ref with a tombstone is removed, whatever else a crash left beside it (a writable
store deletes such leftovers when it sweeps the scope).

Reading fails closed: a head or tombstone file is plain JSON checked member by member (no
other member, every type exact, canonical bytes, its scope and ref those of its place); a
symbolic link anywhere inside the store is refused; each refusal is an
:class:`~agentfootprint.errors.ArtifactStoreError` naming the file. Content is returned as
stored: the verifier hashes it. One process writes a scope at a time (threads share the
store's lock); a second writing process is safe for different refs, and its put order
within a shared scope is only as fine as the instants given.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import secrets
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Final

import orjson

from agentfootprint.errors import (
    ArtifactStoreError,
    CanonicalFormError,
    FileError,
    NewerVersionError,
    NotAnArtifactStoreError,
)
from agentfootprint.local_files import read_bounded
from agentfootprint.logformat.canonical import MAX_SAFE_INT, canon
from agentfootprint.store.artifacts import (
    REF_PATTERN,
    ArtifactHead,
    ArtifactStore,
    Retention,
    Tombstone,
    conflict,
    head_problem,
    order_key,
    tombstone_problem,
)
from agentfootprint.store.sqlite_files import file_path

__all__ = ["FORMAT_VERSION", "MARKER", "FileArtifacts"]

#: The file that makes a directory an artifact store, and the layout version it holds.
MARKER: Final = "agentfootprint-artifacts.json"
FORMAT_VERSION: Final = 1
_MARKER_KEY: Final = "agentfootprint_artifacts"
#: Largest head, tombstone or marker file read (a head is well under 10 KB).
MAX_META_BYTES: Final = 64 * 1024
_HEAD: Final = ".head.json"
_TOMB: Final = ".tomb.json"
_BIN: Final = ".bin"
_READ_FLAGS: Final = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_BINARY", 0)
)
_WRITE_FLAGS: Final = (
    os.O_WRONLY
    | os.O_CREAT
    | os.O_EXCL
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_BINARY", 0)
)
#: head file members and their JSON types (``expires_at`` may also be null)
_HEAD_MEMBERS: Final = {
    "scope": str,
    "ref": str,
    "kind": str,
    "media_type": str,
    "size": int,
    "digest": str,
    "created_at": int,
    "expires_at": int,
    "seq": int,
}
_TOMB_MEMBERS: Final = {
    "scope": str,
    "ref": str,
    "digest": str,
    "size": int,
    "reason": str,
    "at": int,
    "note": str,
}


def scope_key(scope: str) -> str:
    """The scope's directory name: plain SHA-256 hex of its UTF-8 (any scope is a safe name)."""
    return hashlib.sha256(scope.encode("utf-8")).hexdigest()


def _damaged(path: Path, why: str) -> ArtifactStoreError:
    return ArtifactStoreError(f"artifact store file {path}: {why}; it was not read")


def _members(path: Path, data: bytes, expected: dict[str, type]) -> dict[str, Any]:
    """The JSON object in ``data`` when it has exactly the ``expected`` members, each of its
    exact type (``expires_at`` may be null) and is canonical; else a refusal naming ``path``."""
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise _damaged(path, f"not JSON ({exc})") from None
    if type(value) is not dict:
        raise _damaged(path, "not a JSON object")
    if set(value) != set(expected):
        extra, absent = sorted(set(value) - set(expected)), sorted(set(expected) - set(value))
        raise _damaged(path, f"members {extra[:5]} not expected, {absent[:5]} absent")
    for name, kind in expected.items():
        member = value[name]
        if not (type(member) is kind or (name == "expires_at" and member is None)):
            raise _damaged(path, f"member {name!r} is {type(member).__name__}, not {kind.__name__}")
    try:
        canonical = canon(value)
    except CanonicalFormError as exc:
        raise _damaged(path, f"not canonical JSON ({exc})") from None
    if canonical != data:
        raise _damaged(path, "not canonical JSON (RFC 8785) as the store writes it")
    return value


class FileArtifacts(ArtifactStore):
    """Artifacts in a directory (see the module's docstring for the layout).

    Writing (default): a missing directory is created (its parent must exist), an empty one
    becomes a store; a non-empty directory without the marker is refused with
    :class:`~agentfootprint.errors.NotAnArtifactStoreError` and left unchanged; a marker of
    a newer layout with :class:`~agentfootprint.errors.NewerVersionError`.
    ``readonly=True`` creates and changes nothing: a missing directory is a
    :class:`~agentfootprint.errors.FileError`, one without the marker is refused.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        retention: Retention | None = None,
        readonly: bool = False,
    ) -> None:
        root = file_path(directory, who="FileArtifacts", option="directory")
        super().__init__(retention=retention, readonly=readonly, holds_path=os.path.abspath(root))
        self.directory = root
        #: scope -> the next put sequence (read from the scope's heads at its first put)
        self._next: dict[str, int] = {}
        if readonly:
            self._open_readonly()
        else:
            self._open_for_writing()

    # -- opening -------------------------------------------------------------------------
    def _refuse(self, what: str) -> NotAnArtifactStoreError:
        return NotAnArtifactStoreError(
            f"{self.directory} is {what}, not an agentfootprint artifact store (it has no "
            f"{MARKER}); it was left unchanged: name a new or empty directory, or an existing "
            "artifact store",
            path=str(self.directory),
        )

    def _open_readonly(self) -> None:
        root = self.directory
        if not os.path.lexists(root):
            raise FileError(
                f"{root}: no such artifact store (no such directory); nothing was created "
                "(opened read-only)",
                path=str(root),
            )
        if not root.is_dir():
            raise self._refuse("a file, not a directory")
        if not os.path.lexists(root / MARKER):
            raise self._refuse("an empty directory" if not self._entries() else "a directory")
        self._check_marker()

    def _open_for_writing(self) -> None:
        root = self.directory
        if not os.path.lexists(root):
            if not root.parent.is_dir():
                raise FileError(
                    f"cannot create the artifact store {root}: the folder {root.parent} does "
                    "not exist",
                    path=str(root),
                )
            try:
                root.mkdir(mode=0o700)
            except FileExistsError:
                pass  # another process made it: it is checked below like any directory
            except OSError as exc:
                raise FileError(
                    f"cannot create the artifact store {root}: {exc.strerror or exc}",
                    path=str(root),
                ) from exc
        if not root.is_dir():
            raise self._refuse("a file, not a directory")
        if not os.access(root, os.W_OK | os.X_OK):
            raise FileError(
                f"cannot open the artifact store {root} for writing: it cannot be written; "
                "to read it, open it read-only (readonly=True)",
                path=str(root),
            )
        if os.path.lexists(root / MARKER):
            self._check_marker()
            return
        entries = self._entries()
        if entries:
            shown = ", ".join(sorted(entries)[:5]) + (", ..." if len(entries) > 5 else "")
            raise self._refuse(f"a directory of other files ({len(entries)}: {shown})")
        marker = canon({_MARKER_KEY: FORMAT_VERSION})
        with self._os_errors(f"creating {root / MARKER}", opening=True):
            self._write_atomic(root, MARKER, marker)

    def _entries(self) -> list[str]:
        try:
            return os.listdir(self.directory)
        except OSError as exc:
            raise FileError(
                f"cannot read the artifact store {self.directory}: {exc.strerror or exc}",
                path=str(self.directory),
            ) from exc

    def _check_marker(self) -> None:
        path = self.directory / MARKER
        try:
            link = stat.S_ISLNK(os.lstat(path).st_mode)
        except OSError as exc:
            raise FileError(f"cannot read {path}: {exc.strerror or exc}", path=str(path)) from exc
        if link:
            raise self._refuse(f"a directory whose {MARKER} is a symbolic link")
        data = read_bounded(path, "", 4096, noun="artifact store marker", error=FileError)
        try:
            value = orjson.loads(data)
        except orjson.JSONDecodeError:
            value = None
        version = value.get(_MARKER_KEY) if type(value) is dict and len(value) == 1 else None
        if type(version) is not int or version < 1:
            raise self._refuse(f"a directory whose {MARKER} is not an artifact store marker")
        if version > FORMAT_VERSION:
            raise NewerVersionError(
                f"{self.directory} is an artifact store of layout {version}, newer than this "
                f"library's {FORMAT_VERSION}: upgrade agentfootprint to read it",
                path=str(self.directory),
            )

    # -- files -----------------------------------------------------------------------------
    @contextlib.contextmanager
    def _os_errors(self, context: str, *, opening: bool = False) -> Iterator[None]:
        """The one place this backend's ``OSError`` becomes this library's error."""
        try:
            yield
        except OSError as exc:
            message = f"artifact store {self.directory}: {context}: {exc.strerror or exc}"
            if opening:
                raise FileError(message, path=str(self.directory)) from exc
            raise ArtifactStoreError(message) from exc

    def _errors(self) -> contextlib.AbstractContextManager[None]:
        return self._os_errors("failed")

    def _folder(self, scope: str, *, create: bool = False) -> Path | None:
        """The scope's directory (None when it does not exist and ``create`` is off)."""
        folder = self.directory / scope_key(scope)
        try:
            mode = os.lstat(folder).st_mode
        except FileNotFoundError:
            if not create:
                return None
            try:
                folder.mkdir(mode=0o700)
            except FileExistsError:  # another process made it meanwhile: checked as found
                return self._folder(scope)
            _sync_folder(self.directory)
            return folder
        if stat.S_ISLNK(mode):
            raise _damaged(folder, "a symbolic link inside the store (refused)")
        if not stat.S_ISDIR(mode):
            raise _damaged(folder, "not a directory")
        return folder

    @staticmethod
    def _open_file(path: Path) -> int | None:
        """A descriptor of regular file ``path`` (never through a symbolic link); None when
        it does not exist."""
        try:
            fd = os.open(path, _READ_FLAGS)
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno == errno.ELOOP or os.path.islink(path):
                raise _damaged(path, "a symbolic link inside the store (refused)") from None
            raise
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise _damaged(path, "not a regular file")
            if hasattr(os, "set_blocking"):
                os.set_blocking(fd, True)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _read_file(self, path: Path, limit: int | None) -> bytes | None:
        fd = self._open_file(path)
        if fd is None:
            return None
        with open(fd, "rb", closefd=True) as handle:
            data = handle.read() if limit is None else handle.read(limit + 1)
        if limit is not None and len(data) > limit:
            raise _damaged(path, f"larger than {limit} bytes")
        return data

    @staticmethod
    def _write_atomic(folder: Path, name: str, data: bytes) -> None:
        """``data`` as ``folder/name``: a temporary file synced, then renamed into place."""
        temp = folder / f".{name}.{secrets.token_hex(8)}.tmp"
        fd = os.open(temp, _WRITE_FLAGS, 0o600)
        try:
            with open(fd, "wb", closefd=True) as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temp, folder / name)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise

    # -- heads and tombstones --------------------------------------------------------------
    def _head_file(self, folder: Path, scope: str, ref: str) -> tuple[ArtifactHead, int] | None:
        path = folder / (ref + _HEAD)
        data = self._read_file(path, MAX_META_BYTES)
        if data is None:
            return None
        value = _members(path, data, _HEAD_MEMBERS)
        seq = value.pop("seq")
        head = ArtifactHead(**value)
        problem = head_problem(head)
        if problem is not None:
            raise _damaged(path, problem)
        if head.scope != scope or head.ref != ref:
            raise _damaged(path, "its scope or ref is not that of its place in the store")
        if not 0 <= seq <= MAX_SAFE_INT:
            raise _damaged(path, f"seq {seq} is not a put sequence")
        return head, seq

    def _tomb_file(self, folder: Path, scope: str, ref: str) -> Tombstone | None:
        path = folder / (ref + _TOMB)
        data = self._read_file(path, MAX_META_BYTES)
        if data is None:
            return None
        tomb = Tombstone(**_members(path, data, _TOMB_MEMBERS))
        problem = tombstone_problem(tomb)
        if problem is not None:
            raise _damaged(path, problem)
        if tomb.scope != scope or tomb.ref != ref:
            raise _damaged(path, "its scope or ref is not that of its place in the store")
        return tomb

    def _live(self, scope: str, ref: str) -> tuple[Path, ArtifactHead, int] | None:
        folder = self._folder(scope)
        if folder is None or self._tomb_file(folder, scope, ref) is not None:
            return None
        found = self._head_file(folder, scope, ref)
        return None if found is None else (folder, *found)

    def _scan(self, scope: str) -> tuple[Path | None, list[tuple[ArtifactHead, int]]]:
        """The scope's folder and its live heads with their put sequences, in put order."""
        folder = self._folder(scope)
        if folder is None:
            return None, []
        names = os.listdir(folder)
        tombs = {name.removesuffix(_TOMB) for name in names if name.endswith(_TOMB)}
        heads = [
            ref
            for ref in (name.removesuffix(_HEAD) for name in names if name.endswith(_HEAD))
            if REF_PATTERN.fullmatch(ref) and ref not in tombs
        ]
        found = [self._head_file(folder, scope, ref) for ref in heads]
        live = [item for item in found if item is not None]
        return folder, sorted(live, key=lambda item: order_key(*item))

    # -- the backend's steps ---------------------------------------------------------------
    def _put(self, head: ArtifactHead, content: bytes) -> None:
        folder = self._folder(head.scope, create=True)
        assert folder is not None
        tombstoned = os.path.lexists(folder / (head.ref + _TOMB))
        if tombstoned or os.path.lexists(folder / (head.ref + _HEAD)):
            raise conflict(head.scope, head.ref, tombstoned)
        if head.scope not in self._next:
            _, live = self._scan(head.scope)
            self._next[head.scope] = max((seq for _, seq in live), default=-1) + 1
        seq = self._next[head.scope]
        members = {name: getattr(head, name) for name in ArtifactHead.__slots__}
        self._write_atomic(folder, head.ref + _BIN, content)
        self._write_atomic(folder, head.ref + _HEAD, canon({**members, "seq": seq}))
        _sync_folder(folder)
        self._next[head.scope] = seq + 1

    def _head(self, scope: str, ref: str) -> ArtifactHead | None:
        live = self._live(scope, ref)
        return None if live is None else live[1]

    def _read(self, scope: str, ref: str) -> bytes | None:
        """The content file's bytes as they are; None also when the head is there but the
        content file is gone (a damaged store: ``verify --artifacts`` says ``missing``)."""
        live = self._live(scope, ref)
        return None if live is None else self._read_file(live[0] / (ref + _BIN), None)

    def _tombstone(self, scope: str, ref: str) -> Tombstone | None:
        folder = self._folder(scope)
        return None if folder is None else self._tomb_file(folder, scope, ref)

    def _remove_all(self, tombs: Sequence[Tombstone]) -> None:
        """Each in turn: the tombstone written, then head and content deleted (each removal
        is durable on its own; a crash leaves the ones done removed, the rest live)."""
        for tomb in tombs:
            folder = self._folder(tomb.scope)
            assert folder is not None
            members = {name: getattr(tomb, name) for name in Tombstone.__slots__}
            self._write_atomic(folder, tomb.ref + _TOMB, canon(members))
            _sync_folder(folder)
            self._leftovers(folder, tomb.ref)

    @staticmethod
    def _leftovers(folder: Path, ref: str) -> None:
        """Delete what a removed ref left beside its tombstone (head first: no head is ever
        seen without its content by a reader that ignores tombstones)."""
        for suffix in (_HEAD, _BIN):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(folder / (ref + suffix))
        _sync_folder(folder)

    def _list(self, scope: str) -> list[ArtifactHead]:
        return [head for head, _ in self._scan(scope)[1]]

    def _repair(self, scope: str) -> None:
        """Delete the heads and contents a crash left beside tombstones in ``scope``."""
        folder = self._folder(scope)
        if folder is None:
            return
        names = set(os.listdir(folder))
        for name in names:
            ref = name.removesuffix(_TOMB)
            if ref != name and ({ref + _HEAD, ref + _BIN} & names):
                self._leftovers(folder, ref)

    def _close(self) -> None:
        self._next.clear()


def _sync_folder(folder: Path) -> None:
    """fsync a directory, so the renames and deletions in it survive power loss (POSIX;
    skipped where a directory cannot be opened)."""
    flag = getattr(os, "O_DIRECTORY", None)
    if flag is None:  # pragma: no cover - Windows
        return
    fd = os.open(folder, os.O_RDONLY | flag)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
