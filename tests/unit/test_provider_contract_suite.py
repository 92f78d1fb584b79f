"""The provider contract (agentfootprint.testing.provider_contract) run by the mock.

The HTTP adapters run the same cases against their fake vendor servers
(tests/providers/), and so does docs/providers.md's example provider.
"""

from __future__ import annotations

from typing import Any

import pytest

import agentfootprint as af
from agentfootprint.testing.provider_contract import ProviderContract, ServedProviderContract

pytestmark = pytest.mark.allow_model_requests  # the docs example makes real (local) requests


class TestMockProvider(ProviderContract):
    reports_cache = True  # the mock passes the scripted usage through as given

    def scripted(self, replies: list[Any]) -> Any:
        return af.MockProvider(replies)


class TestDocsExampleProvider(ServedProviderContract):
    """docs/providers.md's complete example, as written, against the fake Chat Completions
    server (it speaks the same wire format)."""

    def fake(self, replies: list[Any]) -> Any:
        from agentfootprint.testing.fake_openai import FakeOpenAI, scripted_reply

        return FakeOpenAI([scripted_reply(r) for r in replies])

    def provider_for(self, server: Any) -> Any:
        from test_provider_contract import docs_provider

        return docs_provider()(server.url)
