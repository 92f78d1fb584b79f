"""The vault on PostgreSQL (agentfootprint.store.postgres_vault): the vault contract, what
reaches the server's files, the master key, rotation, and tampered rows.

"Holds" here means what an attacker with the database and its keys could recover: every row
decrypted with the key it stores, unwrapped under the master key (and the raw bytes too), so
the contract's erase test shows the entry cannot be opened from what remains.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentfootprint.errors import (
    KeyFileError,
    NewerVersionError,
    NotALogError,
    NotAVaultError,
    StoreError,
    UsageError,
)
from agentfootprint.store.postgres import PostgresStore
from agentfootprint.store.postgres_url import with_database
from agentfootprint.store.postgres_vault import (
    PostgresVault,
    key_fingerprint,
    load_master_key,
    new_master_key_file,
)
from agentfootprint.store.vault_base import Vault
from agentfootprint.testing.strategies import json_values, texts
from agentfootprint.testing.vault_contract import VaultContract, disclosure
from examples_budget import scaled

MASTER = hashlib.sha256(b"agentfootprint test master key").digest()
OTHER = hashlib.sha256(b"agentfootprint another master key").digest()
_ROWS = (
    "SELECT e.commitment, e.nonce, e.ciphertext, k.nonce, k.wrapped_key FROM vault_entries e "
    "LEFT JOIN vault_keys k USING (commitment) ORDER BY e.position"
)


def _sql(url: str, query: str, args: tuple[Any, ...] = ()) -> list[Any]:
    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(query, args)
        return cur.fetchall() if cur.description else []


def _unwrap(master: bytes, row: Any) -> bytes:
    commitment, _, _, key_nonce, wrapped = row
    return AESGCM(master).decrypt(key_nonce, wrapped, commitment.encode())


def recoverable(url: str, master: bytes) -> list[bytes]:
    """Every byte string the database stores, and every entry it stores decrypted with its
    own data key (unwrapped under ``master``)."""
    found: list[bytes] = []
    for row in _sql(url, _ROWS):
        found += [bytes(part) for part in row[1:] if part is not None]
        with contextlib.suppress(InvalidTag, TypeError):  # a row that does not open
            found.append(AESGCM(_unwrap(master, row)).decrypt(row[1], row[2], row[0].encode()))
    return found


def _key_file(folder: Path, key: bytes, name: str = "vault.key") -> Path:
    path = folder / name
    path.write_text(key.hex() + "\n")
    return path


class TestPostgresVault(VaultContract):
    persistent = True

    @pytest.fixture(autouse=True)
    def _database(self, pg_database: str) -> None:
        self.url = pg_database  # a new, empty database per test (tests/conftest.py)

    def make_vault(self, tmp_path: Path) -> Vault:
        return PostgresVault(self.url, master_key=MASTER)

    def reopen(self, vault: Vault, tmp_path: Path) -> Vault:
        return PostgresVault(self.url, master_key=MASTER)

    def holds(self, vault: Vault, secret: bytes) -> bool:
        return any(secret in stored for stored in recoverable(self.url, MASTER))


@pytest.fixture
def pg_vault(pg_database: str) -> Iterator[PostgresVault]:
    vault = PostgresVault(pg_database, master_key=MASTER)
    yield vault
    vault.close()


# -- what reaches the server's files ---------------------------------------------------------
@pytest.fixture(scope="module")
def own_cluster(pg_cluster: Any) -> Any:
    """A cluster of this module's own: its data folder (pg_wal included) is read below."""
    return pg_cluster


def _cluster_bytes(root: Path) -> list[bytes]:
    contents = []
    for folder, _, names in os.walk(root):
        for name in names:
            path = Path(folder, name)
            if stat.S_ISREG(path.lstat().st_mode):  # not the server's socket
                contents.append(path.read_bytes())
    return contents


def test_no_plaintext_value_or_key_reaches_the_cluster_files(
    own_cluster: Any, tmp_path: Path
) -> None:
    admin = own_cluster.url()
    _sql(admin, "CREATE DATABASE vault_files")
    url = own_cluster.url("vault_files")
    master = os.urandom(32)
    needle = f"plain-needle-{uuid.uuid4().hex}"
    secret, big = disclosure(needle), disclosure(needle * 400, salt_byte=1)  # TOASTed
    kept = disclosure(f"kept-{uuid.uuid4().hex}", salt_byte=2)
    with PostgresVault(url, master_key=_key_file(tmp_path, master)) as vault:
        vault.put("r1", [secret, big])
        vault.put("r2", [kept])
        rows = _sql(url, _ROWS)
        data_keys = [_unwrap(master, row) for row in rows]
        stored = bytes(rows[0][2])
        forbidden = [
            needle.encode(),
            secret.salt.encode(),
            master,
            master.hex().encode(),
            *data_keys,
        ]

        def scan() -> list[bytes]:
            _sql(admin, "CHECKPOINT")  # every page written to the data files
            files = _cluster_bytes(own_cluster.root)
            assert any(stored in content for content in files), "the probe sees no entry"
            return [bad for bad in forbidden if any(bad in content for content in files)]

        assert scan() == []
        assert vault.erase(run_id="r1") == 2
        assert vault.get(kept.commitment) == kept
        assert scan() == []


# -- the master key --------------------------------------------------------------------------
def test_master_key_sources(tmp_path: Path) -> None:
    raw = bytes(range(10, 42))  # holds 0x0a, a newline byte
    cases = {
        "raw": raw,
        "hex": raw.hex().encode(),
        "hex-newline": raw.hex().encode() + b"\n",
        "hex-crlf": raw.hex().upper().encode() + b"\r\n",
    }
    for name, content in cases.items():
        (tmp_path / name).write_bytes(content)
        assert load_master_key(tmp_path / name) == raw
        assert load_master_key(str(tmp_path / name)) == raw
    assert load_master_key(raw) == raw and load_master_key(bytearray(raw)) == raw


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b"", "empty"),
        (bytes(33), "33 bytes"),
        (bytes(31), "31 bytes"),
        (b"ab" * 32 + b"\n\n", "64 hex digits followed by more"),
        (b"ab" * 31 + b"a\n", "64 bytes"),
        (b"zz" * 32, "64 bytes"),
    ],
)
def test_a_bad_key_file_is_refused_saying_why(tmp_path: Path, content: bytes, says: str) -> None:
    path = tmp_path / "bad.key"
    path.write_bytes(content)
    with pytest.raises(KeyFileError, match=says) as caught:
        load_master_key(path)
    assert caught.value.path == str(path) and "ab" * 8 not in str(caught.value)


def test_bad_master_keys_are_typed_usage_errors(tmp_path: Path) -> None:
    with pytest.raises(KeyFileError, match="no such file"):
        load_master_key(tmp_path / "missing.key")
    with pytest.raises(KeyFileError, match="folder"):
        load_master_key(tmp_path)
    with pytest.raises(UsageError, match="32 bytes, got 16"):
        load_master_key(bytes(16))
    with pytest.raises(UsageError, match="got int"):
        load_master_key(7)
    with pytest.raises(UsageError, match="an empty path"):
        load_master_key("")
    with pytest.raises(UsageError, match="needs its master key"):
        PostgresVault("postgresql://u@127.0.0.1:1/db")
    with pytest.raises(UsageError, match="given twice"):
        PostgresVault("postgresql://u@127.0.0.1:1/db?key_file=/k", master_key=MASTER)
    with pytest.raises(KeyFileError, match="no such file"):
        PostgresVault("postgresql://u@127.0.0.1:1/db?key_file=/nonexistent/vault.key")
    with pytest.raises(KeyFileError, match="no such file"):  # before any connection is tried
        PostgresVault("postgresql://u@127.0.0.1:1/db", master_key=str(tmp_path / "nope"))


def test_new_master_key_file(tmp_path: Path) -> None:
    path = new_master_key_file(tmp_path / "vault.key")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert len(load_master_key(path)) == 32 and path.read_text().endswith("\n")
    with pytest.raises(KeyFileError, match="never overwritten"):
        new_master_key_file(path)


def test_a_url_names_the_key_file(pg_database: str, tmp_path: Path) -> None:
    path = _key_file(tmp_path, MASTER)
    joiner = "&" if "?" in pg_database else "?"
    with PostgresVault(f"{pg_database}{joiner}key_file={path}") as vault:
        vault.put("r1", [disclosure("via-url")])
    with PostgresVault(pg_database, master_key=MASTER, readonly=True) as vault:
        assert vault.get(disclosure("via-url").commitment) == disclosure("via-url")


def test_the_wrong_master_key_is_refused(pg_database: str) -> None:
    with PostgresVault(pg_database, master_key=MASTER) as vault:
        vault.put("r1", [disclosure("a")])
        expected = vault.key_id
    for readonly in (False, True):
        with pytest.raises(KeyFileError, match=f"does not open vault.*key id {expected}"):
            PostgresVault(pg_database, master_key=OTHER, readonly=readonly)
    assert _sql(pg_database, "SELECT fingerprint FROM vault_master") == [(key_fingerprint(MASTER),)]


# -- what a database is ----------------------------------------------------------------------
def test_a_log_is_refused_and_a_vault_is_no_log(pg_database: str, pg_server: str) -> None:
    PostgresStore(pg_database).close()
    tables = _sql(pg_database, "SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
    with pytest.raises(NotAVaultError, match="is an agentfootprint log, not a disclosure vault"):
        PostgresVault(pg_database, master_key=MASTER)
    assert (
        _sql(pg_database, "SELECT tablename FROM pg_tables WHERE schemaname = 'public'") == tables
    )
    name = f"v_{uuid.uuid4().hex[:12]}"
    _sql(pg_server, f'CREATE DATABASE "{name}"')
    try:
        PostgresVault(with_database(pg_server, name), master_key=MASTER).close()
        with pytest.raises(NotALogError, match="disclosure vault"):
            PostgresStore(with_database(pg_server, name))
    finally:
        _sql(pg_server, f'DROP DATABASE "{name}" WITH (FORCE)')


def test_other_tables_and_an_empty_readonly_database_are_refused(pg_database: str) -> None:
    for options in ({"readonly": True}, {"create": False}):
        with pytest.raises(NotAVaultError, match="holds no vault"):
            PostgresVault(pg_database, master_key=MASTER, **options)
    assert _sql(pg_database, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'") == [(0,)]
    _sql(pg_database, "CREATE TABLE customers (id int)")
    with pytest.raises(NotAVaultError, match=r"other tables \(customers\)"):
        PostgresVault(pg_database, master_key=MASTER)


def test_the_schema_is_recorded_and_a_newer_one_refused(pg_vault: PostgresVault) -> None:
    url = pg_vault.location.conninfo
    assert pg_vault.schema_version() == 1
    [(version, name, applied_at)] = _sql(url, "SELECT * FROM schema_version")
    assert version == 1 and "vault" in name and applied_at > 0
    _sql(url, "INSERT INTO schema_version VALUES (2, 'from the future', 0)")
    with pytest.raises(NewerVersionError, match="schema version 2"):
        PostgresVault(url, master_key=MASTER)


def test_a_readonly_vault_reads_and_refuses_writes(pg_vault: PostgresVault) -> None:
    a = disclosure("a")
    pg_vault.put("r1", [a])
    with PostgresVault(pg_vault.location.conninfo, master_key=MASTER, readonly=True) as reader:
        assert reader.get(a.commitment) == a and reader.commitments("r1") == [a.commitment]
        for write in (
            lambda: reader.put("r1", [disclosure("b")]),
            lambda: reader.erase(run_id="r1"),
            lambda: reader.rotate_master_key(OTHER),
        ):
            with pytest.raises(StoreError, match="read-only"):
                write()
    assert pg_vault.commitments() == [a.commitment]


# -- rotation --------------------------------------------------------------------------------
def test_rotation_rewraps_live_keys_and_strands_erased_ones(
    pg_database: str, tmp_path: Path
) -> None:
    old_file, new_file = _key_file(tmp_path, MASTER, "old.key"), _key_file(tmp_path, OTHER, "new")
    vault = PostgresVault(pg_database, master_key=old_file)
    other = PostgresVault(pg_database, master_key=old_file)  # another host, still on the old key
    gone, live = disclosure("erased-before-rotation"), disclosure("live-at-rotation", salt_byte=1)
    vault.put("r1", [gone])
    vault.put("r2", [live])
    [backup] = [row for row in _sql(pg_database, _ROWS) if row[0] == gone.commitment]
    wrapped = "SELECT commitment, nonce, wrapped_key FROM vault_keys"
    before = {row[0]: row[1:] for row in _sql(pg_database, wrapped)}
    assert vault.erase(commitments=[gone.commitment]) == 1

    assert vault.rotate_master_key(new_file) == 1
    assert vault.get(live.commitment) == live
    [(commitment, *after)] = _sql(pg_database, wrapped)
    assert commitment == live.commitment and tuple(after) != before[live.commitment]
    with pytest.raises(KeyFileError, match="does not open"):
        PostgresVault(pg_database, master_key=old_file)
    for use in (lambda: other.get(live.commitment), lambda: other.put("r3", [disclosure("x")])):
        with pytest.raises(StoreError, match="rotated"):
            use()
    other.close()
    with pytest.raises(UsageError, match="the current one"):
        vault.rotate_master_key(OTHER)
    vault.close()

    with PostgresVault(pg_database, master_key=new_file) as again:
        assert again.commitments() == [live.commitment] and again.get(live.commitment) == live
        # a copy taken before the erasure (a backup, WAL): only the old key opens it ...
        with pytest.raises(InvalidTag):
            _unwrap(OTHER, backup)
        assert AESGCM(_unwrap(MASTER, backup)).decrypt(
            backup[1], backup[2], gone.commitment.encode()
        )  # ... so destroying the old key file is what makes the erasure final there
        # restored into the rotated vault, it is refused, never opened
        commitment, nonce, ciphertext, key_nonce, wrapped = backup
        _sql(
            pg_database,
            "INSERT INTO vault_entries (commitment, run_id, nonce, ciphertext) "
            "VALUES (%s, 'r1', %s, %s)",
            (commitment, nonce, ciphertext),
        )
        _sql(
            pg_database,
            "INSERT INTO vault_keys VALUES (%s, %s, %s)",
            (commitment, key_nonce, wrapped),
        )
        with pytest.raises(StoreError, match="cannot be opened"):
            again.get(gone.commitment)


def test_puts_racing_a_rotation_all_open_under_the_new_key(pg_database: str) -> None:
    vault = PostgresVault(pg_database, master_key=MASTER, pool_size=4)
    stale = PostgresVault(pg_database, master_key=MASTER)  # another host on the old key
    under_way = [threading.Event(), threading.Event()]
    rotated = threading.Event()
    refused: list[BaseException] = []
    failures: list[BaseException] = []

    def put_many(target: PostgresVault, tag: str, started: threading.Event) -> None:
        for i in range(60):
            if i == 10:
                started.set()  # the rotation starts while the vault keeps putting
                if target is stale:  # (however the machine schedules the threads) the
                    rotated.wait(30)  # host on the old key puts its rest after it
            try:
                target.put(tag, [disclosure(f"{tag}-{i}", key=tag)])
            except StoreError as exc:
                (refused if target is stale and "rotated" in str(exc) else failures).append(exc)
            except BaseException as exc:  # pragma: no cover - reported below
                failures.append(exc)

    workers = [
        threading.Thread(target=put_many, args=(vault, "same", under_way[0])),
        threading.Thread(target=put_many, args=(stale, "stale", under_way[1])),
    ]
    for worker in workers:
        worker.start()
    for event in under_way:
        event.wait(30)
    rewrapped = vault.rotate_master_key(OTHER)
    rotated.set()
    for worker in workers:
        worker.join()
    assert failures == []
    assert rewrapped >= 20 and len(refused) == 50  # every put on the old key after it
    assert len(vault.commitments("same")) == 60
    assert len(vault.commitments("stale")) == 60 - len(refused)
    vault.close()
    stale.close()
    with PostgresVault(pg_database, master_key=OTHER) as again:
        assert len(again.commitments()) == 120 - len(refused)
        for commitment in again.commitments():
            assert again.get(commitment) is not None  # every kept entry opens


# -- tampered rows ---------------------------------------------------------------------------
def test_tampered_and_moved_rows_are_refused(pg_vault: PostgresVault) -> None:
    url = pg_vault.location.conninfo
    a, b, c = (disclosure(v, salt_byte=i) for i, v in enumerate(["alpha", "beta", "gamma"]))
    pg_vault.put("r1", [a, b, c])
    rows = {row[0]: row for row in _sql(url, _ROWS)}

    def entry(commitment: str, nonce: bytes, ciphertext: bytes) -> None:
        _sql(
            url,
            "UPDATE vault_entries SET nonce = %s, ciphertext = %s WHERE commitment = %s",
            (nonce, ciphertext, commitment),
        )

    def key(commitment: str, nonce: bytes, wrapped: bytes) -> None:
        _sql(
            url,
            "UPDATE vault_keys SET nonce = %s, wrapped_key = %s WHERE commitment = %s",
            (nonce, wrapped, commitment),
        )

    # a's ciphertext moved onto b (b's key kept), then a's key too
    entry(b.commitment, *rows[a.commitment][1:3])
    with pytest.raises(StoreError, match="ciphertext does not decrypt"):
        pg_vault.get(b.commitment)
    key(b.commitment, *rows[a.commitment][3:5])
    with pytest.raises(StoreError, match="data key does not unwrap"):
        pg_vault.get(b.commitment)
    # c's ciphertext cut short; then its key gone
    entry(c.commitment, rows[c.commitment][1], rows[c.commitment][2][:-1])
    with pytest.raises(StoreError, match="cannot be opened"):
        pg_vault.get(c.commitment)
    _sql(url, "DELETE FROM vault_keys WHERE commitment = %s", (c.commitment,))
    with pytest.raises(StoreError, match="key is missing"):
        pg_vault.get(c.commitment)
    # a well-encrypted entry that does not hold [salt, key, value]
    data_key = _unwrap(MASTER, rows[a.commitment])
    nonce = os.urandom(12)
    entry(a.commitment, nonce, AESGCM(data_key).encrypt(nonce, b"[1,2]", a.commitment.encode()))
    with pytest.raises(StoreError, match=r"does not hold \[salt, key, value\]"):
        pg_vault.get(a.commitment)
    assert pg_vault.commitments() == [a.commitment, b.commitment, c.commitment]  # still listed
    assert pg_vault.erase(run_id="r1") == 3  # and erasable


_COLUMN = {
    "entry nonce": ("vault_entries", "nonce"),
    "ciphertext": ("vault_entries", "ciphertext"),
    "key nonce": ("vault_keys", "nonce"),
    "wrapped key": ("vault_keys", "wrapped_key"),
}


@settings(
    max_examples=scaled(30),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    value=json_values(),
    key=texts(max_size=12),
    salt_byte=st.integers(0, 255),
    column=st.sampled_from(sorted(_COLUMN)),
    index=st.integers(0, 10**6),
    mask=st.integers(1, 255),
)
def test_round_trip_and_any_flipped_byte_is_detected(
    pg_vault: PostgresVault,
    value: Any,
    key: str,
    salt_byte: int,
    column: str,
    index: int,
    mask: int,
) -> None:
    d = disclosure(value, key=key, salt_byte=salt_byte)
    pg_vault.put("r", [d])
    assert pg_vault.get(d.commitment) == d
    url = pg_vault.location.conninfo
    table, name = _COLUMN[column]
    [(original,)] = _sql(url, f"SELECT {name} FROM {table} WHERE commitment = %s", (d.commitment,))
    flipped = bytearray(original)
    flipped[index % len(flipped)] ^= mask
    update = f"UPDATE {table} SET {name} = %s WHERE commitment = %s"
    _sql(url, update, (bytes(flipped), d.commitment))
    with pytest.raises(StoreError, match="cannot be opened"):
        pg_vault.get(d.commitment)
    _sql(url, update, (original, d.commitment))
    assert pg_vault.get(d.commitment) == d


# -- concurrency, connections, bad input -----------------------------------------------------
def test_puts_in_opposite_orders_survive_deadlocks(pg_database: str) -> None:
    """Two puts taking the same commitments in opposite orders deadlock in PostgreSQL; the
    loser's transaction is rolled back whole and run again."""
    [(name,)] = _sql(pg_database, "SELECT current_database()")
    with contextlib.suppress(psycopg.errors.InsufficientPrivilege):  # the default 1 s is slower
        _sql(pg_database, f"ALTER DATABASE \"{name}\" SET deadlock_timeout = '20ms'")
    vault = PostgresVault(pg_database, master_key=MASTER, pool_size=2)
    failures: list[BaseException] = []
    rounds = 15

    def work(reverse: bool) -> None:
        for i in range(rounds):
            batch = [disclosure(f"batch-{i}-{side}", salt_byte=i) for side in "abcdefgh"]
            barrier.wait()
            try:
                vault.put("r", batch[::-1] if reverse else batch)
            except BaseException as exc:  # pragma: no cover - reported below
                failures.append(exc)

    barrier = threading.Barrier(2)
    workers = [threading.Thread(target=work, args=(flag,)) for flag in (False, True)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    try:
        assert failures == []
        assert len(vault.commitments()) == 8 * rounds
        assert all(vault.get(c) is not None for c in vault.commitments())
    finally:
        vault.close()


def test_an_unreachable_server_is_a_typed_error() -> None:
    from agentfootprint.errors import StoreUnavailableError

    with pytest.raises(StoreUnavailableError):
        PostgresVault("postgresql://nobody@127.0.0.1:1/vault", master_key=MASTER, timeout=1)


def test_what_cannot_be_stored_is_refused_before_the_database(pg_vault: PostgresVault) -> None:
    good = disclosure("fine")
    for run_id, bad in (
        ("r\x00", good),
        (7, good),
        ("r", disclosure("x").__class__(commitment="a\x00", salt="00", key="k", value=1)),
        ("r", disclosure("x").__class__(commitment="\ud800", salt="00", key="k", value=1)),
        ("r", disclosure("x").__class__(commitment="c" * 64, salt=1, key="k", value=1)),
    ):
        with pytest.raises(StoreError, match=r"must be a string|NUL or a lone surrogate"):
            pg_vault.put(run_id, [good, bad])  # type: ignore[arg-type]
    assert pg_vault.commitments() == []
    with pytest.raises(UsageError, match="a commitment is a string"):
        pg_vault.erase(commitments=[7])  # type: ignore[list-item]
    with_nul_key = disclosure("v", key="k\x00ey")  # inside the encrypted JSON: fine
    pg_vault.put("r", [with_nul_key])
    assert pg_vault.get(with_nul_key.commitment) == with_nul_key


def test_durability_in_the_url(pg_database: str) -> None:
    joiner = "&" if "?" in pg_database else "?"
    with PostgresVault(f"{pg_database}{joiner}durability=normal", master_key=MASTER) as vault:
        assert vault.durability == "normal"
        vault.put("r", [disclosure("n")])
    with PostgresVault(pg_database, master_key=MASTER) as vault:
        assert vault.durability == "full" and vault.commitments() == [disclosure("n").commitment]


def test_a_damaged_entry_stops_a_rotation_whole(pg_vault: PostgresVault) -> None:
    url = pg_vault.location.conninfo
    a, b = disclosure("a"), disclosure("b", salt_byte=1)
    pg_vault.put("r", [a, b])
    _sql(
        url,
        "UPDATE vault_keys SET wrapped_key = %s WHERE commitment = %s",
        (bytes(48), b.commitment),
    )
    with pytest.raises(StoreError, match="rotation was rolled back"):
        pg_vault.rotate_master_key(OTHER)
    assert pg_vault.get(a.commitment) == a  # still the old key, every row as it was
    assert _sql(url, "SELECT fingerprint FROM vault_master") == [(key_fingerprint(MASTER),)]
    pg_vault.erase(commitments=[b.commitment])
    assert pg_vault.rotate_master_key(OTHER) == 1
    assert pg_vault.get(a.commitment) == a
