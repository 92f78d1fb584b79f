"""The resolved configuration a run is given: every option checked, the loop's own as fields.

The composition root (:mod:`agentfootprint.agent.options`) builds it from the features'
declarations; the runtime only reads it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from agentfootprint.runtime.ports import Ports
from agentfootprint.runtime.provider import Provider
from agentfootprint.runtime.tools import Tool
from agentfootprint.store.redaction import RedactionPolicy

__all__ = ["AgentConfig", "ArgValidation", "ReactMode"]

ReactMode = Literal["dynamic", "dynamic-grouped", "classic"]
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

    def tool(self, name: str) -> Tool | None:
        for tool in self.tools:
            if tool.name == name:
                return tool
        return None
