"""Redaction at the store boundary: what is recorded holds commitments, not values.

``RedactionPolicy(keys=[...], patterns=[...])`` is checked when it is made. The
:class:`Boundary` applies it to every value on its way into the log (and to event
payloads on their way to listeners): each value under a matching key becomes
``{"$commit": hex}`` with a fresh random salt, and its disclosure
``[salt, key, value]`` goes to the vault when there is one, or is dropped.

What the model receives and what ``run()`` returns are never redacted: the
runtime keeps the live values and records only their committed form.
"""

from __future__ import annotations

import re
import secrets
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from agentfootprint.errors import ReservedKeyError, UsageError
from agentfootprint.verify.canonical import canon, json_path
from agentfootprint.verify.commitments import (
    COMMIT_KEY,
    Disclosure,
    PolicyDocument,
    b64url,
    commitment_digest,
    is_commitment,
    parse_json_container,
)

__all__ = [
    "RESERVED_STATE_KEYS",
    "Boundary",
    "RedactionPolicy",
    "ReplayCommitments",
    "SaltSource",
    "conversation_redaction",
    "refuse_reserved_key",
]

#: State keys the loop reads as structure: a policy may match keys *inside* them, but not
#: the keys themselves (their whole value would become one commitment).
#: Request fields: a policy naming them would commit a whole field of the request, and
#: committing a request would then differ from building it from committed state.
RESERVED_REQUEST_FIELDS = frozenset({"model", "params", "system", "messages", "tools"})

RESERVED_STATE_KEYS = frozenset(
    {
        "agent",
        "model",
        "params",
        "system_pieces",
        "history",
        "tool_schemas",
        "iteration",
        "usage",
        "last_response",
        "stopped_early",
    }
)

#: Every key the conversation's text travels under, in state, events and error records.
CONVERSATION_KEYS = (
    "content",
    "arguments",
    "user_message",
    "final_answer",
    "message",
    "answer",
    "result",
)

SaltSource = Callable[[], bytes]


def random_salt() -> bytes:
    """128 random bits from the OS: a fresh salt for every committed value."""
    return secrets.token_bytes(16)


@dataclass(frozen=True, slots=True, init=False)
class RedactionPolicy:
    """Keys to redact by name, at any depth of any recorded value.

    ``keys``: exact key names. ``patterns``: regular expressions (Python ``re``
    syntax, matched with ``search``; put flags inline, e.g. ``"(?i)email"``).
    """

    keys: tuple[str, ...]
    patterns: tuple[str, ...]
    document: PolicyDocument = field(repr=False, compare=False)

    def __init__(
        self, keys: Iterable[str] = (), patterns: Iterable[str | re.Pattern[str]] = ()
    ) -> None:
        keys_t = _strings("keys", keys)
        patterns_t = tuple(dict.fromkeys(_pattern(p) for p in _items("patterns", patterns)))
        if not keys_t and not patterns_t:
            raise UsageError(
                "option 'redact': the policy names no key and no pattern; "
                "give keys=[...] or patterns=[...]",
                option="redact",
            )
        for key in keys_t:
            if key == COMMIT_KEY:
                raise UsageError(
                    "option 'redact': '$commit' is reserved for commitments", option="redact"
                )
        document = PolicyDocument(keys=keys_t, patterns=patterns_t)
        matches = document.matcher()
        for reserved in sorted(RESERVED_STATE_KEYS | RESERVED_REQUEST_FIELDS):
            if matches(reserved):
                raise UsageError(
                    f"option 'redact': the policy matches {reserved!r}, a state key or "
                    "request field the loop reads as structure; name the keys inside it "
                    "instead (for the conversation's text use conversation_redaction())",
                    option="redact",
                )
        object.__setattr__(self, "keys", keys_t)
        object.__setattr__(self, "patterns", patterns_t)
        object.__setattr__(self, "document", document)

    def __or__(self, other: RedactionPolicy) -> RedactionPolicy:
        """The union of two policies (``conversation_redaction() | RedactionPolicy(...)``)."""
        return RedactionPolicy(
            keys=(*self.keys, *other.keys), patterns=(*self.patterns, *other.patterns)
        )

    @property
    def digest(self) -> str:
        return self.document.digest()


def _items(option: str, values: Any) -> list[Any]:
    if isinstance(values, str | bytes) or not isinstance(values, Iterable):
        raise UsageError(
            f"option 'redact': {option} must be a list, got {values!r}", option="redact"
        )
    return list(values)


def _strings(option: str, values: Any) -> tuple[str, ...]:
    items = _items(option, values)
    for item in items:
        if not isinstance(item, str) or not item:
            raise UsageError(
                f"option 'redact': {option} must be non-empty strings, got {item!r}",
                option="redact",
            )
    return tuple(dict.fromkeys(items))


def _pattern(pattern: Any) -> str:
    if isinstance(pattern, re.Pattern):
        inline = re.compile(pattern.pattern).flags if isinstance(pattern.pattern, str) else 0
        if not isinstance(pattern.pattern, str) or pattern.flags & ~(re.UNICODE | inline):
            raise UsageError(
                "option 'redact': give compiled patterns without flags (write "
                "them inline, e.g. '(?i)email') so a verifier can reapply them",
                option="redact",
            )
        pattern = pattern.pattern
    if not isinstance(pattern, str) or not pattern:
        raise UsageError(
            f"option 'redact': patterns must be non-empty strings, got {pattern!r}", option="redact"
        )
    try:
        re.compile(pattern)
    except re.error as exc:
        raise UsageError(
            f"option 'redact': {pattern!r} is not a regular expression ({exc})", option="redact"
        ) from exc
    return pattern


def conversation_redaction() -> RedactionPolicy:
    """Every key the conversation travels under: the user message, history message text,
    tool-call arguments, tool results, the model's text and the final answer (in state,
    in typed events and in error records). Runs redacted this way still verify."""
    return RedactionPolicy(keys=CONVERSATION_KEYS)


def refuse_reserved_key(value: Any, where: str) -> None:
    """Input from outside (run input, tool results, model replies) may not use ``$commit``
    at any depth, JSON text inside strings included; raises naming the path."""
    path = _find_commit_key(value, ())
    if path is not None:
        raise ReservedKeyError(
            f"{where}{json_path(path)[1:]}",
            "the key '$commit' is reserved for redaction commitments",
        )


def _find_commit_key(value: Any, path: tuple[str | int, ...]) -> tuple[str | int, ...] | None:
    kind = type(value)
    if kind is str:
        inner = parse_json_container(value)
        return None if inner is None else _find_commit_key(inner, path)
    if kind is dict:
        for k, v in value.items():
            if k == COMMIT_KEY:
                return (*path, k)
            found = _find_commit_key(v, (*path, k))
            if found is not None:
                return found
    elif kind is list or kind is tuple:
        for i, v in enumerate(value):
            found = _find_commit_key(v, (*path, i))
            if found is not None:
                return found
    return None


class ReplayCommitments:
    """What a replay's boundary consults so an unchanged replay records the original's bytes.

    ``salts``: the original run's disclosures (from its vault). A value committed again
    under the same key gets the original's salt, hence the original's commitment; each
    salt serves once, in the original's order, so no commitment is written twice.
    ``inherited``: commitments of the run's starting state, which may be recorded again.
    ``on_reuse(digest, key)`` is called (and should raise) when a recorded commitment that
    could not be opened is about to be written a second time: the original committed that
    place separately, and only opening both could tell whether they hide one value.
    """

    def __init__(
        self,
        salts: Iterable[Disclosure],
        inherited: Iterable[str],
        on_reuse: Callable[[str, str | None], None],
    ) -> None:
        self._salts: dict[tuple[str, bytes], deque[str]] = {}
        for disclosure in salts:
            key = (disclosure.key, canon(disclosure.value))
            self._salts.setdefault(key, deque()).append(disclosure.salt)
        self._inherited = frozenset(inherited)
        self._written: set[str] = set()
        self._on_reuse = on_reuse
        #: what the replay committed (to tell a changed redacted value from a new salt)
        self.made: dict[str, Any] = {}
        #: set once a fork goes live: its new values get fresh salts, never the original's
        self.live = False

    def salt(self, key: str, value: Any) -> str | None:
        """The original's salt for ``value`` under ``key`` (None: it has no more)."""
        if self.live:
            return None
        salts = self._salts.get((key, canon(value)))
        return salts.popleft() if salts else None

    def passing(self, digest: str, key: str | None) -> None:
        """A commitment is about to be recorded (new, or carried from the recording)."""
        if digest in self._inherited:
            return
        if digest in self._written:
            self._on_reuse(digest, key)
        self._written.add(digest)


class Boundary:
    """Commits values by policy; keeps each new commitment's disclosure until taken."""

    def __init__(
        self,
        policy: RedactionPolicy,
        *,
        salt: SaltSource = random_salt,
        replay: ReplayCommitments | None = None,
    ) -> None:
        self.policy = policy
        self._matches = policy.document.matcher()
        self._salt = salt
        self._replay = replay
        self._recording = True  # False while committing a payload only listeners see
        self.disclosures: list[Disclosure] = []
        # committed form of each container walked (keyed by identity, holding the object):
        # a value recorded twice (full mode, a continued run) keeps its commitments
        self.memo: dict[int, tuple[Any, Any]] = {}

    def seed(self, memo: dict[int, tuple[Any, Any]]) -> None:
        """Start from the committed forms an earlier run (or the vault) established."""
        self.memo.update(memo)

    def take_disclosures(self) -> list[Disclosure]:
        taken, self.disclosures = self.disclosures, []
        return taken

    def commit_entry(self, key: str, value: Any) -> Any:
        """The committed form of ``value`` stored under ``key`` (a top-level state key)."""
        if self._matches(key):
            return self._commitment(key, value)
        return self.commit(value)

    def commit(self, value: Any, *, recorded: bool = True) -> Any:
        """The committed form of ``value`` (the same object when nothing in it matches).

        ``recorded=False``: the value goes to listeners only, never to the log (a replay's
        salts and checks are kept for what is recorded)."""
        if recorded:
            return self._walk(value)[0]
        self._recording = False
        try:
            return self._walk(value)[0]
        finally:
            self._recording = True

    def _commitment(self, key: str, value: Any) -> Any:
        replay = self._replay if self._recording else None
        if is_commitment(value):  # idempotent: replayed and continued runs keep their digests
            if replay is not None:
                replay.passing(value[COMMIT_KEY], key)
            return value
        salt = replay.salt(key, value) if replay is not None else None
        if salt is None:
            salt = b64url(self._salt())
        digest = commitment_digest(salt, key, value)
        if replay is not None:
            replay.passing(digest, key)
            replay.made[digest] = value
        self.disclosures.append(Disclosure(commitment=digest, salt=salt, key=key, value=value))
        return {COMMIT_KEY: digest}

    def _walk(self, value: Any) -> tuple[Any, bool]:
        kind = type(value)
        if kind is dict or kind is list:
            hit = self.memo.get(id(value))
            if hit is not None and hit[0] is value:
                return hit[1], hit[1] is not value
            result = self._walk_container(value, kind)
            if self._recording:  # a listener's commitments are never recorded: not reused
                self.memo[id(value)] = (value, result[0])
            return result
        if kind is str:
            inner = parse_json_container(value)
            if inner is not None:
                committed, changed = self._walk(inner)
                if changed:
                    return canon(committed).decode("utf-8"), True
        return value, False

    def _walk_container(self, value: Any, kind: type) -> tuple[Any, bool]:
        if kind is dict:
            if is_commitment(value):  # carried under a key the policy does not name
                if self._replay is not None and self._recording:
                    self._replay.passing(value[COMMIT_KEY], None)
                return value, False
            changed = False
            out: dict[str, Any] = {}
            # members by sorted name, so the order commitments are made in can be read back
            # from the log (a replay hands out the original's salts in that order)
            for key in value if len(value) < 2 else sorted(value):
                child = value[key]
                if self._matches(key):
                    new = self._commitment(key, child)
                    changed = changed or new is not child
                else:
                    new, child_changed = self._walk(child)
                    changed = changed or child_changed
                out[key] = new
            return (out, True) if changed else (value, False)
        items = [self._walk(child) for child in value]
        if any(c for _, c in items):
            return [v for v, _ in items], True
        return value, False
