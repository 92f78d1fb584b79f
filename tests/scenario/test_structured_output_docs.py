"""docs/structured-output.md: the same tool-calling agent with a typed answer, in
agentfootprint and in pydantic-ai, each run as written against the loopback fake OpenAI
server; ours in fewer lines, and its run verifies and replays byte for byte."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

import agentfootprint as af
from agentfootprint.testing.fake_openai import FakeOpenAI, reply, tool_reply

pytestmark = pytest.mark.allow_model_requests

DOCS = Path(__file__).resolve().parents[2] / "docs" / "structured-output.md"
ANSWER = {"city": "Paris", "celsius": 21}
PRINTED = "Forecast(city='Paris', celsius=21)\n"
WIRE = "agentfootprint.wire.exchange"


def snippet(marker: str) -> str:
    blocks = re.findall(r"```python\n(.*?)```", DOCS.read_text(encoding="utf-8"), re.S)
    (found,) = [b for b in blocks if marker in b]
    return str(found)


OURS = snippet("import agentfootprint as af")
THEIRS = snippet("from pydantic_ai import Agent")


def lines(code: str) -> int:
    """Lines of code: neither blank nor a comment."""
    return sum(1 for line in code.splitlines() if line.strip() and not line.strip().startswith("#"))


def recorded(store: Any, run_id: str) -> list[tuple[str, bytes]]:
    """A run's rows (type, body) but ``run.open`` and the live-only wire exchange events."""
    return [
        (row.type, bytes(row.body))
        for row in store.read(run_id)
        if row.type != "run.open"
        and not (row.type == "event" and json.loads(row.body)["name"] == WIRE)
    ]


def run(code: str, base_url: str) -> dict[str, Any]:
    """Run ``code`` as a script would be (none of this module's ``__future__`` imports)."""
    namespace: dict[str, Any] = {"BASE_URL": base_url, "__name__": "__main__"}
    exec(compile(code, str(DOCS), "exec", dont_inherit=True), namespace)
    return namespace


def test_ours_runs_as_written_verifies_and_replays(capsys: pytest.CaptureFixture[str]) -> None:
    asks = tool_reply(("call_1", "get_weather", {"city": "Paris"}))
    with FakeOpenAI([asks, reply(json.dumps(ANSWER))]) as server:
        ran = run(OURS, server.url)
        sent = [json.loads(r.body) for r in server.requests]
    assert capsys.readouterr().out == PRINTED
    agent, result = ran["agent"], ran["result"]
    assert result.output == ran["Forecast"](**ANSWER) and result.calls == 2
    assert sent[0]["response_format"]["json_schema"]["strict"] is True
    assert sent[1]["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": "Paris: 21C, sunny",
    }
    checked = af.verify_run(agent.store, result.run_id)
    assert checked.outcome.name == "VALID_UNSIGNED"
    twin = af.Agent(
        provider=af.MockProvider([]),
        model="gpt-4o-mini",
        tools=[ran["get_weather"]],
        output_type=ran["Forecast"],
    )
    replayed = af.replay_sync(twin, agent.store, result.run_id)
    assert replayed.calls_checked == 2 and replayed.result.output == result.output
    # byte for byte, but for what only a live run makes: the HTTP exchange's digests
    assert recorded(agent.store, result.run_id) == recorded(twin.store, replayed.result.run_id)
    agent.close()


def test_pydantic_ais_runs_as_written(capsys: pytest.CaptureFixture[str]) -> None:
    script = [
        tool_reply(("call_1", "get_weather", {"city": "Paris"})),
        tool_reply(("call_2", "final_result", ANSWER)),  # its default: a tool for the answer
    ]
    with FakeOpenAI(script) as server:
        ran = run(THEIRS, server.url)
        sent = [json.loads(r.body) for r in server.requests]
    assert capsys.readouterr().out == PRINTED
    assert ran["result"].output == ran["Forecast"](**ANSWER)
    assert [t["function"]["name"] for t in sent[0]["tools"]] == ["get_weather", "final_result"]
    assert sent[1]["messages"][-1]["content"] == "Paris: 21C, sunny"


def test_ours_is_fewer_lines_and_the_page_says_how_many() -> None:
    ours, theirs = lines(OURS), lines(THEIRS)
    assert ours < theirs
    assert f"{ours} here, {theirs} for pydantic-ai" in DOCS.read_text(encoding="utf-8")
