"""The messages slot: projection 1 serves the whole history, so it commits nothing."""

from __future__ import annotations

from agentfootprint.features.base import Feature, Options, StageSpec
from agentfootprint.runtime.run import StageContext


async def messages(ctx: StageContext) -> None:
    """Nothing to compose: the history is served as recorded."""


FEATURE: Feature[Options] = Feature(
    name="messages",
    summary="the messages slot",
    order=20,
    stages=(StageSpec(name="messages", fn=messages, phase="iteration", order=20),),
)
