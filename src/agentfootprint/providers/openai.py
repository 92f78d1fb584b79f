"""The OpenAI Chat Completions adapter (also OpenAI-compatible servers through ``base_url``).

The official ``openai`` SDK builds the HTTP request and parses the reply (and the stream);
it is given an ``httpx2.AsyncClient`` of ours whose transport records the exact bytes of
every attempt (:mod:`agentfootprint.providers._http`), and its own retries are off so each
attempt is ours to retry and record. The adapter translates the served request and nothing
else: what it sends is a deterministic function of the served request, the options that
shape the body (``stream``, ``max_tokens_field``) and the versions :meth:`describe` names,
which is what :meth:`OpenAIChat.wire_request` rebuilds.
"""

from __future__ import annotations

import json
import math
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, cast

import httpx2

from agentfootprint.errors import ProviderError, UsageError
from agentfootprint.providers import _http
from agentfootprint.runtime.provider import (
    LLMResponse,
    Message,
    Request,
    ToolCall,
    Usage,
)
from agentfootprint.version import __version__, install_command

if TYPE_CHECKING:
    import openai as openai_sdk

__all__ = ["DEFAULT_BASE_URL", "ENV_VAR", "OpenAIChat", "openai"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"
ENV_VAR = "OPENAI_API_KEY"
#: sent as the key to a keyless OpenAI-compatible server (the SDK insists on one)
NO_KEY = "no-key"
TokenSink = Callable[[str], Awaitable[None]]
MaxTokensField = Literal["max_completion_tokens", "max_tokens"]

#: served params sent under their own name (Chat Completions' sampling fields)
_NAMED = frozenset(
    {"temperature", "top_p", "stop", "seed", "presence_penalty", "frequency_penalty"}
)
#: the sampling settings the adapter sends (``model_settings``: extra fields, merged last)
SAMPLING_SETTINGS = frozenset(
    {"top_p", "stop", "seed", "presence_penalty", "frequency_penalty", "model_settings"}
)
#: the request fields the adapter sets itself: ``model_settings`` may not set them
BODY_FIELDS = frozenset(
    {"model", "messages", "tools", "max_tokens", "max_completion_tokens", "stream"}
    | {"stream_options", *_NAMED}
)

_CONTEXT_CODES = frozenset({"context_length_exceeded", "string_above_max_length"})
_CONTEXT_TYPES = frozenset({"exceed_context_size_error"})  # llama.cpp's server
_CONTEXT_WORDS = ("maximum context length", "context length", "context size", "context window")


def _sdk() -> Any:
    """The ``openai`` SDK, or a UsageError saying how to install it."""
    try:
        import openai as sdk
    except ImportError as exc:
        raise UsageError(
            f"the openai provider needs the OpenAI SDK: {install_command('openai')}",
            option="provider",
        ) from exc
    return sdk


def _context_too_long(status: int, body: Any) -> bool:
    """OpenAI's ``context_length_exceeded`` (and what vLLM and llama.cpp's server say)."""
    if status == 413:
        return True
    error = body.get("error", body) if isinstance(body, Mapping) else None
    if not isinstance(error, Mapping):
        return False
    if error.get("code") in _CONTEXT_CODES or error.get("type") in _CONTEXT_TYPES:
        return True
    message = error.get("message")
    return isinstance(message, str) and any(w in message.lower() for w in _CONTEXT_WORDS)


# -- the served request -> Chat Completions ----------------------------------------------------


def _text(value: Any) -> str:
    """Text as served; anything else (a redaction commitment, an object) as JSON text."""
    return value if isinstance(value, str) else _http.json_text(value)


def _arguments_text(arguments: Any) -> str:
    """Chat Completions carries arguments as a JSON string: the model's own text is sent as
    it came, an object as its JSON."""
    return arguments if isinstance(arguments, str) else _http.json_text(arguments)


def _error_text(content: str) -> str:
    """Chat Completions has no error flag on a tool result: say it in the content, unless
    the content already does."""
    head = content.lstrip()[:8].lower()
    return content if head.startswith(("error", '{"error')) else f"Error: {content}"


def _piece_text(raw: Any) -> str:
    """A system piece's text; a piece that is not ``{source, text}`` (a commitment where
    the piece was) as JSON text."""
    if type(raw) is dict and "text" in raw and "$commit" not in raw:
        return _text(raw["text"])
    return _text(raw)


def _message(view: Message) -> dict[str, Any]:
    role = view.role
    if not isinstance(role, str) or not role:  # not a message the loop writes: sent as text
        return {"role": "user", "content": _text(view.raw)}
    if role == "tool":
        content = _text(view.content)
        return {
            "role": "tool",
            "tool_call_id": _text(view.tool_call_id) if view.tool_call_id is not None else "",
            "content": _error_text(content) if view.is_error is True else content,
        }
    if role == "assistant":
        out: dict[str, Any] = {"role": "assistant"}
        calls = view.tool_calls if isinstance(view.tool_calls, tuple) else ()
        content = "" if view.content is None else _text(view.content)
        others = [c for c in calls if not isinstance(c, ToolCall)]
        if not isinstance(view.tool_calls, tuple):
            others = [view.tool_calls]  # a commitment where the list was: sent as text
        if others:
            content = "\n".join([content, *(_text(o) for o in others)]).strip("\n")
        wire_calls = [
            {
                "id": _text(c.id),
                "type": "function",
                "function": {"name": _text(c.name), "arguments": _arguments_text(c.arguments)},
            }
            for c in calls
            if isinstance(c, ToolCall)
        ]
        out["content"] = content if content or not wire_calls else None
        if wire_calls:
            out["tool_calls"] = wire_calls
        return out
    if role in ("user", "system", "developer"):
        return {"role": role, "content": _text(view.content)}
    return {"role": role, "content": _text(view.content)}


def _response_format(output: Any) -> dict[str, Any]:
    """The served ``params.output`` (``{name, schema, strict}``, ``output_type``) as Chat
    Completions' structured output: ``json_schema`` with its name and strict flag."""
    if not isinstance(output, Mapping) or not isinstance(output.get("schema"), Mapping):
        raise ProviderError(
            "params.output must be an object holding the answer's schema (output_type), got "
            f"{type(output).__name__}: it cannot be sent",
            retryable=False,
        )
    return {
        "type": "json_schema",
        "json_schema": {
            "name": _text(output.get("name", "output")),
            "schema": _http.normalized(output["schema"]),
            "strict": output.get("strict") is True,
        },
    }


def chat_body(
    request: Request, *, stream: bool, max_tokens_field: MaxTokensField
) -> dict[str, Any]:
    """The keyword arguments of ``chat.completions.create`` for ``request``: every system
    piece joined into one system message (blank line between), the messages, the tools."""
    messages: list[dict[str, Any]] = []
    system = [_piece_text(p.raw) for p in request.system]
    if system:
        messages.append({"role": "system", "content": "\n\n".join(system)})
    messages.extend(_message(m) for m in request.messages)
    body: dict[str, Any] = {"model": request.model, "messages": messages}
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": _text(t.name),
                    "description": _text(t.description),
                    "parameters": _http.normalized(t.parameters),
                },
            }
            for t in request.tools
        ]
    extra: dict[str, Any] = {}
    settings: Any = None
    for key, value in request.params.items():
        if key == "max_tokens":
            body[max_tokens_field] = _http.normalized(value)
        elif key in _NAMED:
            body[key] = _http.normalized(value)
        elif key == "model_settings":
            settings = value
        elif key == "output":
            body["response_format"] = _response_format(value)
        else:
            extra[key] = _http.normalized(value)
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    extra.update(_http.added_fields(settings, {*body, *extra, *BODY_FIELDS}))
    if extra:  # the SDK merges extra_body into the JSON body, after its own fields
        body["extra_body"] = extra
    return body


# -- Chat Completions -> LLMResponse -----------------------------------------------------------


def _no_constants(name: str) -> Any:
    raise ValueError(name)


def _arguments(raw: Any) -> Any:
    """A tool call's arguments: the object the model's JSON text is, else the text itself
    (the loop answers arguments that do not parse with an error the model reads)."""
    if not isinstance(raw, str):
        return raw if raw is not None else {}
    try:
        value = json.loads(raw, parse_constant=_no_constants)
    except ValueError:
        return raw
    return value if isinstance(value, dict) else raw


def _usage(usage: Any) -> Usage:
    if usage is None:
        return Usage()
    details = getattr(usage, "prompt_tokens_details", None)
    cached = getattr(details, "cached_tokens", None) if details is not None else None
    prompt = _count(getattr(usage, "prompt_tokens", 0))
    read = _count(cached) if cached is not None else None
    return Usage(
        # OpenAI counts cached tokens inside prompt_tokens: Usage's counts do not overlap, so
        # each token is billed once (the vendor's own figures stay in the wire response body)
        input=max(0, prompt - (read or 0)),
        output=_count(getattr(usage, "completion_tokens", 0)),
        cache_read=read,
    )


def _count(value: Any) -> int:
    return value if type(value) is int and value >= 0 else 0


def _call_of(raw: Any) -> ToolCall:
    function = getattr(raw, "function", None)
    if function is not None:
        return ToolCall(
            id=raw.id or "", name=function.name or "", arguments=_arguments(function.arguments)
        )
    custom = getattr(raw, "custom", None)  # a custom (free-text) tool's call
    return ToolCall(
        id=getattr(raw, "id", "") or "",
        name=getattr(custom, "name", "") or "",
        arguments=getattr(custom, "input", "") or "",
    )


def _response(completion: Any, url: str) -> LLMResponse:
    choices = getattr(completion, "choices", None) or []
    if not choices:
        raise _http.BadReply(f"{url} replied with no choices: is it a chat-completions server?")
    choice = choices[0]
    message = choice.message
    content = message.content or getattr(message, "refusal", None) or ""
    return LLMResponse(
        content=content,
        tool_calls=tuple(_call_of(c) for c in (message.tool_calls or ())),
        usage=_usage(completion.usage),
        stop_reason=choice.finish_reason or "stop",
    )


@dataclass
class _Slot:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


async def _assembled(stream: Any, on_token: TokenSink | None, url: str) -> LLMResponse:
    """Read a chat-completion stream to its end: the content and tool-call deltas
    assembled, each content delta passed to ``on_token``."""
    parts: list[str] = []
    slots: dict[int, _Slot] = {}
    finish: str | None = None
    usage: Any = None
    sdk = _sdk()
    try:
        async for chunk in stream:
            if getattr(chunk, "usage", None) is not None:
                usage = chunk.usage
            for choice in chunk.choices or ():
                if choice.index != 0:
                    continue
                delta = choice.delta
                text = delta.content if delta is not None else None
                if text:
                    parts.append(text)
                    if on_token is not None:
                        await on_token(text)
                for tc in (delta.tool_calls if delta is not None else None) or ():
                    slot = slots.setdefault(tc.index, _Slot())
                    if tc.id:
                        slot.id = tc.id
                    if tc.function is not None:
                        if tc.function.name and not slot.name:
                            slot.name = tc.function.name
                        if tc.function.arguments:
                            slot.arguments.append(tc.function.arguments)
                if choice.finish_reason:
                    finish = choice.finish_reason
    except sdk.APIError as exc:
        if isinstance(exc, sdk.APIStatusError | sdk.APIConnectionError):
            raise
        raise _http.StreamIncomplete(f"the server sent an error mid-stream: {exc.message}") from exc
    if finish is None:
        raise _http.StreamIncomplete(f"{url} closed the stream before its finish_reason")
    calls = tuple(
        ToolCall(id=s.id, name=s.name, arguments=_arguments("".join(s.arguments)))
        for _, s in sorted(slots.items())
    )
    return LLMResponse(
        content="".join(parts), tool_calls=calls, usage=_usage(usage), stop_reason=finish
    )


# -- the provider ------------------------------------------------------------------------------


def _seconds(value: object, option: str, *, positive: bool) -> float:
    if (
        type(value) not in (int, float)
        or not math.isfinite(cast(float, value))
        or cast(float, value) < 0
        or (positive and cast(float, value) == 0)
    ):
        need = "> 0" if positive else ">= 0"
        raise UsageError(
            f"{option} must be a number of seconds {need}, got {value!r}", option=option
        )
    return float(cast(float, value))


def _host(url: str) -> str:
    try:
        return str(httpx2.URL(url).host).lower()
    except (httpx2.InvalidURL, TypeError, ValueError):
        return ""


class OpenAIChat:
    """A provider speaking OpenAI's Chat Completions API: ``complete(request)`` sends the
    served request through the official SDK, retries what may succeed again, and returns
    the reply with the :class:`~agentfootprint.WireRecord` of every attempt."""

    name = "openai"
    makes_requests = True
    #: OpenAI caches long prompt prefixes by itself: the ``caching`` feature marks nothing
    prompt_caching = "automatic"
    sampling_settings: frozenset[str] = SAMPLING_SETTINGS
    body_fields: frozenset[str] = BODY_FIELDS
    #: ``params.output`` (``output_type``) is sent as ``response_format`` json_schema
    structured_output = True

    def __init__(
        self,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float | None = None,
        max_retries: int = 2,
        max_retry_wait: float = 30.0,
        stream: bool = False,
        organization: str | None = None,
        extra_headers: Mapping[str, str] | None = None,
        max_tokens_field: MaxTokensField | None = None,
        client: openai_sdk.AsyncOpenAI | None = None,
        retry_policy: _http.RetryPolicy | None = None,
        transport: Callable[[], httpx2.AsyncBaseTransport] | None = None,
    ) -> None:
        sdk = _sdk()
        if client is not None:
            _async_client(client, sdk)
            _http.beside_client(
                {
                    "api_key": api_key,
                    "base_url": base_url,
                    "timeout": timeout,
                    "organization": organization,
                    "extra_headers": extra_headers,
                    "transport": transport,
                },
                sdk_client=type(client).__name__,
            )
        if base_url is not None and (
            not isinstance(base_url, str) or not base_url.startswith(("http://", "https://"))
        ):
            raise UsageError(
                f"base_url must be the server's URL as a str (e.g. http://localhost:11434/v1), "
                f"got {base_url!r}",
                option="base_url",
            )
        if type(stream) is not bool:
            raise UsageError(f"stream must be True or False, got {stream!r}", option="stream")
        if organization is not None and not isinstance(organization, str):
            raise UsageError("organization must be a str or None", option="organization")
        headers = dict(extra_headers or {})
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in headers.items()):
            raise UsageError("extra_headers must map str to str", option="extra_headers")
        if max_tokens_field not in (None, "max_completion_tokens", "max_tokens"):
            raise UsageError(
                "max_tokens_field must be 'max_completion_tokens', 'max_tokens' or None, got "
                f"{max_tokens_field!r}",
                option="max_tokens_field",
            )
        #: the user's own SDK client (``client=``), or None: the adapter builds its own
        self.client = client
        key: str | None = None
        if client is not None:
            self.base_url = str(client.base_url).rstrip("/")
            # held to scrub it from error messages only: never recorded, never shown
            key = client.api_key if isinstance(client.api_key, str) else None
        else:
            self.base_url = (base_url or DEFAULT_BASE_URL).rstrip("/")
        #: OpenAI itself (not another server speaking its API): a key is required
        self.is_openai = _host(self.base_url) == _host(DEFAULT_BASE_URL)
        if client is None:
            key = _http.api_key(api_key, ENV_VAR, required=self.is_openai, vendor="OpenAI")
        self._key = _http.KeyHolder(key)
        self.timeout = (
            _http.seconds_of(client.timeout)
            if client is not None
            else _seconds(60.0 if timeout is None else timeout, "timeout", positive=True)
        )
        self.stream = stream
        #: LiveModel passes ``on_token`` only to a provider that streams
        self.streams = stream
        #: OpenAI's own API wants max_completion_tokens (its reasoning models refuse
        #: max_tokens); OpenAI-compatible servers have long read max_tokens
        self.max_tokens_field: MaxTokensField = max_tokens_field or (
            "max_completion_tokens" if self.is_openai else "max_tokens"
        )
        self.retry = retry_policy or _http.RetryPolicy(
            max_retries=max_retries,
            max_retry_wait=_seconds(max_retry_wait, "max_retry_wait", positive=False),
        )
        self._secrets = _http.Secrets((key, *headers.values()))
        azure = client is not None and isinstance(client, sdk.AsyncAzureOpenAI)
        self._vendor = _http.Vendor(
            label="Azure OpenAI"
            if azure
            else "OpenAI"
            if self.is_openai
            else "the OpenAI-compatible server",
            env_var=ENV_VAR,
            base_url=self.base_url,
            timeout=self.timeout,
            status_error=sdk.APIStatusError,
            connection_error=sdk.APIConnectionError,
            timeout_error=sdk.APITimeoutError,
            context_too_long=_context_too_long,
            key_source=None if client is None else f"the {type(client).__name__} given as client=",
        )
        self._sdk_version: str = sdk.__version__
        self._clients: (
            _http.PerLoop[openai_sdk.AsyncOpenAI] | _http.OwnClient[openai_sdk.AsyncOpenAI]
        )
        if client is not None:
            # last, so a client refused is left as it was: its HTTP client's transports
            # show the adapter its bytes from now on
            _http.observe(getattr(client, "_client", None), sdk_client=type(client).__name__)
            # the SDK's own retries off (each attempt is ours to record); the copy shares
            # the client's HTTP client
            self._clients = _http.OwnClient(client.with_options(max_retries=0))
            return

        def build(http: httpx2.AsyncClient) -> openai_sdk.AsyncOpenAI:
            client: openai_sdk.AsyncOpenAI = sdk.AsyncOpenAI(
                api_key=key or NO_KEY,
                organization=organization,
                base_url=self.base_url,
                timeout=self.timeout,
                max_retries=0,
                default_headers=headers or None,
                http_client=http,
            )
            return client

        self._clients = _http.PerLoop(build, timeout=self.timeout, transport=transport)

    def __repr__(self) -> str:
        own = f", client={type(self.client).__name__}" if self.client is not None else ""
        return (
            f"OpenAIChat(base_url={self.base_url!r}, stream={self.stream}, "
            f"timeout={self.timeout:g}, max_retries={self.retry.max_retries}{own})"
        )

    def describe(self) -> dict[str, str]:
        """What decides the wire bytes besides the served request (recorded in run.open)."""
        return {
            "adapter": "openai-chat",
            "adapter_version": __version__,
            "sdk": f"openai {self._sdk_version}",
            "httpx": f"httpx2 {httpx2.__version__}",
            "stream": "true" if self.stream else "false",
            "max_tokens_field": self.max_tokens_field,
        }

    def body(self, request: Request) -> dict[str, Any]:
        """The ``chat.completions.create`` arguments for ``request`` (the SDK encodes them)."""
        return chat_body(
            Request.from_served(request), stream=self.stream, max_tokens_field=self.max_tokens_field
        )

    async def complete(self, request: Request, *, on_token: TokenSink | None = None) -> LLMResponse:
        request = Request.from_served(request)
        kwargs = self.body(request)
        client = self._clients.get()
        create = cast(Any, client.chat.completions).create
        url = self.base_url

        async def attempt() -> LLMResponse:
            if self.stream:
                stream = await create(**kwargs)
                async with stream:
                    return await _assembled(stream, on_token, url)
            return _response(await create(**kwargs), url)

        reply, wire = await _http.call(
            attempt,
            vendor=self._vendor,
            retry=self.retry,
            model=request.model,
            secrets=self._secrets,
        )
        return LLMResponse(
            content=reply.content,
            tool_calls=reply.tool_calls,
            usage=reply.usage,
            stop_reason=reply.stop_reason,
            wire=wire,
        )

    async def aclose(self) -> None:
        """Close the HTTP connections this event loop opened."""
        await self._clients.aclose()

    def wire_request(self, request: Request | Mapping[str, Any]) -> bytes:
        """The exact request body this adapter sends for ``request``: the SDK encodes it
        into an in-memory transport (nothing leaves the process)."""
        sdk = _sdk()
        captured: list[bytes] = []

        def handler(http_request: httpx2.Request) -> httpx2.Response:
            captured.append(http_request.read())
            raise _Captured

        with httpx2.Client(transport=httpx2.MockTransport(handler)) as http:
            client = sdk.OpenAI(
                api_key=NO_KEY, base_url=self.base_url, max_retries=0, http_client=http
            )
            try:
                client.chat.completions.create(**self.body(Request.from_served(request)))
            except Exception:
                if not captured:
                    raise
        if not captured:  # pragma: no cover - the SDK always sends the request
            raise UsageError("the SDK sent no request to rebuild", option="request")
        return captured[0]


class _Captured(Exception):
    """Stops a request once its body is captured."""


def _async_client(client: object, sdk: Any) -> None:
    """Refuse a ``client=`` that is not the SDK's async client."""
    if not isinstance(client, sdk.AsyncOpenAI):
        kind = f"{type(client).__module__}.{type(client).__qualname__}"
        sync = " (the adapter is async: use AsyncOpenAI)" if isinstance(client, sdk.OpenAI) else ""
        raise UsageError(
            f"client= must be an openai.AsyncOpenAI (AsyncAzureOpenAI included), got {kind}{sync}",
            option="client",
        )


def openai(
    *,
    api_key: str | None = None,
    base_url: str | None = None,
    timeout: float | None = None,
    max_retries: int = 2,
    max_retry_wait: float = 30.0,
    stream: bool = False,
    organization: str | None = None,
    extra_headers: Mapping[str, str] | None = None,
    max_tokens_field: MaxTokensField | None = None,
    client: openai_sdk.AsyncOpenAI | None = None,
) -> OpenAIChat:
    """A provider for OpenAI's Chat Completions API, or any OpenAI-compatible server
    (Ollama, vLLM, llama.cpp's server, LM Studio) at ``base_url``.

    ``api_key``: else ``OPENAI_API_KEY``; required for OpenAI itself, optional with a
    ``base_url``. ``timeout``: seconds per attempt (60). ``max_retries``: attempts after the
    first for rate limits, server errors, timeouts and refused connections, waiting as
    ``Retry-After`` asks (at most ``max_retry_wait`` seconds) or backing off with jitter.
    ``stream``: stream replies (token events reach listeners; the reply recorded is the
    assembled one). ``max_tokens_field``: where the agent's ``max_tokens`` goes (default:
    ``max_completion_tokens`` for OpenAI, ``max_tokens`` with a ``base_url``). ``client``:
    your own ``AsyncOpenAI`` (or ``AsyncAzureOpenAI``), used as it is (its key, address,
    headers and timeout: ``api_key``, ``base_url``, ``timeout``, ``organization`` and
    ``extra_headers`` are then refused); its HTTP client's transports are wrapped so the
    wire receipt still digests the exact bytes, and the adapter never closes it.
    """
    return OpenAIChat(
        api_key=api_key,
        base_url=base_url,
        timeout=timeout,
        max_retries=max_retries,
        max_retry_wait=max_retry_wait,
        stream=stream,
        organization=organization,
        extra_headers=extra_headers,
        max_tokens_field=max_tokens_field,
        client=client,
    )
