"""The command line with a real adapter: `demo --base-url` against a local OpenAI-compatible
server, and `served --wire` rebuilding the exact HTTP body from the log."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import agentfootprint as af
from agentfootprint.cli import main
from agentfootprint.testing.fake_openai import FakeOpenAI, reply, tool_reply

pytestmark = pytest.mark.allow_model_requests


def _demo_script() -> list[object]:
    return [
        tool_reply(("c1", "get_weather", {"city": "Lisbon"})),
        reply("Sunny in Lisbon."),
        reply("About 292 EUR."),
    ]


def test_demo_runs_against_a_local_server_and_verifies(tmp_path: Path) -> None:
    db = tmp_path / "demo.db"
    with FakeOpenAI(_demo_script()) as server:
        result = CliRunner().invoke(
            main, ["demo", "--db", str(db), "--base-url", server.url, "--model", "local-model"]
        )
        assert result.exit_code == 0, result.output
        assert result.output.count("\nVALID ") == 2  # sealed by the demo's own key
        assert len(server.requests) == 3
        assert all(json.loads(r.body)["model"] == "local-model" for r in server.requests)
    with af.SqliteStore(db, readonly=True) as store:
        run_ids = store.run_ids()
        opened = json.loads(bytes(next(iter(store.read(run_ids[0]))).body))
    assert opened["provider_info"]["adapter"] == "openai-chat"


def test_demo_base_url_and_model_go_together(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["demo", "--db", str(tmp_path / "d.db"), "--model", "m"])
    assert result.exit_code == 2 and "go together" in result.output


def test_demo_against_nothing_listening_says_so(tmp_path: Path) -> None:
    from agentfootprint.testing.fake_openai import dead_url

    result = CliRunner().invoke(
        main, ["demo", "--db", str(tmp_path / "d.db"), "--base-url", dead_url(), "--model", "m"]
    )
    assert result.exit_code == 2
    assert "running at" in result.output and "Traceback" not in result.output
    assert "no running event loop" not in result.output  # the network error, not a probe's


def test_served_wire_rebuilds_the_bytes_sent_and_matches_their_digest(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    with FakeOpenAI([reply("Hi there.")]) as server:
        agent = af.Agent(
            provider=af.openai(base_url=server.url), model="m", system="Be brief.", store=db
        )
        run = agent.run_sync("hello")
        agent.close()
        sent = server.requests[0].body
    result = CliRunner().invoke(main, ["served", str(db), run.run_id, "0", "--wire"])
    assert result.exit_code == 0, result.output
    shown = json.loads(result.output)
    assert shown["matches"] is True and shown["versions_differ"] == {}
    assert shown["body"] == json.loads(sent)
    assert shown["digest"] == shown["recorded"][0]


def test_served_wire_of_a_mock_run_says_there_is_no_wire(tmp_path: Path) -> None:
    db = tmp_path / "mock.db"
    agent = af.Agent(provider=af.MockProvider(["x"]), model="m", store=db)
    run = agent.run_sync("hi")
    agent.close()
    result = CliRunner().invoke(main, ["served", str(db), run.run_id, "0", "--wire"])
    assert result.exit_code == 2 and "not recorded through an HTTP adapter" in result.output


def test_served_wire_of_a_redacted_run_opens_with_the_vault(tmp_path: Path) -> None:
    db, vault = tmp_path / "runs.db", tmp_path / "vault.db"
    with FakeOpenAI([reply("Noted.")]) as server:
        agent = af.Agent(
            provider=af.openai(base_url=server.url),
            model="m",
            store=db,
            redact=af.conversation_redaction(),
            disclosures=vault,
        )
        run = agent.run_sync("my card is 4111-1111")
        agent.close()
    without = CliRunner().invoke(main, ["served", str(db), run.run_id, "0", "--wire"])
    assert without.exit_code == 2 and "--disclosures VAULT" in without.output
    result = CliRunner().invoke(
        main, ["served", str(db), run.run_id, "0", "--wire", "--disclosures", str(vault)]
    )
    assert result.exit_code == 0, result.output
    shown = json.loads(result.output)
    assert shown["matches"] is True and shown["body"] is None
    assert "4111" not in result.output
