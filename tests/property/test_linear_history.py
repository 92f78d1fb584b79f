"""Issue 13, linear everywhere: what replaced whole-history work per call writes and
rebuilds exactly what the whole-history comparisons did.

* ``Scope`` knows a key grew from its committed list by appends only, so its commit is an
  ``append`` of the tail without comparing the prefix item by item;
* the ``RequestHasher`` returns :class:`SharedList` versions grown from each other, so
  ``compress_digests`` and ``expand_digests`` read only what is new;
* every append makes a new list, or in the verifier's fold a new :class:`SharedList`
  version (never mutating what anybody was handed), so no version anybody holds ever
  changes, and live state still equals the fold.

Each is checked against the reference computation on plain lists."""

from __future__ import annotations

import contextlib
import copy
import operator
import pickle
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from agentfootprint.errors import UsageError
from agentfootprint.logformat.fold import apply_write, compress_digests, expand_digests
from agentfootprint.logformat.request import PIECE_KINDS, RequestHasher
from agentfootprint.logformat.shared_lists import FoldedState, SharedList, folded, plain
from agentfootprint.runtime.scope import Scope, json_equal
from examples_budget import scaled

HEX = [f"{i:064x}" for i in range(40)]


def _reference_compress(previous: list[str], current: list[str]) -> dict[str, Any]:
    keep = 0
    while keep < min(len(previous), len(current)) and previous[keep] == current[keep]:
        keep += 1
    return {"keep": keep, "add": list(current[keep:])}


# -- Scope -----------------------------------------------------------------------------------
ops = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.lists(st.integers(0, 3), max_size=3)),
        st.tuples(st.just("set"), st.lists(st.integers(0, 3), max_size=5)),
        st.tuples(st.just("delete"), st.none()),
    ),
    max_size=5,
)


@given(committed=st.none() | st.lists(st.integers(0, 3), max_size=5), ops=ops)
def test_scope_commit_of_appends_is_the_compared_encoding(
    committed: list[int] | None, ops: list[tuple[str, Any]]
) -> None:
    for mode in ("delta", "full"):
        state = {} if committed is None else {"h": list(committed)}
        scope, compared = Scope(state), Scope(state)
        for verb, value in ops:
            for s in (scope, compared):
                if verb == "append":
                    with contextlib.suppress(Exception):  # the same on both sides
                        s.append("h", list(value))
                elif verb == "set":
                    s.set("h", list(value))
                else:
                    s.delete("h")
        compared._extends.clear()  # the whole-history comparison, as before
        assert scope.net_writes(mode) == compared.net_writes(mode)  # type: ignore[arg-type]


def test_appends_commit_their_tail_and_never_touch_committed_state() -> None:
    history = [{"role": "user", "content": "a"}]
    state = {"history": history}
    scope = Scope(state)
    scope.append("history", [{"role": "assistant", "content": "b"}])
    scope.append("history", [{"role": "user", "content": "c"}])
    (write,) = scope.net_writes("delta")
    assert (write.verb, write.value) == (
        "append",
        [{"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}],
    )
    assert history == [{"role": "user", "content": "a"}]  # copy on write
    new = scope.apply_to([write])
    assert new["history"][0] is history[0] and state["history"] is history
    empty = Scope(state)
    empty.append("history", [])
    assert empty.net_writes("delta") == []


# -- shared lists ----------------------------------------------------------------------------
def test_a_version_grows_from_the_end_of_its_backing_or_forks() -> None:
    a = SharedList(HEX[:2])
    b = a.extended(HEX[2:4])
    assert b.extends(a) and b == HEX[:4] and a == HEX[:2]
    assert compress_digests(a, b) == {"keep": 2, "add": HEX[2:4]}
    assert expand_digests(a, {"keep": 2, "add": HEX[2:4]}).extends(b)  # b's backing, no copy
    fork = a.extended(HEX[5:6])  # from an older version, other items: a backing of its own
    assert not fork.extends(a) and b == HEX[:4]
    assert compress_digests(b, fork) == _reference_compress(list(b), list(fork))
    assert expand_digests(a, {"keep": 2, "add": HEX[5:6]}) == HEX[:2] + HEX[5:6]
    assert expand_digests(b, {"keep": 1, "add": []}) == HEX[:1]


def test_a_shared_list_is_handed_out_as_a_plain_list() -> None:
    d = SharedList(HEX[:3]).extended(HEX[3:5])
    assert orjson.dumps(d.tolist()) == orjson.dumps(HEX[:5]) and type(d.tolist()) is list
    assert type(d[1:]) is list and d[1:] == HEX[1:5] and d[::2] == HEX[:5:2] and d[-1] == HEX[4]
    assert type(copy.deepcopy(d)) is list and copy.copy(d) == HEX[:5]
    assert type(pickle.loads(pickle.dumps(d))) is list and list(reversed(d)) == HEX[4::-1]
    assert d == HEX[:5] and HEX[:5] == d and d != HEX[:4] and (d != d) is False
    assert plain({"h": d, "n": 1}) == {"h": HEX[:5], "n": 1} and d != tuple(HEX[:5])
    state = FoldedState({"h": d})
    assert state["h"] == HEX[:5] and type(state["h"]) is list and dict(state) == {"h": HEX[:5]}
    assert folded(state)["h"] is d and state == {"h": HEX[:5]}


shared_steps = st.lists(
    st.tuples(st.integers(0, 20), st.lists(st.integers(0, 3), max_size=3), st.booleans()),
    min_size=1,
    max_size=25,
)


@given(start=st.lists(st.integers(0, 3), max_size=3), steps=shared_steps)
def test_every_shared_list_version_keeps_its_items(
    start: list[int], steps: list[tuple[int, list[int], bool]]
) -> None:
    """Versions extended from any version held (the newest, an older one: a fork), with new
    objects or with the very objects its backing already holds next: each version reads, for
    ever, exactly the objects it was made of, and one extends another only when it does."""
    first = SharedList([{"n": i} for i in start])
    held = [(first, list(first))]
    for which, new, reuse in steps:
        version, items = held[which % len(held)]
        tail: list[Any] = [{"n": i} for i in new]
        if reuse:  # what some other version grew it by, when there is one
            longer = [v for v, _ in held if v.extends(version) and len(v) > len(version)]
            if longer:
                tail = longer[0][len(version) :]
        grown = version.extended(tail)
        held.append((grown, items + tail))
        for kept, model in held:
            assert len(kept) == len(model) and all(map(operator.is_, kept, model))
        for one, one_items in held:
            for other, other_items in held:
                if one.extends(other):  # known a prefix: it is one, object for object
                    assert all(map(operator.is_, one_items, other_items))


steps = st.lists(
    st.tuples(
        st.sampled_from(["extend", "same", "rewrite", "fork"]),
        st.lists(st.integers(0, 39), max_size=3),
    ),
    min_size=1,
    max_size=12,
)


@given(steps=steps)
def test_compress_and_expand_over_hasher_lists_equal_the_reference(
    steps: list[tuple[str, list[int]]],
) -> None:
    """A sequence of hasher calls (appends, unchanged requests, rewrites, forked hashers):
    every stored list equals the reference compression, and expands back to the list."""
    pieces: list[dict[str, Any]] = []
    hasher = RequestHasher()
    previous: dict[str, list[str]] = {kind: [] for kind in PIECE_KINDS}
    verifier_previous: dict[str, list[str]] = {kind: [] for kind in PIECE_KINDS}
    for how, new in steps:
        if how == "extend":
            pieces = pieces + [{"role": "user", "content": str(i)} for i in new]
        elif how == "rewrite":
            pieces = [{"role": "user", "content": str(i)} for i in new] + pieces[1:]
        elif how == "fork":
            hasher = hasher.fork()
        served = hasher.digests(
            {"model": "m", "params": {}, "system": [], "messages": pieces, "tools": []}
        )
        for kind in PIECE_KINDS:
            current = served.pieces(kind)
            stored = compress_digests(previous[kind], current)
            assert stored == _reference_compress(list(previous[kind]), list(current))
            claimed = expand_digests(verifier_previous[kind], stored)
            assert claimed == current and list(claimed) == list(current)
            previous[kind] = current
            verifier_previous[kind] = current


# -- versions: every list anybody holds keeps its contents -----------------------------------
versions = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(0, 9), st.lists(st.integers(0, 3), max_size=3)),
        st.tuples(st.just("set"), st.integers(0, 9), st.lists(st.integers(0, 3), max_size=4)),
        st.tuples(st.just("delete"), st.integers(0, 9), st.none()),
        st.tuples(st.just("reread"), st.integers(0, 9), st.lists(st.integers(0, 3), max_size=2)),
        st.tuples(st.just("drop"), st.integers(0, 9), st.none()),
    ),
    min_size=1,
    max_size=30,
)


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON, type for type (1 and 1.0 and True differ), as the log would say."""
    sort = orjson.OPT_SORT_KEYS
    a, b = plain(a), plain(b)  # a list grown by appends is held as a SharedList
    return orjson.dumps(a, option=sort) == orjson.dumps(b, option=sort) and json_equal(a, b)


@settings(max_examples=scaled(400))
@given(start=st.lists(st.integers(0, 3), max_size=4), steps=versions)
def test_versions_never_change_and_equal_the_fold(
    start: list[int], steps: list[tuple[str, int, Any]]
) -> None:
    """Any sequence of appends, sets, deletes, reads after an append, forks (a commit from
    any version held, not only the newest) and versions let go of: each version held keeps
    exactly its contents, and live state equals the fold of the recorded writes type for
    type."""
    first = {"h": [{"n": i} for i in start]}
    # each version held: (live state, its snapshot, the folded state, the verifier's fold)
    held = [(first, copy.deepcopy(first), copy.deepcopy(first), copy.deepcopy(first))]
    for verb, which, value in steps:
        if not held:
            held.append((first, copy.deepcopy(first), copy.deepcopy(first), dict(first)))
        live, _, fold_state, shared = held[which % len(held)]
        if verb == "drop":
            del held[which % len(held)]
            continue
        scope = Scope(live)
        lent = scope.get("h")
        before = list(lent) if isinstance(lent, list) else None
        if verb in ("append", "reread"):
            with contextlib.suppress(UsageError):  # no list to append to: refused
                scope.append("h", [{"n": i} for i in value])
            if verb == "reread":  # the stage reads its own append, then appends again
                seen = scope.get("h")
                kept = list(seen) if isinstance(seen, list) else None
                with contextlib.suppress(UsageError):
                    scope.append("h", [{"m": i} for i in value])
                assert kept is None or (seen == kept and all(map(operator.is_, seen, kept)))
        elif verb == "set":
            scope.set("h", [{"s": i} for i in value])
        else:
            scope.delete("h")
        assert scope.committed is live  # a stage's view of committed state
        if before is not None:  # what the stage was lent never changed
            assert lent == before and all(map(operator.is_, lent, before))
        writes = scope.net_writes("delta")
        new = scope.apply_to(writes)
        refolded, reshared = dict(fold_state), dict(shared)
        for write in writes:
            body = orjson.loads(orjson.dumps(write.body(0)))  # as the log holds it
            apply_write(refolded, body["path"], body["verb"], body.get("value"))
            apply_write(reshared, body["path"], body["verb"], body.get("value"), shared=True)
        assert _same(new, refolded) and _same(plain(reshared), refolded)
        held.append((new, copy.deepcopy(new), refolded, reshared))
        for state, snapshot, folded_state, shared_state in held:
            assert _same(state, snapshot) and _same(folded_state, snapshot)
            assert _same(plain(shared_state), snapshot)
