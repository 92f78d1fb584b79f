"""Agent options: checked once, at construction, into a frozen :class:`AgentConfig`.

Names are the snake_case of the seed's ``AgentOptions``. Each option belongs to a feature
(:mod:`agentfootprint.features`) that declares its check: an unknown name, a wrong type or
an out-of-range value raises :class:`UsageError` naming the option. Before any check, a
value the log could not hold (an integer beyond +-(2**53 - 1), a float that is not finite, a
lone surrogate: :func:`agentfootprint.features.base.loggable`) is refused the same way, so a
run never fails on an option it was built with. Every seed option is implemented
(``docs/options.md`` lists each one with its tests).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from agentfootprint.features import registry
from agentfootprint.features.route import MAX_ITERATIONS_CAP
from agentfootprint.runtime.config import AgentConfig

__all__ = ["MAX_ITERATIONS_CAP", "AgentConfig", "resolve_options"]

#: the options :class:`AgentConfig` also holds as attributes (every field but ``options``)
_ATTRIBUTES = tuple(f.name for f in dataclasses.fields(AgentConfig) if f.name != "options")


def resolve_options(given: Mapping[str, Any]) -> AgentConfig:
    """Check every option by its feature and build the config (``store`` and
    ``disclosures`` are opened by the agent)."""
    resolved = registry.resolve(given)
    return AgentConfig(**{name: resolved[name] for name in _ATTRIBUTES}, options=resolved)
