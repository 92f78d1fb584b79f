"""Log format 3: commits reach the store at flushes, and the evidence of every effect before it.

A run buffers its commits and writes them in one transaction before each model call (the
call's receipt written ahead of the request), before each tool runs, and with its close.
These tests look at the store from inside the effects themselves: a provider and a tool
that read the log while they act.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

import agentfootprint as af
from agentfootprint.errors import RecordTooLargeError, UsageError
from agentfootprint.logformat.canonical import parse
from agentfootprint.store.writer import RunWriter


def types_of(store: af.EventStore, run_id: str) -> list[str]:
    return [row.type for row in store.read(run_id)]


def only_run(store: af.EventStore) -> str:
    (info,) = store.runs()
    return info.run_id


def test_the_receipt_is_in_the_store_before_the_request_leaves(tmp_path: Path) -> None:
    store = af.SqliteStore(tmp_path / "runs.db")
    seen: list[list[str]] = []

    def respond(request: Mapping[str, Any]) -> Any:
        # what another process reading the file would see while the call is in flight
        reader = af.SqliteStore(tmp_path / "runs.db", readonly=True)
        try:
            seen.append(types_of(reader, only_run(reader)))
        finally:
            reader.close()
        return "done"

    agent = af.Agent(provider=af.MockProvider(respond=respond), model="m", store=store)
    result = agent.run_sync("hello")
    assert seen[0][0] == "run.open"
    assert seen[0][-1] == "receipt"  # written ahead: the last row, its commit still open
    rows = list(store.read(result.run_id))
    receipt = next(parse(r.body) for r in rows if r.type == "receipt")
    assert receipt["call"] == 0
    # the rows are those a writer of format 2 would write, in the same order
    assert [r.type for r in rows][: len(seen[0])] == seen[0]
    assert parse(rows[0].body)["format"] == "agentfootprint/log/v3"
    agent.close()
    store.close()


def test_the_reply_asking_for_a_tool_is_durable_before_the_tool_acts(tmp_path: Path) -> None:
    store = af.SqliteStore(tmp_path / "runs.db")
    seen: list[Any] = []

    def act(args: dict[str, Any]) -> str:
        reader = af.SqliteStore(tmp_path / "runs.db", readonly=True)
        try:
            run_id = only_run(reader)
            responses = [
                parse(r.body)["value"]
                for r in reader.read(run_id)
                if r.type == "write" and parse(r.body)["path"] == "last_response"
            ]
            seen.append(responses[-1]["tool_calls"])
        finally:
            reader.close()
        return "acted"

    tool = af.define_tool(
        name="act", description="Acts.", input_schema={"type": "object"}, execute=act
    )
    script = [af.reply(tool_calls=[af.tool_call("act", {"x": 1})]), "done"]
    agent = af.Agent(provider=af.MockProvider(script), model="m", tools=[tool], store=store)
    agent.run_sync("go")
    assert seen == [[{"arguments": {"x": 1}, "id": "call_0_0", "name": "act"}]]
    agent.close()
    store.close()


def test_nothing_is_written_between_flushes(tmp_path: Path) -> None:
    """A run of two calls and one tool reaches the store in four transactions: before
    each call (run.open and the seed's commits with the first), before the tool, and the
    close (with the last call's commit and the final stages)."""
    store = af.SqliteStore(tmp_path / "runs.db")
    appends: list[int] = []
    original = store.append

    def counting(events: Any) -> None:
        appends.append(len(events))
        original(events)

    store.append = counting  # type: ignore[method-assign]
    tool = af.define_tool(
        name="act", description="Acts.", input_schema={"type": "object"}, execute=lambda a: "ok"
    )
    script = [af.reply(tool_calls=[af.tool_call("act", {})]), "done"]
    agent = af.Agent(provider=af.MockProvider(script), model="m", tools=[tool], store=store)
    result = agent.run_sync("go")
    assert len(appends) == 4
    assert sum(appends) == len(list(store.read(result.run_id)))
    agent.close()
    store.close()


def test_a_commit_that_cannot_be_recorded_after_its_receipt_closes_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Once the receipt was written ahead, the rest of the call's commit cannot be recorded
    (its writes are refused by the writer): a marker with no writes and the error closes
    the batch the receipt opened, the run closes failed and verifies."""
    agent = af.Agent(provider=af.MockProvider(["hello back"]), model="m")
    original_append, original_check = agent.store.append, RunWriter._check_body

    def refusing(self: RunWriter, seq: int, type_: str, data: bytes) -> None:
        if type_ == "write":
            raise RecordTooLargeError(self._where(seq, type_), "refused by the test")
        original_check(self, seq, type_, data)

    def appending(events: Any) -> None:
        original_append(events)
        if events[-1].type == "receipt":  # the request has left: now its commit cannot fit
            monkeypatch.setattr(RunWriter, "_check_body", refusing)

    agent.store.append = appending  # type: ignore[method-assign]
    with pytest.raises(af.RunError, match="refused by the test"):
        agent.run_sync("hello")
    monkeypatch.undo()
    (info,) = agent.store.runs()
    check = af.verify_run(agent.store, info.run_id)
    assert check.close is not None and check.close["outcome"] == "failed"
    assert check.receipts == 1
    rows = list(agent.store.read(info.run_id))
    after = rows[[r.type for r in rows].index("receipt") + 1]
    marker = parse(after.body)
    assert after.type == "commit" and marker["stage"] == "call-llm" and marker["writes"] == 0
    assert marker["error"]["type"] == "RecordTooLargeError"


def test_durability_is_refused_where_it_cannot_apply(tmp_path: Path) -> None:
    for store, words in ((None, "in-memory"), (af.MemoryStore(), "keeps the durability")):
        with pytest.raises(UsageError, match=words) as raised:
            af.Agent(provider=af.MockProvider([]), model="m", store=store, durability="full")
        assert raised.value.option == "durability"
    with pytest.raises(UsageError, match="'full' or 'normal'"):
        af.Agent(
            provider=af.MockProvider([]), model="m", store=tmp_path / "x.db", durability="FULL"
        )
    assert not (tmp_path / "x.db").exists()  # refused before the file is created


@pytest.mark.parametrize(("durability", "pragma"), [("full", 2), ("normal", 1), (None, 2)])
def test_an_agent_opens_its_store_at_the_durability_asked(
    tmp_path: Path, durability: str | None, pragma: int
) -> None:
    agent = af.Agent(
        provider=af.MockProvider(["hi"]),
        model="m",
        store=tmp_path / "runs.db",
        durability=durability,
    )
    try:
        store = agent.store
        assert isinstance(store, af.SqliteStore)
        assert store._conn.execute("PRAGMA synchronous").fetchone() == (pragma,)
        result = agent.run_sync("hello")
        af.verify_run(store, result.run_id)
    finally:
        agent.close()


def test_the_durability_example_of_docs_stores_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "stores.md").read_text("utf-8")
    section = text[text.index("## Durability") : text.index("### When a run writes")]
    (block,) = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    monkeypatch.chdir(tmp_path)
    scope: dict[str, Any] = {}
    exec(compile(block, "docs/stores.md", "exec"), scope)
    try:
        pragma = "PRAGMA synchronous"
        assert scope["agent"].store._conn.execute(pragma).fetchone() == (2,)
        assert scope["fast"].store._conn.execute(pragma).fetchone() == (1,)
        assert scope["store"]._conn.execute(pragma).fetchone() == (1,)
    finally:
        for name in ("agent", "fast"):
            scope[name].close()
        scope["store"].close()
