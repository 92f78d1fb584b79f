"""SQLite storage schema 4's records, read from ``docs/log-format.md`` section 4 ("Schema
version 4 (one row per append)", "Records", "Reading") alone, for the independent verifier
(``independent_verifier.py``). It imports nothing of ``agentfootprint``.

:func:`decode_append` turns one ``appends`` row into the rows ``(seq, type, ts, body)`` a
reader rebuilds; hashing them is the caller's (section 5.1). A record that does not decode
ends the rows with one whose body is None (the verifier fails it, **rows**): the page lets a
reader give only that first row, since verification stops there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import rfc8785

MAX_SAFE_INT = 2**53 - 1
MAX_UVARINT = 2**64 - 1
MAX_UVARINT_BYTES = 10
MAX_NAME_BYTES, MAX_TEMPLATE_BYTES, MAX_PARENT_BYTES = 256, 16_384, 1_024
TYPES = ("run.open", "write", "receipt", "event", "commit", "run.close", "run.seal")
CODES = {i + 1: t for i, t in enumerate(TYPES)}  # the type codes of schema 2
COMPACT = {1, 2, 3, 5}  # form 1 exists for run.open, write, receipt and commit
VERBS = {1: "set", 2: "append", 3: "merge", 4: "delete"}
DIGEST = 32

#: a decoded row: (seq, type, ts, body); body None: the row's record did not decode
Decoded = tuple[int, Any, Any, bytes | None]


class NotDecoded(Exception):
    """A record that does not decode (section 4, the list after "Reading")."""


@dataclass
class Lookups:
    """The three tables records name, each lookup None when it names nothing usable:
    ``name(id)`` a ``names.text`` (text of at most 256 UTF-8 bytes), ``template(id)`` an
    ``opens`` row's three parts (BLOBs of at most 16,384 bytes together), ``parent(key)`` a
    ``run_keys.run_id`` (text of at most 1,024 UTF-8 bytes)."""

    name: Callable[[int], str | None]
    template: Callable[[int], tuple[bytes, bytes, bytes] | None]
    parent: Callable[[int], str | None]


def canon(value: Any) -> bytes:
    return rfc8785.dumps(value)


def text_within(kind: bytes, value: Any, limit: int) -> str | None:
    """``value`` as text when SQLite holds it as TEXT that is UTF-8 of at most ``limit``
    bytes, else None (``kind`` is its ``typeof``, the value read as bytes)."""
    if kind != b"text" or not isinstance(value, bytes) or len(value) > limit:
        return None
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return None


class Reader:
    """The bytes of a record (or of a receipt's ``p``), read from the front."""

    def __init__(self, data: bytes, start: int = 0, end: int | None = None) -> None:
        self.data, self.i, self.end = data, start, len(data) if end is None else end

    def uvarint(self) -> int:
        """Unsigned LEB128: at most 10 bytes and at most 2^64 - 1."""
        value = shift = 0
        for _ in range(MAX_UVARINT_BYTES):
            if self.i >= self.end:
                raise NotDecoded("the bytes end inside a uvarint")
            byte = self.data[self.i]
            self.i += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                if value > MAX_UVARINT:
                    raise NotDecoded("a uvarint past 2^64 - 1")
                return value
        raise NotDecoded("a uvarint runs past 10 bytes")

    def safe(self, what: str) -> int:
        """A uvarint that is an integer of the body: at most 2^53 - 1."""
        value = self.uvarint()
        if value > MAX_SAFE_INT:
            raise NotDecoded(f"{what} {value} is above 2^53 - 1")
        return value

    def take(self, n: int) -> bytes:
        if n > self.end - self.i:
            raise NotDecoded("the bytes end inside the record")
        self.i += n
        return self.data[self.i - n : self.i]

    def bytes_(self) -> bytes:
        """``bytes(b)``: its length, then it."""
        return self.take(self.uvarint())

    def opt(self) -> bytes | None:
        """``opt(b)``: 0 for none, else its length plus one, then it."""
        n = self.uvarint()
        return None if n == 0 else self.take(n - 1)


def zigzag(u: int) -> int:
    return (u >> 1) if u % 2 == 0 else -((u + 1) >> 1)


def _name(lookups: Lookups, reader: Reader, what: str) -> str:
    found = lookups.name(reader.uvarint())
    if found is None:
        raise NotDecoded(f"the {what} id names no names row holding text of at most 256 bytes")
    return found


def _write(reader: Reader, lookups: Lookups) -> bytes:
    commit = reader.safe("commit")
    path = _name(lookups, reader, "path")
    verb = VERBS.get(reader.uvarint())
    if verb is None:
        raise NotDecoded("a verb that is not 1-4")
    value = reader.opt()
    middle = b"" if value is None else b',"value":' + value
    return (b'{"commit":' + str(commit).encode() + b',"path":' + canon(path) + middle
            + b',"verb":"' + verb.encode() + b'"}')  # fmt: skip


def _commit(reader: Reader, lookups: Lookups) -> bytes:
    commit = reader.safe("commit")
    stage = _name(lookups, reader, "stage")
    k, writes = reader.safe("k"), reader.safe("writes")
    decision = reader.opt()
    said = b""
    if decision is not None:
        try:
            said = b'"decision":' + canon(decision.decode("utf-8")) + b","
        except UnicodeDecodeError:
            raise NotDecoded("a decision that is not UTF-8") from None
    return (b'{"commit":' + str(commit).encode() + b"," + said + b'"stage":' + canon(stage)
            + b',"stage_run":' + canon(f"{stage}#{k}") + b',"writes":' + str(writes).encode()
            + b"}")  # fmt: skip


def _digests(p: Reader, n: int) -> bytes:
    return b",".join(b'"' + p.take(DIGEST).hex().encode() + b'"' for _ in range(n))


def _receipt(reader: Reader, lookups: Lookups) -> bytes:
    commit = reader.safe("commit")
    model = _name(lookups, reader, "model")
    call = reader.safe("call")
    size = reader.uvarint()
    start = reader.i
    reader.take(size)  # the record holds all of p
    p = Reader(reader.data, start, start + size)
    try:
        counts = [p.uvarint() for _ in range(6)]
        request = p.take(DIGEST)
    except NotDecoded:
        raise NotDecoded("a receipt's p ends before its request digest") from None
    keep_s, n_s, keep_m, n_m, keep_t, n_t = counts
    for what, keep in (("keep_s", keep_s), ("keep_m", keep_m), ("keep_t", keep_t)):
        if keep > MAX_SAFE_INT:
            raise NotDecoded(f"{what} {keep} is above 2^53 - 1")
    if (n_s + n_m + n_t) * DIGEST > p.end - p.i:
        raise NotDecoded("a receipt's counts name more digests than p holds")
    s, m, t = _digests(p, n_s), _digests(p, n_m), _digests(p, n_t)
    params = p.data[p.i : p.end]

    def listed(add: bytes, keep: int) -> bytes:
        return b'{"add":[' + add + b'],"keep":' + str(keep).encode() + b"}"

    return (b'{"call":' + str(call).encode() + b',"commit":' + str(commit).encode()
            + b',"messages":' + listed(m, keep_m) + b',"model":' + canon(model)
            + b',"params":' + params + b',"request":"' + request.hex().encode()
            + b'","system":' + listed(s, keep_s) + b',"tools":' + listed(t, keep_t)
            + b"}")  # fmt: skip


def _open(reader: Reader, lookups: Lookups, run_id: str, seq: int) -> bytes:
    if seq != 0:
        raise NotDecoded("a run.open in form 1 that is not at seq 0")
    template = lookups.template(reader.uvarint())
    if template is None:
        raise NotDecoded("the template id names no opens row of three BLOBs within 16,384 bytes")
    events = reader.safe("events")
    parent = lookups.parent(reader.uvarint())
    if parent is None:
        raise NotDecoded("the parent key names no run_keys row holding text within 1,024 bytes")
    head = reader.take(DIGEST)
    prefix, middle, suffix = template
    named = (b'{"events":' + str(events).encode() + b',"head":"' + head.hex().encode()
             + b'","run_id":' + canon(parent) + b"}")  # fmt: skip
    return prefix + named + middle + canon(run_id) + suffix


def _fields(code: int, form: int, reader: Reader, lookups: Lookups, run_id: str, seq: int) -> bytes:
    if form == 0:
        return reader.bytes_()
    if code == 2:
        return _write(reader, lookups)
    if code == 5:
        return _commit(reader, lookups)
    if code == 3:
        return _receipt(reader, lookups)
    return _open(reader, lookups, run_id, seq)


def decode_append(
    run_id: str, first_seq: int, count: Any, ts: Any, head: Any, data: Any, lookups: Lookups
) -> tuple[list[Decoded], str]:
    """The rows of one ``appends`` row (its columns as stored, uncoerced), and why the last
    of them has a None body (empty when every record decoded). A reader's work is bounded by
    the bytes: it stops at the first record that does not decode."""
    if not (type(count) is int and count >= 1):
        return [(first_seq, None, None, None)], f"count {count!r} is not an integer of at least 1"
    if type(ts) is not int:
        return [(first_seq, None, None, None)], f"ts {ts!r} is not an integer"
    if not (isinstance(head, bytes) and len(head) == DIGEST):
        return [(first_seq, None, None, None)], "head is not a 32-byte BLOB"
    if not isinstance(data, bytes):
        return [(first_seq, None, None, None)], "data is not a BLOB"
    out: list[Decoded] = []
    reader, at = Reader(data), ts
    for i in range(count):
        seq = first_seq + i
        try:
            if reader.i >= len(data):
                raise NotDecoded(f"{i} records where count says {count}")
            tag, delta = reader.uvarint(), zigzag(reader.uvarint())
            code, form = tag >> 1, tag & 1
            if code not in CODES or (form == 1 and code not in COMPACT):
                raise NotDecoded(f"tag {tag}: no type code 1-7 in that form")
            if i == 0 and delta != 0:
                raise NotDecoded("the first record's delta is not 0")
            body = _fields(code, form, reader, lookups, run_id, seq)
        except NotDecoded as e:
            out.append((seq, None, None, None))
            return out, f"record {i} does not decode: {e}"
        at += delta
        out.append((seq, CODES[code], at, body))
    if reader.i != len(data):
        seq, *_ = out.pop()
        out.append((seq, None, None, None))
        return out, "bytes left after count records"
    return out, ""
