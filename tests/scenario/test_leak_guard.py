"""A planted 40-character token and a consent URL, returned by tools, raised in a tool's
error, echoed by the provider's error and quoted by the model: in no byte of the database, its
``-wal``, the (redacted) export, the vault, the listeners' payloads, the captured logs or the
CLI's output, in any encoding the guard knows; the same sweep with the guard switched off
finds them (so the sweep can fail)."""

from __future__ import annotations

import base64
import binascii
import logging
import urllib.parse
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

import agentfootprint as af
from agentfootprint.cli import main
from agentfootprint.logformat.literal_forms import LiteralMatcher
from agentfootprint.runtime.leak_guard import WITHHELD
from agentfootprint.testing.leaks import guard_switched_off

TOKEN = "ghs_" + "Qx7Lp2Vd9Kz4" * 3
URL = "https://consent.example/oauth?state=Rj38-ZZ19&client=agent"
assert len(TOKEN) == 40
SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}}


class Service:
    def get_credential(self, request: af.CredentialRequest) -> Any:
        if request.service == "github":
            return af.Issued(token=TOKEN)
        return af.AuthorizationRequired(authorization_url=URL)


class EchoingProvider:
    """Scripted replies, then an error that echoes the token, as a proxy might."""

    name = "mock"

    def __init__(self, replies: list[Any]) -> None:
        self.mock = af.MockProvider(replies)
        self.left = len(replies)

    async def complete(self, request: Any) -> Any:
        if self.left == 0:
            raise af.ProviderError(f"401 from upstream: header 'Authorization: Bearer {TOKEN}'")
        self.left -= 1
        return await self.mock.complete(request)


def tools() -> list[af.Tool]:
    def search(args: Any, ctx: af.ToolContext) -> Any:
        return {"hits": 2, "debug": {"auth": ctx.credential.headers()}}  # the token, as JSON

    def explode(args: Any, ctx: af.ToolContext) -> Any:
        encoded = base64.b64encode(ctx.credential.token.encode()).decode()
        raise RuntimeError(f"request failed with token {encoded}")  # base64 in the message

    def blurt(args: Any) -> str:  # knows both from somewhere it should not
        return f"see {urllib.parse.quote(URL, safe='')} / {binascii.hexlify(TOKEN.encode())!r}"

    return [
        af.define_tool(
            name="search",
            description="Search.",
            input_schema=SCHEMA,
            execute=search,
            needs={"credential": "github"},
        ),
        af.define_tool(
            name="explode",
            description="Fail.",
            input_schema=SCHEMA,
            execute=explode,
            needs={"credential": "github"},
        ),
        af.define_tool(
            name="calendar",
            description="Calendar.",
            input_schema=SCHEMA,
            execute=lambda a: "never",
            needs={"credential": "calendar"},
        ),
        af.define_tool(name="blurt", description="Blurt.", input_schema=SCHEMA, execute=blurt),
    ]


def script() -> list[Any]:
    def asks(*names: str) -> Any:
        return af.reply(tool_calls=[af.tool_call(n, {"q": "x"}, id=f"{n}-1") for n in names])

    return [
        asks("search", "explode"),
        asks("calendar"),
        asks("blurt"),
        af.reply(
            f"The token is {TOKEN}; consent at {URL}.",
            tool_calls=[af.tool_call("search", {"q": TOKEN}, id="search-2")],
        ),
    ]


def sweep(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> dict[str, list[Any]]:
    """Record the conversation, then search everything it left for either secret."""
    db, vault = tmp_path / "agent.db", tmp_path / "vault.db"
    heard: list[bytes] = []
    agent = af.Agent(
        provider=EchoingProvider(script()),
        model="m",
        tools=tools(),
        credentials=Service(),
        on_authorization_required="tell-model",
        store=str(db),
        redact=af.RedactionPolicy(keys=["email"]),
        disclosures=str(vault),
    )
    agent.on("*", lambda event: heard.append(orjson.dumps(event.payload(), default=str)))
    with caplog.at_level(logging.DEBUG), pytest.raises(af.RunError) as failed:
        agent.run_sync("look it up")
    assert isinstance(failed.value.__cause__, af.ProviderError)
    (run_id,) = agent.store.run_ids()
    assert af.verify_run(agent.store, run_id).outcome is af.Outcome.VALID_UNSIGNED
    agent.close()
    bundle = tmp_path / "run.afb"
    runner = CliRunner()
    exported = runner.invoke(main, ["export", str(db), "--run", run_id, "--out", str(bundle)])
    assert exported.exit_code == 0, exported.output
    shown = "".join(
        runner.invoke(main, args).output
        for args in (
            ["show", str(db), run_id],
            ["verify", str(db)],
            ["verify", str(bundle)],
            ["runs", str(db)],
            ["tool-calls", str(db), run_id],
        )
    )
    matcher = LiteralMatcher([TOKEN, URL])
    places: dict[str, bytes] = {
        "database": db.read_bytes(),
        "wal": Path(f"{db}-wal").read_bytes() if Path(f"{db}-wal").exists() else b"",
        "export": bundle.read_bytes(),
        "vault": vault.read_bytes() if vault.exists() else b"",
        "listeners": b"\n".join(heard),
        "logs": caplog.text.encode(),
        "cli": shown.encode(),
    }
    return {place: matcher.find(data) for place, data in places.items()}


def test_the_guard_keeps_both_out_of_every_byte(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    found = sweep(tmp_path, caplog)
    assert found == {place: [] for place in found}


def test_with_the_guard_off_the_sweep_finds_them(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with guard_switched_off():
        found = sweep(tmp_path, caplog)
    assert found["database"] and found["export"] and found["listeners"]
    literals = {match.literal for match in found["database"]}
    assert literals == {0, 1}  # both the token and the URL


def test_what_the_guard_withheld_is_recorded_where(tmp_path: Path) -> None:
    agent = af.Agent(
        provider=EchoingProvider(script()),
        model="m",
        tools=tools(),
        credentials=Service(),
        on_authorization_required="tell-model",
    )
    with pytest.raises(af.RunError):
        agent.run_sync("look it up")
    (run_id,) = agent.store.run_ids()
    rows = [orjson.loads(bytes(e.body)) for e in agent.store.read(run_id) if e.type == "event"]
    blocked = [r["payload"] for r in rows if r["name"] == "agentfootprint.credential.leak_blocked"]
    assert {"where": "tool_result", "tool": "search", "tool_call_id": "search-1"} in blocked
    assert {"where": "tool_result", "tool": "explode", "tool_call_id": "explode-1"} in blocked
    assert {"where": "tool_result", "tool": "blurt", "tool_call_id": "blurt-1"} in blocked
    assert {"where": "last_response"} in blocked  # the model's quote, withheld in place
    quoted = [
        orjson.loads(bytes(e.body))["value"]
        for e in agent.store.read(run_id)
        if e.type == "write" and b'"path":"last_response"' in bytes(e.body)
    ][-1]
    assert quoted["content"] == f"The token is {WITHHELD}; consent at {WITHHELD}."
    assert quoted["tool_calls"][0]["arguments"] == {"q": WITHHELD}


def test_a_run_whose_secrets_were_withheld_replays_byte_for_byte() -> None:
    """What the guard withheld is recorded withheld: the replay (which is handed no secret)
    serves the same requests and records the same rows (the leak_blocked rows aside: what
    the live run blocked)."""
    replies = [
        af.reply(tool_calls=[af.tool_call("search", {"q": "x"}, id="s1")]),
        f"The token is {TOKEN}.",
    ]
    agent = af.Agent(
        provider=af.MockProvider(replies), model="m", tools=tools(), credentials=Service()
    )
    result = agent.run_sync("look it up")
    assert result.answer == f"The token is {WITHHELD}."
    twin = af.Agent(provider=af.MockProvider([]), model="m", tools=tools(), credentials=Service())
    replayed = af.replay_sync(twin, agent.store, result.run_id)
    assert replayed.result.answer == result.answer and replayed.calls_checked == 2
