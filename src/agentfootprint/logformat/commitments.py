"""Redaction policies, the JSON-text rule and salted commitments: the format-level rules.

A policy selects values by the *name of the key* they sit under, at any depth: a key
matches when it is one of ``keys`` exactly, or when a ``patterns`` regular expression finds
a match in it. Policy documents of version 3 (what the writer records) and 2 hold RE2
patterns, matched in linear time at any key length (3 adds echo redaction:
:mod:`~agentfootprint.logformat.echo`); version 1 documents (older logs) hold Python
``re`` patterns, tried on keys of at most 256 characters and matched under a budget of
counted steps (:class:`MatchBudgetExceeded` when it runs out, on every machine alike). Each
version's rules are one module (:mod:`~agentfootprint.logformat.policy_v1`,
:mod:`~agentfootprint.logformat.policy_v2`), chosen by :func:`pattern_rules` alone.

Strings that hold JSON text are classified by one rule, :func:`read_json_text`, shared by
the store boundary and the verifier: text (not an object or array), a *walkable* container
(parsed, its keys match too, and it can be rewritten in canonical form), or *opaque* JSON
text (RFC 8259 JSON that cannot be safely rewritten). Under a policy, opaque text is
committed whole.

A matched value (the whole subtree) is replaced by ``{"$commit": hex}`` with
``hex = H("commit", canon([b64url(salt), key, value]))`` and a fresh random 128-bit salt.
The triple ``[b64url(salt), key, value]`` is a *disclosure*. This module imports nothing
of the runtime.
"""

from __future__ import annotations

import base64
import enum
import json
import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any, Final

import orjson

from agentfootprint.logformat import policy_v1, policy_v2
from agentfootprint.logformat.canonical import MAX_DEPTH, MAX_SAFE_INT, canon, json_path
from agentfootprint.logformat.hashing import hexdigest, is_hex_digest
from agentfootprint.logformat.policy_spec import PatternRules
from agentfootprint.logformat.policy_v1 import (
    LEGACY_BUDGET_STEPS,
    LEGACY_BUDGET_STEPS_PER_KEY,
    MAX_PATTERN_KEY,
    MatchBudgetExceeded,
)
from agentfootprint.logformat.policy_v2 import re2_refusal

__all__ = [
    "COMMIT_KEY",
    "LEGACY_BUDGET_STEPS",
    "LEGACY_BUDGET_STEPS_PER_KEY",
    "LEGACY_POLICY_VERSION",
    "MAX_PATTERN_KEY",
    "MAX_TEXT_DEPTH",
    "OPAQUE",
    "POLICY_VERSION",
    "RE2_POLICY_VERSION",
    "Disclosure",
    "Leak",
    "MatchBudgetExceeded",
    "PolicyDocument",
    "RedactionScan",
    "bracket_depth",
    "commitment_digest",
    "is_commitment",
    "iter_commitments",
    "iter_leaks",
    "nests_too_deep",
    "parse_json_container",
    "pattern_rules",
    "re2_refusal",
    "read_json_text",
    "scan_redaction",
]

COMMIT_KEY: Final = "$commit"
#: what writers record: RE2 patterns, and echo redaction (section 12.8)
POLICY_VERSION: Final = 3
#: logs of earlier writers: RE2 patterns, no echo redaction
RE2_POLICY_VERSION: Final = 2
#: logs of earlier writers: Python ``re`` patterns (appendix C)
LEGACY_POLICY_VERSION: Final = 1
#: deepest bracket nesting of JSON text that is walked (deeper text is opaque)
MAX_TEXT_DEPTH: Final = MAX_DEPTH


def b64url(data: bytes) -> str:
    """Base64url without padding (RFC 4648 section 5), as salts are written."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64url_decode(text: str) -> bytes:
    padded = text + "=" * (-len(text) % 4)
    return base64.urlsafe_b64decode(padded.encode("ascii"))


def commitment_digest(salt: str, key: str, value: Any) -> str:
    """``H("commit", canon([salt, key, value]))``; ``salt`` is base64url text."""
    return hexdigest("commit", canon([salt, key, value]))


def is_commitment(value: Any) -> bool:
    """``{"$commit": <64 lowercase hex>}`` and nothing else."""
    return (
        type(value) is dict
        and len(value) == 1
        and type(value.get(COMMIT_KEY)) is str
        and is_hex_digest(value[COMMIT_KEY])
    )


# -- the JSON-text rule ---------------------------------------------------------------------


class _Opaque(enum.Enum):
    OPAQUE = "opaque"


#: what :func:`read_json_text` returns for JSON text that is committed whole under a policy
OPAQUE: Final = _Opaque.OPAQUE

_JSON_WS = " \t\n\r"
_STRUCTURE = b'"[]{}'
_NOT_STRUCTURE = bytes(b for b in range(256) if b not in _STRUCTURE)
_STEPS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")
_DEEP_RUN = b"\x01" * (MAX_TEXT_DEPTH + 1)
_RAW_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


class _Unsafe(Exception):
    """Internal: a duplicate member name or a number beyond the doubles."""


class _NotJson(Exception):
    """Internal: ``NaN``, ``Infinity`` or ``-Infinity``, which RFC 8259 does not allow."""


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    members = dict(pairs)
    if len(members) != len(pairs):
        raise _Unsafe
    return members


def _no_constant(name: str) -> Any:
    raise _NotJson(name)


def _finite(text: str) -> int | float:
    """A number token as the log reads it back: the nearest double, or the int it equals
    when integral within +-(2**53 - 1) (``1.0`` and ``1e-400`` read as ``1`` and ``0``)."""
    number = float(text)  # correctly rounded, linear in the token's length
    if math.isinf(number):
        raise _Unsafe
    if number.is_integer() and -MAX_SAFE_INT <= number <= MAX_SAFE_INT:
        return int(number)
    return number


def _integer(text: str) -> int | float:
    """An integer token: an int within +-(2**53 - 1), else the nearest (finite) double."""
    if len(text) <= 17:  # (a sign and 16 digits)
        number = int(text)
        if -MAX_SAFE_INT <= number <= MAX_SAFE_INT:
            return number
    return _finite(text)


_DECODER = json.JSONDecoder(
    object_pairs_hook=_pairs, parse_constant=_no_constant, parse_float=_finite, parse_int=_integer
)
# whether the text is RFC 8259 JSON at all (any number, duplicate names, lone surrogates)
_LENIENT_DECODER = json.JSONDecoder(parse_constant=_no_constant, parse_int=float)


def bracket_depth(text: str) -> int:
    """How deep ``[``/``{`` nest outside string literals (linear, never recursing).

    Remove every ``\\\\`` pair (left to right), then every ``\\"``; split what is left at
    each ``"`` and keep the pieces at even positions (outside strings); the depth is the
    highest running count of ``[``/``{`` (+1) and ``]``/``}`` (-1) over them, or 0. For a JSON
    text this is its nesting depth (``[]`` is 1, ``[[1]]`` is 2)."""
    return max(0, max(accumulate(memoryview(_steps(text)).cast("b")), default=0))


def nests_too_deep(text: str) -> bool:
    """``bracket_depth(text) > MAX_TEXT_DEPTH``, deciding the usual cases without a scan."""
    if text.count("[") + text.count("{") <= MAX_TEXT_DEPTH:  # too few openers to nest deeper
        return False
    steps = _steps(text)
    if _DEEP_RUN in steps:  # that many openers in a row
        return True
    return max(accumulate(memoryview(steps).cast("b")), default=0) > MAX_TEXT_DEPTH


def _steps(text: str) -> bytes:
    """The brackets outside string literals, as bytes 1 (an opener) and 255 (a closer)."""
    data = text.encode("utf-8", "surrogatepass").replace(b"\\\\", b"").replace(b'\\"', b"")
    return b"".join(data.translate(None, _NOT_STRUCTURE).split(b'"')[::2]).translate(_STEPS)


def read_json_text(text: str) -> Any:
    """What a string is under the JSON-text rule: the object or array it holds (walkable),
    :data:`OPAQUE`, or None (text).

    * None: the first character after JSON whitespace is not ``{`` or ``[``; or the string
      holds a lone surrogate (it is not Unicode text); or it is not one RFC 8259 JSON text
      (``NaN``, trailing commas, two values...).
    * :data:`OPAQUE`: the bracket nesting (:func:`bracket_depth`) exceeds
      :data:`MAX_TEXT_DEPTH`; or the text is RFC 8259 JSON with a duplicate member name in
      an object, a number whose nearest double is infinite, or a ``\\u`` escape that leaves
      a lone surrogate.
    * otherwise the parsed container, which ``canon`` can rewrite: each number is the
      nearest double, read as an int when it is integral within +-(2**53 - 1) (so the
      value is what the log gives back once it is written: ``1.0`` reads as ``1``).
    """
    start = text[:1]
    if start != "{" and start != "[" and text.lstrip(_JSON_WS)[:1] not in ("{", "["):
        return None
    if not text.isascii() and _RAW_SURROGATE.search(text) is not None:
        return None
    if nests_too_deep(text):
        return OPAQUE
    try:
        value = _DECODER.decode(text)
    except _NotJson:
        return None
    except _Unsafe:
        return OPAQUE if _is_json(text) else None
    except ValueError:  # JSONDecodeError: not JSON
        return None
    except RecursionError:  # only from a caller already deep in recursion: fail closed
        return OPAQUE
    if "\\u" in text and _SURROGATE_ESCAPE.search(text) is not None:
        try:
            orjson.dumps(value)  # refuses a string or name holding a lone surrogate
        except orjson.JSONEncodeError:
            return OPAQUE
    return value


def _is_json(text: str) -> bool:
    try:
        _LENIENT_DECODER.decode(text)
    except (_NotJson, ValueError):
        return False
    return True


def parse_json_container(text: str) -> Any | None:
    """The walkable container a string holds as JSON text, or None (text, or opaque)."""
    value = read_json_text(text)
    return None if value is OPAQUE else value


# -- the verifier's scans -------------------------------------------------------------------


class Leak(tuple[str | None, tuple[str | int, ...]]):
    """Plaintext where the policy wants a commitment: ``(key, path)`` (unpacks as a pair).

    ``opaque``: the value is opaque JSON text (the boundary commits it whole), ``key`` the
    member it sits under (None at the top of an appended value); otherwise ``key`` is a
    member name the policy matches."""

    opaque: bool

    def __new__(cls, key: str | None, path: tuple[str | int, ...], opaque: bool = False) -> Leak:
        leak = super().__new__(cls, (key, path))
        leak.opaque = opaque
        return leak

    @property
    def key(self) -> str | None:
        return self[0]

    @property
    def path(self) -> tuple[str | int, ...]:
        return self[1]

    @property
    def message(self) -> str:
        if self.opaque:
            return f"JSON text the boundary commits whole is in clear at {json_path(self.path)}"
        return f"plaintext under the policy key {self.key!r} at {json_path(self.path)}"


def _walked(value: Any) -> bool:
    """Whether a scan has to look at ``value``: a container, or a string that may be JSON."""
    kind = type(value)
    return kind is dict or kind is list or (kind is str and value != "" and value[0] in _MAYBE_JSON)


_MAYBE_JSON = "{[" + _JSON_WS


def iter_commitments(
    value: Any, path: tuple[str | int, ...] = (), key: str | None = None
) -> Iterator[tuple[str, str | None, tuple[str | int, ...]]]:
    """Every commitment in ``value``: ``(digest, key it sits under, path)``.

    Walkable JSON text inside strings is searched too (its path ends at the string);
    opaque JSON text and other text are not. Raises ``ValueError`` on a malformed one.
    """
    stack: list[tuple[Any, tuple[str | int, ...], str | None]] = [(value, path, key)]
    while stack:
        item, where, under = stack.pop()
        kind = type(item)
        if kind is dict:
            if COMMIT_KEY in item:
                if not is_commitment(item):
                    raise ValueError(f"{json_path(where)}: malformed commitment {item!r:.80}")
                yield item[COMMIT_KEY], under, where
                continue
            stack.extend((c, (*where, k), k) for k, c in item.items() if _walked(c))
        elif kind is list:
            stack.extend((c, (*where, i), under) for i, c in enumerate(item) if _walked(c))
        elif kind is str:
            inner = read_json_text(item)
            if inner is not None and inner is not OPAQUE:
                stack.append((inner, where, under))


def iter_leaks(
    value: Any,
    matches: Callable[[str], bool],
    path: tuple[str | int, ...] = (),
    key: str | None = None,
) -> Iterator[Leak]:
    """What a policy wants committed but is not: a member the policy matches whose value
    is not a commitment, and opaque JSON text anywhere (a :class:`Leak` each).

    ``matches`` may raise :class:`MatchBudgetExceeded` (a version 1 policy)."""
    stack: list[tuple[Any, tuple[str | int, ...], str | None]] = [(value, path, key)]
    while stack:
        item, where, under = stack.pop()
        kind = type(item)
        if kind is dict:
            if is_commitment(item):
                continue
            for k, child in item.items():
                if matches(k) and not is_commitment(child):
                    yield Leak(k, (*where, k))
                elif _walked(child):
                    stack.append((child, (*where, k), k))
        elif kind is list:
            stack.extend((c, (*where, i), under) for i, c in enumerate(item) if _walked(c))
        elif kind is str:
            inner = read_json_text(item)
            if inner is OPAQUE:
                yield Leak(under, where, opaque=True)
            elif inner is not None:
                stack.append((inner, where, under))


@dataclass(slots=True)
class RedactionScan:
    """One walk's findings: ``commitments`` as :func:`iter_commitments` yields them (in
    its order) and ``leaks`` as :func:`iter_leaks` does (empty without a policy)."""

    commitments: list[tuple[str, str | None, tuple[str | int, ...]]] = field(default_factory=list)
    leaks: list[Leak] = field(default_factory=list)


def scan_redaction(
    value: Any,
    matches: Callable[[str], bool] | None,
    path: tuple[str | int, ...] = (),
    key: str | None = None,
) -> RedactionScan:
    """:func:`iter_commitments` and :func:`iter_leaks` in one walk (each JSON string is
    read once). Raises ``ValueError`` on a malformed commitment (before any leak counts)
    and :class:`MatchBudgetExceeded` when ``matches`` does."""
    found = RedactionScan()
    commitments, leaks = found.commitments, found.leaks
    stack: list[tuple[Any, tuple[str | int, ...], str | None, bool]] = [(value, path, key, True)]
    while stack:
        item, where, under, open_ = stack.pop()  # open_: not inside a leak (still checked)
        kind = type(item)
        if kind is dict:
            if COMMIT_KEY in item:
                if not is_commitment(item):
                    raise ValueError(f"{json_path(where)}: malformed commitment {item!r:.80}")
                commitments.append((item[COMMIT_KEY], under, where))
                continue
            for k, child in item.items():
                if open_ and matches is not None and matches(k) and not is_commitment(child):
                    leaks.append(Leak(k, (*where, k)))
                    if _walked(child):
                        stack.append((child, (*where, k), k, False))
                elif _walked(child):
                    stack.append((child, (*where, k), k, open_))
        elif kind is list:
            stack.extend((c, (*where, i), under, open_) for i, c in enumerate(item) if _walked(c))
        elif kind is str:
            inner = read_json_text(item)
            if inner is OPAQUE:
                if open_ and matches is not None:
                    leaks.append(Leak(under, where, opaque=True))
            elif inner is not None:
                stack.append((inner, where, under, open_))
    return found


def mapping_keys(value: Mapping[str, Any] | Sequence[Any]) -> Iterator[str]:
    """All object keys at any depth (no JSON text inside strings)."""
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if type(item) is dict:
            yield from item
            stack.extend(item.values())
        elif type(item) is list:
            stack.extend(item)


# -- policy documents -----------------------------------------------------------------------


def pattern_rules(version: Any) -> PatternRules:
    """The pattern rules of policy ``version`` (``run.open.policy.v``); ``ValueError`` for a
    version this code does not know."""
    if type(version) is int and version == LEGACY_POLICY_VERSION:
        return policy_v1.RULES
    elif type(version) is int and version in (RE2_POLICY_VERSION, POLICY_VERSION):
        return policy_v2.RULES  # version 3: version 2's patterns, and echo redaction
    else:
        raise ValueError(f"unknown policy version {version!r} (known: 1, 2, 3)")


@dataclass(frozen=True, slots=True)
class PolicyDocument:
    """A policy as recorded in ``run.open``: ``{"v": 3, "keys": [...], "patterns": [...]}``
    (RE2 patterns, echo redaction); ``version`` 2 (RE2, no echoes) and 1 (Python ``re``) for
    documents of older logs."""

    keys: tuple[str, ...]
    patterns: tuple[str, ...]
    version: int = POLICY_VERSION

    @classmethod
    def from_json(cls, document: Any) -> PolicyDocument:
        """Read a recorded policy; raises ``ValueError`` naming what is wrong."""
        if not isinstance(document, dict) or set(document) != {"v", "keys", "patterns"}:
            raise ValueError("policy must be {v, keys, patterns}")
        rules = pattern_rules(document["v"])
        keys, patterns = document["keys"], document["patterns"]
        if not isinstance(keys, list) or not all(isinstance(k, str) and k for k in keys):
            raise ValueError("policy keys must be non-empty strings")
        if not isinstance(patterns, list) or not all(isinstance(p, str) and p for p in patterns):
            raise ValueError("policy patterns must be non-empty strings")
        for pattern in patterns:
            why = rules.refusal(pattern)
            if why is not None:
                raise ValueError(f"pattern {pattern!r:.200} is not {rules.syntax} ({why})")
        return cls(keys=tuple(keys), patterns=tuple(patterns), version=document["v"])

    @property
    def echoes(self) -> bool:
        """Its writer commits quotations of committed values (section 12.8)."""
        return self.version >= POLICY_VERSION

    def to_json(self) -> dict[str, Any]:
        return {"v": self.version, "keys": sorted(set(self.keys)), "patterns": list(self.patterns)}

    def digest(self) -> str:
        """``H("policy", canon(document))``: what ``run.open`` records as ``policy_digest``."""
        return hexdigest("policy", canon(self.to_json()))

    def matcher(self) -> Callable[[str], bool]:
        """``matches(key)``, with a cache. Versions 2 and 3: exact keys, or an RE2 pattern found
        anywhere in the key (linear time). Version 1: exact keys, or a Python ``re`` pattern
        found in a key of at most 256 characters, within a budget of
        :data:`LEGACY_BUDGET_STEPS` plus :data:`LEGACY_BUDGET_STEPS_PER_KEY` per key tried;
        running out raises :class:`MatchBudgetExceeded`, then and for every later key it
        has to try the patterns on (keys seen before keep their answers)."""
        exact = frozenset(self.keys)
        search = pattern_rules(self.version).searcher(self.patterns)
        cache: dict[str, bool] = {}

        def matches(key: str) -> bool:
            hit = cache.get(key)
            if hit is None:
                hit = key in exact or (search is not None and search(key))
                if len(cache) < 65536:
                    cache[key] = hit
            return hit

        return matches


@dataclass(frozen=True, kw_only=True, slots=True)
class Disclosure:
    """What opens one commitment: ``[salt, key, value]`` and the digest it must hash to."""

    commitment: str
    salt: str
    key: str
    value: Any

    def opens(self) -> bool:
        return commitment_digest(self.salt, self.key, self.value) == self.commitment

    def to_json(self) -> dict[str, Any]:
        return {
            "commitment": self.commitment,
            "salt": self.salt,
            "key": self.key,
            "value": self.value,
        }

    @classmethod
    def from_json(cls, data: Any) -> Disclosure:
        if not isinstance(data, dict) or set(data) != {"commitment", "salt", "key", "value"}:
            raise ValueError("a disclosure is {commitment, salt, key, value}")
        if not is_hex_digest(data["commitment"]):
            raise ValueError("disclosure commitment is not 64 lowercase hex digits")
        if not isinstance(data["salt"], str) or not isinstance(data["key"], str):
            raise ValueError("disclosure salt and key are strings")
        return cls(
            commitment=data["commitment"], salt=data["salt"], key=data["key"], value=data["value"]
        )
