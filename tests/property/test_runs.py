"""Random scripted runs: every run verifies, and the read side gives back what happened.

* (a) a run verifies as VALID_UNSIGNED and ``state_at(last commit)`` equals the live
  final state, type for type (``1``, ``1.0`` and ``True`` are different JSON values);
* (b) ``served_at(k)`` is what the provider received at call ``k`` (and the receipt's
  request digest is the digest of that request);
* (c) ``commit_values="delta"`` and ``"full"`` fold to the same state at every commit,
  and delta never writes more bytes than full;
* (d) multi-turn conversations (continued from the last or an earlier run, by result,
  by run id, or from a fresh agent) verify, and every call was served as received;
* (e) a continued run references its parent's history instead of copying it.

Runs use the strategies in :mod:`agentfootprint.testing.strategies`.
"""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import agentfootprint as af
from agentfootprint.logformat.canonical import canon
from agentfootprint.logformat.request import RequestHasher
from agentfootprint.runtime.scope import json_equal
from agentfootprint.store.base import EventStore
from agentfootprint.testing.strategies import (
    CallSpec,
    Recorded,
    ReplySpec,
    RunSpec,
    ToolOutcomeSpec,
    TurnSpec,
    build_run,
    run_spec,
    run_specs,
)
from examples_budget import scaled

# Expensive properties run fewer examples than the profile asks for, never more.
FEWER = scaled(25)


@contextmanager
def open_store(kind: str) -> Iterator[EventStore]:
    if kind == "memory":
        yield af.MemoryStore()
        return
    with tempfile.TemporaryDirectory() as tmp:
        store = af.SqliteStore(Path(tmp) / "runs.db")
        try:
            yield store
        finally:
            store.close()


def assert_json_equal(actual: Any, expected: Any, what: str) -> None:
    assert json_equal(actual, expected), f"{what} differs (JSON types included)"


def verified(store: EventStore, run_id: str) -> af.RunVerification:
    result = af.Verifier(store).verify(run_id)  # a fresh verifier: ancestors checked too
    assert result.outcome is af.Outcome.VALID_UNSIGNED
    return result


def body_bytes(store: EventStore, run_id: str, *types: str) -> int:
    return sum(len(e.body) for e in store.read(run_id) if not types or e.type in types)


def check_turn(store: EventStore, rec: Recorded, turn: int) -> af.RunVerification:
    """The checks of (a) and (b) for one run of a recorded scenario."""
    result, spec_turn = rec.results[turn], rec.spec.turns[turn]
    check = verified(store, result.run_id)
    assert check.close is not None
    assert check.close["outcome"] == result.outcome
    assert result.outcome == ("stopped_early" if spec_turn.stops_early else "answered")
    assert result.calls == spec_turn.calls == check.close["calls"]
    assert check.commits == check.close["commits"]
    assert_json_equal(dict(check.final_state), result.state, "verifier's final state")
    last = af.state_at(store, result.run_id, check.commits - 1)
    assert_json_equal(last, result.state, "state_at(last commit)")

    received = rec.requests(turn)
    assert len(received) == result.calls
    receipts = rec.spec.options.get("record_receipt", True)
    for k, request in enumerate(received):
        assert_json_equal(af.served_at(store, result.run_id, k), request, f"served_at({k})")
        receipt = af.receipt_at(store, result.run_id, k)
        if receipts:
            assert receipt is not None
            assert receipt.request == RequestHasher().digests(request).request
        else:
            assert receipt is None
    with pytest.raises(af.UsageError):
        af.served_at(store, result.run_id, len(received))
    return check


# -- (a) and (b) ------------------------------------------------------------------------------


@given(spec=run_specs(), store_kind=st.sampled_from(["memory", "sqlite"]))
def test_random_run_verifies_and_reads_back(spec: RunSpec, store_kind: str) -> None:
    with open_store(store_kind) as store:
        rec = run_spec(spec, store)
        check = check_turn(store, rec, 0)
        result = rec.results[0]
        assert af.state_at(store, result.run_id, -1) == {}
        for key in ("history", "model", "usage", "iteration"):
            assert_json_equal(
                af.commit_value_at(store, result.run_id, check.commits - 1, key),
                result.state[key],
                f"commit_value_at({key})",
            )


# -- (c) --------------------------------------------------------------------------------------


@settings(max_examples=FEWER)
@given(spec=run_specs(max_turns=2))
def test_delta_and_full_fold_to_the_same_state(spec: RunSpec) -> None:
    delta_store, full_store = af.MemoryStore(), af.MemoryStore()
    delta = run_spec(spec, delta_store, commit_values="delta")
    full = run_spec(spec, full_store, commit_values="full")
    for d, f in zip(delta.results, full.results, strict=True):
        d_check, f_check = verified(delta_store, d.run_id), verified(full_store, f.run_id)
        assert d_check.commits == f_check.commits
        assert d_check.events == f_check.events  # one write per changed key either way
        for commit in range(-1, d_check.commits):
            assert_json_equal(
                af.state_at(delta_store, d.run_id, commit),
                af.state_at(full_store, f.run_id, commit),
                f"state at commit {commit}",
            )
        assert_json_equal(d.state, f.state, "final state")
        assert body_bytes(delta_store, d.run_id, "write") <= body_bytes(
            full_store, f.run_id, "write"
        )


# -- (d) --------------------------------------------------------------------------------------


@settings(max_examples=FEWER)
@given(spec=run_specs(min_turns=2, max_turns=4), store_kind=st.sampled_from(["memory", "sqlite"]))
def test_conversations_verify_and_serve_what_was_received(spec: RunSpec, store_kind: str) -> None:
    with open_store(store_kind) as store:
        rec = run_spec(spec, store)
        for turn, (spec_turn, result) in enumerate(zip(spec.turns, rec.results, strict=True)):
            check = check_turn(store, rec, turn)
            if spec_turn.continue_from is None:
                assert result.parent_run_id is None
                assert result.conversation_id == result.run_id
                assert check.ancestors == ()
                continue
            parent = rec.results[spec_turn.continue_from]
            assert result.parent_run_id == parent.run_id
            assert result.conversation_id == parent.conversation_id
            assert check.ancestors[-1] == parent.run_id
            assert_json_equal(
                af.state_at(store, result.run_id, -1), parent.state, "a continued run's start"
            )
            # the first call serves the parent's whole history, then the new message
            first = rec.requests(turn)[0]["messages"]
            assert_json_equal(first[:-1], parent.state["history"], "inherited history")
            assert_json_equal(
                first[-1], {"role": "user", "content": spec_turn.message}, "new user message"
            )


# -- (e) --------------------------------------------------------------------------------------


def _parent_spec(child: RunSpec, iterations: int, size: int) -> RunSpec:
    """A one-turn parent with ``child``'s options and tool schemas; results of ``size`` chars."""
    tools = tuple(
        dataclasses.replace(t, outcomes=(ToolOutcomeSpec("big", ("p", size)),)) for t in child.tools
    )
    call = CallSpec(child.tools[0].name, {"q": "x"})
    replies = (*(ReplySpec("step", (call,)) for _ in range(iterations)), ReplySpec("answer"))
    turn = TurnSpec(message="hello " * size, replies=replies)
    return dataclasses.replace(child, tools=tools, turns=(turn,))


def _child_run(child: RunSpec, store: EventStore, parent: af.RunResult) -> af.RunResult:
    kwargs, script, messages = build_run(child)
    agent = af.Agent(provider=af.MockProvider(script), store=store, **kwargs)
    return agent.run_sync(messages[0], continue_from=parent.run_id)


@settings(max_examples=FEWER)
@given(
    child=run_specs(max_iterations=(2, 5), big=False, options={"commit_values": "delta"}),
    parent_iterations=st.integers(min_value=0, max_value=3),
)
def test_continued_run_does_not_copy_history(child: RunSpec, parent_iterations: int) -> None:
    store = af.MemoryStore()
    iterations = min(parent_iterations, child.max_iterations - 1)
    small = run_spec(_parent_spec(child, iterations, 1), store).results[0]
    large = run_spec(_parent_spec(child, iterations, 6_000), store).results[0]
    assert small.outcome == large.outcome == "answered"
    history_gap = len(canon(large.state["history"])) - len(canon(small.state["history"]))
    assert history_gap > 30_000

    after_small = _child_run(child, store, small)
    after_large = _child_run(child, store, large)
    assert after_small.calls == after_large.calls == child.turns[0].calls
    small_bytes = body_bytes(store, after_small.run_id)
    large_bytes = body_bytes(store, after_large.run_id)
    # usage counts (digits) and the parent's event count may differ; nothing else does
    assert abs(large_bytes - small_bytes) <= 64 + 16 * after_small.calls, (
        f"child of the large parent stores {large_bytes} body bytes, "
        f"child of the small parent {small_bytes}"
    )
    for parent, child_result in ((small, after_small), (large, after_large)):
        assert_json_equal(
            af.state_at(store, child_result.run_id, -1), parent.state, "the child's start"
        )


# -- examples and bugs -------------------------------------------------------------------------


def _one_call_run(
    tool_result: Any = "ok", arguments: Any = None, **options: Any
) -> tuple[EventStore, af.MockProvider, af.RunResult]:
    store = af.MemoryStore()

    def execute(args: Any) -> Any:
        if isinstance(tool_result, BaseException):
            raise tool_result
        return tool_result

    tool = af.define_tool(
        name="t", description="a tool", input_schema={"type": "object"}, execute=execute
    )
    provider = af.MockProvider(
        [af.reply("", tool_calls=[af.tool_call("t", arguments or {})]), "done"]
    )
    agent = af.Agent(provider=provider, model="m", tools=[tool], store=store, **options)
    return store, provider, agent.run_sync("hi")


@pytest.mark.parametrize(
    ("arguments", "options"),
    [
        pytest.param({"x": 1.0}, {}, id="argument-1.0"),
        pytest.param({"x": -0.0, "y": [2.0, 1e19]}, {}, id="argument-minus-zero"),
        pytest.param('{"x": 2.0}', {}, id="json-text-argument-2.0"),
        pytest.param({"x": 1.5}, {"temperature": 1.0}, id="temperature-1.0"),
    ],
)
def test_integral_floats_keep_their_type(arguments: Any, options: dict[str, Any]) -> None:
    """RFC 8785 writes 1.0 as 1: live state holds what the log folds back, type for type."""
    store, provider, result = _one_call_run(arguments=arguments, **options)
    commits = af.Verifier(store).verify(result.run_id).commits
    assert_json_equal(af.state_at(store, result.run_id, commits - 1), result.state, "state")
    assert_json_equal(af.served_at(store, result.run_id, 1), provider.requests[1], "served")


def test_tool_raising_with_a_lone_surrogate_is_an_error_result() -> None:
    _, _, result = _one_call_run(tool_result=ValueError("bad \udc80 value"))
    assert result.outcome == "answered"
    tool_message = result.state["history"][2]
    assert tool_message["role"] == "tool"
    assert tool_message["is_error"] is True
