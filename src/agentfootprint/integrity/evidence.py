"""The values an answer states, and where the run served each: the claim seam's evidence.

Upstream's evidence gate extractor (``core/agent/evidence/{normalize,extract}.ts``), ported
rule for rule, and deliberately CONSERVATIVE: it would rather miss a fabricated value than
accuse a correct answer, so a token is a value only when it carries a digit and is
distinctive:

* the text is cut into tokens on every character outside ``[A-Za-z0-9:_-/.,%+@#$]``, and a
  comma not flanked by digits on both sides (a list comma, ``fc1/3,fc1/4``) splits too;
* each token is normalized (:func:`normalize_token`): lowercased; decoration stripped
  (leading ``$#@+'"`([{<``, trailing ``.,;:!?%'"`)]}>``); thousands separators dropped
  (``1,240`` -> ``1240``); a plain number of at most 15 digits respelled as JavaScript's
  ``String(Number(v))`` does (``98304.0`` -> ``98304``);
* a token with no digit is prose; so is a ratio of one- or two-digit numbers (``24/7``);
  a number with a short unit or word glued to it is judged on its number alone (``32G``,
  ``47th``, ``2h``, ``48-port`` are prose; ``41200iops`` states ``41200``); a number is a
  value when it has at least :data:`MIN_DIGITS` digits; anything else is an identifier when
  it is at least 4 characters long and has a letter or a structural character
  (``:_-/.``): ``vol-0a1b2c3d``, ``10:00:00:90:fa:12:34:56``, ``fc1/3``;
* values are deduplicated, in first-appearance order, over at most :data:`MAX_ANSWER_TOKENS`
  tokens of one answer.

One addition is ours, not upstream's: a **quoted** value. Text between double quotes
(straight or curly), 4 to 80 characters, that is one token of at least 4 characters counts
as a value whether or not it has a digit (``"esxi-host-alpha"``): the model marked it as a
literal; a quoted text followed by a colon is a JSON object's key and states nothing
(``{"text": ...}``). Upstream leaves an all-letters name to an app's declared shapes; a
phrase in quotes is several tokens and never one value (matching is token-exact).

Matching is token-exact, never substring, so an invented ``0xef0101`` is not grounded by a
result that holds ``0xef01011``; ``0x`` values also match without the prefix, both ways
(upstream's ``lookupForms``). :class:`EvidenceIndex` indexes the tool results of a history
with the same normalizer: a result that begins with a JSON object or array is walked (every
key, every leaf: a string leaf whole and tokenized, a number as JavaScript prints it, what
follows the value tokenized as text), any other result is tokenized as text, as upstream's
``evidenceIndex.ts``; an ``af.absent`` envelope's ``looked_for`` is not indexed (it quotes
the arguments, so indexing it would ground any invention handed to a lookup that found
nothing). Error results are not indexed (they quote the model's own arguments).
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Final

from agentfootprint.errors import UsageError
from agentfootprint.integrity.rail import NOT_JSON, is_absence, is_person, leading_json

__all__ = [
    "MAX_ANSWER_TOKENS",
    "MAX_INDEX_CHARS",
    "MIN_DIGITS",
    "EvidenceIndex",
    "Place",
    "answer_values",
    "classify_token",
    "lookup_forms",
    "normalize_token",
    "tokenize",
]

#: the digits a bare number needs to be a value (upstream's ``minDigits`` default)
MIN_DIGITS: Final = 4
#: the tokens one answer contributes at most (upstream's ``MAX_ANSWER_TOKENS``)
MAX_ANSWER_TOKENS: Final = 20_000
#: the characters of tool results an index reads at most (upstream bounds its tokens, at
#: 200,000); past it the index is :attr:`EvidenceIndex.truncated` and a check reading it says
#: nothing. Counted as results are added, before any is read, so a judgement knows it at once
MAX_INDEX_CHARS: Final = 2_000_000
#: the digits a number keeps exactly through a double (upstream's ``MAX_EXACT_DIGITS``)
_MAX_EXACT_DIGITS = 15
#: a quoted value's length, in characters, between the quotes
_QUOTED_MIN, _QUOTED_MAX = 4, 80

# ASCII classes throughout: JavaScript's \d and \s are ASCII, Python's are not
_TOKEN_RUN = re.compile(r"[A-Za-z0-9:_\-/.,%+@#$]+")
#: every ASCII byte outside the token class as a space: ASCII text is cut into its runs of
#: token characters by ``bytes.translate`` and ``split`` (C loops over a 256-byte table, where
#: ``str.translate`` looks each character up in a dict), the same runs as :data:`_TOKEN_RUN`
#: finds
_SPACES = bytes(c if c < 128 and _TOKEN_RUN.fullmatch(chr(c)) else 32 for c in range(256))
_LIST_COMMA = re.compile(r",(?![0-9])|(?<![0-9]),")
_LEADING = re.compile(r"^[$#@+'\"`(\[{<]+")
_TRAILING = re.compile(r"[.,;:!?%'\"`)\]}>]+$")
_THOUSANDS = re.compile(r"-?[0-9]{1,3}(,[0-9]{3})+(\.[0-9]+)?")
_PLAIN_NUMBER = re.compile(r"[-+]?[0-9]+(\.[0-9]+)?")
_NUMBER_WITH_TAIL = re.compile(r"([-+]?[0-9]+(?:\.[0-9]+)?)[-/]?[a-z]{1,5}(?:/[a-z]{1,5})?")
_PROSE_RATIO = re.compile(r"[0-9]{1,2}/[0-9]{1,2}")
_HAS_LETTER = re.compile(r"[a-z]")
_A_DIGIT = re.compile(r"[0-9]")
_STRUCTURAL = re.compile(r"[:_\-/.]")
_KEY = re.compile(r"\s*:")
_QUOTED = re.compile(r"\"([^\"\n]*)\"|\u201c([^\u201d\n]*)\u201d")
_NO_DIGITS = str.maketrans("", "", "0123456789")


def _digits(text: str) -> int:
    """The ASCII digits in ``text`` (counted in C: the text less its digits)."""
    return len(text) - len(text.translate(_NO_DIGITS))


def _js_number(value: float) -> str:
    """``String(value)`` as JavaScript prints a finite double (ECMA-262 Number::toString):
    the shortest digits that round-trip, plain from 1e-6 up to 1e21, else an exponent."""
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    shortest = Decimal(repr(abs(value))).normalize()
    _, digit_tuple, exponent = shortest.as_tuple()
    assert isinstance(exponent, int)  # finite
    digits = "".join(map(str, digit_tuple))
    k = len(digits)
    n = exponent + k  # value = 0.digits * 10**n
    if k <= n <= 21:
        text = digits + "0" * (n - k)
    elif 0 < n <= 21:
        text = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        text = "0." + "0" * -n + digits
    else:
        power = n - 1
        mantissa = digits if k == 1 else digits[0] + "." + digits[1:]
        text = f"{mantissa}e{'+' if power > 0 else '-'}{abs(power)}"
    return sign + text


@functools.lru_cache(maxsize=1 << 16)
def normalize_token(raw: str) -> str:
    """One spelling for one value (upstream's ``normalizeToken``); ``""`` for a token that
    is nothing but decoration. Cached: a conversation's results repeat their words and keys,
    and each is spelled once (a pure function of the text)."""
    value = raw.lower().strip()
    if not value:
        return ""
    value = _TRAILING.sub("", _LEADING.sub("", value))
    if not value:
        return ""
    if _THOUSANDS.fullmatch(value):
        value = value.replace(",", "")
    if _PLAIN_NUMBER.fullmatch(value) and _digits(value) <= _MAX_EXACT_DIGITS:
        # an integer of at most 15 digits is exact in a double, and JavaScript prints it
        # as Python does (-0 as 0)
        value = str(int(value)) if "." not in value else _js_number(float(value))
    return value


def _runs(text: str) -> list[str]:
    """``text``'s runs of token characters, in order."""
    if text.isascii():
        return text.encode("ascii").translate(_SPACES).decode("ascii").split()
    return _TOKEN_RUN.findall(text)


def tokenize(text: str) -> list[str]:
    """``text``'s normalized tokens, in order (upstream's ``tokenize``)."""
    out: list[str] = []
    for rough in _runs(text):
        for piece in _LIST_COMMA.split(rough) if "," in rough else (rough,):
            token = normalize_token(piece)
            if token:
                out.append(token)
    return out


def _token_set(text: str) -> set[str]:
    """``text``'s distinct normalized tokens (each distinct spelling normalized once)."""
    out: set[str] = set()
    for rough in set(_runs(text)):
        if "," in rough:
            out.update(map(normalize_token, _LIST_COMMA.split(rough)))
        else:
            out.add(normalize_token(rough))
    return out


@functools.lru_cache(maxsize=1 << 16)
def classify_token(token: str, min_digits: int = MIN_DIGITS) -> str | None:
    """The value a normalized token states (upstream's ``classifyToken`` with no declared
    shape or exemption): a number's digits, an identifier whole, None for prose. Cached, as
    :func:`normalize_token`: an answer's words repeat from answer to answer (a pure function
    of its arguments)."""
    if not token or _A_DIGIT.search(token) is None:
        return None
    if _PROSE_RATIO.fullmatch(token):
        return None
    tail = _NUMBER_WITH_TAIL.fullmatch(token)
    numeric = (
        normalize_token(tail.group(1))
        if tail
        else token
        if _PLAIN_NUMBER.fullmatch(token)
        else None
    )
    if numeric is not None:
        return numeric if _digits(numeric) >= min_digits else None
    if len(token) < 4:
        return None
    if not _HAS_LETTER.search(token) and not _STRUCTURAL.search(token):
        return None
    return token


def _quoted(text: str) -> set[str]:
    """The one-token values ``text`` quotes (ours: see the module docstring)."""
    found: set[str] = set()
    for match in _QUOTED.finditer(text):
        inner = match.group(1) if match.group(1) is not None else match.group(2)
        if not _QUOTED_MIN <= len(inner) <= _QUOTED_MAX or _KEY.match(text, match.end()):
            continue  # a JSON object's key names a field, it states no value
        tokens = tokenize(inner)
        if len(tokens) == 1 and len(tokens[0]) >= _QUOTED_MIN:
            found.add(tokens[0])
    return found


def answer_values(text: str) -> list[str]:
    """The values ``text`` states, normalized, deduplicated, in first-appearance order
    (a number's digits, an identifier, a quoted one-token value). Total: anything that is
    not a string states nothing."""
    if not isinstance(text, str):
        return []
    quoted = _quoted(text) if ('"' in text or "\u201c" in text) else set()
    seen: set[str] = set()
    out: list[str] = []
    for budget, token in enumerate(tokenize(text)):
        if budget >= MAX_ANSWER_TOKENS:
            break
        value = classify_token(token)
        if value is None and token in quoted:
            value = token
        if value is None or value in seen:
            continue
        seen.add(value)
        out.append(value)
    return out


def lookup_forms(normalized: str) -> tuple[str, ...]:
    """The spellings that count as the same value: ``0xef0101`` is also ``ef0101``
    (upstream's ``lookupForms``; the index expands too, so the prefix may be dropped on
    either side)."""
    if normalized.startswith("0x") and len(normalized) > 2:
        return (normalized, normalized[2:])
    return (normalized,)


@dataclass(frozen=True, kw_only=True, slots=True)
class Place:
    """Where a value was served: a tool result of the history."""

    turn: int  #: the turn of the result (user messages at or before it, as ``rail.turn_of``)
    tool_call_id: str | None  #: the call it answered (None: not a string in the record)
    tool: str | None  #: the tool's name (None: not a string in the record)
    history_index: int  #: the result's index in the history


class EvidenceIndex:
    """The values a history's tool results served, each with the places that served it.

    Grown with :meth:`add` as the history grows (append-only, so each message is read once:
    O(new messages) per call); ``turn`` is a running count of user messages, the semantics
    of :func:`agentfootprint.integrity.rail.turn_of`. A result added is kept as it is and read
    (its forms indexed) when first asked for: :meth:`places` reads every result added so far,
    in history order; :meth:`served_in_turn` reads only the results of one turn that it needs.
    What either gives equals an index that read every result at once."""

    def __init__(self) -> None:
        #: each result's place, as (turn, tool_call_id, tool, history_index): plain tuples,
        #: made into :class:`Place` when asked for
        self._results: list[tuple[int, str | None, str | None, int]] = []
        #: each result's content (the history's own string: kept, never copied)
        self._contents: list[str] = []
        #: each form's results, by number in ``_results``: one int, or a list of several
        #: (most forms are served once: no list for them)
        self._places: dict[str, int | list[int]] = {}
        self._read = 0  #: the results whose forms are in ``_places``
        self._chars = 0  #: the characters of the results added
        self._indexed = 0  #: the history index the next :meth:`add` starts at
        self._turn = 0
        self._results_this_turn = 0
        self._truncated = False
        #: held while results are read into ``_places`` (a kept index is read by the turns
        #: of its conversation, which an agent may run in several threads); what is read
        #: meanwhile is append-only
        self._reading = threading.Lock()

    @classmethod
    def of(cls, history: Sequence[Any]) -> EvidenceIndex:
        """The index of a whole history."""
        index = cls()
        index.add(history, 0)
        return index

    @property
    def indexed(self) -> int:
        """How many history messages are indexed (the next :meth:`add`'s ``start_index``)."""
        return self._indexed

    @property
    def current_turn(self) -> int:
        """The turn of the last indexed message (0: no user message yet)."""
        return self._turn

    @property
    def tool_results_this_turn(self) -> int:
        """The tool messages (errors included, as upstream counts them) since the last user
        message."""
        return self._results_this_turn

    @property
    def truncated(self) -> bool:
        """The results served more than :data:`MAX_INDEX_CHARS` characters: the later ones
        are not indexed, so the index can call a served value unserved."""
        return self._truncated

    def add(self, messages: Iterable[Any], start_index: int) -> None:
        """Index ``messages``, the history's messages from ``start_index`` on. Messages
        already indexed (``start_index`` below :attr:`indexed`) are skipped; a gap (above it)
        is a :class:`UsageError`: the turns would be miscounted."""
        if isinstance(start_index, bool) or not isinstance(start_index, int) or start_index < 0:
            raise UsageError(
                f"start_index: expected a history index (an int >= 0), got {start_index!r}",
                option="start_index",
            )
        if start_index > self._indexed:
            raise UsageError(
                f"start_index: the index holds messages 0 to {self._indexed - 1}; messages "
                f"from {start_index} would leave a gap",
                option="start_index",
            )
        skip = self._indexed - start_index  # the messages already indexed
        for position, message in enumerate(messages, start_index):
            if skip > 0:
                skip -= 1
                continue
            self._indexed = position + 1
            if type(message) is not dict and not isinstance(message, Mapping):
                continue
            role = message.get("role")
            if role == "tool":
                self._result(message, position)
            elif role == "user" and is_person(message):
                self._turn += 1
                self._results_this_turn = 0

    def _result(self, message: Mapping[str, Any], position: int) -> None:
        """One tool message of the history at ``position``, added."""
        self._results_this_turn += 1
        content = message.get("content")
        if message.get("is_error") is True or not isinstance(content, str):
            return
        self._chars += len(content)
        if self._truncated or self._chars > MAX_INDEX_CHARS:
            self._truncated = True
            return
        call_id, tool = message.get("tool_call_id"), message.get("name")
        self._contents.append(content)  # first: a result numbered has its content
        self._results.append(
            (
                self._turn,
                call_id if isinstance(call_id, str) else None,
                tool if isinstance(tool, str) else None,
                position,
            )
        )

    def _read_all(self) -> None:
        """Read every result added and not read yet, in history order, into ``_places``."""
        if self._read == len(self._results):
            return
        with self._reading:
            places = self._places
            for number in range(self._read, len(self._results)):
                for form in _result_forms(self._contents[number]):  # one place per form
                    found = places.get(form)
                    if found is None:
                        places[form] = number
                    elif isinstance(found, int):
                        places[form] = [found, number]
                    else:
                        found.append(number)
                self._read = number + 1

    def places(self, value: str) -> list[Place]:
        """Where ``value`` (normalized here too) was served, in history order: token-exact,
        a ``0x`` value also without its prefix."""
        if not isinstance(value, str):
            return []
        self._read_all()
        numbers: set[int] = set()
        for form in _lookups(value):
            numbers.update(self._numbers(form))
        places = []
        for number in sorted(numbers):  # results are numbered in history order
            turn, tool_call_id, tool, history_index = self._results[number]
            places.append(
                Place(turn=turn, tool_call_id=tool_call_id, tool=tool, history_index=history_index)
            )
        return places

    def served_in_turn(self, values: Iterable[str], turn: int) -> bool:
        """Whether a result of ``turn`` serves one of ``values`` (as :meth:`places` would
        place it), reading only that turn's results not read yet, newest first, until one
        does: an answer is mostly grounded in its own turn's last results."""
        wanted = {form for value in values if isinstance(value, str) for form in _lookups(value)}
        if not wanted:
            return False
        if self._unread_serve(wanted, turn):
            return True
        return any(
            self._results[number][0] == turn for form in wanted for number in self._numbers(form)
        )

    def serves(self, value: str) -> bool:
        """Whether a result serves ``value`` (``places(value)`` is not empty), reading the
        newest turn's unread results first, newest first: an answer's values are mostly
        there. Only a value none of them serves reads the rest of the history."""
        if not isinstance(value, str):
            return False
        wanted = _lookups(value)
        if any(self._numbers(form) for form in wanted):
            return True
        if self._read < len(self._results):
            if self._unread_serve(set(wanted), self._results[-1][0]):
                return True
            self._read_all()
        return any(self._numbers(form) for form in wanted)

    def _unread_serve(self, wanted: set[str], turn: int) -> bool:
        """Whether a result of ``turn`` not read yet serves one of the ``wanted`` forms: read
        newest first, stopping at an older turn (nothing is added to ``_places``)."""
        for number in range(len(self._results) - 1, self._read - 1, -1):
            result_turn = self._results[number][0]
            if result_turn < turn:
                break
            if result_turn == turn and not wanted.isdisjoint(_result_forms(self._contents[number])):
                return True
        return False

    def _numbers(self, form: str) -> Sequence[int]:
        found = self._places.get(form)
        if found is None:
            return ()
        return (found,) if isinstance(found, int) else found


def _lookups(value: str) -> tuple[str, ...]:
    """The forms a value is looked up by (normalized, and without a ``0x`` prefix)."""
    return lookup_forms(normalize_token(value) or value)


def _result_forms(content: str) -> set[str]:
    """Every form one result serves, as upstream's ``indexResult`` (a set: the index keeps
    one place per form and result): a JSON result's keys and leaves, and its text after.

    A string leaf is upstream's whole and tokenized; its whole form is added only when the
    leaf is not ASCII. An ASCII leaf's whole form is either one of its tokens (the same
    stripping, on the run of token characters that holds it) or holds a character no token
    holds (a space, a list comma, ...), and the index is read only with an answer's values,
    which are tokens: the form could never be asked for. Not so past ASCII, where lowering
    can make a token character (the Kelvin sign lowers to ``k``)."""
    forms: set[str] = set()
    texts: list[str] = []
    value, after = leading_json(content)
    if value is not NOT_JSON:
        if is_absence(value):
            value = {k: v for k, v in value.items() if k != "looked_for"}
        _walk(value, forms, texts)
    texts.append(after)
    # every leaf's tokens and the text after in one pass: no token spans a line break
    joined = "\n".join(texts)
    forms |= _token_set(joined)
    if not joined.isascii():
        forms.update(normalize_token(leaf) for leaf in texts[:-1] if not leaf.isascii())
    forms.discard("")
    # a form that starts with 0x holds it in the text (lowered, or as a JSON \u escape)
    if "0x" in content or "0X" in content or "\\u" in content:
        forms.update([f[2:] for f in forms if f.startswith("0x") and len(f) > 2])
    return forms


def _walk(value: Any, forms: set[str], leaves: list[str]) -> None:
    """Keys and leaves of a JSON value, without recursion (a crafted depth cannot exhaust
    the stack): the keys' forms and the numbers' into ``forms``, the string leaves into
    ``leaves``. The decoder's own types are read by identity, a container's strings and
    integers where they are met (the common case); anything else is dispatched alone."""
    keys: set[Any] = set()
    stack: list[Any] = [value]
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is dict:
            keys.update(node)
            members: Any = node.values()
        elif kind is list:
            members = node
        else:
            _scalar(node, forms, leaves, stack)
            continue
        for member in members:
            member_kind = type(member)
            if member_kind is str:
                leaves.append(member)
            elif member_kind is int:  # normalize_token(str(n)) is str(n)
                forms.add(str(member))
            elif member is not None:
                stack.append(member)
    forms.update([normalize_token(k if type(k) is str else str(k)) for k in keys])


def _scalar(node: Any, forms: set[str], leaves: list[str], stack: list[Any]) -> None:
    """One node that is not the decoder's dict or list (a root string, a float, a boolean,
    or a subclass of a JSON type a caller built)."""
    if isinstance(node, str):
        leaves.append(str(node))
    elif isinstance(node, bool):
        forms.add("true" if node else "false")
    elif isinstance(node, int):
        forms.add(str(int(node)))
    elif isinstance(node, float):
        if node == node and node not in (float("inf"), float("-inf")):
            forms.add(normalize_token(_js_number(float(node))))
    elif isinstance(node, list):
        stack.extend(node)
    elif isinstance(node, Mapping):
        stack.append({str(key): member for key, member in node.items()})
