"""Process-wide observers of closed runs (the test plugin verifies every run through this)."""

from __future__ import annotations

from collections.abc import Callable

from agentfootprint.store.base import EventReader

__all__ = ["add_run_observer", "run_closed"]

RunObserver = Callable[[EventReader, str], None]
_observers: list[RunObserver] = []


def add_run_observer(observer: RunObserver) -> Callable[[], None]:
    """Call ``observer(store, run_id)`` whenever a run closes; returns a remover."""
    _observers.append(observer)

    def remove() -> None:
        if observer in _observers:
            _observers.remove(observer)

    return remove


def run_closed(store: EventReader, run_id: str) -> None:
    for observer in list(_observers):
        observer(store, run_id)
