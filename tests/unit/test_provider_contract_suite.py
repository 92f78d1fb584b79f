"""The provider contract (agentfootprint.testing.provider_contract) run by the mock.

The HTTP adapters run the same cases against their fake vendor servers
(tests/providers/), and so does docs/providers.md's example provider.
"""

from __future__ import annotations

from typing import Any

import agentfootprint as af
from agentfootprint.testing.provider_contract import ProviderContract


class TestMockProvider(ProviderContract):
    reports_cache = True  # the mock passes the scripted usage through as given

    def scripted(self, replies: list[Any]) -> Any:
        return af.MockProvider(replies)
