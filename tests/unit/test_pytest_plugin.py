"""The verify-every-run plugin catches what it promises to catch."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

LYING_PROVIDER = """
import pytest
import agentfootprint as af


class Lying(af.MockProvider):
    async def complete(self, request):
        response = await super().complete(request)
        self.requests[-1]["model"] = "not-what-was-served"
        return response


def test_lying_provider():
    af.Agent(provider=Lying(["hi"]), model="m").run_sync("go")


@pytest.mark.unverified("this test checks the opt-out")
def test_opted_out():
    af.Agent(provider=Lying(["hi"]), model="m").run_sync("go")


def test_honest(verified_runs):
    result = af.Agent(provider=af.MockProvider(["hi"]), model="m").run_sync("go")
    assert verified_runs.run_ids == [result.run_id]
"""


def test_plugin_compares_served_with_received(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_lying=LYING_PROVIDER)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=3, errors=1)
    result.stdout.fnmatch_lines(["*served_at(0) differs from the request the provider received*"])
