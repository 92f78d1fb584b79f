"""Going away (issue 25): the pool of list versions reused by reference counts is gone.

Appends make a new list (``base + tail``): every version anybody holds keeps its contents
without a pool, and nothing reads reference counts. This name stays only until
``agent/agent.py`` and ``runtime/run.py`` stop making and passing one
(/tmp/h/requests-verifier.md); ``Scope`` and ``apply_write`` ignore it.
"""

from __future__ import annotations

__all__ = ["Spares"]


class Spares:
    """Holds nothing; accepted and ignored where a pool was passed (see the module doc)."""

    __slots__ = ()

    def __init__(self, capacity: int = 0) -> None:
        del capacity
