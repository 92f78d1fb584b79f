"""Canonical JSON (RFC 8785, JCS) for everything that is hashed.

Every hashed byte string in the log is ``canon(value)``. Values must be I-JSON
(RFC 7493): string keys, finite numbers, integers within +-(2**53 - 1), no lone
surrogates. Anything else is refused with :class:`CanonicalFormError` naming the
JSON path of the offending value, before a single byte is produced.

Serialisation goes through the ``rfc8785`` package, except for a fast path: a
value with no floats and whose object keys all sort the same in code-point and
UTF-16 order (every key character below U+D800) is written by ``orjson`` with
sorted keys. ``tests/property/test_canonical_differential.py`` proves the two
byte-identical on that domain; outside it (floats, astral keys) orjson differs
from JCS, so the slow path is taken.

Reading a log goes the other way: :func:`parse_canonical` proves stored bytes canonical
without walking the parsed value in Python when orjson's sorted output of the value is the
bytes themselves and nothing in the bytes can take the value off that fast path (see its
docstring); every other body is left to the full check, ``canon(parse(data)) == data``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

import orjson
import rfc8785

from agentfootprint.errors import CanonicalFormError
from agentfootprint.logformat.shared_lists import SharedList, as_list

__all__ = [
    "MAX_DEPTH",
    "MAX_SAFE_INT",
    "canon",
    "canon_object",
    "check_ijson",
    "compact",
    "has_lone_surrogate",
    "json_path",
    "parse",
    "parse_canonical",
]

MAX_SAFE_INT = 2**53 - 1
#: Deepest nesting of a value (what a stage writes, a request piece). orjson stops a little
#: above this; ``canon`` allows ``ENVELOPE_DEPTH`` more so a log body can wrap such a value.
MAX_DEPTH = 250
#: Extra levels a log body may add around a value (``{"value": ...}`` and the like).
ENVELOPE_DEPTH = 5
_LONG_INT = re.compile(rb"\d{16}")
_FAST_KEY_LIMIT = "\ud800"
# ``_has_digit_run``: every ASCII digit made "0", then a search for 16 of them (a C scan several
# times faster than ``_LONG_INT.search``; the same answer, a unit test holds them together).
_DIGITS_TO_ZERO = bytes.maketrans(b"0123456789", b"0" * 10)
_SIXTEEN_DIGITS = b"0" * 16
# ``parse_canonical``: a lead byte of a character at or above U+E000 (U+D800..U+DFFF are
# surrogates, which UTF-8 text never holds); a float as orjson writes it in compact output
# (digits then "." or an exponent, after the ":", "," or "[" that every value but the
# outermost follows).
_HIGH_LEAD = re.compile(rb"[\xee-\xff]")
_FLOAT_TOKEN = re.compile(rb"[:,\[]-?[0-9]+[.eE]")
_PROVEN_OPTIONS = orjson.OPT_SORT_KEYS | orjson.OPT_STRICT_INTEGER


def json_path(parts: tuple[str | int, ...]) -> str:
    """Render a path as ``$.key[3].other`` (keys that are not identifiers are quoted)."""
    out = ["$"]
    for part in parts:
        if isinstance(part, int):
            out.append(f"[{part}]")
        elif part.isidentifier():
            out.append(f".{part}")
        else:  # stdlib json escapes lone surrogates instead of refusing them
            out.append("[" + json.dumps(part) + "]")
    return "".join(out)


def has_lone_surrogate(text: str) -> bool:
    """``text`` is not Unicode text the log can hold: it has a lone surrogate (not UTF-8)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


class _Refused(Exception):
    """Internal: the quick scan found a problem; the slow walk will name it."""


def _scan(value: Any, depth: int, limit: int) -> bool:
    """Quick I-JSON scan (no paths kept); True when the orjson fast path applies."""
    kind = type(value)
    if kind is dict:
        items: Any = value.items()
    elif kind is list or kind is tuple or kind is SharedList:
        items = enumerate(value)
    else:
        return _scan_leaf(value, kind)
    if depth >= limit and value:
        raise _Refused
    fast = True
    for key, child in items:
        if kind is dict:
            if type(key) is not str:
                raise _Refused
            if not key.isascii():
                key.encode("utf-8")
                if max(key) >= _FAST_KEY_LIMIT:
                    fast = False
        child_kind = type(child)
        if child_kind is str:
            if not child.isascii():
                child.encode("utf-8")
        elif child_kind is int:  # the leaves inline, as _scan_leaf judges them (the common ones)
            if not -MAX_SAFE_INT <= child <= MAX_SAFE_INT:
                raise _Refused
        elif child_kind is bool or child is None:
            pass
        elif (
            child_kind is dict
            or child_kind is list
            or child_kind is tuple
            or child_kind is SharedList
        ):
            if not _scan(child, depth + 1, limit):
                fast = False
        elif not _scan_leaf(child, child_kind):
            fast = False
    return fast


def _scan_leaf(value: Any, kind: type) -> bool:
    if kind is str:
        if not value.isascii():
            value.encode("utf-8")
        return True
    if kind is int:
        if not -MAX_SAFE_INT <= value <= MAX_SAFE_INT:
            raise _Refused
        return True
    if kind is bool or value is None:
        return True
    if kind is float:
        if math.isnan(value) or math.isinf(value):
            raise _Refused
        return False
    raise _Refused


def check_ijson(
    value: Any, path: tuple[str | int, ...] = (), *, max_depth: int = MAX_DEPTH
) -> bool:
    """Validate that ``value`` is I-JSON; return True when the orjson fast path applies.

    Raises :class:`CanonicalFormError` naming the path of the first bad value.
    """
    try:
        return _scan(value, 0, max_depth)
    except (_Refused, UnicodeEncodeError):
        _locate(value, path, max_depth)
        raise CanonicalFormError(json_path(path), "not I-JSON") from None


def _locate(value: Any, path: tuple[str | int, ...], max_depth: int) -> bool:
    """The slow walk: finds the first bad value and raises naming its path."""
    fast = True
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(value, path)]
    while stack:
        item, where = stack.pop()
        kind = type(item)
        if len(where) - len(path) > max_depth:
            raise CanonicalFormError(json_path(where), f"nested deeper than {max_depth} levels")
        if kind is str:
            if has_lone_surrogate(item):
                raise CanonicalFormError(json_path(where), "string contains a lone surrogate")
        elif kind is dict:
            for key, child in item.items():
                if type(key) is not str:
                    raise CanonicalFormError(
                        json_path(where),
                        f"object key {key!r} is a {type(key).__name__}; keys must be strings",
                    )
                if has_lone_surrogate(key):
                    raise CanonicalFormError(
                        json_path((*where, key)), "object key contains a lone surrogate"
                    )
                if key and max(key) >= _FAST_KEY_LIMIT:
                    fast = False
                stack.append((child, (*where, key)))
        elif kind is list or kind is tuple or kind is SharedList:
            for index, child in enumerate(item):
                stack.append((child, (*where, index)))
        elif kind is bool or item is None:
            pass
        elif kind is int:
            if not -MAX_SAFE_INT <= item <= MAX_SAFE_INT:
                raise CanonicalFormError(
                    json_path(where),
                    "integer outside +-(2**53 - 1); send it as a string",
                )
        elif kind is float:
            if math.isnan(item) or math.isinf(item):
                raise CanonicalFormError(json_path(where), f"{item} is not a finite number")
            fast = False
        else:
            raise CanonicalFormError(
                json_path(where),
                f"{kind.__module__}.{kind.__qualname__} is not a JSON value "
                "(use str, int, float, bool, None, list or dict)",
            )
    return fast


#: below this, :func:`compact` copies (above it the buffer's untouched tail is rarely resident)
_COMPACT_BELOW = 1 << 20


def compact(data: bytes) -> bytes:
    """``data`` in an allocation of its own size, for bytes kept long (a store's rows, a cache).

    orjson (3.12 and later) returns its output in the buffer it wrote into, grown in steps
    and never shrunk: a 20-byte result holds 4 KiB, a 1.5 KB one 16 KiB (measured here;
    ``sys.getsizeof`` reports only the length). Bytes that are hashed and dropped do not
    care; 10,000 kept run ids cost 40 MB. Big outputs are left as they are: their unwritten
    pages are not resident, and a copy would double the peak."""
    return bytes(memoryview(data)) if len(data) < _COMPACT_BELOW else data


def canon(value: Any) -> bytes:
    """Return the RFC 8785 canonical bytes of ``value`` (refusing non-I-JSON)."""
    if check_ijson(value, max_depth=MAX_DEPTH + ENVELOPE_DEPTH):
        try:
            return orjson.dumps(value, default=as_list, option=orjson.OPT_SORT_KEYS)
        except orjson.JSONEncodeError:  # e.g. orjson's own nesting limit: take the slow path
            pass
    return rfc8785.dumps(_without_shared_lists(value))


def _without_shared_lists(value: Any) -> Any:
    """``value`` with every :class:`SharedList` in it a plain list (rfc8785 takes lists)."""
    kind = type(value)
    if kind is SharedList or kind is list or kind is tuple:
        return [_without_shared_lists(item) for item in value]
    if kind is dict:
        return {key: _without_shared_lists(item) for key, item in value.items()}
    return value


def canon_object(members: Mapping[str, bytes]) -> bytes:
    """Canonical bytes of an object whose member values are already canonical.

    Member names must be ASCII (so code-point order is JCS order). Used to avoid
    re-canonicalising large nested values that were canonicalised once already.
    """
    parts = [canon(name) + b":" + members[name] for name in sorted(members)]
    return b"{" + b",".join(parts) + b"}"


def parse(data: bytes | str) -> Any:
    """Parse JSON bytes or text (the inverse of :func:`canon` on canonical input).

    JSON numbers are IEEE doubles: an integral float beyond 2**53 (``1e19``) is
    written by JCS as plain digits, so such digits are read back as a float,
    not as an integer outside I-JSON's range.
    """
    value = orjson.loads(data)
    if _has_digit_run(data if isinstance(data, bytes) else data.encode("utf-8")):
        value = _unsafe_ints_to_floats(value)
    return value


def _has_digit_run(data: bytes) -> bool:
    """Whether ``data`` holds 16 ASCII digits in a row (``_LONG_INT.search``, faster)."""
    return _SIXTEEN_DIGITS in data.translate(_DIGITS_TO_ZERO)


def parse_canonical(data: bytes) -> tuple[Any, bool]:
    """``parse(data)``, and True when ``data`` is proven to be ``canon`` of it.

    True means ``canon(value) == data`` and ``value`` is I-JSON, shown without a Python walk
    of the value: ``orjson.dumps(value, OPT_SORT_KEYS | OPT_STRICT_INTEGER)`` (the bytes
    ``canon`` writes on its fast path, refusing integers beyond +-(2**53 - 1)) is ``data``
    byte for byte, the value is an object or array, and ``data`` shows nothing that takes a
    value off ``canon``'s fast path: no float (every float orjson writes has digits then "."
    or an exponent, which ``_FLOAT_TOKEN`` finds after the member or element separator it
    follows; the cheap ``in`` tests first need a "." or an exponent sign), no byte that
    starts a character at or above U+E000 (where key order by code point and by UTF-16 code
    unit part). orjson's own nesting limit is below ``canon``'s, and it writes no lone
    surrogate. A parsed value holds no NaN or infinity (orjson refuses to read them), so
    ``null`` is never a float written back. ``tests/property/test_canonical_differential.py``
    proves the answer agrees with ``canon(parse(data)) == data`` on generated values and on
    mutated canonical bytes.

    False means only "not proven": the caller runs the full check. Raises what
    :func:`parse` raises.
    """
    value = orjson.loads(data)
    kind = type(value)
    if (
        (kind is dict or kind is list)
        and (data.isascii() or _HIGH_LEAD.search(data) is None)
        and (
            (b"." not in data and b"e+" not in data and b"e-" not in data)
            or _FLOAT_TOKEN.search(data) is None
        )
    ):
        try:
            if orjson.dumps(value, option=_PROVEN_OPTIONS) == data:
                return value, True
        except orjson.JSONEncodeError:  # an integer beyond 53 bits, nested too deep
            pass
    if _has_digit_run(data):
        value = _unsafe_ints_to_floats(value)
    return value, False


def _unsafe_ints_to_floats(value: Any) -> Any:
    """``value`` (freshly parsed, so ours to change) with every integer beyond I-JSON's range
    turned into the double it denotes; walked with a stack, however deep the value."""
    if type(value) is int:
        return float(value) if not -MAX_SAFE_INT <= value <= MAX_SAFE_INT else value
    if type(value) is not list and type(value) is not dict:  # a float (digits past 2**64)
        return value
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        pairs: Any = item.items() if type(item) is dict else enumerate(item)
        for key, child in list(pairs):
            kind = type(child)
            if kind is int and not -MAX_SAFE_INT <= child <= MAX_SAFE_INT:
                item[key] = float(child)
            elif kind is list or kind is dict:
                stack.append(child)
    return value
