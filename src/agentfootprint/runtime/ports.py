"""A run's ports: everything it consults outside committed state.

The model, the tools, the clock, the run ids and the salts are ports of a run. A live run
plugs in the agent's provider and tools, the wall clock and random ids and salts; a replay
plugs in recorded ports (the original's replies, tool results and salts), so no stage has a
replay branch and nothing the original consulted is consulted again. Any later
decision-maker outside the run (a classifier, a permission checker, an approver) is a port
the same way: its answers are recorded, and a replay answers from the record.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

from agentfootprint.errors import UsageError
from agentfootprint.runtime.provider import LLMResponse, Request
from agentfootprint.runtime.provider_guard import check_model_requests_allowed
from agentfootprint.store.redaction import SaltSource, random_salt
from agentfootprint.store.writer import Clock, new_run_id, wall_clock_ms

if TYPE_CHECKING:
    from agentfootprint.logformat.request import RequestDigests
    from agentfootprint.store.redaction import ReplayCommitments

__all__ = [
    "DecisionPort",
    "LiveDecisions",
    "LiveModel",
    "LiveTools",
    "ModelPort",
    "PortName",
    "Ports",
    "TokenSink",
    "ToolPort",
    "UndeclaredPortError",
    "require_port",
]

#: the ports a feature may declare (``Feature.ports``) and use through its context
PortName = Literal["model", "tools", "clock", "run_ids", "salts", "decisions"]


class UndeclaredPortError(UsageError):
    """A feature used a port it did not declare: a bug in the feature, raised at the use
    (its ``ports=`` declaration is what the docs and the checks read). A usage error, so it
    surfaces as itself from a run, never wrapped."""

    def __init__(self, feature: str, port: str) -> None:
        super().__init__(
            f"feature {feature or '(none)'!r} uses the {port!r} port without declaring it: "
            f"add {port!r} to its Feature(ports=...)"
        )
        self.feature = feature
        self.port = port


def require_port(feature: str, declared: frozenset[str], port: PortName) -> None:
    """Raise :class:`UndeclaredPortError` unless ``feature`` declared ``port``."""
    if port not in declared:
        raise UndeclaredPortError(feature, port)


#: ``await on_token(text)``: a piece of a streamed reply, as it arrives
TokenSink = Callable[[str], Awaitable[None]]


class ModelPort(Protocol):
    """Answers the run's model calls."""

    name: str
    #: the run computes each request's digests for :meth:`check` even with receipts off
    checks_requests: bool

    def check(self, call: int, digests: RequestDigests, recorded: dict[str, Any]) -> None:
        """Before call ``call`` is served: raise to refuse serving it (a replay's divergence)."""

    async def complete(
        self, call: int, request: Request, *, on_token: TokenSink | None = None
    ) -> LLMResponse:
        """The reply to call ``call``. ``on_token``: where a streamed reply's pieces go as they
        arrive (None: nobody listens)."""
        ...

    def recorded(self, call: int) -> bool:
        """Call ``call``'s reply comes from a recording (already as recorded: not checked)."""
        ...


class ToolPort(Protocol):
    """Answers the run's tool calls. ``expect`` is asked before a call is dispatched: None
    means the tool is run (live); anything else is the recorded call, which the run then
    answers with :meth:`answer`, or reports with :meth:`not_run` if it would not run it."""

    def expect(self, call: dict[str, Any]) -> Any: ...

    def answer(self, expected: Any) -> tuple[Any, bool]: ...

    def not_run(self, expected: Any, content: str) -> None: ...


class DecisionPort(Protocol):
    """Answers for the deciders a run consults outside committed state (a tool classifier,
    a permission checker). A feature records each decision as an event of its own ``kind``
    holding the question and the answer; before asking its decider it asks this port:
    None means ask (live), anything else is the original's recorded event payload for the
    same question, which the feature answers with instead (a replay; a mismatching
    question is the replay's divergence, raised by the port)."""

    def recorded(self, kind: str, question: dict[str, Any]) -> dict[str, Any] | None: ...


class LiveDecisions:
    """Every decider is asked."""

    def recorded(self, kind: str, question: dict[str, Any]) -> dict[str, Any] | None:
        return None


class LiveModel:
    """The agent's provider. A provider that makes real requests is refused while they are
    blocked (under pytest, by the plugin)."""

    checks_requests = False

    def __init__(self, provider: Any) -> None:
        self.provider = provider
        self.name = str(getattr(provider, "name", type(provider).__name__))

    def check(self, call: int, digests: RequestDigests, recorded: dict[str, Any]) -> None:
        return None

    async def complete(
        self, call: int, request: Request, *, on_token: TokenSink | None = None
    ) -> LLMResponse:
        check_model_requests_allowed(self.provider)
        if on_token is not None and getattr(self.provider, "streams", False) is True:
            streamed: LLMResponse = await self.provider.complete(request, on_token=on_token)
            return streamed
        response: LLMResponse = await self.provider.complete(request)
        return response

    def recorded(self, call: int) -> bool:
        return False


class LiveTools:
    """Every tool call is run."""

    def expect(self, call: dict[str, Any]) -> Any:
        return None

    def answer(self, expected: Any) -> tuple[Any, bool]:  # pragma: no cover - never asked
        raise AssertionError("a live run answers no tool call from a recording")

    def not_run(self, expected: Any, content: str) -> None:
        return None


@dataclass(frozen=True, kw_only=True, slots=True)
class Ports:
    """The ports of a run. ``Agent(ports=Ports(clock=..., run_ids=..., salts=...))`` fixes
    the clock, ids and salts (deterministic tests compare two runs row for row); ``model``
    and ``tools`` default to the agent's provider and tools."""

    model: ModelPort | None = None
    tools: ToolPort | None = None
    #: the deciders' answers (default: ask each decider)
    decisions: DecisionPort | None = None
    clock: Clock = wall_clock_ms
    run_ids: Callable[[], str] = new_run_id
    salts: SaltSource = random_salt
    #: a replay's recorded salts (the original's, by key and value)
    recorded_salts: ReplayCommitments | None = None

    def __post_init__(self) -> None:
        for name in ("clock", "run_ids", "salts"):
            if not callable(getattr(self, name)):
                raise UsageError(
                    f"Ports({name}=...) must be a function of no arguments, got "
                    f"{getattr(self, name)!r}",
                    option=name,
                )
        for name, methods in (
            ("model", ("check", "complete", "recorded")),
            ("tools", ("expect", "answer", "not_run")),
            ("decisions", ("recorded",)),
        ):
            port = getattr(self, name)
            if port is not None and not all(callable(getattr(port, m, None)) for m in methods):
                raise UsageError(
                    f"Ports({name}=...) must have {', '.join(methods)} methods "
                    f"(see agentfootprint.runtime.ports), got {port!r}",
                    option=name,
                )
