"""Every public entry point refuses a wrong argument with the library's own error, naming it.

The sweep passes each argument of each entry point the same wrong values (None, "", -1,
1.5, True, a list, an object, the path of a file in a folder that does not exist). A value
the argument accepts must be accepted; any other must raise a subclass of
``AgentFootprintError`` whose message names the argument (never a bare ``TypeError``,
``ValueError``, ``AttributeError``, ``KeyError`` or ``OSError``). Every callable public name
is classified: swept here, a record type (checked where it enters the runtime), or an error
type, so a new public name cannot be left out.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import enum
import inspect
import typing
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import agentfootprint as af
from agentfootprint.features import registry
from agentfootprint.logformat import limits
from agentfootprint.testing.replay import assert_replays
from examples_budget import scaled

# -- the wrong values ------------------------------------------------------------------------

MISSING = "missing_path"


class Opaque:
    """An object of no type the API knows."""


WRONG: dict[str, Any] = {
    "None": None,
    "empty": "",
    "minus_one": -1,
    "float": 1.5,
    "True": True,
    "list": [1],
    "object": Opaque(),
    MISSING: MISSING,
}


def resolve(value_id: str, tmp_path: Path) -> Any:
    if value_id == MISSING:
        return str(tmp_path / "no-such-folder" / "x.db")
    return WRONG[value_id]


# -- a recorded world to call the read side on -------------------------------------------------


def echo_tool() -> af.Tool:
    return af.define_tool(
        name="echo",
        description="Echo the arguments.",
        input_schema={"type": "object", "properties": {"x": {"type": "integer"}}},
        execute=lambda args: args,
    )


def script() -> list[Any]:
    return [af.reply(tool_calls=[af.tool_call("echo", {"x": 1})]), "done"]


@dataclasses.dataclass
class World:
    store: af.MemoryStore
    db: Path
    run_id: str
    calls: int
    commits: int
    folder: Path

    def agent(self, **options: Any) -> af.Agent:
        return af.Agent(
            provider=af.MockProvider(script()), model="m", tools=[echo_tool()], **options
        )


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    folder = tmp_path_factory.mktemp("world")
    store = af.MemoryStore()
    agent = af.Agent(
        provider=af.MockProvider(script()), model="m", tools=[echo_tool()], store=store
    )
    result = agent.run_sync("go")
    verified = af.verify_run(store, result.run_id)  # made outside a test: verified here
    db = folder / "world.db"
    with af.Agent(
        provider=af.MockProvider(script()), model="m", tools=[echo_tool()], store=db
    ) as on_disk:
        af.verify_run(on_disk.store, on_disk.run_sync("go").run_id)
    yield World(
        store=store,
        db=db,
        run_id=result.run_id,
        calls=result.calls,
        commits=verified.commits,
        folder=folder,
    )


# -- the sweep ---------------------------------------------------------------------------------

Call = Callable[[World, Any, Path], Any]


@dataclasses.dataclass(frozen=True)
class Case:
    entry: str  # the public name (or Agent method) swept
    argument: str  # the argument given the wrong value
    call: Call
    accepts: frozenset[str] = frozenset()  # value ids the argument accepts
    #: who makes the refusal, for values it does not refuse yet (xfail, strict: it fails
    #: once they are refused, so the mark is removed then)
    owner: str | None = None
    pending: frozenset[str] = frozenset()
    variant: str = ""
    #: derived from a feature's declaration, with no list of the values it accepts: each
    #: wrong value is either accepted or refused naming the argument (never a bare error)
    derived: bool = False

    @property
    def id(self) -> str:
        return f"{self.entry}-{self.argument}" + (f"-{self.variant}" if self.variant else "")


def closing(value: Any) -> None:
    close = getattr(value, "close", None)
    if callable(close):
        close()


def agent_with(option: str) -> Call:
    def call(world: World, value: Any, tmp: Path) -> None:
        options: dict[str, Any] = {"provider": af.MockProvider(["x"]), "model": "m"}
        options[option] = value
        af.Agent(**options).close()

    return call


def vault_with_store(world: World, value: Any, tmp: Path) -> None:
    af.Agent(
        provider=af.MockProvider(["x"]),
        model="m",
        redact=af.conversation_redaction(),
        disclosures=value,
        store=tmp / "log.db",
    ).close()


def allowing(world: World, value: Any, tmp: Path) -> None:
    with af.allow_model_requests(value):
        pass


def kwargs_call(fn: Callable[..., Any], argument: str, **base: Any) -> Call:
    def call(world: World, value: Any, tmp: Path) -> None:
        closing(fn(**{**base, argument: value}))

    return call


#: a PostgreSQL URL nothing answers: arguments are checked before anything connects
UNREACHABLE = "postgresql://nobody@127.0.0.1:9/db"


def postgres_call(fn: Callable[..., Any], argument: str) -> Call:
    """``fn(UNREACHABLE, argument=value)``: a value refused is refused before connecting; one
    accepted goes on to connect, and the unreachable server's StoreUnavailableError says so."""

    def call(world: World, value: Any, tmp: Path) -> None:
        key = tmp / "vault.key"
        key.write_text("ab" * 32)
        base: dict[str, Any] = {"url": UNREACHABLE, "timeout": 1}
        if fn is af.PostgresVault:
            base["master_key"] = key
        with contextlib.suppress(af.StoreUnavailableError):  # taken: it tried to connect
            closing(fn(**{**base, argument: value}))

    return call


#: what the result envelopes need besides the argument swept
PROVENANCE = {"measured_at": "2026-09-26T09:00:00Z", "source": "nightly export"}
FACTS = [{"entity": "backup-7", "status": "failed"}]
SPAN = {"queried_from": "2026-09-26T09:30:00Z", "queried_to": "2026-09-26T10:30:00Z"}


def tool_with(argument: str) -> Call:
    base: dict[str, Any] = {"name": "t", "description": "d", "execute": lambda a: a}
    return kwargs_call(af.define_tool, argument, **base)


def documented(x: int) -> int:
    """A documented function."""
    return x


def function_tool_with(argument: str) -> Call:
    """``af.tool(fn, ...)`` with ``argument`` wrong (``fn`` is positional)."""

    def call(world: World, value: Any, tmp: Path) -> None:
        if argument == "fn":
            af.tool(value)
        else:
            af.tool(documented, **{argument: value})

    return call


def read_with(name: str, argument: str) -> Call:
    def call(world: World, value: Any, tmp: Path) -> Any:
        index = "commit" if name in ("state_at", "commit_value_at") else "k"
        args: dict[str, Any] = {"source": world.store, "run_id": world.run_id, index: 0}
        if name == "commit_value_at":
            args["path"] = "history"
        args[argument] = value
        return getattr(af, name)(**args)

    return call


def tool_calls_with(argument: str) -> Call:
    def call(world: World, value: Any, tmp: Path) -> Any:
        args: dict[str, Any] = {"source": world.store, "run_id": world.run_id, argument: value}
        return af.tool_calls(**args)

    return call


def diff_with(name: str, argument: str) -> Call:
    def call(world: World, value: Any, tmp: Path) -> Any:
        args: dict[str, Any] = {
            "source_a": world.store,
            "run_a": world.run_id,
            "source_b": world.store,
            "run_b": world.run_id,
        }
        args[argument] = value
        return getattr(af, name)(**args)

    return call


def run_with(argument: str) -> Call:
    def call(world: World, value: Any, tmp: Path) -> None:
        with world.agent() as agent:
            args: dict[str, Any] = {"message": "hi", "continue_from": None}
            args[argument] = value
            agent.run_sync(args.pop("message"), **args)

    return call


def resume_with(argument: str) -> Call:
    """``resume_sync`` of a run paused on a consent, with ``argument`` wrong."""

    def call(world: World, value: Any, tmp: Path) -> None:
        needing = af.define_tool(
            name="echo", description="Echo.", execute=lambda a: a, needs={"credential": "svc"}
        )
        with af.Agent(
            provider=af.MockProvider(script()),
            model="m",
            tools=[needing],
            credentials=af.static_tokens({}, consent_url="https://consent.example/{service}"),
        ) as agent:
            paused = agent.run_sync("hi")
            args: dict[str, Any] = {"run": paused, "answer": None, argument: value}
            agent.resume_sync(**args)

    return call


def on_with(argument: str) -> Call:
    def call(world: World, value: Any, tmp: Path) -> None:
        with world.agent() as agent:
            args: dict[str, Any] = {"name": "*", "listener": print}
            args[argument] = value
            agent.on(args["name"], args["listener"])

    return call


def replay_with(argument: str, *, awaited: bool = False) -> Call:
    def call(world: World, value: Any, tmp: Path) -> Any:
        agent = world.agent()
        try:
            args: dict[str, Any] = {"agent": agent, "store": world.store, "run_id": world.run_id}
            args[argument] = value
            positional = (args.pop("agent"), args.pop("store"), args.pop("run_id"))
            if awaited:
                return asyncio.run(af.replay(*positional, **args))
            return af.replay_sync(*positional, **args)
        finally:
            agent.close()

    return call


def golden_with(argument: str) -> Call:
    def call(world: World, value: Any, tmp: Path) -> Any:
        args: dict[str, Any] = {"factory": world.agent, "golden_db": world.db, "run_id": None}
        args[argument] = value
        return assert_replays(args.pop("factory"), args.pop("golden_db"), **args)

    return call


def export_with(argument: str) -> Call:
    def call(world: World, value: Any, tmp: Path) -> Any:
        args: dict[str, Any] = {
            "store": world.store,
            "run_ids": [world.run_id],
            "out": tmp / "out.afp",
        }
        args[argument] = value
        return af.export_runs(**args)

    return call


def import_with(argument: str) -> Call:
    def call(world: World, value: Any, tmp: Path) -> Any:
        bundle = tmp / "in.afp"
        af.export_runs(world.store, [world.run_id], bundle)
        args: dict[str, Any] = {"bundle": af.BundleSource(bundle), "store": af.MemoryStore()}
        args[argument] = value
        return af.import_bundle(**args)

    return call


ALL = frozenset(WRONG)
BUNDLE = "verify/bundle.py (helper bundle)"
VERIFIER = "verify/verifier.py (helper verifier)"
TRANSFER = "exchange/transfer.py"
STRINGS = frozenset({"empty", MISSING})  # values that are strings

CASES: list[Case] = [
    # Agent(...): every keyword
    Case("Agent", "provider", agent_with("provider")),
    Case("Agent", "model", agent_with("model"), frozenset({MISSING})),
    Case("Agent", "system", agent_with("system"), STRINGS),
    Case("Agent", "tools", agent_with("tools")),
    Case("Agent", "store", agent_with("store"), frozenset({"None"})),
    Case("Agent", "durability", agent_with("durability"), frozenset({"None"})),
    Case(
        "Agent",
        "durability",
        lambda w, v, t: af.Agent(
            provider=af.MockProvider(["x"]), model="m", store=t / "d.db", durability=v
        ).close(),
        frozenset({"None"}),
        variant="path",
    ),
    Case("Agent", "signer", agent_with("signer"), frozenset({"None"})),
    Case("Agent", "disclosures", agent_with("disclosures"), frozenset({"None"})),
    Case("Agent", "disclosures", vault_with_store, frozenset({"None"}), variant="redacted"),
    Case("Agent", "name", agent_with("name"), frozenset({MISSING})),
    Case("Agent", "id", agent_with("id")),
    Case("Agent", "temperature", agent_with("temperature"), frozenset({"None", "float"})),
    Case("Agent", "max_tokens", agent_with("max_tokens"), frozenset({"None"})),
    Case("Agent", "max_iterations", agent_with("max_iterations")),
    Case("Agent", "react_mode", agent_with("react_mode")),
    Case("Agent", "tool_arg_validation", agent_with("tool_arg_validation")),
    Case("Agent", "commit_values", agent_with("commit_values")),
    Case("Agent", "record_receipt", agent_with("record_receipt"), frozenset({"True"})),
    Case("Agent", "redact", agent_with("redact"), frozenset({"None"})),
    Case("Agent.run_sync", "message", run_with("message"), STRINGS),
    Case("Agent.run_sync", "continue_from", run_with("continue_from"), frozenset({"None"})),
    Case("Agent.on", "name", on_with("name")),
    Case("Agent.on", "listener", on_with("listener")),
    Case("open_store", "store", kwargs_call(af.open_store, "store"), frozenset({"None"})),
    # tools and the scripted provider
    Case("define_tool", "name", tool_with("name")),
    Case("define_ontology", "spec", kwargs_call(af.define_ontology, "spec")),
    Case("define_tool", "description", tool_with("description"), frozenset({MISSING})),
    Case("define_tool", "execute", tool_with("execute")),
    Case("define_tool", "input_schema", tool_with("input_schema"), frozenset({"None"})),
    Case("define_tool", "needs", tool_with("needs"), frozenset({"None"})),
    Case("define_tool", "arguments_from", tool_with("arguments_from"), frozenset({"None"})),
    Case("define_tool", "result_columns", tool_with("result_columns"), frozenset({"None"})),
    Case("define_tool", "period", tool_with("period"), frozenset({"None"})),
    Case(
        "absent",
        "looked_for",
        kwargs_call(af.absent, "looked_for", checked=["a"]),
        frozenset({MISSING}),  # the sweep's path is a string: something looked for
    ),
    Case("absent", "checked", kwargs_call(af.absent, "checked", looked_for="x")),
    Case(
        "absent",
        "period",
        kwargs_call(af.absent, "period", looked_for="x", checked=["a"]),
        frozenset({"None"}),
    ),
    Case("described", "facts", kwargs_call(af.described, "facts", provenance=PROVENANCE)),
    Case("described", "provenance", kwargs_call(af.described, "provenance", facts=FACTS)),
    Case("period", "queried_from", kwargs_call(af.period, "queried_from", **SPAN, held="unknown")),
    Case("period", "held", kwargs_call(af.period, "held", **SPAN)),
    Case("tool", "fn", function_tool_with("fn"), frozenset({"None"})),  # None: a decorator
    Case("tool", "name", function_tool_with("name"), frozenset({"None"})),
    Case("tool", "description", function_tool_with("description"), frozenset({"None", MISSING})),
    Case("tool", "needs", function_tool_with("needs"), frozenset({"None"})),
    Case("tool", "ask_or_assume", function_tool_with("ask_or_assume"), frozenset({"None"})),
    Case("static_tokens", "tokens", kwargs_call(af.static_tokens, "tokens")),
    Case(
        "static_tokens",
        "consent_url",
        kwargs_call(af.static_tokens, "consent_url", tokens={}),
        frozenset({"None", MISSING}),
    ),
    Case("Agent.run_sync", "abandon", run_with("abandon")),
    Case("Agent.run_sync", "time", run_with("time"), frozenset({"None"})),
    Case("Agent.resume_sync", "run", resume_with("run")),
    Case("Agent.resume_sync", "answer", resume_with("answer"), frozenset({"None"})),
    Case("MockProvider", "replies", kwargs_call(af.MockProvider, "replies", replies=["x"])),
    Case(
        "MockProvider",
        "respond",
        kwargs_call(af.MockProvider, "respond", respond=lambda r: "x"),
    ),
    Case(
        "MockProvider",
        "record",
        kwargs_call(af.MockProvider, "record", replies=["x"]),
        frozenset({"True"}),
    ),
    Case("allow_model_requests", "flag", allowing, frozenset({"True"})),
    Case("reply", "text", kwargs_call(af.reply, "text"), STRINGS),
    Case("reply", "tool_calls", kwargs_call(af.reply, "tool_calls")),
    Case(
        "reply",
        "stop_reason",
        kwargs_call(af.reply, "stop_reason"),
        frozenset({"None"}) | STRINGS,
    ),
    Case("tool_call", "name", kwargs_call(af.tool_call, "name", name="t"), STRINGS),
    Case(
        "tool_call",
        "arguments",
        kwargs_call(af.tool_call, "arguments", name="t"),
        frozenset({"None", "list"}) | STRINGS,
    ),
    Case(
        "tool_call", "id", kwargs_call(af.tool_call, "id", name="t"), frozenset({"None"}) | STRINGS
    ),
    Case("RedactionPolicy", "keys", kwargs_call(af.RedactionPolicy, "keys")),
    *(
        Case("Ports", port, kwargs_call(af.Ports, port), derived=True)
        for port in ("clock", "run_ids", "salts", "model", "tools")
    ),
    # the adapters' options (a local base URL: no key needed, nothing is sent at construction)
    *(
        Case(
            "openai",
            option,
            kwargs_call(af.openai, option, base_url="http://127.0.0.1:9/v1"),
            derived=True,
        )
        for option in ("timeout", "max_retries", "max_retry_wait", "stream")
    ),
    *(
        Case("anthropic", option, kwargs_call(af.anthropic, option, api_key="k"), derived=True)
        for option in ("api_key", "base_url", "timeout", "max_retries", "stream")
    ),
    Case(
        "RedactionPolicy",
        "patterns",
        kwargs_call(af.RedactionPolicy, "patterns", keys=["ssn"]),
    ),
    # the read side
    *(
        Case(name, argument, read_with(name, argument), accepts)
        for name in ("state_at", "served_at", "receipt_at", "commit_value_at")
        for argument, accepts in (
            ("source", frozenset[str]()),
            ("run_id", frozenset[str]()),
            (
                "commit" if name in ("state_at", "commit_value_at") else "k",
                frozenset({"minus_one"})
                if name in ("state_at", "commit_value_at")
                else frozenset(),
            ),
        )
    ),
    Case("commit_value_at", "path", read_with("commit_value_at", "path"), frozenset({MISSING})),
    *(Case("tool_calls", argument, tool_calls_with(argument)) for argument in ("source", "run_id")),
    *(
        Case(name, argument, diff_with(name, argument))
        for name in ("diff_runs", "same_recording")
        for argument in ("source_a", "run_a", "run_b")
    ),
    Case("same_recording", "source_b", diff_with("same_recording", "source_b")),
    Case("diff_runs", "source_b", diff_with("diff_runs", "source_b"), frozenset({"None"})),
    Case("diff_runs", "limit", diff_with("diff_runs", "limit"), frozenset({"None"})),
    *(
        Case(name, argument, replay_with(argument, awaited=name == "replay"), accepts)
        for name in ("replay", "replay_sync")
        for argument, accepts in (
            ("agent", frozenset[str]()),
            ("store", frozenset[str]()),
            ("run_id", frozenset[str]()),
            ("until", frozenset({"None"})),
            ("disclosures", frozenset({"None"})),
        )
    ),
    Case("assert_replays", "factory", golden_with("factory")),
    Case("assert_replays", "golden_db", golden_with("golden_db")),
    Case("assert_replays", "run_id", golden_with("run_id"), frozenset({"None"})),
    Case("assert_replays", "disclosures", golden_with("disclosures"), frozenset({"None"})),
    # other layers' entry points (their owners make them refuse)
    Case("SqliteStore", "path", kwargs_call(af.SqliteStore, "path")),
    Case(
        "SqliteStore",
        "timeout",
        lambda w, v, t: closing(af.SqliteStore(t / "t.db", timeout=v)),
        frozenset({"float"}),
    ),
    Case(
        "SqliteStore",
        "durability",
        lambda w, v, t: closing(af.SqliteStore(t / "s.db", durability=v)),
    ),
    Case(
        "SqliteStore",
        "readonly",
        lambda w, v, t: closing(af.SqliteStore(w.db, readonly=v)),
        frozenset({"True"}),
    ),
    Case("DisclosureVault", "path", kwargs_call(af.DisclosureVault, "path")),
    Case("FileArtifacts", "directory", kwargs_call(af.FileArtifacts, "directory")),
    Case("SqliteArtifacts", "file", kwargs_call(af.SqliteArtifacts, "file")),
    Case(
        "MemoryArtifacts",
        "retention",
        kwargs_call(af.MemoryArtifacts, "retention"),
        frozenset({"None"}),
    ),
    *(
        Case("Retention", bound, kwargs_call(af.Retention, bound), frozenset({"None"}))
        for bound in ("ttl_ms", "max_count", "max_bytes")
    ),
    *(
        Case("PostgresStore", argument, postgres_call(af.PostgresStore, argument), accepts)
        for argument, accepts in (
            ("url", frozenset[str]()),
            ("durability", frozenset({"None"})),
            ("readonly", frozenset({"True"})),
            ("pool_size", frozenset[str]()),
            ("timeout", frozenset({"float"})),
        )
    ),
    *(
        Case("PostgresVault", argument, postgres_call(af.PostgresVault, argument), accepts)
        for argument, accepts in (
            ("url", frozenset[str]()),
            ("master_key", frozenset[str]()),
            ("readonly", frozenset({"True"})),
            ("create", frozenset({"True"})),
            ("pool_size", frozenset[str]()),
            ("timeout", frozenset({"float"})),
        )
    ),
    Case(
        "BundleSource",
        "path",
        kwargs_call(af.BundleSource, "path"),
    ),
    Case(
        "Verifier",
        "source",
        lambda w, v, t: af.Verifier(v).verify(w.run_id),
    ),
    Case("Verifier", "cache_size", lambda w, v, t: af.Verifier(w.store, cache_size=v)),
    Case(
        "Verifier",
        "trusted_keys",
        lambda w, v, t: af.Verifier(w.store, trusted_keys=v),
        frozenset({"None"}),
    ),
    Case(
        "verify_run",
        "source",
        lambda w, v, t: af.verify_run(v, w.run_id),
    ),
    Case(
        "verify_run",
        "run_id",
        lambda w, v, t: af.verify_run(w.store, v),
    ),
    Case(
        "build_request",
        "state",
        lambda w, v, t: af.build_request(v),
    ),
    *(
        Case(name, argument, call(argument))
        for name, call, arguments in (
            ("export_runs", export_with, ("store", "run_ids")),
            ("import_bundle", import_with, ("bundle", "store")),
        )
        for argument in arguments
    ),
    Case("export_runs", "out", export_with("out")),
]

#: Options a feature declares that no case above lists: swept as derived cases (adding an
#: option touches its feature module, its test and its docs row, not this file).
_LISTED = {case.argument for case in CASES if case.entry == "Agent"}
CASES += [
    Case("Agent", name, agent_with(name), derived=True)
    for name in sorted(set(registry.option_specs()) - _LISTED)
]

#: Public callables with no argument to sweep.
NO_ARGUMENTS = frozenset(
    {"DescriptionClassifier", "MemoryStore", "MemoryVault", "conversation_redaction"}
)
#: Contracts a backend subclasses (abstract: never called themselves).
CONTRACTS = frozenset({"Vault", "ArtifactStore"})
#: Plain records: built by the library or an adapter; their fields are checked where they
#: enter the runtime (a malformed LLMResponse is the provider's ProviderCallError). A
#: TypedDict (AgentOptions) is a static type: its values are checked by Agent's sweep above.
RECORDS = frozenset(
    {
        "Artifact",
        "AuthorizationRequired",
        "Credential",
        "CredentialRequest",
        "Issued",
        "Pending",
        "Presented",
        "JudgeRequest",
        "AgentEvent",
        "AgentOptions",
        "ArgsInvalid",
        "Decision",
        "IterationEnd",
        "IterationStart",
        "LLMEnd",
        "LLMResponse",
        "LLMStart",
        "LLMToken",
        "Message",
        "Outcome",
        "PermissionRequest",
        "ProvenValue",
        "StageAdded",
        "EdgeAdded",
        "GroupAdded",
        "GroupMetadata",
        "Provider",
        "ReplayResult",
        "Request",
        "Response",
        "RunDiff",
        "Ontology",
        "RunResult",
        "RunVerification",
        "StoppedEarly",
        "SystemPiece",
        "Tool",
        "ToolCall",
        "ToolCallRecord",
        "ToolContext",
        "ToolEnd",
        "ToolSchema",
        "ToolStart",
        "TurnEnd",
        "TurnStart",
        "Usage",
        "WireAttempt",
        "WireExchange",
        "WireRecord",
    }
)


def test_every_public_callable_is_classified() -> None:
    swept = {case.entry for case in CASES}
    for name in af.__all__:
        value = getattr(af, name)
        if not callable(value):
            continue
        kinds = [
            name in swept,
            name in NO_ARGUMENTS,
            name in RECORDS,
            name in CONTRACTS and inspect.isabstract(value),
            inspect.isclass(value) and issubclass(value, BaseException),
        ]
        assert kinds.count(True) == 1, f"{name}: classify it in tests/unit/test_api_errors.py"
        if name in RECORDS:
            assert (
                dataclasses.is_dataclass(value)
                or typing.is_typeddict(value)
                or issubclass(value, enum.Enum)
                or getattr(value, "_is_protocol", False)
            ), name


def test_every_keyword_of_the_agent_is_swept() -> None:
    swept = {case.argument for case in CASES if case.entry == "Agent"}
    signature = inspect.signature(af.Agent)
    keywords = {name for name, p in signature.parameters.items() if p.kind is p.KEYWORD_ONLY}
    assert keywords | set(registry.option_specs()) == swept


def _case_params() -> Iterator[Any]:
    for case in CASES:
        for value_id in WRONG:
            marks = []
            if case.owner is not None and value_id in case.pending:
                marks.append(pytest.mark.xfail(strict=True, reason=f"to refuse in {case.owner}"))
            yield pytest.param(case, value_id, id=f"{case.id}-{value_id}", marks=marks)


@pytest.mark.parametrize(("case", "value_id"), list(_case_params()))
def test_a_wrong_argument_is_refused_naming_it(
    case: Case, value_id: str, world: World, tmp_path: Path
) -> None:
    value = resolve(value_id, tmp_path)
    if case.derived:
        try:
            case.call(world, value, tmp_path)
        except af.AgentFootprintError as exc:
            assert case.argument in str(exc), exc
        return
    if value_id in case.accepts:
        case.call(world, value, tmp_path)
        return
    with pytest.raises(af.AgentFootprintError) as caught:
        case.call(world, value, tmp_path)
    error = caught.value
    # named by its name, or (a file that cannot be used) by the file it names
    named_file = (
        isinstance(error, af.FileError) and bool(error.path) and str(error.path) in str(error)
    )
    assert case.argument in str(error) or named_file, error
    if value_id == MISSING and case.argument in ("source", "store", "path", "golden_db"):
        assert isinstance(caught.value, af.UsageError)  # FileError for the file


# -- arguments with a domain -----------------------------------------------------------------


@settings(max_examples=scaled(30), deadline=None)
@given(st.integers(min_value=-(2**63), max_value=2**63))
@example(0)
@example(1)
@example(50)
@example(51)
def test_max_iterations_domain(value: int) -> None:
    options: dict[str, Any] = {"provider": af.MockProvider(["x"]), "model": "m"}
    if 1 <= value <= 50:
        assert af.Agent(**options, max_iterations=value).config.max_iterations == value
        return
    with pytest.raises(af.UsageError) as caught:
        af.Agent(**options, max_iterations=value)
    assert caught.value.option == "max_iterations"


@settings(max_examples=scaled(30), deadline=None)
@given(st.floats(allow_nan=True, allow_infinity=True) | st.integers(-5, 5))
@example(-0.0)
@example(2)
@example(2.0000000000000004)
@example(float("inf"))
@example(float("nan"))
def test_temperature_domain(value: float) -> None:
    options: dict[str, Any] = {"provider": af.MockProvider(["x"]), "model": "m"}
    if value == value and 0 <= value <= 2:
        assert af.Agent(**options, temperature=value).config.temperature == value
        return
    with pytest.raises(af.UsageError) as caught:
        af.Agent(**options, temperature=value)
    assert caught.value.option == "temperature"


@settings(max_examples=scaled(30), deadline=None)
@given(st.integers(min_value=-(2**70), max_value=2**70))
@example(0)
@example(1)
@example(2**31 - 1)
@example(2**31)
@example(2**53)
@example(10**30)
def test_max_tokens_domain(value: int) -> None:
    options: dict[str, Any] = {"provider": af.MockProvider(["x"]), "model": "m"}
    if 1 <= value <= 2**31 - 1:
        assert af.Agent(**options, max_tokens=value).config.max_tokens == value
        return
    with pytest.raises(af.UsageError) as caught:
        af.Agent(**options, max_tokens=value)
    assert caught.value.option == "max_tokens"


@settings(max_examples=scaled(40), deadline=None)
@given(k=st.integers(min_value=-(2**63), max_value=2**63))
@example(k=-1)
@example(k=0)
@example(k=1)
@example(k=2)
def test_call_index_domain(world: World, k: int) -> None:
    for read in (af.served_at, af.receipt_at):
        if 0 <= k < world.calls:
            read(world.store, world.run_id, k)
            continue
        with pytest.raises(af.UsageError) as caught:
            read(world.store, world.run_id, k)
        assert caught.value.option == "k" and "k" in str(caught.value)


@settings(max_examples=scaled(40), deadline=None)
@given(commit=st.integers(min_value=-(2**63), max_value=2**63))
@example(commit=-2)
@example(commit=-1)
@example(commit=0)
def test_commit_index_domain(world: World, commit: int) -> None:
    if -1 <= commit < world.commits:
        assert isinstance(af.state_at(world.store, world.run_id, commit), dict)
        return
    with pytest.raises(af.UsageError) as caught:
        af.state_at(world.store, world.run_id, commit)
    assert caught.value.option == "commit"


@settings(max_examples=scaled(20), deadline=None)
@given(until=st.integers(max_value=-1) | st.booleans())
def test_replay_until_domain(world: World, until: int) -> None:
    with world.agent() as agent, pytest.raises(af.UsageError) as caught:
        af.replay_sync(agent, world.store, world.run_id, until=until)
    assert caught.value.option == "until"


# -- paths -------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["state_at", "served_at", "receipt_at"])
@pytest.mark.parametrize("suffix", ["x.db", "x.afp"])
def test_a_missing_log_path_is_a_file_error_naming_source(
    name: str, suffix: str, tmp_path: Path
) -> None:
    with pytest.raises(af.FileError) as caught:
        getattr(af, name)(tmp_path / suffix, "r", 0)
    assert caught.value.option == "source" and "source" in str(caught.value)
    assert caught.value.path == str(tmp_path / suffix)


def test_a_folder_as_the_log_is_a_file_error(tmp_path: Path) -> None:
    with pytest.raises(af.FileError, match="folder"):
        af.state_at(tmp_path, "r", 0)


def test_a_path_is_read_in_place_read_only(world: World) -> None:
    """A log given by path is opened read-only: same answers as the store, the file unchanged
    and nothing created beside it."""
    before = world.db.read_bytes()
    listing = sorted(p.name for p in world.folder.iterdir())
    with af.SqliteStore(world.db, readonly=True) as store:
        run_id = store.run_ids()[0]
        expected = af.served_at(store, run_id, 1)
    assert af.served_at(world.db, run_id, 1) == expected
    assert af.served_at(str(world.db), run_id, 1) == expected
    assert af.state_at(world.db, run_id, -1) == {}
    assert af.diff_runs(world.db, run_id, world.db, run_id).identical
    assert af.same_recording(world.db, run_id, world.db, run_id)
    assert world.db.read_bytes() == before
    assert sorted(p.name for p in world.folder.iterdir()) == listing


def test_a_replay_reads_a_log_by_path(world: World) -> None:
    with af.SqliteStore(world.db, readonly=True) as store:
        run_id = store.run_ids()[0]
    with world.agent() as agent:
        replayed = af.replay_sync(agent, world.db, run_id)
    assert replayed.calls_checked == 2


def test_a_file_that_is_not_a_log_is_named(tmp_path: Path) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    with pytest.raises(af.NotALogError) as caught:
        af.state_at(text, "r", 0)
    assert caught.value.option == "source"
    assert text.read_text() == "hello"


def test_an_unknown_run_names_its_argument(world: World) -> None:
    with pytest.raises(af.RunNotFoundError, match="run_id: "):
        af.served_at(world.store, "no-such-run", 0)
    with pytest.raises(af.RunNotFoundError, match="run_b: "):
        af.diff_runs(world.store, world.run_id, world.store, "no-such-run")


def test_a_message_too_large_to_record_names_message(
    monkeypatch: pytest.MonkeyPatch, world: World
) -> None:
    monkeypatch.setattr(limits, "MAX_BODY_BYTES", limits.MAX_ENVELOPE_BYTES + 1000)
    with world.agent() as agent:
        with pytest.raises(af.UsageError) as caught:
            agent.run_sync("x" * 1000)
        assert caught.value.option == "message" and "too large" in str(caught.value)
        assert agent.store.runs() == [] and agent.store.run_ids() == []  # nothing written
        assert agent.run_sync("y" * 300).answer == "done"  # 6 x 300 > 1000, but 302 fits


def test_golden_logs_are_read_in_place_read_only(world: World) -> None:
    before = world.db.read_bytes()
    listing = sorted(p.name for p in world.folder.iterdir())
    results = assert_replays(world.agent, world.db)
    assert [r.calls_checked for r in results] == [2]
    assert world.db.read_bytes() == before
    assert sorted(p.name for p in world.folder.iterdir()) == listing
