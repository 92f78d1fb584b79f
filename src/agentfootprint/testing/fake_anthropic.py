"""A fake Anthropic Messages API: a real HTTP server on 127.0.0.1, for tests.

It speaks ``POST /v1/messages`` as the API does (JSON, and server-sent events with
``event:`` and ``data:`` lines when the request asks for ``"stream": true``), answers from a
script, and records the exact bytes and headers of every request it receives, so a test can
check them against the wire digests a run recorded. Nothing is patched: the SDK talks HTTP
to a socket. Script failures the way the API fails (a status with its error body and
``Retry-After``, 529 overloaded, a stream dropped part way)::

    from agentfootprint.testing.fake_anthropic import FakeAnthropic, message, rate_limited

    with FakeAnthropic([rate_limited(retry_after=0), message("Hello!")]) as server:
        provider = af.providers.anthropic(api_key="test-key", base_url=server.url)
        ...
        assert len(server.received) == 2

A scripted message (a dict shaped like the API's ``Message``) is sent as JSON to a plain
request and as the stream of events the API would send to a streaming one.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from agentfootprint.errors import UsageError
from agentfootprint.testing._fake_http import QuietServer, Received

__all__ = [
    "FakeAnthropic",
    "Received",
    "Reply",
    "dropped_stream",
    "error",
    "message",
    "not_found",
    "overloaded",
    "parse_sse",
    "prompt_too_long",
    "rate_limited",
    "raw_stream",
    "server_error",
    "sse",
    "stream_events",
    "tool_use",
    "unauthorized",
]

#: the model scripted messages name unless told otherwise
MODEL = "claude-sonnet-4-5-20250929"


@dataclass(frozen=True, kw_only=True, slots=True)
class Reply:
    """One scripted answer.

    ``body``: a JSON value (sent as JSON; a ``Message`` dict becomes its events when the
    request streams) or exact bytes. ``events``: ``(event, data)`` pairs sent as a stream
    whatever the request asked. ``drop_after``: send that many events, then close the
    connection mid-body (``clean=False``: the chunked body is never finished, as when a
    connection breaks) or end the body there (``clean=True``: a stream cut short, with no
    ``message_stop``). ``content_type``: of a ``bytes`` body (``text/event-stream`` sends
    those bytes as a stream, exactly). ``delay``: seconds before the answer starts.
    """

    status: int = 200
    body: Any = None
    events: Sequence[tuple[str, Any]] | None = None
    retry_after: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    drop_after: int | None = None
    clean: bool = False
    #: the Content-Type of a ``body`` (default ``application/json``)
    content_type: str | None = None
    #: seconds to wait before answering (a slow model: timeouts, cancellation)
    delay: float = 0.0


# -- scripted replies, shaped like the API's documented examples --------------------------------


def tool_use(name: str, input: Mapping[str, Any], *, id: str = "toolu_01") -> dict[str, Any]:
    """A ``tool_use`` content block."""
    return {"type": "tool_use", "id": id, "name": name, "input": dict(input)}


def message(
    text: str = "",
    *,
    tool_uses: Iterable[Mapping[str, Any]] = (),
    stop_reason: str | None = None,
    input_tokens: int = 10,
    output_tokens: int = 5,
    cache_read: int | None = None,
    cache_write: int | None = None,
    model: str = MODEL,
    id: str = "msg_01",
) -> dict[str, Any]:
    """A ``Message`` as the API returns it: a text block (if any), then the tool uses;
    ``stop_reason`` defaults to ``tool_use`` when there are tool uses, else ``end_turn``."""
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    content.extend(dict(block) for block in tool_uses)
    usage: dict[str, Any] = {"input_tokens": input_tokens, "output_tokens": output_tokens}
    if cache_write is not None:
        usage["cache_creation_input_tokens"] = cache_write
    if cache_read is not None:
        usage["cache_read_input_tokens"] = cache_read
    calls = any(block.get("type") == "tool_use" for block in content)
    return {
        "id": id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason or ("tool_use" if calls else "end_turn"),
        "stop_sequence": None,
        "usage": usage,
    }


def error(
    status: int, kind: str, text: str, *, retry_after: str | int | float | None = None
) -> Reply:
    """An error reply: the API's body ``{"type": "error", "error": {"type", "message"}}``."""
    return Reply(
        status=status,
        body={"type": "error", "error": {"type": kind, "message": text}},
        retry_after=None if retry_after is None else str(retry_after),
    )


def rate_limited(retry_after: str | int | float | None = 0) -> Reply:
    return error(
        429,
        "rate_limit_error",
        "Number of request tokens has exceeded your per-minute rate limit",
        retry_after=retry_after,
    )


def overloaded() -> Reply:
    return error(529, "overloaded_error", "Overloaded")


def server_error() -> Reply:
    return error(500, "api_error", "Internal server error")


def unauthorized() -> Reply:
    return error(401, "authentication_error", "invalid x-api-key")


def not_found(model: str) -> Reply:
    return error(404, "not_found_error", f"model: {model}")


def prompt_too_long(tokens: int = 210_000, limit: int = 200_000) -> Reply:
    return error(
        400, "invalid_request_error", f"prompt is too long: {tokens} tokens > {limit} maximum"
    )


def raw_stream(body: bytes) -> Reply:
    """A stream of exactly these bytes (a recorded or documented event stream)."""
    return Reply(body=bytes(body), content_type="text/event-stream; charset=utf-8")


def dropped_stream(reply: Mapping[str, Any], *, after: int = 3, clean: bool = False) -> Reply:
    """``reply`` streamed, but only its first ``after`` events, then the connection closes
    (``clean``: the body ends normally there instead)."""
    return Reply(events=stream_events(reply), drop_after=after, clean=clean)


# -- streams ------------------------------------------------------------------------------------


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def stream_events(reply: Mapping[str, Any], *, piece: int = 4) -> list[tuple[str, Any]]:
    """The events the Messages API streams for ``reply`` (a ``Message`` dict): text in
    ``text_delta`` pieces of ``piece`` characters, tool input as ``input_json_delta``
    pieces, the usage split between ``message_start`` (input) and ``message_delta``
    (output), and a ``ping`` after the first block starts, as the API sends one."""
    usage = dict(reply.get("usage") or {})
    started = {key: value for key, value in usage.items() if key != "output_tokens"}
    started["output_tokens"] = 1
    head = {key: value for key, value in reply.items() if key not in ("content", "usage")}
    head.update(content=[], stop_reason=None, stop_sequence=None, usage=started)
    events: list[tuple[str, Any]] = [("message_start", {"type": "message_start", "message": head})]
    for index, block in enumerate(reply.get("content") or ()):
        if block.get("type") == "tool_use":
            opened = {**block, "input": {}}
            text = json.dumps(block.get("input", {}))
            deltas = [{"type": "input_json_delta", "partial_json": p} for p in _pieces(text, 8)]
        else:
            opened = {**block, "text": ""}
            deltas = [
                {"type": "text_delta", "text": p} for p in _pieces(block.get("text", ""), piece)
            ]
        events.append(
            (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": opened},
            )
        )
        if index == 0:
            events.append(("ping", {"type": "ping"}))
        events.extend(
            ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d})
            for d in deltas
        )
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {
                    "stop_reason": reply.get("stop_reason"),
                    "stop_sequence": reply.get("stop_sequence"),
                },
                "usage": {"output_tokens": usage.get("output_tokens", 0)},
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def sse(event: str, data: Any) -> bytes:
    """One server-sent event as the API writes it."""
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def parse_sse(body: bytes) -> list[tuple[str, Any]]:
    """``(event, data)`` pairs of an SSE body (a fixture file, say)."""
    events: list[tuple[str, Any]] = []
    for chunk in body.decode().replace("\r\n", "\n").split("\n\n"):
        name, data = "", []
        for line in chunk.split("\n"):
            if line.startswith("event:"):
                name = line[len("event:") :].strip()
            elif line.startswith("data:"):
                data.append(line[len("data:") :].strip())
        if name or data:
            events.append((name, json.loads("\n".join(data)) if data else None))
    return events


# -- the server ---------------------------------------------------------------------------------


class FakeAnthropic:
    """A Messages API on ``127.0.0.1`` (a free port) in a thread; ``url`` is its base URL.

    Each request takes the next scripted reply (:meth:`script` adds more); ``received``
    holds every request, in order. ``api_key``: when set, a request not carrying it
    (``x-api-key`` or ``Authorization: Bearer``) gets 401 as the API answers a bad key.
    A request beyond the script gets a 400 ``invalid_request_error`` saying so.
    """

    def __init__(
        self, replies: Iterable[Reply | Mapping[str, Any]] = (), *, api_key: str | None = None
    ) -> None:
        self._replies: list[Reply | Mapping[str, Any]] = list(replies)
        self._lock = threading.Lock()
        self.api_key = api_key
        self.received: list[Received] = []
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        if self._server is None:
            raise UsageError("FakeAnthropic is not running: use it as a context manager")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def script(self, *replies: Reply | Mapping[str, Any]) -> None:
        """Add replies to the end of the script."""
        with self._lock:
            self._replies.extend(replies)

    @property
    def remaining(self) -> int:
        with self._lock:
            return len(self._replies)

    def start(self) -> FakeAnthropic:
        if self._server is None:
            self._server = QuietServer(("127.0.0.1", 0), _handler(self))
            self._thread = threading.Thread(
                target=self._server.serve_forever,
                kwargs={"poll_interval": 0.02},  # so close() returns at once
                name="fake-anthropic",
                daemon=True,
            )
            self._thread.start()
        return self

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            if self._thread is not None:
                self._thread.join(timeout=5)
            self._server = None

    def __enter__(self) -> FakeAnthropic:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        where = self.url if self._server is not None else "stopped"
        return f"FakeAnthropic({where}, received={len(self.received)}, remaining={self.remaining})"

    def _take(self, received: Received) -> Reply | Mapping[str, Any]:
        with self._lock:
            self.received.append(received)
            if received.path.split("?")[0] != "/v1/messages":
                return error(404, "not_found_error", f"no route {received.path}")
            if self.api_key is not None and not _carries(received.headers, self.api_key):
                return unauthorized()
            if self._replies:
                return self._replies.pop(0)
        return error(
            400,
            "invalid_request_error",
            f"fake Anthropic server: no scripted reply left for request {len(self.received)}",
        )


def _carries(headers: Mapping[str, str], key: str) -> bool:
    return headers.get("x-api-key") == key or headers.get("authorization") == f"Bearer {key}"


def _handler(server: FakeAnthropic) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # else each reply waits out a delayed ACK (40 ms)

        def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
            return None

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length)
            received = Received(
                method="POST",
                path=self.path,
                headers={name.lower(): value for name, value in self.headers.items()},
                body=body,
            )
            scripted = server._take(received)
            reply = scripted if isinstance(scripted, Reply) else Reply(body=dict(scripted))
            if reply.delay:
                time.sleep(reply.delay)
            if reply.events is not None:
                self._stream(reply, reply.events)
            elif received.streaming and reply.status == 200 and isinstance(reply.body, dict):
                self._stream(reply, stream_events(reply.body))
            else:
                self._json(reply)

        def _head(self, reply: Reply, content_type: str) -> None:
            self.send_response(reply.status)
            self.send_header("Content-Type", content_type)
            self.send_header("request-id", f"req_fake_{len(server.received)}")
            if reply.retry_after is not None:
                self.send_header("retry-after", reply.retry_after)
            for name, value in reply.headers.items():
                self.send_header(name, value)

        def _json(self, reply: Reply) -> None:
            data = reply.body if isinstance(reply.body, bytes) else json.dumps(reply.body).encode()
            self._head(reply, reply.content_type or "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _stream(self, reply: Reply, events: Sequence[tuple[str, Any]]) -> None:
            self._head(reply, "text/event-stream; charset=utf-8")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for n, (name, data) in enumerate(events):
                if reply.drop_after is not None and n >= reply.drop_after:
                    break
                chunk = sse(name, data)
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.flush()
            if reply.drop_after is not None and not reply.clean:
                self.close_connection = True  # the body is never finished: a broken stream
                return
            self.wfile.write(b"0\r\n\r\n")

    return Handler
