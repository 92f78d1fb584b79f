"""Helpers the adapter tests share."""

from __future__ import annotations

from typing import Any

import pytest

import agentfootprint as af
from agentfootprint.testing.records import outcome


class Sleeps:
    """A retry policy's sleep that records the waits and does not wait."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def failed_run(agent: af.Agent, text: str) -> Any:
    """Run ``text``; it must fail with ProviderCallError and close as failed, verified."""
    with pytest.raises(af.ProviderCallError) as caught:
        agent.run_sync(text)
    run_id = str(caught.value.run_id)
    assert outcome(agent.store, run_id) == "failed"
    return caught.value, run_id
