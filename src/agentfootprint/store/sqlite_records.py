"""Storage schema 4's records: how an append's rows are written into ``appends.data`` and
read back (docs/log-format.md section 4, "Records" and "Reading").

A record holds either the body whole (form 0) or, for the four row types a writer makes most
(write, commit marker, receipt, a continued run's ``run.open``), the fields the body is rebuilt
from (form 1). The writer's side (:class:`RecordEncoder`) keeps form 1 only when the rebuild equals
the exact bytes it was handed, so every body reads back byte for byte whoever wrote it.

Decoding is fail-closed and bounded: a record that does not decode gives a row with no body
(the verifier fails it, code rows), never an exception, and every output byte is paid for by
stored bytes (names and templates a record expands are capped in size).
:mod:`agentfootprint.store.sqlite_appends` holds the layout that stores them.
"""

from __future__ import annotations

import functools
import re
import sqlite3
from typing import Any, Final

import orjson

from agentfootprint.logformat.canonical import MAX_SAFE_INT, canon
from agentfootprint.logformat.chain import DERIVED
from agentfootprint.store.base import StoredEvent
from agentfootprint.store.sqlite_layout import TYPE_CODES, fetch_all

__all__ = [
    "MAX_COMPACT_BODY",
    "MAX_NAMES",
    "MAX_NAME_BYTES",
    "MAX_PARENT_ID_BYTES",
    "MAX_TEMPLATE_BYTES",
    "NameIds",
    "RecordEncoder",
    "RecordTables",
    "decode_append",
    "encode_whole",
    "last_type",
    "uvarint",
]

#: a ``names`` text a record may name, in UTF-8 bytes (longer: the row is kept whole)
MAX_NAME_BYTES: Final = 256
#: a parent run id a ``run.open`` record may name, in UTF-8 bytes
MAX_PARENT_ID_BYTES: Final = 1024
#: an ``opens`` template's three parts together, in bytes
MAX_TEMPLATE_BYTES: Final = 16384
#: the ``names`` rows a writer adds at most (then it keeps rows whole)
MAX_NAMES: Final = 4096
#: a body longer than this is kept whole by the writer (form 1 would save a few dozen bytes
#: of it, and matching and rebuilding it copies it several times: a 50 MB tool result)
MAX_COMPACT_BODY: Final = 64 * 1024

_SEQ_BITS = 32
_SEQ_MASK = (1 << _SEQ_BITS) - 1
_MAX_ID = (1 << 63) - 1  # SQLite's largest integer: a larger id names no row
_U64 = (1 << 64) - 1
_TYPE_NAMES = {code: name for name, code in TYPE_CODES.items()}
_OPEN, _WRITE, _RECEIPT, _COMMIT = (
    TYPE_CODES[t] for t in ("run.open", "write", "receipt", "commit")
)
_VERBS = {b"set": 1, b"append": 2, b"merge": 3, b"delete": 4}
_VERB_NAMES = {code: name for name, code in _VERBS.items()}
_HEX64 = re.compile(r"[0-9a-f]{64}")
_WRITE_BODY = re.compile(
    rb'\{"commit":(0|[1-9][0-9]{0,15}),"path":("(?:[^"\\]|\\.)*")(?:,"value":(.*))?,'
    rb'"verb":"(set|append|merge|delete)"\}',
    re.S,
)
_LISTS = ("system", "messages", "tools")
_MARKER_KEYS = frozenset({"commit", "stage", "stage_run", "writes"})
_RECEIPT_KEYS = frozenset(
    {"call", "commit", "messages", "model", "params", "request", "system", "tools"}
)


_ONE_BYTE = tuple(bytes((value,)) for value in range(0x80))


class _Undecodable(Exception):
    """A record that does not decode (docs/log-format.md section 4, schema 4)."""


# -- varints ----------------------------------------------------------------------------------


def uvarint(value: int) -> bytes:
    """Unsigned LEB128: 7 bits a byte, low first, the high bit set on all but the last."""
    if value < 0x80:
        return _ONE_BYTE[value]
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _opt(data: bytes | None) -> bytes:
    return b"\x00" if data is None else uvarint(len(data) + 1) + data


class _Reader:
    """A cursor over one append's ``data``; every read past the end is :class:`_Undecodable`."""

    __slots__ = ("data", "i")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.i = 0

    def u(self) -> int:
        data, i = self.data, self.i
        if i < len(data) and data[i] < 0x80:  # most values fit in one byte
            self.i = i + 1
            return data[i]
        value = shift = 0
        for _ in range(10):
            if i >= len(data):
                raise _Undecodable("the data ends inside a varint")
            byte = data[i]
            i += 1
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                if value > _U64:
                    raise _Undecodable("a varint above 2^64 - 1")
                self.i = i
                return value
            shift += 7
        raise _Undecodable("a varint longer than 10 bytes")

    def safe(self) -> int:
        """A uvarint a body holds as a JSON integer: at most 2^53 - 1."""
        value = self.u()
        if value > MAX_SAFE_INT:
            raise _Undecodable("an integer above 2^53 - 1")
        return value

    def take(self, size: int) -> bytes:
        end = self.i + size
        if end > len(self.data):
            raise _Undecodable("the data ends inside a record")
        out = self.data[self.i : end]
        self.i = end
        return out

    def blob(self) -> bytes:
        return self.take(self.u())

    def opt(self) -> bytes | None:
        size = self.u()
        return None if size == 0 else self.take(size - 1)


# -- the rebuilds (the reader's side, and the writer's check) ---------------------------------


def _write_body(number: int, path: bytes, verb: int, value: bytes | None) -> bytes:
    member = b"" if value is None else b',"value":' + value
    return b'{"commit":%d,"path":%s%s,"verb":"%s"}' % (number, path, member, _VERB_NAMES[verb])


def _commit_body(number: int, stage: bytes, k: int, writes: int, decision: bytes | None) -> bytes:
    # canon(stage "#" k) is canon(stage) with "#k" before its closing quote (RFC 8785
    # escapes character by character, and neither "#" nor a digit is escaped)
    said = b"" if decision is None else b'"decision":%s,' % decision
    return b'{"commit":%d,%s"stage":%s,"stage_run":%s#%d","writes":%d}' % (
        number,
        said,
        stage,
        stage[:-1],
        k,
        writes,
    )


def _receipt_body(number: int, model: bytes, call: int, packed: bytes) -> bytes:
    reader = _Reader(packed)
    counts = [reader.safe() for _ in range(6)]
    request = reader.take(32).hex().encode()
    lists = []
    for kind in range(3):
        keep, count = counts[2 * kind], counts[2 * kind + 1]
        if count > (len(packed) - reader.i) // 32:
            raise _Undecodable("a receipt names more digests than it holds")
        digests = b",".join(b'"%s"' % reader.take(32).hex().encode() for _ in range(count))
        lists.append(b'{"add":[%s],"keep":%d}' % (digests, keep))
    params = packed[reader.i :]
    return (
        b'{"call":%d,"commit":%d,"messages":%s,"model":%s,"params":%s,"request":"%s",'
        b'"system":%s,"tools":%s}'
        % (call, number, lists[1], model, params, request, lists[0], lists[2])
    )


def _parent_value(events: int, head: bytes, parent: bytes) -> bytes:
    return b'{"events":%d,"head":"%s","run_id":%s}' % (events, head.hex().encode(), parent)


# -- the writer's side: a row's record ---------------------------------------------------------


@functools.lru_cache(maxsize=1024)
def _quoted_name(raw: bytes) -> str | None:
    """The text of a JSON string written canonically (``canon(text) == raw``) and short
    enough to be a name; None otherwise."""
    if len(raw) > MAX_NAME_BYTES + 2:
        return None
    try:
        text = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(text, str) or len(text.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
        return None
    try:
        return text if canon(text) == raw else None
    except (TypeError, ValueError):
        return None


def encode_whole(code: int, dts: int, body: bytes) -> bytes:
    """A form-0 record: the body whole."""
    return uvarint(code << 1) + uvarint(_zigzag(dts)) + uvarint(len(body)) + body


def _zigzag(value: int) -> int:
    return value << 1 if value >= 0 else (-value << 1) - 1


class NameIds:
    """The writer's ``names`` and ``opens`` lookups. Ids written in a transaction are kept
    aside until it commits (:meth:`committed`), so a rolled-back id is never named again."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self.staged: dict[str, int] = {}

    def begin(self) -> None:
        self.staged.clear()

    def committed(self) -> None:
        self.ids.update(self.staged)
        self.staged.clear()

    def id_of(self, conn: sqlite3.Connection, text: str) -> int | None:
        found = self.ids.get(text)
        if found is None:
            found = self.staged.get(text)
        if found is not None:
            return found
        row = conn.execute(
            "SELECT id FROM names WHERE text = ? ORDER BY id LIMIT 1", (text,)
        ).fetchone()
        if row is not None and type(row[0]) is int:
            self.staged[text] = row[0]
            return int(row[0])
        (held,) = conn.execute("SELECT COUNT(*) FROM names").fetchone()
        if held >= MAX_NAMES:
            return None
        new = conn.execute("INSERT INTO names (text) VALUES (?)", (text,)).lastrowid
        assert new is not None
        self.staged[text] = new
        return new


class RecordEncoder:
    """Turns one append's rows into records (the writer's side of the codec)."""

    def __init__(self, conn: sqlite3.Connection, names: NameIds) -> None:
        self.conn = conn
        self.names = names

    def record(self, event: StoredEvent, dts: int) -> tuple[bytes, ...]:
        """The row's record, in parts (the append's ``data`` joins them: a long body is
        copied once, into it)."""
        code = TYPE_CODES[event.type]
        body = event.body
        fields: bytes | None = None
        if len(body) > MAX_COMPACT_BODY:
            pass  # kept whole
        elif code == _WRITE:
            fields = self._write(body)
        elif code == _COMMIT:
            fields = self._commit(body)
        elif code == _RECEIPT:
            fields = self._receipt(body)
        elif code == _OPEN and event.seq == 0:
            fields = self._open(event.run_id, body)
        if fields is None:
            return uvarint(code << 1) + uvarint(_zigzag(dts)) + uvarint(len(body)), body
        return (uvarint((code << 1) | 1) + uvarint(_zigzag(dts)) + fields,)

    def _write(self, body: bytes) -> bytes | None:
        match = _WRITE_BODY.fullmatch(body)
        if match is None:
            return None
        number, path = int(match[1]), _quoted_name(match[2])
        if number > MAX_SAFE_INT or path is None:
            return None
        verb, value = _VERBS[match[4]], match[3]
        if _write_body(number, match[2], verb, value) != body:
            return None
        name = self.names.id_of(self.conn, path)
        if name is None:
            return None
        return uvarint(number) + uvarint(name) + uvarint(verb) + _opt(value)

    def _commit(self, body: bytes) -> bytes | None:
        # a conversation's runs repeat their markers: the small ones are looked up once
        fields = _cached_marker(body) if len(body) <= 512 else _marker_fields(body)
        if fields is None:
            return None
        number, stage, k, writes, said = fields
        name = self.names.id_of(self.conn, stage)
        if name is None:
            return None
        return uvarint(number) + uvarint(name) + uvarint(k) + uvarint(writes) + _opt(said)

    def _receipt(self, body: bytes) -> bytes | None:
        parsed = _parsed(body)
        if parsed is None or set(parsed) != _RECEIPT_KEYS:
            return None
        call, number, model, request = map(
            parsed.__getitem__, ("call", "commit", "model", "request")
        )
        if not (
            _safe(call)
            and _safe(number)
            and isinstance(model, str)
            and isinstance(request, str)
            and _HEX64.fullmatch(request)
        ):
            return None
        counts: list[bytes] = []
        digests: list[bytes] = []
        for kind in _LISTS:
            held = parsed[kind]
            if not (
                isinstance(held, dict)
                and set(held) == {"add", "keep"}
                and _safe(held["keep"])
                and isinstance(held["add"], list)
                and all(isinstance(h, str) and _HEX64.fullmatch(h) for h in held["add"])
            ):
                return None
            counts += [uvarint(held["keep"]), uvarint(len(held["add"]))]
            digests += [bytes.fromhex(h) for h in held["add"]]
        quoted = _name_text(model)
        try:
            params = canon(parsed["params"])
        except (TypeError, ValueError):
            return None
        if quoted is None:
            return None
        packed = b"".join(counts) + bytes.fromhex(request) + b"".join(digests) + params
        try:
            if _receipt_body(number, quoted, call, packed) != body:
                return None
        except _Undecodable:
            return None
        name = self.names.id_of(self.conn, model)
        if name is None:
            return None
        return uvarint(number) + uvarint(name) + uvarint(call) + uvarint(len(packed)) + packed

    def _open(self, run_id: str, body: bytes) -> bytes | None:
        parsed = _parsed(body)
        parent = parsed.get("parent") if parsed is not None else None
        if not (
            isinstance(parent, dict)
            and set(parent) == {"events", "head", "run_id"}
            and _safe(parent["events"])
            and isinstance(parent["head"], str)
            and _HEX64.fullmatch(parent["head"])
            and isinstance(parent["run_id"], str)
        ):
            return None
        parent_id = _canon_text(parent["run_id"])
        own_id = _canon_text(run_id)
        if parent_id is None or own_id is None or len(parent_id) > MAX_PARENT_ID_BYTES + 2:
            return None
        row = self.conn.execute(
            "SELECT run_key FROM run_keys WHERE run_id = ?", (parent["run_id"],)
        ).fetchone()
        if row is None or type(row[0]) is not int:
            return None
        head = bytes.fromhex(parent["head"])
        value = _parent_value(parent["events"], head, parent_id)
        start = body.find(b'"parent":' + value)
        end = body.rfind(b'"run_id":' + own_id)
        if start < 0 or end < start:
            return None
        start += len(b'"parent":')
        end += len(b'"run_id":')
        pieces = (body[:start], body[start + len(value) : end], body[end + len(own_id) :])
        if sum(map(len, pieces)) > MAX_TEMPLATE_BYTES:
            return None
        if pieces[0] + value + pieces[1] + own_id + pieces[2] != body:
            return None
        template = self._template(row[0], pieces)
        return uvarint(template) + uvarint(parent["events"]) + uvarint(row[0]) + head

    def _template(self, parent_key: int, pieces: tuple[bytes, bytes, bytes]) -> int:
        """The parent's template when it is the same, else a new ``opens`` row (a
        conversation's runs share the first one)."""
        found = self.conn.execute(
            "SELECT data FROM appends WHERE pos = ?", (parent_key << _SEQ_BITS,)
        ).fetchone()
        if found is not None and isinstance(found[0], bytes):
            try:
                reader = _Reader(found[0])
                if reader.u() == (_OPEN << 1) | 1:
                    reader.u()
                    held = reader.u()
                    if held <= _MAX_ID:
                        row = self.conn.execute(
                            "SELECT prefix, middle, suffix FROM opens WHERE id = ?", (held,)
                        ).fetchone()
                        if row is not None and tuple(row) == pieces:
                            return held
            except _Undecodable:
                pass
        new = self.conn.execute(
            "INSERT INTO opens (prefix, middle, suffix) VALUES (?, ?, ?)", pieces
        ).lastrowid
        assert new is not None
        return new


def _marker_fields(body: bytes) -> tuple[int, str, int, int, bytes | None] | None:
    """``(commit, stage, k, writes, decision as UTF-8)`` of a commit marker that form 1
    rebuilds exactly; None for any other body (stored whole)."""
    parsed = _parsed(body)
    if parsed is None or set(parsed) - {"decision"} != _MARKER_KEYS:
        return None
    stage, number, run, writes = map(parsed.__getitem__, ("stage", "commit", "stage_run", "writes"))
    decision = parsed.get("decision")
    quoted = _name_text(stage)
    if not (quoted is not None and isinstance(run, str) and _safe(number) and _safe(writes)):
        return None
    prefix, _, k_text = run.rpartition("#")
    if prefix != stage or not k_text.isascii() or not k_text.isdigit():
        return None
    k = int(k_text)
    said = rebuilt = None
    if decision is not None:
        rebuilt = _canon_text(decision)
        if rebuilt is None:  # not text, or not text UTF-8 can hold
            return None
        said = decision.encode("utf-8")
    if k > MAX_SAFE_INT or _commit_body(number, quoted, k, writes, rebuilt) != body:
        return None
    return number, stage, k, writes, said


_cached_marker = functools.lru_cache(maxsize=1024)(_marker_fields)


def _parsed(body: bytes) -> dict[str, Any] | None:
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def _safe(value: Any) -> bool:
    return type(value) is int and 0 <= value <= MAX_SAFE_INT


def _canon_text(text: Any) -> bytes | None:
    """``canon(text)``, or None for a value that is not text JSON can hold."""
    if not isinstance(text, str):
        return None
    try:
        return canon(text)
    except (TypeError, ValueError):
        return None


def _name_text(text: Any) -> bytes | None:
    """``canon(text)`` of text short enough to be a name (:data:`MAX_NAME_BYTES`)."""
    quoted = _canon_text(text)
    if quoted is None or len(text.encode("utf-8")) > MAX_NAME_BYTES:
        return None
    return quoted


# -- the reader's side ---------------------------------------------------------------------------


class RecordTables:
    """What the records of one run's read refer to: ``names``, ``opens`` and ``run_keys``
    rows, each fetched once (as stored: a value of the wrong type or size makes the record
    naming it undecodable), and the run's own id as JSON (None: not text JSON can hold).
    ``known``: names found by earlier reads of the same file (a ``names`` row never changes:
    the append-only triggers), shared so each is fetched once per store."""

    def __init__(
        self, conn: sqlite3.Connection, run_id: str, known: dict[int, bytes] | None = None
    ) -> None:
        self.conn = conn
        self.own_id = _canon_text(run_id)
        self.known = {} if known is None else known
        self.names: dict[int, bytes | None] = {}
        self.opens: dict[int, tuple[bytes, bytes, bytes] | None] = {}
        self.keys: dict[int, bytes | None] = {}

    def _row(self, sql: str, id_: int) -> tuple[Any, ...] | None:
        found = fetch_all(self.conn, sql, (id_,)) if id_ <= _MAX_ID else []
        return tuple(found[0]) if found else None

    def name(self, id_: int) -> bytes:
        found = self.known.get(id_)
        if found is not None:
            return found
        if id_ not in self.names:
            row = self._row("SELECT text FROM names WHERE id = ?", id_)
            self.names[id_] = _name_text(row[0]) if row else None
            if self.names[id_] is not None and len(self.known) < MAX_NAMES:
                self.known[id_] = self.names[id_]  # type: ignore[assignment]
        found = self.names[id_]
        if found is None:
            raise _Undecodable(f"no name {id_}")
        return found

    def template(self, id_: int) -> tuple[bytes, bytes, bytes]:
        if id_ not in self.opens:
            row = self._row("SELECT prefix, middle, suffix FROM opens WHERE id = ?", id_)
            whole = row is not None and all(type(p) is bytes for p in row)
            fits = whole and sum(map(len, row)) <= MAX_TEMPLATE_BYTES  # type: ignore[arg-type]
            self.opens[id_] = (row[0], row[1], row[2]) if fits and row else None
        found = self.opens[id_]
        if found is None:
            raise _Undecodable(f"no template {id_}")
        return found

    def parent(self, key: int) -> bytes:
        if key not in self.keys:
            row = self._row("SELECT run_id FROM run_keys WHERE run_key = ?", key)
            quoted = _canon_text(row[0]) if row else None
            fits = quoted is not None and len(row[0].encode()) <= MAX_PARENT_ID_BYTES  # type: ignore[index]
            self.keys[key] = quoted if fits else None
        found = self.keys[key]
        if found is None:
            raise _Undecodable(f"no run key {key}")
        return found


def _body(reader: _Reader, code: int, seq: int, tables: RecordTables) -> bytes:
    """The body a form-1 record of type ``code`` rebuilds."""
    if code == _WRITE:
        number, name, verb = reader.safe(), reader.u(), reader.u()
        value = reader.opt()
        if verb not in _VERB_NAMES:
            raise _Undecodable("an unknown verb")
        return _write_body(number, tables.name(name), verb, value)
    if code == _COMMIT:
        number, name, k, writes = reader.safe(), reader.u(), reader.safe(), reader.safe()
        said = reader.opt()
        return _commit_body(number, tables.name(name), k, writes, _decision(said))
    if code == _RECEIPT:
        number, name, call = reader.safe(), reader.u(), reader.safe()
        return _receipt_body(number, tables.name(name), call, reader.blob())
    if code == _OPEN:
        template, events, parent = reader.u(), reader.safe(), reader.u()
        head = reader.take(32)
        own_id = tables.own_id
        if seq != 0 or own_id is None:
            raise _Undecodable("a compact run.open that is not the run's first row")
        prefix, middle, suffix = tables.template(template)
        return (
            prefix + _parent_value(events, head, tables.parent(parent)) + middle + own_id + suffix
        )
    raise _Undecodable("form 1 of a type that has none")


@functools.lru_cache(maxsize=256)
def _decision(said: bytes | None) -> bytes | None:
    """``canon`` of a stored decision (None for none)."""
    if said is None:
        return None
    try:
        return canon(said.decode("utf-8"))
    except (UnicodeDecodeError, TypeError, ValueError):
        raise _Undecodable("a decision that is not UTF-8 text") from None


def decode_append(
    run_id: str, first: int, count: Any, ts: Any, head: Any, data: Any, tables: RecordTables
) -> list[tuple[Any, ...]]:
    """One ``appends`` row's rows ``(run_id, seq, type, ts, body, DERIVED, chain_hash)``,
    seqs from ``first``, hashing nothing: ``chain_hash`` is the stored head on the last row
    and :data:`DERIVED` before it. From the first record that does not decode, one row with
    no body stands for the rest (the verifier stops there, code rows), so the rows given are
    never more than the records ``data`` holds, plus one."""
    out: list[tuple[Any, ...]] = []
    sound = (
        type(count) is int
        and count >= 1
        and type(ts) is int
        and type(head) is bytes
        and len(head) == 32
        and type(data) is bytes
    )
    if not sound:
        return [(run_id, first, None, None, None, DERIVED, None)]
    reader = _Reader(data)
    u, blob, add, names, derived = reader.u, reader.blob, out.append, _TYPE_NAMES, DERIVED
    now = ts
    seq = first
    try:  # each record takes 2 bytes or more: the loop ends with the data
        for seq in range(first, first + count):
            tag, delta = u(), u()
            type_ = names.get(tag >> 1)
            if type_ is None:
                raise _Undecodable(f"unknown tag {tag}")
            if seq != first:
                now += delta >> 1 if not delta & 1 else -((delta + 1) >> 1)
            elif delta:
                raise _Undecodable("a first record with a ts delta")
            body = _body(reader, tag >> 1, seq, tables) if tag & 1 else blob()
            add((run_id, seq, type_, now, body, derived, derived))
    except _Undecodable:
        add((run_id, seq, None, None, None, derived, None))
        return out
    last = out[-1]
    if reader.i != len(data):  # bytes after the last record: the append does not end there
        out[-1] = (*last[:4], None, DERIVED, None)
    else:
        out[-1] = (*last[:6], head)
    return out


def last_type(data: Any) -> str | None:
    """The type of an append's last row, from its records' tags; None when they do not
    decode (the store then reports the run's last row as damaged)."""
    if type(data) is not bytes or not data:
        return None
    reader = _Reader(data)
    code = 0
    try:
        while reader.i < len(data):
            tag = reader.u()
            reader.u()
            code = tag >> 1
            if code not in _TYPE_NAMES:
                return None
            if not tag & 1:
                reader.blob()
            elif code == _WRITE:
                reader.u(), reader.u(), reader.u(), reader.opt()
            elif code == _COMMIT:
                reader.u(), reader.u(), reader.u(), reader.u(), reader.opt()
            elif code == _RECEIPT:
                reader.u(), reader.u(), reader.u(), reader.blob()
            elif code == _OPEN:
                reader.u(), reader.u(), reader.u(), reader.take(32)
            else:
                return None
    except _Undecodable:
        return None
    return _TYPE_NAMES[code]
