"""``group_translator``: the agent as one group, in the shape a UI of the user's wants.

The translator is any callable taking a :class:`GroupMetadata`: ``kind="Agent"``, the agent's
``id`` and ``name``, no ``members`` (tools are functions, not agents: they go by name in
``extra``), and ``extra={"slots": [...], "tool_names": [...]}``: the chart's stages in
``agent.chart.describe()`` order (this chart's slots are stages of the one chart) and the
registered tools' names. ``agent.ui_group()`` calls it on its first call and keeps what it
returned (a translator that raises is a :class:`~agentfootprint.errors.UsageError` naming the
option, the error chained, and is asked again next time); without a translator it returns
None. Nothing is recorded: the option is not in ``run.open`` and no row changes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from agentfootprint.features.base import MISSING, Feature, Given, Options, OptionSpec, refuse
from agentfootprint.runtime.chart import Chart
from agentfootprint.runtime.config import AgentConfig

__all__ = ["FEATURE", "OPTION", "GroupMetadata", "GroupTranslator", "translated_group"]

OPTION = "group_translator"


@dataclass(frozen=True, kw_only=True, slots=True)
class GroupMetadata:
    """What a translator is given: the agent as a group (``extra`` is the translator's own
    copy: changing it changes nothing of the agent)."""

    kind: Literal["Agent"] = "Agent"
    id: str
    name: str
    members: tuple[object, ...] = ()
    #: ``slots``: the chart's stage names; ``tool_names``: the registered tools' names
    extra: Mapping[str, Any] = field(default_factory=dict)


#: a translator: the agent's metadata in, whatever the UI wants out
GroupTranslator = Callable[[GroupMetadata], object]


def _check(value: Any, given: Given) -> Any:
    if value is MISSING or value is None:
        return None
    if not callable(value):
        raise refuse(
            OPTION,
            "must be a callable taking the agent's GroupMetadata "
            f"(agentfootprint.GroupMetadata), got {type(value).__name__}",
        )
    return value


def group_metadata(config: AgentConfig, chart: Chart) -> GroupMetadata:
    """The agent's metadata, built fresh (nothing in it is the agent's own object)."""
    return GroupMetadata(
        id=config.id,
        name=config.name,
        extra={
            "slots": [entry["stage"] for entry in chart.describe()],
            "tool_names": [tool.name for tool in config.tools],
        },
    )


def translated_group(config: AgentConfig, chart: Chart) -> object:
    """What the agent's translator makes of its metadata (None without one)."""
    translator: GroupTranslator | None = config.options.get(OPTION)
    if translator is None:
        return None
    try:
        return translator(group_metadata(config, chart))
    except Exception as exc:
        raise refuse(
            OPTION, f"the translator raised {type(exc).__name__}: {exc}; fix it or leave it out"
        ) from exc


FEATURE: Feature[Options] = Feature(
    name="group-translator",
    summary="agent.ui_group(): the agent's metadata through the user's translator",
    order=150,
    options=(
        OptionSpec(
            name=OPTION,
            seed="groupTranslator",
            check=_check,
            summary="agent.ui_group() through a translator",
        ),
    ),
    active=lambda options: options.get(OPTION) is not None,
)
