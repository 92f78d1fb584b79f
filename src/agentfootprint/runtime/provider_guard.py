"""The guard that keeps test suites from calling real models (after pydantic-ai's
``ALLOW_MODEL_REQUESTS``).

A provider class that calls a real model sets ``makes_requests = True``. Before each live
call the loop asks :func:`check_model_requests_allowed`, which refuses such a provider with
:class:`~agentfootprint.errors.ModelRequestsBlocked` while :data:`ALLOW_MODEL_REQUESTS` is
False. The pytest plugin sets it False for every test, so a suite never spends money or
leaks a prompt by accident; a test opts in with ``@pytest.mark.allow_model_requests`` or
``with allow_model_requests(True):``. Providers without the attribute (``MockProvider``, a
test's own fakes) are never refused.

The flag is one process-wide global, as pydantic-ai's is: set it from the test (or the
program), not from concurrent tasks that disagree.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from types import TracebackType
from typing import Any

from agentfootprint.errors import ModelRequestsBlocked, UsageError

__all__ = ["ALLOW_MODEL_REQUESTS", "allow_model_requests", "check_model_requests_allowed"]

#: Whether providers that make real requests may be called (the pytest plugin sets False).
ALLOW_MODEL_REQUESTS: bool = True


def allow_model_requests(flag: bool) -> AbstractContextManager[None]:
    """``with allow_model_requests(True):`` allows real model requests inside the block
    (``False`` blocks them); the previous setting is restored on leaving it, however the
    block ends."""
    if type(flag) is not bool:
        raise UsageError(
            f"allow_model_requests(flag) takes True or False, got {flag!r}", option="flag"
        )
    return _Setting(flag)


class _Setting(AbstractContextManager[None]):
    __slots__ = ("_flag", "_previous")

    def __init__(self, flag: bool) -> None:
        self._flag = flag
        self._previous: list[bool] = []  # a stack: the same object may be entered again

    def __enter__(self) -> None:
        global ALLOW_MODEL_REQUESTS
        self._previous.append(ALLOW_MODEL_REQUESTS)
        ALLOW_MODEL_REQUESTS = self._flag

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        global ALLOW_MODEL_REQUESTS
        ALLOW_MODEL_REQUESTS = self._previous.pop()


def makes_requests(provider: Any) -> bool:
    """Whether ``provider`` declares that it calls a real model."""
    return getattr(provider, "makes_requests", False) is True


def check_model_requests_allowed(provider: Any) -> None:
    """Refuse ``provider`` if it makes real requests while they are blocked."""
    if ALLOW_MODEL_REQUESTS or not makes_requests(provider):
        return
    name = getattr(provider, "name", None)
    named = (
        f"{name!r} ({type(provider).__name__})"
        if isinstance(name, str)
        else repr(type(provider).__name__)
    )
    raise ModelRequestsBlocked(
        f"provider {named} makes real model requests, and they are blocked here (the "
        "agentfootprint pytest plugin blocks them in every test, so a suite never calls a "
        "paid model by accident). To allow them, mark the test "
        "@pytest.mark.allow_model_requests, or call inside "
        "`with agentfootprint.allow_model_requests(True):`; to test without a model, use "
        "agentfootprint.MockProvider",
        option="provider",
    )
