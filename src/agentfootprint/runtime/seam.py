"""What the run loop needs of the features taking part in it (built above, by the registry).

The runtime imports no feature module: the composition root hands it a :class:`Seam`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from agentfootprint.runtime.chart import Chart

__all__ = ["Seam"]


class Seam(Protocol):
    """The chart to run, its budget and projection, and each hook point's hooks."""

    @property
    def options(self) -> Mapping[str, Any]: ...
    @property
    def chart(self) -> Chart: ...
    @property
    def stage_budget(self) -> int: ...
    @property
    def projection(self) -> int: ...
    @property
    def model_stages(self) -> frozenset[str]: ...
    @property
    def recorded_kinds(self) -> frozenset[str]: ...
    @property
    def caches(self) -> dict[str, Any]: ...

    def hooks(self, point: str) -> tuple[Any, ...]: ...
