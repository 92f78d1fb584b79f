"""The provider contract: ``async complete(request: Request) -> LLMResponse``.

``request`` wraps exactly what :func:`agentfootprint.logformat.request.build_request`
returned for the committed state (``{"model", "params", "system", "messages",
"tools"}``): the very dict the receipt hashes, not a copy. A provider reads it and must not
mutate it; adapters translate it into their vendor's wire format. Read it typed
(``request.messages``, built on first read and cached) or as the JSON it is
(``request["messages"]``, ``request.to_json()``).

**The typed-view rule.** A typed view (:class:`Message`, :class:`ToolCall`,
:class:`SystemPiece`, :class:`ToolSchema`) never raises on, converts or drops a served
value: each field holds the served member as it is (a member that is absent gets the
field's default), and ``raw`` is the served object itself, extra members included.
``content`` and ``arguments`` are typed ``Any`` because that is where other JSON stands in
practice: a conversation continued without its disclosure vault serves a redaction
commitment ``{"$commit": "<hex>"}`` where the text was, and a tool result may be an
object. Other fields hold their annotated type in every request the loop builds; a policy
that redacts other keys (``name``, say) can put a commitment there too, and the view keeps
it as it is (``agentfootprint.logformat.commitments.is_commitment`` tells one).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from agentfootprint.errors import UsageError
from agentfootprint.logformat.shared_lists import SharedList, as_list, plain

#: the agent options served in ``params`` beside ``temperature`` and ``max_tokens`` that a
#: provider sends only if it says so: its class attribute ``sampling_settings`` names those
#: it maps to its vendor's request (a setting the model never sees would be receipted as
#: served), and the agent refuses the others at construction (docs/providers.md)
SAMPLING_SETTINGS: tuple[str, ...] = (
    "top_p",
    "stop",
    "seed",
    "presence_penalty",
    "frequency_penalty",
    "model_settings",
)

__all__ = [
    "SAMPLING_SETTINGS",
    "CacheMarkers",
    "LLMResponse",
    "Message",
    "Provider",
    "Request",
    "Response",
    "SystemPiece",
    "ToolCall",
    "ToolSchema",
    "Usage",
    "WireAttempt",
    "WireRecord",
]


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolCall:
    """A call the model asked for. ``arguments`` is an object or a JSON string (or, in a
    served message, whatever the history holds there: see the typed-view rule)."""

    id: str
    name: str
    arguments: Any = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True, slots=True)
class Usage:
    """Tokens of one call, in three non-overlapping prompt counts and the output.

    ``input``: prompt tokens neither read from nor written to the vendor's prompt cache;
    ``cache_read`` / ``cache_write``: prompt tokens read from / written to it (None when the
    provider reports no cache figures: they are then left out of the recorded reply, as in
    earlier releases). An adapter whose vendor counts cached tokens inside its prompt total
    (OpenAI's ``prompt_tokens``) subtracts them, so every count is billed once; the vendor's
    own figures stay in the response body the wire digest covers."""

    input: int = 0
    output: int = 0
    cache_read: int | None = None
    cache_write: int | None = None

    def to_state(self) -> dict[str, int]:
        usage = {"input": self.input, "output": self.output}
        if self.cache_read is not None:
            usage["cache_read"] = self.cache_read
        if self.cache_write is not None:
            usage["cache_write"] = self.cache_write
        return usage


@dataclass(frozen=True, kw_only=True, slots=True)
class WireAttempt:
    """One HTTP attempt of a call: the exact request body sent and response body received
    (for a stream, the bytes received), its status, and why it failed (None: it answered).
    ``retry_after``: the seconds the server asked to wait before the next attempt."""

    request_body: bytes
    response_body: bytes | None = None
    status: int | None = None
    error: str | None = None
    retry_after: float | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class WireRecord:
    """What an adapter that speaks HTTP saw of one call: every attempt, in order (the last
    one answered). The loop records the bodies' digests (commitments under a redaction
    policy), never the bodies."""

    attempts: tuple[WireAttempt, ...]


@dataclass(frozen=True, kw_only=True, slots=True)
class LLMResponse:
    """What a provider returns for one call."""

    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = field(default_factory=Usage)
    stop_reason: str = "stop"
    #: the HTTP exchange behind the reply, from adapters that speak HTTP (not in state)
    wire: WireRecord | None = field(default=None, compare=False)

    def to_state(self) -> dict[str, Any]:
        """The JSON form committed to state as ``last_response``."""
        return {
            "content": self.content,
            "tool_calls": [
                {"id": c.id, "name": c.name, "arguments": c.arguments} for c in self.tool_calls
            ],
            "usage": self.usage.to_state(),
            "stop_reason": self.stop_reason,
        }


#: The same class under the name the typed contract pairs with :class:`Request`.
Response = LLMResponse


# -- typed views over the served JSON ---------------------------------------------------------


def _call_view(item: Any) -> Any:
    """A served tool call as a :class:`ToolCall`; anything but an object stays as it is."""
    if type(item) is not dict or "$commit" in item:
        return item
    return ToolCall(
        id=item.get("id", ""), name=item.get("name", ""), arguments=item.get("arguments", {})
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class Message:
    """One served message. ``role`` is ``user``, ``assistant`` or ``tool``; ``content`` is
    text as the loop writes it, or another JSON value as it is (a redaction commitment);
    an assistant turn carries ``tool_calls``; a tool result carries ``tool_call_id``,
    ``name`` and, when the tool failed, ``is_error``."""

    role: str = ""
    content: Any = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    is_error: bool = False
    #: the served object itself (borrowed: do not mutate)
    raw: Any = field(default=None, repr=False, compare=False)

    @classmethod
    def from_json(cls, value: Any) -> Message:
        """The view of one served message. A message that is not an object (never built by
        the loop) gets every default, and ``raw`` keeps it."""
        if type(value) is not dict:
            return cls(raw=value)
        calls = value.get("tool_calls", ())
        return cls(
            role=value.get("role", ""),
            content=value.get("content"),
            tool_calls=(
                tuple(_call_view(c) for c in calls) if type(calls) in (list, tuple) else calls
            ),
            tool_call_id=value.get("tool_call_id"),
            name=value.get("name"),
            is_error=value.get("is_error", False),
            raw=value,
        )

    def to_json(self) -> Any:
        """The served object (not a copy)."""
        return self.raw


@dataclass(frozen=True, kw_only=True, slots=True)
class SystemPiece:
    """One piece of the system prompt: ``text`` and where it came from (``source``:
    ``base`` for the agent's ``system`` strings)."""

    source: str = ""
    text: str = ""
    raw: Any = field(default=None, repr=False, compare=False)

    @classmethod
    def from_json(cls, value: Any) -> SystemPiece:
        if type(value) is not dict:
            return cls(raw=value)
        return cls(source=value.get("source", ""), text=value.get("text", ""), raw=value)

    def to_json(self) -> Any:
        return self.raw


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolSchema:
    """One served tool: ``name``, ``description`` and ``parameters``, the JSON Schema of
    its arguments (the served member ``input_schema``)."""

    name: str = ""
    description: str = ""
    parameters: Mapping[str, Any] = field(default_factory=dict)
    raw: Any = field(default=None, repr=False, compare=False)

    @classmethod
    def from_json(cls, value: Any) -> ToolSchema:
        if type(value) is not dict:
            return cls(raw=value)
        return cls(
            name=value.get("name", ""),
            description=value.get("description", ""),
            parameters=value.get("input_schema", {}),
            raw=value,
        )

    def to_json(self) -> Any:
        return self.raw


def _indices(value: Any) -> tuple[Any, ...]:
    return tuple(value) if type(value) in (list, tuple) else ()


@dataclass(frozen=True, kw_only=True, slots=True)
class CacheMarkers:
    """Where the prompt-cache markers of a request go (projection 3's served
    ``prompt_cache`` member): indices into the served ``system``, ``tools`` and
    ``messages``. The projection checked them (increasing, in range, at most 4 in all);
    an adapter translates each into its vendor's cache control."""

    system: tuple[int, ...] = ()
    tools: tuple[int, ...] = ()
    messages: tuple[int, ...] = ()
    raw: Any = field(default=None, repr=False, compare=False)

    @classmethod
    def from_json(cls, value: Any) -> CacheMarkers:
        if type(value) is not dict:
            return cls(raw=value)
        return cls(
            system=_indices(value.get("system")),
            tools=_indices(value.get("tools")),
            messages=_indices(value.get("messages")),
            raw=value,
        )

    def __bool__(self) -> bool:
        """Whether anything is marked."""
        return bool(self.system or self.tools or self.messages)

    def to_json(self) -> Any:
        return self.raw


@dataclass(frozen=True, kw_only=True, slots=True, eq=False, repr=False)
class Request(Mapping[str, Any]):
    """The request served for one call: the dict ``build_request`` returned, wrapped.

    Nothing is copied, and the typed views (:attr:`system`, :attr:`messages`,
    :attr:`tools`) are built on first read and cached, so wrapping a 2,000-message request
    costs nothing until a provider reads it. As a read-only ``Mapping`` it is the served
    JSON (``request["messages"]``, ``dict(request)``, ``request == served``), which is what
    the receipt hashes: a provider is sent exactly what its receipt proves. Do not mutate
    the served values.
    """

    served: Mapping[str, Any]
    _system: tuple[SystemPiece, ...] | None = field(default=None, init=False)
    _messages: tuple[Message, ...] | None = field(default=None, init=False)
    _tools: tuple[ToolSchema, ...] | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        if not isinstance(self.served, Mapping):
            raise UsageError(
                "Request(served=...) must be the request dict build_request returned, got "
                f"{type(self.served).__name__}",
                option="served",
            )

    @classmethod
    def from_served(cls, served: Mapping[str, Any]) -> Request:
        """Wrap the served request (a :class:`Request` is returned as it is)."""
        if isinstance(served, Request):
            return served
        return cls(served=served)

    def to_json(self) -> Mapping[str, Any]:
        """The served request as JSON (what the receipt hashes): the served dict itself, or,
        when the history in it is held as versions (a
        :class:`~agentfootprint.logformat.shared_lists.SharedList`), a new top-level dict with
        that list plain (O(list)). Read it, never mutate it."""
        served = self.served
        if any(type(value) is SharedList for value in served.values()):
            return plain(served)
        return served

    # -- typed fields --------------------------------------------------------------------

    @property
    def model(self) -> str:
        value: str = self.served.get("model", "")
        return value

    @property
    def params(self) -> Mapping[str, Any]:
        """Sampling parameters present in the request: ``temperature``, ``max_tokens`` and
        the :data:`SAMPLING_SETTINGS` set (``model_settings``: the vendor's extra fields)."""
        value: Mapping[str, Any] = self.served.get("params", {})
        return value

    @property
    def system(self) -> tuple[SystemPiece, ...]:
        if self._system is None:
            views = tuple(SystemPiece.from_json(p) for p in self.served.get("system", ()))
            object.__setattr__(self, "_system", views)
            return views
        return self._system

    @property
    def messages(self) -> tuple[Message, ...]:
        if self._messages is None:
            views = tuple(Message.from_json(m) for m in self.served.get("messages", ()))
            object.__setattr__(self, "_messages", views)
            return views
        return self._messages

    @property
    def cache(self) -> CacheMarkers | None:
        """The prompt-cache markers served (projection 3's ``prompt_cache``), or None when
        the request carries none (projections 1 and 2)."""
        if "prompt_cache" not in self.served:
            return None
        return CacheMarkers.from_json(self.served["prompt_cache"])

    @property
    def tools(self) -> tuple[ToolSchema, ...]:
        if self._tools is None:
            views = tuple(ToolSchema.from_json(t) for t in self.served.get("tools", ()))
            object.__setattr__(self, "_tools", views)
            return views
        return self._tools

    # -- the read-only Mapping over the served JSON ------------------------------------------

    def __getitem__(self, key: str) -> Any:
        return as_list(self.served[key])  # a SharedList (the history) read as a list

    def __iter__(self) -> Iterator[str]:
        return iter(self.served)

    def __len__(self) -> int:
        return len(self.served)

    def __repr__(self) -> str:
        messages = self.served.get("messages", ())
        tools = self.served.get("tools", ())
        return (
            f"Request(model={self.served.get('model')!r}, "
            f"messages={len(messages) if isinstance(messages, list | tuple) else '?'}, "
            f"tools={len(tools) if isinstance(tools, list | tuple) else '?'})"
        )


@runtime_checkable
class Provider(Protocol):
    """Anything with a ``name`` and an async ``complete(request)`` returning an
    :class:`LLMResponse`; a failure is raised as :class:`agentfootprint.errors.ProviderError`
    (``status``, ``retryable``).

    A provider class that calls a real model sets the class attribute
    ``makes_requests = True`` (optional; absent means False): such a provider is refused
    while model requests are blocked, as they are in every test under the pytest plugin
    (:mod:`agentfootprint.runtime.provider_guard`). See docs/providers.md.
    """

    name: str

    async def complete(self, request: Request) -> LLMResponse: ...
