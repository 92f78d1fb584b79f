"""The scripted provider that ships with the library (tests, demos, benchmarks).

``MockProvider(replies=[...])`` answers calls from a script in order: a ``str``
is a text reply, a :func:`reply` can carry tool calls, and an exception instance is
raised by that call, as a real provider raises (``ProviderError("rate limited",
status=429, retryable=True)``). ``respond=fn`` computes each reply from the request
instead (and may raise). Usage is estimated as ceil(chars / 4). An exhausted script
raises :class:`ScriptExhaustedError` saying so.
"""

from __future__ import annotations

import copy
import inspect
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from agentfootprint.errors import ScriptExhaustedError, UsageError
from agentfootprint.runtime.provider import SAMPLING_SETTINGS, LLMResponse, ToolCall, Usage

__all__ = ["MockProvider", "reply", "tool_call"]

Reply = str | LLMResponse
#: A scripted item: a reply, or an exception that call raises.
Scripted = Reply | Exception


def tool_call(name: str, arguments: Any = None, *, id: str | None = None) -> ToolCall:
    """A scripted tool call; ``id`` defaults to a deterministic ``call_<k>_<i>``.

    ``arguments`` is what a model sends: an object, JSON text (valid or not) or a list;
    what is inside is checked when the call is made, as for a real provider's reply.
    """
    if not isinstance(name, str):
        raise UsageError(
            f"tool_call() argument 'name' must be the tool's name as a str, got "
            f"{type(name).__name__}",
            option="provider",
        )
    if arguments is not None and not isinstance(arguments, dict | str | list):
        raise UsageError(
            "tool_call() argument 'arguments' must be an object (dict), JSON text (str) or a "
            f"list, as a model sends them, got {type(arguments).__name__}",
            option="provider",
        )
    if id is not None and not isinstance(id, str):
        raise UsageError(
            f"tool_call() argument 'id' must be a str or None, got {type(id).__name__}",
            option="provider",
        )
    return ToolCall(id=id or "", name=name, arguments={} if arguments is None else arguments)


#: the usage of a scripted reply that gave none: the mock estimates it at the call
_ESTIMATE = Usage()


def reply(
    text: str = "",
    *,
    tool_calls: Sequence[ToolCall] = (),
    stop_reason: str | None = None,
    usage: Usage | None = None,
) -> LLMResponse:
    """A scripted reply with text and/or tool calls. ``usage``: the tokens the call reports
    (default: estimated from the characters, about four per token)."""
    if not isinstance(text, str):
        raise UsageError(
            f"reply() argument 'text' must be a str, got {type(text).__name__}", option="provider"
        )
    if not isinstance(tool_calls, list | tuple) or not all(
        isinstance(c, ToolCall) for c in tool_calls
    ):
        raise UsageError(
            "reply() argument 'tool_calls' must be a list of tool_call(...), got "
            + (
                type(tool_calls).__name__
                if not isinstance(tool_calls, list | tuple)
                else "an item that is not a ToolCall"
            ),
            option="provider",
        )
    if stop_reason is not None and not isinstance(stop_reason, str):
        raise UsageError(
            f"reply() argument 'stop_reason' must be a str or None, got "
            f"{type(stop_reason).__name__}",
            option="provider",
        )
    if usage is not None and not isinstance(usage, Usage):
        raise UsageError(
            f"reply() argument 'usage' must be a Usage(...), got {type(usage).__name__}",
            option="provider",
        )
    return LLMResponse(
        content=text,
        tool_calls=tuple(tool_calls),
        usage=usage if usage is not None else _ESTIMATE,
        stop_reason=stop_reason or ("tool_use" if tool_calls else "stop"),
    )


class _Counted:
    """The messages the last request held (a copy: the caller's list is not kept alive, so
    the agent may still reuse it) and their characters. The history a conversation serves
    only grows, so the next request usually starts with these very messages: then only the
    new ones are counted. The prefix test is one list comparison in C, which takes each
    message that is the same object as equal without looking into it (about 3 µs per
    thousand messages, against 25 for a Python-level identity test of each)."""

    __slots__ = ("messages", "total")

    def __init__(self, messages: Sequence[Any], total: int) -> None:
        self.messages = list(messages)
        self.total = total

    def prefix_of(self, messages: Sequence[Any]) -> bool:
        """``messages`` starts with the held ones (equal messages have equal characters)."""
        held = self.messages
        if len(messages) < len(held):
            return False
        head = messages[: len(held)]
        return (head if type(head) is list else list(head)) == held


def _content_chars(messages: Iterable[Any]) -> int:
    return sum(len(message.get("content") or "") for message in messages)


class MockProvider:
    """Scripted replies consumed in order, or a ``respond(request)`` callable.

    A scripted item that is an exception instance is raised by its call (the call still
    counts, and is recorded): script a provider failure with
    ``MockProvider([ProviderError("overloaded", status=529, retryable=True), "ok"])``.

    ``requests`` keeps a deep copy of every request received (``record=False``
    turns that off for long benchmarks).
    """

    name = "mock"
    #: it plays any model: every sampling setting is served to it (and recorded) as given
    sampling_settings: frozenset[str] = frozenset(SAMPLING_SETTINGS)
    #: ``output_type``'s schema is in the requests it records (``params["output"]``)
    structured_output = True

    def __init__(
        self,
        replies: Iterable[Scripted] | None = None,
        *,
        respond: Callable[[Mapping[str, Any]], Reply] | None = None,
        record: bool = True,
    ) -> None:
        if (replies is None) == (respond is None):
            raise UsageError(
                "MockProvider takes exactly one of replies=[...] or respond=fn", option="provider"
            )
        if replies is not None and (
            isinstance(replies, str | bytes | Mapping) or not isinstance(replies, Iterable)
        ):
            raise UsageError(
                "MockProvider argument 'replies' must be a list of replies (str or reply(...)), "
                f"got {type(replies).__name__}",
                option="provider",
            )
        if respond is not None and not callable(respond):
            raise UsageError(
                "MockProvider argument 'respond' must be a function of the request, got "
                f"{type(respond).__name__}",
                option="provider",
            )
        if not isinstance(record, bool):
            raise UsageError(
                f"MockProvider argument 'record' must be True or False, got {record!r}",
                option="provider",
            )
        self._script: list[Scripted] = list(replies) if replies is not None else []
        for index, item in enumerate(self._script):
            if not isinstance(item, str | LLMResponse | Exception):
                raise UsageError(
                    f"MockProvider argument 'replies': reply {index} is "
                    f"{type(item).__name__}; use a str, reply(...) or an exception to raise",
                    option="provider",
                )
        self._respond = respond
        self._record = record
        self.position = 0
        self.requests: list[dict[str, Any]] = []
        self._counted: _Counted | None = None

    def _chars(self, request: Mapping[str, Any]) -> int:
        """The characters of the request's system text and message contents (the usage
        estimate), counting only what the last request did not already hold."""
        total = sum(len(p.get("text", "")) for p in request.get("system", []))
        messages = request.get("messages", [])
        counted = self._counted
        if counted is not None and counted.prefix_of(messages):
            chars = counted.total + _content_chars(messages[len(counted.messages) :])
        else:
            chars = _content_chars(messages)
        self._counted = _Counted(messages, chars) if messages else None
        return total + chars

    @property
    def recording(self) -> bool:
        """Whether ``requests`` holds a copy of every request received."""
        return self._record

    @property
    def remaining(self) -> int:
        return len(self._script) - self.position if self._respond is None else -1

    async def complete(self, request: Mapping[str, Any]) -> LLMResponse:
        call = len(self.requests) if self._record else self.position
        if self._record:
            self.requests.append(copy.deepcopy(dict(request)))
        if self._respond is not None:
            produced = self._respond(request)
            if inspect.isawaitable(produced):
                produced = await produced
            item: Reply = produced
        else:
            if self.position >= len(self._script):
                raise ScriptExhaustedError(
                    f"MockProvider script exhausted: call {self.position + 1} asked for a reply "
                    f"but the script holds {len(self._script)}; add replies or end with a "
                    "text reply"
                )
            scripted = self._script[self.position]
            if isinstance(scripted, Exception):
                self.position += 1
                raise scripted
            item = scripted
        self.position += 1
        response = reply(item) if isinstance(item, str) else item
        calls = tuple(
            c if c.id else ToolCall(id=f"call_{call}_{i}", name=c.name, arguments=c.arguments)
            for i, c in enumerate(response.tool_calls)
        )
        out_chars = len(response.content) + sum(len(str(c.arguments)) for c in calls)
        usage = response.usage
        if usage is _ESTIMATE or usage == Usage():  # not given: estimated
            usage = Usage(
                input=math.ceil(self._chars(request) / 4), output=math.ceil(out_chars / 4)
            )
        return LLMResponse(
            content=response.content,
            tool_calls=calls,
            usage=usage,
            stop_reason=response.stop_reason,
        )
