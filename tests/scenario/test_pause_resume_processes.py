"""A conversation that pauses in one process, is killed with SIGKILL, and is resumed from the
database alone in another: the chain verifies sealed, and replays with no model, tool or
credential-service call (docs/pauses.md).

The first process records a turn whose tool needs a consent, prints the pending question and
the consent URL, and waits; the test kills it with SIGKILL. A second process, which shares
nothing with the first but the database file and the key file, resumes the run with a
credential service that now issues a token: the waiting tool runs once, with the token. The
test then verifies the whole file under the pinned key, checks that neither the token nor the
URL is in any byte of the database or its ``-wal``, lists the open questions before and after,
and replays both runs with a model that has no replies, a tool and a credential service that
raise when called.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import agentfootprint as af
from agentfootprint.cli import main
from agentfootprint.exchange.transfer import export_runs
from agentfootprint.testing.seals import SIGNER
from agentfootprint.verify.bundle import BundleSource

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs SIGKILL (POSIX)")

TOKEN = "tok_" + "9fQ2" * 9  # 40 characters
URL = "https://consent.example/authorize?session=Zq81-0042"
ORIGIN = "example.com/agent-log"

COMMON = textwrap.dedent(
    """
    import sys

    import agentfootprint as af
    from agentfootprint.testing.seals import SIGNER

    ran = []


    def search(args, ctx):
        ran.append(ctx.credential.token)
        print("TOOL-RAN", flush=True)
        return {"hits": 3}


    def agent(service, replies):
        tool = af.define_tool(
            name="search",
            description="Search the repositories.",
            input_schema={"type": "object", "properties": {"q": {"type": "string"}}},
            execute=search,
            needs={"credential": "github", "scopes": ["repo:read"]},
        )
        return af.Agent(
            provider=af.MockProvider(replies),
            model="m",
            tools=[tool],
            credentials=service,
            signer=SIGNER,
            store=sys.argv[1],
        )
    """
)

PAUSING = COMMON + textwrap.dedent(
    """
    import json
    import time

    replies = [af.reply(tool_calls=[af.tool_call("search", {"q": "auth"}, id="c1")]), "never"]
    service = af.static_tokens({}, consent_url=sys.argv[2])
    result = agent(service, replies).run_sync("find the auth code")
    print(json.dumps({
        "run": result.run_id,
        "outcome": result.outcome,
        "request": result.pending.request_id,
        "url": result.pending.authorization_url,
    }), flush=True)
    time.sleep(600)  # killed here, holding the agent and its store open
    """
)

RESUMING = COMMON + textwrap.dedent(
    """
    import json

    service = af.static_tokens({"github": sys.argv[3]})
    result = agent(service, ["found it in auth.py"]).resume_sync(sys.argv[2])
    print(json.dumps({
        "run": result.run_id, "outcome": result.outcome, "answer": result.answer, "ran": ran,
    }), flush=True)
    """
)


def child(script: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", script, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONHASHSEED": "0"},
    )


class Refusing:
    def get_credential(self, request: Any) -> Any:
        raise AssertionError("the credential service was asked")


def refusing_tool(_: Any) -> Any:
    raise AssertionError("the tool was run")


def test_pause_sigkill_resume_in_another_process_then_verify_and_replay(tmp_path: Path) -> None:
    """...and a checkpoint of the log's sealed runs covers the paused run and its resume."""
    db = tmp_path / "agent.db"
    first = child(PAUSING, str(db), URL)
    assert first.stdout is not None
    paused = json.loads(first.stdout.readline())
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=60)
    assert first.returncode == -signal.SIGKILL
    assert paused["outcome"] == "paused" and paused["url"] == URL

    listed = CliRunner().invoke(main, ["runs", str(db), "--pending"])
    assert listed.exit_code == 0 and paused["run"] in listed.output
    assert paused["request"] in listed.output and URL not in listed.output

    second = child(RESUMING, str(db), paused["run"], TOKEN)
    out, err = second.communicate(timeout=120)
    assert second.returncode == 0, err
    resumed = json.loads(out.strip().splitlines()[-1])
    assert resumed["outcome"] == "answered" and resumed["answer"] == "found it in auth.py"
    assert resumed["ran"] == [TOKEN]  # the waiting tool ran once, with the credential

    with af.SqliteStore(db, readonly=True) as store:
        verdicts = dict(af.Verifier(store, trusted_keys=[SIGNER.public_key]).verify_all())
        assert set(verdicts) == {paused["run"], resumed["run"]}
        for verdict in verdicts.values():
            assert isinstance(verdict, af.RunVerification)
            assert verdict.outcome is af.Outcome.VALID
        opened = json.loads(bytes(next(store.read(resumed["run"])).body))
        assert opened["resumes"] == paused["request"]
        assert opened["parent"]["run_id"] == paused["run"]
    for path in (db, Path(f"{db}-wal")):
        if path.exists():
            data = path.read_bytes()
            assert TOKEN.encode() not in data and URL.encode() not in data
    listed = CliRunner().invoke(main, ["runs", str(db), "--pending"])
    assert listed.exit_code == 0 and "no open questions" in listed.output

    # a checkpoint of the log's sealed runs covers both, and a bundle of the resume (its
    # paused parent along) proves each is a leaf of it
    bundle = tmp_path / "chain.afp"
    with af.SqliteStore(db, readonly=True) as store:
        manifest = export_runs(store, [resumed["run"]], bundle, signer=SIGNER, origin=ORIGIN)
    leaves = {item["run_id"]: item["inclusion"]["leaf"] for item in manifest["runs"]}
    assert leaves == {paused["run"]: 0, resumed["run"]: 1}
    with BundleSource(bundle) as source:
        for run_id, verdict in af.Verifier(source, trusted_keys=[SIGNER.public]).verify_all():
            assert isinstance(verdict, af.RunVerification), (run_id, verdict)
            assert verdict.outcome is af.Outcome.VALID and verdict.inclusion is not None
            assert verdict.inclusion.size == 2 and verdict.inclusion.origin == ORIGIN

    # replay both runs: nothing outside the record is asked
    tool = af.define_tool(
        name="search",
        description="Search the repositories.",
        input_schema={"type": "object", "properties": {"q": {"type": "string"}}},
        execute=refusing_tool,
        needs={"credential": "github", "scopes": ["repo:read"]},
    )
    for run_id in (paused["run"], resumed["run"]):
        twin = af.Agent(
            provider=af.MockProvider([]), model="m", tools=[tool], credentials=Refusing()
        )
        replayed = af.replay_sync(twin, db, run_id)
        assert replayed.result.outcome == ("paused" if run_id == paused["run"] else "answered")
        twin.close()
