"""Agent options: checked once, at construction, into a frozen :class:`AgentConfig`.

Names are the snake_case of the seed's ``AgentOptions``. Each option belongs to a feature
(:mod:`agentfootprint.features`) that declares its check: an unknown name, a wrong type or
an out-of-range value raises :class:`UsageError` naming the option. Before any check, a
value the log could not hold (an integer beyond +-(2**53 - 1), a float that is not finite, a
lone surrogate: :func:`agentfootprint.features.base.loggable`) is refused the same way, so a
run never fails on an option it was built with; a seed option no
feature implements yet is refused by name as *planned* rather than silently ignored
(``docs/options.md`` lists each one's status).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from agentfootprint.core.ports import Ports
from agentfootprint.core.providers.base import Provider
from agentfootprint.core.tools import Tool
from agentfootprint.features import registry
from agentfootprint.features.route import MAX_ITERATIONS_CAP
from agentfootprint.features.turn import call_params
from agentfootprint.store.redaction import RedactionPolicy

__all__ = ["MAX_ITERATIONS_CAP", "PLANNED_OPTIONS", "AgentConfig", "resolve_options"]

#: Seed options whose Python names are reserved for work not landed yet (derived: the seed's
#: names less those a feature declares).
PLANNED_OPTIONS = registry.planned_options()

ReactMode = Literal["dynamic", "classic"]
ArgValidation = Literal["enforce", "warn", "off"]


@dataclass(frozen=True, kw_only=True)
class AgentConfig:
    """Every option, resolved and checked (``options``: all of them by name, the loop's own
    also as attributes)."""

    provider: Provider
    model: str
    system: tuple[str, ...]
    tools: tuple[Tool, ...]
    name: str = "Agent"
    id: str = "agent"
    temperature: float | None = None
    max_tokens: int | None = None
    max_iterations: int = 10
    react_mode: ReactMode = "dynamic"
    tool_arg_validation: ArgValidation = "enforce"
    commit_values: Literal["delta", "full"] = "delta"
    record_receipt: bool = True
    redact: RedactionPolicy | None = None
    ports: Ports = field(default_factory=Ports)
    options: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @property
    def params(self) -> dict[str, Any]:
        """Call parameters as served (only those set)."""
        return call_params(self.options)

    def tool(self, name: str) -> Tool | None:
        for tool in self.tools:
            if tool.name == name:
                return tool
        return None


_ATTRIBUTES = (
    "provider",
    "model",
    "system",
    "tools",
    "name",
    "id",
    "temperature",
    "max_tokens",
    "max_iterations",
    "react_mode",
    "tool_arg_validation",
    "commit_values",
    "record_receipt",
    "redact",
    "ports",
)


def resolve_options(given: Mapping[str, Any]) -> AgentConfig:
    """Check every option by its feature and build the config (``store`` and
    ``disclosures`` are opened by the agent)."""
    resolved = registry.resolve(given)
    return AgentConfig(**{name: resolved[name] for name in _ATTRIBUTES}, options=resolved)
