"""Nothing anybody was handed ever changes: every version of an append-grown list (a state's
``history``, a receipt's digest list) reads as it was made: a list of its own, never mutated,
or a :class:`SharedList` version, whose backing only grows past it.

A parent continued twice (a fork), a continuation from an older run, a replay, a provider
that keeps every request it was served, the verifier's cache of parents shared by their
children: each result state and served request is compared, after everything else ran, with
a deep copy taken when it was handed out. (Issue 13 made these versions by reusing lists
nobody held, found by reference counts; issue 25 removed that, and these tests stayed.)
"""

from __future__ import annotations

import copy
import itertools
from typing import Any

import orjson
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import agentfootprint as af
from agentfootprint.logformat.fold import ReceiptLists, continued_lists
from agentfootprint.logformat.shared_lists import SharedList, folded
from agentfootprint.runtime.scope import Scope


def _same(a: Any, b: Any) -> bool:
    return orjson.dumps(a, option=orjson.OPT_SORT_KEYS) == orjson.dumps(
        b, option=orjson.OPT_SORT_KEYS
    )


# -- lists --------------------------------------------------------------------------------------
def test_a_shared_list_grows_new_versions_and_leaves_each_one_as_it_was() -> None:
    hexes = [f"{i:064x}" for i in range(20)]
    a = SharedList(hexes[:2])
    b = a.extended(hexes[2:3])
    c = b.extended(hexes[3:4])
    del b
    d = c.extended(hexes[4:5])
    assert d == hexes[:5] and d.extends(a) and d.extends(c) and not c.extends(d)
    assert c == hexes[:4] and a == hexes[:2] and d is not c
    fork = a.extended(hexes[9:10])  # from an older version: a backing of its own
    assert fork == hexes[:2] + hexes[9:10] and not fork.extends(a) and d == hexes[:5]
    again = c.extended([str(hexes[4])])  # the same items next: the version that ends there
    assert again == d and again.extends(d) and d.extends(again)


@given(
    st.lists(st.integers(), max_size=8),
    st.lists(st.lists(st.integers(), min_size=1, max_size=3), max_size=4),
    st.integers(min_value=0, max_value=4),
)
@example([], [[1]], 0)  # an empty version of a backing that grew
@example([1, 2], [[3], [4, 5]], 1)  # read backwards while a newer version grows the backing
def test_a_version_read_backwards_is_its_items_newest_first(
    first: list[int], tails: list[list[int]], made_at: int
) -> None:
    """``reversed(version)`` gives that version's items, newest first, whatever the backing
    holds: versions grown before the iterator was made, and after (before it is read)."""
    versions = [SharedList(first)]
    for tail in tails:
        versions.append(versions[-1].extended(tail))
    pick = versions[min(made_at, len(versions) - 1)]
    backwards = reversed(pick)
    versions[-1].extended([99])  # the backing grows past every version meanwhile
    assert list(backwards) == pick.tolist()[::-1]
    assert list(reversed(pick)) == pick.tolist()[::-1]


def test_receipt_lists_are_tuples_when_read_and_the_lists_when_continued() -> None:
    lists = {"system": SharedList(["a" * 64]), "messages": ["b" * 64]}
    frozen = ReceiptLists(lists)
    assert frozen["system"] == ("a" * 64,) and frozen["system"] is frozen["system"]
    assert dict(frozen) == {"system": ("a" * 64,), "messages": ("b" * 64,)}
    assert frozen == {"system": ("a" * 64,), "messages": ("b" * 64,)}
    assert continued_lists(frozen)["system"] is lists["system"]
    assert continued_lists({"m": ("c" * 64,)}) == {"m": ["c" * 64]}


# -- a stage's appends -------------------------------------------------------------------------
def test_a_stage_reads_its_append_sets_and_deletes_and_the_committed_view_stays() -> None:
    committed = {"h": [{"n": 0}], "k": [{"n": 9}]}
    snapshot = copy.deepcopy(committed)
    for _ in range(3):
        scope = Scope(committed)
        scope.append("h", [{"n": 1}])
        seen = scope.get("h")
        kept = list(seen)
        scope.append("h", [{"n": 2}])
        assert seen == kept and scope.get("h") == [{"n": 0}, {"n": 1}, {"n": 2}]
        scope.append("k", [{"n": 8}])
        scope.set("k", [{"n": 7}])  # set after append
        scope.append("k", [{"n": 6}])
        scope.delete("h")  # delete after append
        assert scope.committed["h"] == [{"n": 0}] and scope.get("h") is None
        writes = scope.net_writes("delta")
        assert [(w.path, w.verb) for w in writes] == [("h", "delete"), ("k", "set")]
        new = scope.apply_to(writes)
        assert new == {"k": [{"n": 7}, {"n": 6}]} and _same(committed, snapshot)


# -- runs --------------------------------------------------------------------------------------
class KeepingProvider:
    """Replies from a script and keeps every request with a deep copy taken when served."""

    name = "keeping"

    def __init__(self, replies: list[Any]) -> None:
        self.mock = af.MockProvider(replies)
        self.kept: list[tuple[Any, Any]] = []

    async def complete(self, request: Any) -> af.LLMResponse:
        served = request.to_json()
        self.kept.append((request, copy.deepcopy(dict(served))))
        response: af.LLMResponse = await self.mock.complete(request)
        return response

    def unchanged(self) -> bool:
        return all(_same(dict(r.to_json()), s) for r, s in self.kept)


def _tool() -> af.Tool:
    return af.define_tool(
        name="look",
        description="look something up",
        input_schema={"type": "object"},
        execute=lambda args: f"found {args.get('q')}",
    )


def _script(turns: int, per_turn: int = 2) -> list[Any]:
    out: list[Any] = []
    for turn in range(turns):
        for i in range(per_turn):
            out.append(af.reply("", tool_calls=[af.tool_call("look", {"q": f"{turn}.{i}"})]))
        out.append(f"answer {turn}")
    return out


def _agent(store: Any, provider: Any) -> af.Agent:
    return af.Agent(provider=provider, model="m", tools=[_tool()], store=store)


@pytest.mark.parametrize("keeps", [True, False], ids=["provider-keeps-requests", "mock"])
def test_forks_and_continuations_leave_every_result_and_request_as_handed_out(
    keeps: bool,
) -> None:
    """Whether the provider keeps every request it was served or none, every result and
    request stays as handed out, and live state equals the fold."""
    store = af.MemoryStore()
    provider = KeepingProvider(_script(8)) if keeps else af.MockProvider(_script(8))
    agent = _agent(store, provider)
    handed: list[tuple[af.RunResult, dict[str, Any]]] = []

    def run(message: str, parent: af.RunResult | str | None) -> af.RunResult:
        result = agent.run_sync(message, continue_from=parent)
        handed.append((result, copy.deepcopy(result.state)))
        return result

    root = run("root", None)
    child = run("child", root)
    run("second child of root", root)  # a fork from the same parent
    grandchild = run("grandchild", child)
    run("from the older run", child)  # child's line already grew past it
    run("from the root again, by id", root.run_id)
    run("great-grandchild", grandchild)
    fresh = _agent(store, KeepingProvider(_script(1)))  # no lineage cached: the verifier's
    late = fresh.run_sync("from a fresh agent", continue_from=grandchild.run_id)
    handed.append((late, copy.deepcopy(late.state)))
    for result, snapshot in handed:
        assert _same(result.state, snapshot), result.run_id
    if isinstance(provider, KeepingProvider):
        assert provider.unchanged()
    root_history = root.state["history"]
    for result, _ in handed[1:]:
        assert result.state["history"][: len(root_history)] == root_history
    texts = [m.get("content") for m in handed[2][0].state["history"]]
    assert "child" not in texts and "second child of root" in texts
    verifier = af.Verifier(store)
    for run_id, verified in verifier.verify_all():
        assert isinstance(verified, af.RunVerification), run_id
        live = next((r for r, _ in handed if r.run_id == run_id), None)
        if live is not None:  # live state equals the fold, type for type
            assert _same(dict(verified.final_state), live.state)


def test_the_verifiers_cached_parents_stay_as_they_were_verified() -> None:
    store = af.MemoryStore()
    agent = _agent(store, af.MockProvider(_script(6)))
    root = agent.run_sync("root")
    a = agent.run_sync("a", continue_from=root)
    agent.run_sync("b", continue_from=root)
    agent.run_sync("a2", continue_from=a)
    agent.run_sync("a3", continue_from=a)
    seen: list[tuple[af.RunVerification, Any, Any]] = []
    for _, verified in af.Verifier(store, cache_size=2).verify_all():
        assert isinstance(verified, af.RunVerification)
        seen.append(
            (
                verified,
                copy.deepcopy(dict(verified.final_state)),
                {k: tuple(v) for k, v in verified.receipt_lists.items()},
            )
        )
    for verified, state, lists in seen:
        assert _same(dict(verified.final_state), state)
        assert dict(verified.receipt_lists) == lists


def test_a_replay_records_the_same_and_changes_nothing_handed_out() -> None:
    store = af.MemoryStore()
    agent = _agent(store, af.MockProvider(_script(3)))
    first = agent.run_sync("one")
    second = agent.run_sync("two", continue_from=first)
    snapshots = [copy.deepcopy(r.state) for r in (first, second)]
    provider = KeepingProvider(_script(1))  # for the run after the replay only
    replayer = _agent(af.MemoryStore(), provider)
    replayed = af.replay_sync(replayer, store, second.run_id)
    assert _same(replayed.result.state, second.state) and not provider.kept
    shown = copy.deepcopy(replayed.result.state)
    again = replayer.run_sync("three", continue_from=replayed.result)
    history = second.state["history"]
    assert again.state["history"][: len(history)] == history
    assert _same(replayed.result.state, shown) and provider.unchanged()
    for result, snapshot in zip((first, second), snapshots, strict=True):
        assert _same(result.state, snapshot)


def test_kept_verification_results_share_one_history() -> None:
    """Results a caller keeps (``list(verify_all())``) pin no copy of the history each: every
    run's final history is a version of one backing the conversation shares, read as a
    plain list only when asked; and a forked run's history is a backing of its own."""
    store = af.MemoryStore()
    agent = _agent(store, af.MockProvider(_script(7)))
    previous = agent.run_sync("turn 0")
    for turn in range(1, 6):
        previous = agent.run_sync(f"turn {turn}", continue_from=previous)
    fork_parent = store.run_ids()[2]
    fork = agent.run_sync("a fork", continue_from=fork_parent)
    kept = [result for _, result in af.Verifier(store).verify_all()]
    assert all(isinstance(r, af.RunVerification) for r in kept)
    by_run = {r.run_id: r for r in kept if isinstance(r, af.RunVerification)}
    line = [folded(by_run[run_id].final_state)["history"] for run_id in store.run_ids()[:6]]
    assert all(type(h) is SharedList for h in line)
    assert all(later.extends(earlier) for earlier, later in itertools.pairwise(line))
    forked = folded(by_run[fork.run_id].final_state)["history"]
    assert not forked.extends(line[2]) and forked[: len(line[2])] == line[2]
    plain_history = by_run[previous.run_id].final_state["history"]
    assert type(plain_history) is list and _same(plain_history, previous.state["history"])
