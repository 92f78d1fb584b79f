"""The verify-every-run plugin catches what it promises to catch."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

#: the plugin, asked for as a user's suite asks for it (installing the package loads none)
PLUGIN = "agentfootprint.testing.pytest_plugin"

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
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", PLUGIN)
    result.assert_outcomes(passed=3, errors=1)
    result.stdout.fnmatch_lines(["*served_at(0) differs from the request the provider received*"])


GUARDED = """
import pytest
import agentfootprint as af
from agentfootprint.runtime import provider_guard as guard


class Real:
    name = "real"
    makes_requests = True


@pytest.fixture(scope="module")
def flag_in_a_module_fixture():
    return guard.ALLOW_MODEL_REQUESTS


def test_blocked(flag_in_a_module_fixture, model_requests_guard):
    assert flag_in_a_module_fixture is False and model_requests_guard is False
    with pytest.raises(af.ModelRequestsBlocked, match="'real' .Real. makes real model"):
        guard.check_model_requests_allowed(Real())
    guard.check_model_requests_allowed(af.MockProvider(["x"]))


@pytest.mark.allow_model_requests
def test_marked(model_requests_guard):
    assert model_requests_guard is True
    guard.check_model_requests_allowed(Real())


def test_allowed_in_a_block():
    with af.allow_model_requests(True):
        guard.check_model_requests_allowed(Real())
    with pytest.raises(af.ModelRequestsBlocked):
        guard.check_model_requests_allowed(Real())


def test_a_test_that_sets_the_flag_itself():
    guard.ALLOW_MODEL_REQUESTS = True


def test_the_next_test_is_blocked_again():
    with pytest.raises(af.ModelRequestsBlocked):
        guard.check_model_requests_allowed(Real())


@pytest.mark.allow_model_requests
class TestAllowedClass:
    def test_in_the_class(self):
        guard.check_model_requests_allowed(Real())
"""

GUARDED_MODULE = """
import pytest
from agentfootprint.runtime import provider_guard as guard

pytestmark = pytest.mark.allow_model_requests


class Real:
    name = "real"
    makes_requests = True


def test_the_module_opts_in():
    guard.check_model_requests_allowed(Real())
"""


def test_plugin_blocks_real_model_requests_in_every_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_guarded=GUARDED, test_guarded_module=GUARDED_MODULE)
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-p", "no:randomly", "-p", PLUGIN, "--strict-markers"
    )
    result.assert_outcomes(passed=7)
