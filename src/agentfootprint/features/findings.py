"""``findings``: the model's own account of its evidence, on the record (docs/findings.md).

Armed, every served tool schema gains the reserved optional argument ``_findings``, and the
system pieces gain the instruction to use it. The ``tool_arguments`` hook peels it off each
call before validation (the tool never sees it; the history keeps the arguments as sent, so
the receipts cover what the model declared) and files what it says as rows in the state key
``findings_rows``: a ``basis`` row for the call, a ``standing`` row for each earlier result
it judged. Nothing is inferred: a call without ``_findings`` files nothing, a result nobody
named has no standing.

Once a standing is on the record, the ``findings`` stage serves, before each call, a
request-only system piece composed from the folded rows (``served_system``, projection 4),
and, on the wire only, a ticket in place of each result judged noise or ruled out
(``served_results``; also facts under ``serve="ledger-only"``). Both are committed state, so
the receipt covers them and the verifier rebuilds them; the history is never edited.

``judge`` (a second source, never served in the model's place): after each result a tool
produced, a classifier is asked what it is worth, through the decision port; its answer is
recorded (``agentfootprint.findings.judged``) and filed as a ``judgment`` row, so a replay
answers from the record.
"""

from __future__ import annotations

import inspect
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from agentfootprint.features.base import (
    MAX_COUNT,
    MISSING,
    Feature,
    GrowingRead,
    HookContext,
    OptionSpec,
    StageSpec,
    StateKey,
    ToolResult,
    refuse,
    unreadable_decision,
)
from agentfootprint.features.findings_ledger import (
    FINDINGS_INSTRUCTION,
    RESERVED,
    STANDINGS,
    Fold,
    PieceLines,
    decorated,
    fold,
    owns_reserved,
    piece_text,
    read_declaration,
    ticket,
)
from agentfootprint.runtime.events import AgentEvent
from agentfootprint.runtime.run import StageContext
from agentfootprint.runtime.tool_threads import call_user_code
from agentfootprint.runtime.tools import Tool, ToolOutcome

OPTION = "findings"
LEDGER = "keep_ledger_facts"
ROWS = "findings_rows"
SERVES = ("ledger-and-facts", "ledger-only")
ASKS = ("none", "quote-facts")
MAX_CONTEXT_BYTES = 16_384
#: how much of a result the judge reads
JUDGE_RESULT_CHARS = 4000
_MEMBERS = frozenset({"serve", "answer_ask", "judge", "max_context_bytes", "keep_ledger_facts"})


@dataclass(frozen=True, kw_only=True)
class FindingsDeclared(AgentEvent):
    """A call declared ``_findings`` (identities and counts only)."""

    kind: ClassVar[str] = "agentfootprint.findings.declared"
    iteration: int
    tool: str
    tool_call_id: str
    basis: str | None
    standings: int
    malformed: int


@dataclass(frozen=True, kw_only=True)
class FindingsStanding(AgentEvent):
    """The model stood on an earlier result (what it said is in the row)."""

    kind: ClassVar[str] = "agentfootprint.findings.standing"
    iteration: int
    tool_call_id: str
    standing: str
    declared_on: str
    assertions: int
    unknown_id: bool


@dataclass(frozen=True, kw_only=True)
class FindingsJudged(AgentEvent):
    """The judge's answer about one result (the question and the answer): a recorded
    decision, so a replay never asks it."""

    kind: ClassVar[str] = "agentfootprint.findings.judged"
    iteration: int
    tool: str
    tool_call_id: str
    judge: str
    against: str
    status: str  #: ``ok`` or ``failed``
    standing: str | None = field(default=None, metadata={"omit_none": True})
    probabilities: dict[str, float] | None = field(default=None, metadata={"omit_none": True})
    error: str | None = field(default=None, metadata={"omit_none": True})


@dataclass(frozen=True, kw_only=True, slots=True)
class JudgeRequest:
    """What the judge reads about one result."""

    tool: str
    result: str  #: the result's first 4,000 characters
    question: str  #: the person's message of the turn
    proposition: str | None  #: what the call tested, when the model said
    predicts: str | None


@dataclass(frozen=True, slots=True)
class FindingsSettings:
    """The resolved option."""

    serve: str = "ledger-and-facts"
    answer_ask: str = "none"
    judge: Any = None
    max_context_bytes: int = MAX_CONTEXT_BYTES
    keep_ledger_facts: int | None = None

    def recorded(self) -> dict[str, Any]:
        """What ``run.open`` records (the judge by its name)."""
        out: dict[str, Any] = {
            "answer_ask": self.answer_ask,
            "max_context_bytes": self.max_context_bytes,
            "serve": self.serve,
        }
        if self.judge is not None:
            out["judge"] = judge_name(self.judge)
        if self.keep_ledger_facts is not None:
            out["keep_ledger_facts"] = self.keep_ledger_facts
        return out


def judge_name(judge: Any) -> str:
    name = getattr(judge, "name", None)
    return name if isinstance(name, str) and name else type(judge).__name__


def _check(value: Any, given: Mapping[str, Any]) -> FindingsSettings | None:
    if value is MISSING or value is None or value is False:
        return None
    if value is True:
        value = {}
    if not isinstance(value, Mapping):
        raise refuse(
            OPTION,
            "must be True or {'serve', 'answer_ask', 'judge', 'max_context_bytes', "
            f"'keep_ledger_facts'}}, got {value!r}",
        )
    unknown = sorted(set(map(str, value)) - _MEMBERS)
    if unknown:
        raise refuse(
            OPTION,
            f"unknown member(s) {', '.join(map(repr, unknown))}; the members are "
            + ", ".join(map(repr, sorted(_MEMBERS))),
        )
    serve = value.get("serve", SERVES[0])
    if serve not in SERVES:
        raise refuse(OPTION, f"'serve' must be one of {SERVES!r}, got {serve!r}")
    ask = value.get("answer_ask", ASKS[0])
    if ask not in ASKS:
        raise refuse(OPTION, f"'answer_ask' must be one of {ASKS!r}, got {ask!r}")
    judge = value.get("judge")
    if judge is not None and not callable(getattr(judge, "judge", None)):
        raise refuse(
            OPTION,
            "'judge' must be an object with judge(request) answering a mapping of the "
            f"standings {STANDINGS!r} to probabilities, got {judge!r}",
        )
    size = value.get("max_context_bytes", MAX_CONTEXT_BYTES)
    if isinstance(size, bool) or not isinstance(size, int) or not 1024 <= size <= 262_144:
        raise refuse(
            OPTION, f"'max_context_bytes' must be an integer from 1024 to 262144, got {size!r}"
        )
    keep = value.get("keep_ledger_facts")
    if keep is not None:
        keep = ledger_fact_ceiling(keep, f"{OPTION}['keep_ledger_facts']")
    if given.get("redact") is not None:
        raise refuse(
            OPTION,
            "the findings ledger quotes what the model declared about tool results, in its "
            "rows and in the piece it serves; this version refuses it beside a redaction "
            "policy (redact=...)",
        )
    for tool in given.get("tools") or ():
        if isinstance(tool, Tool) and owns_reserved(tool.input_schema):
            raise refuse(
                "tools",
                f"tool {tool.name!r} declares the argument {RESERVED!r}, which the findings "
                "ledger reserves; rename it",
            )
    return FindingsSettings(
        serve=str(serve),
        answer_ask=str(ask),
        judge=judge,
        max_context_bytes=size,
        keep_ledger_facts=keep,
    )


def ledger_fact_ceiling(value: Any, where: str) -> int:
    """``keep_ledger_facts`` checked: False or a non-negative integer (0 and False: no hold)."""
    if value is False:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_COUNT:
        raise refuse(
            "keep_ledger_facts" if "[" not in where else OPTION,
            f"{where} must be False or an integer from 0 to {MAX_COUNT}, got {value!r}",
        )
    return value


#: the default ceiling of fact turns the window holds (the seed's), with findings and a window
KEEP_LEDGER_FACTS = 4


def _keep(value: Any, given: Any) -> int | None:
    """``keep_ledger_facts``: refused when malformed whatever else is set; read only with
    both ``findings`` and ``window`` (else ignored, nothing recorded); the findings door
    (``findings={"keep_ledger_facts": N}``) wins when both are given."""
    ceiling = None if value is MISSING or value is None else ledger_fact_ceiling(value, LEDGER)
    if given.get(OPTION) in (None, False) or given.get("window") is None:
        return None
    settings = given.resolved(OPTION)
    if settings.keep_ledger_facts is not None:
        return int(settings.keep_ledger_facts)
    return KEEP_LEDGER_FACTS if ceiling is None else ceiling


class _Served:
    """What the ``findings`` stage keeps for a run (never state): the ledger folded as its
    rows grow, each result's piece lines, and the tool call id at each history index, so a
    call costs what changed, not the whole conversation."""

    def __init__(self) -> None:
        self.ledger = Fold()
        self.lines = PieceLines()
        self.ids: list[str | None] = []  #: the tool call id at each history index
        self.history = GrowingRead()
        #: (rows folded, served ids) of the last call, and what it served: a call whose
        #: rows and served results did not change serves the same piece and tickets
        self.last: tuple[int, list[str]] | None = None
        self.text = ""
        self.replacements: list[dict[str, str]] = []
        self.tickets: dict[tuple[str, str], str] = {}

    def ticket(self, standing: str, call: str) -> str:
        made = self.tickets.get((standing, call))
        if made is None:
            made = self.tickets[(standing, call)] = ticket(standing, call)
        return made

    def served_ids(self, history: Any, segments: Any) -> list[str]:
        """The ids of the tool results the request serves, in order (the history as
        ``served_messages`` selects it: the window's choice)."""
        fresh, restarted = self.history.tail(history)
        if restarted:
            self.ids = []
        for message in fresh:
            call = message.get("tool_call_id") if isinstance(message, dict) else None
            tool = isinstance(message, dict) and message.get("role") == "tool"
            self.ids.append(call if tool and isinstance(call, str) else None)
        ids: list[str | None] = self.ids
        if isinstance(segments, list):
            ids = []
            for segment in segments:
                bounds = segment.get("history") if isinstance(segment, dict) else None
                if isinstance(bounds, list) and len(bounds) == 2:
                    end = len(self.ids) if bounds[1] is None else bounds[1]
                    ids.extend(self.ids[bounds[0] : end])
        return [c for c in ids if c is not None]


async def serve(ctx: StageContext) -> None:
    """Before each call: the ledger's piece (``served_system``) and the tickets of the results
    it collapses (``served_results``), from the committed rows; nothing until a standing."""
    settings: FindingsSettings = ctx.config.options[OPTION]
    s = ctx.scope
    memory: _Served = ctx.run_memory.setdefault("findings:served", _Served())
    ledger = memory.ledger.extend(s.get(ROWS) or ())
    if not ledger.has_standing:
        return
    served = memory.served_ids(s.get("history") or [], s.get("served_messages"))
    seen = (ledger.rows, served)
    if memory.last != seen:  # (else this call serves what the last one did)
        memory.last = seen
        memory.text = piece_text(
            ledger,
            served,
            answer_ask=settings.answer_ask == "quote-facts",
            max_bytes=settings.max_context_bytes,
            lines=memory.lines,
        )
        collapsing = {"noise", "ruled-out"}
        if settings.serve == "ledger-only":
            collapsing.add("fact")
        counts = Counter(served)
        memory.replacements = [
            {"content": memory.ticket(row["standing"], call), "tool_call_id": call}
            for call, row in ledger.standings.items()
            if row["standing"] in collapsing and counts[call] == 1
        ]
    segments = [{"system": [0, None]}, {"piece": {"source": "findings", "text": memory.text}}]
    if s.get("served_system") != segments:
        s.set("served_system", segments)
    if memory.replacements:
        if s.get("served_results") != memory.replacements:
            s.set("served_results", memory.replacements)
    elif "served_results" in s:
        s.delete("served_results")


class _Findings(Feature[FindingsSettings]):
    def settings(self, options: Mapping[str, Any]) -> FindingsSettings:
        settings: FindingsSettings = options[OPTION]
        return settings

    def system_pieces(
        self, ctx: HookContext[FindingsSettings], pieces: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        return [*pieces, {"source": "findings-instruction", "text": FINDINGS_INSTRUCTION}]

    def tool_schema(
        self, ctx: HookContext[FindingsSettings], schema: dict[str, Any]
    ) -> dict[str, Any]:
        return decorated(schema)

    async def tool_arguments(
        self, ctx: HookContext[FindingsSettings], call: ToolResult
    ) -> dict[str, Any] | ToolOutcome | None:
        arguments = call.arguments
        if not isinstance(arguments, dict) or RESERVED not in arguments:
            return None  # never infer: a call that declares nothing files nothing
        declaration = read_declaration(arguments[RESERVED])
        known = ctx.memory(_Results).update(ctx.scope.committed.get("history"))
        rows: list[dict[str, Any]] = []
        if declaration.basis is not None:
            row = {
                "kind": "basis",
                "tool_call_id": call.tool_call_id,
                "tool": call.tool,
                "iteration": call.iteration,
                **declaration.basis,
            }
            if declaration.malformed:
                row["malformed"] = declaration.malformed
            rows.append(row)
        for standing in declaration.previous:
            row = {"kind": "standing", **standing}
            row["declared_on"] = call.tool_call_id
            row["iteration"] = call.iteration
            name = known.get(standing["tool_call_id"])
            if name is None:
                row["unknown_id"] = True
            else:
                row["tool"] = name
            rows.append(row)
        if rows:
            ctx.scope.append(ROWS, rows)
        await self._told(ctx, call, declaration.basis, rows, declaration.malformed)
        return {k: v for k, v in arguments.items() if k != RESERVED}

    async def _told(
        self,
        ctx: HookContext[FindingsSettings],
        call: ToolResult,
        basis: Mapping[str, Any] | None,
        rows: list[dict[str, Any]],
        malformed: int,
    ) -> None:
        standings = [r for r in rows if r["kind"] == "standing"]
        if ctx.listens(FindingsDeclared.kind):
            await ctx.emit(
                FindingsDeclared(
                    run_id=ctx.run_id,
                    iteration=call.iteration,
                    tool=call.tool,
                    tool_call_id=call.tool_call_id,
                    basis=None if basis is None else basis["basis"],
                    standings=len(standings),
                    malformed=malformed,
                )
            )
        if ctx.listens(FindingsStanding.kind):
            for row in standings:
                await ctx.emit(
                    FindingsStanding(
                        run_id=ctx.run_id,
                        iteration=call.iteration,
                        tool_call_id=row["tool_call_id"],
                        standing=row["standing"],
                        declared_on=call.tool_call_id,
                        assertions=len(row["assertions"]),
                        unknown_id=bool(row.get("unknown_id")),
                    )
                )

    async def tool_result_noted(
        self, ctx: HookContext[FindingsSettings], result: ToolResult, outcome: ToolOutcome
    ) -> ToolOutcome:
        judge = ctx.options.judge
        if judge is None or not result.ran:
            return outcome  # a refused or denied call produced no result to judge
        basis = fold(ctx.scope.get(ROWS) or ()).bases.get(result.tool_call_id, {})
        proposition = basis.get("proposition")
        question = {
            "tool": result.tool,
            "tool_call_id": result.tool_call_id,
            "judge": judge_name(judge),
            "against": "proposition" if proposition else "question",
        }
        recorded = ctx.decisions.recorded(FindingsJudged.kind, question)
        if recorded is None:
            answer = await _ask(
                judge,
                JudgeRequest(
                    tool=result.tool,
                    result=outcome.content[:JUDGE_RESULT_CHARS],
                    question=str(ctx.scope.committed.get("user_message", "")),
                    proposition=proposition,
                    predicts=basis.get("predicts"),
                ),
            )
        else:
            answer = _recorded_answer(ctx, recorded)
        await ctx.emit(
            FindingsJudged(
                run_id=ctx.run_id,
                iteration=result.iteration,
                tool=result.tool,
                tool_call_id=result.tool_call_id,
                judge=question["judge"],
                against=question["against"],
                status=answer["status"],
                standing=answer.get("standing"),
                probabilities=answer.get("probabilities"),
                error=answer.get("error"),
            )
        )
        row = {"kind": "judgment", **question, "iteration": result.iteration, **answer}
        ctx.scope.append(ROWS, [row])
        return outcome


class _Results:
    """The tool results of the committed history (tool call id -> tool name), read as the
    history grows: what a standing's id resolves against."""

    def __init__(self) -> None:
        self.history = GrowingRead()
        self.found: dict[str, str] = {}

    def update(self, history: Any) -> dict[str, str]:
        fresh, restarted = self.history.tail(history)
        if restarted:
            self.found = {}
        for message in fresh:
            if isinstance(message, dict) and message.get("role") == "tool":
                call, name = message.get("tool_call_id"), message.get("name")
                if isinstance(call, str) and call not in self.found:
                    self.found[call] = name if isinstance(name, str) else "?"
        return self.found


async def _ask(judge: Any, request: JudgeRequest) -> dict[str, Any]:
    """The judge's answer (live): a standing and its distribution, or why it failed (a
    failing judge never fails the run, and never has a standing guessed for it)."""
    try:
        method = judge.judge
        if inspect.iscoroutinefunction(method):
            answer = await method(request)
        else:
            answer = await call_user_code(method, request)
        probabilities = _distribution(answer)
    except Exception as exc:
        return {"status": "failed", "error": type(exc).__name__}
    standing = max(STANDINGS, key=lambda s: (probabilities.get(s, -1.0), -STANDINGS.index(s)))
    return {"status": "ok", "standing": standing, "probabilities": probabilities}


def _distribution(answer: Any) -> dict[str, float]:
    if not isinstance(answer, Mapping) or not answer:
        raise ValueError("the judge answered no mapping of standings to probabilities")
    out: dict[str, float] = {}
    for standing, p in answer.items():
        if standing not in STANDINGS:
            raise ValueError(f"the judge answered the unknown standing {standing!r}")
        if isinstance(p, bool) or not isinstance(p, int | float) or not 0 <= p <= 1:
            raise ValueError(f"the judge's probability for {standing!r} is not in [0, 1]")
        out[standing] = float(p)
    return dict(sorted(out.items()))


def _recorded_answer(ctx: HookContext[Any], recorded: Mapping[str, Any]) -> dict[str, Any]:
    status = recorded.get("status")
    if status == "failed" and isinstance(recorded.get("error"), str):
        return {"status": "failed", "error": recorded["error"]}
    probabilities = recorded.get("probabilities")
    if (
        status != "ok"
        or recorded.get("standing") not in STANDINGS
        or not isinstance(probabilities, dict)
    ):
        raise unreadable_decision(ctx, FindingsJudged.kind, "status")
    return {
        "status": "ok",
        "standing": recorded["standing"],
        "probabilities": dict(probabilities),
    }


FEATURE = _Findings(
    name="findings",
    summary="the model's declared evidence (_findings) peeled, filed as rows and served back "
    "as a request-only piece; noise and ruled-out results collapsed on the wire",
    order=58,
    options=(
        OptionSpec(
            name=OPTION,
            seed="findings",
            check=_check,
            recorded=True,
            record=FindingsSettings.recorded,
            summary="the findings ledger: True, or {serve, answer_ask, judge, "
            "max_context_bytes, keep_ledger_facts}",
        ),
        OptionSpec(
            name=LEDGER,
            seed="keepLedgerFacts",
            check=_keep,
            recorded=True,
            summary="the fact turns the window holds under the findings ledger (default 4)",
        ),
    ),
    stages=(
        StageSpec(
            name="findings",
            fn=serve,
            phase="iteration",
            order=40,
            description="serve the findings ledger's piece and tickets (projection 4)",
        ),
    ),
    state_keys=(
        StateKey(name=ROWS, summary="the findings ledger: basis, standing and judgment rows"),
        StateKey(
            name="served_system", structure=True, summary="the system pieces served (projection 4)"
        ),
        StateKey(
            name="served_results",
            structure=True,
            summary="tool results' content on the wire (projection 4)",
        ),
    ),
    events=(FindingsDeclared, FindingsStanding, FindingsJudged),
    recorded_events=(FindingsJudged,),
    ports=("decisions",),
    projection=4,
    active=lambda options: options.get(OPTION) is not None,
)
