"""What the run loop needs of the features taking part in it (built above, by the registry).

The runtime imports no feature module: the composition root hands it a :class:`Seam`. The
only hook point the loop itself calls is the run's end; every other hook point is called
by the feature that owns its call site (``agentfootprint.features.registry.hooks_at``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from agentfootprint.runtime.chart import Chart

if TYPE_CHECKING:
    from agentfootprint.runtime.run import StageContext

__all__ = ["RunEndHook", "Seam"]

#: ``hook(ctx, error)``: one active feature's ``run_end``, bound to its own context
RunEndHook = Callable[["StageContext", BaseException | None], Awaitable[None]]


class Seam(Protocol):
    """The chart to run, its budget and projection, and the run-end hooks."""

    @property
    def options(self) -> Mapping[str, Any]: ...
    @property
    def chart(self) -> Chart: ...
    @property
    def stage_budget(self) -> int: ...
    @property
    def projection(self) -> int: ...
    @property
    def may_pause(self) -> bool: ...
    @property
    def model_stages(self) -> frozenset[str]: ...
    @property
    def recorded_kinds(self) -> frozenset[str]: ...
    @property
    def caches(self) -> dict[str, Any]: ...
    @property
    def run_end_hooks(self) -> tuple[RunEndHook, ...]:
        """The ``run_end`` hooks of the active features, in order."""
        ...
