"""Replay on unusual but valid recordings, and what a replay may never do.

Each case here was a defect once: a false divergence of an unchanged agent, a changed agent
reported identical, a redacted value printed or recorded in clear, or a crash.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

import agentfootprint as af
from agentfootprint.audit.divergence import compare
from agentfootprint.audit.read import Receipt
from agentfootprint.logformat.commitments import Disclosure, b64url, commitment_digest
from agentfootprint.logformat.request import RequestHasher
from agentfootprint.runtime.provider import LLMResponse, ToolCall
from agentfootprint.store.base import EventStore
from agentfootprint.store.redaction import ReplayCommitments
from agentfootprint.testing.replay import NoModel, silent_twins
from agentfootprint.testing.tamper import read_rows, tampering

#: these tests edit or read the schema-1 ``events`` table directly (docs/log-format.md
#: appendix B): every new file of this module is created with storage schema 1
#: (tests/conftest.py)
NEW_FILE_SCHEMA = 1

SSN = "123-45-6789"


class Replies:
    """A provider answering with the given replies, in order."""

    name = "replies"

    def __init__(self, replies: list[LLMResponse]) -> None:
        self.replies = list(replies)

    async def complete(self, request: Any) -> LLMResponse:
        return self.replies.pop(0)


def tool(name: str = "echo", schema: dict[str, Any] | None = None, result: Any = "ok") -> af.Tool:
    return af.define_tool(
        name=name,
        description="A tool.",
        input_schema=schema or {"type": "object"},
        execute=lambda args: result,
    )


def replayer(tools: list[af.Tool], **options: Any) -> af.Agent:
    return af.Agent(
        provider=NoModel(),
        model="m",
        tools=silent_twins(tools, []),
        store=af.MemoryStore(),
        **options,
    )


def identical(agent: af.Agent, store: EventStore, run_id: str, **kwargs: Any) -> None:
    replayed = af.replay_sync(agent, store, run_id, **kwargs)
    assert af.same_recording(store, run_id, agent.store, replayed.result.run_id)
    assert af.Verifier(agent.store).verify(replayed.result.run_id).outcome.name == (
        "VALID_UNSIGNED"
    )


def diverges(agent: af.Agent, store: EventStore, run_id: str, **kwargs: Any) -> Any:
    with pytest.raises(af.ReplayDivergence) as caught:
        af.replay_sync(agent, store, run_id, **kwargs)
    error = caught.value
    assert error.run_id is not None
    assert af.Verifier(agent.store).verify(error.run_id).outcome.name == "VALID_UNSIGNED"
    return error


# -- unchanged agents replay ------------------------------------------------------------------


def test_a_reply_equal_to_the_previous_one_replays() -> None:
    """Nothing is rewritten for an equal reply: the commit marker says the call was answered."""
    same = LLMResponse(content="", tool_calls=(ToolCall(id="c1", name="echo", arguments={}),))
    store = af.MemoryStore()
    original = af.Agent(
        provider=Replies([same, same, LLMResponse(content="done")]),
        model="m",
        tools=[tool()],
        store=store,
    ).run_sync("hi")
    assert original.calls == 3
    identical(replayer([tool()]), store, original.run_id)


def test_reused_ids_with_one_call_refused_replay() -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    script = [
        af.reply(
            tool_calls=[
                af.tool_call("weather", {"city": "Lisbon"}, id="c"),
                af.tool_call("weather", {"town": "Oslo"}, id="c"),
            ]
        ),
        "ok",
    ]
    store = af.MemoryStore()
    original = af.Agent(
        provider=af.MockProvider(script),
        model="m",
        tools=[tool("weather", schema, "sunny")],
        store=store,
    ).run_sync("hi")
    results = [m["content"] for m in original.state["history"] if m["role"] == "tool"]
    assert results[0] == "sunny" and "did not match" in results[1]
    identical(replayer([tool("weather", schema)]), store, original.run_id)


@pytest.mark.parametrize("key", ["name", "tool_call_id", "mode", "id", "tool_calls"])
def test_policies_on_the_loop_own_keys_replay_with_the_vault(tmp_path: Path, key: str) -> None:
    """Keys the loop itself writes (tool names and ids, the validation mode, the reply's tool
    calls) may be redacted: with the vault the replay opens them and matches."""
    schema = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    script = [
        af.reply(tool_calls=[af.tool_call("find", {"q": "a"}), af.tool_call("find", {"x": 1})]),
        "done",
    ]
    store, vault = af.MemoryStore(), tmp_path / "vault.db"
    policy = af.RedactionPolicy(keys=[key])
    original = af.Agent(
        provider=af.MockProvider(script),
        model="m",
        tools=[tool("find", schema)],
        store=store,
        redact=policy,
        disclosures=vault,
    ).run_sync("hi")
    identical(
        replayer([tool("find", schema)], redact=policy), store, original.run_id, disclosures=vault
    )
    # without it: the same recording, or a divergence that asks for the vault
    agent = replayer([tool("find", schema)], redact=policy)
    try:
        identical(agent, store, original.run_id)
    except af.ReplayDivergence as error:
        assert "disclosure vault" in str(error), error
        assert af.Verifier(agent.store).verify(error.run_id).outcome.name == "VALID_UNSIGNED"


@pytest.mark.parametrize("key", ["id", "tool_calls"])
def test_a_reply_whose_structure_is_redacted_needs_the_vault(key: str) -> None:
    script = [af.reply(tool_calls=[af.tool_call("find", {"q": "a"})]), "done"]
    store = af.MemoryStore()
    policy = af.RedactionPolicy(keys=[key])
    original = af.Agent(
        provider=af.MockProvider(script),
        model="m",
        tools=[tool("find")],
        store=store,
        redact=policy,
    ).run_sync("hi")
    error = diverges(replayer([tool("find")], redact=policy), store, original.run_id)
    assert (error.call, error.kind) == (0, "redacted")
    assert "cannot be rebuilt" in str(error) and "disclosure vault" in str(error)


# -- changed agents are caught ----------------------------------------------------------------


BAD_CALL = [af.reply(tool_calls=[af.tool_call("find", {"x": 1})]), "done"]
STRICT = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}


@pytest.mark.parametrize(("recorded", "replayed"), [("warn", "off"), ("off", "warn")])
def test_validation_between_warn_and_off_changes_the_recording(
    recorded: str, replayed: str
) -> None:
    """Both run the tool, so the model is served the same; but the recorded finding
    (``args_invalid``) differs: a ``record`` divergence, after every request matched."""
    store = af.MemoryStore()
    original = af.Agent(
        provider=af.MockProvider(BAD_CALL),
        model="m",
        tools=[tool("find", STRICT)],
        store=store,
        tool_arg_validation=recorded,
    ).run_sync("hi")
    agent = replayer([tool("find", STRICT)], tool_arg_validation=replayed)
    error = diverges(agent, store, original.run_id)
    assert (error.call, error.kind) == (0, "record")  # the tool-calls acting on reply 0
    assert "every request matched" in str(error) and "args_invalid" in str(error)
    assert error.diff.startswith("--- original row")


def test_without_receipts_json_types_are_compared_as_json() -> None:
    """``False`` and ``0`` are equal in Python, not in JSON: a schema default changed from
    one to the other is a change of the served request."""
    before = {"type": "object", "properties": {"q": {"type": "boolean", "default": False}}}
    after = {"type": "object", "properties": {"q": {"type": "boolean", "default": 0}}}
    store = af.MemoryStore()
    original = af.Agent(
        provider=af.MockProvider(["done"]),
        model="m",
        tools=[tool("find", before)],
        store=store,
        record_receipt=False,
    ).run_sync("hi")
    error = diverges(replayer([tool("find", after)], record_receipt=False), store, original.run_id)
    assert (error.call, error.kind) == (0, "request")


# -- what a replay never does ------------------------------------------------------------------


def test_a_departure_never_prints_a_redacted_value(tmp_path: Path) -> None:
    """Recorded with validation warning (the tool ran and returned an ssn), replayed with
    enforce (the replay refuses the call): the diff shows the recorded result masked, and
    neither the message nor the replay's log holds the value the vault opened."""
    store, vault = af.MemoryStore(), tmp_path / "vault.db"
    policy = af.RedactionPolicy(keys=["ssn"])
    person = tool("lookup", STRICT, {"name": "Ann", "ssn": SSN})
    original = af.Agent(
        provider=af.MockProvider([af.reply(tool_calls=[af.tool_call("lookup", {"x": 1})]), "ok"]),
        model="m",
        tools=[person],
        store=store,
        redact=policy,
        disclosures=vault,
        tool_arg_validation="warn",
    ).run_sync("who?")
    agent = replayer([tool("lookup", STRICT)], redact=policy, tool_arg_validation="enforce")
    error = diverges(agent, store, original.run_id, disclosures=vault)
    assert (error.call, error.kind) == (0, "tool-call")
    assert SSN not in str(error) and "<redacted>" in error.diff
    assert all(SSN.encode() not in row.body for row in agent.store.read(error.run_id))


def test_an_original_that_does_not_verify_is_not_replayed(tmp_path: Path) -> None:
    """A replay's verdict is about evidence: a log whose rows were edited is refused before
    anything is replayed (even when the edit would replay "identically")."""
    path = tmp_path / "runs.db"
    store = af.SqliteStore(path)
    original = af.Agent(
        provider=af.MockProvider(["done"]), model="m", tools=[tool()], store=store
    ).run_sync("hi")
    store.close()
    with tampering(path) as conn:
        row = next(r for r in read_rows(conn, original.run_id) if b'"hi"' in r.body)
        conn.execute(
            "UPDATE events SET body = ? WHERE run_id = ? AND seq = ?",
            (row.body.replace(b'"hi"', b'"ho"'), original.run_id, row.seq),
        )
    store = af.SqliteStore(path)
    agent = replayer([tool()])
    with pytest.raises(af.VerificationError):
        af.replay_sync(agent, store, original.run_id)
    assert agent.store.runs() == []
    store.close()


def test_a_failed_original_replays_up_to_its_failure() -> None:
    class Failing:
        name = "failing"

        async def complete(self, request: Any) -> LLMResponse:
            raise ConnectionError("the model service is down")

    store = af.MemoryStore()
    with pytest.raises(af.ProviderCallError) as failed:
        af.Agent(provider=Failing(), model="m", store=store).run_sync("hi")
    assert failed.value.run_id is not None
    error = diverges(replayer([]), store, failed.value.run_id)
    assert (error.call, error.kind) == (0, "calls")
    assert "failed in the original" in str(error) and "ConnectionError" in str(error)


def test_a_fork_commits_its_live_values_with_fresh_salts() -> None:
    salt = b64url(b"\0" * 16)
    disclosure = Disclosure(
        commitment=commitment_digest(salt, "content", "x"), salt=salt, key="content", value="x"
    )

    def refuse(digest: str, key: str | None) -> None:
        raise AssertionError("reused")

    replaying = ReplayCommitments([disclosure, disclosure], [], refuse)
    assert replaying.salt("content", "x") == salt
    assert replaying.salt("other", "x") is None  # another key never gets the salt
    replaying.live = True  # a fork went live: the original's salts are not lent any more
    assert replaying.salt("content", "x") is None


def test_a_raised_tool_and_a_refused_call_sharing_an_id_replay() -> None:
    """One reply, two calls with id ``c1``: the first tool raises, the second call is refused
    by validation. Each refusal goes to the error result that names its issues."""

    def boom(args: Any) -> Any:
        raise RuntimeError("tool failed")

    schema = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}
    failing = af.define_tool(name="t", description="A tool.", input_schema=schema, execute=boom)
    calls = [af.tool_call("t", {"x": 1}, id="c1"), af.tool_call("t", {"x": "bad"}, id="c1")]
    store = af.MemoryStore()
    original = af.Agent(
        provider=af.MockProvider([af.reply(tool_calls=calls), "done"]),
        model="m",
        tools=[failing],
        store=store,
    ).run_sync("hi")
    results = [m["content"] for m in original.state["history"] if m["role"] == "tool"]
    assert "raised RuntimeError" in results[0] and "did not match" in results[1]
    identical(replayer([failing]), store, original.run_id)


def test_a_redacted_error_flag_needs_the_vault(tmp_path: Path) -> None:
    def boom(args: Any) -> Any:
        raise RuntimeError("tool failed")

    failing = af.define_tool(
        name="t", description="A tool.", input_schema={"type": "object"}, execute=boom
    )
    script = [af.reply(tool_calls=[af.tool_call("t", {})]), "done"]
    store, vault = af.MemoryStore(), tmp_path / "vault.db"
    policy = af.RedactionPolicy(keys=["is_error"])
    original = af.Agent(
        provider=af.MockProvider(script),
        model="m",
        tools=[failing],
        store=store,
        redact=policy,
        disclosures=vault,
    ).run_sync("hi")
    error = diverges(replayer([failing], redact=policy), store, original.run_id)
    assert (error.call, error.kind, error.position) == (0, "redacted", 0)
    identical(replayer([failing], redact=policy), store, original.run_id, disclosures=vault)


def test_a_fork_that_never_went_live_is_checked_like_a_replay() -> None:
    """``until`` beyond the calls the replay makes: nothing went live, so a replay that made
    fewer calls, or recorded anything else, still diverges."""
    script = [af.reply(tool_calls=[af.tool_call("find", {})]), "done"]
    store = af.MemoryStore()
    original = af.Agent(
        provider=af.MockProvider(script), model="m", tools=[tool("find")], store=store
    ).run_sync("hi")
    plain = replayer([tool("find")], max_iterations=1, wrap_up_at_max_iterations=False)
    fewer = diverges(plain, store, original.run_id, until=5)
    assert fewer.kind in {"calls", "tool-call"}
    renamed = diverges(replayer([tool("find")], name="renamed"), store, original.run_id, until=5)
    assert renamed.kind == "record" and "agent" in renamed.diff
    forked = af.replay_sync(replayer([tool("find")]), store, original.run_id, until=5)
    assert (forked.calls_checked, forked.forked_at) == (2, 5)


def test_the_policy_check_applies_to_forks_and_matches_keys_by_the_agent_policy(
    tmp_path: Path,
) -> None:
    script = [af.reply(tool_calls=[af.tool_call("find", {"ssn": SSN})]), "done"]
    store, vault = af.MemoryStore(), tmp_path / "vault.db"
    original = af.Agent(
        provider=af.MockProvider(script),
        model="m",
        tools=[tool("find")],
        store=store,
        redact=af.RedactionPolicy(keys=["ssn"]),
        disclosures=vault,
    ).run_sync("hi")
    live = af.Agent(
        provider=af.MockProvider(["live"]), model="m", tools=[tool("find")], store=af.MemoryStore()
    )
    with pytest.raises(af.ReplayDivergence) as caught:
        af.replay_sync(live, store, original.run_id, until=0, disclosures=vault)
    assert (caught.value.call, caught.value.kind) == (0, "policy")
    # a pattern that matches the key covers it
    covering = replayer([tool("find")], redact=af.RedactionPolicy(patterns=["^ssn$"]))
    identical(covering, store, original.run_id, disclosures=vault)


def test_the_close_is_compared_too() -> None:
    """A policy that commits the close's ``iterations`` changes only the close row."""
    store = af.MemoryStore()
    original = af.Agent(
        provider=af.MockProvider(["done"]), model="m", tools=[tool()], store=store
    ).run_sync("hi")
    agent = replayer([tool()], redact=af.RedactionPolicy(keys=["iterations"]))
    error = diverges(agent, store, original.run_id)
    assert error.kind == "record" and "the close" in str(error)
    closed = [row for row in agent.store.read(error.run_id) if row.type == "run.close"]
    assert len(closed) == 1 and b'"failed"' in closed[0].body  # one close, the failed one


class _Unread(list[str]):
    """A digest list that must not be read: the request digest already says it matched."""

    def __iter__(self) -> Any:
        raise AssertionError("a matching call's digest lists were read")

    def __eq__(self, other: object) -> bool:
        raise AssertionError("a matching call's digest lists were compared")

    __hash__ = None  # type: ignore[assignment]


def test_a_call_whose_request_digest_matches_is_not_compared_piece_by_piece() -> None:
    """Each replayed call is compared with its receipt by the whole request's digest first:
    O(1) per call, where the piece lists (O(history)) are read only to locate a difference."""
    message = {"role": "user", "content": "q"}
    request = {"model": "m", "params": {}, "system": [], "messages": [message], "tools": []}
    digests = RequestHasher().digests(request)
    unread = Receipt(
        call=0,
        commit=0,
        model="m",
        params={},
        request=digests.request,
        system=_Unread(),
        messages=_Unread(),
        tools=_Unread(),
    )
    assert compare(0, (request, unread), digests, request, "r") is None
    # a request digest that differs where every piece matches: the shape, said as such
    other = dataclasses.replace(
        unread,
        request="0" * 64,
        system=list(digests.system),
        messages=list(digests.messages),
        tools=list(digests.tools),
    )
    found = compare(0, (request, other), digests, request, "r")
    assert found is not None and found.kind == "request"
