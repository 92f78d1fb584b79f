"""A process killed with SIGKILL mid-run leaves a log that opens and verifies.

A child process records runs to a SQLite file, turn after turn, with a scripted provider
that asks for a tool at nearly every iteration (up to ``max_iterations=50``). It kills itself
with SIGKILL at a point the parent chose from a seeded generator, so every trial dies
mid-run by construction, whatever the machine's speed:

- ``call k``: inside the k-th model call, after the request left;
- ``tool k``: inside the k-th tool run;
- ``stage k``: inside the stage that emits the k-th ``iteration_start`` (a listener);
- ``commit k``: as SQLite starts the k-th ``COMMIT`` (that batch never lands);
- ``begin k``: as SQLite starts the k-th ``BEGIN`` (every earlier batch has landed).

The parent then opens the database: every run verifies, as UNSEALED when it was cut short or
VALID (sealed) / VALID_UNSIGNED when it had closed; a cut run ends at a flush (a commit marker,
or the write-ahead receipt of the call it was killed in), ``state_at`` works at its last
commit, and it cannot be continued.

The child also notes every effect outside the process as it happens, in a side file: each
model call (in the provider, after the request left) and each tool run. The log must hold
the evidence of each before it happened: a receipt per model call made (at most one more:
a kill between the flush and the call) and the recorded reply asking for each tool run.
``AFP_CRASH_TRIALS`` sets the number of trials per kind of log (5 by default, one per point;
``.ci/run`` runs 100).
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import agentfootprint as af
from agentfootprint.runtime.scope import json_equal
from agentfootprint.testing.seals import SIGNER

pytestmark = [
    pytest.mark.skipif(sys.platform == "win32", reason="needs SIGKILL (POSIX)"),
    pytest.mark.slow,
    pytest.mark.deep_pass,
]

TRIALS = int(os.environ.get("AFP_CRASH_TRIALS", "5"))
SEED = 20240517
#: the kill points and the range each one's k is drawn from (the child reaches every k: it
#: records turns until it is killed); the first transactions open the file
POINTS = {
    "call": (1, 240),
    "tool": (1, 240),
    "stage": (1, 240),
    "commit": (6, 500),
    "begin": (6, 500),
}

CHILD = textwrap.dedent(
    """
    import os
    import signal
    import sys

    import agentfootprint as af

    path, effects_path, kind, point, k = sys.argv[1:6]
    k = int(k)
    effects = open(effects_path, "a", buffering=1)  # line-buffered: each effect as it happens
    seen = {"call": 0, "tool": 0, "stage": 0, "commit": 0, "begin": 0}


    def reached(name):
        seen[name] += 1
        if name == point and seen[name] == k:
            effects.write("kill %s %d\\n" % (name, k))
            os.kill(os.getpid(), signal.SIGKILL)


    store = af.SqliteStore(path)


    def trace(statement):
        if statement.startswith("COMMIT"):
            reached("commit")
        elif statement.startswith("BEGIN"):
            reached("begin")


    store._conn.set_trace_callback(trace)  # the test's window onto the store's transactions
    if kind == "sealed":
        from agentfootprint.testing.seals import SIGNER
    else:
        SIGNER = None
    calls = [0]


    def work(args):
        effects.write("tool %d\\n" % args.get("i"))
        reached("tool")
        return {"done": args.get("i"), "pad": "x" * 300}


    def respond(request):
        effects.write("call\\n")
        reached("call")
        calls[0] += 1
        if calls[0] % 61 == 0:  # a final answer now and then; runs also stop early at 50
            return "an answer after %d calls" % calls[0]
        return af.reply(
            "step %d" % calls[0],
            tool_calls=[af.tool_call("work", {"i": calls[0]})],
        )


    tool = af.define_tool(
        name="work",
        description="does some work",
        input_schema={"type": "object", "properties": {"i": {"type": "integer"}}},
        execute=work,
    )
    agent = af.Agent(
        provider=af.MockProvider(respond=respond, record=False),
        model="m",
        system="crash test",
        tools=[tool],
        store=store,
        max_iterations=50,
        signer=SIGNER,
    )
    agent.on("agentfootprint.agent.iteration_start", lambda event: reached("stage"))
    result = None
    for turn in range(100_000):
        # three turns per conversation
        result = agent.run_sync("turn %d" % turn, continue_from=result if turn % 3 else None)
    """
)


def _check_effects(path: Path, effects: Path) -> None:
    """Every effect the child noted has its evidence in the log: a receipt per model call,
    the recorded reply asking for each tool run."""
    noted = effects.read_text(encoding="utf-8").splitlines()
    calls = sum(1 for line in noted if line == "call")
    tools = {int(line.split()[1]) for line in noted if line.startswith("tool ")}
    store = af.SqliteStore(path, readonly=True)  # either storage schema
    try:
        events = [e for run_id in store.run_ids() for e in store.read(run_id)]
    finally:
        store.close()
    receipts = sum(1 for e in events if e.type == "receipt")
    asked: set[int] = set()
    for event in events:
        if event.type == "write" and json.loads(event.body).get("path") == "last_response":
            asked.update(int(i) for i in re.findall(rb'"arguments":\{"i":(\d+)\}', event.body))
    # a kill between the receipt's flush and the call leaves one receipt more
    assert calls <= receipts <= calls + 1, (calls, receipts)
    assert tools <= asked, sorted(tools - asked)[:5]


def _check_database(path: Path, sealed: bool) -> tuple[int, int]:
    """Verify every run of the database; return (closed runs, unsealed runs). Sealed: every
    closed run is VALID under the signer's key and the seal log lists exactly them, in order
    (a close and its seal reach the store together, or neither)."""
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    finally:
        conn.close()
    store = af.SqliteStore(path)
    try:
        verifier = af.Verifier(store, trusted_keys=[SIGNER.public] if sealed else ())
        runs = store.runs()
        closed = unsealed = 0
        for index, info in enumerate(runs):
            check = verifier.verify(info.run_id)
            assert check.events == info.events
            if check.outcome is af.Outcome.UNSEALED:
                unsealed += 1
                # only the newest run can have been cut short
                assert index == len(runs) - 1, "an older run was left unsealed"
                # a consistent prefix, cut at a flush: after a commit marker, or after the
                # receipt written ahead of the call the process was killed in (format 3)
                assert info.last_type in ("run.open", "commit", "receipt"), info.last_type
                assert check.close is None
                agent = af.Agent(provider=af.MockProvider(["never"]), model="m", store=store)
                with pytest.raises(af.ContinuationError):
                    agent.run_sync("go on", continue_from=info.run_id)
            else:
                expected = af.Outcome.VALID if sealed else af.Outcome.VALID_UNSIGNED
                assert check.outcome is expected
                assert info.last_type == ("run.seal" if sealed else "run.close")
                assert check.close is not None
                assert check.close["outcome"] in ("answered", "stopped_early")
                closed += 1
            state = af.state_at(store, info.run_id, check.commits - 1)
            assert json_equal(state, dict(check.final_state))
            if check.receipts:
                request = af.served_at(store, info.run_id, check.receipts - 1)
                assert request["model"] == "m"
        listed = [run for _, run in store.seal_log()]
        assert listed == ([r.run_id for r in runs[:closed]] if sealed else [])
        findings = [r for _, r in verifier.verify_all() if isinstance(r, af.VerificationError)]
        assert not findings, findings
        return closed, unsealed
    finally:
        store.close()


def _trials(kind: str) -> list[tuple[str, int]]:
    """The kill points of one kind of log: every point in turn, each at a k drawn from the
    seeded generator (so TRIALS trials of every kind, each one mid-run)."""
    rng = random.Random(f"{SEED}-{kind}")
    names = sorted(POINTS)
    picks = [names[i % len(names)] for i in range(TRIALS)]
    return [(point, rng.randint(*POINTS[point])) for point in picks]


@pytest.mark.parametrize("kind", ["plain", "sealed"])
def test_sigkill_at_a_chosen_point_leaves_a_verifiable_log(tmp_path: Path, kind: str) -> None:
    script = tmp_path / "child.py"
    script.write_text(CHILD, encoding="utf-8")
    trials = _trials(kind)
    assert len(trials) == TRIALS and TRIALS >= 1
    for trial, (point, k) in enumerate(trials):
        path = tmp_path / f"crash{trial}.db"
        effects = tmp_path / f"effects{trial}.txt"
        proc = subprocess.run(
            [sys.executable, str(script), str(path), str(effects), kind, point, str(k)],
            capture_output=True,
            timeout=300,  # a hang guard, not a figure: the child kills itself well before
        )
        assert proc.returncode == -signal.SIGKILL, proc.stderr.decode(errors="replace")
        # it died at the chosen point, not anywhere else
        assert effects.read_text(encoding="utf-8").splitlines()[-1] == f"kill {point} {k}"
        closed, unsealed = _check_database(path, kind == "sealed")
        _check_effects(path, effects)
        # a kill inside a call, a tool or a stage cuts the run it is in; a kill at a COMMIT
        # or BEGIN may fall between two runs (the batch that would have opened the next one)
        if point in ("call", "tool", "stage"):
            assert unsealed == 1, (point, k)
        else:
            assert unsealed <= 1, (point, k)
        assert closed + unsealed >= 1, (point, k)
