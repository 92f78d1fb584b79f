"""Shared test setup: Hypothesis profiles and small helpers for agent tests."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from agentfootprint.testing.tamper import new_file_schema

settings.register_profile(
    "ci",
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)
settings.register_profile(
    "dev",
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile("thorough", max_examples=1000, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))


@pytest.fixture(scope="module", autouse=True)
def _module_new_file_schema(request: pytest.FixtureRequest) -> Iterator[None]:
    """A module that sets ``NEW_FILE_SCHEMA = 1`` (its tests edit the schema-1 ``events``
    table directly: docs/log-format.md section 4) records every new file of it, module
    fixtures included, in that schema."""
    schema = getattr(request.module, "NEW_FILE_SCHEMA", None)
    if schema is None:
        yield
        return
    with new_file_schema(schema):
        yield
