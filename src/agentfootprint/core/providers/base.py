"""The provider contract: ``async complete(request) -> LLMResponse``.

``request`` is exactly what :func:`agentfootprint.verify.request.build_request`
returned for the committed state: ``{"model", "params", "system", "messages",
"tools"}``. It is borrowed: a provider reads it and must not mutate it.
Adapters translate it into their vendor's wire format.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

__all__ = ["LLMResponse", "Provider", "ToolCall", "Usage"]


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolCall:
    """A call the model asked for. ``arguments`` is an object or a JSON string."""

    id: str
    name: str
    arguments: Any = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True, slots=True)
class Usage:
    input: int = 0
    output: int = 0


@dataclass(frozen=True, kw_only=True, slots=True)
class LLMResponse:
    """What a provider returns for one call."""

    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = field(default_factory=Usage)
    stop_reason: str = "stop"

    def to_state(self) -> dict[str, Any]:
        """The JSON form committed to state as ``last_response``."""
        return {
            "content": self.content,
            "tool_calls": [
                {"id": c.id, "name": c.name, "arguments": c.arguments} for c in self.tool_calls
            ],
            "usage": {"input": self.usage.input, "output": self.usage.output},
            "stop_reason": self.stop_reason,
        }


@runtime_checkable
class Provider(Protocol):
    """Anything with a ``name`` and an async ``complete(request)``."""

    name: str

    async def complete(self, request: Mapping[str, Any]) -> LLMResponse: ...
