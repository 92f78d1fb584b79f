"""pytest plugin: every agent run closed during a test is verified, and real model requests
are blocked. Loaded only when asked for, never by installing the package::

    pytest -p agentfootprint.testing.pytest_plugin
    # or, in a conftest.py at the root of the tests:
    pytest_plugins = ["agentfootprint.testing.pytest_plugin"]

The check runs when each run closes (a run that fails verification fails the test at
teardown, naming run, seq and reason). When the agent's provider is a recording
:class:`MockProvider`, the plugin also checks that every request rebuilt from the log
(``served_at``) equals the request the provider actually received. Mark a test
``@pytest.mark.unverified("why")`` to skip all of this, e.g. when the test damages logs on
purpose. The ``verified_runs`` fixture lists what was verified.

Blocking model requests is its own switch, the ini option
``agentfootprint_block_model_requests`` (default true): while on, a provider whose class sets
``makes_requests = True`` raises :class:`~agentfootprint.errors.ModelRequestsBlocked` instead
of calling its model, in every test and in fixtures of any scope. A test opts in with
``@pytest.mark.allow_model_requests`` (on the test, its class, or a module's ``pytestmark``),
or allows a block with ``with agentfootprint.allow_model_requests(True):``. ``MockProvider``
and providers without the attribute are never blocked. ``false`` leaves requests alone (the
verification stays).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from agentfootprint.audit.read import RunReader
from agentfootprint.errors import AgentFootprintError, VerificationError
from agentfootprint.logformat.commitments import is_commitment, parse_json_container
from agentfootprint.runtime import provider_guard as guard
from agentfootprint.runtime import run_observers as hooks
from agentfootprint.runtime.mock_provider import MockProvider
from agentfootprint.store.base import EventReader
from agentfootprint.verify.verifier import RunVerification, Verifier

__all__ = ["VerifiedRuns", "model_requests_guard", "verified_runs"]


class VerifiedRuns:
    """Runs verified during one test, and the failures found."""

    def __init__(self) -> None:
        self.results: list[RunVerification] = []
        self.failures: list[str] = []
        self._verifiers: dict[int, tuple[EventReader, Verifier]] = {}

    def __call__(self, store: EventReader, run_id: str, provider: Any = None) -> None:
        entry = self._verifiers.get(id(store))
        if entry is None or entry[0] is not store:
            entry = self._verifiers[id(store)] = (store, Verifier(store))
        try:
            result = entry[1].verify(run_id)
            self.results.append(result)
            if isinstance(provider, MockProvider) and provider.recording:
                self._check_served(RunReader(store, verifier=entry[1]), result, provider)
        except VerificationError as exc:
            self.failures.append(str(exc))
        except AgentFootprintError as exc:  # e.g. the store could not be read
            self.failures.append(f"run {run_id}: could not be verified: {exc}")

    def _check_served(
        self, reader: RunReader, result: RunVerification, provider: MockProvider
    ) -> None:
        if result.close is None:
            return  # UNSEALED: its last receipt may be of a request that never left
        calls = int(result.close.get("calls", 0))
        received = provider.requests[len(provider.requests) - calls :] if calls else []
        if len(received) != calls:
            return  # the provider was reset or shared oddly: nothing reliable to compare
        served = reader.served_requests(result.run_id)
        for k, (rebuilt, sent) in enumerate(zip(served, received, strict=False)):
            if not same_but_committed(rebuilt, sent):
                self.failures.append(
                    f"run {result.run_id}: served_at({k}) differs from the request the "
                    "provider received"
                )
                return
        if len(served) != calls:
            self.failures.append(
                f"run {result.run_id}: the log rebuilds {len(served)} requests, the provider "
                f"received {calls}"
            )

    @property
    def run_ids(self) -> list[str]:
        return [r.run_id for r in self.results]


def same_but_committed(recorded: Any, sent: Any) -> bool:
    """``recorded`` equals ``sent`` except where it holds a commitment (which stands for
    whatever value was there); JSON text inside strings is compared the same way.

    Walked with a stack of (lazy) pair iterators, however deep the values: pairs are
    compared depth first, in order, and the first that differs decides."""
    stack: list[Iterator[tuple[Any, Any]]] = [iter(((recorded, sent),))]
    while stack:
        pair = next(stack[-1], None)
        if pair is None:
            stack.pop()
            continue
        recorded, sent = pair
        if is_commitment(recorded):
            continue
        if type(recorded) is dict:
            if type(sent) is not dict or recorded.keys() != sent.keys():
                return False
            stack.append(_members(recorded, sent))
        elif type(recorded) is list:
            if type(sent) is not list or len(recorded) != len(sent):
                return False
            stack.append(zip(recorded, sent, strict=True))
        elif type(recorded) is str and type(sent) is str and recorded != sent:
            inner, original = parse_json_container(recorded), parse_json_container(sent)
            if inner is None or original is None:
                return False
            stack.append(iter(((inner, original),)))
        elif not (type(recorded) is type(sent) and recorded == sent):
            return False
    return True


def _members(recorded: dict[str, Any], sent: dict[str, Any]) -> Iterator[tuple[Any, Any]]:
    for key in recorded:
        yield recorded[key], sent[key]


@pytest.fixture(autouse=True)
def verified_runs(request: pytest.FixtureRequest) -> Iterator[VerifiedRuns]:
    """Verify every run that closes during the test (autouse)."""
    marker = request.node.get_closest_marker("unverified")
    runs = VerifiedRuns()
    remove = hooks.add_run_observer(runs) if marker is None else (lambda: None)
    try:
        yield runs
    finally:
        remove()
    if runs.failures:
        pytest.fail("agent runs failed verification:\n" + "\n".join(runs.failures), pytrace=False)


@pytest.fixture(autouse=True)
def model_requests_guard(request: pytest.FixtureRequest) -> Iterator[bool]:
    """Block real model requests during the test (autouse), unless it is marked
    ``allow_model_requests``; yields whether they are allowed. The previous setting is
    restored afterwards."""
    previous = guard.ALLOW_MODEL_REQUESTS
    allowed = (
        not _blocks(request.config)
        or request.node.get_closest_marker("allow_model_requests") is not None
    )
    guard.ALLOW_MODEL_REQUESTS = allowed
    try:
        yield allowed
    finally:
        guard.ALLOW_MODEL_REQUESTS = previous


_SESSION_FLAG = pytest.StashKey[bool]()
BLOCK_OPTION = "agentfootprint_block_model_requests"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        BLOCK_OPTION,
        "block real model requests in every test (agentfootprint's plugin); true by default",
        type="bool",
        default=True,
    )


def _blocks(config: pytest.Config) -> bool:
    return bool(config.getini(BLOCK_OPTION))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "unverified(reason): do not verify the runs this test closes"
    )
    config.addinivalue_line(
        "markers",
        "allow_model_requests: let providers that make real model requests call their model",
    )
    if not _blocks(config):
        return
    # blocked outside tests too (collection, fixtures of any scope), restored at the end
    config.stash[_SESSION_FLAG] = guard.ALLOW_MODEL_REQUESTS
    guard.ALLOW_MODEL_REQUESTS = False


def pytest_unconfigure(config: pytest.Config) -> None:
    if _SESSION_FLAG in config.stash:
        guard.ALLOW_MODEL_REQUESTS = config.stash[_SESSION_FLAG]
