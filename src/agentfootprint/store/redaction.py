"""Redaction at the store boundary: what is recorded holds commitments, not values.

``RedactionPolicy(keys=[...], patterns=[...])`` is checked when it is made. The
:class:`Boundary` applies it to every value on its way into the log (and to event
payloads on their way to listeners): each value under a matching key becomes
``{"$commit": hex}`` with a fresh random salt, and its disclosure
``[salt, key, value]`` goes to the vault when there is one, or is dropped.

What the model receives and what ``run()`` returns are never redacted: the
runtime keeps the live values and records only their committed form. Under a version 3
policy (what new runs record) the boundary also commits the conversation's text that quotes
a value it committed earlier in the run (echo redaction: :mod:`agentfootprint.logformat.echo`).
"""

from __future__ import annotations

import re
import secrets
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from agentfootprint.errors import ReservedKeyError, UsageError
from agentfootprint.logformat.canonical import canon, json_path
from agentfootprint.logformat.commitments import (
    COMMIT_KEY,
    LEGACY_POLICY_VERSION,
    OPAQUE,
    POLICY_VERSION,
    RE2_POLICY_VERSION,
    Disclosure,
    PolicyDocument,
    b64url,
    commitment_digest,
    is_commitment,
    nests_too_deep,
    re2_refusal,
    read_json_text,
)
from agentfootprint.logformat.echo import CONVERSATION_KEYS, EchoSearch
from agentfootprint.logformat.shared_lists import SharedList
from agentfootprint.store.pattern_subset import PatternRefused, check_pattern

__all__ = [
    "Boundary",
    "RedactionPolicy",
    "ReplayCommitments",
    "SaltSource",
    "conversation_redaction",
    "refuse_reserved_key",
]

#: Request fields: a policy naming them would commit a whole field of the request, and
#: committing a request would then differ from building it from committed state. (The state
#: keys the loop reads as structure are refused by the agent's ``redact`` option, from the
#: keys its features declare: ``agentfootprint.features.registry.structure_keys``.)
RESERVED_REQUEST_FIELDS = frozenset({"model", "params", "system", "messages", "tools"})

_CONVERSATION = frozenset(CONVERSATION_KEYS)

SaltSource = Callable[[], bytes]


def random_salt() -> bytes:
    """128 random bits from the OS: a fresh salt for every committed value."""
    return secrets.token_bytes(16)


@dataclass(frozen=True, slots=True, init=False)
class RedactionPolicy:
    """Keys to redact by name, at any depth of any recorded value.

    ``keys``: exact key names. ``patterns``: regular expressions, found anywhere in a key,
    written in the version 2 pattern subset of RE2 (:mod:`agentfootprint.store.pattern_subset`:
    linear-time matching, and a meaning an auditor's matcher can reproduce exactly); put the
    flag inline, e.g. ``"(?i)email"``. Recorded as a version 3 policy document (version 2's
    patterns, and echo redaction); a run continued or replayed from a version 2 run carries
    version 2 where its rows must compare with the original's (:meth:`at_version`).
    """

    keys: tuple[str, ...]
    patterns: tuple[str, ...]
    document: PolicyDocument = field(repr=False, compare=False)
    #: patterns carried from a recorded policy (a parent's, an original's): they were
    #: checked by the writer that recorded them, so the subset is not asked of them again
    carried: frozenset[str] = field(repr=False, compare=False)

    def __init__(
        self,
        keys: Iterable[str] = (),
        patterns: Iterable[str | re.Pattern[str]] = (),
        *,
        _carried: frozenset[str] = frozenset(),
        _version: int = POLICY_VERSION,
    ) -> None:
        keys_t = _strings("keys", keys)
        patterns_t = tuple(
            dict.fromkeys(_pattern(p, _carried) for p in _items("patterns", patterns))
        )
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
        document = PolicyDocument(keys=keys_t, patterns=patterns_t, version=_version)
        matches = document.matcher()
        for reserved in sorted(RESERVED_REQUEST_FIELDS):
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
        object.__setattr__(self, "carried", _carried & frozenset(patterns_t))

    @classmethod
    def from_document(cls, document: Any) -> RedactionPolicy:
        """The policy a recorded ``run.open`` document (version 1, 2 or 3) names, to record a
        run that continues or replays it: a version 3 policy from a version 3 document, else
        version 2 (its writer had no echo duty). Its patterns are carried
        as recorded (the version 2 subset is asked of new patterns only); a version 1 pattern
        (Python ``re``) that RE2 cannot compile is a :class:`UsageError` naming it."""
        try:
            recorded = PolicyDocument.from_json(document)
        except ValueError as exc:
            raise UsageError(
                f"option 'redact': the recorded policy: {exc}", option="redact"
            ) from exc
        if recorded.version == LEGACY_POLICY_VERSION:
            for pattern in recorded.patterns:
                why = re2_refusal(pattern)
                if why is not None:
                    raise UsageError(
                        f"option 'redact': the recorded policy's pattern {pattern!r} (a "
                        "version 1 policy: Python re syntax) is not RE2 syntax "
                        f"({why}); a run recorded under it cannot be continued or replayed "
                        "under a version 2 policy, which would have to hold that pattern",
                        option="redact",
                    )
        return cls(
            keys=recorded.keys,
            patterns=recorded.patterns,
            _carried=frozenset(recorded.patterns),
            _version=POLICY_VERSION if recorded.echoes else RE2_POLICY_VERSION,
        )

    def __or__(self, other: RedactionPolicy) -> RedactionPolicy:
        """The union of two policies (``conversation_redaction() | RedactionPolicy(...)``),
        of the newer version of the two (a continuation takes on the newer writer's duties)."""
        return RedactionPolicy(
            keys=(*self.keys, *other.keys),
            patterns=(*self.patterns, *other.patterns),
            _carried=self.carried | other.carried,
            _version=max(self.version, other.version),
        )

    def at_version(self, version: int) -> RedactionPolicy:
        """This policy recorded as ``version`` (3, or 2: no echo redaction), as a replay
        records the version of the run it replays."""
        if version == self.version:
            return self
        if type(version) is not int or version not in (RE2_POLICY_VERSION, POLICY_VERSION):
            raise UsageError(
                f"option 'redact': a policy is recorded as version 3, or 2 as a replay of an "
                f"earlier writer's run; not version {version!r}",
                option="redact",
            )
        return RedactionPolicy(
            keys=self.keys, patterns=self.patterns, _carried=self.carried, _version=version
        )

    @property
    def version(self) -> int:
        return self.document.version

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


def _pattern(pattern: Any, carried: frozenset[str]) -> str:
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
    if pattern in carried:  # recorded by an earlier writer, which checked it
        return pattern
    why = re2_refusal(pattern)
    try:
        check_pattern(pattern)
    except PatternRefused as exc:
        where = f"at position {exc.position}: {exc.construct}"
        reason = (
            f"pattern {pattern!r} is outside the version 2 pattern subset ({where})"
            if why is None
            else f"pattern {pattern!r} is not RE2 syntax ({why}; {where})"
        )
        raise UsageError(
            f"option 'redact': {reason}; patterns are RE2 regular expressions restricted to a "
            'subset every engine reads alike (docs/redaction.md, "Patterns": no '
            "lookaround or backreferences, no \\p classes, \\z or $ for the end of a key)",
            option="redact",
        ) from exc
    if why is not None:  # pragma: no cover - never: the subset compiles (test_pattern_subset)
        raise UsageError(
            f"option 'redact': pattern {pattern!r} is not RE2 syntax ({why})", option="redact"
        )
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


def _leaf(kind: type, child: Any) -> bool:
    """A scalar, or text that holds no JSON: nothing in it to walk (a SharedList is a list)."""
    return (
        kind is not dict
        and kind is not list
        and kind is not SharedList
        and (kind is not str or _plain(child))
    )


def _find_commit_key(value: Any, path: tuple[str | int, ...]) -> tuple[str | int, ...] | None:
    """Where ``$commit`` is used as a key (walkable JSON text included: the JSON-text rule of
    :func:`~agentfootprint.logformat.commitments.read_json_text`), or None. Iterative."""
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(value, path)]
    while stack:
        item, where = stack.pop()
        kind = type(item)
        if kind is str:
            inner = read_json_text(item)
            if inner is not None and inner is not OPAQUE:
                stack.append((inner, where))
        elif kind is dict:
            if COMMIT_KEY in item:
                return (*where, COMMIT_KEY)
            stack.extend((v, (*where, k)) for k, v in reversed(item.items()))
        elif kind is list or kind is tuple or kind is SharedList:
            stack.extend((item[i], (*where, i)) for i in range(len(item) - 1, -1, -1))
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


# a frame of the boundary's walk: [kind, source, under, keys, position, out, changed, member
# being walked, live, inside]. kind: _DICT, _LIST, or _TEXT (walkable JSON text in a string:
# keys holds the parsed value, position the number of disclosures before it, out its walked
# result); inside: under a conversation member (its text is searched for echoes)
_DICT, _LIST, _TEXT = 0, 1, 2


class Boundary:
    """Commits values by policy; keeps each new commitment's disclosure until taken.

    The walk is iterative (deep values and JSON text inside strings never recurse). Strings
    follow the JSON-text rule (:func:`~agentfootprint.logformat.commitments.read_json_text`):
    walkable text is rewritten in canonical form when something in it was committed, and
    opaque JSON text is committed whole, under the nearest enclosing member name. Under a
    version 3 policy, conversation text holding a literal of a value committed earlier in the
    run is committed whole too, under the nearest member name (echo redaction)."""

    def __init__(
        self,
        policy: RedactionPolicy,
        *,
        salt: SaltSource = random_salt,
        replay: ReplayCommitments | None = None,
        echoes: EchoSearch | None = None,
    ) -> None:
        """``echoes``: the literals of values the run inherits open (a parent's, in memory or
        opened from the vault), searched for from the start."""
        self.policy = policy
        self._matches = policy.document.matcher()
        self._salt = salt
        self._replay = replay
        self._recording = True  # False while committing a payload only listeners see
        self.disclosures: list[Disclosure] = []
        # committed form of each container walked (keyed by identity, holding the object):
        # a value recorded twice (full mode, a continued run) keeps its commitments
        self.memo: dict[int, tuple[Any, Any]] = {}
        #: the literals of every value committed (version 3 policies only)
        self.echo: EchoSearch | None = None
        if policy.document.echoes:
            self.echo = echoes.fork() if echoes is not None else EchoSearch()

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
        return self._walk(value, key)[0]

    def commit_always(self, key: str, value: Any) -> Any:
        """``value`` committed under ``key`` whatever the policy names: for evidence that must
        never be recorded in clear under a policy (a wire body's digest: a plain digest of a
        body holding a short secret would let anyone confirm a guess)."""
        return self._commitment(key, value)

    def commit(self, value: Any, *, recorded: bool = True, key: str | None = None) -> Any:
        """The committed form of ``value`` (the same object when nothing in it matches).

        ``key``: the member ``value`` sits under, if any (the state key of an ``append``
        operand): opaque JSON text directly in it is committed under that name.
        ``recorded=False``: the value goes to listeners only, never to the log (a replay's
        salts and checks are kept for what is recorded)."""
        if recorded:
            return self._walk(value, key)[0]
        self._recording = False
        try:
            return self._walk(value, key)[0]
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
        if self.echo is not None:
            self.echo.learn(value)
        self.disclosures.append(Disclosure(commitment=digest, salt=salt, key=key, value=value))
        return {COMMIT_KEY: digest}

    def _walk(self, value: Any, under: str | None) -> tuple[Any, bool]:
        """``(committed form, whether it differs)``; members by sorted name, depth first (the
        order commitments are made in, which a replay reads back from the log)."""
        stack: list[list[Any]] = []
        inside = under is not None and under in _CONVERSATION
        result = self._visit(value, under, stack, True, inside)
        while stack:
            frame = stack[-1]
            if result is not None:  # the child the frame was waiting for is done
                kind = frame[0]
                if kind == _DICT:
                    frame[5][frame[7]] = result[0]
                elif kind == _LIST:
                    frame[5].append(result[0])
                else:
                    frame[5] = result
                if result[1]:
                    frame[6] = True
            result = self._step(frame, stack)
        assert result is not None
        return result

    def _visit(
        self, value: Any, under: str | None, stack: list[list[Any]], live: bool, inside: bool
    ) -> tuple[Any, bool] | None:
        """A value's committed form, or None when a frame was pushed to walk it."""
        kind = type(value)
        if kind is SharedList:  # a list held as versions (state): walked as the list it is
            value, kind = value.tolist(), list
        if kind is dict or kind is list:
            if live:  # parsed JSON text is never seen twice: not looked up, not memoized
                hit = self.memo.get(id(value))
                if hit is not None and hit[0] is value:
                    return hit[1], hit[1] is not value
            if kind is dict:
                if is_commitment(value):  # carried under a key the policy does not name
                    if self._replay is not None and self._recording:
                        self._replay.passing(value[COMMIT_KEY], None)
                    if live and self._recording:
                        self.memo[id(value)] = (value, value)
                    return value, False
                keys = list(value) if len(value) < 2 else sorted(value)
                stack.append([_DICT, value, under, keys, 0, {}, False, None, live, inside])
            else:
                stack.append([_LIST, value, under, None, 0, [], False, None, live, inside])
            return None
        if kind is str:
            inner = read_json_text(value)
            if inner is None:
                return self._text(value, under, inside)
            if inner is OPAQUE:
                return self._commitment(_name(under), value), True
            stack.append(
                [
                    _TEXT,
                    value,
                    under,
                    inner,
                    len(self.disclosures),
                    None,
                    False,
                    None,
                    False,
                    inside,
                ]
            )
            return None
        return value, False

    def _text(self, text: str, under: str | None, inside: bool) -> tuple[Any, bool]:
        """Text (no JSON in it): committed whole when it is conversation text quoting a value
        committed earlier in the run, else kept."""
        echo = self.echo
        if inside and echo is not None and echo.found(text) is not None:
            return self._commitment(_name(under), text), True
        return text, False

    def _step(self, frame: list[Any], stack: list[list[Any]]) -> tuple[Any, bool] | None:
        """Walk the frame's next children; its result when it is done (and popped)."""
        kind, source = frame[0], frame[1]
        if kind == _DICT:
            keys, out, position = frame[3], frame[5], frame[4]
            while position < len(keys):
                key = keys[position]
                position += 1
                child = source[key]
                if self._matches(key):
                    new = self._commitment(key, child)
                    if new is not child:
                        frame[6] = True
                    out[key] = new
                    continue
                kind = type(child)
                if _leaf(kind, child):  # a scalar, or text: nothing to walk
                    if kind is str and self.echo is not None and (frame[9] or key in _CONVERSATION):
                        new, changed = self._text(child, key, True)
                        out[key] = new
                        frame[6] = frame[6] or changed
                    else:
                        out[key] = child
                    continue
                found = self._visit(child, key, stack, frame[8], frame[9] or key in _CONVERSATION)
                if found is None:
                    frame[4], frame[7] = position, key
                    return None
                out[key] = found[0]
                if found[1]:
                    frame[6] = True
            frame[4] = position
        elif kind == _LIST:
            out, position = frame[5], frame[4]
            while position < len(source):
                child = source[position]
                position += 1
                kind = type(child)
                if _leaf(kind, child):
                    if kind is str and frame[9] and self.echo is not None:
                        new, changed = self._text(child, frame[2], True)
                        out.append(new)
                        frame[6] = frame[6] or changed
                    else:
                        out.append(child)
                    continue
                found = self._visit(child, frame[2], stack, frame[8], frame[9])
                if found is None:
                    frame[4] = position
                    return None
                out.append(found[0])
                if found[1]:
                    frame[6] = True
            frame[4] = position
        else:
            if frame[5] is None:
                frame[5] = self._visit(frame[3], frame[2], stack, False, frame[9])
                if frame[5] is None:
                    return None
            stack.pop()
            return self._rewritten(frame)
        stack.pop()
        result = (frame[5], True) if frame[6] else (source, False)
        if frame[8] and self._recording:  # a listener's commitments are never recorded
            self.memo[id(source)] = (source, result[0])
        return result

    def _rewritten(self, frame: list[Any]) -> tuple[Any, bool]:
        """Walkable JSON text after its walk: kept, or rewritten as ``canon`` of its committed
        form; committed whole if the rewrite nests deeper than the JSON-text rule walks (a
        commitment of a value at the deepest level adds one), its inner commitments undone."""
        source, (committed, changed) = frame[1], frame[5]
        if not changed:
            return source, False
        text = canon(committed).decode("utf-8")
        if nests_too_deep(text):
            del self.disclosures[frame[4] :]
            return self._commitment(_name(frame[2]), source), True
        return text, True


def _plain(text: str) -> bool:
    """Text for sure (no ``{``, ``[`` or JSON whitespace first): the JSON-text rule's step 1."""
    return text[:1] not in _MAYBE_JSON or not text


_MAYBE_JSON = "{[ \t\n\r"


def _name(under: str | None) -> str:
    """The key an opaque string is committed under: the member it sits in (the empty name
    for a string at the top of an appended value whose state key was not given)."""
    return "" if under is None else under
