"""The HTTP layer the vendor adapters share: exact bytes per attempt, retries, errors, keys.

The vendors' SDKs build and parse the HTTP exchanges; this module sits under them as the
transport of the ``httpx2.AsyncClient`` they are given (the SDKs are built on httpx2), so
the bytes an attempt sent and received are seen as they crossed the wire, and it runs the
retry loop itself (the SDKs' own retries are off) so every attempt is recorded, in order,
as a :class:`~agentfootprint.runtime.provider.WireAttempt`. It imports no SDK: the
vendor-specific parts (exception classes, the context-too-long test) are passed in a
:class:`Vendor`. Headers are never recorded: the API key travels in one.
"""

from __future__ import annotations

import asyncio
import contextvars
import email.utils
import json
import math
import os
import random
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, cast

import httpx2

from agentfootprint.errors import ProviderError, UsageError
from agentfootprint.runtime.provider import WireAttempt, WireRecord

__all__ = [
    "DEFAULT_RETRY_STATUSES",
    "BadReply",
    "Exchange",
    "KeyHolder",
    "OwnClient",
    "PerLoop",
    "RecordingTransport",
    "RetryPolicy",
    "Secrets",
    "StreamIncomplete",
    "Vendor",
    "added_fields",
    "api_key",
    "beside_client",
    "call",
    "http_client",
    "json_text",
    "normalized",
    "observe",
    "parse_retry_after",
    "scrub",
    "seconds_of",
    "to_provider_error",
]

T = TypeVar("T")
C = TypeVar("C")

#: statuses worth sending the same request again for: timeout, conflict, rate limit, and
#: every server error (5xx; Anthropic's 529 "overloaded" included)
DEFAULT_RETRY_STATUSES = frozenset({408, 409, 429})

_SCRUBBED = "[api key]"


# -- keys -------------------------------------------------------------------------------------


class KeyHolder:
    """Holds an API key so that no ``repr``, ``str`` or ``vars()`` of an adapter shows it."""

    __slots__ = ("_value",)

    def __init__(self, value: str | None) -> None:
        self._value = value

    @property
    def value(self) -> str | None:
        return self._value

    def __repr__(self) -> str:
        return "KeyHolder(***)" if self._value else "KeyHolder(None)"

    __str__ = __repr__


class Secrets(tuple[str | None, ...]):
    """What error messages are scrubbed of (a key, header values), shown as ``***`` by any
    ``repr``, ``str`` or ``vars()`` of the adapter holding them."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "Secrets(***)"

    __str__ = __repr__


def api_key(value: object, env_var: str, *, required: bool, vendor: str) -> str | None:
    """The key passed, else the environment's ``env_var``; missing and ``required`` -> a
    UsageError naming the variable. A wrong value is described by type, never shown."""
    if value is not None:
        if not isinstance(value, str) or not value.strip():
            raise UsageError(
                f"api_key must be the {vendor} API key as a non-empty str, got "
                f"{type(value).__name__ if not isinstance(value, str) else 'an empty string'}",
                option="api_key",
            )
        return value
    found = os.environ.get(env_var, "").strip()
    if found:
        return found
    if required:
        raise UsageError(
            f"no {vendor} API key: set the environment variable {env_var} or pass api_key=...",
            option="api_key",
        )
    return None


def scrub(text: str, secrets: Iterable[str | None]) -> str:
    """``text`` with every secret in it replaced by ``[api key]``."""
    for secret in secrets:
        if secret and len(secret) >= 4 and secret in text:
            text = text.replace(secret, _SCRUBBED)
    return text


# -- deterministic bodies ---------------------------------------------------------------------


def normalized(value: Any) -> Any:
    """``value`` as a JSON value with one spelling: object keys sorted, integral floats as
    ints. A request rebuilt from the log (canonical JSON: sorted keys, ``1.0`` written
    ``1``) then encodes to the bytes the live one did: apply it to every value an adapter
    passes through from the served request (schemas, arguments, parameters)."""
    if isinstance(value, Mapping):
        return {key: normalized(value[key]) for key in sorted(value)}
    if isinstance(value, list | tuple):
        return [normalized(item) for item in value]
    if type(value) is float and value.is_integer():
        return int(value)
    return value


def json_text(value: Any) -> str:
    """A pass-through value that must travel as text (a commitment, an object where text
    goes, tool-call arguments), spelled one way whatever its key order."""
    return json.dumps(normalized(value), ensure_ascii=False, sort_keys=True)


def added_fields(settings: Any, taken: Iterable[str]) -> dict[str, Any]:
    """A request's ``model_settings`` (a member of its params) as the fields it adds to the
    vendor's body, normalized. The agent refuses a field the adapter sets itself at
    construction; a request holding one anyway (built elsewhere) fails here, unsent."""
    if settings is None:
        return {}
    if not isinstance(settings, Mapping):
        raise ProviderError(
            f"params.model_settings must be an object of request fields, got "
            f"{type(settings).__name__}: it is sent as given, so it cannot be sent",
            retryable=False,
        )
    clash = sorted(set(settings) & set(taken))
    if clash:
        raise ProviderError(
            f"params.model_settings sets {', '.join(map(repr, clash))}, which the adapter sets "
            "itself: model_settings may only add fields to the request",
            retryable=False,
        )
    fields: dict[str, Any] = normalized(settings)
    return fields


# -- the recording transport ------------------------------------------------------------------


@dataclass(slots=True)
class Exchange:
    """What the transport saw of one HTTP attempt: the request body sent, the response's
    status and headers, and the body bytes read (raw, before content decoding)."""

    request_body: bytes | None = None
    status: int | None = None
    headers: httpx2.Headers | None = None
    response_body: bytearray = field(default_factory=bytearray)
    #: the response body was read to its end
    finished: bool = False


_CURRENT: contextvars.ContextVar[Exchange | None] = contextvars.ContextVar(
    "agentfootprint_http_exchange", default=None
)


class _RecordingStream(httpx2.AsyncByteStream):
    """The response body, appended to the exchange chunk by chunk as it is read."""

    def __init__(self, inner: httpx2.AsyncByteStream, exchange: Exchange) -> None:
        self._inner = inner
        self._exchange = exchange

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:
            self._exchange.response_body += chunk
            yield chunk
        self._exchange.finished = True

    async def aclose(self) -> None:
        await self._inner.aclose()


class RecordingTransport(httpx2.AsyncBaseTransport):
    """Wraps a transport; inside :func:`call` it records the attempt's bytes (outside one,
    it only passes requests through)."""

    def __init__(self, inner: httpx2.AsyncBaseTransport | None = None) -> None:
        self._inner = inner if inner is not None else httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        exchange = _CURRENT.get()
        if exchange is None:
            return await self._inner.handle_async_request(request)
        exchange.request_body = bytes(await request.aread())
        response = await self._inner.handle_async_request(request)
        exchange.status = response.status_code
        exchange.headers = response.headers
        stream = cast(httpx2.AsyncByteStream, response.stream)
        return httpx2.Response(
            response.status_code,
            headers=response.headers,
            stream=_RecordingStream(stream, exchange),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> RecordingTransport:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self._inner.__aexit__(*exc)


def http_client(
    *, timeout: float, transport: httpx2.AsyncBaseTransport | None = None
) -> httpx2.AsyncClient:
    """An ``httpx2.AsyncClient`` whose attempts are recorded: give it to the SDK."""
    return httpx2.AsyncClient(
        transport=RecordingTransport(transport), timeout=timeout, follow_redirects=False
    )


class PerLoop(Generic[C]):
    """One SDK client per event loop. An ``AsyncClient``'s connection pool belongs to the
    loop that opened it, and each thread calling ``run_sync`` has a loop of its own."""

    def __init__(
        self,
        build: Callable[[httpx2.AsyncClient], C],
        *,
        timeout: float,
        transport: Callable[[], httpx2.AsyncBaseTransport] | None = None,
    ) -> None:
        self._build = build
        self._timeout = timeout
        self._transport = transport
        self._clients: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, tuple[httpx2.AsyncClient, C]
        ] = weakref.WeakKeyDictionary()

    def get(self) -> C:
        """The SDK client for the running loop (built on first use in that loop)."""
        loop = asyncio.get_running_loop()
        entry = self._clients.get(loop)
        if entry is None:
            for old in [lp for lp in self._clients if lp.is_closed()]:
                del self._clients[old]  # its loop is gone: its pool cannot be used again
            client = http_client(
                timeout=self._timeout,
                transport=self._transport() if self._transport is not None else None,
            )
            entry = (client, self._build(client))
            self._clients[loop] = entry
        return entry[1]

    async def aclose(self) -> None:
        """Close the running loop's client (the others close with their loops)."""
        entry = self._clients.pop(asyncio.get_running_loop(), None)
        if entry is not None:
            await entry[0].aclose()


#: the methods an ``httpx2.AsyncClient`` sends a request through on its way to the
#: transport: a subclass overriding one may send it elsewhere, unseen
_SEND_PATH = (
    "send",
    "_send_handling_auth",
    "_send_handling_redirects",
    "_send_single_request",
    "_transport_for_url",
)


def observe(http: object, *, sdk_client: str) -> None:
    """Make the HTTP client inside a user's SDK client show the adapter its bytes: every
    transport it sends through (its own and each mounted one, a proxy's) is wrapped in a
    :class:`RecordingTransport`, which passes each request through unchanged and records
    only the attempts of :func:`call`. The client stays the user's: its settings (proxies,
    headers, auth, limits) are untouched, and wrapping it twice wraps it once. A client
    whose bytes cannot be seen this way is refused with a :class:`UsageError` saying why."""
    why = _unobservable(http)
    if why is not None:
        raise UsageError(
            f"client=: the {sdk_client}'s HTTP client is {why}. The wire receipt digests the "
            "exact bytes of every request and reply, which the adapter reads from the "
            "transport of an httpx2.AsyncClient: build the SDK client without http_client= "
            "(its own is one), or with http_client=httpx2.AsyncClient(...)",
            option="client",
        )
    assert isinstance(http, httpx2.AsyncClient)
    if not isinstance(http._transport, RecordingTransport):
        http._transport = RecordingTransport(http._transport)
    for pattern, transport in http._mounts.items():
        if transport is not None and not isinstance(transport, RecordingTransport):
            http._mounts[pattern] = RecordingTransport(transport)


def _unobservable(http: object) -> str | None:
    """Why the adapter cannot see the bytes ``http`` sends and receives, or None."""
    kind = f"{type(http).__module__}.{type(http).__qualname__}"
    if not isinstance(http, httpx2.AsyncClient):
        return f"a {kind}, not an httpx2.AsyncClient"
    if http.is_closed:
        return "closed"
    overridden = [
        m for m in _SEND_PATH if getattr(type(http), m) is not getattr(httpx2.AsyncClient, m)
    ]
    if overridden:
        return (
            f"a {kind}, which overrides {', '.join(overridden)}: its requests need not pass "
            "through its transport"
        )
    transports = [getattr(http, "_transport", None)]
    transports += [t for t in (getattr(http, "_mounts", None) or {}).values() if t is not None]
    if not all(isinstance(t, httpx2.AsyncBaseTransport) for t in transports):
        return f"a {kind} whose transports are not httpx2 transports the adapter can wrap"
    return None


def beside_client(options: Mapping[str, object], *, sdk_client: str) -> None:
    """Refuse an option the user's own client already decides (``client=`` and ``api_key=``,
    say): the client is used as it is, so the option would be ignored."""
    for option, value in options.items():
        if value is not None:
            raise UsageError(
                f"{option}= and client= together: the {sdk_client} is used as it is, with the "
                f"{option.replace('_', ' ')} it was built with; set it there (or drop client=)",
                option=option,
            )


def seconds_of(timeout: object) -> float:
    """A client's timeout as seconds per read (``inf`` for none), for error messages."""
    if isinstance(timeout, httpx2.Timeout):
        timeout = timeout.read if timeout.read is not None else timeout.connect
    if type(timeout) in (int, float):
        return float(cast(float, timeout))
    return math.inf


class OwnClient(Generic[C]):
    """A user's own SDK client (``client=``), used on whichever event loop runs it. The
    adapter never closes it: it is the user's."""

    def __init__(self, client: C) -> None:
        self._client = client

    def get(self) -> C:
        return self._client

    async def aclose(self) -> None:
        """Nothing to close: the client's connections are its owner's to close."""


# -- retries ----------------------------------------------------------------------------------


class StreamIncomplete(Exception):
    """Raised by an adapter's attempt when a stream ended before its final event."""


class BadReply(Exception):
    """Raised by an adapter's attempt when the server answered in a shape it cannot read
    (not retried: the same server answers the same way); the message says what to check."""


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """``max_retries`` attempts after the first; waits honour ``Retry-After`` (capped at
    ``max_retry_wait`` seconds), else back off exponentially from ``backoff`` (doubling,
    at most ``backoff_cap``) with jitter. ``sleep`` is injectable for tests."""

    max_retries: int = 2
    max_retry_wait: float = 30.0
    backoff: float = 0.5
    backoff_cap: float = 8.0
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    jitter: Callable[[], float] = random.random

    def __post_init__(self) -> None:
        if type(self.max_retries) is not int or self.max_retries < 0:
            raise UsageError(
                f"max_retries must be an int >= 0, got {self.max_retries!r}",
                option="max_retries",
            )
        for option in ("max_retry_wait", "backoff", "backoff_cap"):
            value = getattr(self, option)
            if not _is_seconds(value):
                raise UsageError(
                    f"{option} must be a number of seconds >= 0, got {value!r}", option=option
                )

    def delay(self, retry: int, retry_after: float | None) -> float:
        """Seconds to wait before retry number ``retry`` (0 for the first)."""
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_retry_wait)
        base = min(self.backoff * (2.0**retry), self.backoff_cap)
        return min(base / 2 + base / 2 * self.jitter(), self.max_retry_wait)


def _is_seconds(value: object) -> bool:
    return (
        type(value) in (int, float)
        and math.isfinite(cast(float, value))
        and cast(float, value) >= 0
    )


def parse_retry_after(
    headers: Mapping[str, str] | None, *, now: float | None = None
) -> float | None:
    """Seconds the server asked to wait: ``retry-after-ms``, else ``Retry-After`` as seconds
    or as an HTTP date; None when absent or unreadable."""
    if headers is None:
        return None
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            value = float(millis) / 1000
        except ValueError:
            value = math.nan
        if math.isfinite(value) and value >= 0:
            return value
    raw = headers.get("retry-after")
    if raw is None:
        return None
    try:
        seconds = float(raw)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(raw)
        except (TypeError, ValueError, IndexError):
            return None
        if when is None:
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
        return max(seconds, 0.0)
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


# -- vendor errors ----------------------------------------------------------------------------


def _never(status: int, body: Any) -> bool:
    return False


@dataclass(frozen=True, slots=True)
class Vendor:
    """The vendor-specific parts of error handling, passed in by an adapter."""

    label: str
    env_var: str | None
    base_url: str
    timeout: float
    status_error: type[BaseException]
    connection_error: type[BaseException]
    timeout_error: type[BaseException]
    #: (status, the parsed JSON error body or None) -> the request exceeds the context
    context_too_long: Callable[[int, Any], bool] = _never
    retry_statuses: frozenset[int] = DEFAULT_RETRY_STATUSES
    #: where a refused key was set, when not ``env_var`` or ``api_key=`` (a user's client)
    key_source: str | None = None


@dataclass(frozen=True, slots=True)
class _Failure:
    kind: str  # status | connect | timeout | stream | other
    status: int | None
    retryable: bool
    detail: str
    #: the short, content-free reason recorded in the attempt (``WireAttempt.error``)
    error: str
    body: Any = None
    retry_after: float | None = None


def _vendor_detail(body: Any, fallback: str) -> str:
    """The error text the vendor put in its body (``{"error": {"message"}}`` for both)."""
    if isinstance(body, Mapping):
        error = body.get("error", body)
        if isinstance(error, Mapping):
            message = error.get("message")
            if isinstance(message, str) and message:
                return message
        elif isinstance(error, str) and error:
            return error
    return fallback


def _cause_chain(exc: BaseException) -> Iterable[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _parsed_body(exc: BaseException, exchange: Exchange) -> Any:
    body = getattr(exc, "body", None)
    if body is None and exchange.response_body:
        try:
            body = json.loads(bytes(exchange.response_body))
        except ValueError:
            body = None
    return body


def _classify(exc: BaseException, exchange: Exchange, vendor: Vendor) -> _Failure:
    chain = list(_cause_chain(exc))
    answered = exchange.status is not None and 200 <= exchange.status < 300
    if isinstance(exc, StreamIncomplete) or (
        answered and any(isinstance(e, httpx2.TransportError) for e in chain)
    ):
        detail = str(exc) if isinstance(exc, StreamIncomplete) else _innermost(chain)
        return _Failure("stream", None, False, detail, "stream ended before the reply was complete")
    if isinstance(exc, BadReply):
        return _Failure("bad-reply", None, False, str(exc), "unreadable reply")
    if answered and isinstance(exc, ValueError):  # a 200 whose body is not the API's JSON
        return _Failure(
            "bad-reply",
            None,
            False,
            f"{vendor.base_url} answered {exchange.status} with a body that is not the API's "
            f"JSON ({type(exc).__name__}: {exc}): is base_url the API's address?",
            "unreadable reply",
        )
    if isinstance(exc, vendor.status_error):
        status = getattr(exc, "status_code", None) or exchange.status
        body = _parsed_body(exc, exchange)
        retryable = status is not None and (status in vendor.retry_statuses or status >= 500)
        code = _vendor_code(body)
        return _Failure(
            "status",
            status if type(status) is int else None,
            retryable,
            _vendor_detail(body, str(exc)),
            f"HTTP {status}" + (f" {code}" if code else ""),
            body,
            parse_retry_after(exchange.headers),
        )
    if isinstance(exc, vendor.timeout_error) or any(
        isinstance(e, httpx2.TimeoutException) for e in chain
    ):
        return _Failure("timeout", None, True, "no answer in time", "timeout")
    if isinstance(exc, vendor.connection_error) or any(
        isinstance(e, httpx2.TransportError) for e in chain
    ):
        refused = any(isinstance(e, httpx2.ConnectError | ConnectionRefusedError) for e in chain)
        if refused:
            return _Failure("connect", None, True, _innermost(chain), "connection refused")
        inner = type(chain[-1]).__name__
        return _Failure("network", None, True, _innermost(chain), f"network error: {inner}")
    return _Failure("other", None, False, f"{type(exc).__name__}: {exc}", type(exc).__name__)


def _innermost(chain: Sequence[BaseException]) -> str:
    """The most specific description in an exception chain: the innermost network error's
    (an OS or transport error), else the root cause's. Libraries leave unrelated errors in
    the implicit context (a probe's ``RuntimeError: no running event loop``): they are not
    what went wrong."""
    for error in reversed(chain):
        if isinstance(error, OSError | httpx2.TransportError) and str(error):
            return str(error)
    return next(
        (str(e) for e in reversed(chain) if str(e) and not isinstance(e, RuntimeError)),
        type(chain[0]).__name__,
    )


def _vendor_code(body: Any) -> str | None:
    """The vendor's short error code or type (``rate_limit_exceeded``), if it is one."""
    error = body.get("error", body) if isinstance(body, Mapping) else None
    if isinstance(error, Mapping):
        for key in ("code", "type"):
            value = error.get(key)
            if isinstance(value, str) and 0 < len(value) <= 64 and _is_identifier(value):
                return value
    return None


def _is_identifier(text: str) -> bool:
    return all(c.isascii() and (c.isalnum() or c in "_-.") for c in text)


def _message(f: _Failure, vendor: Vendor, model: str, attempts: int) -> str:
    """What went wrong and what to do about it."""
    tries = f" (after {attempts} attempts)" if attempts > 1 else ""
    url = vendor.base_url
    key = f"the environment variable {vendor.env_var} or " if vendor.env_var else ""
    where = vendor.key_source or f"{key}api_key=..."
    if f.kind == "stream":
        return (
            f"the stream ended before the reply was complete ({f.detail}): the connection to "
            f"{url} broke or the server stopped mid-reply; run the turn again"
        )
    if f.kind == "connect":
        return (
            f"could not connect to {url}{tries}: {f.detail}. Is the server running at {url}? "
            "Check base_url"
        )
    if f.kind == "network":
        return f"the connection to {url} failed{tries}: {f.detail}; check the network and retry"
    if f.kind == "timeout":
        return (
            f"{vendor.label} at {url} did not answer within {vendor.timeout:g} s{tries}: retry "
            "later or raise timeout="
        )
    if f.kind == "bad-reply":
        return f.detail
    if f.kind == "other":
        return f"the call to {vendor.label} at {url} failed: {f.detail}"
    status, detail = f.status, f.detail
    if status in (401, 403):
        what = "refused the API key" if status == 401 else "denied access with this API key"
        return f"{vendor.label} {what} ({status}: {detail}): check the key in {where}"
    if status == 404:
        return (
            f"model {model!r} was not found at {url} (404: {detail}): check the model name "
            "and base_url"
        )
    if status in (400, 413) and vendor.context_too_long(status, f.body):
        return (
            f"the request is too long for model {model!r}'s context ({status}: {detail}): "
            "reduce the history (fewer or shorter messages, smaller tool results) or use a "
            "model with a longer context"
        )
    if status == 429:
        wait = (
            f"; the server asked to wait {f.retry_after:g} s" if f.retry_after is not None else ""
        )
        return (
            f"rate limited by {vendor.label} (429: {detail}){tries}{wait}: retry later, send "
            "fewer requests or raise max_retries / max_retry_wait"
        )
    if status is not None and status >= 500:
        return f"{vendor.label} failed on its side ({status}: {detail}){tries}: retry later"
    return f"{vendor.label} rejected the request ({status}: {detail}): check the request"


async def call(
    attempt: Callable[[], Awaitable[T]],
    *,
    vendor: Vendor,
    retry: RetryPolicy,
    model: str,
    secrets: Sequence[str | None] = (),
) -> tuple[T, WireRecord]:
    """Run ``attempt`` (one SDK call, its stream consumed inside it) until it answers or
    fails for good; return its result and the :class:`WireRecord` of every attempt. A
    failure raises :class:`ProviderError` (``status``, ``retryable``, ``wire``) whose
    message says what to do; cancellation is never caught."""
    attempts: list[WireAttempt] = []
    retries = 0
    while True:
        exchange = Exchange()
        token = _CURRENT.set(exchange)
        try:
            result = await attempt()
        except Exception as exc:
            failure = _classify(exc, exchange, vendor)
        else:
            if exchange.request_body is None or exchange.status is None:
                # answered, and the transport never saw it: no digest could be honest
                wire = WireRecord(attempts=tuple(attempts)) if attempts else None
                raise ProviderError(
                    scrub(_UNSEEN.format(url=vendor.base_url), secrets),
                    retryable=False,
                    wire=wire,
                )
            attempts.append(_attempt(exchange, None, None))
            return result, WireRecord(attempts=tuple(attempts))
        finally:
            _CURRENT.reset(token)
        # outside the handler: the SDK's exception (its request, headers and key) is
        # neither the cause nor the context of what is raised
        sent = exchange.request_body is not None
        if sent:
            attempts.append(_attempt(exchange, failure.error, failure))
        if sent and failure.retryable and retries < retry.max_retries:
            await retry.sleep(retry.delay(retries, failure.retry_after))
            retries += 1
            continue
        wire = WireRecord(attempts=tuple(attempts)) if attempts else None
        raise _provider_error(failure, vendor, model, secrets, wire)


_UNSEEN = (
    "the request to {url} was answered without passing through the transport where the "
    "adapter reads the bytes the wire receipt digests (client=: its HTTP client sent it "
    "some other way), so the call is not recorded as served: give the SDK client an "
    "httpx2.AsyncClient that sends through its transport"
)


def to_provider_error(
    exc: BaseException,
    *,
    vendor: Vendor,
    model: str,
    secrets: Sequence[str | None] = (),
    wire: WireRecord | None = None,
    exchange: Exchange | None = None,
) -> ProviderError:
    """The :class:`ProviderError` for ``exc`` raised by one SDK call (outside :func:`call`):
    its status, whether it is worth retrying, and a message saying what to do, every
    secret scrubbed."""
    failure = _classify(exc, exchange if exchange is not None else Exchange(), vendor)
    attempts = len(wire.attempts) if wire is not None else 1
    return _provider_error(failure, vendor, model, secrets, wire, attempts)


def _provider_error(
    failure: _Failure,
    vendor: Vendor,
    model: str,
    secrets: Sequence[str | None],
    wire: WireRecord | None,
    attempts: int | None = None,
) -> ProviderError:
    count = attempts if attempts is not None else len(wire.attempts) if wire is not None else 1
    message = scrub(_message(failure, vendor, model, count), secrets)
    return ProviderError(message, status=failure.status, retryable=failure.retryable, wire=wire)


def _attempt(exchange: Exchange, error: str | None, failure: _Failure | None) -> WireAttempt:
    return WireAttempt(
        request_body=exchange.request_body or b"",
        response_body=bytes(exchange.response_body) if exchange.status is not None else None,
        status=exchange.status,
        error=error,
        retry_after=failure.retry_after if failure is not None else None,
    )
