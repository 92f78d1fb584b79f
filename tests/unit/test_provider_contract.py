"""The typed provider contract: requests a provider receives, read typed and as JSON; the
errors a provider raises; the guard that keeps tests from calling real models."""

from __future__ import annotations

import asyncio
import json
import threading
import urllib.error
import urllib.request as urlrequest
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

import agentfootprint as af
from agentfootprint.logformat.commitments import is_commitment
from agentfootprint.logformat.shared_lists import SharedList
from agentfootprint.runtime import provider_guard as guard
from agentfootprint.runtime.provider import Message, Request, SystemPiece, ToolSchema

# -- real requests ---------------------------------------------------------------------------


class Capturing(af.MockProvider):
    """A scripted provider that keeps every request object it was handed."""

    def __init__(self, replies: list[Any]) -> None:
        super().__init__(replies)
        self.received: list[Any] = []

    async def complete(self, request: Any) -> af.LLMResponse:
        self.received.append(request)
        return await super().complete(request)


def tools() -> list[af.Tool]:
    def boom(args: dict[str, Any]) -> str:
        raise RuntimeError("the tool failed")

    return [
        af.define_tool(
            name="echo",
            description="Echo the arguments.",
            input_schema={"type": "object", "properties": {"x": {"type": "integer"}}},
            execute=lambda args: args,
        ),
        af.define_tool(name="boom", description="Always fails.", execute=boom),
    ]


def tool_turn() -> list[Any]:
    return [
        af.reply(
            "calling",
            tool_calls=[af.tool_call("echo", {"x": 1}, id="c1"), af.tool_call("boom", id="c2")],
        ),
        "done",
    ]


def test_typed_views_of_a_real_request_with_tool_calls_and_results() -> None:
    provider = Capturing(tool_turn())
    agent = af.Agent(provider=provider, model="m", system=["Be brief.", "Be kind."], tools=tools())
    agent.run_sync("go")
    request = Request.from_served(provider.received[1])
    assert request.model == "m" and request.params is request["params"]
    assert request.system == (
        SystemPiece(source="base", text="Be brief."),
        SystemPiece(source="base", text="Be kind."),
    )
    assert [t.name for t in request.tools] == ["echo", "boom"]
    echo = request.tools[0]
    assert echo == ToolSchema(
        name="echo",
        description="Echo the arguments.",
        parameters={"type": "object", "properties": {"x": {"type": "integer"}}},
    )
    assert echo.raw is request["tools"][0]  # the served object, not a copy
    user, assistant, echoed, failed = request.messages
    assert user == Message(role="user", content="go")
    assert assistant.role == "assistant" and assistant.content == "calling"
    assert assistant.tool_calls == (
        af.ToolCall(id="c1", name="echo", arguments={"x": 1}),
        af.ToolCall(id="c2", name="boom", arguments={}),
    )
    assert echoed.role == "tool" and echoed.tool_call_id == "c1" and echoed.name == "echo"
    assert echoed.is_error is False and json.loads(echoed.content) == {"x": 1}
    assert failed.tool_call_id == "c2" and failed.is_error is True
    assert "the tool failed" in failed.content
    assert [m.to_json() for m in request.messages] == request["messages"]
    assert all(m.raw is s for m, s in zip(request.messages, request["messages"], strict=True))


def test_a_continued_run_without_its_vault_serves_commitments_kept_as_they_are(
    tmp_path: Path,
) -> None:
    """A conversation continued by another agent, without the vault: the parent's redacted
    values are served as commitments where strings were; the views keep them as they are."""
    db = tmp_path / "log.db"
    with af.Agent(
        provider=af.MockProvider(tool_turn()),
        model="m",
        tools=tools(),
        store=db,
        redact=af.conversation_redaction(),
    ) as first:
        parent = first.run_sync("my secret").run_id
    provider = Capturing(["again"])
    with af.Agent(
        provider=provider,
        model="m",
        tools=tools(),
        store=db,
        redact=af.conversation_redaction(),
    ) as second:
        second.run_sync("next", continue_from=parent)
    request = Request.from_served(provider.received[0])
    user, assistant, echoed, failed, answer, latest = request.messages
    for message in (user, assistant, echoed, failed, answer):
        assert is_commitment(message.content), message
    assert user.role == "user" and failed.is_error is True and failed.name == "boom"
    first_call = assistant.tool_calls[0]
    assert isinstance(first_call, af.ToolCall) and first_call.name == "echo"
    assert is_commitment(first_call.arguments)
    assert latest == Message(role="user", content="next")
    assert user.content is request["messages"][0]["content"]  # kept, not converted


def test_values_the_views_do_not_expect_are_kept_as_they_are() -> None:
    commit = {"$commit": "ab" * 32}
    served: dict[str, Any] = {
        "model": "m",
        "params": {"temperature": 0.5},
        "system": [{"source": "base", "text": commit}, "not an object"],
        "messages": [
            {"role": "user", "content": commit, "extra": 1},
            {"role": "assistant", "content": None, "tool_calls": commit},
            {"role": "assistant", "content": "", "tool_calls": [commit, 7, {"id": "c"}]},
            {"role": "tool", "tool_call_id": "c", "name": commit, "content": {"a": [1]}},
            ["not", "an", "object"],
        ],
        "tools": [{"name": "t"}, None],
    }
    request = Request.from_served(served)
    user, whole, items, result, odd = request.messages
    assert user.content is commit and user.raw["extra"] == 1
    assert whole.tool_calls is commit
    assert items.tool_calls[:2] == (commit, 7)  # type: ignore[comparison-overlap]
    assert items.tool_calls[2] == af.ToolCall(id="c", name="", arguments={})
    assert result.name is commit and result.content == {"a": [1]}  # type: ignore[comparison-overlap]
    assert odd == Message() and odd.raw == ["not", "an", "object"]
    assert request.system[0].text is commit  # type: ignore[comparison-overlap]
    assert request.system[1] == SystemPiece() and request.system[1].raw == "not an object"
    assert request.tools == (ToolSchema(name="t"), ToolSchema())
    assert request.params == {"temperature": 0.5}


# -- the Mapping, and laziness ---------------------------------------------------------------


def served_request(messages: Any = None) -> dict[str, Any]:
    return {
        "model": "m",
        "params": {},
        "system": [],
        "messages": [{"role": "user", "content": "hi"}] if messages is None else messages,
        "tools": [],
    }


def test_a_request_is_a_read_only_mapping_over_the_served_dict() -> None:
    served = served_request()
    request = Request.from_served(served)
    assert request.to_json() is served and request.served is served
    assert request["messages"] is served["messages"]  # not copied
    assert list(request) == ["model", "params", "system", "messages", "tools"]
    assert len(request) == 5 and "model" in request and "nope" not in request
    assert request.get("nope") is None and dict(request) == served
    assert request == served and request == Request.from_served(dict(served))
    assert request != {**served, "model": "other"}
    assert Request.from_served(request) is request
    with pytest.raises(TypeError):
        request["model"] = "x"  # type: ignore[index]
    with pytest.raises(KeyError):
        request["nope"]
    assert repr(request) == "Request(model='m', messages=1, tools=0)"
    # the history as the agent holds it (versions grown by appends) is read as a plain list
    grown = Request.from_served({**served, "messages": SharedList(served["messages"])})
    assert type(grown["messages"]) is list and grown["messages"] == served["messages"]
    assert grown.to_json() == served and type(grown.to_json()["messages"]) is list
    assert grown == served and grown.messages == request.messages


@pytest.mark.parametrize("wrong", [None, "text", ["model"], 3])
def test_a_request_wraps_only_a_served_dict(wrong: Any) -> None:
    with pytest.raises(af.UsageError, match="build_request") as caught:
        Request.from_served(wrong)
    assert caught.value.option == "served"


class CountingList(list[Any]):
    """A list that counts how often it is walked."""

    walks = 0

    def __iter__(self) -> Iterator[Any]:
        type(self).walks += 1
        return super().__iter__()


def test_typed_views_are_built_on_first_read_then_cached() -> None:
    CountingList.walks = 0
    messages = CountingList({"role": "user", "content": str(i)} for i in range(2000))
    CountingList.walks = 0
    request = Request.from_served(served_request(messages))
    _ = request["messages"], request.model, dict(request)
    assert CountingList.walks == 0  # wrapping and reading the JSON walks nothing
    first = request.messages
    assert CountingList.walks == 1 and len(first) == 2000 and first[1999].content == "1999"
    assert request.messages is first and CountingList.walks == 1
    assert request.system is request.system and request.tools is request.tools


# -- provider errors ---------------------------------------------------------------------------


def test_provider_error_carries_status_and_retryable() -> None:
    error = af.ProviderError("rate limited: wait and retry", status=429, retryable=True)
    assert isinstance(error, af.RunError) and str(error) == "rate limited: wait and retry"
    assert (error.status, error.retryable, error.run_id) == (429, True, None)
    plain = af.ProviderError("connection refused: is the server running?")
    assert (plain.status, plain.retryable) == (None, False)
    wrapper = af.ProviderCallError("provider failed", run_id="r")
    assert (wrapper.status, wrapper.retryable) == (None, False)
    copied = af.ProviderCallError("provider failed", status=503, retryable=True)
    assert (copied.status, copied.retryable) == (503, True)
    assert issubclass(af.ModelRequestsBlocked, af.UsageError)


@pytest.mark.parametrize("status", [True, "429", 429.0, 99, 1000, -1])
def test_provider_error_refuses_a_status_that_is_not_one(status: Any) -> None:
    with pytest.raises(af.UsageError, match=r"status=\.\.\.") as caught:
        af.ProviderError("x", status=status)
    assert caught.value.option == "status"


@pytest.mark.parametrize("retryable", [None, 1, "yes"])
def test_provider_error_refuses_a_retryable_that_is_not_a_bool(retryable: Any) -> None:
    with pytest.raises(af.UsageError, match=r"retryable=\.\.\.") as caught:
        af.ProviderError("x", retryable=retryable)
    assert caught.value.option == "retryable"


def test_a_scripted_exception_is_raised_by_its_call() -> None:
    limited = af.ProviderError("rate limited", status=429, retryable=True)
    provider = af.MockProvider([limited, "ok"])
    with pytest.raises(af.ProviderError) as caught:
        asyncio.run(provider.complete(served_request()))
    assert caught.value is limited and provider.position == 1 and provider.remaining == 1
    response = asyncio.run(provider.complete(served_request()))
    assert response.content == "ok" and len(provider.requests) == 2


def test_a_scripted_item_that_is_no_reply_nor_exception_is_refused() -> None:
    with pytest.raises(af.UsageError, match="reply 1 is int; use a str, reply") as caught:
        af.MockProvider(["ok", 3])  # type: ignore[list-item]
    assert caught.value.option == "provider"


def test_mock_provider_reads_a_typed_request_as_it_reads_the_dict() -> None:
    served = served_request()
    by_dict, by_request = af.MockProvider(["hello"]), af.MockProvider(["hello"])
    one = asyncio.run(by_dict.complete(served))
    two = asyncio.run(by_request.complete(Request.from_served(served)))
    assert one == two and by_dict.requests == by_request.requests == [served]
    assert type(by_request.requests[0]) is dict and by_request.requests[0] is not served


# -- the guard, against a real HTTP server ----------------------------------------------------


class LocalServer:
    """A real HTTP server on 127.0.0.1 in a thread (the wire is real; no client is patched)."""

    def serve(self, handler: type[BaseHTTPRequestHandler], path: str = "") -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}{path}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


class ChatServer(LocalServer):
    """A local HTTP server: answers POST /chat with the last message echoed, POST /busy
    with 429, and counts what reached it."""

    def __init__(self) -> None:
        self.bodies: list[Any] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                outer.bodies.append(json.loads(body))
                if self.path == "/busy":
                    self.send_response(429)
                    self.end_headers()
                    return
                last = json.loads(body)["messages"][-1]["content"]
                payload = json.dumps({"content": f"echo: {last}"}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self.serve(Handler)


@pytest.fixture
def chat_server() -> Iterator[ChatServer]:
    server = ChatServer()
    try:
        yield server
    finally:
        server.close()


class LocalHttpProvider:
    """A provider that POSTs the served request to a server: it makes real requests."""

    name = "local-http"
    makes_requests = True

    def __init__(self, url: str) -> None:
        self.url = url

    async def complete(self, request: Request) -> af.LLMResponse:
        body = json.dumps(request.to_json()).encode()

        def post() -> Any:
            sent = urlrequest.Request(
                self.url, data=body, headers={"Content-Type": "application/json"}
            )
            try:
                with urlrequest.urlopen(sent, timeout=10) as answer:
                    return json.loads(answer.read())
            except urllib.error.HTTPError as exc:
                raise af.ProviderError(
                    f"{self.name}: HTTP {exc.code}",
                    status=exc.code,
                    retryable=exc.code == 429 or exc.code >= 500,
                ) from exc

        reply = await asyncio.to_thread(post)
        return af.LLMResponse(content=reply["content"])


def call(provider: Any, request: Request) -> af.LLMResponse:
    """What the loop does for each live call: the check, then the provider."""
    guard.check_model_requests_allowed(provider)
    response: af.LLMResponse = asyncio.run(provider.complete(request))
    return response


def test_real_requests_are_blocked_in_a_test_by_default(chat_server: ChatServer) -> None:
    assert guard.ALLOW_MODEL_REQUESTS is False  # the pytest plugin blocks them
    provider = LocalHttpProvider(chat_server.url + "/chat")
    with pytest.raises(af.ModelRequestsBlocked) as caught:
        call(provider, Request.from_served(served_request()))
    message = str(caught.value)
    assert "'local-http' (LocalHttpProvider)" in message
    assert "@pytest.mark.allow_model_requests" in message
    assert "allow_model_requests(True)" in message
    assert caught.value.option == "provider"
    assert chat_server.bodies == []  # nothing reached the server


def test_real_requests_are_allowed_inside_allow_model_requests(
    chat_server: ChatServer,
) -> None:
    provider = LocalHttpProvider(chat_server.url + "/chat")
    served = served_request()
    with af.allow_model_requests(True):
        assert guard.ALLOW_MODEL_REQUESTS is True
        response = call(provider, Request.from_served(served))
    assert response.content == "echo: hi"
    assert chat_server.bodies == [served]  # the provider was sent exactly the served request
    assert guard.ALLOW_MODEL_REQUESTS is False  # restored on leaving the block
    with pytest.raises(af.ModelRequestsBlocked):
        call(provider, Request.from_served(served))
    assert len(chat_server.bodies) == 1


def test_a_provider_error_from_the_server_carries_its_status(chat_server: ChatServer) -> None:
    provider = LocalHttpProvider(chat_server.url + "/busy")
    with af.allow_model_requests(True), pytest.raises(af.ProviderError) as caught:
        call(provider, Request.from_served(served_request()))
    assert (caught.value.status, caught.value.retryable) == (429, True)
    assert len(chat_server.bodies) == 1


@pytest.mark.allow_model_requests
def test_the_marker_allows_real_requests(chat_server: ChatServer) -> None:
    assert guard.ALLOW_MODEL_REQUESTS is True
    provider = LocalHttpProvider(chat_server.url + "/chat")
    assert call(provider, Request.from_served(served_request())).content == "echo: hi"
    with af.allow_model_requests(False), pytest.raises(af.ModelRequestsBlocked):
        call(provider, Request.from_served(served_request()))
    assert guard.ALLOW_MODEL_REQUESTS is True and len(chat_server.bodies) == 1


def test_the_setting_is_restored_however_the_block_ends() -> None:
    setting = af.allow_model_requests(True)
    with pytest.raises(RuntimeError), setting:
        assert guard.ALLOW_MODEL_REQUESTS is True
        with af.allow_model_requests(False):
            assert guard.ALLOW_MODEL_REQUESTS is False
            with setting:  # the same object entered again
                assert guard.ALLOW_MODEL_REQUESTS is True
            assert guard.ALLOW_MODEL_REQUESTS is False
        raise RuntimeError("leave")
    assert guard.ALLOW_MODEL_REQUESTS is False


@pytest.mark.parametrize("flag", [None, 1, "yes"])
def test_allow_model_requests_takes_a_bool(flag: Any) -> None:
    with pytest.raises(af.UsageError, match="allow_model_requests") as caught:
        af.allow_model_requests(flag)
    assert caught.value.option == "flag" and guard.ALLOW_MODEL_REQUESTS is False


def test_providers_that_make_no_requests_are_never_blocked() -> None:
    class Fake:
        name = "fake"

    class Truthy:
        name = "truthy"
        makes_requests = "yes"  # only True declares it

    local = LocalHttpProvider("http://127.0.0.1:9")
    local.makes_requests = False  # an instance may say so for itself
    for provider in (af.MockProvider(["x"]), Fake(), Truthy(), local):
        guard.check_model_requests_allowed(provider)
    assert guard.makes_requests(LocalHttpProvider("x")) is True


def test_a_blocked_provider_without_a_name_is_named_by_its_class() -> None:
    class Adapter:
        makes_requests = True

    with pytest.raises(af.ModelRequestsBlocked, match="provider 'Adapter' makes real"):
        guard.check_model_requests_allowed(Adapter())


# -- the docs example: docs/providers.md's provider, run as written ---------------------------

DOCS = Path(__file__).resolve().parents[2] / "docs" / "providers.md"


def docs_block(heading: str) -> str:
    """The first python block after ``heading`` in docs/providers.md."""
    text = DOCS.read_text(encoding="utf-8")
    start = text.index("```python\n", text.index(heading)) + len("```python\n")
    return text[start : text.index("```", start)]


def docs_provider() -> Any:
    namespace: dict[str, Any] = {}
    exec(compile(docs_block("## A complete example"), str(DOCS), "exec"), namespace)
    return namespace["ChatCompletions"]


class CompletionsServer(LocalServer):
    """A local chat-completions server: asks for the ``add`` tool after a user message,
    answers with the tool's result after a tool message; ``/v1/busy`` is 503, ``/v1/odd``
    replies in another shape."""

    def __init__(self) -> None:
        self.bodies: list[Any] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.bodies.append((self.path, body))
                if self.path == "/v1/busy/chat/completions":
                    self.answer(503, {"error": "overloaded"})
                elif self.path == "/v1/odd/chat/completions":
                    self.answer(200, {"text": "hello"})
                elif body["messages"][-1]["role"] == "tool":
                    message = {"role": "assistant", "content": body["messages"][-1]["content"]}
                    self.answer(200, {"choices": [{"message": message, "finish_reason": "stop"}]})
                else:
                    call = {
                        "id": "call-1",
                        "type": "function",
                        "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'},
                    }
                    message = {"role": "assistant", "content": None, "tool_calls": [call]}
                    self.answer(
                        200,
                        {
                            "choices": [{"message": message, "finish_reason": "tool_calls"}],
                            "usage": {"prompt_tokens": 12, "completion_tokens": 5},
                        },
                    )

            def answer(self, status: int, payload: Any) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self.serve(Handler, "/v1")


@pytest.fixture
def completions_server() -> Iterator[CompletionsServer]:
    server = CompletionsServer()
    try:
        yield server
    finally:
        server.close()


def test_the_docs_wire_format_snippet() -> None:
    namespace: dict[str, Any] = {"af": af, "ChatCompletions": docs_provider()}
    exec(compile(docs_block("**The translation, with no network.**"), str(DOCS), "exec"), namespace)
    namespace["test_wire_format"]()


def test_the_docs_provider_sends_commitments_as_text() -> None:
    commit = {"$commit": "cd" * 32}
    served = af.build_request(
        {
            "model": "m",
            "params": {"temperature": 0.0},
            "system_pieces": [{"source": "base", "text": "Be brief."}],
            "history": [
                {"role": "user", "content": commit},
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [{"id": "c", "name": "add", "arguments": commit}],
                },
                {"role": "tool", "tool_call_id": "c", "name": "add", "content": "5"},
            ],
        }
    )
    before = json.dumps(served)
    wire = docs_provider()("http://unused").wire(Request.from_served(served))
    assert json.dumps(served) == before  # the served request is not changed
    assert wire == {
        "model": "m",
        "temperature": 0.0,
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": json.dumps(commit)},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": "c",
                        "type": "function",
                        "function": {"name": "add", "arguments": json.dumps(commit)},
                    }
                ],
            },
            {"role": "tool", "content": "5", "tool_call_id": "c"},
        ],
    }


def test_the_docs_provider_is_blocked_in_a_test(completions_server: CompletionsServer) -> None:
    provider = docs_provider()(completions_server.url)
    agent = af.Agent(provider=provider, model="m")
    with pytest.raises(af.AgentFootprintError, match="blocked"):
        agent.run_sync("hi")
    assert completions_server.bodies == []


@pytest.mark.allow_model_requests
def test_the_docs_provider_runs_an_agent_against_a_local_server(
    completions_server: CompletionsServer,
) -> None:
    add = af.define_tool(
        name="add",
        description="Add two integers.",
        input_schema={
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
        execute=lambda args: args["a"] + args["b"],
    )
    agent = af.Agent(
        provider=docs_provider()(completions_server.url),
        model="m",
        system=["Use the tool."],
        tools=[add],
        temperature=0.0,
    )
    result = agent.run_sync("What is 2 + 3?")
    assert result.answer == "5" and result.calls == 2
    (path, first), (_, second) = completions_server.bodies
    assert path == "/v1/chat/completions"
    assert first["model"] == "m" and first["temperature"] == 0.0
    assert first["messages"] == [
        {"role": "system", "content": "Use the tool."},
        {"role": "user", "content": "What is 2 + 3?"},
    ]
    assert first["tools"][0]["function"]["name"] == "add"
    assert second["messages"][-1] == {"role": "tool", "content": "5", "tool_call_id": "call-1"}
    # what was sent is what the log proves was served
    served = af.served_at(agent.store, result.run_id, 1)
    assert [m.get("content") for m in served["messages"]][-1] == "5"


@pytest.mark.allow_model_requests
def test_the_docs_provider_raises_provider_errors(completions_server: CompletionsServer) -> None:
    provider_class = docs_provider()
    request = Request.from_served(served_request())
    with pytest.raises(af.ProviderError, match="HTTP 503: retry later") as busy:
        asyncio.run(provider_class(completions_server.url + "/busy").complete(request))
    assert (busy.value.status, busy.value.retryable) == (503, True)
    with pytest.raises(af.ProviderError, match="unexpected shape") as odd:
        asyncio.run(provider_class(completions_server.url + "/odd").complete(request))
    assert (odd.value.status, odd.value.retryable) == (200, False)
    completions_server.close()
    with pytest.raises(af.ProviderError, match="could not be reached") as down:
        asyncio.run(provider_class(completions_server.url).complete(request))
    assert (down.value.status, down.value.retryable) == (None, True)
