"""The value walkers of replay and the pytest plugin walk with a stack: a value nested as
deep as a log allows (and JSON text inside its strings, deeper still) gives what the
straightforward recursive walk gave, and however little stack the caller has left.

Each ``_reference_*`` below is the recursive implementation the walker replaced, run here
under a raised recursion limit."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from types import FrameType
from typing import Any

import orjson
import pytest

from agentfootprint.audit.divergence import REDACTED, commitments_alike, masked
from agentfootprint.logformat.canonical import canon
from agentfootprint.logformat.commitments import (
    COMMIT_KEY,
    OPAQUE,
    Disclosure,
    commitment_digest,
    is_commitment,
    parse_json_container,
    read_json_text,
)
from agentfootprint.replayer.recording import holds_commitment, ordered_commitments
from agentfootprint.store.vault import DisclosureVault
from agentfootprint.testing.pytest_plugin import same_but_committed

# -- the recursive implementations, for reference ------------------------------------------


def _reference_reveal(
    vault: DisclosureVault, value: Any, memo: dict[int, tuple[Any, Any]] | None = None
) -> Any:
    if is_commitment(value):
        found = vault.get(value[COMMIT_KEY])
        return value if found is None or not found.opens() else found.value
    kind = type(value)
    if kind is dict:
        opened: Any = {k: _reference_reveal(vault, v, memo) for k, v in value.items()}
    elif kind is list:
        opened = [_reference_reveal(vault, v, memo) for v in value]
    elif kind is str:
        inner = parse_json_container(value)
        if inner is None:
            return value
        opened_inner = _reference_reveal(vault, inner, memo)
        return value if opened_inner == inner else canon(opened_inner).decode("utf-8")
    else:
        return value
    if opened == value:
        return value
    if memo is not None:
        memo[id(opened)] = (opened, value)
    return opened


def _reference_commitments_alike(value: Any) -> Any:
    kind = type(value)
    if kind is dict:
        if is_commitment(value):
            return {COMMIT_KEY: "*"}
        return {k: _reference_commitments_alike(v) for k, v in value.items()}
    if kind is list:
        return [_reference_commitments_alike(v) for v in value]
    if kind is str and COMMIT_KEY in value:
        inner = parse_json_container(value)
        if inner is not None:
            return _reference_commitments_alike(inner)
    return value


def _reference_masked(value: Any, redacts: Callable[[str], bool]) -> Any:
    kind = type(value)
    if kind is dict:
        if is_commitment(value):
            return value
        return {
            k: REDACTED if redacts(k) and not is_commitment(v) else _reference_masked(v, redacts)
            for k, v in value.items()
        }
    if kind is list:
        return [_reference_masked(v, redacts) for v in value]
    if kind is str:
        inner = read_json_text(value)
        if inner is OPAQUE:
            return REDACTED
        if inner is not None:
            shown = _reference_masked(inner, redacts)
            return value if shown == inner else canon(shown).decode("utf-8")
    return value


def _reference_ordered_commitments(value: Any) -> Iterator[str]:
    kind = type(value)
    if kind is dict:
        if is_commitment(value):
            yield value[COMMIT_KEY]
            return
        for key in sorted(value):
            yield from _reference_ordered_commitments(value[key])
    elif kind is list:
        for item in value:
            yield from _reference_ordered_commitments(item)
    elif kind is str and COMMIT_KEY in value:
        inner = parse_json_container(value)
        if inner is not None:
            yield from _reference_ordered_commitments(inner)


def _reference_same_but_committed(recorded: Any, sent: Any) -> bool:
    if is_commitment(recorded):
        return True
    if type(recorded) is dict:
        return (
            type(sent) is dict
            and recorded.keys() == sent.keys()
            and all(_reference_same_but_committed(recorded[k], sent[k]) for k in recorded)
        )
    if type(recorded) is list:
        return (
            type(sent) is list
            and len(recorded) == len(sent)
            and all(
                _reference_same_but_committed(a, b) for a, b in zip(recorded, sent, strict=True)
            )
        )
    if type(recorded) is str and type(sent) is str and recorded != sent:
        inner, original = parse_json_container(recorded), parse_json_container(sent)
        return (
            inner is not None
            and original is not None
            and _reference_same_but_committed(inner, original)
        )
    return bool(type(recorded) is type(sent) and recorded == sent)


# -- stack depth ----------------------------------------------------------------------------


def _with_raised_limit(call: Callable[[], Any]) -> Any:
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 20_000))
    try:
        return call()
    finally:
        sys.setrecursionlimit(old)


def _frames() -> int:
    depth = 0
    frame: FrameType | None = sys._getframe()
    while frame is not None:
        depth, frame = depth + 1, frame.f_back
    return depth


def _with_little_stack(call: Callable[[], Any], spare: int = 60) -> Any:
    """``call()`` with only ``spare`` frames left before the recursion limit."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(_frames() + spare)
    try:
        return call()
    finally:
        sys.setrecursionlimit(old)


def _deep_in_recursion(call: Callable[[], Any], depth: int = 900) -> Any:
    """``call()`` from inside a recursion ``depth`` frames deep (default limit 1000)."""
    return call() if depth <= 0 else _deep_in_recursion(call, depth - 1)


# -- values ---------------------------------------------------------------------------------

DEPTH = 240


def _digest(n: int) -> str:
    return f"{n:064x}"


def _disclosure(n: int, value: Any) -> Disclosure:
    salt = f"salt{n}"
    return Disclosure(
        commitment=commitment_digest(salt, "k", value), key="k", salt=salt, value=value
    )


#: commitments the vault opens (their values), one it holds but that does not open, and
#: ones it does not hold
OPENED = [_disclosure(n, v) for n, v in enumerate([1, "two", {"three": [3]}, [4.5, None], "[5]"])]
NOT_OPENING = Disclosure(commitment=_digest(7), key="k", salt="s", value="nope")
UNKNOWN = [_digest(100 + n) for n in range(3)]


def _commitment(level: int) -> dict[str, str]:
    choices = [d.commitment for d in OPENED] + [NOT_OPENING.commitment, *UNKNOWN]
    return {COMMIT_KEY: choices[level % len(choices)]}


def _side(level: int) -> Any:
    """Something beside the deep branch, by level: commitments, JSON text (with and without
    commitments, canonical or not), the redaction mark, scalars, a malformed commitment."""
    pick = level % 11
    if pick == 0:
        return _commitment(level)
    if pick == 1:
        return orjson.dumps({"z": _commitment(level + 1), "a": [level, "x"]}).decode()
    if pick == 2:
        return '[1, {"secret": "s",  "n": 2}]'  # not canonical, no commitment
    if pick == 3:
        return REDACTED
    if pick == 4:
        return [1.5, None, True, _commitment(level + 3)]
    if pick == 5:
        return {COMMIT_KEY: "not a digest"}
    if pick == 6:
        return ' {"secret": ' + orjson.dumps(_commitment(level)).decode() + "}"
    if pick == 7:
        return "[" * 260 + "]" * 260  # opaque JSON text
    if pick == 8:
        return '{"$commit": "' + _commitment(level)[COMMIT_KEY] + '"}'
    if pick == 9:
        return "plain text with $commit in it"
    return {}


def _secret(level: int) -> Any:
    """What sits under a member named ``secret``, by level."""
    pick = level % 5
    if pick == 0:
        return {"inner": [level]}
    if pick == 1:
        return REDACTED
    if pick == 2:
        return _commitment(level)
    if pick == 3:
        return level
    return '{"a": 1}'


def _deep(depth: int, leaf: Any) -> Any:
    value = leaf
    for level in range(depth):
        if level % 2:
            value = {"z": level, "b": value, "a": _side(level), "secret": _secret(level)}
        else:
            value = [_side(level), value, level]
    return value


LEAF = {"leaf": _commitment(2), "secret": "deepest", "text": '{"x": [1, 2]}'}
DEEP = _deep(DEPTH, LEAF)
#: JSON text (itself holding JSON text) in a string deep inside a deep value
DEEP_TEXT = _deep(120, orjson.dumps(_deep(110, orjson.dumps(_deep(6, LEAF)).decode())).decode())
#: a deep value with only shallow JSON text (read the same however little stack is left)
SHALLOW_TEXT_VALUES = [DEEP, _deep(DEPTH, "leaf"), _deep(DEPTH, [])]
VALUES = [*SHALLOW_TEXT_VALUES, DEEP_TEXT, _commitment(0), '{"a": {"$commit": "x"}}', 5]


def _ids(values: list[Any]) -> list[str]:
    return [f"value{i}" for i in range(len(values))]


# -- DisclosureVault.reveal -----------------------------------------------------------------


class _Logged(DisclosureVault):
    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.asked: list[str] = []

    def get(self, commitment: str) -> Disclosure | None:
        self.asked.append(commitment)
        return super().get(commitment)


@pytest.fixture
def vault(tmp_path: Path) -> Iterator[_Logged]:
    opened = _Logged(tmp_path / "vault.db")
    with opened:
        opened.put("r", [*OPENED, NOT_OPENING])
        yield opened


def _revealed(vault: _Logged, reveal: Callable[..., Any], value: Any) -> tuple[Any, ...]:
    vault.asked = []
    memo: dict[int, tuple[Any, Any]] = {}
    result = reveal(value, memo)
    assert all(memo[id(opened)][0] is opened for opened, _ in memo.values())
    return result, result is value, list(memo.values()), list(vault.asked)


@pytest.mark.parametrize("value", VALUES, ids=_ids(VALUES))
def test_reveal_matches_the_recursive_walk(vault: _Logged, value: Any) -> None:
    def reference(v: Any, memo: Any) -> Any:
        return _reference_reveal(vault, v, memo)

    want = _with_raised_limit(lambda: _revealed(vault, reference, value))
    assert _revealed(vault, vault.reveal, value) == want
    assert vault.reveal(value) == want[0]


def test_reveal_opens_what_deep_json_text_holds(vault: _Logged) -> None:
    result = vault.reveal(DEEP_TEXT)
    assert result != DEEP_TEXT
    outside = list(ordered_commitments(_deep(120, "text")))
    assert sorted(vault.asked) == sorted(ordered_commitments(DEEP_TEXT))
    assert len(vault.asked) > len(outside) + 50  # those inside the text are opened too


@pytest.mark.parametrize("value", SHALLOW_TEXT_VALUES, ids=_ids(SHALLOW_TEXT_VALUES))
def test_reveal_needs_little_stack(vault: _Logged, value: Any) -> None:
    want = _revealed(vault, vault.reveal, value)
    with pytest.raises(RecursionError):
        _with_little_stack(lambda: _reference_reveal(vault, value, {}))
    assert _with_little_stack(lambda: _revealed(vault, vault.reveal, value)) == want
    assert _deep_in_recursion(lambda: _revealed(vault, vault.reveal, value)) == want


# -- masked and commitments_alike -----------------------------------------------------------


def _masked(walk: Callable[[Any, Callable[[str], bool]], Any], value: Any) -> tuple[Any, ...]:
    asked: list[str] = []

    def redacts(key: str) -> bool:
        asked.append(key)
        return key == "secret"

    result = walk(value, redacts)
    return result, result is value, asked


@pytest.mark.parametrize("value", VALUES, ids=_ids(VALUES))
def test_masked_matches_the_recursive_walk(value: Any) -> None:
    want = _with_raised_limit(lambda: _masked(_reference_masked, value))
    assert _masked(masked, value) == want


@pytest.mark.parametrize("value", SHALLOW_TEXT_VALUES, ids=_ids(SHALLOW_TEXT_VALUES))
def test_masked_needs_little_stack(value: Any) -> None:
    want = _masked(masked, value)
    with pytest.raises(RecursionError):
        _with_little_stack(lambda: _masked(_reference_masked, value))
    assert _with_little_stack(lambda: _masked(masked, value)) == want
    assert _deep_in_recursion(lambda: _masked(masked, value)) == want


def test_masked_keeps_json_text_nothing_was_masked_in() -> None:
    text = '[1, {"n":  2}]'
    assert masked(_deep(DEPTH, text), lambda key: key == "secret") == _with_raised_limit(
        lambda: _reference_masked(_deep(DEPTH, text), lambda key: key == "secret")
    )
    assert masked(text, lambda key: False) is text
    assert masked('{"secret": "<redacted>"}', lambda key: True) == '{"secret": "<redacted>"}'
    assert masked('{"secret": 1}', lambda key: True) == '{"secret":"<redacted>"}'


@pytest.mark.parametrize("value", VALUES, ids=_ids(VALUES))
def test_commitments_alike_matches_the_recursive_walk(value: Any) -> None:
    want = _with_raised_limit(lambda: _reference_commitments_alike(value))
    assert commitments_alike(value) == want
    assert canon(commitments_alike(value)) == canon(want)


@pytest.mark.parametrize("value", SHALLOW_TEXT_VALUES, ids=_ids(SHALLOW_TEXT_VALUES))
def test_commitments_alike_needs_little_stack(value: Any) -> None:
    want = commitments_alike(value)
    with pytest.raises(RecursionError):
        _with_little_stack(lambda: _reference_commitments_alike(value))
    assert _with_little_stack(lambda: commitments_alike(value)) == want
    assert _deep_in_recursion(lambda: commitments_alike(value)) == want


# -- ordered_commitments --------------------------------------------------------------------


@pytest.mark.parametrize("value", VALUES, ids=_ids(VALUES))
def test_ordered_commitments_matches_the_recursive_walk(value: Any) -> None:
    want = _with_raised_limit(lambda: list(_reference_ordered_commitments(value)))
    assert list(ordered_commitments(value)) == want
    assert holds_commitment(value) is bool(want)


@pytest.mark.parametrize("value", SHALLOW_TEXT_VALUES, ids=_ids(SHALLOW_TEXT_VALUES))
def test_ordered_commitments_needs_little_stack(value: Any) -> None:
    want = list(ordered_commitments(value))
    with pytest.raises(RecursionError):
        _with_little_stack(lambda: list(_reference_ordered_commitments(value)))
    assert _with_little_stack(lambda: list(ordered_commitments(value))) == want
    assert _deep_in_recursion(lambda: list(ordered_commitments(value))) == want


def test_ordered_commitments_is_lazy() -> None:
    value: list[Any] = [_commitment(0), [{"b": "[1]", "a": _commitment(1)}]]
    found = ordered_commitments(value)
    assert next(found) == _commitment(0)[COMMIT_KEY]
    value[1][0]["a"] = _commitment(2)  # read only when the walk gets there, as before
    assert list(found) == [_commitment(2)[COMMIT_KEY]]


# -- same_but_committed ---------------------------------------------------------------------


def _filled(value: Any) -> Any:
    """``value`` as sent: each commitment (JSON text included) replaced by a value."""
    kind = type(value)
    if kind is dict:
        if is_commitment(value):
            return {"was": value[COMMIT_KEY][-3:]}
        return {k: _filled(v) for k, v in value.items()}
    if kind is list:
        return [_filled(v) for v in value]
    if kind is str and COMMIT_KEY in value:
        inner = parse_json_container(value)
        if inner is not None:
            return orjson.dumps(_filled(inner)).decode()
    return value


PAIRS: list[tuple[Any, Any]] = [
    *((v, v) for v in VALUES),
    *((v, _with_raised_limit(partial(_filled, v))) for v in VALUES),
    (DEEP, _deep(DEPTH, {**LEAF, "secret": "other"})),
    (DEEP, _deep(DEPTH, {**LEAF, "leaf": "anything"})),
    (DEEP, _deep(DEPTH, {**LEAF, "text": '{"x": [1, 3]}'})),
    (DEEP, _deep(DEPTH, {**LEAF, "text": '{"x":[1,2]}'})),
    (_deep(DEPTH, 1), _deep(DEPTH, True)),
    (_deep(DEPTH, 1), _deep(DEPTH, 1.0)),
    (_deep(DEPTH, [1]), _deep(DEPTH, [1, 2])),
    (_deep(DEPTH, {"a": 1}), _deep(DEPTH, {"b": 1})),
    (_deep(DEPTH, "[1]"), _deep(DEPTH, "[ 1 ]")),
    (_deep(DEPTH, "[1]"), _deep(DEPTH, "[2]")),
    (_deep(DEPTH, "[1]"), _deep(DEPTH, "text")),
]


@pytest.mark.parametrize(("recorded", "sent"), PAIRS, ids=_ids(PAIRS))
def test_same_but_committed_matches_the_recursive_walk(recorded: Any, sent: Any) -> None:
    want = _with_raised_limit(lambda: _reference_same_but_committed(recorded, sent))
    assert same_but_committed(recorded, sent) is want


def test_same_but_committed_needs_little_stack() -> None:
    sent = _with_raised_limit(lambda: _filled(DEEP))
    assert _with_raised_limit(lambda: _reference_same_but_committed(DEEP, sent))
    with pytest.raises(RecursionError):
        _with_little_stack(lambda: _reference_same_but_committed(DEEP, sent))
    assert _with_little_stack(lambda: same_but_committed(DEEP, sent)) is True
    assert _deep_in_recursion(lambda: same_but_committed(DEEP, sent)) is True
    changed = _deep(DEPTH, {**LEAF, "secret": "other"})
    assert _with_little_stack(lambda: same_but_committed(DEEP, changed)) is False
