"""pytest plugin: every agent run closed during a test is verified.

Installed with the package (entry point ``pytest11``), so a project's own agent
tests get it too. The check runs when each run closes (a run that fails
verification fails the test at teardown, naming run, seq and reason). Mark a
test ``@pytest.mark.unverified("why")`` to skip it, e.g. when the test damages
logs on purpose. The ``verified_runs`` fixture lists what was verified.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agentfootprint.core import hooks
from agentfootprint.errors import AgentFootprintError, VerificationError
from agentfootprint.store.base import EventReader
from agentfootprint.verify.verifier import RunVerification, Verifier

__all__ = ["VerifiedRuns", "verified_runs"]


class VerifiedRuns:
    """Runs verified during one test, and the failures found."""

    def __init__(self) -> None:
        self.results: list[RunVerification] = []
        self.failures: list[str] = []
        self._verifiers: dict[int, tuple[EventReader, Verifier]] = {}

    def __call__(self, store: EventReader, run_id: str) -> None:
        entry = self._verifiers.get(id(store))
        if entry is None or entry[0] is not store:
            entry = self._verifiers[id(store)] = (store, Verifier(store))
        try:
            self.results.append(entry[1].verify(run_id))
        except VerificationError as exc:
            self.failures.append(str(exc))
        except AgentFootprintError as exc:  # e.g. the store could not be read
            self.failures.append(f"run {run_id}: could not be verified: {exc}")

    @property
    def run_ids(self) -> list[str]:
        return [r.run_id for r in self.results]


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


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "unverified(reason): do not verify the runs this test closes"
    )
