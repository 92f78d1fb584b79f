"""The disclosure vault on PostgreSQL: every entry encrypted under a key of its own.

Why encrypted: a row deleted in PostgreSQL lives on in the write-ahead log (``pg_wal``, WAL
archives, replicas) and in every backup taken while it existed, out of reach of any
``DELETE`` or ``VACUUM``. So erasure here destroys a key instead of a row.

What is stored (tables of the connection's current schema, in a database of the vault's own,
never the log's): per entry, in ``vault_entries``, the commitment, the run id, a 12-byte nonce
and the AES-256-GCM ciphertext of the canonical JSON ``[salt, key, value]`` under a fresh
random 32-byte *data key*, with the commitment as associated data (a ciphertext moved to
another commitment does not decrypt); in ``vault_keys``, that data key wrapped (AES-256-GCM,
associated data the commitment again) under the operator's 32-byte *master key*; in
``vault_master``, the master key's fingerprint (HMAC-SHA256 of a fixed label), so opening with
another key is refused before anything is read. No plaintext value, salt, key name, data key
or master key ever reaches PostgreSQL: not its tables, not its WAL, not its backups. Commitments
and run ids are stored in clear (the log holds them too).

What :meth:`PostgresVault.erase` guarantees when it returns: the entry's ciphertext row and
wrapped-key row are deleted in one transaction, so no query of this or any session returns
them; a ``VACUUM`` of both tables then reclaims the dead row versions (one an older, still
open transaction can see is reclaimed by a later vacuum). What it cannot reach: copies taken
before the deletion (WAL segments not yet recycled, WAL archives, replicas, base backups,
``pg_dump`` files, freed but not overwritten disk blocks) still hold the ciphertext and the
data key wrapped under the *current* master key. Without that master key those copies are
useless; whoever holds both the master key and such a copy can still open the entry.

What :meth:`PostgresVault.rotate_master_key` adds: in one transaction, every live data key is
unwrapped and wrapped again under a new master key, and the fingerprint is replaced. An entry
erased before the rotation was not re-wrapped (it was gone), so every copy of its data key,
anywhere and from any time, is wrapped only under master keys that were current while it was
kept, never under the new one. Destroy every copy of those old key files and the entry is
unrecoverable from every copy of the database, past and future; entries live at the rotation
stay readable with the new key. Erasure final everywhere is therefore: ``erase``, then
``rotate_master_key``, then destroy the old key (an entry erased later waits for the next
rotation).

Losing the master key loses every entry (the log still verifies, as with no vault): keep the
key file backed up apart from the database's backups. Random 96-bit nonces under one master
key stay safe for about 2**32 wraps; rotation starts a new key.

Concurrency: puts take a shared transaction-scoped advisory lock and re-read the fingerprint
in the transaction, a rotation the exclusive one; a put racing a rotation in this object is
wrapped again under the new key, one from a vault still holding the old key is refused
(reopen it with the new key file). Driver errors are translated in :meth:`PostgresVault._errors`
(through :func:`agentfootprint.store.postgres.translate_errors`).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import hmac
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from agentfootprint.errors import (
    KeyFileError,
    NotAVaultError,
    StoreBusyError,
    StoreError,
    UsageError,
)
from agentfootprint.local_files import open_regular
from agentfootprint.logformat.canonical import canon, parse
from agentfootprint.logformat.commitments import Disclosure
from agentfootprint.store.postgres_db import (
    LOCK_CLASS,
    Connections,
    check_pool_options,
    first_line,
    location_of,
    now_ms,
    recorded_version,
    schema_tables,
    translate_errors,
)
from agentfootprint.store.postgres_url import PostgresLocation
from agentfootprint.store.vault_base import Vault

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "PostgresVault",
    "key_fingerprint",
    "load_master_key",
    "new_master_key_file",
]

KEY_BYTES: Final = 32
#: a master key file is 32 bytes or 64 hex digits: reading stops past this many bytes
_MAX_KEY_FILE_BYTES: Final = 1024
NONCE_BYTES: Final = 12
_CHECK_LABEL: Final = b"agentfootprint vault key check"
_HEX_KEY = re.compile(rb"[0-9A-Fa-f]{64}(\r?\n)?")
_SURROGATE = re.compile("[\ud800-\udfff]")
_LOCK_MIGRATE: Final = 3
_LOCK_ROTATE: Final = 4
_ATTEMPTS: Final = 5  # a deadlock or serialization failure: the transaction is run again

#: (version, name, statements): the schema, recorded in ``schema_version`` as it is applied
MIGRATIONS: Final[tuple[tuple[int, str, tuple[str, ...]], ...]] = (
    (
        1,
        "vault: encrypted entries, wrapped data keys, master key check",
        (
            """CREATE TABLE schema_version (
                version integer PRIMARY KEY,
                name text NOT NULL,
                applied_at bigint NOT NULL
            )""",
            """CREATE TABLE vault_master (
                singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
                fingerprint bytea NOT NULL CHECK (length(fingerprint) = 32),
                set_at bigint NOT NULL
            )""",
            """CREATE TABLE vault_entries (
                position bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
                commitment text PRIMARY KEY,
                run_id text NOT NULL,
                nonce bytea NOT NULL,
                ciphertext bytea NOT NULL
            )""",
            "CREATE INDEX vault_entries_by_run ON vault_entries (run_id, position)",
            # erasing an entry deletes its wrapped key in the same statement
            """CREATE TABLE vault_keys (
                commitment text PRIMARY KEY
                    REFERENCES vault_entries (commitment) ON DELETE CASCADE,
                nonce bytea NOT NULL,
                wrapped_key bytea NOT NULL
            )""",
        ),
    ),
)
SCHEMA_VERSION: Final = MIGRATIONS[-1][0]
_COLUMNS: Final = {
    "schema_version": {"version", "name", "applied_at"},
    "vault_master": {"singleton", "fingerprint", "set_at"},
    "vault_entries": {"position", "commitment", "run_id", "nonce", "ciphertext"},
    "vault_keys": {"commitment", "nonce", "wrapped_key"},
}
_PUT: Final = (
    "WITH kept AS (INSERT INTO vault_entries (commitment, run_id, nonce, ciphertext) "
    "VALUES (%s, %s, %s, %s) ON CONFLICT (commitment) DO NOTHING RETURNING commitment) "
    "INSERT INTO vault_keys (commitment, nonce, wrapped_key) "
    "SELECT commitment, %s, %s FROM kept"
)
_T = TypeVar("_T")


# -- the master key ----------------------------------------------------------------------
def load_master_key(master_key: object, *, option: str = "master_key") -> bytes:
    """The 32 bytes ``master_key`` gives: ``bytes`` are the key itself; a ``str`` or
    ``os.PathLike`` names a file holding exactly 32 bytes, or 64 hex digits and an optional
    newline. Anything else is refused, naming what was wrong and never quoting key material."""
    if isinstance(master_key, bytes | bytearray):
        if len(master_key) != KEY_BYTES:
            raise UsageError(
                f"option {option!r}: a master key is {KEY_BYTES} bytes, got {len(master_key)} "
                "(or name a key file: a str or a path)",
                option=option,
            )
        return bytes(master_key)
    if not isinstance(master_key, str | os.PathLike):
        raise UsageError(
            f"option {option!r}: {KEY_BYTES} raw bytes or the path of a key file, got "
            f"{type(master_key).__name__}",
            option=option,
        )
    if not os.fspath(master_key):
        raise UsageError(f"option {option!r}: an empty path names no key file", option=option)
    path = Path(os.fspath(master_key))
    try:  # a FIFO or a device is refused; a key file is small: read no more than that
        with open_regular(path, "master key file", error=KeyFileError) as handle:
            data = handle.read(_MAX_KEY_FILE_BYTES + 1)
    except FileNotFoundError:
        raise KeyFileError(
            f"master key file {path}: no such file (a str names a key file; pass the key "
            "itself as bytes)",
            path=str(path),
            option=option,
        ) from None
    except IsADirectoryError:
        raise KeyFileError(
            f"master key file {path} is a folder", path=str(path), option=option
        ) from None
    except OSError as exc:
        raise KeyFileError(
            f"master key file {path} cannot be read: {exc.strerror or exc}",
            path=str(path),
            option=option,
        ) from None
    if len(data) == KEY_BYTES:
        return data
    if _HEX_KEY.fullmatch(data):
        return bytes.fromhex(data[:64].decode("ascii"))
    if not data:
        what = "nothing (the file is empty)"
    elif _HEX_KEY.fullmatch(data[:64]) and len(data) > 64:
        what = "64 hex digits followed by more"
    elif len(data) > _MAX_KEY_FILE_BYTES:
        what = f"more than {_MAX_KEY_FILE_BYTES} bytes"
    else:
        what = f"{len(data)} bytes"
    raise KeyFileError(
        f"master key file {path}: expected exactly {KEY_BYTES} bytes, or 64 hex digits and an "
        f"optional newline; it holds {what}",
        path=str(path),
        option=option,
    )


def key_fingerprint(master: bytes) -> bytes:
    """What ``vault_master`` stores of the master key: HMAC-SHA256 of a fixed label (reveals
    nothing of the key; names it)."""
    return hmac.new(master, _CHECK_LABEL, hashlib.sha256).digest()


def new_master_key_file(path: str | os.PathLike[str]) -> Path:
    """Write a new random master key to ``path`` (64 hex digits and a newline, mode 0600); a
    file already there is refused, never overwritten."""
    target = Path(path)
    try:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise KeyFileError(
            f"{target} exists: a key file is never overwritten", path=str(target)
        ) from None
    except OSError as exc:
        raise KeyFileError(
            f"cannot create the key file {target}: {exc.strerror or exc}", path=str(target)
        ) from None
    with os.fdopen(fd, "w") as out:
        out.write(os.urandom(KEY_BYTES).hex() + "\n")
    return target


class _Contended(StoreBusyError):
    """A deadlock or serialization failure: the transaction was rolled back whole (run it
    again; typed, should it ever escape)."""


class _Rotated(Exception):
    """The database's master key fingerprint is not the one this put wrapped its keys with."""


class PostgresVault(Vault):
    """Disclosures by commitment in a PostgreSQL database of their own, each encrypted under
    a data key wrapped under ``master_key`` (this module's docstring says what erasure and
    rotation guarantee).

    ``url``: ``postgresql://USER@HOST:PORT/DBNAME`` (libpq parameters, ``durability=`` and
    ``key_file=`` allowed in the query: :mod:`~agentfootprint.store.postgres_url`), or its
    parsed :class:`PostgresLocation`. ``master_key``: 32 bytes or a key file's path
    (:func:`load_master_key`), or None to take the URL's ``key_file=``. ``create=False``
    refuses a database holding no vault instead of creating one; ``readonly=True`` (implies
    it) opens read-only sessions.
    ``timeout``: seconds to wait for a connection; ``pool_size``: connections kept open.

    An empty schema becomes a vault; a vault opens when the master key's fingerprint is the
    one it records (otherwise :class:`KeyFileError`); a log or anything else is refused with
    :class:`NotAVaultError` and left unchanged. Thread-safe.
    """

    def __init__(
        self,
        url: str | PostgresLocation,
        *,
        master_key: bytes | str | os.PathLike[str] | None = None,
        readonly: bool = False,
        create: bool = True,
        timeout: float = 30.0,
        pool_size: int = 2,
    ) -> None:
        self.location = location_of(url)
        key_file = self.location.key_file
        if master_key is not None and key_file is not None:
            raise UsageError(
                "the vault's master key is given twice (master_key= and the URL's key_file=): "
                "give one",
                option="master_key",
            )
        if master_key is None and key_file is None:
            raise UsageError(
                "a vault on PostgreSQL needs its master key: master_key=PATH (or 32 bytes), "
                "or key_file=PATH in the URL",
                option="master_key",
            )
        if type(create) is not bool:
            raise UsageError(f"option 'create': True or False, not {create!r}", option="create")
        check_pool_options(pool_size, timeout, readonly)
        self._master = load_master_key(
            master_key if master_key is not None else key_file,
            option="master_key" if master_key is not None else "key_file",
        )
        self.readonly = readonly
        self.create = create and not readonly
        self.durability = self.location.durability or "full"
        self.timeout = float(timeout)
        self._lock = threading.Lock()  # guards _master and the closing
        #: held by a rotation from before it commits until _master is the new key: a put or
        #: get that met the new fingerprint waits on it before deciding whose key that is
        self._rotation = threading.Lock()
        self._db = Connections(
            self.location,
            durability=self.durability,
            readonly=readonly,
            timeout=self.timeout,
            name="agentfootprint-vault",
            translate=self._errors,
        )
        with self._errors(f"opening vault {self.shown}"), self._db.connect() as conn:
            self._open_schema(conn)
        self._db.open_pool(pool_size)

    def __repr__(self) -> str:
        return f"PostgresVault({self.shown!r}, key_id={self.key_id!r})"

    @property
    def shown(self) -> str:
        """The database's URL without its password, for messages."""
        return self.location.shown

    @property
    def key_id(self) -> str:
        """The master key's short name (8 hex digits of its fingerprint), for messages and
        for telling key files apart."""
        return key_fingerprint(self._master)[:4].hex()

    # -- connections ------------------------------------------------------------------------
    @contextlib.contextmanager
    def _errors(self, context: str) -> Iterator[None]:
        """The one place driver errors become this library's: what only a vault says first,
        the rest as :func:`~agentfootprint.store.postgres.translate_errors` says it."""
        from psycopg import errors

        with translate_errors(context):
            try:
                yield
            except (  # rolled back whole by the server: worth another attempt
                errors.DeadlockDetected,
                errors.SerializationFailure,
                errors.TransactionRollback,
            ) as exc:
                raise _Contended(str(exc)) from exc
            except errors.InsufficientPrivilege as exc:
                raise StoreError(
                    f"{context}: the database role lacks a privilege ({first_line(exc)}): the "
                    "vault's role needs SELECT, INSERT, UPDATE and DELETE on its tables "
                    "(docs/stores.md, 'The vault on PostgreSQL')"
                ) from exc

    def _cursor(
        self, context: str, *, write: bool = False
    ) -> contextlib.AbstractContextManager[psycopg.Cursor[Any]]:
        """A cursor on a pooled connection (``write``: inside one transaction)."""
        if self._db.closed:
            raise StoreError(f"{context}: the vault {self.shown} was closed")
        return self._db.cursor(context, write=write)

    def _transaction(self, context: str, body: Callable[[psycopg.Cursor[Any]], _T]) -> _T:
        """``body`` in one write transaction, run again when PostgreSQL rolled it back for a
        deadlock (two puts taking the same commitments in another order) or a serialization
        failure; it is all or nothing each time."""
        for _ in range(_ATTEMPTS):
            try:
                with self._cursor(context, write=True) as cur:
                    return body(cur)
            except _Contended:
                time.sleep(0.01)
        raise StoreBusyError(
            f"{context}: rolled back {_ATTEMPTS} times for conflicts with other writers"
        )

    # -- schema -----------------------------------------------------------------------------
    def _refuse(self, what: str) -> NotAVaultError:
        return NotAVaultError(
            f"{self.shown} is {what}, not a disclosure vault; it was left unchanged: name a "
            "new, empty database (a separate one from the log's) or an existing vault"
        )

    def _open_schema(self, conn: psycopg.Connection[Any]) -> None:
        tables = schema_tables(conn)
        if not tables:
            if not self.create:
                raise NotAVaultError(
                    f"{self.shown} holds no vault (its schema has no tables): name the "
                    "database that holds the disclosures"
                )
            self._create(conn)
            return
        self._check_kind(tables)
        recorded_version(conn, newest=SCHEMA_VERSION, what=f"vault {self.shown}")
        self._check_master(conn.execute("SELECT fingerprint FROM vault_master").fetchall())

    def _check_kind(self, tables: dict[str, set[str]]) -> None:
        if tables == _COLUMNS:
            return
        if {"events", "runs"} <= set(tables):
            raise self._refuse("an agentfootprint log")
        names = ", ".join(sorted(tables)[:6]) + (", ..." if len(tables) > 6 else "")
        raise self._refuse(f"a database holding other tables ({names})")

    def _create(self, conn: psycopg.Connection[Any]) -> None:
        """The schema and the master key's fingerprint, in one transaction, one creator at a
        time (two hosts opening a new database at once)."""
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (LOCK_CLASS, _LOCK_MIGRATE))
            tables = schema_tables(conn)
            if tables:  # another opener won the race
                self._check_kind(tables)
                self._check_master(conn.execute("SELECT fingerprint FROM vault_master").fetchall())
                return
            for version, name, statements in MIGRATIONS:
                for statement in statements:
                    conn.execute(statement)
                conn.execute(
                    "INSERT INTO schema_version VALUES (%s, %s, %s)", (version, name, now_ms())
                )
            conn.execute(
                "INSERT INTO vault_master (fingerprint, set_at) VALUES (%s, %s)",
                (key_fingerprint(self._master), now_ms()),
            )

    def _check_master(self, rows: list[Any], master: bytes | None = None) -> None:
        if len(rows) != 1:
            raise StoreError(
                f"vault {self.shown} records no master key fingerprint (its vault_master table "
                "is empty): it is damaged"
            )
        stored = bytes(rows[0][0])
        given = key_fingerprint(master or self._master)
        if not hmac.compare_digest(stored, given):
            raise KeyFileError(
                f"the master key given (key id {given[:4].hex()}) does not open vault "
                f"{self.shown}: "
                f"it was created or last rotated with another key (key id {stored[:4].hex()}); "
                "give that key file"
            )

    def schema_version(self) -> int:
        """The highest migration applied to this database."""
        with self._cursor("reading the vault's schema version") as cur:
            return recorded_version(cur.connection)

    # -- writing ----------------------------------------------------------------------------
    def _writable(self, what: str = "nothing can be kept or erased") -> None:
        if self.readonly:
            raise StoreError(
                f"vault {self.shown} was opened read-only: {what} (open it without readonly=True)"
            )

    def put(self, run_id: str, disclosures: Sequence[Disclosure]) -> None:
        """Keep one commit's disclosures in one transaction (the first kept per commitment
        wins); every entry is checked and encrypted before the database is asked."""
        self._writable()
        if self._db.closed:
            raise StoreError(f"keeping disclosures: the vault {self.shown} was closed")
        plain: dict[str, bytes] = {}  # commitment -> plaintext, the first in the batch wins
        _text(run_id, "run id")
        for d in disclosures:
            _text(d.commitment, "commitment", d.commitment)
            _text(d.key, "key", d.commitment, stored=False)
            _text(d.salt, "salt", d.commitment, stored=False)
            if d.commitment not in plain:  # canon refuses what is not canonical JSON
                value = canon(d.value)
                plain[d.commitment] = (
                    b"[" + canon(d.salt) + b"," + canon(d.key) + b"," + value + b"]"
                )
        if not plain:
            return
        for _ in range(_ATTEMPTS):
            master = self._master
            rows = [_seal(master, c, run_id, text) for c, text in plain.items()]
            try:
                self._transaction(
                    f"keeping {len(rows)} disclosures of run {run_id}",
                    functools.partial(_insert, master=master, rows=rows),
                )
                return
            except _Rotated:
                if not self._rotated_here(master):  # by another vault object: not our key
                    raise self._rotated_elsewhere() from None
        raise StoreBusyError(f"vault {self.shown}: the master key kept changing during a put")

    def _rotated_here(self, master: bytes) -> bool:
        """Whether this object's key changed from ``master`` (once any rotation of its own
        in flight has finished)."""
        with self._rotation:
            return self._master is not master

    def _rotated_elsewhere(self) -> StoreError:
        return StoreError(
            f"vault {self.shown}: its master key was rotated since this vault was opened (this "
            f"one holds key id {self.key_id}): open it again with the new key file"
        )

    def erase(self, *, commitments: Iterable[str] = (), run_id: str | None = None) -> int:
        """Delete the entries' ciphertext and wrapped keys in one transaction, then VACUUM
        both tables; returns how many entries were erased. Copies of the database taken
        earlier keep them wrapped under the master key until :meth:`rotate_master_key`
        (the module docstring)."""
        targets = list(commitments)
        if not targets and run_id is None:
            raise UsageError("erase what? name commitments or a run id")
        for target in targets:
            if type(target) is not str:
                raise UsageError(f"erase: a commitment is a string, got {target!r}")
        self._writable()

        def delete(cur: psycopg.Cursor[Any]) -> int:
            cur.execute(  # the keys go with their entries (ON DELETE CASCADE)
                "DELETE FROM vault_entries WHERE commitment = ANY(%s::text[]) OR run_id = %s",
                (targets, run_id),
            )
            return cur.rowcount

        erased = self._transaction(f"erasing from vault {self.shown}", delete)
        if erased:
            self._vacuum(f"the {erased} entries were erased", "vault_keys", "vault_entries")
        return erased

    def _vacuum(self, done: str, *tables: str) -> None:
        """Reclaim the dead row versions a delete or an update left (VACUUM cannot run in a
        transaction: the pool's connections are in autocommit); ``done``: what committed."""
        try:
            with self._cursor(f"vacuuming vault {self.shown}") as cur:
                cur.execute("VACUUM " + ", ".join(tables))
        except StoreError as exc:
            raise StoreError(
                f"{exc} ({done}; the dead rows stay until VACUUM {', '.join(tables)} runs, or "
                "autovacuum does)"
            ) from exc

    def rotate_master_key(self, new_master_key: bytes | str | os.PathLike[str]) -> int:
        """Wrap every live data key again under ``new_master_key`` and record its fingerprint,
        in one transaction; returns how many keys were wrapped again. Afterwards the old key
        opens nothing this vault holds, and destroying it makes every earlier erasure final
        in every copy of the database (the module docstring). Any other vault object still
        holding the old key is refused from then on."""
        self._writable("the master key cannot be rotated")
        new = load_master_key(new_master_key, option="new_master_key")
        old = self._master
        if hmac.compare_digest(new, old):
            raise UsageError(
                "rotate_master_key: the new master key is the current one", option="new_master_key"
            )

        def rewrap(cur: psycopg.Cursor[Any]) -> int:
            cur.execute("SELECT pg_advisory_xact_lock(%s, %s)", (LOCK_CLASS, _LOCK_ROTATE))
            fingerprint = cur.execute("SELECT fingerprint FROM vault_master FOR UPDATE").fetchall()
            try:
                self._check_master(fingerprint, old)
            except KeyFileError:
                raise self._rotated_elsewhere() from None
            count = 0
            with cur.connection.cursor(name="agentfootprint_rotate") as keys:
                keys.execute("SELECT commitment, nonce, wrapped_key FROM vault_keys")
                while batch := keys.fetchmany(1000):
                    updates = []
                    for commitment, nonce, wrapped in batch:
                        try:
                            data_key = self._unwrap(old, commitment, bytes(nonce), wrapped)
                        except StoreError as exc:
                            raise StoreError(
                                f"{exc}: the rotation was rolled back; erase that entry (it "
                                "opens nothing) and rotate again"
                            ) from None
                        again = os.urandom(NONCE_BYTES)
                        sealed = AESGCM(new).encrypt(again, data_key, commitment.encode())
                        updates.append((again, sealed, commitment))
                    cur.executemany(
                        "UPDATE vault_keys SET nonce = %s, wrapped_key = %s WHERE commitment = %s",
                        updates,
                    )
                    count += len(updates)
            cur.execute(
                "UPDATE vault_master SET fingerprint = %s, set_at = %s",
                (key_fingerprint(new), now_ms()),
            )
            return count

        with self._rotation:
            count = self._transaction(f"rotating the master key of vault {self.shown}", rewrap)
            with self._lock:
                self._master = new
        self._vacuum("the master key was rotated", "vault_keys", "vault_master")  # old versions
        return count

    # -- reading ----------------------------------------------------------------------------
    def get(self, commitment: str) -> Disclosure | None:
        """The disclosure kept for ``commitment``, decrypted and checked, or None (never
        kept, or erased). An entry that does not decrypt (altered, moved to another
        commitment, its key missing) is a :class:`StoreError`, never a wrong value."""
        context = f"reading vault {self.shown}"
        for _ in range(2):  # a second time when this object rotated its key meanwhile
            master = self._master
            with self._cursor(context) as cur:
                row = cur.execute(
                    "SELECT e.nonce, e.ciphertext, k.nonce, k.wrapped_key FROM vault_entries e "
                    "LEFT JOIN vault_keys k USING (commitment) WHERE e.commitment = %s",
                    (commitment,),
                ).fetchone()
            if row is None:
                return None
            if row[2] is None:
                raise self._damaged(commitment, "its wrapped data key is missing")
            try:
                data_key = self._unwrap(master, commitment, bytes(row[2]), bytes(row[3]))
            except StoreError:  # the connection is back in the pool: a rotation can finish
                if self._rotated_here(master):
                    continue
                with self._cursor(context) as cur:
                    check = cur.execute("SELECT fingerprint FROM vault_master").fetchall()
                try:
                    self._check_master(check, master)
                except KeyFileError:
                    raise self._rotated_elsewhere() from None
                raise
            return self._open(commitment, data_key, bytes(row[0]), bytes(row[1]))
        raise StoreBusyError(f"vault {self.shown}: the master key kept changing during a read")

    def _unwrap(self, master: bytes, commitment: str, nonce: bytes, wrapped: bytes) -> bytes:
        try:
            data_key = AESGCM(master).decrypt(nonce, wrapped, commitment.encode())
        except (InvalidTag, ValueError):
            raise self._damaged(
                commitment, "its data key does not unwrap under the master key"
            ) from None
        if len(data_key) != KEY_BYTES:
            raise self._damaged(commitment, "its data key is not 32 bytes")
        return data_key

    def _open(self, commitment: str, data_key: bytes, nonce: bytes, sealed: bytes) -> Disclosure:
        try:
            text = AESGCM(data_key).decrypt(nonce, sealed, commitment.encode())
        except (InvalidTag, ValueError):
            raise self._damaged(commitment, "its ciphertext does not decrypt") from None
        try:
            opened = parse(text)
        except ValueError:
            opened = None
        if type(opened) is not list or len(opened) != 3:
            raise self._damaged(commitment, "it does not hold [salt, key, value]")
        salt, key, value = opened
        if type(salt) is not str or type(key) is not str:
            raise self._damaged(commitment, "its salt and key are not strings")
        return Disclosure(commitment=commitment, salt=salt, key=key, value=value)

    def _damaged(self, commitment: str, why: str) -> StoreError:
        return StoreError(
            f"vault {self.shown}: the entry for commitment {commitment} cannot be opened: {why} "
            "(altered, moved to another commitment, or restored from another vault); nothing "
            "was returned"
        )

    def commitments(self, run_id: str | None = None) -> list[str]:
        """The commitments held (of one run), in the order they were first kept."""
        query = "SELECT commitment FROM vault_entries"
        args: tuple[str, ...] = ()
        if run_id is not None:
            query, args = query + " WHERE run_id = %s", (run_id,)
        with self._cursor(f"listing vault {self.shown}") as cur:
            return [row[0] for row in cur.execute(query + " ORDER BY position", args)]

    def close(self) -> None:
        """Close the pool; later use is a :class:`StoreError`; twice is harmless."""
        with self._lock:
            self._db.close()


# -- helpers ---------------------------------------------------------------------------------
def _insert(cur: psycopg.Cursor[Any], *, master: bytes, rows: list[tuple[Any, ...]]) -> None:
    """A put's statements: the shared rotation lock first, then the fingerprint (read after
    it: a rotation that committed meanwhile is seen), then the rows."""
    cur.execute("SELECT pg_advisory_xact_lock_shared(%s, %s)", (LOCK_CLASS, _LOCK_ROTATE))
    row = cur.execute("SELECT fingerprint FROM vault_master").fetchone()
    if row is None or not hmac.compare_digest(bytes(row[0]), key_fingerprint(master)):
        raise _Rotated
    cur.executemany(_PUT, rows)


def _seal(master: bytes, commitment: str, run_id: str, plaintext: bytes) -> tuple[Any, ...]:
    """One entry's row: a fresh data key encrypts the plaintext, the master key wraps it, the
    commitment binds both."""
    aad = commitment.encode()
    data_key = AESGCM.generate_key(bit_length=256)
    nonce, wrap_nonce = os.urandom(NONCE_BYTES), os.urandom(NONCE_BYTES)
    sealed = AESGCM(data_key).encrypt(nonce, plaintext, aad)
    wrapped = AESGCM(master).encrypt(wrap_nonce, data_key, aad)
    return (commitment, run_id, nonce, sealed, wrap_nonce, wrapped)


def _text(value: object, what: str, commitment: object = None, *, stored: bool = True) -> None:
    """Each part of a disclosure must be a string; a run id and a commitment (``stored``:
    PostgreSQL text, and the commitment the associated data) hold no NUL and no lone
    surrogate (keys and salts go inside the JSON, which ``canon`` checks)."""
    where = "" if commitment is None else f" (commitment {commitment!r})"
    if type(value) is not str:
        raise StoreError(f"vault: a disclosure's {what} must be a string{where}, got {value!r}")
    if stored and ("\x00" in value or _SURROGATE.search(value)):
        raise StoreError(f"vault: a disclosure's {what} holds a NUL or a lone surrogate{where}")
