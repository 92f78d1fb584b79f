"""``tool_choice``: a classifier's reading of which tool answers the step, on the record."""

from __future__ import annotations

import asyncio
import math
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from feature_support import events_of, fixed_ports, lookup, rows

import agentfootprint as af
from agentfootprint.errors import ReplayDivergence, UsageError
from agentfootprint.features import registry, tool_choice
from agentfootprint.features.classifiers import DescriptionClassifier, ToolCandidate, words
from agentfootprint.logformat.canonical import canon
from agentfootprint.logformat.hashing import hexdigest
from agentfootprint.testing.records import run_open

CHOICE = "agentfootprint.tools.choice"
OFF_WIRE = "agentfootprint.tools.answered_off_wire"
DOCS = Path(__file__).resolve().parents[2] / "docs" / "tools.md"


def tool(name: str, description: str, ran: list[str] | None = None) -> af.Tool:
    def execute(args: Any) -> str:
        if ran is not None:
            ran.append(name)
        return f"{name} ok"

    return af.define_tool(name=name, description=description, execute=execute)


def toolbox(ran: list[str] | None = None) -> list[af.Tool]:
    return [
        tool("weather", "Get the weather forecast for a city.", ran),
        tool("stocks", "Look up a stock price quote.", ran),
        tool("email", "Send an email message.", ran),
        tool("search", "Search the web.", ran),
    ]


class Counting:
    """A classifier that counts its calls and ranks by a fixed preference (or misbehaves)."""

    name = "counting"

    def __init__(self, prefer: Sequence[str] = ("weather", "stocks", "email"), answer: Any = None):
        self.prefer = list(prefer)
        self.answer = answer
        self.calls: list[tuple[str, list[str]]] = []

    def rank(self, query: str, candidates: Sequence[ToolCandidate]) -> Any:
        self.calls.append((query, [c.name for c in candidates]))
        if isinstance(self.answer, BaseException):
            raise self.answer
        if self.answer is not None:
            return self.answer
        return [
            (c.name, float(len(self.prefer) - self.prefer.index(c.name)))
            for c in candidates
            if c.name in self.prefer
        ]


def asking(name: str, text: str = "") -> af.LLMResponse:
    return af.reply(text, tool_calls=[af.tool_call(name, {})])


def agent_of(script: list[Any], tools: list[af.Tool] | None = None, **options: Any) -> af.Agent:
    return af.Agent(
        provider=af.MockProvider(script),
        model="m",
        tools=toolbox() if tools is None else tools,
        ports=fixed_ports(),
        **options,
    )


def served_names(agent: af.Agent, result: af.RunResult, before: int = 0) -> list[list[str]]:
    """What each call served, rebuilt from the log, checked against what the provider got
    (``before``: the calls the agent's earlier runs made)."""
    provider = agent.config.provider
    found = []
    for k in range(result.calls):
        served = af.served_at(agent.store, result.run_id, k)
        assert served == provider.requests[before + k]
        found.append([t["name"] for t in served["tools"]])
    return found


def replay_of(agent: af.Agent, result: af.RunResult, **options: Any) -> af.ReplayResult:
    twin = af.Agent(
        provider=af.MockProvider([]), model="m", tools=list(agent.config.tools), **options
    )
    replayed = af.replay_sync(twin, agent.store, result.run_id)
    assert replayed.calls_checked == result.calls
    return replayed


ALL = ["weather", "stocks", "email", "search"]


# -- advisory ----------------------------------------------------------------------------


def test_advisory_serves_byte_identical_requests_and_files_the_rows() -> None:
    script = lambda: [asking("weather", "checking"), asking("email"), "done"]  # noqa: E731
    plain = agent_of(script())
    without = plain.run_sync("what is the weather forecast in Paris")
    advised = agent_of(script(), tool_choice={})
    result = advised.run_sync("what is the weather forecast in Paris")
    assert advised.config.provider.requests == plain.config.provider.requests
    for k in range(result.calls):
        assert af.served_at(advised.store, result.run_id, k) == af.served_at(
            plain.store, without.run_id, k
        )
        mine = af.receipt_at(advised.store, result.run_id, k)
        theirs = af.receipt_at(plain.store, without.run_id, k)
        assert mine is not None and theirs is not None
        assert mine.tools == theirs.tools and mine.messages == theirs.messages
    assert "served_tools" not in result.state
    choices = result.state["tool_choices"]
    assert [c["call"] for c in choices] == [0, 1, 2]
    first = choices[0]
    assert first["serve"] == "all" and first["narrowed"] is False and first["reason"] is None
    assert first["served"] == ALL and first["candidates"] == ALL and first["doors"] == []
    assert first["pick"] == "weather" and first["confidence"] == first["ranking"][0]["score"]
    outcomes = result.state["tool_choice_outcomes"]
    assert outcomes == [
        {"call": 0, "called": ["weather"], "pick": "weather", "agrees": True, "miss": []},
        {"call": 1, "called": ["email"], "pick": "weather", "agrees": False, "miss": []},
        {"call": 2, "called": [], "pick": "weather", "agrees": None, "miss": []},
    ]
    assert not events_of(advised.store, result.run_id, OFF_WIRE)  # nothing was narrowed
    replay_of(advised, result, tool_choice={})


def test_the_question_is_the_user_message_then_the_latest_assistant_text() -> None:
    classifier = Counting()
    agent = agent_of(
        [asking("weather", "let me check"), asking("stocks"), "done"],
        tool_choice={"classifier": classifier, "always_serve": ["search"]},
    )
    result = agent.run_sync("rain tomorrow?")
    assert classifier.calls == [
        ("rain tomorrow?", ["weather", "stocks", "email"]),
        ("rain tomorrow?\nlet me check", ["weather", "stocks", "email"]),
        ("rain tomorrow?\nlet me check", ["weather", "stocks", "email"]),
    ]
    found = events_of(agent.store, result.run_id, CHOICE)
    assert [e["message"] for e in found] == [q for q, _ in classifier.calls]
    assert found[0] == {
        "iteration": 1,
        "call": 0,
        "classifier": "counting",
        "message": "rain tomorrow?",
        "candidates": ["weather", "stocks", "email"],
        "descriptions": hexdigest(
            "tools/candidates",
            canon(
                [
                    {"name": "weather", "description": "Get the weather forecast for a city."},
                    {"name": "stocks", "description": "Look up a stock price quote."},
                    {"name": "email", "description": "Send an email message."},
                ]
            ),
        ),
        "status": "ok",
        "ranking": [
            {"tool": "weather", "score": 3.0},
            {"tool": "stocks", "score": 2.0},
            {"tool": "email", "score": 1.0},
        ],
        "error": None,
    }


# -- narrowing ---------------------------------------------------------------------------


def test_top_n_narrows_what_served_at_and_the_provider_show_with_the_doors() -> None:
    agent = agent_of(
        [asking("weather"), "done"],
        tool_choice={"serve": {"top": 1}, "always_serve": ["search"]},
    )
    result = agent.run_sync("what is the weather forecast in Paris")
    assert served_names(agent, result) == [["weather", "search"], ["weather", "search"]]
    row = result.state["tool_choices"][0]
    assert row["served"] == ["weather", "search"] and row["narrowed"] is True
    assert row["reason"] is None and row["doors"] == ["search"]
    assert row["candidates"] == ["weather", "stocks", "email"]
    assert result.state["served_tools"] == ["weather", "search"]
    replay_of(agent, result, tool_choice={"serve": {"top": 1}, "always_serve": ["search"]})


def test_top_n_serves_in_tool_order_not_ranking_order() -> None:
    classifier = Counting(prefer=["email", "weather", "stocks"])
    agent = agent_of(["done"], tool_choice={"classifier": classifier, "serve": {"top": 2}})
    result = agent.run_sync("anything")
    assert result.state["tool_choices"][0]["pick"] == "email"
    assert served_names(agent, result) == [["weather", "email"]]


def test_a_miss_is_answered_as_before_recorded_and_the_next_call_serves_the_full_list() -> None:
    ran: list[str] = []
    options = {"tool_choice": {"serve": {"top": 1}, "always_serve": ["search"]}}
    agent = agent_of(
        [asking("weather", "checking"), asking("email"), asking("weather"), "done"],
        toolbox(ran),
        **options,
    )
    result = agent.run_sync("what is the weather forecast in Paris")
    assert ran == ["weather", "email", "weather"]  # the missed tool ran, as without the option
    history = result.state["history"]
    assert {"role": "tool", "tool_call_id": "call_1_0", "name": "email", "content": "email ok"} in (
        history
    )
    assert served_names(agent, result) == [
        ["weather", "search"],
        ["weather", "search"],
        ALL,  # after the miss
        ["weather", "search"],  # narrowed again
    ]
    choices = result.state["tool_choices"]
    assert [c["reason"] for c in choices] == [None, None, "after-miss", None]
    outcomes = result.state["tool_choice_outcomes"]
    assert outcomes[1] == {
        "call": 1,
        "called": ["email"],
        "pick": "weather",
        "agrees": False,
        "miss": ["email"],
    }
    assert events_of(agent.store, result.run_id, OFF_WIRE) == [
        {
            "iteration": 2,
            "call": 1,
            "tool": "email",
            "tool_call_id": "call_1_0",
            "served": ["weather", "search"],
        }
    ]
    # the served_tools key was deleted for the full list, then committed again
    assert [r["narrowed"] for r in choices] == [True, True, False, True]
    replay_of(agent, result, **options)


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        (RuntimeError("down"), "raised RuntimeError"),
        ("nonsense", "malformed answer: a str, not a ranking"),
        ([("nope", 1.0)], "malformed answer: 'nope' is not a candidate"),
        ([("weather", math.nan)], "malformed answer: the score of 'weather' is not a finite"),
        ([("weather", True)], "malformed answer: the score of 'weather' is not a finite"),
        ([("weather", 1), ("weather", 2)], "malformed answer: 'weather' is ranked twice"),
        ([("weather",)], "malformed answer: an entry that is not a (name, score) pair"),
        (42, "malformed answer: a int, not a ranking"),
    ],
)
def test_a_classifier_that_fails_is_unavailable_and_the_full_list_is_served(
    answer: Any, error: str
) -> None:
    classifier = Counting(answer=answer)
    options = {"tool_choice": {"classifier": classifier, "serve": {"top": 1}}}
    agent = agent_of([asking("weather"), "done"], **options)
    result = agent.run_sync("weather?")
    assert result.answer == "done"
    assert served_names(agent, result) == [ALL, ALL]
    row = result.state["tool_choices"][0]
    assert row["reason"] == "unavailable" and row["ranking"] == [] and row["pick"] is None
    found = events_of(agent.store, result.run_id, CHOICE)
    assert found[0]["status"] == "unavailable" and found[0]["ranking"] == []
    assert found[0]["error"].startswith(error)
    calls = len(classifier.calls)
    replay_of(agent, result, **options)
    assert len(classifier.calls) == calls  # the replay answered from the record


def test_a_sync_classifier_runs_off_the_loop_and_a_cancelled_run_makes_no_call() -> None:
    asked, release, answered = threading.Event(), threading.Event(), threading.Event()
    where: list[int] = []

    class Blocking(Counting):
        def rank(self, query: str, candidates: Sequence[ToolCandidate]) -> Any:
            where.append(threading.get_ident())
            asked.set()
            release.wait(30)  # a hang guard: the test releases it
            answered.set()
            return super().rank(query, candidates)

    provider = af.MockProvider([asking("weather"), "done"])
    agent = af.Agent(
        provider=provider,
        model="m",
        tools=toolbox(),
        ports=fixed_ports(),
        tool_choice={"classifier": Blocking(), "serve": {"top": 1}},
    )

    async def scenario() -> None:
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(agent.run("weather?"), 0.5)
        assert asked.is_set() and not answered.is_set()  # the loop did not wait for it
        release.set()
        await asyncio.get_running_loop().run_in_executor(None, answered.wait, 30)

    asyncio.run(scenario())
    assert where and where[0] != threading.get_ident()
    assert provider.requests == []  # the call the ranking preceded was never made
    (info,) = list(agent.store.runs())
    close = af.verify_run(agent.store, info.run_id).close
    assert close is not None and close["error"]["type"] == "CancelledError"


def test_a_classifier_scoring_fewer_than_n_is_unavailable() -> None:
    classifier = Counting(prefer=["weather"])  # scores one candidate only
    agent = agent_of(["done"], tool_choice={"classifier": classifier, "serve": {"top": 2}})
    result = agent.run_sync("weather?")
    assert served_names(agent, result) == [ALL]
    row = result.state["tool_choices"][0]
    assert row["reason"] == "unavailable" and row["pick"] == "weather"


def test_fewer_than_n_plus_one_candidates_is_too_few() -> None:
    agent = agent_of(
        ["done"], tool_choice={"serve": {"top": 3}, "always_serve": ["search"]}
    )  # three candidates: nothing to narrow
    result = agent.run_sync("weather?")
    assert served_names(agent, result) == [ALL]
    assert result.state["tool_choices"][0]["reason"] == "too-few"
    assert len(events_of(agent.store, result.run_id, CHOICE)) == 1  # still asked: advisory


def test_only_doors_asks_nothing_and_serves_them() -> None:
    classifier = Counting()
    agent = agent_of(
        ["done"],
        [tool("search", "Search the web.")],
        tool_choice={"classifier": classifier, "serve": {"top": 1}, "always_serve": ["search"]},
    )
    result = agent.run_sync("hi")
    assert classifier.calls == [] and not events_of(agent.store, result.run_id, CHOICE)
    row = result.state["tool_choices"][0]
    assert row["reason"] == "too-few" and row["ranking"] is None and row["served"] == ["search"]


def test_an_async_classifier_and_a_mapping_answer_are_accepted() -> None:
    class Async:
        async def rank(self, query: str, candidates: Sequence[ToolCandidate]) -> Any:
            return {c.name: (1 if c.name == "stocks" else 0) for c in candidates}

    agent = agent_of(["done"], tool_choice={"classifier": Async(), "serve": {"top": 1}})
    result = agent.run_sync("price?")
    assert served_names(agent, result) == [["stocks"]]
    assert run_open(agent.store, result.run_id)["options"]["tool_choice"]["classifier"] == "Async"


def test_the_wrap_up_call_files_a_wrap_up_row_and_serves_nothing_narrowed() -> None:
    options = {"tool_choice": {"serve": {"top": 1}}, "max_iterations": 2}
    agent = agent_of([asking("weather"), asking("weather"), "what I found"], **options)
    result = agent.run_sync("what is the weather forecast in Paris")
    assert result.calls == 3 and result.answer == "what I found"
    assert served_names(agent, result) == [["weather"], ["weather"], []]
    assert "served_tools" not in result.state
    choices = result.state["tool_choices"]
    assert [c["reason"] for c in choices] == [None, None, "wrap-up"]
    assert choices[2] == {
        "call": 2,
        "iteration": 2,
        "serve": {"top": 1},
        "ranking": None,
        "pick": None,
        "confidence": None,
        "candidates": [],
        "doors": [],
        "served": [],
        "narrowed": False,
        "reason": "wrap-up",
    }
    assert len(events_of(agent.store, result.run_id, CHOICE)) == 2  # not asked at wrap-up
    assert result.state["tool_choice_outcomes"][2]["call"] == 2
    by_name = {s["stage"]: s for s in agent.chart.describe()}
    assert by_name["wrap-up"]["next"] == "tool-choice-wrap-up"
    assert by_name["tool-choice-wrap-up"]["next"] == "call-llm-wrap-up"
    replay_of(agent, result, **options)


def test_the_next_turn_after_a_wrap_up_narrows_again() -> None:
    agent = agent_of(
        [asking("weather"), "wrapped", "fresh"], tool_choice={"serve": {"top": 1}}, max_iterations=1
    )
    first = agent.run_sync("weather in Paris")
    second = agent.run_sync("weather in Rome", continue_from=first)
    assert served_names(agent, first) == [["weather"], []]
    assert served_names(agent, second, before=first.calls) == [["weather"]]


def test_the_stage_sits_after_tools_and_window_before_the_call() -> None:
    agent = agent_of([], tool_choice={}, window={"keep_last_turns": 1})
    by_name = {s["stage"]: s for s in agent.chart.describe()}
    assert by_name["window"]["next"] == "tools"
    assert by_name["tools"]["next"] == "tool-choice"
    assert by_name["tool-choice"]["next"] in ("cache-markers", "call-llm")
    assert by_name["tool-calls"]["next"] == "tool-choice-off-wire"


# -- the port: replay ----------------------------------------------------------------------


def test_a_recorded_conversation_verifies_and_replays_with_zero_classifier_calls(
    tmp_path: Path,
) -> None:
    path = tmp_path / "log.db"
    classifier = Counting()
    options = {"tool_choice": {"classifier": classifier, "serve": {"top": 1}}}
    agent = af.Agent(
        provider=af.MockProvider(
            [asking("weather"), "sunny", asking("stocks"), asking("weather"), "up"]
        ),
        model="m",
        tools=toolbox(),
        store=str(path),
        **options,
    )
    first = agent.run_sync("weather in Paris")
    second = agent.run_sync("and ACME's price", continue_from=first)
    agent.close()
    asked = len(classifier.calls)
    assert asked == 5
    with af.SqliteStore(path) as store:
        for result in (first, second):
            checked = af.verify_run(store, result.run_id)
            assert checked.outcome.name.startswith("VALID")
        twin = af.Agent(provider=af.MockProvider([]), model="m", tools=toolbox(), **options)
        for result in (first, second):
            replayed = af.replay_sync(twin, store, result.run_id)
            assert replayed.calls_checked == result.calls
            assert replayed.result.state["tool_choices"] == result.state["tool_choices"]
        twin.close()
    assert len(classifier.calls) == asked  # zero calls in the replays
    assert [r["reason"] for r in second.state["tool_choices"][-3:]] == [None, "after-miss", None]


def test_a_replay_asking_another_question_diverges() -> None:
    agent = agent_of([asking("weather"), "done"], tool_choice={})
    result = agent.run_sync("weather?")
    other = Counting()
    twin = af.Agent(
        provider=af.MockProvider([]),
        model="m",
        tools=list(agent.config.tools),
        tool_choice={"classifier": other},
    )
    with pytest.raises(ReplayDivergence) as raised:
        af.replay_sync(twin, agent.store, result.run_id)
    assert raised.value.kind == "decision" and raised.value.call == 0
    assert other.calls == []
    doors = af.Agent(
        provider=af.MockProvider([]),
        model="m",
        tools=list(agent.config.tools),
        tool_choice={"always_serve": ["search"]},
    )
    with pytest.raises(ReplayDivergence) as again:
        af.replay_sync(doors, agent.store, result.run_id)
    assert again.value.kind == "decision"


def test_a_run_with_the_option_absent_records_the_same_rows_as_before() -> None:
    script = lambda: [asking("weather"), "done"]  # noqa: E731
    now = agent_of(script())
    plain = now.run_sync("go")
    old = agent_of(script())
    old.seam = registry.Seam.build(
        old.config.options,
        features=tuple(f for f in registry.all_features() if f is not tool_choice.FEATURE),
    )
    old.chart = old.seam.chart
    then = old.run_sync("go")
    assert rows(now.store, plain.run_id) == rows(old.store, then.run_id)
    assert "tool-choice" not in now.chart.stages
    assert "tool_choice" not in run_open(now.store, plain.run_id)["options"]


# -- the option --------------------------------------------------------------------------


def test_the_option_is_recorded_as_json_with_the_classifier_by_name() -> None:
    agent = agent_of(["done"], tool_choice={"serve": {"top": 2}, "always_serve": ["search"]})
    result = agent.run_sync("go")
    assert run_open(agent.store, result.run_id)["options"]["tool_choice"] == {
        "classifier": "description",
        "serve": {"top": 2},
        "always_serve": ["search"],
    }
    assert run_open(agent.store, result.run_id)["projection"]["version"] == 2


def test_events_reach_listeners() -> None:
    agent = agent_of([asking("email"), "done"], tool_choice={"serve": {"top": 1}})
    seen: list[Any] = []
    agent.on(CHOICE, seen.append)
    agent.on(OFF_WIRE, seen.append)
    agent.run_sync("weather in Paris")
    assert [type(e).__name__ for e in seen] == ["ToolChoice", "AnsweredOffWire", "ToolChoice"]


class NoRank:
    def classify(self, query: str) -> str:
        return "weather"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("all", "must be"),
        ([1], "must be"),
        ({"top": 1}, "unknown key 'top'"),
        ({"serve": "some"}, 'serve must be "all"'),
        ({"serve": {"top": 0}}, "serve's top must be a positive integer"),
        ({"serve": {"top": 1.5}}, "serve's top must be a positive integer"),
        ({"serve": {"top": True}}, "serve's top must be a positive integer"),
        ({"serve": {"top": 1, "min": 2}}, 'serve must be "all"'),
        ({"serve": {"n": 1}}, 'serve must be "all"'),
        ({"always_serve": "search"}, "always_serve must be a list"),
        ({"always_serve": ["search", "search"]}, "names a tool twice"),
        ({"always_serve": ["browse"]}, "'browse', which is not a tool of the agent"),
        ({"classifier": NoRank()}, "has no rank"),
        ({"classifier": "description"}, "has no rank"),
    ],
)
def test_misconfiguration_is_refused_at_construction(value: Any, message: str) -> None:
    with pytest.raises(UsageError, match=re.escape(message)) as raised:
        agent_of([], tool_choice=value)
    assert raised.value.option == "tool_choice"
    assert "'tool_choice'" in str(raised.value)


def test_no_tools_and_classic_react_mode_are_refused() -> None:
    with pytest.raises(UsageError, match="no tools") as raised:
        af.Agent(provider=af.MockProvider([]), model="m", tool_choice={})
    assert raised.value.option == "tool_choice"
    with pytest.raises(UsageError, match="react_mode='classic'") as again:
        agent_of([], tool_choice={}, react_mode="classic")
    assert again.value.option == "tool_choice"


def test_none_is_off() -> None:
    agent = agent_of(["done"], tool_choice=None)
    assert agent.config.options["tool_choice"] is None
    assert "tool-choice" not in agent.chart.stages


# -- the default classifier and the docs ---------------------------------------------------


def test_the_description_classifier_is_deterministic_and_lexical() -> None:
    candidates = [
        ToolCandidate(name="get_weather", description="The weather forecast for a city."),
        ToolCandidate(name="stockPrice", description="A stock's price."),
        ToolCandidate(name="noop", description="Does nothing."),
    ]
    classifier = af.DescriptionClassifier()
    assert isinstance(classifier, DescriptionClassifier)
    assert tool_choice.classifier_name(classifier) == "description"
    ranked = classifier.rank("What's the weather forecast in Paris?", candidates)
    assert ranked == classifier.rank("What's the weather forecast in Paris?", candidates)
    assert ranked[0][0] == "get_weather" and ranked[0][1] > 0
    assert dict(ranked)["noop"] == 0
    assert classifier.rank("stock prices", candidates)[1] == ("stockPrice", 1.0)
    assert words("getWeather forecasts of_the city") == frozenset(
        {"weather", "forecast", "city"}  # "get", "of", "the": stop words
    )


def test_the_docs_example_classifier_runs() -> None:
    text = DOCS.read_text(encoding="utf-8")
    section = text.split("## tool_choice", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    example = next(b for b in blocks if "class KeywordClassifier" in b)
    namespace: dict[str, Any] = {}
    exec(compile(example, str(DOCS), "exec"), namespace)  # the asserts are the doc's own
    agent = namespace["agent"]
    replay_of(
        agent,
        namespace["result"],
        tool_choice={
            "classifier": namespace["KeywordClassifier"]({}),  # a classifier never asked
            "serve": {"top": 1},
            "always_serve": ["help"],
        },
    )
    agent.close()


def test_a_single_tool_is_too_few_to_narrow() -> None:
    """The feature-support agent's one tool: one candidate is too few for top 1."""
    agent = agent_of([asking("lookup"), "done"], [lookup()], tool_choice={"serve": {"top": 1}})
    result = agent.run_sync("look it up")
    assert [c["reason"] for c in result.state["tool_choices"]] == ["too-few", "too-few"]


def test_under_conversation_redaction_the_query_is_committed_and_replays_with_the_vault(
    tmp_path: Path,
) -> None:
    classifier = Counting()
    options: dict[str, Any] = {
        "tool_choice": {"classifier": classifier, "serve": {"top": 1}},
        "redact": af.conversation_redaction(),
    }
    agent = af.Agent(
        provider=af.MockProvider([asking("weather"), "done"]),
        model="m",
        tools=toolbox(),
        store=str(tmp_path / "log.db"),
        disclosures=str(tmp_path / "vault.db"),
        **options,
    )
    result = agent.run_sync("a secret question about the weather")
    (first, _) = events_of(agent.store, result.run_id, CHOICE)
    assert set(first["message"]) == {"$commit"}  # the user's words are not in the clear
    assert b"secret question" not in b"".join(
        bytes(r.body) for r in agent.store.read(result.run_id)
    )
    asked = len(classifier.calls)
    twin = af.Agent(provider=af.MockProvider([]), model="m", tools=toolbox(), **options)
    replayed = af.replay_sync(twin, agent.store, result.run_id, disclosures=agent.vault)
    assert replayed.calls_checked == result.calls and len(classifier.calls) == asked
    twin.close()
    agent.close()


def test_with_wrap_up_off_the_cap_ends_as_before() -> None:
    options = {"tool_choice": {"serve": {"top": 1}}, "max_iterations": 1}
    agent = agent_of([asking("weather")], wrap_up_at_max_iterations=False, **options)
    result = agent.run_sync("weather?")
    assert result.calls == 1 and result.stopped_early is not None
    assert [c["reason"] for c in result.state["tool_choices"]] == [None]
    replay_of(agent, result, wrap_up_at_max_iterations=False, **options)


def test_narrowing_composes_with_the_window_and_cache_markers() -> None:
    options: dict[str, Any] = {
        "tool_choice": {"serve": {"top": 1}},
        "window": {"keep_last_turns": 1},
        "cache_strategy": "breakpoints",
    }
    agent = agent_of([asking("email"), asking("weather"), "done"], **options)
    result = agent.run_sync("weather in Paris")
    assert served_names(agent, result) == [["weather"], ALL, ["weather"]]
    assert af.served_at(agent.store, result.run_id, 0)["prompt_cache"]["tools"] == [0]
    replay_of(agent, result, **options)
