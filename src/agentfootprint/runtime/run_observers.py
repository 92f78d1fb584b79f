"""Process-wide observers of closed runs (the test plugin verifies every run through this)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agentfootprint.store.base import EventReader

__all__ = ["add_run_observer", "run_closed"]

#: ``observer(store, run_id, provider)``: the store holding the run and the agent's provider.
RunObserver = Callable[[EventReader, str, Any], None]
_observers: list[RunObserver] = []


def add_run_observer(observer: RunObserver) -> Callable[[], None]:
    """Call ``observer(store, run_id, provider)`` whenever a run closes; returns a remover."""
    _observers.append(observer)

    def remove() -> None:
        if observer in _observers:
            _observers.remove(observer)

    return remove


def run_closed(store: EventReader, run_id: str, provider: Any = None) -> None:
    for observer in list(_observers):
        observer(store, run_id, provider)
