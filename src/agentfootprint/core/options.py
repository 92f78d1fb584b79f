"""Agent options: validated once, at construction, into a frozen :class:`AgentConfig`.

Names are the snake_case of the seed's ``AgentOptions``. An unknown name, a
wrong type or an out-of-range value raises :class:`UsageError` naming the
option; a seed option not implemented yet is refused by name as *planned*
rather than silently ignored (``docs/options.md`` lists each one's status).
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from agentfootprint.core.providers.base import Provider
from agentfootprint.core.tools import Tool
from agentfootprint.errors import UsageError
from agentfootprint.store.redaction import RedactionPolicy
from agentfootprint.verify.commitments import read_json_text

__all__ = ["MAX_ITERATIONS_CAP", "PLANNED_OPTIONS", "AgentConfig", "resolve_options"]

MAX_ITERATIONS_CAP = 50
_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")

#: Seed options whose Python names are reserved for work not landed yet.
PLANNED_OPTIONS = frozenset(
    {
        "answer_layer",
        "argument_ask_context",
        "artifacts",
        "cache_strategy",
        "caching",
        "check_column_types",
        "context_budget",
        "cost_budget",
        "credentials",
        "external_grounds",
        "findings",
        "group_translator",
        "inputs_layer",
        "integrity_posture",
        "keep_last_tool_results",
        "keep_ledger_facts",
        "max_tool_result_chars",
        "notice_empty_lookups",
        "notice_prior_turn_evidence",
        "observer_delivery",
        "observer_delivery_options",
        "on_authorization_required",
        "ontology",
        "ontology_ask",
        "permission_checker",
        "pricing_table",
        "read_tracking",
        "record_system_prompt",
        "repeated_call_nudge",
        "results_layer",
        "structure_recorders",
        "time",
        "tool_choice",
        "tool_teardown_timeout_ms",
        "wrap_up_at_max_iterations",
        "write_provenance",
    }
)
_KNOWN = frozenset(
    {
        "provider",
        "model",
        "system",
        "tools",
        "store",
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
        "disclosures",
    }
)

ReactMode = Literal["dynamic", "classic"]
ArgValidation = Literal["enforce", "warn", "off"]


@dataclass(frozen=True, kw_only=True)
class AgentConfig:
    """Every option, resolved and checked."""

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

    @property
    def params(self) -> dict[str, Any]:
        """Call parameters as served (only those set)."""
        params: dict[str, Any] = {}
        if self.temperature is not None:
            params["temperature"] = self.temperature
        if self.max_tokens is not None:
            params["max_tokens"] = self.max_tokens
        return params

    def tool(self, name: str) -> Tool | None:
        for tool in self.tools:
            if tool.name == name:
                return tool
        return None


def _refuse(option: str, message: str) -> UsageError:
    return UsageError(f"option {option!r}: {message}", option=option)


def _choice(options: Mapping[str, Any], name: str, allowed: tuple[str, ...], default: str) -> Any:
    value = options.get(name, default)
    if value not in allowed:
        raise _refuse(name, f"must be one of {', '.join(map(repr, allowed))}, got {value!r}")
    return value


def resolve_options(options: Mapping[str, Any]) -> AgentConfig:
    """Check every option and build the config (``store`` is handled by the agent)."""
    for name in options:
        if name in _KNOWN:
            continue
        if name in PLANNED_OPTIONS:
            raise _refuse(
                name, "this seed option is planned but not implemented yet; see docs/options.md"
            )
        close = difflib.get_close_matches(name, sorted(_KNOWN | PLANNED_OPTIONS), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise UsageError(f"unknown option {name!r}{hint}", option=name)

    provider = options.get("provider")
    if provider is None or not callable(getattr(provider, "complete", None)):
        raise _refuse(
            "provider",
            "an object with an async complete(request) method is required "
            "(e.g. agentfootprint.MockProvider([...]))",
        )
    model = options.get("model")
    if not isinstance(model, str) or not model.strip():
        raise _refuse("model", f"a non-empty model name string is required, got {model!r}")
    if read_json_text(model) is not None:  # a redaction policy would rewrite or commit it
        raise _refuse(
            "model", f"a model name may not be JSON object or array text, got {model[:60]!r}"
        )

    system = options.get("system", ())
    if isinstance(system, str):
        system = (system,) if system else ()
    if not isinstance(system, Sequence) or not all(isinstance(s, str) for s in system):
        raise _refuse("system", "must be a string or a list of strings (system pieces)")

    tools = options.get("tools", ())
    if not isinstance(tools, Sequence) or isinstance(tools, str):
        raise _refuse("tools", "must be a list of tools made with define_tool(...)")
    seen: set[str] = set()
    for tool in tools:
        if not isinstance(tool, Tool):
            raise _refuse("tools", f"{tool!r} is not a Tool; build tools with define_tool(...)")
        if tool.name in seen:
            raise _refuse("tools", f"two tools are named {tool.name!r}; tool names are unique")
        seen.add(tool.name)

    name = options.get("name", "Agent")
    if not isinstance(name, str) or not name.strip():
        raise _refuse("name", f"must be a non-empty string, got {name!r}")
    agent_id = options.get("id", "agent")
    if not isinstance(agent_id, str) or not _ID.match(agent_id):
        raise _refuse("id", f"must be 1-128 characters of A-Z a-z 0-9 _ . : -, got {agent_id!r}")

    temperature = options.get("temperature")
    if temperature is not None and (
        isinstance(temperature, bool)
        or not isinstance(temperature, int | float)
        or not math.isfinite(temperature)
        or temperature < 0
    ):
        raise _refuse("temperature", f"must be a finite number >= 0, got {temperature!r}")
    max_tokens = options.get("max_tokens")
    if max_tokens is not None and (
        isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1
    ):
        raise _refuse("max_tokens", f"must be a positive integer, got {max_tokens!r}")
    max_iterations = options.get("max_iterations", 10)
    if isinstance(max_iterations, bool) or not isinstance(max_iterations, int):
        raise _refuse("max_iterations", f"must be an integer, got {max_iterations!r}")
    if not 1 <= max_iterations <= MAX_ITERATIONS_CAP:
        raise _refuse(
            "max_iterations",
            f"must be between 1 and {MAX_ITERATIONS_CAP} (the hard cap), got {max_iterations}",
        )

    react_mode = options.get("react_mode", "dynamic")
    if react_mode == "dynamic-grouped":
        raise _refuse(
            "react_mode",
            "'dynamic-grouped' is planned but not implemented yet; "
            "use 'dynamic' (same behaviour, flat chart) or 'classic'",
        )
    redact = options.get("redact")
    if redact is not None and not isinstance(redact, RedactionPolicy):
        raise _refuse(
            "redact",
            "must be a RedactionPolicy(keys=[...], patterns=[...]) or "
            f"conversation_redaction(), got {redact!r}",
        )
    if options.get("disclosures") is not None and redact is None:
        raise _refuse(
            "disclosures",
            "a disclosure vault keeps what a redaction policy commits; give redact=... too",
        )
    record_receipt = options.get("record_receipt", True)
    if not isinstance(record_receipt, bool):
        raise _refuse("record_receipt", f"must be True or False, got {record_receipt!r}")

    return AgentConfig(
        provider=provider,
        model=model,
        system=tuple(system),
        tools=tuple(tools),
        name=name,
        id=agent_id,
        temperature=temperature,
        max_tokens=max_tokens,
        max_iterations=max_iterations,
        react_mode=_choice(options, "react_mode", ("dynamic", "classic"), react_mode),
        tool_arg_validation=_choice(
            options, "tool_arg_validation", ("enforce", "warn", "off"), "enforce"
        ),
        commit_values=_choice(options, "commit_values", ("delta", "full"), "delta"),
        record_receipt=record_receipt,
        redact=redact,
    )
