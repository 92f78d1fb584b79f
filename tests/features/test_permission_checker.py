"""``permission_checker``: asked before every tool run; allow / deny / halt, on the record."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest
from feature_support import events_of, fixed_ports, lookup, replays, rows, tool_messages

import agentfootprint as af
from agentfootprint.features import permission_checker
from agentfootprint.features.base import Feature
from agentfootprint.features.permission_checker import Decision, PermissionRequest
from agentfootprint.features.registry import Seam, all_features

KIND = "agentfootprint.permission.check"


class Checker:
    """Denies ``q == "bad"``, halts ``q == "stop"``, allows the rest; counts its calls."""

    name = "policy"

    def __init__(self) -> None:
        self.asked: list[PermissionRequest] = []

    def check(self, request: PermissionRequest) -> Any:
        self.asked.append(request)
        q = request.arguments.get("q") if isinstance(request.arguments, dict) else None
        if q == "bad":
            return Decision.deny("bad queries are not allowed")
        if q == "stop":
            return Decision.halt("stop means stop", by="operator")
        return Decision.allow("fine")


def script(*queries: str, answer: str = "done") -> list[Any]:
    return [
        af.reply(tool_calls=[af.tool_call("lookup", {"q": q}, id=f"c{i}")])
        for i, q in enumerate(queries)
    ] + [answer]


def agent_with(checker: Any, replies: list[Any], **options: Any) -> tuple[af.Agent, list[Any]]:
    ran: list[Any] = []
    tool = lookup(lambda args: ran.append(args) or "rows")
    agent = af.Agent(
        provider=af.MockProvider(replies),
        model="m",
        tools=[tool],
        permission_checker=checker,
        ports=fixed_ports(),
        **options,
    )
    return agent, ran


def test_allow_runs_the_tool_and_deny_answers_with_a_synthetic_denial() -> None:
    checker = Checker()
    agent, ran = agent_with(checker, script("good", "bad"))
    result = agent.run_sync("go")
    assert result.outcome == "answered"
    assert ran == [{"q": "good"}]  # the denied call never ran
    denied = tool_messages(result)[1]
    assert denied["is_error"] is True
    assert denied["content"] == (
        "Error: tool 'lookup' was not run: permission denied by policy: "
        "bad queries are not allowed."
    )
    assert [r.capability for r in checker.asked] == ["tool_call", "tool_call"]
    assert [(r.tool, r.tool_call_id, r.iteration) for r in checker.asked] == [
        ("lookup", "c0", 1),
        ("lookup", "c1", 2),
    ]
    assert events_of(agent.store, result.run_id, KIND) == [
        {
            "tool": "lookup",
            "tool_call_id": "c0",
            "arguments": {"q": "good"},
            "iteration": 1,
            "decision": "allow",
            "by": "policy",
            "reason": "fine",
        },
        {
            "tool": "lookup",
            "tool_call_id": "c1",
            "arguments": {"q": "bad"},
            "iteration": 2,
            "decision": "deny",
            "by": "policy",
            "reason": "bad queries are not allowed",
        },
    ]
    assert af.verify_run(agent.store, result.run_id).outcome.name == "VALID_UNSIGNED"


def test_halt_stops_the_run_with_a_typed_error_and_the_log_verifies() -> None:
    checker = Checker()
    agent, ran = agent_with(checker, script("good", "stop", "never"))
    with pytest.raises(af.PolicyHaltError, match="operator halted the run") as caught:
        agent.run_sync("go")
    error = caught.value
    assert isinstance(error, af.RunError)
    assert (error.tool, error.tool_call_id, error.by, error.reason) == (
        "lookup",
        "c1",
        "operator",
        "stop means stop",
    )
    assert ran == [{"q": "good"}]
    verified = af.verify_run(agent.store, error.run_id)
    assert verified.outcome.name == "VALID_UNSIGNED"
    assert verified.close is not None and verified.close["outcome"] == "failed"
    assert verified.close["error"]["type"] == "PolicyHaltError"
    decisions = events_of(agent.store, error.run_id, KIND)
    assert [d["decision"] for d in decisions] == ["allow", "halt"]
    assert decisions[1]["by"] == "operator"


class Raising:
    def check(self, request: PermissionRequest) -> Decision:
        raise PermissionError("the policy service is down: secret=42")


class Garbage:
    def __init__(self, answer: Any) -> None:
        self.answer = answer

    def check(self, request: PermissionRequest) -> Any:
        return self.answer


def test_a_checker_that_raises_denies_fail_closed_naming_the_error_class() -> None:
    agent, ran = agent_with(Raising(), script("good"))
    result = agent.run_sync("go")
    assert ran == []
    (decision,) = events_of(agent.store, result.run_id, KIND)
    assert decision["decision"] == "deny" and decision["by"] == "Raising"
    assert "PermissionError" in decision["reason"] and "fail closed" in decision["reason"]
    assert "secret" not in decision["reason"]  # the class, never the message
    assert tool_messages(result)[0]["is_error"] is True


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        (None, "returned NoneType"),
        (42, "returned int"),
        (True, "returned bool"),
        ("maybe", "decision 'maybe'"),
        ({"decision": "gate_open"}, "decision 'gate_open'"),
        ({"decision": "allow", "by": 3}, "by is a int"),
        # exactly the documented shapes: anything more or else denies (fail closed)
        ({"decision": "allow", "allowed": True}, "key 'allowed' beyond decision, by, reason"),
        ({"decision": "allow", 7: "x"}, "key 7 beyond"),
        ({"allow": True}, "key 'allow' beyond"),
        ({}, "a mapping without a decision"),
        ({"by": "policy"}, "a mapping without a decision"),
        ({"decision": True}, "decision True"),
        ({"decision": ["allow"]}, "decision ['allow']"),
        ({"decision": "allow", "reason": None}, "reason is a NoneType"),
        ({"decision": "allow", "reason": b"ok"}, "reason is a bytes"),
    ],
)
def test_a_checker_answering_garbage_denies_fail_closed(answer: Any, why: str) -> None:
    agent, ran = agent_with(Garbage(answer), script("good"))
    result = agent.run_sync("go")
    assert ran == []
    (decision,) = events_of(agent.store, result.run_id, KIND)
    assert decision["decision"] == "deny" and "fail closed" in decision["reason"]
    assert why in decision["reason"], decision["reason"]  # the denial records why
    assert tool_messages(result)[0]["is_error"] is True


@pytest.mark.parametrize(
    ("answer", "decision"),
    [("allow", "allow"), ({"decision": "deny", "reason": "no"}, "deny"), ("deny", "deny")],
)
def test_a_mapping_or_a_bare_string_is_a_decision(answer: Any, decision: str) -> None:
    agent, _ = agent_with(Garbage(answer), script("good"))
    result = agent.run_sync("go")
    assert events_of(agent.store, result.run_id, KIND)[0]["decision"] == decision


def test_an_async_checker_is_awaited() -> None:
    class Async:
        async def check(self, request: PermissionRequest) -> Decision:
            await asyncio.sleep(0)
            return Decision.deny("later", by="async-policy")

    agent, ran = agent_with(Async(), script("good"))
    result = agent.run_sync("go")
    assert ran == []
    assert events_of(agent.store, result.run_id, KIND)[0]["by"] == "async-policy"


def test_a_sync_checker_runs_off_the_event_loop() -> None:
    seen: list[int] = []

    class Where:
        def check(self, request: PermissionRequest) -> str:
            seen.append(threading.get_ident())
            return "allow"

    agent, ran = agent_with(Where(), script("good"))
    agent.run_sync("go")
    assert ran == [{"q": "good"}] and seen and seen[0] != threading.get_ident()


class Blocking:
    """A sync checker that blocks until released, then allows (too late)."""

    def __init__(self) -> None:
        self.asked, self.release, self.answered = (threading.Event() for _ in range(3))

        self.thread = 0  #: the thread the check runs in

    def check(self, request: PermissionRequest) -> str:
        self.thread = threading.get_ident()
        self.asked.set()
        self.release.wait(30)  # a hang guard: the test releases it
        self.answered.set()
        return "allow"


def _cancelled(agent: af.Agent) -> dict[str, Any]:
    (info,) = list(agent.store.runs())
    verified = af.verify_run(agent.store, info.run_id)
    assert verified.outcome.name == "VALID_UNSIGNED" and verified.close is not None
    assert verified.close["outcome"] == "failed"
    assert verified.close["error"]["type"] == "CancelledError"
    assert events_of(agent.store, info.run_id, KIND) == []  # no decision was taken
    return verified.close


def test_a_run_cancelled_while_a_sync_checker_blocks_stops_at_once_and_runs_no_tool() -> None:
    checker = Blocking()
    agent, ran = agent_with(checker, script("good"))

    async def scenario() -> None:
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(agent.run("go"), 0.5)
        # the wait ended while the checker still blocked: it did not hold the loop
        assert checker.asked.is_set() and not checker.answered.is_set()
        checker.release.set()
        await asyncio.get_running_loop().run_in_executor(None, checker.answered.wait, 30)
        for _ in range(10):  # turns of the loop: the late "allow" is handed back and dropped
            await asyncio.sleep(0)

    asyncio.run(scenario())
    assert checker.answered.is_set() and ran == []
    _cancelled(agent)


def _interrupt(checker: Blocking, taker: str) -> None:
    """Ctrl-C once the check blocks: sent to the process (the kernel picks the thread), or
    taken by the worker thread running the check (which only flags the main thread)."""
    if not checker.asked.wait(30):
        return
    if taker == "process":
        os.kill(os.getpid(), signal.SIGINT)
    else:
        signal.pthread_kill(checker.thread, signal.SIGINT)


@pytest.mark.skipif(
    threading.current_thread() is not threading.main_thread()
    or not hasattr(signal, "pthread_kill"),
    reason="Ctrl-C reaches the main thread only (POSIX)",
)
@pytest.mark.parametrize("taker", ["process", "worker"])
def test_ctrl_c_under_run_sync_while_a_sync_checker_blocks_stops_and_runs_no_tool(
    taker: str,
) -> None:
    checker = Blocking()
    agent, ran = agent_with(checker, script("good"))
    interrupter = threading.Thread(target=_interrupt, args=(checker, taker))
    interrupter.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            agent.run_sync("go")
        assert not checker.answered.is_set()  # run_sync returned while the check blocked
    finally:
        checker.release.set()
        interrupter.join(30)
    assert checker.answered.wait(30) and ran == []
    _cancelled(agent)


def test_a_process_whose_cancelled_checker_never_returns_still_exits() -> None:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(NEVER_ANSWERS)],
        capture_output=True,
        text=True,
        timeout=60,  # a hang guard: the child exits about 0.2 s after its run
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["cancelled", "ran=[]"]


NEVER_ANSWERS = """
    import asyncio, threading
    import agentfootprint as af

    ran = []

    class Never:
        def check(self, request):
            threading.Event().wait()  # never returns

    tool = af.define_tool(name="t", description="T.", execute=lambda args: ran.append(1) or "x")
    agent = af.Agent(
        provider=af.MockProvider([af.reply(tool_calls=[af.tool_call("t", {})]), "done"]),
        model="m",
        tools=[tool],
        permission_checker=Never(),
        tool_teardown_timeout_ms=200,  # what exit still gives the abandoned check
    )

    async def main():
        try:
            await asyncio.wait_for(agent.run("go"), 0.5)
        except asyncio.TimeoutError:
            print("cancelled")

    asyncio.run(main())
    print(f"ran={ran}")
"""


def test_calls_the_loop_refuses_first_never_reach_the_checker() -> None:
    checker = Checker()
    replies = [
        af.reply(
            tool_calls=[
                af.tool_call("nosuch", {}, id="a"),
                af.ToolCall(id="b", name="lookup", arguments="{not json"),
                af.tool_call("lookup", {"q": 3}, id="c"),  # refused by validation
                af.tool_call("lookup", {"q": "ok"}, id="d"),
            ]
        ),
        "done",
    ]
    agent, ran = agent_with(checker, replies)
    result = agent.run_sync("go")
    assert [r.tool_call_id for r in checker.asked] == ["d"]
    assert ran == [{"q": "ok"}]
    assert [e["tool_call_id"] for e in events_of(agent.store, result.run_id, KIND)] == ["d"]


@pytest.mark.parametrize("value", [object(), "allow", 42, lambda request: "allow"])
def test_an_object_without_a_check_method_is_refused_at_construction(value: Any) -> None:
    with pytest.raises(af.UsageError, match=r"permission_checker.*check\(request\)") as caught:
        af.Agent(provider=af.MockProvider([]), model="m", permission_checker=value)
    assert caught.value.option == "permission_checker"


def test_a_decision_refuses_what_is_not_one() -> None:
    with pytest.raises(af.UsageError, match="allow, deny, halt"):
        Decision(decision="perhaps")  # type: ignore[arg-type]


def test_a_replay_answers_from_the_recorded_decisions_and_never_calls_the_checker() -> None:
    checker = Checker()
    agent, _ = agent_with(checker, script("good", "bad"))
    result = agent.run_sync("go")
    assert len(checker.asked) == 2
    twin_checker = Checker()
    replayed = replays(agent, result, permission_checker=twin_checker)
    assert twin_checker.asked == [] and len(checker.asked) == 2
    assert replayed.result.answer == result.answer and replayed.calls_checked == 3


def test_a_replay_that_asks_what_the_original_never_asked_diverges_on_the_decision() -> None:
    tool = lookup()
    original = af.Agent(provider=af.MockProvider(script("good")), model="m", tools=[tool])
    result = original.run_sync("go")
    twin = af.Agent(
        provider=af.MockProvider([]), model="m", tools=[tool], permission_checker=Checker()
    )
    with pytest.raises(af.ReplayDivergence) as caught:
        af.replay_sync(twin, original.store, result.run_id)
    assert caught.value.kind == "decision"


def test_a_replay_without_the_checker_diverges_on_the_record() -> None:
    agent, _ = agent_with(Checker(), script("good"))
    result = agent.run_sync("go")
    twin = af.Agent(provider=af.MockProvider([]), model="m", tools=list(agent.config.tools))
    with pytest.raises(af.ReplayDivergence) as caught:
        af.replay_sync(twin, agent.store, result.run_id)
    assert caught.value.kind == "record"


def test_without_the_option_the_rows_are_the_rows_before_the_feature_existed() -> None:
    def run(seam_without: bool) -> list[tuple[str, int, bytes]]:
        agent = af.Agent(
            provider=af.MockProvider(script("good", "bad")),
            model="m",
            tools=[lookup()],
            ports=fixed_ports(),
        )
        if seam_without:
            agent.seam = Seam.build(
                agent.config.options,
                [f for f in all_features() if f is not permission_checker.FEATURE],
            )
        result = agent.run_sync("go")
        return rows(agent.store, result.run_id)

    assert run(seam_without=False) == run(seam_without=True)


def test_the_feature_sits_out_without_a_checker() -> None:
    agent = af.Agent(provider=af.MockProvider([]), model="m", tools=[lookup()])
    assert permission_checker.FEATURE not in agent.seam.features
    assert agent.seam.at(Feature.tool_permission) == ()


def test_under_a_redaction_policy_the_decisions_replay_with_the_vault(tmp_path: Path) -> None:
    policy = af.RedactionPolicy(keys=["q"])
    checker = Checker()
    agent = af.Agent(
        provider=af.MockProvider(script("good", "bad")),
        model="m",
        tools=[lookup()],
        permission_checker=checker,
        redact=policy,
        store=tmp_path / "log.db",
        disclosures=tmp_path / "vault.db",
    )
    result = agent.run_sync("go")
    recorded = events_of(agent.store, result.run_id, KIND)
    assert [d["decision"] for d in recorded] == ["allow", "deny"]
    assert "$commit" in recorded[0]["arguments"]["q"]  # the argument is committed, not in clear
    twin_checker = Checker()
    twin = af.Agent(
        provider=af.MockProvider([]),
        model="m",
        tools=[lookup()],
        permission_checker=twin_checker,
        redact=policy,
    )
    replayed = af.replay_sync(twin, agent.store, result.run_id, disclosures=agent.vault)
    assert replayed.calls_checked == 3 and twin_checker.asked == []
    agent.close()


def test_a_checker_editing_the_arguments_it_is_asked_about_changes_nothing() -> None:
    """The checker gets a copy: what it does to ``request.arguments`` reaches neither the
    recorded ``permission.check`` row nor the tool."""

    class Meddler:
        def check(self, request: PermissionRequest) -> Any:
            request.arguments["q"] = "EVIL"
            request.arguments["extra"] = [1]
            return Decision.allow("fine")

    agent, ran = agent_with(Meddler(), script("x"))
    result = agent.run_sync("look it up")
    (check,) = events_of(agent.store, result.run_id, KIND)
    assert check["arguments"] == {"q": "x"} and ran == [{"q": "x"}]
