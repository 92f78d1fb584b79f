"""A fake OpenAI Chat Completions server: a real HTTP server on 127.0.0.1, in a thread.

It speaks the wire format (a JSON ``chat.completion``, or ``text/event-stream`` chunks
``data: {...}`` ending in ``data: [DONE]`` when the request asks to stream) and answers
each ``POST .../chat/completions`` (Azure's ``/openai/deployments/D/chat/completions?
api-version=...`` too) with the next item of its script: a reply, a tool call,
an HTTP error (status, body, ``Retry-After``), a stream cut mid-way, a stream that ends
without finishing. It records every request's exact body bytes and headers, so a test can
check the bytes against the wire digests a run recorded, and that the API key reached the
server while it is in no recorded evidence. Point ``openai(base_url=server.url)`` at it::

    with FakeOpenAI([reply("Hello!")]) as server:
        agent = af.Agent(provider=af.providers.openai(base_url=server.url), model="gpt-4o-mini")

Nothing here calls the SDK: the server is what an SDK talks to.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from agentfootprint.errors import ProviderError
from agentfootprint.runtime.provider import LLMResponse
from agentfootprint.testing._fake_http import QuietServer, Received

__all__ = [
    "Completion",
    "DroppedStream",
    "Failure",
    "FakeOpenAI",
    "Received",
    "UnfinishedStream",
    "bad_key",
    "context_too_long",
    "dead_url",
    "error_body",
    "model_not_found",
    "rate_limited",
    "reply",
    "server_error",
    "tool_reply",
]

CREATED = 1_700_000_000


# -- the script -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Completion:
    """A reply. ``tool_calls``: ``(id, name, arguments)`` with arguments an object or the
    JSON text to send. ``body``: a fixture served instead of a JSON reply (bytes: exactly;
    an object: as JSON); ``chunks``: one served instead of a stream (bytes: the SSE text
    exactly, one HTTP chunk per event; objects: one ``data:`` event each, then
    ``[DONE]``). ``delay``: seconds to wait before answering. ``hold``: a stream sends its
    first two events (the role, then the first piece of content), then waits until the
    test sets it before the rest (so a test can see what arrived while the server was
    still streaming); not set within a minute, the stream is cut."""

    content: str = ""
    tool_calls: tuple[tuple[str, str, Any], ...] = ()
    finish_reason: str | None = None
    prompt_tokens: int = 9
    completion_tokens: int = 12
    cached_tokens: int | None = 0
    model: str | None = None
    body: Mapping[str, Any] | bytes | None = None
    chunks: Sequence[Mapping[str, Any]] | bytes | None = None
    delay: float = 0.0
    hold: threading.Event | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class Failure:
    """An HTTP error: ``status``, a JSON ``body`` (or raw bytes), ``Retry-After``."""

    status: int
    body: Mapping[str, Any] | bytes | None = None
    retry_after: str | float | None = None
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class DroppedStream:
    """A streamed reply whose connection is cut after ``after`` events, mid-chunk."""

    reply: Completion = Completion(content="Hello there, how may I assist you today?")
    after: int = 2


@dataclass(frozen=True, slots=True)
class UnfinishedStream:
    """A stream that ends cleanly after ``after`` events: no finish_reason, no [DONE]."""

    reply: Completion = Completion(content="Hello there, how may I assist you today?")
    after: int = 2


Scripted = Completion | Failure | DroppedStream | UnfinishedStream


def reply(
    content: str, *, prompt_tokens: int = 9, completion_tokens: int = 12, cached_tokens: int = 0
) -> Completion:
    """A text reply with its usage."""
    return Completion(
        content=content,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        cached_tokens=cached_tokens,
    )


def tool_reply(*calls: tuple[str, str, Any], content: str = "", **usage: int) -> Completion:
    """A reply asking for tools: each call ``(id, name, arguments)``."""
    return Completion(content=content, tool_calls=tuple(calls), **usage)  # type: ignore[arg-type]


def error_body(
    message: str, type_: str, code: str | None, param: str | None = None
) -> dict[str, Any]:
    """An error body as OpenAI sends it."""
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


def rate_limited(retry_after: str | float | None = 0.05) -> Failure:
    return Failure(
        429,
        error_body(
            "Rate limit reached for gpt-4o-mini in organization org-fake on requests per min "
            "(RPM): Limit 3, Used 3, Requested 1. Please try again in 20s.",
            "requests",
            "rate_limit_exceeded",
        ),
        retry_after=retry_after,
    )


def server_error(status: int = 500, retry_after: str | float | None = None) -> Failure:
    return Failure(
        status,
        error_body(
            "The server had an error while processing your request. Sorry about that!",
            "server_error",
            None,
        ),
        retry_after=retry_after,
    )


def bad_key(shown: str = "sk-test-****1234") -> Failure:
    """401 as OpenAI sends it (the key masked in the message, as OpenAI masks it)."""
    return Failure(
        401,
        error_body(
            f"Incorrect API key provided: {shown}. You can find your API key at "
            "https://platform.openai.com/account/api-keys.",
            "invalid_request_error",
            "invalid_api_key",
        ),
    )


def model_not_found(model: str) -> Failure:
    return Failure(
        404,
        error_body(
            f"The model `{model}` does not exist or you do not have access to it.",
            "invalid_request_error",
            "model_not_found",
        ),
    )


def context_too_long(limit: int = 8192, used: int = 9000) -> Failure:
    return Failure(
        400,
        error_body(
            f"This model's maximum context length is {limit} tokens. However, your messages "
            f"resulted in {used} tokens. Please reduce the length of the messages.",
            "invalid_request_error",
            "context_length_exceeded",
            "messages",
        ),
    )


def scripted_reply(item: LLMResponse | ProviderError) -> Completion | Failure:
    """A reply of the provider contract (agentfootprint.testing.provider_contract) as this
    server sends it: an :class:`LLMResponse` as a completion (its uncached and cached prompt
    tokens summed into ``prompt_tokens``, as OpenAI counts them), a :class:`ProviderError` as
    the error status it carries."""
    if isinstance(item, ProviderError):
        kind = "server_error" if (item.status or 500) >= 500 else "invalid_request_error"
        return Failure(item.status or 500, error_body(str(item), kind, None))
    return Completion(
        content=item.content,
        tool_calls=tuple((c.id, c.name, c.arguments) for c in item.tool_calls),
        finish_reason=None if item.stop_reason == "stop" else item.stop_reason,
        prompt_tokens=item.usage.input + (item.usage.cache_read or 0),
        completion_tokens=item.usage.output,
        cached_tokens=item.usage.cache_read,
    )


def dead_url() -> str:
    """A base URL on 127.0.0.1 where nothing listens (a port bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


# -- the wire format --------------------------------------------------------------------------


def _usage(c: Completion) -> dict[str, Any]:
    usage: dict[str, Any] = {
        "prompt_tokens": c.prompt_tokens,
        "completion_tokens": c.completion_tokens,
        "total_tokens": c.prompt_tokens + c.completion_tokens,
    }
    if c.cached_tokens is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": c.cached_tokens, "audio_tokens": 0}
    usage["completion_tokens_details"] = {
        "reasoning_tokens": 0,
        "audio_tokens": 0,
        "accepted_prediction_tokens": 0,
        "rejected_prediction_tokens": 0,
    }
    return usage


def _arguments(arguments: Any) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def _finish(c: Completion) -> str:
    return c.finish_reason or ("tool_calls" if c.tool_calls else "stop")


def completion_json(c: Completion, *, model: str, n: int) -> dict[str, Any] | bytes:
    """``c`` as a ``chat.completion`` object, shaped like OpenAI's documented example."""
    if isinstance(c.body, bytes):
        return c.body
    if c.body is not None:
        return dict(c.body)
    message: dict[str, Any] = {
        "role": "assistant",
        "content": c.content or None,
        "refusal": None,
        "annotations": [],
    }
    if c.tool_calls:
        message["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": nm, "arguments": _arguments(a)}}
            for i, nm, a in c.tool_calls
        ]
    return {
        "id": f"chatcmpl-fake{n}",
        "object": "chat.completion",
        "created": CREATED,
        "model": c.model or model,
        "choices": [
            {"index": 0, "message": message, "logprobs": None, "finish_reason": _finish(c)}
        ],
        "usage": _usage(c),
        "service_tier": "default",
        "system_fingerprint": "fp_fake",
    }


def _pieces(text: str) -> list[str]:
    return re.findall(r"\S+\s*|\s+", text)


def completion_chunks(
    c: Completion, *, model: str, n: int, include_usage: bool
) -> list[dict[str, Any]]:
    """``c`` as ``chat.completion.chunk`` objects, as OpenAI streams them."""
    if isinstance(c.chunks, bytes):
        return [json.loads(e[len(b"data: ") :]) for e in sse_events(c.chunks) if b"[DONE]" not in e]
    if c.chunks is not None:
        return [dict(chunk) for chunk in c.chunks]

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": f"chatcmpl-fake{n}",
            "object": "chat.completion.chunk",
            "created": CREATED,
            "model": c.model or model,
            "system_fingerprint": "fp_fake",
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }

    chunks = [chunk({"role": "assistant", "content": "", "refusal": None})]
    chunks += [chunk({"content": piece}) for piece in _pieces(c.content)]
    for index, (call_id, name, arguments) in enumerate(c.tool_calls):
        head = {"index": index, "id": call_id, "type": "function"}
        chunks.append(
            chunk({"tool_calls": [{**head, "function": {"name": name, "arguments": ""}}]})
        )
        text = _arguments(arguments)
        cut = len(text) // 2
        for part in (text[:cut], text[cut:]):
            if part:
                chunks.append(
                    chunk({"tool_calls": [{"index": index, "function": {"arguments": part}}]})
                )
    chunks.append(chunk({}, _finish(c)))
    if include_usage:
        last = chunk({})
        last["choices"] = []
        last["usage"] = _usage(c)
        chunks.append(last)
    return chunks


def _event(data: Mapping[str, Any] | str) -> bytes:
    text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    return f"data: {text}\n\n".encode()


def sse_events(text: bytes) -> list[bytes]:
    """The events of an SSE body, each with its blank-line terminator."""
    return [part + b"\n\n" for part in text.split(b"\n\n") if part.strip()]


def stream_bytes(c: Completion, *, model: str, n: int, include_usage: bool) -> list[bytes]:
    """The events a stream of ``c`` sends, ``data: [DONE]`` last."""
    if isinstance(c.chunks, bytes):
        return sse_events(c.chunks)
    chunks = completion_chunks(c, model=model, n=n, include_usage=include_usage)
    return [*(_event(chunk) for chunk in chunks), _event("[DONE]")]


# -- the server -------------------------------------------------------------------------------


class FakeOpenAI:
    """The server. ``url`` is its base URL (``http://127.0.0.1:PORT/v1``); ``requests``
    every request received, in order; ``script`` the items still to answer with (a request
    with none left is answered 500 and counted in ``unscripted``)."""

    def __init__(self, script: Iterable[Scripted] = ()) -> None:
        self.script: list[Scripted] = list(script)
        self.requests: list[Received] = []
        self.unscripted = 0
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> FakeOpenAI:
        handler = _handler_for(self)
        server = QuietServer(("127.0.0.1", 0), handler)
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FakeOpenAI:
        return self.start() if self._server is None else self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("FakeOpenAI is not started: use start() or a with block")
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def add(self, *items: Scripted) -> None:
        with self._lock:
            self.script.extend(items)

    # -- answering ---------------------------------------------------------------------------

    def _next(self, received: Received) -> tuple[Scripted | None, int]:
        with self._lock:
            self.requests.append(received)
            n = len(self.requests)
            if not self.script:
                self.unscripted += 1
                return None, n
            return self.script.pop(0), n


def _handler_for(fake: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # else each reply waits out a delayed ACK (40 ms)

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            return None

        def _body(self) -> bytes:
            if self.headers.get("transfer-encoding", "").lower() == "chunked":
                data = bytearray()
                while True:
                    size = int(self.rfile.readline().strip().split(b";")[0], 16)
                    if size == 0:
                        self.rfile.readline()
                        return bytes(data)
                    data += self.rfile.read(size)
                    self.rfile.readline()
            return self.rfile.read(int(self.headers.get("content-length", "0")))

        def do_POST(self) -> None:
            body = self._body()
            received = Received(
                "POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body
            )
            # the path, its query left out (Azure's ``?api-version=...``)
            if not self.path.split("?", 1)[0].rstrip("/").endswith("/chat/completions"):
                with fake._lock:
                    fake.requests.append(received)
                self._json(
                    404, error_body(f"Unknown path {self.path}", "invalid_request_error", None)
                )
                return
            item, n = fake._next(received)
            try:
                request = json.loads(body)
            except ValueError:
                request = {}
            model = str(request.get("model", "")) if isinstance(request, dict) else ""
            stream = isinstance(request, dict) and request.get("stream") is True
            options = request.get("stream_options") if isinstance(request, dict) else None
            usage = isinstance(options, dict) and options.get("include_usage") is True
            if item is None:
                self._json(
                    500, error_body("FakeOpenAI: no scripted reply left", "server_error", None)
                )
            elif isinstance(item, Failure):
                self._failure(item)
            elif isinstance(item, DroppedStream | UnfinishedStream):
                events = stream_bytes(item.reply, model=model, n=n, include_usage=usage)
                self._stream(events[: item.after], cut=isinstance(item, DroppedStream))
            else:
                if item.delay:
                    time.sleep(item.delay)
                if stream:
                    events = stream_bytes(item, model=model, n=n, include_usage=usage)
                    self._stream(events, hold=item.hold)
                else:
                    self._json(200, completion_json(item, model=model, n=n))

        def _json(
            self, status: int, body: Mapping[str, Any] | bytes, headers: Mapping[str, str] = {}
        ) -> None:
            data = body if isinstance(body, bytes) else json.dumps(body, indent=2).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("x-request-id", "req_fake")
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def _failure(self, item: Failure) -> None:
            headers = dict(item.headers)
            if item.retry_after is not None:
                headers["Retry-After"] = str(item.retry_after)
            body = item.body if item.body is not None else b""
            self._json(item.status, body, headers)

        def _chunk(self, data: bytes) -> None:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

        def _stream(
            self, events: list[bytes], *, cut: bool = False, hold: threading.Event | None = None
        ) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream; charset=utf-8")
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("x-request-id", "req_fake")
            self.end_headers()
            for index, event in enumerate(events):
                self._chunk(event)
                if index == 1 and hold is not None and not hold.wait(timeout=60):
                    cut = True  # never released (a hang guard): the stream fails, cut
                    break
            if cut:  # half of a chunk, then the connection closes: an incomplete body
                partial = _event({"choices": [{"index": 0, "delta": {"content": "and th"}}]})
                self.wfile.write(f"{len(partial):x}\r\n".encode() + partial[: len(partial) // 2])
                self.wfile.flush()
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

    return Handler
