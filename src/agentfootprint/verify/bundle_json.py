"""The JSON rules of export bundle lines (docs/log-format.md section 13.1), and the errors a
bundle's files give: shared by the reader and the writer.

A line is one JSON text with no member name twice, no lone surrogate in any string, integers
within +-(2**53 - 1) and lowercase hex hashes; :class:`_LineError` says what a line breaks.
"""

from __future__ import annotations

import errno
import json
from pathlib import Path
from typing import Any

import orjson

from agentfootprint.errors import FileError
from agentfootprint.logformat.canonical import MAX_SAFE_INT
from agentfootprint.logformat.hashing import is_hex_digest

__all__: list[str] = []  # internal to the bundle reader and writer


def _file_error(exc: OSError, path: Path, doing: str) -> FileError:
    """A FileError that names the file and says what was wrong with it."""
    code = exc.errno
    done = "read" if doing == "read" else "written"
    if isinstance(exc, IsADirectoryError) or code == errno.EISDIR:
        why = "is a folder: name a file"
    elif isinstance(exc, FileNotFoundError) or code == errno.ENOENT:
        why = (
            "does not exist"
            if doing == "read"
            else f"cannot be written: the folder {path.parent} does not exist"
        )
    elif isinstance(exc, PermissionError) or code in (errno.EACCES, errno.EPERM):
        why = f"cannot be {done}: permission denied"
    elif code == errno.EROFS:
        why = "cannot be written: the file system is read-only"
    elif code in (errno.ENOSPC, errno.EDQUOT):
        why = "cannot be written: no room left on the device"
    else:
        why = f"cannot be {done}: {exc.strerror or exc}"
    return FileError(f"{path} {why}", path=str(path))


# -- parsing one line -------------------------------------------------------------------------


class _LineError(Exception):
    """Internal: why a line is not what its place in the bundle requires."""


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) != len(pairs):
        seen: set[str] = set()
        for name, _ in pairs:
            if name in seen:
                raise _LineError(f"member {name!r} appears twice in one object")
            seen.add(name)
    return found


def _no_constant(name: str) -> Any:
    raise _LineError(f"{name} is not a JSON number")


_DECODER = json.JSONDecoder(object_pairs_hook=_no_duplicates, parse_constant=_no_constant)


def _text_of(line: bytes) -> str:
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _LineError(f"not UTF-8 ({exc.reason} at byte {exc.start})") from exc


def _parse(line: bytes | str, decoder: json.JSONDecoder = _DECODER) -> Any:
    """The line's one JSON value (RFC 8259, no duplicate member names), nothing after it
    but whitespace."""
    text = line if isinstance(line, str) else _text_of(line)
    try:
        return decoder.decode(text)
    except json.JSONDecodeError as exc:
        raise _LineError(f"not JSON: {exc.msg} at character {exc.pos}") from exc
    except RecursionError as exc:
        raise _LineError("nested too deeply") from exc
    except ValueError as exc:  # an integer of more digits than Python converts
        raise _LineError(f"not readable JSON: {exc}") from exc


def _sound_text(value: Any) -> bool:
    """A string that is Unicode text (JSON escapes can spell lone surrogates)."""
    if type(value) is not str:
        return False
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _no_lone_surrogates(value: Any) -> bool:
    """Every string in ``value`` (member names too) is Unicode text."""
    stack = [value]
    while stack:
        item = stack.pop()
        if type(item) is str:
            if not _sound_text(item):
                return False
        elif type(item) is dict:
            stack.extend(item)
            stack.extend(item.values())
        elif type(item) is list:
            stack.extend(item)
    return True


def _safe_int(value: Any) -> bool:
    return type(value) is int and -MAX_SAFE_INT <= value <= MAX_SAFE_INT


def _hex(value: Any) -> bytes | None:
    if is_hex_digest(value):
        return bytes.fromhex(value)
    return None


def _members(item: Any, keys: frozenset[str], what: str) -> dict[str, Any]:
    if type(item) is not dict:
        raise _LineError(f"{what} is not a JSON object")
    if item.keys() != keys:
        missing, extra = sorted(keys - item.keys()), sorted(item.keys() - keys)
        raise _LineError(
            f"{what} has "
            + "; ".join(
                part
                for part in (
                    f"no member {', '.join(missing)}" if missing else "",
                    f"members it may not have: {', '.join(map(repr, extra))}" if extra else "",
                )
                if part
            )
        )
    return item


# -- event lines as this library writes them -------------------------------------------------

_ROW_KEYS = frozenset(["run", "seq", "type", "ts", "body", "event_hash", "chain_hash"])


def _written_members(line: bytes) -> Any:
    """The line's value when the line is byte for byte what orjson writes of it (what every
    writer of this library writes), parsed by orjson; else None, for the strict parser to
    judge. Equal bytes mean no member name is twice (the value has each once) and no number
    or escape is spelled in a way the strict parser reads otherwise: both parsers read the
    same value, so the verdict is the strict parser's, at a fraction of its cost."""
    try:
        item = orjson.loads(line)
        if orjson.dumps(item) + b"\n" == line:
            return item
    except (orjson.JSONDecodeError, orjson.JSONEncodeError):
        pass
    return None


def _written_row(item: Any) -> tuple[str, str, bytes] | None:
    """``(run, type, chain_hash)`` of a value :func:`_written_members` gave, when it passes
    every check the reader's ``_row_of`` makes (its strings are Unicode text: orjson wrote
    them back); else None, and ``_row_of`` says what is wrong. Nothing else is built."""
    if type(item) is not dict or item.keys() != _ROW_KEYS:
        return None
    run, type_, chain = item["run"], item["type"], item["chain_hash"]
    if (
        type(run) is str
        and type(type_) is str
        and type(item["body"]) is str
        and _safe_int(item["seq"])
        and _safe_int(item["ts"])
        and is_hex_digest(item["event_hash"])
        and is_hex_digest(chain)
    ):
        return run, type_, bytes.fromhex(chain)
    return None


def _written_event(line: bytes) -> tuple[str, str, bytes, dict[str, Any]] | None:
    """``(run, type, chain_hash, value)`` of an event line that :func:`_written_members`
    takes (byte for byte what orjson writes of its value) and :func:`_written_row` passes,
    else None: the two in one, at less cost, for every line of the pass that opens a bundle.
    Seven members of which each row member is one are the row members; two strings of 64
    characters whose concatenation ``fromhex`` reads and ``hex()`` gives back are lowercase
    hex (``fromhex`` takes upper case and spaces too, which ``hex()`` does not give back)."""
    try:
        item = orjson.loads(line)
        if orjson.dumps(item) + b"\n" != line or len(item) != 7:
            return None
        run, type_, seq, ts, body = item["run"], item["type"], item["seq"], item["ts"], item["body"]
        event, chain = item["event_hash"], item["chain_hash"]
    except (orjson.JSONDecodeError, orjson.JSONEncodeError, TypeError, KeyError):
        return None  # not an object (or not of these members): the strict path says why
    if (
        type(run) is str
        and type(type_) is str
        and type(body) is str
        and type(seq) is int
        and -MAX_SAFE_INT <= seq <= MAX_SAFE_INT
        and type(ts) is int
        and -MAX_SAFE_INT <= ts <= MAX_SAFE_INT
        and type(event) is str
        and type(chain) is str
        and len(event) == len(chain) == 64
    ):
        hashes = event + chain
        try:
            data = bytes.fromhex(hashes)
        except ValueError:
            return None
        if data.hex() == hashes:
            return run, type_, data[32:], item
    return None


def _checked_values(line: bytes) -> tuple[Any, ...] | None:
    """A line read again whose bytes were checked when the bundle was opened (the run's
    digest is compared when the run's lines end), as the 7 values of a row, or None when it
    no longer parses."""
    try:
        item = orjson.loads(line)
        return (
            item["run"],
            item["seq"],
            item["type"],
            item["ts"],
            item["body"].encode("utf-8"),
            bytes.fromhex(item["event_hash"]),
            bytes.fromhex(item["chain_hash"]),
        )
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError):
        return None
