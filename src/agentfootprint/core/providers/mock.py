"""The scripted provider that ships with the library (tests, demos, benchmarks).

``MockProvider(replies=[...])`` answers calls from a script in order: a ``str``
is a text reply, a :func:`reply` can carry tool calls. ``respond=fn`` computes
each reply from the request instead. Usage is estimated as ceil(chars / 4).
An exhausted script raises :class:`ScriptExhaustedError` saying so.
"""

from __future__ import annotations

import copy
import inspect
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from agentfootprint.core.providers.base import LLMResponse, ToolCall, Usage
from agentfootprint.errors import ScriptExhaustedError, UsageError

__all__ = ["MockProvider", "reply", "tool_call"]

Reply = str | LLMResponse


def tool_call(name: str, arguments: Any = None, *, id: str | None = None) -> ToolCall:
    """A scripted tool call; ``id`` defaults to a deterministic ``call_<k>_<i>``."""
    return ToolCall(id=id or "", name=name, arguments={} if arguments is None else arguments)


def reply(
    text: str = "", *, tool_calls: Sequence[ToolCall] = (), stop_reason: str | None = None
) -> LLMResponse:
    """A scripted reply with text and/or tool calls."""
    return LLMResponse(
        content=text,
        tool_calls=tuple(tool_calls),
        stop_reason=stop_reason or ("tool_use" if tool_calls else "stop"),
    )


def _chars(request: Mapping[str, Any]) -> int:
    total = sum(len(p.get("text", "")) for p in request.get("system", []))
    for message in request.get("messages", []):
        total += len(message.get("content") or "")
    return total


class MockProvider:
    """Scripted replies consumed in order, or a ``respond(request)`` callable.

    ``requests`` keeps a deep copy of every request received (``record=False``
    turns that off for long benchmarks).
    """

    name = "mock"

    def __init__(
        self,
        replies: Iterable[Reply] | None = None,
        *,
        respond: Callable[[Mapping[str, Any]], Reply] | None = None,
        record: bool = True,
    ) -> None:
        if (replies is None) == (respond is None):
            raise UsageError(
                "MockProvider takes exactly one of replies=[...] or respond=fn", option="provider"
            )
        self._script: list[Reply] = list(replies) if replies is not None else []
        for index, item in enumerate(self._script):
            if not isinstance(item, str | LLMResponse):
                raise UsageError(
                    f"MockProvider reply {index} is {type(item).__name__}; use a str or reply(...)",
                    option="provider",
                )
        self._respond = respond
        self._record = record
        self.position = 0
        self.requests: list[dict[str, Any]] = []

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
            item = self._script[self.position]
        self.position += 1
        response = reply(item) if isinstance(item, str) else item
        calls = tuple(
            c if c.id else ToolCall(id=f"call_{call}_{i}", name=c.name, arguments=c.arguments)
            for i, c in enumerate(response.tool_calls)
        )
        out_chars = len(response.content) + sum(len(str(c.arguments)) for c in calls)
        return LLMResponse(
            content=response.content,
            tool_calls=calls,
            usage=Usage(input=math.ceil(_chars(request) / 4), output=math.ceil(out_chars / 4)),
            stop_reason=response.stop_reason,
        )
