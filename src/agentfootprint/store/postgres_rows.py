"""A flush's rows as PostgreSQL receives them: one statement per batch, prepared once per
session, its parameters already in PostgreSQL's binary format.

:func:`write_batch` is a flush's usual path: the batch as one ``INSERT ... VALUES`` of as
many rows as it holds (one prepared statement per batch size on each session, made the
first time that size is written there; a batch of more than :data:`VALUES_ROWS` rows goes as
columns of binary arrays through ``unnest``), sent through libpq itself
(``PGconn.send_query_prepared``: one Bind/Execute/Sync) and waited for by psycopg's own wait
on the socket, so that a Ctrl-C meanwhile cancels the statement on the server as for any
psycopg query (a blocking ``exec_prepared`` would save a tenth of this path's instructions
and ignore Ctrl-C until the server answered). Going through psycopg's cursor instead cost
about as much client CPU again as the round trip itself (the cursor, its query and result
objects), and packing the columns as arrays in Python more than building the row values;
the statement's answer is only "done". :func:`statement` is the array form for a psycopg
cursor, where the batch shares a transaction or a pipeline with other statements.
"""

from __future__ import annotations

import functools
import struct
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

from agentfootprint.store.base import StoredEvent, run_index_from_open

if TYPE_CHECKING:
    import psycopg

__all__ = ["VALUES_ROWS", "register_arrays", "statement", "write_batch"]

#: the largest batch written as ``VALUES`` rows (one prepared statement per size up to it)
VALUES_ROWS: Final = 32

_INTO: Final = "INSERT INTO events (run_id, seq, type, ts, body, event_hash, chain_hash) "
_ARRAYS: Final = (
    "SELECT {0}, {1}::integer + u.o::integer - 1, u.t, u.ts, u.b, u.e, u.c "
    "FROM unnest({2}::text[], {3}::bigint[], {4}::bytea[], {5}::bytea[], {6}::bytea[]) "
    "WITH ORDINALITY AS u(t, ts, b, e, c, o)"
)
_OPEN: Final = (
    "WITH opened AS (INSERT INTO runs (run_id, conversation_id, parent_run_id, opened_at) "
    "VALUES ({0}, {1}, {2}, {3})) "
)
#: the psycopg forms (binary parameters)
_INSERT_ROWS: Final = _INTO + _ARRAYS.format(*["%b"] * 7)
_OPEN_RUN: Final = _OPEN.format(*["%b"] * 4)

#: type oids
_TEXT, _INT4, _INT8, _BYTEA = 25, 23, 20, 17
_TEXT_ARRAY, _INT8_ARRAY, _BYTEA_ARRAY = 1009, 1016, 1001
#: a statement's first parameters: run id and first seq, then, opening the run, its index row
_HEAD_TYPES: Final = {False: [_TEXT, _INT4], True: [_TEXT, _INT4, _TEXT, _TEXT, _INT8]}
_ROW_TYPES: Final = [_TEXT, _INT8, _BYTEA, _BYTEA, _BYTEA]
_ARRAY_TYPES: Final = [_TEXT_ARRAY, _INT8_ARRAY, _BYTEA_ARRAY, _BYTEA_ARRAY, _BYTEA_ARRAY]
_COMMAND_OK: Final = 1  # psycopg.pq.ExecStatus.COMMAND_OK (psycopg is imported lazily)
_MISSING_STATEMENT: Final = "26000"  # invalid_sql_statement_name

#: the statements prepared on each session, by name (a session is one thread's at a time)
_prepared: weakref.WeakKeyDictionary[Any, set[bytes]] = weakref.WeakKeyDictionary()


@functools.cache
def _prepared_statement(opens: bool, rows: int) -> tuple[bytes, bytes, list[int], list[int]]:
    """(name, text, parameter types, formats) of the statement writing ``rows`` rows (0:
    any number, as arrays), ``opens``: with the run index row."""
    head = _OPEN.format("$1", "$3", "$4", "$5") if opens else ""
    first = len(_HEAD_TYPES[opens]) + 1
    if rows:
        values = ", ".join(
            f"($1, $2 + {k}, " + ", ".join(f"${first + 5 * k + j}" for j in range(5)) + ")"
            for k in range(rows)
        )
        text = head + _INTO + "VALUES " + values
        types = _HEAD_TYPES[opens] + _ROW_TYPES * rows
    else:
        text = head + _INTO + _ARRAYS.format("$1", "$2", *(f"${first + j}" for j in range(5)))
        types = _HEAD_TYPES[opens] + _ARRAY_TYPES
    name = f"agentfootprint_{'open' if opens else 'rows'}_{rows or 'arrays'}".encode()
    return name, text.encode(), types, [1] * len(types)


def write_batch(conn: psycopg.Connection[Any], events: Sequence[StoredEvent]) -> None:
    """A batch's one statement, on its own (atomic by itself: one implicit transaction), as
    a statement prepared on the session, through libpq: one round trip (two the first time
    a batch of its size is written on the session). ``conn`` holds no transaction."""
    first = events[0]
    opens = first.seq == 0
    count = len(events)
    rows = count if count <= VALUES_ROWS else 0
    name, text, types, formats = _prepared_statement(opens, rows)
    # bytes, or None for NULL (libpq's own convention; psycopg's stubs leave None out)
    params: list[Any] = [first.run_id.encode(), _I4.pack(first.seq)]
    if opens:
        conversation, parent = run_index_from_open(first)
        params += (
            conversation.encode(),
            None if parent is None else parent.encode(),
            _I8.pack(first.ts),
        )
    if rows:
        for e in events:
            params += (e.type.encode(), _I8.pack(e.ts), e.body, e.event_hash, e.chain_hash)
    else:
        params += _columns(events)
    done = _prepared.get(conn)
    if done is None or name not in done:
        _prepare(conn, name, text, types)
    result = _execute(conn, name, params, formats)
    if result.status != _COMMAND_OK:
        error = _error(conn, result)
        if getattr(error, "sqlstate", None) != _MISSING_STATEMENT:
            raise error
        # the session lost its prepared statements (DISCARD ALL, a pooler's new session):
        # nothing was written; prepare again and write once more
        _prepared.pop(conn, None)
        _prepare(conn, name, text, types)
        result = _execute(conn, name, params, formats)
        if result.status != _COMMAND_OK:
            raise _error(conn, result)


def _execute(
    conn: psycopg.Connection[Any], name: bytes, params: list[Any], formats: list[int]
) -> Any:
    """The prepared statement's one result, the wait on the socket psycopg's own (a Ctrl-C
    meanwhile cancels the statement on the server, as for any psycopg query)."""
    pgconn = conn.pgconn
    pgconn.send_query_prepared(name, params, formats)
    return conn.wait(_driver_execute()(pgconn))[-1]


@functools.cache
def _driver_execute() -> Any:
    from psycopg.generators import execute

    return execute


def _prepare(conn: psycopg.Connection[Any], name: bytes, text: bytes, types: list[int]) -> None:
    conn.pgconn.send_prepare(name, text, types)
    result = conn.wait(_driver_execute()(conn.pgconn))[-1]
    if result.status != _COMMAND_OK:
        raise _error(conn, result)
    _prepared.setdefault(conn, set()).add(name)


def _error(conn: psycopg.Connection[Any], result: Any) -> Exception:
    """The driver's exception for a failed libpq call, as its cursor would have raised it
    (a broken session is an ``OperationalError``: the server went away)."""
    import psycopg
    from psycopg import errors, pq

    if conn.pgconn.status != pq.ConnStatus.OK:
        message = (result.error_message or b"").decode(errors="replace").strip()
        return psycopg.OperationalError(message or "the connection to the server was lost")
    return errors.error_from_result(result, encoding=conn.info.encoding)


def statement(events: Sequence[StoredEvent]) -> tuple[str, list[Any]]:
    """The one statement writing a batch's rows, for a psycopg cursor, and for a batch that
    opens its run the run index row too (a primary key refuses a second opening)."""
    first = events[0]
    columns = [kind(column) for kind, column in zip(_ARRAY_KINDS, _columns(events), strict=True)]
    params: list[Any] = [first.run_id, first.seq, *columns]
    if first.seq != 0:
        return _INSERT_ROWS, params
    conversation, parent = run_index_from_open(first)
    return _OPEN_RUN + _INSERT_ROWS, [first.run_id, conversation, parent, first.ts, *params]


_HEAD: Final = struct.Struct("!iiIii")  # one dimension, no NULL, element type, length, from 1
_I4: Final = struct.Struct("!i")
_I8: Final = struct.Struct("!q")
_LENGTH_8: Final = _I4.pack(8)
_LENGTH_32: Final = _I4.pack(32)


def _columns(events: Sequence[StoredEvent]) -> list[bytes]:
    """The five columns of a batch as PostgreSQL binary arrays (text, int8, bytea x 3); the
    hashes' arrays are built by one join each (every item 32 bytes long)."""
    n = len(events)
    pack = _I4.pack
    types = [e.type.encode() for e in events]
    hashes = [e.event_hash for e in events], [e.chain_hash for e in events]
    if any(len(h) != 32 for column in hashes for h in column):
        raise ValueError("an event hash or chain hash is not 32 bytes")
    return [
        b"".join([_HEAD.pack(1, 0, _TEXT, n, 1), *[x for t in types for x in (pack(len(t)), t)]]),
        _LENGTH_8.join([_HEAD.pack(1, 0, _INT8, n, 1), *[_I8.pack(e.ts) for e in events]]),
        b"".join(
            [
                _HEAD.pack(1, 0, _BYTEA, n, 1),
                *[x for e in events for x in (pack(len(e.body)), e.body)],
            ]
        ),
        *(_LENGTH_32.join([_HEAD.pack(1, 0, _BYTEA, n, 1), *column]) for column in hashes),
    ]


class _Array(bytes):
    """A column already in PostgreSQL's binary array format, for a psycopg cursor: the
    dumper :func:`register_arrays` installs hands the bytes over as they are (the driver's
    generic list adaptation would inspect every element in Python); a subclass per array
    type says which."""

    oid: int = 0


class _TextArray(_Array):
    oid = _TEXT_ARRAY


class _Int8Array(_Array):
    oid = _INT8_ARRAY


class _ByteaArray(_Array):
    oid = _BYTEA_ARRAY


_ARRAY_KINDS: Final = (_TextArray, _Int8Array, _ByteaArray, _ByteaArray, _ByteaArray)


def register_arrays(conn: psycopg.Connection[Any]) -> None:
    """Teach a connection the :class:`_Array` types (every session of the log's pool)."""
    for kind, dumper in _array_dumpers():
        conn.adapters.register_dumper(kind, dumper)


@functools.cache
def _array_dumpers() -> list[tuple[type[_Array], type[Any]]]:
    from psycopg.adapt import Dumper
    from psycopg.pq import Format

    def dumper(kind: type[_Array]) -> type[Any]:
        class ArrayDumper(Dumper):
            format = Format.BINARY
            oid = kind.oid

            def dump(self, obj: Any) -> bytes:
                return obj  # type: ignore[no-any-return]

        return ArrayDumper

    return [(kind, dumper(kind)) for kind in (_TextArray, _Int8Array, _ByteaArray)]
