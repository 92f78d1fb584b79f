"""``credentials`` and ``on_authorization_required``: a tool's credential through a recorded
decision; a consent pauses the run (or tells the model); the secret and the URL never in a
row."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from feature_support import events_of, fixed_ports, rows, tool_messages, without_open

import agentfootprint as af
from agentfootprint.features.credentials import consent_question, consent_refusal
from agentfootprint.store.writer import RunWriter

KIND = "agentfootprint.credential.resolved"
TOKEN = "ghp_" + "T0k3n" * 7 + "xyz"  # a 42-character secret nobody else writes
URL = "https://consent.example/authorize?session=S3ss10n-5ecret-77"
SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}}


class Service:
    """Answers from ``answers`` in turn (an exception is raised); records every request."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.asked: list[af.CredentialRequest] = []

    def get_credential(self, request: af.CredentialRequest) -> Any:
        self.asked.append(request)
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer


class Refusing:
    """A service a replay must never ask."""

    def get_credential(self, request: af.CredentialRequest) -> Any:
        raise AssertionError("the credential service was asked")


def search_tool(ran: list[Any], *, needs: bool = True) -> af.Tool:
    def search(args: dict[str, Any], ctx: af.ToolContext) -> Any:
        ran.append((args, ctx.credential.headers() if ctx.credential else None))
        return {"hits": 3}

    return af.define_tool(
        name="search",
        description="Search the repositories.",
        input_schema=SCHEMA,
        execute=search,
        needs={"credential": "github", "scopes": ["repo:read"]} if needs else None,
    )


def plain_tool(ran: list[Any]) -> af.Tool:
    return af.define_tool(
        name="note",
        description="Take a note.",
        input_schema=SCHEMA,
        execute=lambda args: ran.append(args) or "noted",
    )


def script(*calls: tuple[str, str], answer: str = "found 3") -> list[Any]:
    """One reply asking for ``calls`` (tool, id) in one batch, then the answer."""
    batch = [af.tool_call(name, {"q": "x"}, id=call_id) for name, call_id in calls]
    return [af.reply(tool_calls=batch), answer]


def agent_with(
    service: Any, replies: list[Any], ran: list[Any], store: Any = None, **options: Any
) -> af.Agent:
    return af.Agent(
        provider=af.MockProvider(replies),
        model="m",
        tools=[search_tool(ran), plain_tool(ran)],
        credentials=service,
        ports=fixed_ports(),
        store=store,
        **options,
    )


def every_byte(store: Any) -> bytes:
    return b"".join(
        e.type.encode() + bytes(e.body) for run_id in store.run_ids() for e in store.read(run_id)
    )


# -- construction ---------------------------------------------------------------------------


def test_a_tool_that_needs_a_credential_is_refused_without_a_service() -> None:
    with pytest.raises(af.UsageError) as caught:
        af.Agent(provider=af.MockProvider([]), model="m", tools=[search_tool([])])
    assert caught.value.option == "credentials"
    assert "'search' needs a credential for 'github'" in str(caught.value)


@pytest.mark.parametrize(
    ("options", "option", "says"),
    [
        ({"credentials": object()}, "credentials", "get_credential(request)"),
        ({"on_authorization_required": "pause"}, "on_authorization_required", "credentials=..."),
        (
            {"credentials": af.static_tokens({}), "on_authorization_required": "ask"},
            "on_authorization_required",
            "'pause', 'tell-model'",
        ),
    ],
)
def test_misconfiguration_is_refused_at_construction(
    options: dict[str, Any], option: str, says: str
) -> None:
    with pytest.raises(af.UsageError) as caught:
        af.Agent(provider=af.MockProvider([]), model="m", **options)
    assert caught.value.option == option and says in str(caught.value)


@pytest.mark.parametrize(
    ("needs", "says"),
    [
        ("github", "must be a dict"),
        ({"credential": ""}, "must name a service"),
        ({"credential": "gh", "scopes": "repo"}, "list of non-empty strings"),
        ({"credential": "gh", "mode": "robot"}, "'machine' or 'user'"),
        ({"credential": "gh", "token": "x"}, "unknown members ['token']"),
    ],
)
def test_define_tool_checks_needs(needs: Any, says: str) -> None:
    with pytest.raises(af.UsageError) as caught:
        af.define_tool(name="t", description="d", execute=lambda a: a, needs=needs)
    assert says in str(caught.value) and caught.value.option == "tools"


# -- issued --------------------------------------------------------------------------------


def test_an_issued_credential_reaches_the_tool_and_never_the_log() -> None:
    ran: list[Any] = []
    service = Service(af.Issued(token=TOKEN, expires_at=1_900_000_000_000))
    agent = agent_with(service, script(("search", "c1")), ran)
    result = agent.run_sync("find")
    assert result.outcome == "answered" and result.answer == "found 3"
    assert ran == [({"q": "x"}, {"Authorization": f"Bearer {TOKEN}"})]
    (request,) = service.asked
    assert (request.service, request.scopes, request.mode, request.tool) == (
        "github",
        ("repo:read",),
        "machine",
        "search",
    )
    assert events_of(agent.store, result.run_id, KIND) == [
        {
            "tool": "search",
            "tool_call_id": "c1",
            "service": "github",
            "scopes": ["repo:read"],
            "mode": "machine",
            "status": "issued",
            "credential_kind": "bearer",
            "expires_at": 1_900_000_000_000,
        }
    ]
    assert TOKEN.encode() not in every_byte(agent.store)
    assert TOKEN not in repr(af.Credential(TOKEN, "bearer", "github"))


def test_a_service_that_raises_fails_the_call_by_its_class_only() -> None:
    ran: list[Any] = []
    service = Service(PermissionError(f"token {TOKEN} was revoked"))
    agent = agent_with(service, script(("search", "c1"), ("note", "c2")), ran)
    result = agent.run_sync("find")
    first, second = tool_messages(result)
    assert first["is_error"] and "could not be obtained (PermissionError)" in first["content"]
    assert second["content"] == "noted"  # the batch goes on
    assert ran == [{"q": "x"}]
    (event,) = events_of(agent.store, result.run_id, KIND)
    assert event["status"] == "failed" and event["error_class"] == "PermissionError"
    assert TOKEN.encode() not in every_byte(agent.store)


@pytest.mark.parametrize(
    "answer",
    [
        None,
        "token",
        af.Issued(token=""),
        af.Issued(token="t", kind=""),
        af.Issued(token="short"),
        af.Issued(token=TOKEN, expires_at=2**60),
        af.Issued(token=TOKEN, expires_at=True),
        af.AuthorizationRequired(authorization_url=""),
    ],
)
def test_an_answer_that_is_not_a_credential_fails_closed(answer: Any) -> None:
    ran: list[Any] = []
    agent = agent_with(Service(answer), script(("search", "c1")), ran)
    result = agent.run_sync("find")
    assert ran == [] and tool_messages(result)[0]["is_error"]
    assert events_of(agent.store, result.run_id, KIND)[0]["status"] == "failed"


def test_armed_and_never_needed_records_the_same_rows_but_the_opening() -> None:
    ran: list[Any] = []
    armed = agent_with(Refusing(), script(("note", "c1")), ran)
    plain = af.Agent(
        provider=af.MockProvider(script(("note", "c1"))),
        model="m",
        tools=[search_tool(ran, needs=False), plain_tool(ran)],
        ports=fixed_ports(),
    )
    a, b = armed.run_sync("go"), plain.run_sync("go")
    assert without_open(rows(armed.store, a.run_id)) == without_open(rows(plain.store, b.run_id))


# -- consent: pause ------------------------------------------------------------------------


def test_a_consent_pauses_the_run_with_the_url_for_the_caller_only() -> None:
    ran: list[Any] = []
    service = Service(af.AuthorizationRequired(authorization_url=URL, session_id="S3ss10n"))
    agent = agent_with(service, script(("note", "c0"), ("search", "c1"), ("note", "c2")), ran)
    paused = agent.run_sync("find")
    assert paused.outcome == "paused" and paused.answer == ""
    assert paused.pending == af.Pending(
        request_id="pause-1",
        kind="consent",
        tool_call_id="c1",
        tool="search",
        question=consent_question("github", "search"),
        service="github",
    )
    assert paused.pending is not None and paused.pending.authorization_url == URL
    assert URL not in repr(paused.pending)
    assert ran == [{"q": "x"}]  # the call before the paused one ran; none after it
    assert [m["tool_call_id"] for m in tool_messages(paused)] == ["c0"]
    close = next(e for e in agent.store.read(paused.run_id) if e.type == "run.close")
    assert b'"outcome":"paused"' in bytes(close.body) and b'"pending":{' in bytes(close.body)
    assert af.verify_run(agent.store, paused.run_id).outcome is af.Outcome.VALID_UNSIGNED
    stored = every_byte(agent.store)
    assert URL.encode() not in stored and b"S3ss10n" not in stored


def test_resume_runs_the_waiting_tool_and_finishes_the_batch() -> None:
    ran: list[Any] = []
    service = Service(af.AuthorizationRequired(authorization_url=URL), af.Issued(token=TOKEN))
    agent = agent_with(service, script(("note", "c0"), ("search", "c1"), ("note", "c2")), ran)
    paused = agent.run_sync("find")
    resumed = agent.resume_sync(paused)
    assert resumed.outcome == "answered" and resumed.answer == "found 3"
    assert resumed.parent_run_id == paused.run_id and resumed.calls == 1
    assert ran == [{"q": "x"}, ({"q": "x"}, {"Authorization": f"Bearer {TOKEN}"}), {"q": "x"}]
    history = resumed.state["history"]
    assert [m["role"] for m in history] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "tool",
        "assistant",
    ]
    assert [m.get("tool_call_id") for m in history[2:5]] == ["c0", "c1", "c2"]
    assert "pending" not in resumed.state and "resume_answer" not in resumed.state
    opened = next(agent.store.read(resumed.run_id))
    assert b'"resumes":"pause-1"' in bytes(opened.body)
    assert resumed.state["iteration"] == 2  # the paused batch's pass, then the answer's


def test_a_resume_still_unauthorized_pauses_again_under_a_new_request() -> None:
    ran: list[Any] = []
    required = af.AuthorizationRequired(authorization_url=URL)
    service = Service(required, required, af.Issued(token=TOKEN))
    agent = agent_with(service, script(("search", "c1")), ran)
    first = agent.run_sync("find")
    second = agent.resume_sync(first)
    assert second.outcome == "paused" and second.pending is not None
    assert second.pending.request_id == "pause-2" and second.pending.tool_call_id == "c1"
    third = agent.resume_sync(second, {})
    assert third.outcome == "answered" and len(ran) == 1


def test_a_pause_is_answered_once_and_continued_only_explicitly() -> None:
    ran: list[Any] = []
    service = Service(af.AuthorizationRequired(authorization_url=URL), af.Issued(token=TOKEN))
    agent = agent_with(service, [*script(("search", "c1")), "again"], ran)
    paused = agent.run_sync("find")
    with pytest.raises(af.ContinuationError, match=r"resume\(run, answer\).*abandon=True"):
        agent.run_sync("something else", continue_from=paused)
    with pytest.raises(af.UsageError, match="continues a run that paused"):
        agent.run_sync("x", abandon=True)
    agent.resume_sync(paused)
    with pytest.raises(af.ContinuationError, match="answered already") as twice:
        agent.resume_sync(paused)
    assert isinstance(twice.value.__cause__, af.PauseAnsweredError)
    assert len(agent.store.run_ids()) == 2  # the refused one left nothing behind


def test_abandoning_a_pause_closes_its_waiting_calls() -> None:
    ran: list[Any] = []
    service = Service(af.AuthorizationRequired(authorization_url=URL))
    agent = agent_with(service, [*script(("search", "c1"), ("note", "c2")), "ok"], ran)
    paused = agent.run_sync("find")
    later = agent.run_sync("never mind", continue_from=paused, abandon=True)
    assert later.outcome == "answered" and later.answer == "found 3" and ran == []
    history = later.state["history"]
    waiting = [m for m in history if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in waiting] == ["c1", "c2"]
    assert all(m["is_error"] and "abandoned" in m["content"] for m in waiting)
    assert history[-2] == {"role": "user", "content": "never mind"}
    assert "pending" not in later.state
    assert b'"abandons":"pause-1"' in bytes(next(agent.store.read(later.run_id)).body)


@pytest.mark.parametrize(
    ("answer", "says"),
    [("yes", "must be a JSON object"), ({"x": float("nan")}, "cannot be recorded")],
)
def test_an_answer_that_cannot_be_recorded_is_refused(answer: Any, says: str) -> None:
    service = Service(af.AuthorizationRequired(authorization_url=URL))
    agent = agent_with(service, script(("search", "c1")), [])
    paused = agent.run_sync("find")
    with pytest.raises(af.UsageError, match=says):
        agent.resume_sync(paused, answer)
    assert len(agent.store.run_ids()) == 1


def test_resume_refuses_a_run_that_did_not_pause() -> None:
    agent = agent_with(Service(af.Issued(token=TOKEN)), script(("search", "c1")), [])
    done = agent.run_sync("find")
    with pytest.raises(af.ContinuationError, match="did not pause"):
        agent.resume_sync(done)


def test_budgets_span_the_pause() -> None:
    """``max_iterations`` and the cost budget count the paused run's spend and passes."""
    ran: list[Any] = []
    service = Service(af.AuthorizationRequired(authorization_url=URL), af.Issued(token=TOKEN))
    replies = [
        af.reply(
            tool_calls=[af.tool_call("search", {"q": "x"}, id="c1")],
            usage=af.Usage(input=1000, output=0),
        ),
        af.reply(
            tool_calls=[af.tool_call("note", {"q": "y"}, id="c2")],
            usage=af.Usage(input=1000, output=0),
        ),
        "done",
    ]
    agent = agent_with(
        service,
        replies,
        ran,
        pricing_table={"m": {"input": 1.0, "output": 1.0}},
        cost_budget={"usd": 0.0015, "on_exceed": "halt"},
    )
    paused = agent.run_sync("find")
    assert paused.state["paused_cost_usd"] == "0.0010000000"  # exact decimal text
    resumed = agent.resume_sync(paused)
    # 0.001 before the pause + 0.001 after it crosses 0.0015: the budget stops the turn
    assert resumed.outcome == "stopped_early" and resumed.stopped_early is not None
    assert resumed.stopped_early.reason == "cost-budget"
    assert resumed.stopped_early.details["usd"] == pytest.approx(0.002)
    assert "paused_cost_usd" not in resumed.state


# -- consent: tell-model ----------------------------------------------------------------------


def test_tell_model_refuses_the_call_and_fails_the_turn_with_the_url_on_the_error() -> None:
    ran: list[Any] = []
    service = Service(af.AuthorizationRequired(authorization_url=URL))
    agent = agent_with(
        service, script(("search", "c1")), ran, on_authorization_required="tell-model"
    )
    with pytest.raises(af.CredentialConsentRequiredError) as caught:
        agent.run_sync("find")
    error = caught.value
    assert error.authorization_url == URL and error.service == "github"
    assert URL not in str(error) and ran == []
    (run_id,) = agent.store.run_ids()
    assert af.verify_run(agent.store, run_id).outcome is af.Outcome.VALID_UNSIGNED
    stored = every_byte(agent.store)
    assert URL.encode() not in stored
    assert consent_refusal("github").encode() in stored
    assert b'"on_authorization_required":"tell-model"' in stored


def test_tell_model_a_later_credential_clears_the_consent() -> None:
    ran: list[Any] = []
    service = Service(af.AuthorizationRequired(authorization_url=URL), af.Issued(token=TOKEN))
    replies = [
        af.reply(tool_calls=[af.tool_call("search", {"q": "x"}, id="c1")]),
        af.reply(tool_calls=[af.tool_call("search", {"q": "x"}, id="c2")]),
        "found",
    ]
    agent = agent_with(service, replies, ran, on_authorization_required="tell-model")
    assert agent.run_sync("find").outcome == "answered" and len(ran) == 1


# -- replay and seals ---------------------------------------------------------------------


def twin(store: Any = None, **options: Any) -> af.Agent:
    """The same agent for a replay: a model and a credential service that are never asked."""
    return af.Agent(
        provider=af.MockProvider([]),
        model="m",
        tools=[search_tool([]), plain_tool([])],
        credentials=Refusing(),
        store=store,
        **options,
    )


def test_a_pause_and_its_resume_replay_without_asking_anyone() -> None:
    ran: list[Any] = []
    service = Service(af.AuthorizationRequired(authorization_url=URL), af.Issued(token=TOKEN))
    agent = agent_with(service, script(("note", "c0"), ("search", "c1"), ("note", "c2")), ran)
    paused = agent.run_sync("find")
    resumed = agent.resume_sync(paused)
    replayer = twin()
    again = af.replay_sync(replayer, agent.store, paused.run_id)
    assert again.result.outcome == "paused" and again.result.pending == paused.pending
    assert again.result.pending is not None and again.result.pending.authorization_url is None
    # the resume replays against its parent (copied into the replayer's store), every row
    # byte for byte but its opening (the replay checks it before it closes)
    answering = twin()
    answered = af.replay_sync(answering, agent.store, resumed.run_id)
    assert answered.result.outcome == "answered" and answered.calls_checked == 1
    assert answered.result.parent_run_id == paused.run_id
    assert b'"resumes":"pause-1"' in bytes(next(answering.store.read(answered.result.run_id)).body)


def test_a_replay_that_would_run_the_paused_tool_diverges() -> None:
    service = Service(af.AuthorizationRequired(authorization_url=URL))
    agent = agent_with(service, script(("search", "c1")), [])
    paused = agent.run_sync("find")
    issuing = af.Agent(
        provider=af.MockProvider([]),
        model="m",
        tools=[search_tool([], needs=False), plain_tool([])],
        ports=fixed_ports(),
    )
    with pytest.raises(af.ReplayDivergence, match="paused there for a person's answer"):
        af.replay_sync(issuing, agent.store, paused.run_id)


def test_tell_model_replays_to_the_same_failure() -> None:
    service = Service(af.AuthorizationRequired(authorization_url=URL))
    agent = agent_with(
        service, script(("search", "c1")), [], on_authorization_required="tell-model"
    )
    with pytest.raises(af.CredentialConsentRequiredError):
        agent.run_sync("find")
    (run_id,) = agent.store.run_ids()
    with pytest.raises(af.CredentialConsentRequiredError) as replayed:
        af.replay_sync(twin(on_authorization_required="tell-model"), agent.store, run_id)
    assert replayed.value.authorization_url is None  # never recorded, so never replayed


def test_paused_and_resumed_runs_are_sealed_and_verify_under_the_key() -> None:
    from agentfootprint.seal.signer import Ed25519Signer

    signer = Ed25519Signer.generate()
    service = Service(af.AuthorizationRequired(authorization_url=URL), af.Issued(token=TOKEN))
    agent = agent_with(service, script(("search", "c1")), [], signer=signer)
    paused = agent.run_sync("find")
    resumed = agent.resume_sync(paused)
    verifier = af.Verifier(agent.store, trusted_keys=[signer.public_key])
    for run_id in (paused.run_id, resumed.run_id):
        assert verifier.verify(run_id).outcome is af.Outcome.VALID


@pytest.mark.parametrize("key", ["question", "tool", "service", "context"])
def test_a_policy_naming_a_member_of_the_question_is_refused(key: str) -> None:
    """``pending``'s members are read as structure: a policy that would commit one is refused
    at construction by an agent that may pause (and taken by one that cannot)."""
    with pytest.raises(af.UsageError) as caught:
        agent_with(af.static_tokens({}), [], [], redact=af.RedactionPolicy(keys=[key]))
    assert caught.value.option == "redact" and repr(key) in str(caught.value)
    af.Agent(provider=af.MockProvider([]), model="m", redact=af.RedactionPolicy(keys=[key])).close()


def test_a_paused_run_under_conversation_redaction_verifies_and_resumes() -> None:
    service = Service(af.AuthorizationRequired(authorization_url=URL), af.Issued(token=TOKEN))
    agent = agent_with(service, script(("search", "c1")), [], redact=af.conversation_redaction())
    paused = agent.run_sync("find")
    assert paused.outcome == "paused"
    resumed = agent.resume_sync(paused)
    assert resumed.outcome == "answered" and resumed.answer == "found 3"
    stored = every_byte(agent.store)
    assert b"found 3" not in stored  # the answer is committed, the question is not
    assert consent_question("github", "search").encode() in stored


def test_a_resume_that_died_before_closing_is_named_and_may_be_retried(
    tmp_path: Any,
) -> None:
    """A resume's opening is stored first; if its process dies then, a second resume is
    refused naming the run that never closed, and ``retry=True`` answers instead: the dead
    run verifies UNSEALED and is no answer (docs/pauses.md, log-format.md section 5.9)."""
    db = tmp_path / "log.db"
    service = Service(af.AuthorizationRequired(authorization_url=URL), af.Issued(token=TOKEN))
    agent = agent_with(service, script(("search", "c1")), [], store=str(db))
    paused = agent.run_sync("find")
    opened = next(agent.store.read(paused.run_id))
    # the opening a dead process left: a resume of this pause, nothing after it
    writer = af.SqliteStore(db)
    body = {
        **orjson.loads(bytes(opened.body)),
        "run_id": "crashed",
        "parent": {
            "run_id": paused.run_id,
            "events": agent.store.run_info(paused.run_id).events,
            "head": agent.store.run_info(paused.run_id).head.hex(),
        },
        "resumes": "pause-1",
    }
    RunWriter(writer, "crashed").append([("run.open", body)])
    writer.close()
    with pytest.raises(af.ContinuationError, match="run crashed began answering") as refused:
        agent.resume_sync(paused)
    assert "retry=True" in str(refused.value)
    retried = agent.resume_sync(paused, retry=True)
    assert retried.outcome == "answered"
    opening = orjson.loads(bytes(next(agent.store.read(retried.run_id)).body))
    assert opening["retries"] is True and opening["resumes"] == "pause-1"
    verdicts = dict(af.Verifier(agent.store).verify_all())
    assert not isinstance(verdicts.pop("crashed"), Exception)
    assert all(not isinstance(v, Exception) for v in verdicts.values()), verdicts
    with pytest.raises(af.ContinuationError, match="answered already"):
        agent.resume_sync(paused, retry=True)  # an answer closed: no retry answers again


def test_retry_is_refused_when_no_answer_began() -> None:
    service = Service(af.AuthorizationRequired(authorization_url=URL))
    agent = agent_with(service, script(("search", "c1")), [])
    paused = agent.run_sync("find")
    with pytest.raises(af.UsageError, match="no run began answering"):
        agent.resume_sync(paused, retry=True)
    with pytest.raises(af.UsageError, match="'retry'"):
        agent.run_sync("hi", continue_from=paused, retry=True)  # not an abandonment
    with pytest.raises(af.UsageError, match="True or False"):
        agent.resume_sync(paused, retry="yes")  # type: ignore[arg-type]
