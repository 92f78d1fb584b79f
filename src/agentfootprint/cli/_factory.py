"""``--agent MODULE:FACTORY``: the Agent a replay runs, built from the user's code."""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from agentfootprint.errors import UsageError

if TYPE_CHECKING:
    from agentfootprint.agent.agent import Agent

__all__ = ["build_agent", "cwd_on_path"]


@contextlib.contextmanager
def cwd_on_path() -> Iterator[None]:
    """The current directory on ``sys.path`` (as ``python -m`` would have it) while inside."""
    cwd = os.getcwd()
    added = cwd not in sys.path
    if added:
        sys.path.insert(0, cwd)
    importlib.invalidate_caches()  # a module written since the last import must be found
    try:
        yield
    finally:
        if added:
            with contextlib.suppress(ValueError):
                sys.path.remove(cwd)


def _load_factory(spec: str) -> Callable[[], Any]:
    """``module:attr`` (``attr`` may be dotted) to the callable it names."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name.strip() or not attr.strip():
        raise UsageError(
            f"--agent takes MODULE:FACTORY (e.g. myproject.agents:build_agent), got {spec!r}"
        )
    try:
        found: Any = importlib.import_module(module_name)
    except Exception as exc:  # ImportError, or anything the module raised while importing
        raise UsageError(
            f"--agent {spec}: cannot import {module_name!r}: {type(exc).__name__}: {exc}"
        ) from exc
    for part in attr.split("."):
        try:
            found = getattr(found, part)
        except AttributeError as exc:
            raise UsageError(f"--agent {spec}: {module_name} has no attribute {attr!r}") from exc
    if not callable(found):
        raise UsageError(f"--agent {spec}: {attr} is not callable (it is a {type(found).__name__})")
    factory: Callable[[], Any] = found
    return factory


def build_agent(spec: str) -> Agent:
    """Call the factory ``spec`` names; anything it raises, or a non-Agent, is a usage error."""
    from agentfootprint.agent.agent import Agent

    factory = _load_factory(spec)
    try:
        agent = factory()
    except Exception as exc:
        raise UsageError(f"--agent {spec}: the factory raised {type(exc).__name__}: {exc}") from exc
    if not isinstance(agent, Agent):
        raise UsageError(
            f"--agent {spec}: the factory must return an agentfootprint Agent, "
            f"it returned {type(agent).__name__}"
        )
    return agent
