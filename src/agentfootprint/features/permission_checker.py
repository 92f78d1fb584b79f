"""``permission_checker``: asked before every tool run; allow, deny or halt, on the record.

The checker is any object with a ``check(request)`` method (sync, or returning an
awaitable) taking a :class:`PermissionRequest` (``capability="tool_call"``, the tool, its
parsed arguments, the call's id and the iteration) and returning a :class:`Decision`
(``allow`` / ``deny`` / ``halt``, ``by``: who decided, ``reason``: why). It is asked just
before a tool would run, after the loop's own checks (no such tool, arguments not JSON,
arguments refused by validation): those calls never reach it.

* ``allow``: the tool runs as before.
* ``deny``: the tool does not run; its result (``is_error``) is the synthetic denial
  ``Error: tool '<tool>' was not run: permission denied by <by>: <reason>``.
* ``halt``: the tool does not run and the run stops with :class:`PolicyHaltError`; it
  closes ``failed`` (the tool-calls commit records the error) and its log verifies.

Every decision is one recorded event ``agentfootprint.permission.check``
``{tool, tool_call_id, arguments, iteration, decision, by, reason}`` (a halt is the same
event with ``decision: "halt"``; there is no separate halt event). A checker that raises, or
answers anything but exactly one of the documented shapes (a :class:`Decision`; a mapping
with ``decision`` and at most ``by`` and ``reason``, all str; the bare decision string), is a
denial (fail closed) whose reason names what went wrong (the exception's class, never its
message; the extra key; the wrong type), recorded the same way.

A sync ``check`` runs in a worker thread (:mod:`agentfootprint.runtime.tool_threads`), never on
the event loop: a run cancelled while it decides (``asyncio.wait_for``, Ctrl-C under
``run_sync``) stops waiting at once, closes ``failed`` with its ``CancelledError`` recorded,
and runs no tool whatever the check answers later. At interpreter exit such an abandoned
check is waited for at most ``tool_teardown_timeout_ms`` more.

The checker is a port: before asking it, the feature asks its ``decisions`` port with the
question ``{tool, tool_call_id, arguments, iteration}``; a replay answers from the
original's recorded event, so the checker is never called again (and a replay asking a
different question diverges with kind ``decision``). An object without a callable
``check`` is refused at construction.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Protocol, runtime_checkable

from agentfootprint.errors import PolicyHaltError, UsageError
from agentfootprint.features import tool_teardown
from agentfootprint.features.base import (
    MISSING,
    Feature,
    HookContext,
    OptionSpec,
    ToolResult,
    refuse,
    unreadable_decision,
)
from agentfootprint.features.tool_dispatch import recordable_arguments
from agentfootprint.runtime.events import AgentEvent, detached
from agentfootprint.runtime.tool_threads import call_user_code
from agentfootprint.runtime.tools import ToolOutcome

__all__ = [
    "CAPABILITY",
    "DECISIONS",
    "Decision",
    "PermissionCheck",
    "PermissionChecker",
    "PermissionRequest",
    "denial_message",
]

OPTION = "permission_checker"
#: what a :class:`PermissionRequest` asks about (the only capability checked here)
CAPABILITY = "tool_call"
DECISIONS = ("allow", "deny", "halt")


@dataclass(frozen=True, kw_only=True, slots=True)
class PermissionRequest:
    """What the checker is asked, before one tool call runs."""

    capability: str  #: ``"tool_call"``
    tool: str
    arguments: Any  #: as parsed (JSON)
    tool_call_id: str
    iteration: int
    run_id: str


@dataclass(frozen=True, kw_only=True, slots=True)
class Decision:
    """A checker's answer: ``decision`` is ``allow``, ``deny`` or ``halt``; ``by`` says who
    decided (default: the checker's ``name``, else its class name), ``reason`` why."""

    decision: Literal["allow", "deny", "halt"]
    by: str = ""
    reason: str = ""

    def __post_init__(self) -> None:
        if self.decision not in DECISIONS:
            raise UsageError(
                f"Decision(decision=...) must be one of {', '.join(DECISIONS)}, got "
                f"{self.decision!r}",
                option="decision",
            )
        for name in ("by", "reason"):
            if not isinstance(getattr(self, name), str):
                raise UsageError(f"Decision({name}=...) must be a str", option=name)

    @classmethod
    def allow(cls, reason: str = "", *, by: str = "") -> Decision:
        return cls(decision="allow", by=by, reason=reason)

    @classmethod
    def deny(cls, reason: str = "", *, by: str = "") -> Decision:
        return cls(decision="deny", by=by, reason=reason)

    @classmethod
    def halt(cls, reason: str = "", *, by: str = "") -> Decision:
        return cls(decision="halt", by=by, reason=reason)


@runtime_checkable
class PermissionChecker(Protocol):
    """What ``permission_checker`` takes: ``check(request)`` returns a :class:`Decision`
    (or an awaitable of one). A mapping ``{"decision", "by"?, "reason"?}`` or the bare
    string ``"allow"`` / ``"deny"`` / ``"halt"`` is accepted as well."""

    def check(self, request: PermissionRequest) -> Any: ...


@dataclass(frozen=True, kw_only=True)
class PermissionCheck(AgentEvent):
    """One permission decision for one tool call (the question and the answer)."""

    kind: ClassVar[str] = "agentfootprint.permission.check"
    tool: str
    tool_call_id: str
    arguments: Any
    iteration: int
    decision: str  #: ``allow``, ``deny`` or ``halt``
    by: str  #: who decided
    reason: str


def _check(value: Any, given: Mapping[str, Any]) -> Any:
    if value is MISSING or value is None:
        return None
    if not callable(getattr(value, "check", None)):
        raise refuse(
            OPTION,
            "must be an object with a check(request) method returning a Decision "
            f"(agentfootprint.features.permission_checker), got {value!r}",
        )
    return value


def _who(checker: Any) -> str:
    name = getattr(checker, "name", None)
    return name if isinstance(name, str) and name else type(checker).__name__


class _Garbage(Exception):
    """The checker's answer is not a decision."""


#: the keys a mapping answer may hold (``decision`` required)
_KEYS = ("decision", "by", "reason")


def _shown(value: Any) -> str:
    """A short repr for a reason (what the checker answered, never more than 40 chars)."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _normalised(answer: Any, by: str) -> tuple[str, str, str]:
    """The answer as ``(decision, by, reason)`` when it is exactly one of the documented
    shapes; anything else (an extra key, a missing decision, a wrong type) is garbage."""
    decision: Any
    who: Any
    reason: Any
    if isinstance(answer, Decision):
        decision, who, reason = answer.decision, answer.by, answer.reason
    elif isinstance(answer, Mapping):
        extra = [key for key in answer if key not in _KEYS]
        if extra:
            raise _Garbage(
                "the permission checker answered a mapping with key "
                + ", ".join(_shown(key) for key in extra[:3])
                + (", ..." if len(extra) > 3 else "")
                + " beyond decision, by, reason"
            )
        if "decision" not in answer:
            raise _Garbage("the permission checker answered a mapping without a decision")
        decision, who, reason = answer["decision"], answer.get("by", ""), answer.get("reason", "")
    elif isinstance(answer, str):
        decision, who, reason = answer, "", ""
    else:
        raise _Garbage(f"the permission checker returned {type(answer).__name__}, not a Decision")
    if not isinstance(decision, str) or decision not in DECISIONS:
        raise _Garbage(
            f"the permission checker returned decision {_shown(decision)}, not one of "
            + ", ".join(DECISIONS)
        )
    for name, value in (("by", who), ("reason", reason)):
        if not isinstance(value, str):
            raise _Garbage(
                f"the permission checker returned a decision whose {name} is a "
                f"{type(value).__name__}, not a str"
            )
    return str(decision), who or by, str(reason)


async def _ask(checker: Any, request: PermissionRequest, grace: float) -> tuple[str, str, str]:
    """The checker's decision, normalised; fail closed (deny) when it raises or answers
    anything but a decision. A sync ``check`` runs in a worker thread, never on the loop:
    a cancelled run (``wait_for``, Ctrl-C) stops waiting for it at once, and no answer
    arriving later runs the tool."""
    by = _who(checker)
    try:
        answer = await call_user_code(checker.check, request, grace=grace)
        return _normalised(answer, by)
    except _Garbage as exc:
        return "deny", by, f"{exc}; denied (fail closed)"
    except Exception as exc:
        return (
            "deny",
            by,
            f"the permission checker raised {type(exc).__name__}; denied (fail closed)",
        )


def _recorded_answer(
    ctx: HookContext[PermissionChecker], recorded: Mapping[str, Any]
) -> tuple[str, str, str]:
    decision, by, reason = (recorded.get(k) for k in ("decision", "by", "reason"))
    if decision not in DECISIONS or not isinstance(by, str) or not isinstance(reason, str):
        raise unreadable_decision(ctx, PermissionCheck.kind, "decision")
    return str(decision), by, reason


def denial_message(tool: str, by: str, reason: str) -> str:
    """The result a denied call answers with (what the model reads)."""
    why = f": {reason}" if reason else ""
    return f"Error: tool '{tool}' was not run: permission denied by {by}{why}."


class _PermissionChecker(Feature[PermissionChecker]):
    def settings(self, options: Mapping[str, Any]) -> PermissionChecker:
        """The checker (an object with a ``check(request)`` method)."""
        checker: PermissionChecker = options[OPTION]
        return checker

    async def tool_permission(
        self, ctx: HookContext[PermissionChecker], call: ToolResult
    ) -> ToolOutcome | None:
        question = {
            "tool": call.tool,
            "tool_call_id": call.tool_call_id,
            "arguments": recordable_arguments(call.arguments),
            "iteration": call.iteration,
        }
        recorded = ctx.decisions.recorded(PermissionCheck.kind, question)
        if recorded is None:
            request = PermissionRequest(
                capability=CAPABILITY,
                tool=call.tool,
                arguments=detached(question["arguments"]),  # the checker's own: never the row's
                tool_call_id=call.tool_call_id,
                iteration=call.iteration,
                run_id=ctx.run_id,
            )
            decision, by, reason = await _ask(ctx.options, request, tool_teardown.grace(ctx))
        else:
            decision, by, reason = _recorded_answer(ctx, recorded)
        await ctx.emit(
            PermissionCheck(run_id=ctx.run_id, **question, decision=decision, by=by, reason=reason)
        )
        if decision == "allow":
            return None
        if decision == "halt":
            why = f": {reason}" if reason else ""
            raise PolicyHaltError(
                f"run {ctx.run_id}: {by} halted the run at tool '{call.tool}' "
                f"(call {call.tool_call_id}){why}",
                tool=call.tool,
                tool_call_id=call.tool_call_id,
                by=by,
                reason=reason,
                run_id=ctx.run_id,
            )
        return ToolOutcome(content=denial_message(call.tool, by, reason), is_error=True)


FEATURE = _PermissionChecker(
    name="permission-checker",
    summary="a checker asked before every tool run: allow, deny (a synthetic result) or halt",
    order=60,
    options=(
        OptionSpec(
            name=OPTION,
            seed="permissionChecker",
            check=_check,
            summary="allow / deny / halt each tool call",
        ),
    ),
    events=(PermissionCheck,),
    recorded_events=(PermissionCheck,),
    ports=("decisions",),
    needs=(tool_teardown.NAME,),
    active=lambda options: options.get(OPTION) is not None,
)
