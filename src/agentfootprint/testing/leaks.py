"""The leak guard switched off, for a test that must show its sweep can find what the guard
keeps out (a sweep that finds nothing either way proves nothing)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from agentfootprint.runtime import leak_guard

__all__ = ["guard_switched_off"]


@contextlib.contextmanager
def guard_switched_off() -> Iterator[None]:
    """Within the block, runs keep no secret out of their record (never outside a test)."""
    leak_guard.SWITCHED_OFF_FOR_TESTS = True
    try:
        yield
    finally:
        leak_guard.SWITCHED_OFF_FOR_TESTS = False
