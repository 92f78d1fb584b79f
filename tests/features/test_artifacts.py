"""``artifacts``: large tool results kept in an artifact store by digest, the model and the log
given a claim ticket; ``wants``; ``present``; ``ctx.artifacts`` (docs/artifacts.md)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from feature_support import events_of, fixed_ports, rows, tool_messages, without_open

import agentfootprint as af
from agentfootprint.logformat import limits
from agentfootprint.logformat.canonical import canon
from agentfootprint.logformat.hashing import hexdigest
from agentfootprint.runtime.artifacts import read_ticket
from agentfootprint.store.artifacts_file import scope_key

MINTED = "agentfootprint.artifacts.minted"
RESOLVED = "agentfootprint.artifacts.resolved"
REFUSED = "agentfootprint.artifacts.refused"
BIG = "id,total\n" + "".join(f"{i},{i * 3}\n" for i in range(3000))
EMPTY = {"type": "object", "properties": {}}


def export_tool(result: Any = BIG, **more: Any) -> af.Tool:
    return af.define_tool(
        name="export",
        description="Export the orders.",
        input_schema=EMPTY,
        execute=lambda args: result,
        **more,
    )


def summarize_tool(got: list[Any], kind: str = "*", **more: Any) -> af.Tool:
    def summarize(args: dict[str, Any]) -> str:
        got.append(args["data"])
        return f"{len(args['data'].data)} bytes"

    return af.define_tool(
        name="summarize",
        description="Summarize a table.",
        input_schema={"type": "object", "properties": {"data": {"type": "string"}}},
        execute=summarize,
        wants={"data": kind},
        **more,
    )


def scripted(*steps: Callable[[list[dict[str, Any]]], Any]) -> af.MockProvider:
    """A mock whose i-th reply is ``steps[i](tickets read so far)``: a reply may name a ref
    only the run made."""

    def respond(request: Any) -> Any:
        turn = sum(1 for m in request["messages"] if m["role"] == "assistant")
        tickets = [
            t for m in request["messages"] if (t := read_ticket(m.get("content"))) is not None
        ]
        return steps[turn](tickets) if turn < len(steps) else "done"

    return af.MockProvider(respond=respond)


def call(name: str, arguments: Any) -> Callable[[list[dict[str, Any]]], Any]:
    return lambda tickets: af.reply(tool_calls=[af.tool_call(name, arguments)])


def with_ref(name: str, argument: str) -> Callable[[list[dict[str, Any]]], Any]:
    return lambda tickets: af.reply(tool_calls=[af.tool_call(name, {argument: tickets[-1]["ref"]})])


def agent_with(
    provider: af.MockProvider, tools: list[af.Tool], kept: Any = None, **options: Any
) -> af.Agent:
    """An agent placing results over 1,000 characters in ``kept`` (a memory store)."""
    artifacts = options.pop("artifacts", None)
    if artifacts is None:
        artifacts = {"store": kept or af.MemoryArtifacts(), "max_inline_chars": 1000}
    return af.Agent(
        provider=provider,
        model="m",
        tools=tools,
        ports=fixed_ports(),
        artifacts=artifacts,
        **options,
    )


def replayed(
    agent: af.Agent,
    result: af.RunResult,
    agent_options: dict[str, Any] | None = None,
    **options: Any,
) -> af.ReplayResult:
    """A replay with an EMPTY store: it answers from the record, and records the same rows."""
    twin = af.Agent(
        provider=af.MockProvider([]),
        model="m",
        tools=list(agent.config.tools),
        artifacts={"store": af.MemoryArtifacts(), **options},
        **(agent_options or {}),
    )
    again = af.replay_sync(twin, agent.store, result.run_id)
    assert again.calls_checked == result.calls
    assert af.same_recording(agent.store, result.run_id, twin.store, again.result.run_id)
    return again


def test_a_large_result_is_placed_and_the_model_the_log_and_the_receipt_get_its_ticket() -> None:
    store = af.MemoryArtifacts()
    ends: list[af.AgentEvent] = []
    agent = agent_with(scripted(call("export", {})), [export_tool()], store)
    agent.on("agentfootprint.stream.tool_end", ends.append)
    result = agent.run_sync("export the orders")
    (message,) = tool_messages(result)
    ticket = read_ticket(message["content"])
    assert ticket is not None and ticket["placed"] is True
    data = store.read(result.conversation_id, ticket["ref"])
    assert data == BIG.encode()  # the exact text the model would have read
    assert ticket["digest"] == hexdigest("artifact", BIG.encode())
    assert ticket["bytes"] == len(BIG) and ticket["kind"] == "tool-result"
    assert ticket["media_type"] == "text/plain; charset=utf-8"
    assert f"export returned {len(BIG)} chars, over the 1000-char limit" in ticket["reason"]
    # the model read the ticket, the event carried it, and the receipt covers its digest
    assert agent.config.provider.requests[1]["messages"][-1]["content"] == message["content"]
    assert [getattr(e, "result", None) for e in ends] == [message["content"]]
    served = af.served_at(agent.store, result.run_id, 1)
    assert served["messages"][-1] == message
    receipt = af.receipt_at(agent.store, result.run_id, 1)
    assert receipt is not None
    assert receipt.messages[-1] == hexdigest("piece/message", canon(message))
    (minted,) = events_of(agent.store, result.run_id, MINTED)
    assert minted == {
        "iteration": 1,
        "tool": "export",
        "tool_call_id": message["tool_call_id"],
        "ref": ticket["ref"],
        "kind": "tool-result",
        "media_type": "text/plain; charset=utf-8",
        "bytes": len(BIG),
        "digest": ticket["digest"],
    }
    opened = orjson.loads(next(iter(agent.store.read(result.run_id))).body)
    assert opened["options"]["artifacts"] == {"max_inline_chars": 1000}
    assert BIG[:200].encode() not in b"".join(
        body for _, _, body in rows(agent.store, result.run_id)
    )
    replayed(agent, result, max_inline_chars=1000)


def test_a_json_result_is_stored_as_its_canonical_text() -> None:
    value = {"rows": [{"id": i, "total": i * 3} for i in range(400)]}
    store = af.MemoryArtifacts()
    agent = agent_with(
        scripted(call("export", {})), [export_tool(value, result_kind="table")], store
    )
    result = agent.run_sync("go")
    ticket = read_ticket(tool_messages(result)[0]["content"])
    assert ticket is not None
    assert (ticket["media_type"], ticket["kind"]) == ("application/json", "table")
    assert store.read(result.conversation_id, ticket["ref"]) == canon(value)


def test_small_results_stay_inline_and_without_placement_nothing_is_placed() -> None:
    agent = agent_with(scripted(call("export", {})), [export_tool("short")])
    result = agent.run_sync("go")
    assert tool_messages(result)[0]["content"] == "short"
    assert events_of(agent.store, result.run_id, MINTED) == []
    bare = agent_with(scripted(call("export", {})), [export_tool()], artifacts=af.MemoryArtifacts())
    placed_nowhere = bare.run_sync("go")
    assert tool_messages(placed_nowhere)[0]["content"] == BIG


def test_absent_records_the_rows_of_an_agent_without_the_option() -> None:
    def run(**options: Any) -> list[tuple[str, int, bytes]]:
        agent = af.Agent(
            provider=af.MockProvider([af.reply(tool_calls=[af.tool_call("export", {})]), "ok"]),
            model="m",
            tools=[export_tool()],
            ports=fixed_ports(),
            **options,
        )
        result = agent.run_sync("go")
        assert "present" not in [t["name"] for t in result.state["tool_schemas"]]
        return without_open(rows(agent.store, result.run_id))

    assert run() == run(artifacts=None)


def test_a_result_too_large_for_the_log_is_placed_not_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(limits, "MAX_BODY_BYTES", limits.MAX_ENVELOPE_BYTES + 20_000)
    huge = "x" * 50_000  # over what one reply's results may take in a body, now
    refused = af.Agent(
        provider=af.MockProvider([af.reply(tool_calls=[af.tool_call("export", {})]), "ok"]),
        model="m",
        tools=[export_tool(huge)],
    ).run_sync("go")
    assert "too large to record" in tool_messages(refused)[0]["content"]
    store = af.MemoryArtifacts()
    agent = agent_with(scripted(call("export", {})), [export_tool(huge)], store)
    result = agent.run_sync("go")
    ticket = read_ticket(tool_messages(result)[0]["content"])
    assert ticket is not None and store.read(result.conversation_id, ticket["ref"]) == huge.encode()


def test_present_hands_the_bytes_to_the_caller_and_the_model_one_line() -> None:
    seen: list[af.AgentEvent] = []
    agent = agent_with(scripted(call("export", {}), with_ref("present", "ref")), [export_tool()])
    agent.on("agentfootprint.artifacts.presented", seen.append)
    result = agent.run_sync("show me the orders")
    (shown,) = result.presented
    assert shown.data == BIG.encode() and shown.size == len(BIG)
    assert shown.digest == hexdigest("artifact", BIG.encode())
    last = tool_messages(result)[-1]
    assert last["name"] == "present"
    assert last["content"] == (
        f"Artifact {shown.ref} ({len(BIG)} bytes, text/plain; charset=utf-8) was shown to the user."
    )
    assert [e.payload()["ref"] for e in seen] == [shown.ref]
    kinds = [
        orjson.loads(b)["name"] for t, _, b in rows(agent.store, result.run_id) if t == "event"
    ]
    assert "agentfootprint.artifacts.presented" not in kinds  # told, never recorded
    assert "present" in [t["name"] for t in result.state["tool_schemas"]]
    again = replayed(agent, result, max_inline_chars=1000)
    assert again.result.presented == ()  # a replay runs no tool


def test_a_wanted_ref_is_resolved_into_the_artifact_the_tool_receives() -> None:
    got: list[Any] = []
    agent = agent_with(
        scripted(call("export", {}), with_ref("summarize", "data")),
        [export_tool(), summarize_tool(got, "tool-result")],
    )
    result = agent.run_sync("summarize the orders")
    (artifact,) = got
    assert isinstance(artifact, af.Artifact) and artifact.text() == BIG
    assert tool_messages(result)[-1]["content"] == f"{len(BIG)} bytes"
    # the history keeps the ref the model sent
    (asked,) = [m["tool_calls"][0] for m in result.state["history"] if m.get("tool_calls")][1:]
    assert asked["arguments"] == {"data": artifact.ref}
    (resolved,) = events_of(agent.store, result.run_id, RESOLVED)
    assert resolved == {
        "iteration": 2,
        "tool": "summarize",
        "tool_call_id": asked["id"],
        "argument": "data",
        "ref": artifact.ref,
        "kind": "tool-result",
        "bytes": len(BIG),
        "digest": artifact.digest,
    }
    replayed(agent, result, max_inline_chars=1000)


def test_a_function_tool_takes_an_artifact_parameter() -> None:
    got: list[Any] = []

    @af.tool
    def count_rows(table: af.Artifact) -> int:
        """Count a table's rows.

        Args:
            table: the table.
        """
        got.append(table)
        return table.text().count("\n")

    assert count_rows.wants == (("table", "*"),)
    assert count_rows.input_schema["properties"]["table"]["type"] == "string"
    agent = agent_with(
        scripted(call("export", {}), with_ref("count_rows", "table")), [export_tool(), count_rows]
    )
    result = agent.run_sync("count")
    assert tool_messages(result)[-1]["content"] == str(BIG.count("\n"))
    assert got[0].ref == events_of(agent.store, result.run_id, RESOLVED)[0]["ref"]


class Refusing:
    """A credential service a refused call must never reach."""

    def get_credential(self, request: Any) -> Any:
        raise AssertionError("a credential was asked")


@pytest.mark.parametrize(
    ("argument", "reason"),
    [
        (lambda tickets: tickets[-1]["ref"], "wrong-kind"),
        (lambda tickets: "art_" + "A" * 22, "unknown-ref"),
        (lambda tickets: 42, "not-a-ref"),
    ],
)
def test_a_wrong_ref_is_refused_from_the_record_before_any_credential(
    argument: Callable[[list[dict[str, Any]]], Any], reason: str
) -> None:
    got: list[Any] = []
    wanting = summarize_tool(got, "table", needs={"credential": "warehouse"})
    schema = dict(wanting.input_schema)
    schema["properties"] = {"data": {}}  # (so a number reaches the check)
    wanting = af.define_tool(
        name="summarize",
        description="Summarize a table.",
        input_schema=schema,
        execute=wanting.execute,
        wants={"data": "table"},
        needs={"credential": "warehouse"},
    )
    agent = agent_with(
        scripted(
            call("export", {}),
            lambda tickets: af.reply(
                tool_calls=[af.tool_call("summarize", {"data": argument(tickets)})]
            ),
        ),
        [export_tool(), wanting],
        credentials=Refusing(),
    )
    result = agent.run_sync("go")
    assert got == []
    message = tool_messages(result)[-1]
    assert message.get("is_error") is True and "was not run" in message["content"]
    (refused,) = events_of(agent.store, result.run_id, REFUSED)
    assert refused["reason"] == reason and refused["wanted"] == "table"
    assert "Artifacts of kind 'table' in this conversation: none." in message["content"]
    replayed(agent, result, {"credentials": Refusing()}, max_inline_chars=1000)


def test_a_ref_of_another_conversation_is_unknown_and_the_refusal_recorded() -> None:
    store = af.MemoryArtifacts()
    first = agent_with(scripted(call("export", {})), [export_tool()], store)
    placed = first.run_sync("export")
    ref = read_ticket(tool_messages(placed)[0]["content"])["ref"]  # type: ignore[index]
    got: list[Any] = []
    other = agent_with(
        af.MockProvider([af.reply(tool_calls=[af.tool_call("summarize", {"data": ref})]), "ok"]),
        [summarize_tool(got)],
        store,
    )
    result = other.run_sync("summarize")
    assert got == []
    (refused,) = events_of(other.store, result.run_id, REFUSED)
    assert (refused["ref"], refused["reason"]) == (ref, "unknown-ref")
    # the same ref resolves in a continuation of its own conversation
    follow = af.Agent(
        provider=af.MockProvider(
            [af.reply(tool_calls=[af.tool_call("summarize", {"data": ref})]), "ok"]
        ),
        model="m",
        tools=[export_tool(), summarize_tool(got)],
        store=first.store,
        artifacts={"store": store, "max_inline_chars": 1000},
    )
    continued = follow.run_sync("summarize", continue_from=placed)
    assert [a.ref for a in got] == [ref]
    assert continued.conversation_id == placed.conversation_id


@pytest.mark.parametrize("damage", ["erase", "flip"])
def test_bytes_the_store_no_longer_gives_are_refused_and_the_tool_does_not_run(
    tmp_path: Path, damage: str
) -> None:
    store = af.FileArtifacts(tmp_path / "artifacts")
    got: list[Any] = []
    unavailable: list[af.AgentEvent] = []

    def break_it(tickets: list[dict[str, Any]]) -> Any:
        ref, scope = tickets[-1]["ref"], "run0000"  # (fixed ports: the first run's id)
        if damage == "erase":
            store.remove(scope, ref, reason="erased", at=1, note="asked")
        else:
            stored = tmp_path / "artifacts" / scope_key(scope) / f"{ref}.bin"
            data = stored.read_bytes()
            stored.write_bytes(bytes([data[0] ^ 1]) + data[1:])
        return af.reply(tool_calls=[af.tool_call("summarize", {"data": ref})])

    agent = agent_with(
        scripted(call("export", {}), break_it), [export_tool(), summarize_tool(got)], store
    )
    agent.on("agentfootprint.artifacts.unavailable", unavailable.append)
    result = agent.run_sync("go")
    assert result.conversation_id == "run0000"
    assert got == []
    message = tool_messages(result)[-1]
    expected = "it was erased" if damage == "erase" else "no longer match the digest"
    assert message["is_error"] is True and expected in message["content"]
    assert [e.payload()["reason"] for e in unavailable] == [
        "erased" if damage == "erase" else "mismatch"
    ]
    replayed(agent, result, max_inline_chars=1000)  # answered from the record: no store


def test_a_tool_puts_an_artifact_and_returns_its_ticket() -> None:
    def report(args: dict[str, Any], ctx: af.ToolContext) -> Any:
        assert ctx.artifacts.available
        kept = ctx.artifacts.put(b"%PDF-1.7 report", kind="report", media_type="application/pdf")
        ctx.artifacts.put("a draft the tool never returns")
        return kept

    store = af.MemoryArtifacts()
    tool = af.define_tool(
        name="report", description="Make a report.", input_schema=EMPTY, execute=report
    )
    agent = agent_with(scripted(call("report", {})), [tool], store)
    result = agent.run_sync("report")
    ticket = read_ticket(tool_messages(result)[0]["content"])
    assert ticket is not None and ticket["kind"] == "report"
    assert store.read(result.conversation_id, ticket["ref"]) == b"%PDF-1.7 report"
    (minted,) = events_of(agent.store, result.run_id, MINTED)
    assert minted["ref"] == ticket["ref"] and minted["media_type"] == "application/pdf"
    heads = store.list(result.conversation_id)
    assert [h.ref for h in heads] == [ticket["ref"]]  # the draft was taken back
    replayed(agent, result, max_inline_chars=1000)


def test_a_ticket_a_tool_did_not_put_is_refused() -> None:
    forged = {
        "bytes": 3,
        "digest": "0" * 64,
        "kind": "tool-result",
        "media_type": "text/plain",
        "placed": True,
        "reason": "trust me",
        "ref": "art_" + "B" * 22,
    }
    agent = agent_with(scripted(call("export", {})), [export_tool(forged)])
    result = agent.run_sync("go")
    message = tool_messages(result)[0]
    assert message["is_error"] is True and "did not put" in message["content"]
    assert events_of(agent.store, result.run_id, MINTED) == []


def test_without_a_store_ctx_artifacts_refuses_naming_the_option() -> None:
    def peek(args: dict[str, Any], ctx: af.ToolContext) -> Any:
        assert not ctx.artifacts.available
        ctx.artifacts.put("x")
        return "unreachable"

    tool = af.define_tool(name="peek", description="Peek.", input_schema=EMPTY, execute=peek)
    agent = af.Agent(
        provider=af.MockProvider([af.reply(tool_calls=[af.tool_call("peek", {})]), "ok"]),
        model="m",
        tools=[tool],
    )
    result = agent.run_sync("go")
    content = tool_messages(result)[0]["content"]
    assert "this agent has no artifact store" in content and "artifacts=" in content


def test_ttl_states_the_expiry_on_the_ticket_and_retention_is_told() -> None:
    expired: list[af.AgentEvent] = []
    store = af.MemoryArtifacts(retention=af.Retention(max_count=1))
    agent = agent_with(
        scripted(call("export", {}), call("export", {})),
        [export_tool()],
        artifacts={"store": store, "max_inline_chars": 1000, "ttl_ms": 60_000},
    )
    agent.on("agentfootprint.artifacts.expired", expired.append)
    result = agent.run_sync("go")
    first, second = (read_ticket(m["content"]) for m in tool_messages(result))
    assert first is not None and second is not None
    minted = events_of(agent.store, result.run_id, MINTED)
    assert [m["expires_at"] for m in minted] == [first["expires_at"], second["expires_at"]]
    assert second["expires_at"] - first["expires_at"] > 0
    assert [(e.payload()["ref"], e.payload()["note"]) for e in expired] == [
        (first["ref"], "max_count")
    ]
    tomb = store.tombstone(result.conversation_id, first["ref"])
    assert tomb is not None and tomb.reason == "expired"
    replayed(agent, result, max_inline_chars=1000, ttl_ms=60_000)


def test_under_a_policy_the_store_holds_the_committed_form() -> None:
    secret = "4111-1111-1111-1111"
    value = {"rows": [{"id": i, "card": secret if i == 7 else "none"} for i in range(300)]}
    store = af.MemoryArtifacts()
    agent = agent_with(
        scripted(call("export", {})),
        [export_tool(value)],
        store,
        redact=af.RedactionPolicy(keys=["card"]),
    )
    result = agent.run_sync("go")
    ticket = read_ticket(tool_messages(result)[0]["content"])
    assert ticket is not None
    data = store.read(result.conversation_id, ticket["ref"])
    assert data is not None and secret.encode() not in data and b'"$commit"' in data
    assert ticket["digest"] == hexdigest("artifact", data)
    assert secret.encode() not in b"".join(b for _, _, b in rows(agent.store, result.run_id))


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("artifacts/", "must be an artifact store"),
        ({"store": object()}, "'store' must be an artifact store"),
        ({"max_inline_chars": 1000}, "'store' must be an artifact store"),
        ({"store": af.MemoryArtifacts(), "max_inline_chars": 255}, "from 256"),
        ({"store": af.MemoryArtifacts(), "max_inline_chars": True}, "from 256"),
        ({"store": af.MemoryArtifacts(), "ttl_ms": 0}, "'ttl_ms' must be an integer from 1"),
        ({"store": af.MemoryArtifacts(), "inline": 1}, "unknown member(s) 'inline'"),
    ],
)
def test_misconfiguration_is_refused_at_construction(value: Any, says: str) -> None:
    with pytest.raises(af.UsageError) as caught:
        af.Agent(provider=af.MockProvider(["x"]), model="m", artifacts=value)
    assert caught.value.option == "artifacts" and says in str(caught.value)


def test_tools_that_need_a_store_or_take_the_library_name_are_refused(tmp_path: Path) -> None:
    with pytest.raises(af.UsageError, match="wants artifacts, and the agent has no"):
        af.Agent(provider=af.MockProvider(["x"]), model="m", tools=[summarize_tool([])])
    with pytest.raises(af.UsageError, match="declares a result_kind"):
        af.Agent(provider=af.MockProvider(["x"]), model="m", tools=[export_tool(result_kind="t")])
    mine = af.define_tool(
        name="present", description="Mine.", input_schema=EMPTY, execute=lambda a: ""
    )
    with pytest.raises(af.UsageError, match="the library tool") as caught:
        af.Agent(
            provider=af.MockProvider(["x"]), model="m", tools=[mine], artifacts=af.MemoryArtifacts()
        )
    assert caught.value.option == "tools"
    af.FileArtifacts(tmp_path / "store").close()
    readonly = af.FileArtifacts(tmp_path / "store", readonly=True)
    with pytest.raises(af.UsageError, match="read-only"):
        af.Agent(provider=af.MockProvider(["x"]), model="m", artifacts=readonly)


@pytest.mark.parametrize(
    ("wants", "says"),
    [
        ({"nope": "table"}, "not a property"),
        ({"data": "Bad Kind"}, "artifact kind"),
        ({}, "non-empty mapping"),
    ],
)
def test_define_tool_checks_wants(wants: Any, says: str) -> None:
    with pytest.raises(af.UsageError, match=says):
        af.define_tool(
            name="t",
            description="T.",
            input_schema={"type": "object", "properties": {"data": {"type": "string"}}},
            execute=lambda a: "",
            wants=wants,
        )
    with pytest.raises(af.UsageError, match="whose schema type is not 'string'"):
        af.define_tool(
            name="t",
            description="T.",
            input_schema={"type": "object", "properties": {"data": {"type": "integer"}}},
            execute=lambda a: "",
            wants={"data": "table"},
        )


def test_the_artifact_store_is_never_the_log_file(tmp_path: Path) -> None:
    log = tmp_path / "runs.db"
    af.Agent(provider=af.MockProvider(["ok"]), model="m", store=str(log)).run_sync("go")
    with pytest.raises(af.FileError):
        af.SqliteArtifacts(log)
    kept = tmp_path / "artifacts.db"
    af.SqliteArtifacts(kept).close()
    with pytest.raises(af.FileError):
        af.Agent(provider=af.MockProvider(["ok"]), model="m", store=str(kept)).run_sync("go")


@pytest.mark.parametrize("kind", ["file", "sqlite"])
def test_a_persistent_store_serves_a_later_run_of_the_conversation(
    tmp_path: Path, kind: str
) -> None:
    def opened() -> af.ArtifactStore:
        if kind == "file":
            return af.FileArtifacts(tmp_path / "artifacts")
        return af.SqliteArtifacts(tmp_path / "artifacts.db")

    log = str(tmp_path / "runs.db")
    first = agent_with(scripted(call("export", {})), [export_tool()], opened(), store=log)
    placed = first.run_sync("export")
    ref = read_ticket(tool_messages(placed)[0]["content"])["ref"]  # type: ignore[index]
    first.config.options["artifacts"].store.close()
    got: list[Any] = []
    later = af.Agent(
        provider=af.MockProvider(
            [af.reply(tool_calls=[af.tool_call("summarize", {"data": ref})]), "ok"]
        ),
        model="m",
        tools=[export_tool(), summarize_tool(got)],
        store=log,
        artifacts=opened(),
    )
    later.run_sync("summarize", continue_from=placed)
    assert got[0].data == BIG.encode()


def test_a_large_result_is_placed_presented_verified_and_replayed(tmp_path: Path) -> None:
    """The issue's 50 MB case at 5 MB (bench/artifacts.py measures 50 MB): the log grows by
    the ticket only, the model reads the ticket, present hands back the very bytes."""
    big = "0123456789abcdef" * (5 * 1024 * 1024 // 16)
    store = af.FileArtifacts(tmp_path / "artifacts")
    log = tmp_path / "runs.db"
    agent = agent_with(
        scripted(call("export", {}), with_ref("present", "ref")),
        [export_tool(big)],
        store,
        store=str(log),
    )
    result = agent.run_sync("export everything")
    (shown,) = result.presented
    assert shown.data == big.encode() and shown.digest == hexdigest("artifact", big.encode())
    bodies = sum(len(body) for _, _, body in rows(agent.store, result.run_id))
    assert bodies < 20_000  # the ticket, its event and the run's own rows: no 5 MB body
    served = agent.config.provider.requests[1]["messages"][-1]["content"]
    assert read_ticket(served) is not None and len(served) < 1000
    verdicts = dict(af.Verifier(agent.store).verify_all())
    assert verdicts[result.run_id].outcome is af.Outcome.VALID_UNSIGNED
    replayed(agent, result, max_inline_chars=1000)
