"""The verifier on hand-built logs: each structural rule fails with its own code and seq."""

from __future__ import annotations

from typing import Any

import pytest

import agentfootprint as af
from agentfootprint.store.memory import MemoryStore
from agentfootprint.store.writer import RunWriter
from agentfootprint.testing.store_contract import open_body


def commit(index: int, writes: int = 0, **extra: Any) -> tuple[str, dict[str, Any]]:
    return (
        "commit",
        {"commit": index, "stage": "s", "stage_run": f"s#{index}", "writes": writes, **extra},
    )


def write(index: int, path: str, verb: str, value: Any = None) -> tuple[str, dict[str, Any]]:
    body: dict[str, Any] = {"commit": index, "path": path, "verb": verb}
    if verb != "delete":
        body["value"] = value
    return ("write", body)


def close(commits: int, outcome: str = "answered", receipts: int = 0) -> tuple[str, Any]:
    return ("run.close", {"outcome": outcome, "commits": commits, "receipts": receipts})


def record(
    store: MemoryStore,
    run_id: str,
    *batches: list[tuple[str, Any]],
    opened: dict[str, Any] | None = None,
) -> RunWriter:
    writer = RunWriter(store, run_id)
    writer.append([("run.open", opened or open_body(run_id))])
    for batch in batches:
        writer.append(batch)
    return writer


def failure(store: MemoryStore, run_id: str) -> af.VerificationError:
    with pytest.raises(af.VerificationError) as caught:
        af.Verifier(store).verify(run_id)
    assert caught.value.run_id == run_id
    return caught.value


def test_a_well_formed_log_verifies_and_folds() -> None:
    store = MemoryStore()
    record(
        store,
        "r",
        [write(0, "h", "set", [1]), write(0, "m", "set", {"a": 1}), commit(0, 2)],
        [write(1, "h", "append", [2]), write(1, "m", "merge", {"b": 2}), commit(1, 2)],
        [write(2, "m", "delete"), commit(2, 1)],
        [commit(3)],
        [close(4)],
    )
    result = af.Verifier(store).verify("r")
    assert result.outcome is af.Outcome.VALID_UNSIGNED
    assert result.final_state == {"h": [1, 2]}
    assert (result.events, result.commits, result.receipts) == (11, 4, 0)


def test_unclosed_log_is_unsealed() -> None:
    store = MemoryStore()
    record(store, "r", [write(0, "x", "set", 1), commit(0, 1)])
    result = af.Verifier(store).verify("r")
    assert result.outcome is af.Outcome.UNSEALED and result.final_state == {"x": 1}


def test_log_ending_inside_a_commit_batch_is_truncation() -> None:
    store = MemoryStore()
    record(store, "r", [write(0, "x", "set", 1)])
    error = failure(store, "r")
    assert (error.code, error.seq) == ("truncated", 2)


@pytest.mark.parametrize(
    ("batches", "seq", "words"),
    [
        ([[close(0, outcome="bogus")]], 1, "unknown outcome"),
        ([[commit(0)], [close(5)]], 2, "counts 5 commits"),
        ([[close(0, receipts=3)]], 1, "3 receipts"),
        ([[write(0, "x", "set", 1)], [close(0)]], 2, "inside commit 0"),
        ([[("event", {"name": "n", "payload": {}})], [close(0)]], 2, "inside commit 0"),
        ([[commit(1)]], 1, "commit 1 where 0"),
        ([[write(0, "x", "set", 1), commit(0, 2)]], 2, "declares 2 writes"),
        ([[write(1, "x", "set", 1), commit(1, 1)]], 1, "write of commit 1"),
        (
            [[("write", {"commit": 0, "path": "x", "verb": "delete", "value": 1}), commit(0, 1)]],
            1,
            "wrong fields",
        ),
        ([[("write", {"commit": 0, "path": "x", "verb": "set"}), commit(0, 1)]], 1, "wrong fields"),
        (
            [[write(0, "x", "set", 1), ("event", {"name": "n", "payload": {}}), commit(0, 1)]],
            2,
            "order is receipts, events, writes",
        ),
        ([[close(0)], [commit(0)]], 2, "after run.close"),
        ([[("run.open", open_body("r"))]], 1, "second run.open"),
        ([[commit(0, foo=1, stage_run=3)]], 1, "malformed"),
    ],
)
def test_structure_rules(batches: list[list[tuple[str, Any]]], seq: int, words: str) -> None:
    store = MemoryStore()
    record(store, "r", *batches)
    error = failure(store, "r")
    assert error.seq == seq and words in error.reason, error


@pytest.mark.parametrize(
    ("verb", "value", "words"),
    [
        ("append", [1], "append to 'x'"),
        ("merge", {"a": 1}, "merge into 'x'"),
        ("delete", None, "not in state"),
        ("frobnicate", 1, "unknown write verb"),
    ],
)
def test_fold_errors_name_the_write(verb: str, value: Any, words: str) -> None:
    store = MemoryStore()
    record(
        store,
        "r",
        [write(0, "x", "set", "text"), commit(0, 1)],
        [
            write(1, "y", "set", 1),
            write(1, "x" if verb != "delete" else "z", verb, value),
            commit(1, 2),
        ],
    )
    error = failure(store, "r")
    assert (error.code, error.seq) == ("fold", 4) and words in error.reason


def test_first_event_must_be_run_open_and_format_known() -> None:
    store = MemoryStore()
    record(store, "r", opened={**open_body("r"), "format": "agentfootprint/log/v9"})
    assert "unknown log format" in failure(store, "r").reason
    store2 = MemoryStore()
    record(store2, "r", opened={**open_body("r"), "run_id": "other"})
    assert "another run id" in failure(store2, "r").reason
    store3 = MemoryStore()
    record(store3, "r", opened={**open_body("r"), "conversation_id": ""})
    assert "conversation_id" in failure(store3, "r").reason


def _parent(store: MemoryStore, outcome: str = "answered") -> RunWriter:
    return record(store, "p", [write(0, "h", "set", [1]), commit(0, 1)], [close(1, outcome)])


def _child_open(parent: RunWriter, **overrides: Any) -> dict[str, Any]:
    body = open_body("c", "p", {"run_id": "p", "events": parent.seq, "head": parent.head.hex()})
    body["parent"].update(overrides)
    return body


def test_continued_run_starts_from_the_parent_state() -> None:
    store = MemoryStore()
    parent = _parent(store)
    record(
        store,
        "c",
        [write(0, "h", "append", [2]), commit(0, 1)],
        [close(1)],
        opened=_child_open(parent),
    )
    result = af.Verifier(store).verify("c")
    assert result.final_state == {"h": [1, 2]} and result.ancestors == ("p",)


@pytest.mark.parametrize(
    ("overrides", "words"),
    [
        ({"run_id": "missing"}, "not in this log"),
        ({"events": 2}, "head differs"),
        ({"head": "00" * 32}, "head differs"),
        ({"head": "AB" * 32}, "lowercase hex"),
        ({"events": "3"}, "malformed"),
    ],
)
def test_parent_reference_is_checked(overrides: dict[str, Any], words: str) -> None:
    store = MemoryStore()
    parent = _parent(store)
    record(store, "c", [close(0)], opened=_child_open(parent, **overrides))
    error = failure(store, "c")
    assert error.seq == 0 and words in error.reason


def test_parent_must_have_finished_and_share_the_conversation() -> None:
    store = MemoryStore()
    parent = _parent(store, outcome="failed")
    record(store, "c", [close(0)], opened=_child_open(parent))
    error = failure(store, "c")
    assert error.code == "ancestry" and "cannot be continued" in error.reason

    store2 = MemoryStore()
    parent2 = _parent(store2)
    opened = _child_open(parent2)
    opened["conversation_id"] = "zzz"
    record(store2, "c", [close(0)], opened=opened)
    error2 = failure(store2, "c")
    assert error2.code == "ancestry" and "differs from parent" in error2.reason


def test_a_broken_parent_breaks_the_child() -> None:
    store = MemoryStore()
    parent = _parent(store)
    record(store, "c", [close(0)], opened=_child_open(parent))
    log = store._events["p"]
    log[1] = af.store.base.StoredEvent(
        **{
            **{k: getattr(log[1], k) for k in af.store.base.StoredEvent.__slots__},
            "body": log[1].body.replace(b"[1]", b"[7]"),
        }
    )
    error = failure(store, "c")
    assert error.code == "ancestry" and "run p seq 1" in error.reason


def test_unknown_event_type_and_non_object_body() -> None:
    store = MemoryStore()
    writer = record(store, "r")
    writer.append([("seal", {"x": 1})])
    error = failure(store, "r")
    assert (error.code, error.seq) == ("rows", 1)
    store2 = MemoryStore()
    record(store2, "r", [("event", [1, 2])])
    assert failure(store2, "r").code == "structure"


def test_cross_process_continuation_writes_no_spurious_params(tmp_path: Any) -> None:
    db = tmp_path / "c.db"
    first = af.Agent(provider=af.MockProvider(["one"]), model="m", temperature=1.0, store=db)
    parent = first.run_sync("a")
    fresh = af.Agent(provider=af.MockProvider(["two"]), model="m", temperature=1.0, store=db)
    child = fresh.run_sync("b", continue_from=parent.run_id)
    seed_writes = [
        e.decoded()["path"]
        for e in fresh.store.read(child.run_id)
        if e.type == "write" and e.decoded()["commit"] == 0
    ]
    assert "params" not in seed_writes and "model" not in seed_writes
    assert child.state["params"] == {"temperature": 1}


def test_deeply_nested_tool_arguments_fail_the_run_cleanly() -> None:
    deep: Any = 0
    for _ in range(249):
        deep = [deep]
    agent = af.Agent(
        provider=af.MockProvider([af.reply(tool_calls=[af.tool_call("t", deep)])]), model="m"
    )
    with pytest.raises(af.ProviderCallError, match="nested deeper"):
        agent.run_sync("go")
    run = agent.store.runs()[0]
    result = af.Verifier(agent.store).verify(run.run_id)
    assert result.close is not None and result.close["outcome"] == "failed"
    assert result.receipts == 1


def test_receipted_run_must_receipt_every_call() -> None:
    store = MemoryStore()
    opened = {**open_body("r"), "options": {"record_receipt": True}}
    record(
        store,
        "r",
        [("run.close", {"outcome": "answered", "commits": 0, "receipts": 0, "calls": 1})],
        opened=opened,
    )
    error = failure(store, "r")
    assert error.code == "receipt" and "1 calls" in error.reason


def test_write_needs_a_path() -> None:
    store = MemoryStore()
    record(store, "r", [write(0, "", "set", 1), commit(0, 1)])
    assert "empty path" in failure(store, "r").reason
