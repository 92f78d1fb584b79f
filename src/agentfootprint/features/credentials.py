"""``credentials`` and ``on_authorization_required``: a tool's credential resolved before
it runs, through a recorded decision, never recorded itself.

A tool declares ``define_tool(needs={"credential": service, ...})``; the agent's
``credentials`` service is asked after the permission check (a call that will not run gets
no credential) and its answer is recorded as ``agentfootprint.credential.resolved``: the
status, the credential's kind and expiry, or the class of the error, never the token and
never the consent URL. A replay answers from that record and never asks the service.
A credential that needs a person's consent pauses the run (``"pause"``, the default: the
URL goes to the caller on ``RunResult.pending``) or answers the call with a refusal the
model reads (``"tell-model"``: the turn then fails with
:class:`~agentfootprint.errors.CredentialConsentRequiredError`, which carries the URL).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from agentfootprint.errors import CredentialConsentRequiredError
from agentfootprint.features.base import (
    MISSING,
    Feature,
    HookContext,
    OptionSpec,
    PauseRequest,
    ToolResult,
    refuse,
    unreadable_decision,
)
from agentfootprint.logformat.literal_forms import MIN_LITERAL_BYTES
from agentfootprint.runtime.credentials import (
    AuthorizationRequired,
    Credential,
    CredentialRequest,
    Issued,
    issued_credential,
)
from agentfootprint.runtime.events import LEAK_BLOCKED, AgentEvent
from agentfootprint.runtime.tool_threads import call_user_code
from agentfootprint.runtime.tools import Tool, ToolOutcome

OPTION = "credentials"
MODE = "on_authorization_required"
MODES = ("pause", "tell-model")
STATUSES = ("issued", "authorization-required", "failed")


@dataclass(frozen=True, kw_only=True)
class CredentialResolved(AgentEvent):
    """The credential service's answer for one tool call (the question and the answer),
    without the secret and without the consent URL."""

    kind: ClassVar[str] = "agentfootprint.credential.resolved"
    tool: str
    tool_call_id: str
    service: str
    scopes: list[str]
    mode: str
    status: str  #: ``issued``, ``authorization-required`` or ``failed``
    credential_kind: str | None = field(default=None, metadata={"omit_none": True})
    expires_at: int | None = field(default=None, metadata={"omit_none": True})
    error_class: str | None = field(default=None, metadata={"omit_none": True})


@dataclass(frozen=True, kw_only=True)
class CredentialLeakBlocked(AgentEvent):
    """The leak guard withheld a credential the run vended: from a tool's result (the whole
    result refused: ``tool`` and ``tool_call_id`` name it), or from a value the run recorded
    (``where``: its state key, event kind, or ``error``)."""

    kind: ClassVar[str] = LEAK_BLOCKED
    where: str
    tool: str | None = field(default=None, metadata={"omit_none": True})
    tool_call_id: str | None = field(default=None, metadata={"omit_none": True})


@dataclass(frozen=True, slots=True)
class CredentialSettings:
    service: Any
    on_authorization_required: Literal["pause", "tell-model"]


@dataclass(slots=True)
class _Outstanding:
    """Services whose consent a ``tell-model`` run still lacks (service -> URL)."""

    consents: dict[str, str | None] = field(default_factory=dict)


def _credentials(value: Any, given: Mapping[str, Any]) -> Any:
    if value is MISSING or value is None:
        for tool in given.get("tools") or ():  # (checked before this option: Tools)
            if isinstance(tool, Tool) and tool.needs is not None:
                raise refuse(
                    OPTION,
                    f"tool {tool.name!r} needs a credential for {tool.needs.service!r}, and the "
                    "agent has no credential service: give credentials=... (an object with "
                    "get_credential(request), e.g. agentfootprint.static_tokens({...}))",
                )
        return None
    if not callable(getattr(value, "get_credential", None)):
        raise refuse(
            OPTION,
            "must be an object with a get_credential(request) method answering Issued or "
            f"AuthorizationRequired (e.g. agentfootprint.static_tokens({{...}})), got {value!r}",
        )
    return value


def _mode(value: Any, given: Mapping[str, Any]) -> str | None:
    has_service = given.get(OPTION) is not None
    if value is MISSING or value is None:
        return "pause" if has_service else None
    if not has_service:
        raise refuse(MODE, "applies to tools' credentials: give credentials=... too")
    if value not in MODES:
        raise refuse(MODE, f"must be one of {', '.join(map(repr, MODES))}, got {value!r}")
    return str(value)


def consent_question(service: str, tool: str) -> str:
    """What the person is asked (the pending question of a consent pause)."""
    return f"Authorize access to {service} so that the tool '{tool}' can run."


def consent_refusal(service: str) -> str:
    """The result the model reads under ``tell-model`` (never the URL)."""
    return (
        f"Error: the tool was not run: access to {service} needs a person's authorization, "
        "which has not been given yet. Tell the user; do not retry this tool in this turn."
    )


def withheld_result(tool: str) -> str:
    """What the model reads, and the log records, for a result that held a credential."""
    return (
        f"Error: the result of tool '{tool}' held a credential vended in this run; it was "
        "withheld (not recorded, not shown)."
    )


def failure_message(tool: str, service: str, error_class: str) -> str:
    return (
        f"Error: tool '{tool}' was not run: its credential for {service} could not be "
        f"obtained ({error_class})."
    )


async def _ask(
    service: Any, request: CredentialRequest
) -> tuple[str, Credential | None, str | None, str | None]:
    """``(status, credential, consent URL, error class)`` from the service; fail closed:
    anything but :class:`Issued` or :class:`AuthorizationRequired`, or a raise, is a
    failure recorded by class only (its message may hold the secret)."""
    try:
        answer = await call_user_code(service.get_credential, request)
        if isinstance(answer, Issued):
            return "issued", issued_credential(request.service, answer), None, None
        if isinstance(answer, AuthorizationRequired):
            url = answer.authorization_url
            if not isinstance(url, str) or not url:
                raise TypeError("AuthorizationRequired.authorization_url must be a string")
            return "authorization-required", None, url, None
        raise TypeError(f"get_credential returned {type(answer).__name__}")
    except Exception as exc:
        return "failed", None, None, type(exc).__name__


def _recorded(ctx: HookContext[Any], recorded: Mapping[str, Any]) -> tuple[str, str | None]:
    status, error_class = recorded.get("status"), recorded.get("error_class", "Exception")
    if status not in STATUSES or not isinstance(error_class, str):
        raise unreadable_decision(ctx, CredentialResolved.kind, "status")
    return str(status), error_class


class _Credentials(Feature[CredentialSettings]):
    def settings(self, options: Mapping[str, Any]) -> CredentialSettings:
        return CredentialSettings(options[OPTION], options[MODE])

    async def tool_ready(
        self, ctx: HookContext[CredentialSettings], call: ToolResult, grant: dict[str, Any]
    ) -> ToolOutcome | PauseRequest | None:
        tool = ctx.tool(call.tool)
        need = tool.needs if tool is not None else None
        if need is None:
            return None
        question: dict[str, Any] = {
            "tool": call.tool,
            "tool_call_id": call.tool_call_id,
            **need.describe(),
        }
        recorded = ctx.decisions.recorded(CredentialResolved.kind, question)
        credential: Credential | None = None
        url = error_class = None
        kind = expires = None
        if recorded is None:
            request = CredentialRequest(
                service=need.service,
                scopes=need.scopes,
                mode=need.mode,
                tool=call.tool,
                tool_call_id=call.tool_call_id,
                run_id=ctx.run_id,
                conversation_id=ctx.conversation_id,
            )
            status, credential, url, error_class = await _ask(ctx.options.service, request)
            if credential is not None:
                kind, expires = credential.kind, credential.expires_at
            if url is not None and len(url.encode("utf-8", "replace")) >= MIN_LITERAL_BYTES:
                ctx.withhold(url)  # the consent URL is the caller's only
        else:  # a replay: the tool is not run, so no credential is needed (nor exists)
            status, error_class = _recorded(ctx, recorded)
            kind, expires = recorded.get("credential_kind"), recorded.get("expires_at")
            if status != "failed":
                error_class = None
        await ctx.emit(
            CredentialResolved(
                run_id=ctx.run_id,
                **question,
                status=status,
                credential_kind=kind,
                expires_at=expires,
                error_class=error_class,
            )
        )
        outstanding = ctx.memory(_Outstanding).consents
        if status == "issued":
            outstanding.pop(need.service, None)
            if credential is not None:
                ctx.withhold(credential.token)  # kept out of every row from now on
                grant["credential"] = credential
            return None
        if status == "failed":
            return ToolOutcome(
                content=failure_message(call.tool, need.service, str(error_class)), is_error=True
            )
        if ctx.options.on_authorization_required == "pause":
            return PauseRequest(
                kind="consent",
                question=consent_question(need.service, call.tool),
                service=need.service,
                private={} if url is None else {"authorization_url": url},
            )
        outstanding[need.service] = url
        return ToolOutcome(content=consent_refusal(need.service), is_error=True)

    async def tool_result(
        self, ctx: HookContext[CredentialSettings], result: ToolResult, outcome: ToolOutcome
    ) -> ToolOutcome:
        """A result holding a credential the run vended is refused whole (the leak guard
        would withhold the secret alone; a result built around it is not evidence either)."""
        content = outcome.content
        if isinstance(content, str) and ctx.withheld_in(content):
            await ctx.emit(
                CredentialLeakBlocked(
                    run_id=ctx.run_id,
                    where="tool_result",
                    tool=result.tool,
                    tool_call_id=result.tool_call_id,
                )
            )
            return ToolOutcome(content=withheld_result(result.tool), is_error=True)
        return outcome

    async def run_end(
        self, ctx: HookContext[CredentialSettings], error: BaseException | None
    ) -> None:
        outstanding = ctx.memory(_Outstanding).consents
        if error is None and outstanding:
            service, url = next(iter(outstanding.items()))
            raise CredentialConsentRequiredError(
                f"run {ctx.run_id}: access to {service} needs a person's authorization "
                "(on_authorization_required='tell-model'); the URL is on this exception's "
                "authorization_url",
                service=service,
                authorization_url=url,
                run_id=ctx.run_id,
            )


FEATURE = _Credentials(
    name="credentials",
    summary="tools' credentials from a service, through a recorded decision; consent pauses",
    order=65,
    options=(
        OptionSpec(
            name=OPTION,
            seed="credentials",
            check=_credentials,
            summary="the credential service tools' needs are resolved by",
        ),
        OptionSpec(
            name=MODE,
            seed="onAuthorizationRequired",
            check=_mode,
            recorded=True,
            summary="pause (default) or tell-model when consent is needed",
        ),
    ),
    events=(CredentialResolved, CredentialLeakBlocked),
    recorded_events=(CredentialResolved, CredentialLeakBlocked),
    # what the guard withheld happened live: a replay reads the withheld values as recorded
    live_only_events=(CredentialLeakBlocked,),
    ports=("decisions",),
    pauses=True,
    active=lambda options: options.get(OPTION) is not None,
)
