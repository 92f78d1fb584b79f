"""The integrity checks on the record: ``integrity_posture``, ``check_column_types``,
``notice_empty_lookups``, ``external_grounds``, ``notice_prior_turn_evidence``
(docs/integrity.md).

The checks themselves are pure functions in :mod:`agentfootprint.integrity`; this feature
drives one :class:`~agentfootprint.integrity.passes.IntegrityPass` through a run and records
what it files: each finding as ``agentfootprint.integrity.context_error`` when it is found, each
excusal by an external ground as ``agentfootprint.integrity.external_ground_used``, and the
disposition ledger once at the run's end. The tools' declarations are committed at the
turn's start (the ``turn_start`` hook: the seed's commit) as ``tool_contracts``, and
``run.open`` records the posture whenever a check is armed, so ``agentfootprint findings
--recompute`` knows the run took part and re-derives every finding from the log.

Seams: the choice seam at ``reply_received`` (the reply's calls against the request it was
served, ``ctx.served``: built by the projection from committed state); the write seam at
``tool_result``, after placement and the result cap (what the model reads); the claim seam at
``run_end``, on the answer. The external grounds provider is asked through the decision port
(``agentfootprint.integrity.external_grounds``), and a refusal under ``enforce`` is recorded as
``agentfootprint.integrity.rows_refused`` (the findings that refused the rows, with their
digest): a replay answers from both and never asks the provider.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from agentfootprint.errors import CheckerDeadError
from agentfootprint.features.base import (
    MISSING,
    Feature,
    HookContext,
    OptionSpec,
    StateKey,
    ToolResult,
    refuse,
    unreadable_decision,
)
from agentfootprint.integrity.column_types import refusal_opening, refusal_text
from agentfootprint.integrity.contracts import Contract, committed
from agentfootprint.integrity.passes import Armed, Arming, IntegrityPass, canary_tally
from agentfootprint.integrity.rail import Finding, ToolCall
from agentfootprint.integrity.reading import (
    READINGS,
    kept_evidence,
    kept_folds,
    kept_grounds,
)
from agentfootprint.integrity.records import (
    CONTEXT_ERROR,
    DISPOSITION,
    EXTERNAL_GROUND_USED,
    EXTERNAL_GROUNDS,
    ROWS_REFUSED,
    call_of,
    findings_of,
)
from agentfootprint.integrity.unsupported import Folds, frame_of, read_entries
from agentfootprint.logformat.hashing import hexdigest
from agentfootprint.runtime.events import AgentEvent
from agentfootprint.runtime.provider import LLMResponse
from agentfootprint.runtime.tool_threads import call_user_code
from agentfootprint.runtime.tools import Tool, ToolOutcome

POSTURE = "integrity_posture"
COLUMNS = "check_column_types"
EMPTY = "notice_empty_lookups"
PRIOR = "notice_prior_turn_evidence"
GROUNDS = "external_grounds"
CONTRACTS = "tool_contracts"
FEATURE_NAME = "integrity"
_CONTENT_CHECKS = (COLUMNS, EMPTY, PRIOR, GROUNDS)


@dataclass(frozen=True, kw_only=True)
class ContextError(AgentEvent):
    """One integrity finding (what, where, on what it rests; the ceiling quoted)."""

    kind: ClassVar[str] = CONTEXT_ERROR
    check: str
    finding: str = field(metadata={"name": "kind"})
    seam: str
    subjects: list[dict[str, str]]
    witnesses: list[str]
    message: str
    advisory: bool
    synthetic: bool
    predicate: str | None = field(default=None, metadata={"omit_none": True})
    facts: dict[str, Any] | None = field(default=None, metadata={"omit_none": True})


@dataclass(frozen=True, kw_only=True)
class ExternalGroundUsed(AgentEvent):
    """An argument value excused by an entry of the app's external grounds."""

    kind: ClassVar[str] = EXTERNAL_GROUND_USED
    tool: str
    tool_call_id: str
    path: str
    value: str
    source: str


@dataclass(frozen=True, kw_only=True)
class ExternalGrounds(AgentEvent):
    """The external grounds provider's entries for one reply: a recorded decision."""

    kind: ClassVar[str] = EXTERNAL_GROUNDS
    call: int
    provider: str
    status: str  #: ``ok`` or ``failed`` (a provider that raised contributes nothing)
    entries: list[dict[str, str]]
    error: str | None = field(default=None, metadata={"omit_none": True})


@dataclass(frozen=True, kw_only=True)
class RowsRefused(AgentEvent):
    """Under ``check_column_types="enforce"``: a result's rows refused. The findings that
    refused them, and the rows' digest and size (the rows are not kept): a recorded decision,
    so a replay refuses the same and ``findings --recompute`` rebuilds the refusal."""

    kind: ClassVar[str] = ROWS_REFUSED
    tool: str
    tool_call_id: str
    digest: str  #: ``H("artifact", rows as returned)``
    bytes: int
    findings: list[dict[str, Any]]


@dataclass(frozen=True, kw_only=True)
class IntegrityDisposition(AgentEvent):
    """The disposition ledger, once at the run's end: per check, what it met and made of it."""

    kind: ClassVar[str] = DISPOSITION
    posture: str
    rows: list[dict[str, Any]]


@dataclass(frozen=True, kw_only=True, slots=True)
class IntegritySettings:
    """The resolved dials and the tools' declarations."""

    #: the dials, the declarations and what they arm (made once: each run's pass reads it;
    #: not ``checking``, the feature only commits the declarations, for the results layer)
    arming: Arming
    provider: Any = None

    #: ``tool_contracts``: the declarations as committed (made once, with the settings)
    committed: Mapping[str, Any] = field(default_factory=dict)


def contracts_of(options: Mapping[str, Any]) -> dict[str, Contract]:
    """The declarations of the agent's tools (those that declare any)."""
    return {
        tool.name: tool.contract
        for tool in options.get("tools") or ()
        if isinstance(tool, Tool) and tool.contract is not None
    }


def _choice(option: str, allowed: tuple[str, ...], off: str | None) -> Callable[[Any, Any], Any]:
    def check(value: Any, given: Mapping[str, Any]) -> str | None:
        if value is MISSING or value is None or value == off:
            return None
        if value not in allowed:
            raise refuse(option, f"must be one of {allowed!r}, got {value!r}")
        return str(value)

    return check


def _posture(value: Any, given: Mapping[str, Any]) -> str | None:
    """``observe`` or ``dev`` when a check is armed, else None (nothing recorded): the
    posture ``run.open`` records says the run's agent checked, and so committed its
    declarations at its turn's start (what ``findings --recompute`` arms the checks with). Checked
    whether given or not: a tool's ``arguments_from`` arms a check by itself, so the redaction
    refusal (:func:`_declared`) is made here too."""
    _declared(given)
    mode = _choice(POSTURE, ("observe", "dev"), "observe")(value, given) or "observe"
    return mode if armed_of({**given, POSTURE: mode}).any(contracts_of(given)) else None


def _columns(value: Any, given: Mapping[str, Any]) -> str | None:
    mode: str | None = _choice(COLUMNS, ("off", "warn", "enforce"), "off")(value, given)
    if mode is not None and not any(c.result_columns for c in _declared(given)):
        raise refuse(
            COLUMNS,
            f"{mode!r} needs a tool declaring result_columns (two halves arm it: this dial and "
            "the declaration); declare them with define_tool(result_columns=...)",
        )
    return mode


def _sourced_dial(option: str) -> Callable[[Any, Any], Any]:
    def check(value: Any, given: Mapping[str, Any]) -> bool | None:
        if value is MISSING or value is None or value is False:
            return None
        if value is not True:
            raise refuse(option, f"must be True or False, got {value!r}")
        if not any(c.arguments_from for c in _declared(given)):
            raise refuse(
                option,
                "needs a tool declaring arguments_from (the tools whose results ground its "
                "arguments): declare it with define_tool(arguments_from=[...])",
            )
        return True

    return check


def _prior(value: Any, given: Mapping[str, Any]) -> bool | None:
    if value is MISSING or value is None or value is False:
        return None
    if value is not True:
        raise refuse(PRIOR, f"must be True or False, got {value!r}")
    return True


def _grounds(value: Any, given: Mapping[str, Any]) -> Any:
    if value is MISSING or value is None:
        return None
    if not callable(value):
        raise refuse(
            GROUNDS,
            "must be a function of no arguments returning the app-verified entries, a list of "
            f"{{'value': ..., 'source': ...}}, got {value!r}",
        )
    return _sourced_dial(GROUNDS)(True, given) and value


def _declared(given: Mapping[str, Any]) -> list[Contract]:
    contracts = list(contracts_of(given).values())
    if given.get("redact") is not None and (
        any(c.arguments_from for c in contracts)
        or any(given.get(name) not in (None, False, "off") for name in _CONTENT_CHECKS)
    ):
        raise refuse(
            "redact",
            "the integrity checks read argument values and tool results, which a redaction "
            "policy commits; this version refuses them together (leave out arguments_from "
            "and the integrity dials, or the policy)",
        )
    return contracts


def provider_name(provider: Any) -> str:
    name = getattr(provider, "__qualname__", None) or getattr(provider, "__name__", None)
    return name if isinstance(name, str) and name else type(provider).__name__


def armed_of(options: Mapping[str, Any]) -> Armed:
    return Armed(
        posture=options.get(POSTURE) or "observe",
        column_types=options.get(COLUMNS) or "off",
        empty_lookups=options.get(EMPTY) is True,
        prior_turn=options.get(PRIOR) is True,
    )


def _active(options: Mapping[str, Any]) -> bool:
    """A check is armed, or the results layer is and a tool declares ``period`` (the layer
    reads the committed declarations too: this feature commits them, and files nothing else
    for it)."""
    contracts = contracts_of(options)
    return armed_of(options).any(contracts) or (
        options.get("results_layer") is True and any(c.period for c in contracts.values())
    )


def _readings(ctx: HookContext[Any]) -> dict[str, Any]:
    readings: dict[str, Any] = ctx.shared_cache(READINGS, dict)
    return readings


class _Run:
    """What the feature keeps for a run (never state): the pass, and the texts its frames
    folded."""

    def __init__(self, settings: IntegritySettings, canaries: Callable[[], Any]) -> None:
        self.check = IntegrityPass(settings.arming)
        if settings.arming.armed.posture == "dev":
            self.check.canaries(canaries())
        #: the served texts folded so far (the frames': the conversation's, kept across its
        #: runs; taken at the first reply judged)
        self.folds: Folds | None = None


def finding_event(run_id: str, finding: Finding) -> ContextError:
    payload = finding.payload()
    return ContextError(
        run_id=run_id,
        check=payload["check"],
        finding=payload["kind"],
        seam=payload["seam"],
        subjects=payload["subjects"],
        witnesses=payload["witnesses"],
        message=payload["message"],
        advisory=payload["advisory"],
        synthetic=payload["synthetic"],
        predicate=payload.get("predicate"),
        facts=payload.get("facts"),
    )


async def _file(ctx: HookContext[Any], findings: list[Finding]) -> None:
    """Each finding recorded, in order (a caller with none awaits nothing: most items)."""
    for finding in findings:
        await ctx.emit(finding_event(ctx.run_id, finding))


def _dead(ctx: HookContext[Any], run: _Run) -> None:
    dead = run.check.dead()
    if dead is not None:
        raise CheckerDeadError(dead.message, check=dead.check, seam=dead.seam, run_id=ctx.run_id)


def commit_contracts(committed: Mapping[str, Any], scope: Any) -> None:
    """The agent's declarations as ``tool_contracts`` (written only when they differ from
    the committed ones: a continuation that declares the same writes nothing)."""
    if scope.get(CONTRACTS) != committed:
        scope.set(CONTRACTS, committed)


def _dead_canary(ctx: HookContext[Any], run: _Run) -> None:
    """Under ``dev``: a canary the pass missed fails the run at its start (the turn's start
    stage commits the declarations with the failure)."""
    if run.check.canaries_missed:
        dead = run.check.canaries_missed[0]
        raise CheckerDeadError(dead.message, check=dead.check, seam=dead.seam, run_id=ctx.run_id)


class _Integrity(Feature[IntegritySettings]):
    def settings(self, options: Mapping[str, Any]) -> IntegritySettings:
        armed, contracts = armed_of(options), contracts_of(options)
        return IntegritySettings(
            arming=Arming.of(armed, contracts),
            provider=options.get(GROUNDS),
            committed=committed(contracts),
        )

    def _run(self, ctx: HookContext[IntegritySettings]) -> _Run:
        """The run's pass (made at the first use; a canary it missed fails the run at the
        turn's start, or at the end of a run that answers a pause)."""
        return ctx.memory(lambda: _Run(ctx.options, lambda: ctx.cache(canary_tally)))

    async def turn_start(self, ctx: HookContext[IntegritySettings]) -> None:
        """The declarations committed in the turn's start stage (the ones the checks judge
        with, and the results layer reads); the run's pass made, its canaries counted."""
        commit_contracts(ctx.options.committed, ctx.scope)
        if ctx.options.arming.checking:
            _dead_canary(ctx, self._run(ctx))

    async def resumed(self, ctx: HookContext[IntegritySettings]) -> None:
        """A run that answers a pause has no start stage: the resuming agent's declarations
        are committed here (the ones its checks judge with, and the results layer reads)."""
        commit_contracts(ctx.options.committed, ctx.scope)

    async def reply_received(
        self, ctx: HookContext[IntegritySettings], call: int, response: LLMResponse
    ) -> None:
        if not ctx.options.arming.checking:
            return
        run = self._run(ctx)
        run.check.meets("choice")
        if not run.check.at_choice:
            return  # no check judges a reply's calls: nothing to read
        calls = [call_of(c.name, c.id, c.arguments) for c in response.tool_calls]
        served = ctx.served
        if not run.check.wants_frame(calls) or served is None:
            findings, used = run.check.choice(calls, None)
        else:
            if run.folds is None:
                run.folds = kept_folds(_readings(ctx), ctx.conversation_id)
            frame = frame_of(served, run.folds)
            judged = run.check.judge_choice(calls, frame)
            if ctx.options.provider is not None and run.check.unserved(judged):
                entries = await self._entries(ctx, call)
                judged = run.check.judge_choice(calls, frame, entries)
            findings, used = run.check.choice(calls, frame, judged=judged)
        if findings:
            await _file(ctx, findings)
        for excusal in used:
            await ctx.emit(ExternalGroundUsed(run_id=ctx.run_id, **excusal))

    async def _entries(
        self, ctx: HookContext[IntegritySettings], call: int
    ) -> tuple[dict[str, str], ...]:
        provider = ctx.options.provider
        if provider is None:
            return ()
        name = provider_name(provider)
        question: dict[str, Any] = {"call": call, "provider": name}
        recorded = ctx.decisions.recorded(ExternalGrounds.kind, question)
        if recorded is None:
            try:
                answer = await call_user_code(provider)
                entries, status, error = read_entries(answer), "ok", None
            except Exception as exc:  # a provider that raises contributes nothing
                entries, status, error = (), "failed", type(exc).__name__
        else:
            raw = recorded.get("entries")
            if not isinstance(raw, list) or recorded.get("status") not in ("ok", "failed"):
                raise unreadable_decision(ctx, ExternalGrounds.kind, "entries")
            entries, status, error = read_entries(raw), recorded["status"], recorded.get("error")
        await ctx.emit(
            ExternalGrounds(
                run_id=ctx.run_id,
                call=call,
                provider=name,
                status=status,
                entries=[dict(e) for e in entries],
                error=error if isinstance(error, str) else None,
            )
        )
        return entries

    async def tool_result(
        self, ctx: HookContext[IntegritySettings], result: ToolResult, outcome: ToolOutcome
    ) -> ToolOutcome:
        if not ctx.options.arming.checking:
            return outcome
        run = self._run(ctx)
        check = run.check
        check.meets("write")
        if not check.at_write:
            return outcome  # no check judges a result: nothing to read
        call = ToolCall(
            tool=result.tool,
            tool_call_id=result.tool_call_id,
            arguments=result.arguments,
            content=outcome.content,
            is_error=outcome.is_error,
            turn=0,
            history_index=-1,
        )
        refused = await self._refused(ctx, call) if result.recorded else None
        if refused is not None:  # a replay of an enforced refusal: the recorded findings
            await _file(ctx, check.columns_enforced(call.tool, refused))
        else:
            findings, refusal, judged = check.columns(call)
            if refusal is not None:
                await self._refuse(ctx, call, judged, outcome)
                outcome = ToolOutcome(content=refusal, is_error=True)
                call = call._replace(content=refusal, is_error=True)
            if findings:
                await _file(ctx, findings)
        if check.reads_grounds(call):
            self._grounds(ctx, run)
        empty = check.empty_lookup(call)  # on what the model reads
        if empty:
            await _file(ctx, empty)
        return outcome

    def _grounds(self, ctx: HookContext[IntegritySettings], run: _Run) -> None:
        """The results served so far are the lookups' grounds (a result of this batch is
        not served before the batch ends: the committed history holds none of them)."""
        history = ctx.scope.committed.get("history") or []
        run.check.produced = kept_grounds(_readings(ctx), ctx.conversation_id, history)

    async def _refused(
        self, ctx: HookContext[IntegritySettings], call: ToolCall
    ) -> list[Finding] | None:
        """In a replay: the original's recorded refusal of this call, if it refused it."""
        if (
            ctx.options.arming.armed.column_types != "enforce"
            or not call.is_error
            or not (call.content or "").startswith(refusal_opening(call.tool))
        ):
            return None  # a tool's own error: the run refused nothing
        question = {"tool": call.tool, "tool_call_id": call.tool_call_id}
        recorded = ctx.decisions.recorded(RowsRefused.kind, question)
        if recorded is None:
            return None
        findings = findings_of(recorded.get("findings"))
        if findings is None or not (call.content or "").startswith(
            refusal_text(call.tool, findings)
        ):
            raise unreadable_decision(ctx, RowsRefused.kind, "findings")
        digest, size = recorded.get("digest"), recorded.get("bytes")
        if not isinstance(digest, str) or isinstance(size, bool) or not isinstance(size, int):
            raise unreadable_decision(ctx, RowsRefused.kind, "digest")
        await ctx.emit(
            RowsRefused(
                run_id=ctx.run_id,
                tool=call.tool,
                tool_call_id=call.tool_call_id,
                digest=digest,
                bytes=size,
                findings=[f.payload() for f in findings],
            )
        )
        return findings

    async def _refuse(
        self,
        ctx: HookContext[IntegritySettings],
        call: ToolCall,
        findings: Sequence[Finding],
        outcome: ToolOutcome,
    ) -> None:
        rows = outcome.content.encode("utf-8", "surrogatepass")
        await ctx.emit(
            RowsRefused(
                run_id=ctx.run_id,
                tool=call.tool,
                tool_call_id=call.tool_call_id,
                digest=hexdigest("artifact", rows),
                bytes=len(rows),
                findings=[f.payload() for f in findings],
            )
        )

    async def run_end(
        self, ctx: HookContext[IntegritySettings], error: BaseException | None
    ) -> None:
        if not ctx.options.arming.checking:
            return
        run = self._run(ctx)
        s = ctx.scope
        answer = s.get("final_answer")
        if (
            run.check.on["prior-turn-evidence"]
            and error is None
            and not ctx.pausing
            and isinstance(answer, str)
        ):
            run.check.meets("claim")
            index = kept_evidence(_readings(ctx), ctx.conversation_id, s.get("history") or [])
            await _file(ctx, run.check.claim(answer, index))
        payload = run.check.disposition()
        await ctx.emit(IntegrityDisposition(run_id=ctx.run_id, **payload))
        if error is None and ctx.options.arming.armed.posture == "dev":
            _dead(ctx, run)


FEATURE = _Integrity(
    name=FEATURE_NAME,
    summary="integrity checks on the record: findings recomputable from the log, a "
    "disposition ledger, the dev posture's canaries",
    order=115,  # after artifacts' placement (105) and the result cap (110): what the model reads
    options=(
        OptionSpec(
            name=POSTURE,
            seed="integrityPosture",
            check=_posture,
            recorded=True,
            summary="'observe' (default) or 'dev': canaries at the start, a dead check fails "
            "the run with CheckerDeadError",
        ),
        OptionSpec(
            name=COLUMNS,
            seed="checkColumnTypes",
            check=_columns,
            recorded=True,
            summary="'off' | 'warn' | 'enforce': rows against the result_columns a tool declares",
        ),
        OptionSpec(
            name=EMPTY,
            seed="noticeEmptyLookups",
            check=_sourced_dial(EMPTY),
            recorded=True,
            summary="an advisory when a lookup for a value the run produced comes back empty",
        ),
        OptionSpec(
            name=PRIOR,
            seed="noticePriorTurnEvidence",
            check=_prior,
            recorded=True,
            summary="an advisory when every value of the answer was served before this turn",
        ),
        OptionSpec(
            name=GROUNDS,
            seed="externalGrounds",
            check=_grounds,
            recorded=True,
            record=provider_name,
            summary="app-verified {value, source} entries that ground arguments (a recorded "
            "decision)",
        ),
    ),
    state_keys=(
        StateKey(
            name=CONTRACTS,
            summary="what each tool declares for the integrity checks (never served)",
        ),
    ),
    events=(ContextError, ExternalGroundUsed, ExternalGrounds, RowsRefused, IntegrityDisposition),
    recorded_events=(
        ContextError,
        ExternalGroundUsed,
        ExternalGrounds,
        RowsRefused,
        IntegrityDisposition,
    ),
    ports=("decisions",),
    active=_active,
)
