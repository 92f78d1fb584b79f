"""Redaction policies and salted commitments: the format-level rules.

A policy selects values by the *name of the key* they sit under, at any depth:
a key matches when it is one of ``keys`` exactly, or when a ``patterns`` regular
expression (Python ``re``, ``search``) finds a match in it. Keys longer than 256
characters are tested against ``keys`` only (a guard against pathological regexes).
Strings that hold a JSON object or array (tool-call arguments, JSON tool results)
are parsed, and keys inside them match too.

A matched value (the whole subtree) is replaced by ``{"$commit": hex}`` with
``hex = H("commit", canon([b64url(salt), key, value]))`` and a fresh random
128-bit salt. The triple ``[b64url(salt), key, value]`` is a *disclosure*: whoever
holds it can prove the value; without it the commitment hides the value.

This module is shared by the store boundary (which commits) and the verifier
(which checks commitments are well formed, never repeated, and that no plaintext
sits under a policy key). It imports nothing of the runtime.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from agentfootprint.verify.canonical import canon, json_path, parse
from agentfootprint.verify.hashing import hexdigest

__all__ = [
    "COMMIT_KEY",
    "MAX_PATTERN_KEY",
    "Disclosure",
    "PolicyDocument",
    "commitment_digest",
    "is_commitment",
    "iter_commitments",
    "iter_leaks",
]

COMMIT_KEY: Final = "$commit"
MAX_PATTERN_KEY: Final = 256
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


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
        and _HEX64.match(value[COMMIT_KEY]) is not None
    )


@dataclass(frozen=True, slots=True)
class PolicyDocument:
    """A policy as recorded in ``run.open``: ``{"v": 1, "keys": [...], "patterns": [...]}``."""

    keys: tuple[str, ...]
    patterns: tuple[str, ...]

    @classmethod
    def from_json(cls, document: Any) -> PolicyDocument:
        """Read a recorded policy; raises ``ValueError`` naming what is wrong."""
        if not isinstance(document, dict) or set(document) != {"v", "keys", "patterns"}:
            raise ValueError("policy must be {v, keys, patterns}")
        if type(document["v"]) is not int or document["v"] != 1:
            raise ValueError(f"unknown policy version {document['v']!r}")
        keys, patterns = document["keys"], document["patterns"]
        if not isinstance(keys, list) or not all(isinstance(k, str) and k for k in keys):
            raise ValueError("policy keys must be non-empty strings")
        if not isinstance(patterns, list) or not all(isinstance(p, str) and p for p in patterns):
            raise ValueError("policy patterns must be non-empty strings")
        for pattern in patterns:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"pattern {pattern!r} is not a regular expression") from exc
        return cls(keys=tuple(keys), patterns=tuple(patterns))

    def to_json(self) -> dict[str, Any]:
        return {"v": 1, "keys": sorted(set(self.keys)), "patterns": list(self.patterns)}

    def digest(self) -> str:
        """``H("policy", canon(document))``: what ``run.open`` records as ``policy_digest``."""
        return hexdigest("policy", canon(self.to_json()))

    def matcher(self) -> Callable[[str], bool]:
        """``matches(key)``: exact keys, or a pattern found in a key of at most 256 chars."""
        exact = frozenset(self.keys)
        compiled = [re.compile(p) for p in self.patterns]
        cache: dict[str, bool] = {}

        def matches(key: str) -> bool:
            hit = cache.get(key)
            if hit is None:
                hit = key in exact or (
                    len(key) <= MAX_PATTERN_KEY and any(p.search(key) for p in compiled)
                )
                if len(cache) < 4096:
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
        if not isinstance(data["commitment"], str) or not _HEX64.match(data["commitment"]):
            raise ValueError("disclosure commitment is not 64 lowercase hex digits")
        if not isinstance(data["salt"], str) or not isinstance(data["key"], str):
            raise ValueError("disclosure salt and key are strings")
        return cls(
            commitment=data["commitment"], salt=data["salt"], key=data["key"], value=data["value"]
        )


def parse_json_container(text: str) -> Any | None:
    """The object or array a string holds as JSON text, or None (not JSON, or a scalar)."""
    start = text.lstrip(" \t\n\r")[:1]  # JSON allows whitespace before the value
    if start not in ("{", "["):
        return None
    try:
        value = parse(text.encode("utf-8", "surrogatepass"))
    except ValueError:
        return None
    return value if isinstance(value, dict | list) else None


def iter_commitments(
    value: Any, path: tuple[str | int, ...] = (), key: str | None = None
) -> Iterator[tuple[str, str | None, tuple[str | int, ...]]]:
    """Every commitment in ``value``: ``(digest, key it sits under, path)``.

    Strings holding JSON containers are searched too (their path ends at the string).
    """
    stack: list[tuple[Any, tuple[str | int, ...], str | None]] = [(value, path, key)]
    while stack:
        item, where, under = stack.pop()
        if type(item) is dict:
            if COMMIT_KEY in item:
                if not is_commitment(item):
                    raise ValueError(f"{json_path(where)}: malformed commitment {item!r:.80}")
                yield item[COMMIT_KEY], under, where
                continue
            stack.extend((child, (*where, k), k) for k, child in item.items())
        elif type(item) is list:
            stack.extend((child, (*where, i), under) for i, child in enumerate(item))
        elif type(item) is str:
            inner = parse_json_container(item)
            if inner is not None:
                stack.append((inner, where, under))


def iter_leaks(
    value: Any, matches: Callable[[str], bool], path: tuple[str | int, ...] = ()
) -> Iterator[tuple[str, tuple[str | int, ...]]]:
    """Keys matched by the policy whose value is not a commitment: ``(key, path)``."""
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(value, path)]
    while stack:
        item, where = stack.pop()
        if type(item) is dict:
            if is_commitment(item):
                continue
            for k, child in item.items():
                if matches(k) and not is_commitment(child):
                    yield k, (*where, k)
                else:
                    stack.append((child, (*where, k)))
        elif type(item) is list:
            stack.extend((child, (*where, i)) for i, child in enumerate(item))
        elif type(item) is str:
            inner = parse_json_container(item)
            if inner is not None:
                stack.append((inner, where))


def mapping_keys(value: Mapping[str, Any] | Sequence[Any]) -> Iterator[str]:
    """All object keys at any depth (used to refuse the reserved ``$commit`` in input)."""
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if type(item) is dict:
            yield from item
            stack.extend(item.values())
        elif type(item) is list:
            stack.extend(item)
