"""``artifacts``: large data kept outside the log, by digest (docs/artifacts.md).

With a store, a tool result longer than ``max_inline_chars`` is **placed**: its bytes go to
the store under a random ref, and the tool message (what the model reads, the history the log
keeps, the ``tool_end`` event) is the claim ticket, which carries the bytes' digest. So the
receipt of every later request covers the digest, and ``verify --artifacts`` proves the
store's bytes against it. Placement is a ``tool_result`` hook ordered before
``max_tool_result_chars`` (which then measures the ticket) and before the size check of the
log body (a result too large for the log is placed, not refused).

A tool's ``wants`` arguments are resolved at ``tool_ready`` (after validation and the
permission check, before a credential is asked): the ref must name a ticket in the
conversation's committed history, of the wanted kind (a pure function of the record, so a
replay decides the same without a store); the bytes are then read from the store and checked
against the ticket's digest, and the tool receives the :class:`Artifact`. The ``present``
library tool hands an artifact to the caller (``RunResult.presented``).

A replay needs no store: a recorded ticket is read back and its ``minted`` event recorded
again; a wanted ref resolves from the history and the recorded result answers the call.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from agentfootprint.errors import ArtifactStoreError
from agentfootprint.features.base import (
    MAX_COUNT,
    MISSING,
    Feature,
    GrowingRead,
    HookContext,
    OptionSpec,
    PauseRequest,
    ToolResult,
    refuse,
)
from agentfootprint.logformat.canonical import canon
from agentfootprint.logformat.hashing import hexdigest
from agentfootprint.runtime.artifacts import (
    DEFAULT_KIND,
    JSON_MEDIA_TYPE,
    TEXT_MEDIA_TYPE,
    Artifact,
    ArtifactsView,
    Presented,
    artifact_of,
    read_ticket,
    ticket_text,
)
from agentfootprint.runtime.events import AgentEvent
from agentfootprint.runtime.tools import Tool, ToolContext, ToolOutcome, define_tool
from agentfootprint.store.artifacts import REF_PATTERN, ArtifactStore
from agentfootprint.store.redaction import Boundary

OPTION = "artifacts"
#: the fewest characters a placement threshold may be: below it the ticket outweighs the
#: result it replaces
MIN_INLINE_CHARS = 256
PRESENT = "present"
FEATURE_NAME = "artifacts"
#: how many refs a refusal lists
LISTED_REFS = 10


@dataclass(frozen=True, kw_only=True)
class ArtifactMinted(AgentEvent):
    """A tool call's result is an artifact: placed by the agent, or put by the tool and its
    ticket returned. The history's tool message for the call is the ticket."""

    kind: ClassVar[str] = "agentfootprint.artifacts.minted"
    iteration: int
    tool: str
    tool_call_id: str
    ref: str
    artifact_kind: str = field(metadata={"name": "kind"})
    media_type: str
    bytes: int
    digest: str
    expires_at: int | None = field(default=None, metadata={"omit_none": True})


@dataclass(frozen=True, kw_only=True)
class ArtifactResolved(AgentEvent):
    """A ``wants`` argument named a ref whose ticket is in the conversation, of the kind
    wanted."""

    kind: ClassVar[str] = "agentfootprint.artifacts.resolved"
    iteration: int
    tool: str
    tool_call_id: str
    argument: str
    ref: str
    artifact_kind: str = field(metadata={"name": "kind"})
    bytes: int
    digest: str


@dataclass(frozen=True, kw_only=True)
class ArtifactRefused(AgentEvent):
    """A ``wants`` argument was refused from the record: ``not-a-ref``, ``unknown-ref`` or
    ``wrong-kind``. The call is answered with an error; the tool does not run."""

    kind: ClassVar[str] = "agentfootprint.artifacts.refused"
    iteration: int
    tool: str
    tool_call_id: str
    argument: str
    ref: str | None
    reason: str
    wanted: str


@dataclass(frozen=True, kw_only=True)
class ArtifactUnavailable(AgentEvent):
    """A resolved ref whose bytes the store no longer gives (``missing``, ``expired``,
    ``erased``) or gives changed (``mismatch``): the call is answered with an error."""

    kind: ClassVar[str] = "agentfootprint.artifacts.unavailable"
    tool: str
    tool_call_id: str
    ref: str
    reason: str


@dataclass(frozen=True, kw_only=True)
class ArtifactPresented(AgentEvent):
    """The ``present`` tool handed an artifact to the caller (``RunResult.presented``)."""

    kind: ClassVar[str] = "agentfootprint.artifacts.presented"
    tool_call_id: str
    ref: str
    media_type: str
    bytes: int


@dataclass(frozen=True, kw_only=True)
class ArtifactExpired(AgentEvent):
    """Retention removed an artifact (the store keeps its tombstone)."""

    kind: ClassVar[str] = "agentfootprint.artifacts.expired"
    ref: str
    reason: str
    note: str


@dataclass(frozen=True, slots=True)
class ArtifactSettings:
    """The resolved option: the store, the placement threshold and the stated expiry."""

    store: ArtifactStore
    max_inline_chars: int | None = None
    ttl_ms: int | None = None

    def recorded(self) -> dict[str, Any]:
        """What ``run.open`` records (never the store)."""
        return {
            name: value
            for name, value in (
                ("max_inline_chars", self.max_inline_chars),
                ("ttl_ms", self.ttl_ms),
            )
            if value is not None
        }


def _check(value: Any, given: Mapping[str, Any]) -> ArtifactSettings | None:
    if value is MISSING or value is None:
        for tool in given.get("tools") or ():
            if isinstance(tool, Tool) and (tool.wants or tool.result_kind is not None):
                what = "wants artifacts" if tool.wants else "declares a result_kind"
                raise refuse(
                    OPTION,
                    f"tool {tool.name!r} {what}, and the agent has no artifact store: give "
                    "artifacts=af.FileArtifacts(directory) (or MemoryArtifacts(), "
                    "SqliteArtifacts(file))",
                )
        return None
    if isinstance(value, ArtifactStore):
        value = {"store": value}
    if not isinstance(value, Mapping):
        raise refuse(
            OPTION,
            "must be an artifact store (af.FileArtifacts(directory), af.MemoryArtifacts(), "
            "af.SqliteArtifacts(file)) or {'store': ..., 'max_inline_chars': N, 'ttl_ms': T}, "
            f"got {value!r}",
        )
    unknown = sorted(set(map(str, value)) - {"store", "max_inline_chars", "ttl_ms"})
    if unknown:
        raise refuse(
            OPTION,
            f"unknown member(s) {', '.join(map(repr, unknown))}; the members are 'store', "
            "'max_inline_chars' and 'ttl_ms'",
        )
    store = value.get("store")
    if not isinstance(store, ArtifactStore):
        raise refuse(
            OPTION,
            "'store' must be an artifact store (af.FileArtifacts(directory), "
            f"af.MemoryArtifacts(), af.SqliteArtifacts(file)), got {store!r}",
        )
    if store.readonly:
        raise refuse(OPTION, "the artifact store is open read-only; an agent writes to it")
    inline = _count(value.get("max_inline_chars"), "max_inline_chars", MIN_INLINE_CHARS)
    ttl = _count(value.get("ttl_ms"), "ttl_ms", 1)
    for tool in given.get("tools") or ():
        if isinstance(tool, Tool) and tool.name == PRESENT and tool is not PRESENT_TOOL:
            raise refuse(
                "tools",
                f"a tool is named {PRESENT!r}, the library tool an agent with artifacts "
                "offers; rename yours",
            )
    return ArtifactSettings(store=store, max_inline_chars=inline, ttl_ms=ttl)


def _count(value: Any, member: str, low: int) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= MAX_COUNT:
        raise refuse(
            OPTION, f"{member!r} must be an integer from {low} to {MAX_COUNT}, got {value!r}"
        )
    return value


@dataclass
class _Memory:
    """What the feature keeps for a run (never state): each call's ``ctx.artifacts`` view
    until the call returns, the artifacts resolved for calls about to run, the tickets read
    from the committed history so far, and what ``present`` handed the caller."""

    views: dict[str, ArtifactsView] = field(default_factory=dict)
    wanted: dict[str, dict[str, Any]] = field(default_factory=dict)
    history: GrowingRead = field(default_factory=GrowingRead)
    tickets: dict[str, dict[str, Any]] = field(default_factory=dict)
    presented: list[Presented] = field(default_factory=list)

    def tickets_in(self, history: Any) -> dict[str, dict[str, Any]]:
        """The conversation's tickets by ref, read from the committed history as it grows."""
        fresh, restarted = self.history.tail(history)
        if restarted:
            self.tickets = {}
        for message in fresh:
            if isinstance(message, dict) and message.get("role") == "tool":
                ticket = read_ticket(message.get("content"))
                if ticket is not None:
                    self.tickets[ticket["ref"]] = ticket
        return self.tickets


class _Artifacts(Feature[ArtifactSettings]):
    def settings(self, options: Mapping[str, Any]) -> ArtifactSettings:
        settings: ArtifactSettings = options[OPTION]
        return settings

    def _view(self, ctx: HookContext[ArtifactSettings], call: ToolResult) -> ArtifactsView:
        memory = ctx.memory(_Memory)
        view = memory.views.get(call.tool_call_id)
        if view is None:
            view = memory.views[call.tool_call_id] = ArtifactsView(
                ctx.options.store,
                ctx.conversation_id,
                clock=ctx.clock,
                random=ctx.salts,
                ttl_ms=ctx.options.ttl_ms,
                presented=memory.presented,
            )
        return view

    async def tool_permission(
        self, ctx: HookContext[ArtifactSettings], call: ToolResult
    ) -> ToolOutcome | None:
        """``wants``: each ref argument resolved from the record (a ticket in the
        conversation's committed history, of the wanted kind), then, live, its bytes read
        and checked; after the permission checker, before a credential is asked."""
        tool = ctx.tool(call.tool)
        if tool is None or not tool.wants or not isinstance(call.arguments, dict):
            return None
        memory = ctx.memory(_Memory)
        tickets = memory.tickets_in(ctx.scope.committed.get("history"))
        wanted: dict[str, Any] = {}
        for argument, kind in tool.wants:
            if argument not in call.arguments:
                continue  # left out: the schema says whether it may be
            ref = call.arguments[argument]
            reason, ticket = _resolve(ref, kind, tickets)
            if ticket is None:
                await ctx.emit(
                    ArtifactRefused(
                        run_id=ctx.run_id,
                        iteration=call.iteration,
                        tool=call.tool,
                        tool_call_id=call.tool_call_id,
                        argument=argument,
                        ref=ref if isinstance(ref, str) else None,
                        reason=reason,
                        wanted=kind,
                    )
                )
                return ToolOutcome(
                    content=_refusal(call.tool, argument, ref, kind, reason, tickets),
                    is_error=True,
                )
            await ctx.emit(
                ArtifactResolved(
                    run_id=ctx.run_id,
                    iteration=call.iteration,
                    tool=call.tool,
                    tool_call_id=call.tool_call_id,
                    argument=argument,
                    ref=ticket["ref"],
                    artifact_kind=ticket["kind"],
                    bytes=ticket["bytes"],
                    digest=ticket["digest"],
                )
            )
            if call.recorded:
                continue  # a replay: the recorded result answers the call, no store needed
            store = ctx.options.store
            fetched = await asyncio.to_thread(_fetch, store, ctx.conversation_id, ticket)
            if isinstance(fetched, str):
                if ctx.listens(ArtifactUnavailable.kind):
                    await ctx.emit(
                        ArtifactUnavailable(
                            run_id=ctx.run_id,
                            tool=call.tool,
                            tool_call_id=call.tool_call_id,
                            ref=ticket["ref"],
                            reason=fetched,
                        )
                    )
                return ToolOutcome(
                    content=f"Error: tool '{call.tool}' was not run: artifact {ticket['ref']} "
                    f"(argument '{argument}') is no longer available: {_UNAVAILABLE[fetched]}.",
                    is_error=True,
                )
            wanted[argument] = fetched
        if wanted:
            memory.wanted[call.tool_call_id] = wanted
        return None

    async def tool_ready(
        self, ctx: HookContext[ArtifactSettings], call: ToolResult, grant: dict[str, Any]
    ) -> ToolOutcome | PauseRequest | None:
        """The tool's ``ctx.artifacts``, and the artifacts it wants in its arguments."""
        if not call.recorded:
            grant["artifacts"] = self._view(ctx, call)
            wanted = ctx.memory(_Memory).wanted.pop(call.tool_call_id, None)
            if wanted:
                grant["wanted"] = wanted
        return None

    async def tool_result(
        self, ctx: HookContext[ArtifactSettings], result: ToolResult, outcome: ToolOutcome
    ) -> ToolOutcome:
        settings = ctx.options
        memory = ctx.memory(_Memory)
        memory.wanted.pop(result.tool_call_id, None)  # (a call answered before it ran)
        view = memory.views.pop(result.tool_call_id, None)
        put_here = view.put_here if view is not None else {}
        content = outcome.content
        ticket = read_ticket(content)
        try:
            if ticket is not None:
                if result.recorded or ticket["ref"] in put_here:
                    put_here.pop(ticket["ref"], None)
                    await self._minted(ctx, result, ticket)
                    return outcome
                return ToolOutcome(
                    content=f"Error: tool '{result.tool}' returned a claim ticket for "
                    f"{ticket['ref']}, which it did not put in this call; a tool returns the "
                    "ticket ctx.artifacts.put gave it, or its data.",
                    is_error=True,
                )
            threshold = settings.max_inline_chars
            if result.recorded or threshold is None or len(content) <= threshold:
                return outcome
            return await self._place(ctx, result, outcome, threshold)
        finally:
            for ref in put_here:  # put by the tool, not returned: never on the record
                _discard(settings.store, ctx.conversation_id, ref, ctx.clock())

    async def _place(
        self,
        ctx: HookContext[ArtifactSettings],
        result: ToolResult,
        outcome: ToolOutcome,
        threshold: int,
    ) -> ToolOutcome:
        """Store the result's text (as the log would hold it) and return its ticket."""
        settings = ctx.options
        text = outcome.content
        if ctx.policy is not None:  # the store holds no value the log may not
            text = _committed(ctx.policy, result, text)
        tool = ctx.tool(result.tool)
        kind = tool.result_kind if tool is not None and tool.result_kind else DEFAULT_KIND
        media_type = JSON_MEDIA_TYPE if outcome.canonical is not None else TEXT_MEDIA_TYPE
        data = text.encode("utf-8")
        view = ArtifactsView(
            settings.store,
            ctx.conversation_id,
            clock=ctx.clock,
            random=ctx.salts,
            ttl_ms=settings.ttl_ms,
        )
        head = await asyncio.to_thread(
            view.store_bytes, settings.store, data, kind=kind, media_type=media_type
        )
        del data
        reason = (
            f"{result.tool} returned {len(outcome.content)} chars, over the {threshold}-char "
            f"limit for a result read inline, so it is stored as artifact {head.ref}. Call "
            f"{PRESENT} with this ref to show it to the user, or pass the ref to a tool that "
            "takes it."
        )
        ticket_content = ticket_text(head, reason)
        ticket = read_ticket(ticket_content)
        assert ticket is not None
        await self._minted(ctx, result, ticket)
        await self._sweep(ctx, head.created_at)
        return ToolOutcome(content=ticket_content, is_error=outcome.is_error)

    async def _minted(
        self, ctx: HookContext[ArtifactSettings], result: ToolResult, ticket: Mapping[str, Any]
    ) -> None:
        await ctx.emit(
            ArtifactMinted(
                run_id=ctx.run_id,
                iteration=result.iteration,
                tool=result.tool,
                tool_call_id=result.tool_call_id,
                ref=ticket["ref"],
                artifact_kind=ticket["kind"],
                media_type=ticket["media_type"],
                bytes=ticket["bytes"],
                digest=ticket["digest"],
                expires_at=ticket.get("expires_at"),
            )
        )

    async def _sweep(self, ctx: HookContext[ArtifactSettings], now: int) -> None:
        """Retention, after a put: each removal told to listeners (the store keeps the
        tombstone, which ``verify --artifacts`` reads)."""
        removed = await asyncio.to_thread(ctx.options.store.sweep, ctx.conversation_id, now)
        if ctx.listens(ArtifactExpired.kind):
            for tombstone in removed:
                await ctx.emit(
                    ArtifactExpired(
                        run_id=ctx.run_id,
                        ref=tombstone.ref,
                        reason=tombstone.reason,
                        note=tombstone.note,
                    )
                )

    async def tool_result_noted(
        self, ctx: HookContext[ArtifactSettings], result: ToolResult, outcome: ToolOutcome
    ) -> ToolOutcome:
        if result.tool != PRESENT or result.recorded or not ctx.listens(ArtifactPresented.kind):
            return outcome
        for shown in ctx.memory(_Memory).presented:
            if shown.tool_call_id == result.tool_call_id:
                await ctx.emit(
                    ArtifactPresented(
                        run_id=ctx.run_id,
                        tool_call_id=shown.tool_call_id,
                        ref=shown.ref,
                        media_type=shown.media_type,
                        bytes=shown.size,
                    )
                )
        return outcome


def presented_in(run_memory: Mapping[str, Any]) -> tuple[Presented, ...]:
    """What the ``present`` tool handed the caller in a run (``RunResult.presented``)."""
    memory = run_memory.get(FEATURE_NAME)
    return tuple(memory.presented) if isinstance(memory, _Memory) else ()


_UNAVAILABLE = {
    "missing": "the artifact store no longer holds it",
    "expired": "it expired and the store removed it",
    "erased": "it was erased",
    "mismatch": "the store's bytes no longer match the digest on its ticket",
}


def _resolve(
    ref: Any, kind: str, tickets: Mapping[str, dict[str, Any]]
) -> tuple[str, dict[str, Any] | None]:
    if not isinstance(ref, str) or not REF_PATTERN.fullmatch(ref):
        return "not-a-ref", None
    ticket = tickets.get(ref)
    if ticket is None:
        return "unknown-ref", None
    if kind != "*" and ticket["kind"] != kind:
        return "wrong-kind", None
    return "resolved", ticket


def _refusal(
    tool: str,
    argument: str,
    ref: Any,
    kind: str,
    reason: str,
    tickets: Mapping[str, dict[str, Any]],
) -> str:
    fitting = [r for r, t in tickets.items() if kind == "*" or t["kind"] == kind]
    listed = ", ".join(fitting[-LISTED_REFS:]) or "none"
    of_kind = "" if kind == "*" else f" of kind '{kind}'"
    if reason == "not-a-ref":
        why = "is not an artifact ref (a string such as 'art_...' from a claim ticket)"
    elif reason == "unknown-ref":
        why = f"names {ref}, which this conversation holds no artifact by"
    else:
        why = f"names {ref}, an artifact of kind '{tickets[ref]['kind']}', not '{kind}'"
    return (
        f"Error: tool '{tool}' was not run: argument '{argument}' {why}. Artifacts{of_kind} "
        f"in this conversation: {listed}."
    )


def _fetch(store: ArtifactStore, scope: str, ticket: Mapping[str, Any]) -> Any:
    """The ticket's artifact from the store, checked against its digest, or why not."""
    data = store.read(scope, ticket["ref"])
    if data is None:
        tombstone = store.tombstone(scope, ticket["ref"])
        return "missing" if tombstone is None else tombstone.reason
    if hexdigest("artifact", data) != ticket["digest"]:
        return "mismatch"
    return artifact_of(ticket, data)


def _discard(store: ArtifactStore, scope: str, ref: str, now: int) -> None:
    with contextlib.suppress(ArtifactStoreError):  # already gone (retention)
        store.remove(scope, ref, reason="erased", at=now, note="put by a tool, never returned")


def _committed(policy: Any, result: ToolResult, text: str) -> str:
    """``text`` as the history write would record it under ``policy`` (its commitments'
    salts are not kept: they are never opened)."""
    message = {"content": text, "name": result.tool, "role": "tool"}
    message["tool_call_id"] = result.tool_call_id
    committed = Boundary(policy).commit_entry("history", [message])[0]["content"]
    if isinstance(committed, str):
        return committed
    return canon(committed).decode("utf-8")


def _present_tool() -> Tool:
    """The library tool an agent with artifacts offers: show an artifact to the person."""

    async def present(args: dict[str, Any], ctx: ToolContext) -> str:
        artifact: Artifact = args["ref"]  # resolved at dispatch (``wants``)
        ctx.artifacts.present(artifact, ctx.tool_call_id)
        return (
            f"Artifact {artifact.ref} ({artifact.size} bytes, {artifact.media_type}) was shown "
            "to the user."
        )

    return define_tool(
        name=PRESENT,
        description=(
            "Show an artifact to the user: its ref is on a claim ticket a tool result gave "
            "you ('placed': true). You do not see its content; the user does."
        ),
        input_schema={
            "type": "object",
            "properties": {"ref": {"type": "string", "description": "the artifact's ref, art_..."}},
            "required": ["ref"],
            "additionalProperties": False,
        },
        execute=present,
        wants={"ref": "*"},
    )


#: ``present``, one tool for every agent (an agent made with another's tools keeps it)
PRESENT_TOOL = _present_tool()


FEATURE = _Artifacts(
    name=FEATURE_NAME,
    summary="large tool results kept in an artifact store, the model and the log given a "
    "ticket carrying their digest; tools' wants; the present tool",
    order=105,
    options=(
        OptionSpec(
            name=OPTION,
            seed="artifacts",
            check=_check,
            recorded=True,
            record=ArtifactSettings.recorded,
            summary="the artifact store, the placement threshold and the stated expiry",
        ),
    ),
    events=(
        ArtifactMinted,
        ArtifactResolved,
        ArtifactRefused,
        ArtifactUnavailable,
        ArtifactPresented,
        ArtifactExpired,
    ),
    recorded_events=(ArtifactMinted, ArtifactResolved, ArtifactRefused),
    ports=("clock", "salts"),
    active=lambda options: options.get(OPTION) is not None,
    library_tools=lambda options: (PRESENT_TOOL,),
)
