"""Shared test setup: Hypothesis profiles and small helpers for agent tests."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import settings

from agentfootprint.testing.tamper import new_file_schema

# the plugin is asked for, as a user's suite asks for it (installing the package loads no
# plugin): every run a test closes is verified, and real model requests are blocked
pytest_plugins = ["agentfootprint.testing.pytest_plugin"]

# pytest keeps the test modules it rewrote (for its assert messages) as bytecode beside them
# unless Python may not write bytecode: then every run, in every worker, rewrites all of them
# again (about 10 s). The test modules are ours to cache, whatever PYTHONDONTWRITEBYTECODE says.
sys.dont_write_bytecode = False

# Hypothesis profiles: "default" for the README's ``pytest`` (examples fixed by a seed per
# test, so every run of the suite is the same run), "deep" for ``.ci/run``'s second pass over
# the properties (ten times the examples, still fixed), "explore" for a developer hunting new
# examples (random). Health checks stay on: a property that needs one off says so where it is
# declared.
settings.register_profile(
    "default", max_examples=20, deadline=None, derandomize=True, print_blob=True
)
settings.register_profile(
    "deep", max_examples=200, deadline=None, derandomize=True, print_blob=True
)
settings.register_profile("explore", max_examples=300, deadline=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every Hypothesis property is in the deep pass (``-m deep_pass``), beside the trials
    that mark themselves (crash and many-writer tests, whose counts grow under AFP_DEEP)."""
    deep = pytest.mark.deep_pass
    for item in items:
        if getattr(getattr(item, "obj", None), "is_hypothesis_test", False):
            item.add_marker(deep)


@pytest.fixture(scope="module", autouse=True)
def _module_new_file_schema(request: pytest.FixtureRequest) -> Iterator[None]:
    """A module that sets ``NEW_FILE_SCHEMA = 1`` (its tests edit the schema-1 ``events``
    table directly: docs/log-format.md appendix B) records every new file of it, module
    fixtures included, in that schema."""
    schema = getattr(request.module, "NEW_FILE_SCHEMA", None)
    if schema is None:
        yield
        return
    with new_file_schema(schema):
        yield


# -- PostgreSQL ------------------------------------------------------------------------------
# The PostgreSQL tests run against AGENTFOOTPRINT_TEST_POSTGRES (a server URL whose user may
# create databases) or, without it, a throwaway cluster this session starts from the machine's
# own server programs. Without either they are skipped, unless AGENTFOOTPRINT_REQUIRE_POSTGRES
# is set (CI sets it): then they fail, so a CI machine without PostgreSQL cannot pass quietly.


@contextlib.contextmanager
def _throwaway_cluster(*, fsync: bool) -> Iterator[Any]:
    """A cluster started for the caller and removed after it; skipped (or, with
    AGENTFOOTPRINT_REQUIRE_POSTGRES, failed) where the machine cannot run one."""
    from throwaway_cluster import ClusterUnavailable, ThrowawayCluster

    try:
        cluster = ThrowawayCluster(fsync=fsync)
        cluster.start()
    except ClusterUnavailable as exc:
        if os.environ.get("AGENTFOOTPRINT_REQUIRE_POSTGRES"):
            pytest.fail(f"PostgreSQL is required (AGENTFOOTPRINT_REQUIRE_POSTGRES): {exc}")
        pytest.skip(f"no PostgreSQL server: {exc}")
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    """The URL of a PostgreSQL maintenance database (``postgres``) whose user may create
    databases."""
    given = os.environ.get("AGENTFOOTPRINT_TEST_POSTGRES")
    if given:
        yield given
        return
    with _throwaway_cluster(fsync=False) as cluster:
        yield cluster.url()


@pytest.fixture(scope="module")
def pg_cluster() -> Iterator[Any]:
    """A cluster of the module's own (fsync on), for tests that kill its server or read its
    files; a :class:`throwaway_cluster.ThrowawayCluster` (tests/throwaway_cluster.py)."""
    with _throwaway_cluster(fsync=True) as cluster:
        yield cluster


@pytest.fixture
def pg_database(pg_server: str) -> Iterator[str]:
    """A new, empty database on :func:`pg_server`, dropped after the test; its URL."""
    import uuid

    import psycopg

    from agentfootprint.store.postgres_url import with_database

    name = f"t_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield with_database(pg_server, name)
    finally:
        with psycopg.connect(pg_server, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
