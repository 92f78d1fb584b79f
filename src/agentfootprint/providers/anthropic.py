"""The Anthropic Messages API provider, through Anthropic's official SDK.

The SDK builds and parses the HTTP exchanges; it is given an ``httpx2`` client of ours
(:mod:`agentfootprint.providers._http`) whose transport records the exact bytes of every
attempt, and its own retries are off: ours retry rate limits, 529 overloaded, other
server errors and broken connections, each attempt recorded in the call's
:class:`~agentfootprint.runtime.provider.WireRecord`. The translation sends the served
request and nothing else: system pieces stay separate text blocks (their boundaries are
where prompt-cache breakpoints go), tool results become the user turn's ``tool_result``
blocks, and ``max_tokens`` (which the API requires) is the request's, else
``default_max_tokens``. Prompt caching: the adapter declares ``prompt_caching =
"breakpoints"``, so the ``caching`` feature marks the last system piece, the last tool and
the last message of every request (projection 3's ``prompt_cache`` member, decided by a
stage and recorded); each marker is sent as ``cache_control: {"type": "ephemeral"}`` on that
system text block, tool, or the message's last content block.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

import httpx2

from agentfootprint.errors import ProviderError, UsageError
from agentfootprint.providers import _http
from agentfootprint.runtime.provider import LLMResponse, Request, ToolCall, Usage
from agentfootprint.runtime.sync_loop import loop_running
from agentfootprint.version import install_command

if TYPE_CHECKING:
    import anthropic as sdk

__all__ = ["AnthropicMessages", "anthropic", "translate"]

ENV_VAR = "ANTHROPIC_API_KEY"
DEFAULT_BASE_URL = "https://api.anthropic.com"
#: the sampling settings the adapter sends (``stop`` as ``stop_sequences``; the Messages API
#: has no seed nor penalties)
SAMPLING_SETTINGS = frozenset({"top_p", "stop", "model_settings"})
#: the request fields the adapter sets itself: ``model_settings`` may not set them
BODY_FIELDS = frozenset(
    {"model", "max_tokens", "messages", "system", "tools", "stream"}
    | {"temperature", "top_p", "stop_sequences"}
)
#: the key the in-memory client of :meth:`AnthropicMessages.wire_request` is given (with a
#: user's own client the adapter holds none; no request leaves the process)
_NO_KEY = "rebuilding-wire-bytes-only"
#: ``await on_token(text)``: where a streamed reply's text goes as it arrives
TokenSink = Callable[[str], Awaitable[None]]


def _sdk() -> Any:
    """The SDK module, imported on first use (importing agentfootprint never imports it)."""
    try:
        import anthropic as module
    except ImportError as exc:
        raise UsageError(
            f"the anthropic provider needs the Anthropic SDK: {install_command('anthropic')}",
            option="provider",
        ) from exc
    return module


def _text(value: Any) -> str:
    """Served text as is; anything else (a redaction commitment, an object) as JSON text,
    spelled one way whatever its key order (:func:`_http.json_text`)."""
    return value if isinstance(value, str) else _http.json_text(value)


def _tool_input(arguments: Any) -> Any:
    """A tool_use block's ``input`` must be an object: an object is sent as it is (a
    redaction commitment included); JSON text of an object is parsed; any other text (a
    model that sent arguments that were not an object) is sent as ``{"arguments": text}``."""
    if isinstance(arguments, dict):
        return _http.normalized(arguments)
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            return _http.normalized(parsed)
    return {"arguments": _http.normalized(arguments)}


def translate(request: Request, *, default_max_tokens: int = 1024) -> dict[str, Any]:
    """The ``messages.create`` arguments for ``request`` (besides ``stream``): ``model``,
    ``max_tokens``, ``system`` (one text block per piece), ``messages``, ``tools`` and, in
    ``extra_body``, every other served parameter (``temperature``; the answer's schema,
    ``output``, as ``output_config``). Reads the request,
    never changes it, adds nothing it does not hold. Objects from the request (schemas,
    tool inputs, parameters) are sent normalized (:func:`_http.normalized`: sorted members,
    integral floats as ints), as the log gives them back, so the bytes sent are the bytes
    rebuilt from the log."""
    messages: list[dict[str, Any]] = []
    #: per served message, where a cache marker on it goes: the last content block it
    #: became, or (a plain text message) the wire message whose text becomes a block
    lasts: list[dict[str, Any]] = []
    results: list[dict[str, Any]] | None = None  # the open user turn of tool results
    for message in request.messages:
        if message.role == "tool":
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": _text(message.tool_call_id or ""),
                "content": _text(message.content),
            }
            if message.is_error:
                block["is_error"] = True
            if results is None:
                results = []
                messages.append({"role": "user", "content": results})
            results.append(block)
            lasts.append(block)
            continue
        results = None
        if message.role == "assistant" and message.tool_calls:
            blocks: list[dict[str, Any]] = []
            if message.content:
                blocks.append({"type": "text", "text": _text(message.content)})
            for call in message.tool_calls:
                if isinstance(call, ToolCall):
                    blocks.append(
                        {
                            "type": "tool_use",
                            "id": _text(call.id),
                            "name": _text(call.name),
                            "input": _tool_input(call.arguments),
                        }
                    )
                else:  # a call the view kept as it was (a commitment): sent as text
                    blocks.append({"type": "text", "text": _text(call)})
            messages.append({"role": "assistant", "content": blocks})
            lasts.append(blocks[-1])
        else:
            messages.append({"role": message.role, "content": _text(message.content)})
            lasts.append(messages[-1])
    params = dict(request.params)
    max_tokens = params.pop("max_tokens", None)
    settings = params.pop("model_settings", None)
    if "output" in params:  # the answer's schema: Anthropic's structured outputs
        params["output_config"] = _output_config(params.pop("output"))
    if "stop" in params:  # the Messages API's name, and always a list there
        stop = params.pop("stop")
        params["stop_sequences"] = [stop] if isinstance(stop, str) else stop
    arguments: dict[str, Any] = {
        "model": request.model,
        "max_tokens": default_max_tokens if max_tokens is None else _http.normalized(max_tokens),
        "messages": messages,
    }
    if request.system:
        arguments["system"] = [{"type": "text", "text": _text(p.text)} for p in request.system]
    if request.tools:
        arguments["tools"] = [
            {
                "name": _text(tool.name),
                "description": _text(tool.description),
                "input_schema": _http.normalized(tool.parameters),
            }
            for tool in request.tools
        ]
    # sent as extra fields (the SDK merges them after its own), members sorted: temperature
    # has always gone so, and the bytes of a run recorded before must not change
    extra = {**params, **_http.added_fields(settings, {*arguments, *params, *BODY_FIELDS})}
    if extra:
        arguments["extra_body"] = _http.normalized(extra)
    markers = request.cache
    if markers:
        for i in markers.system:
            arguments["system"][i]["cache_control"] = _ephemeral()
        for i in markers.tools:
            arguments["tools"][i]["cache_control"] = _ephemeral()
        for i in markers.messages:
            target = lasts[i]
            if "role" in target:  # plain text: sent as one text block that can carry it
                target["content"] = [{"type": "text", "text": target["content"]}]
                target = target["content"][0]
            target["cache_control"] = _ephemeral()
    return arguments


def _output_config(output: Any) -> dict[str, Any]:
    """The served ``params.output`` (``{name, schema, strict}``, ``output_type``) as the
    Messages API's structured outputs: ``{"format": {"type": "json_schema", "schema"}}``.
    The API always holds the reply to the schema (it has no non-strict mode); a schema it
    cannot take is answered with a 400 the run fails on."""
    if not isinstance(output, Mapping) or not isinstance(output.get("schema"), Mapping):
        raise ProviderError(
            "params.output must be an object holding the answer's schema (output_type), got "
            f"{type(output).__name__}: it cannot be sent",
            retryable=False,
        )
    return {"format": {"type": "json_schema", "schema": _http.normalized(output["schema"])}}


def _ephemeral() -> dict[str, str]:
    """Anthropic's cache control for a breakpoint (the default five-minute cache)."""
    return {"type": "ephemeral"}


def _usage(usage: Any) -> Usage:
    """Usage as Anthropic reports it (cache figures absent -> None, left out of the record)."""
    return Usage(
        input=getattr(usage, "input_tokens", None) or 0,
        output=getattr(usage, "output_tokens", None) or 0,
        cache_read=getattr(usage, "cache_read_input_tokens", None),
        cache_write=getattr(usage, "cache_creation_input_tokens", None),
    )


def _reply(blocks: list[Any], usage: Usage, stop_reason: str | None) -> LLMResponse:
    """Text blocks joined, tool_use blocks as calls; other blocks (thinking, server tools)
    are not part of the recorded reply."""
    text = "".join(
        getattr(b, "text", "") or "" for b in blocks if getattr(b, "type", None) == "text"
    )
    # a block missing a member keeps a default the loop names (a tool call without an id)
    calls = tuple(
        ToolCall(
            id=getattr(b, "id", ""), name=getattr(b, "name", ""), arguments=getattr(b, "input", {})
        )
        for b in blocks
        if getattr(b, "type", None) == "tool_use"
    )
    return LLMResponse(
        content=text, tool_calls=calls, usage=usage, stop_reason=stop_reason or "stop"
    )


_USAGE_KEYS = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
)


class _Block:
    """A content block being assembled from a stream."""

    __slots__ = ("id", "input", "name", "parts", "type")

    def __init__(self, start: Any) -> None:
        self.type: str = getattr(start, "type", "")
        self.id: str = getattr(start, "id", "")
        self.name: str = getattr(start, "name", "")
        self.parts: list[str] = [getattr(start, "text", "") or ""] if self.type == "text" else []
        self.input: Any = getattr(start, "input", None)

    @property
    def text(self) -> str:
        return "".join(self.parts)

    def finish(self) -> None:
        if self.type == "tool_use" and self.parts:
            raw = "".join(self.parts)
            try:
                self.input = json.loads(raw)
            except ValueError:
                self.input = raw  # as the model sent it: the loop answers unparsable arguments
        elif self.type == "tool_use" and self.input is None:
            self.input = {}


async def _assemble(stream: Any, on_token: TokenSink | None) -> LLMResponse:
    """The reply a Messages stream carries: text and tool input assembled block by block,
    ``on_token`` awaited for each text delta, usage from ``message_start`` updated by
    ``message_delta`` (whose counts are cumulative). A stream that ends before
    ``message_stop`` raises :class:`_http.StreamIncomplete`."""
    blocks: dict[int, _Block] = {}
    usage: dict[str, int | None] = {}
    stop_reason: str | None = None
    stopped = False
    async for event in stream:
        kind = getattr(event, "type", None)
        if kind == "message_start":
            reported = event.message.usage
            for key in _USAGE_KEYS:
                usage[key] = getattr(reported, key, None)
        elif kind == "content_block_start":
            blocks[event.index] = _Block(event.content_block)
        elif kind == "content_block_delta":
            block = blocks.get(event.index)
            delta = event.delta
            if block is None:
                continue
            if delta.type == "text_delta":
                block.parts.append(delta.text)
                if on_token is not None and delta.text:
                    await on_token(delta.text)
            elif delta.type == "input_json_delta":
                block.parts.append(delta.partial_json)
        elif kind == "content_block_stop":
            if event.index in blocks:
                blocks[event.index].finish()
        elif kind == "message_delta":
            stop_reason = getattr(event.delta, "stop_reason", None) or stop_reason
            for key in _USAGE_KEYS:
                value = getattr(event.usage, key, None)
                if value is not None:
                    usage[key] = value
        elif kind == "message_stop":
            stopped = True
    if not stopped:
        raise _http.StreamIncomplete("it stopped before its message_stop event")
    ordered = [blocks[i] for i in sorted(blocks)]
    return _reply(
        ordered,
        Usage(
            input=usage.get("input_tokens") or 0,
            output=usage.get("output_tokens") or 0,
            cache_read=usage.get("cache_read_input_tokens"),
            cache_write=usage.get("cache_creation_input_tokens"),
        ),
        stop_reason,
    )


def _context_too_long(status: int, body: Any) -> bool:
    """400 ``prompt is too long`` (or 413 ``request_too_large``) from the Messages API."""
    if status == 413:
        return True
    error = body.get("error") if isinstance(body, Mapping) else None
    text = error.get("message") if isinstance(error, Mapping) else None
    return status == 400 and isinstance(text, str) and "too long" in text.lower()


class AnthropicMessages:
    """Sends each request to the Messages API (``POST {base_url}/v1/messages``).

    Made by :func:`anthropic`. ``stream=True`` streams every call (the same HTTP request
    whether or not anyone listens for tokens; the recorded reply is the assembled one).
    """

    name = "anthropic"
    makes_requests = True
    #: the cache strategy the ``caching`` feature uses by default: marked breakpoints
    prompt_caching = "breakpoints"
    sampling_settings: frozenset[str] = SAMPLING_SETTINGS
    body_fields: frozenset[str] = BODY_FIELDS
    #: ``params.output`` (``output_type``) is sent as ``output_config.format``
    structured_output = True

    def __init__(
        self,
        *,
        api_key: str | None,
        base_url: str,
        timeout: float,
        max_retries: int,
        max_retry_wait: float,
        stream: bool,
        default_max_tokens: int,
        extra_headers: Mapping[str, str] | None,
        client: sdk.AsyncAnthropic | None = None,
    ) -> None:
        self._sdk = _sdk()
        #: the user's own SDK client (``client=``), or None: the adapter builds its own
        self.client = client
        # with a client: its key (or token), held to scrub it from error messages only
        token = None
        if client is not None:
            api_key = client.api_key if isinstance(client.api_key, str) else None
            token = client.auth_token if isinstance(client.auth_token, str) else None
        self._key = _http.KeyHolder(api_key)
        self._secrets = _http.Secrets((api_key, token))
        self.base_url = base_url
        self.timeout = timeout
        self.stream = stream
        #: ``LLMToken`` events are fed by a streaming adapter only
        self.streams = stream
        self.default_max_tokens = default_max_tokens
        self._headers = dict(extra_headers or {})
        #: the retry policy (tests may replace it: its ``sleep`` is injectable)
        self.retry = _http.RetryPolicy(max_retries=max_retries, max_retry_wait=max_retry_wait)
        self._vendor = _http.Vendor(
            label="Anthropic",
            env_var=ENV_VAR,
            base_url=base_url,
            timeout=timeout,
            status_error=self._sdk.APIStatusError,
            connection_error=self._sdk.APIConnectionError,
            timeout_error=self._sdk.APITimeoutError,
            context_too_long=_context_too_long,
            key_source=None if client is None else f"the {type(client).__name__} given as client=",
        )
        self._clients: _http.PerLoop[sdk.AsyncAnthropic] | _http.OwnClient[sdk.AsyncAnthropic]
        if client is not None:
            # last, so a client refused is left as it was: its HTTP client's transports
            # show the adapter its bytes from now on
            _http.observe(getattr(client, "_client", None), sdk_client=type(client).__name__)
            # the SDK's own retries off (each attempt is ours to record); the copy shares
            # the client's HTTP client
            self._clients = _http.OwnClient(client.with_options(max_retries=0))
        else:
            self._clients = _http.PerLoop(self._client, timeout=timeout)

    def _client(self, http: httpx2.AsyncClient) -> sdk.AsyncAnthropic:
        client: sdk.AsyncAnthropic = self._sdk.AsyncAnthropic(
            api_key=self._key.value or _NO_KEY,
            base_url=self.base_url,
            http_client=http,
            max_retries=0,
            timeout=self.timeout,
            default_headers=self._headers or None,
        )
        return client

    def __repr__(self) -> str:
        own = f", client={type(self.client).__name__}" if self.client is not None else ""
        return (
            f"AnthropicMessages(base_url={self.base_url!r}, stream={self.stream}, "
            f"timeout={self.timeout:g}, max_retries={self.retry.max_retries}{own})"
        )

    def describe(self) -> dict[str, str]:
        """What decides the wire bytes besides the served request (recorded in run.open):
        the versions, and whether it streams."""
        from agentfootprint.version import __version__

        return {
            "adapter": self.name,
            "adapter_version": __version__,
            "sdk": f"anthropic {self._sdk.__version__}",
            "httpx": f"httpx2 {httpx2.__version__}",
            "stream": "true" if self.stream else "false",
            # sent when the request sets no max_tokens: it decides the wire bytes too
            "default_max_tokens": str(self.default_max_tokens),
        }

    def arguments(self, request: Request) -> dict[str, Any]:
        """The ``messages.create`` arguments for ``request``."""
        arguments = translate(request, default_max_tokens=self.default_max_tokens)
        if self.stream:
            arguments["stream"] = True
        return arguments

    async def complete(self, request: Request, *, on_token: TokenSink | None = None) -> LLMResponse:
        request = Request.from_served(request)
        client = self._clients.get()
        arguments = self.arguments(request)

        async def attempt() -> LLMResponse:
            return await self._attempt(client, arguments, on_token)

        response, wire = await _http.call(
            attempt,
            vendor=self._vendor,
            retry=self.retry,
            model=request.model,
            secrets=self._secrets,
        )
        return LLMResponse(
            content=response.content,
            tool_calls=response.tool_calls,
            usage=response.usage,
            stop_reason=response.stop_reason,
            wire=wire,
        )

    async def aclose(self) -> None:
        """Close the HTTP connections this event loop opened."""
        await self._clients.aclose()

    async def _attempt(
        self, client: Any, arguments: dict[str, Any], on_token: TokenSink | None
    ) -> LLMResponse:
        """One SDK call (a stream consumed to its end inside it)."""
        if not self.stream:
            message = await client.messages.create(**arguments)
            blocks, usage = getattr(message, "content", None), getattr(message, "usage", None)
            if not isinstance(blocks, list) or usage is None:
                raise _http.BadReply(
                    f"{self.base_url} answered 200 with no message (content and usage "
                    "missing): is base_url an Anthropic Messages API?"
                )
            return _reply(blocks, _usage(usage), getattr(message, "stop_reason", None))
        stream = await client.messages.create(**arguments)
        try:
            return await _assemble(stream, on_token)
        except self._sdk.APIStatusError as exc:  # an ``error`` event in the stream
            detail = exc.api_message or exc.message
            raise _http.StreamIncomplete(
                f"the server sent an error event ({exc.type or 'error'}: {detail})"
            ) from exc
        finally:
            await stream.close()

    def wire_request(self, request: Request | Mapping[str, Any]) -> bytes:
        """The exact body :meth:`complete` sends for ``request``: built by the same SDK
        calls, answered by an in-memory transport (no network), so it is a function of the
        served request and the versions :meth:`describe` names."""
        served = Request.from_served(request)
        result: list[bytes] = []
        error: list[BaseException] = []

        def run() -> None:
            try:
                result.append(asyncio.run(self._wire_request(served)))
            except BaseException as exc:  # handed back to the caller's thread
                error.append(exc)

        if not loop_running():
            run()
        else:  # inside an event loop: build it on a thread of its own
            worker = threading.Thread(target=run, name="anthropic-wire-request")
            worker.start()
            worker.join()
        if error:
            raise error[0]
        return result[0]

    async def _wire_request(self, request: Request) -> bytes:
        sent: list[bytes] = []

        def answer(http_request: httpx2.Request) -> httpx2.Response:
            sent.append(bytes(http_request.content))
            if self.stream:
                body = b'event: message_stop\ndata: {"type": "message_stop"}\n\n'
                return httpx2.Response(
                    200, content=body, headers={"content-type": "text/event-stream"}
                )
            return httpx2.Response(200, json=_EMPTY_MESSAGE)

        async with httpx2.AsyncClient(transport=httpx2.MockTransport(answer)) as http:
            client = self._client(http)
            reply = await client.messages.create(**self.arguments(request))
            if self.stream:
                await reply.close()
        return sent[0]


#: what the in-memory transport of :meth:`AnthropicMessages.wire_request` answers
_EMPTY_MESSAGE: dict[str, Any] = {
    "id": "msg_wire",
    "type": "message",
    "role": "assistant",
    "model": "",
    "content": [],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {"input_tokens": 0, "output_tokens": 0},
}


def _positive(option: str, value: object, *, integer: bool = False) -> None:
    kinds: tuple[type, ...] = (int,) if integer else (int, float)
    if type(value) not in kinds or value <= 0:  # type: ignore[operator]
        what = "an int > 0" if integer else "a number of seconds > 0"
        raise UsageError(f"{option} must be {what}, got {value!r}", option=option)


def anthropic(
    *,
    api_key: str | None = None,
    base_url: str | None = None,
    timeout: float | None = None,
    max_retries: int = 2,
    max_retry_wait: float = 30.0,
    stream: bool = False,
    default_max_tokens: int = 1024,
    extra_headers: Mapping[str, str] | None = None,
    client: sdk.AsyncAnthropic | None = None,
) -> AnthropicMessages:
    """A provider for Anthropic's Messages API.

    ``api_key``: else the environment's ``ANTHROPIC_API_KEY`` (required). ``base_url``:
    else ``ANTHROPIC_BASE_URL``, else ``https://api.anthropic.com``. ``timeout``: seconds
    per attempt (60). ``max_retries``: attempts after the first for 429, 5xx (529 overloaded
    included) and broken connections, waiting as ``Retry-After`` says (at most
    ``max_retry_wait`` seconds), else backing off. ``stream``: stream every call (token
    events reach listeners). ``default_max_tokens``: the ``max_tokens`` sent when the
    request sets none (the API requires one). ``extra_headers``: sent with every request
    (not recorded). ``client``: your own ``AsyncAnthropic``, used as it is (its key,
    address, headers and timeout: ``api_key``, ``base_url``, ``timeout`` and
    ``extra_headers`` are then refused); its HTTP client's transports are wrapped so the
    wire receipt still digests the exact bytes, and the adapter never closes it.
    """
    import os

    module = _sdk()  # first: without the SDK nothing else matters
    if client is not None:
        if not isinstance(client, module.AsyncAnthropic):
            kind = f"{type(client).__module__}.{type(client).__qualname__}"
            sync = " (the adapter is async)" if isinstance(client, module.Anthropic) else ""
            raise UsageError(
                f"client= must be an anthropic.AsyncAnthropic, got {kind}{sync}",
                option="client",
            )
        _http.beside_client(
            {
                "api_key": api_key,
                "base_url": base_url,
                "timeout": timeout,
                "extra_headers": extra_headers,
            },
            sdk_client=type(client).__name__,
        )
    timeout = 60.0 if timeout is None else timeout
    _positive("timeout", timeout)
    _positive("default_max_tokens", default_max_tokens, integer=True)
    if type(stream) is not bool:
        raise UsageError(f"stream must be True or False, got {stream!r}", option="stream")
    if base_url is not None and (not isinstance(base_url, str) or not base_url.strip()):
        raise UsageError(
            f"base_url must be the API's URL as a str, got {base_url!r}", option="base_url"
        )
    if extra_headers is not None and not (
        isinstance(extra_headers, Mapping)
        and all(isinstance(k, str) and isinstance(v, str) for k, v in extra_headers.items())
    ):
        raise UsageError(
            "extra_headers must be a mapping of header names to str values",
            option="extra_headers",
        )
    if client is not None:
        key = None
        url = str(client.base_url).rstrip("/")
        timeout = _http.seconds_of(client.timeout)
    else:
        key = _http.api_key(api_key, ENV_VAR, required=True, vendor="Anthropic")
        url = (base_url or os.environ.get("ANTHROPIC_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
    return AnthropicMessages(
        api_key=key,
        base_url=url,
        timeout=float(timeout),
        max_retries=max_retries,
        max_retry_wait=max_retry_wait,
        stream=stream,
        default_max_tokens=default_max_tokens,
        extra_headers=extra_headers,
        client=client,
    )
