"""``tool_choice``: a classifier's second reading of which tool answers the current step.

``tool_choice={"classifier": obj, "serve": "all" | {"top": N}, "always_serve": [names]}``
(every key optional; the classifier defaults to
:class:`~agentfootprint.features.classifiers.DescriptionClassifier`). Before every model call the
``tool-choice`` stage (after ``tools`` and ``window``) asks the classifier ONE question over
the tools about to be served less the ``always_serve`` doors, and appends a choice row to
``tool_choices`` BEFORE the call: the ranking, its pick and confidence, what was served and
why. After the reply, the call's own commit appends an outcome row to
``tool_choice_outcomes``: the tools the model called, whether the first agrees with the
pick, and any miss (a called tool that was narrowed away). The model's call is never
overridden.

``serve: "all"`` (the default) is advisory: every call serves what it served without the
option, byte for byte. ``serve: {"top": N}`` narrows: the stage commits ``served_tools``
(the top N plus the doors, in ``tool_schemas`` order: what the receipt hashes and
``served_at`` rebuilds) unless a fallback serves the full list, with the reason on the row:
``too-few`` (fewer than N + 1 candidates), ``unavailable`` (the classifier raised, answered
something that is not a ranking, or scored fewer than N), ``after-miss`` (the previous
call's outcome carried a miss) or ``wrap-up`` (the out-of-budget wrap-up call, whose tools
are withheld). A miss is dispatched as before (the tool exists: it runs) and recorded as
``agentfootprint.tools.answered_off_wire`` once the dispatcher answered it.

The classifier is a port: each answer is the recorded event ``agentfootprint.tools.choice``
holding the question (``classifier``, ``message``: the query, ``candidates``: their names,
``descriptions``: the digest of what the classifier read of them) and the answer
(``status``, ``ranking``, ``error``); a replay answers from it without calling the
classifier, and a replay asking another question diverges (kind ``decision``). Refused at
construction: unknown keys, a bad ``serve``, ``always_serve`` names that are not tools of
the agent, a classifier without ``rank``, no tools, ``react_mode="classic"``. Recorded in
``run.open.options`` as ``{"classifier": name, "serve": ..., "always_serve": [...]}``.

A sync ``rank`` of the user's runs in a worker thread (never on the loop): a run cancelled
while it ranks stops waiting at once and makes no call.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from agentfootprint.features import tool_teardown, wrap_up
from agentfootprint.features.base import (
    MISSING,
    Feature,
    HookContext,
    OptionSpec,
    StageSpec,
    StateKey,
    count,
    refuse,
)
from agentfootprint.features.classifiers import DescriptionClassifier, ToolCandidate
from agentfootprint.logformat.canonical import MAX_SAFE_INT, canon
from agentfootprint.logformat.hashing import hexdigest
from agentfootprint.runtime.events import AgentEvent
from agentfootprint.runtime.provider import LLMResponse
from agentfootprint.runtime.run import StageContext
from agentfootprint.runtime.tool_threads import call_user_code

OPTION = "tool_choice"
KEYS = ("classifier", "serve", "always_serve")
#: the state keys: one choice row per call (before it), one outcome row per reply
ROWS = "tool_choices"
OUTCOMES = "tool_choice_outcomes"
SERVED = "served_tools"
#: the fallback reasons a row may carry (None: the classifier's list was served, or advisory)
REASONS = ("unavailable", "too-few", "after-miss", "wrap-up")


@dataclass(frozen=True, slots=True)
class Resolved:
    """The checked option: the classifier object and what is served."""

    classifier: Any
    name: str  #: how the classifier is recorded
    serve: str | dict[str, int]
    always_serve: list[str]

    def record(self) -> dict[str, Any]:
        """What ``run.open.options`` records (the classifier by name, never the object)."""
        return {"classifier": self.name, "serve": self.serve, "always_serve": self.always_serve}


@dataclass(frozen=True, kw_only=True)
class ToolChoice(AgentEvent):
    """The classifier's answer to one choice question (the question and the answer)."""

    kind: ClassVar[str] = "agentfootprint.tools.choice"
    iteration: int
    call: int  #: the model call the question was asked before
    classifier: str
    #: the step asked about (the ``query`` the classifier is given; ``message`` so the
    #: conversation's redaction policy covers it as it covers the user message)
    message: str
    candidates: list[str]  #: the candidates' names, in served order
    #: ``H("tools/candidates", canon([{"name", "description"}, ...]))``: what the classifier
    #: read of them (the descriptions are in ``tool_schemas``; a digest keeps the row small)
    descriptions: str
    status: str  #: ``ok`` or ``unavailable``
    ranking: list[dict[str, Any]]  #: ``{"tool", "score"}``, best first ([] when unavailable)
    error: str | None = None  #: why it is unavailable (an exception's class, or the flaw)


@dataclass(frozen=True, kw_only=True)
class AnsweredOffWire(AgentEvent):
    """The model called a tool the choice had narrowed away; the dispatcher answered it."""

    kind: ClassVar[str] = "agentfootprint.tools.answered_off_wire"
    iteration: int
    call: int  #: the model call whose reply asked for it
    tool: str
    tool_call_id: str
    served: list[str]  #: what that call served


# -- the option --------------------------------------------------------------------------


def _tool_names(given: Mapping[str, Any]) -> list[str]:
    tools = given.get("tools")
    if not isinstance(tools, Sequence) or isinstance(tools, str):
        return []
    return [name for tool in tools if isinstance(name := getattr(tool, "name", None), str)]


def _serve(value: Any) -> str | dict[str, int]:
    if value == "all" and isinstance(value, str):
        return "all"
    if isinstance(value, Mapping) and set(value) == {"top"}:
        return {"top": count(OPTION, value["top"], "serve's top")}
    raise refuse(OPTION, f'serve must be "all" or {{"top": N}} (N >= 1), got {value!r}')


def _always_serve(value: Any, tools: list[str]) -> list[str]:
    if not isinstance(value, list | tuple) or not all(isinstance(n, str) for n in value):
        raise refuse(OPTION, f"always_serve must be a list of tool names, got {value!r}")
    if len(set(value)) != len(value):
        raise refuse(OPTION, f"always_serve names a tool twice: {list(value)!r}")
    unknown = [name for name in value if name not in tools]
    if unknown:
        raise refuse(
            OPTION,
            f"always_serve names {', '.join(map(repr, unknown))}, which "
            f"{'is' if len(unknown) == 1 else 'are'} not a tool of the agent "
            f"(its tools: {', '.join(map(repr, tools))})",
        )
    return list(value)


def classifier_name(classifier: Any) -> str:
    """How a classifier is recorded: its ``name`` attribute, else its class name."""
    name = getattr(classifier, "name", None)
    return name if isinstance(name, str) and name else type(classifier).__name__


def _check(value: Any, given: Mapping[str, Any]) -> Resolved | None:
    if value is MISSING or value is None:
        return None
    if not isinstance(value, Mapping):
        raise refuse(
            OPTION,
            'must be {"classifier": obj, "serve": "all" | {"top": N}, "always_serve": [names]} '
            f"(every key optional), got {value!r}",
        )
    unknown = sorted(repr(k) for k in value if k not in KEYS)
    if unknown:
        raise refuse(
            OPTION,
            f"unknown key {', '.join(unknown)}; the keys are 'classifier', 'serve' and "
            "'always_serve'",
        )
    tools = _tool_names(given)
    if not tools:
        raise refuse(OPTION, "the agent has no tools to choose among; give tools=[...]")
    if given.get("react_mode") == "classic":
        raise refuse(
            OPTION,
            "needs the tools slot to run before every call; react_mode='classic' runs it on "
            "the first pass only (use react_mode='dynamic')",
        )
    serve = _serve(value.get("serve", "all"))
    always = _always_serve(value.get("always_serve", []), tools)
    classifier = value.get("classifier", MISSING)
    if classifier is MISSING or classifier is None:
        classifier = DescriptionClassifier()
    elif not callable(getattr(classifier, "rank", None)):
        raise refuse(
            OPTION,
            f"the classifier {classifier!r} has no rank(query, candidates) method "
            "(see agentfootprint.features.classifiers.ToolClassifier)",
        )
    return Resolved(classifier, classifier_name(classifier), serve, always)


# -- the question --------------------------------------------------------------------------


def query_text(history: Sequence[Mapping[str, Any]]) -> str:
    """The step asked about: the latest user message's text, then the latest assistant
    text after it (when there is one), joined by a newline."""
    start = next(
        (i for i in range(len(history) - 1, -1, -1) if history[i].get("role") == "user"), None
    )
    if start is None:
        return ""
    parts = [history[start].get("content")]
    for message in reversed(history[start + 1 :]):
        if message.get("role") == "assistant" and message.get("content"):
            parts.append(message["content"])
            break
    return "\n".join(part for part in parts if isinstance(part, str) and part)


def normalised(answer: Any, candidates: Sequence[str]) -> list[dict[str, Any]]:
    """A classifier's answer as a ranking (best first; ties keep the candidates' order), or
    ValueError naming what is wrong with it."""
    if isinstance(answer, Mapping):
        pairs: list[Any] = list(answer.items())
    elif isinstance(answer, Sequence) and not isinstance(answer, str | bytes):
        pairs = list(answer)
    else:
        raise ValueError(f"a {type(answer).__name__}, not a ranking")
    position = {name: index for index, name in enumerate(candidates)}
    scores: dict[str, float | int] = {}
    for pair in pairs:
        if not isinstance(pair, Sequence) or isinstance(pair, str | bytes) or len(pair) != 2:
            raise ValueError("an entry that is not a (name, score) pair")
        name, score = pair
        if not isinstance(name, str) or name not in position:
            shown = name[:80] if isinstance(name, str) else type(name).__name__
            raise ValueError(f"{shown!r} is not a candidate")
        if name in scores:
            raise ValueError(f"{name!r} is ranked twice")
        if (
            isinstance(score, bool)
            or not isinstance(score, int | float)
            or not math.isfinite(score)
            or abs(score) > MAX_SAFE_INT
        ):
            raise ValueError(f"the score of {name!r} is not a finite number")
        scores[name] = score
    ordered = sorted(scores, key=lambda n: (-scores[n], position[n]))
    return [{"tool": name, "score": scores[name]} for name in ordered]


async def _ask(
    classifier: Any, query: str, candidates: list[dict[str, str]], grace: float
) -> tuple[list[dict[str, Any]], str | None]:
    """Ask the classifier (live): its ranking, or [] and why it is unavailable. A sync
    ``rank`` of the user's runs in a worker thread, never on the loop, so a cancelled run
    stops waiting for it at once (the shipped lexical scorer, which calls nothing, runs
    inline)."""
    offered = [ToolCandidate(name=c["name"], description=c["description"]) for c in candidates]
    try:
        rank = classifier.rank
        if type(classifier) is DescriptionClassifier:  # ours: inline, no thread hop
            answer = rank(query, offered)
        else:
            answer = await call_user_code(rank, query, offered, grace=grace)
    except Exception as exc:  # a failing classifier never fails the run
        return [], f"raised {type(exc).__name__}"
    try:
        return normalised(answer, [c["name"] for c in candidates]), None
    except ValueError as exc:
        return [], f"malformed answer: {exc}"


def _recorded_answer(payload: Mapping[str, Any]) -> tuple[list[dict[str, Any]], str | None]:
    ranking = payload.get("ranking")
    error = payload.get("error")
    return (list(ranking) if isinstance(ranking, list) else []), (
        error if isinstance(error, str) else None
    )


@dataclass(frozen=True, slots=True)
class _Offer:
    """What one committed tool list offers the classifier (computed once per list: committed
    lists are replaced, never mutated, so the same object holds the same tools)."""

    names: list[str]  #: every tool, in served order
    doors: list[str]
    candidates: list[dict[str, str]]  #: ``{"name", "description"}`` of the rest
    descriptions: str  #: ``H("tools/candidates", canon(candidates))``


def _offer(ctx: StageContext, resolved: Resolved) -> _Offer:
    schemas = ctx.scope.get("tool_schemas") or []
    cached = ctx.run_memory.get(OPTION)
    if cached is not None and cached[0] is schemas:
        offer: _Offer = cached[1]
        return offer
    names = [schema["name"] for schema in schemas]
    candidates = [
        {"name": schema["name"], "description": str(schema.get("description", ""))}
        for schema in schemas
        if schema["name"] not in resolved.always_serve
    ]
    offer = _Offer(
        names=names,
        doors=[name for name in names if name in resolved.always_serve],
        candidates=candidates,
        descriptions=hexdigest("tools/candidates", canon(candidates)),
    )
    ctx.run_memory[OPTION] = (schemas, offer)
    return offer


async def _decide(
    ctx: StageContext, resolved: Resolved, offer: _Offer
) -> tuple[list[dict[str, Any]], str | None]:
    """One choice question through the decision port, recorded as :class:`ToolChoice`."""
    message = query_text(ctx.scope.get("history") or [])
    candidates = offer.candidates
    names = [c["name"] for c in candidates]
    descriptions = offer.descriptions
    question = {
        "classifier": resolved.name,
        "message": message,
        "candidates": names,
        "descriptions": descriptions,
    }
    recorded = ctx.decisions.recorded(ToolChoice.kind, question)
    if recorded is None:
        grace = tool_teardown.exit_grace(ctx.config.options)
        ranking, error = await _ask(resolved.classifier, message, candidates, grace)
    else:  # a replay: the original's answer, the classifier is not asked
        ranking, error = _recorded_answer(recorded)
    await ctx.emit(
        ToolChoice(
            run_id=ctx.run_id,
            iteration=ctx.scope.get("iteration"),
            call=ctx.calls,
            classifier=resolved.name,
            message=message,
            candidates=names,
            descriptions=descriptions,
            status="ok" if error is None else "unavailable",
            ranking=ranking,
            error=error,
        )
    )
    return ranking, error


# -- the stages ----------------------------------------------------------------------------


def _row(ctx: StageContext, resolved: Resolved, **fields: Any) -> dict[str, Any]:
    ranking = fields.pop("ranking", None)
    best = ranking[0] if ranking else None
    return {
        "call": ctx.calls,
        "iteration": ctx.scope.get("iteration"),
        "serve": resolved.serve,
        "ranking": ranking,
        "pick": None if best is None else best["tool"],
        "confidence": None if best is None else best["score"],
        **fields,
    }


async def choose(ctx: StageContext) -> None:
    """Ask the question, file the choice row and commit what is served (before the call)."""
    s = ctx.scope
    resolved: Resolved = ctx.config.options[OPTION]
    offer = _offer(ctx, resolved)
    names, doors, candidates = offer.names, offer.doors, offer.candidates
    ranking: list[dict[str, Any]] | None = None
    error: str | None = None
    if candidates:
        ranking, error = await _decide(ctx, resolved, offer)
    reason: str | None = "unavailable" if error is not None else None
    served = names
    top = resolved.serve["top"] if isinstance(resolved.serve, dict) else None
    if top is not None:
        outcomes = s.get(OUTCOMES) or []
        if len(candidates) < top + 1:
            reason = "too-few"
        elif error is not None or ranking is None or len(ranking) < top:
            reason = "unavailable"
        elif outcomes and outcomes[-1]["miss"]:
            reason = "after-miss"
        else:
            chosen = {entry["tool"] for entry in ranking[:top]} | set(doors)
            served = [name for name in names if name in chosen]
        if reason is None:
            s.set(SERVED, served)
        else:
            s.delete(SERVED)  # a previous call narrowed: this one serves the full list
    row = _row(
        ctx,
        resolved,
        candidates=[c["name"] for c in candidates],
        doors=doors,
        ranking=ranking,
        served=served,
        narrowed=served != names,
        reason=reason,
    )
    s.append(ROWS, [row])


async def choose_wrap_up(ctx: StageContext) -> None:
    """The wrap-up call serves no tools: its row says so; nothing narrowed is left."""
    s = ctx.scope
    resolved: Resolved = ctx.config.options[OPTION]
    s.delete(SERVED)  # the wrap-up stage committed tool_schemas = []
    served = [schema["name"] for schema in s.get("tool_schemas") or []]
    row = _row(
        ctx,
        resolved,
        candidates=[],
        doors=[],
        ranking=None,
        served=served,
        narrowed=False,
        reason="wrap-up",
    )
    s.append(ROWS, [row])


class _ToolChoice(Feature[Resolved]):
    def settings(self, options: Mapping[str, Any]) -> Resolved:
        resolved: Resolved = options[OPTION]
        return resolved

    async def reply_received(
        self, ctx: HookContext[Resolved], call: int, response: LLMResponse
    ) -> None:
        """The outcome row of the reply, in the call's own commit."""
        s = ctx.scope
        rows = s.get(ROWS) or []
        if not rows or rows[-1]["call"] != call:
            return
        row = rows[-1]
        called = [tool_call.name for tool_call in response.tool_calls]
        away = set(row["candidates"]) - set(row["served"]) if row["narrowed"] else set()
        pick = row["pick"]
        s.append(
            OUTCOMES,
            [
                {
                    "call": call,
                    "called": called,
                    "pick": pick,
                    "agrees": None if not called or pick is None else called[0] == pick,
                    "miss": [name for name in dict.fromkeys(called) if name in away],
                }
            ],
        )


async def off_wire(ctx: StageContext) -> None:
    """After the dispatcher answered the reply's calls: each one it answered for a tool
    the choice had narrowed away is recorded."""
    s = ctx.scope
    outcomes = s.get(OUTCOMES) or []
    rows = s.get(ROWS) or []
    if not outcomes or not outcomes[-1]["miss"] or not rows:
        return
    missed, row = set(outcomes[-1]["miss"]), rows[-1]
    for tool_call in s.get("last_response")["tool_calls"]:
        if tool_call["name"] in missed:
            await ctx.emit(
                AnsweredOffWire(
                    run_id=ctx.run_id,
                    iteration=row["iteration"],
                    call=row["call"],
                    tool=tool_call["name"],
                    tool_call_id=tool_call["id"],
                    served=list(row["served"]),
                )
            )


FEATURE = _ToolChoice(
    name="tool-choice",
    summary="a classifier's reading of which tool answers the step; optionally narrowing",
    order=45,
    options=(
        OptionSpec(
            name=OPTION,
            seed="toolChoice",
            check=_check,
            recorded=True,
            summary="tool choice by classifier",
            record=Resolved.record,
        ),
    ),
    stages=(
        StageSpec(name="tool-choice", fn=choose, phase="iteration", order=40),
        StageSpec(name="tool-choice-off-wire", fn=off_wire, phase="tool", order=10),
        StageSpec(
            name="tool-choice-wrap-up",
            fn=choose_wrap_up,
            phase="branch",
            branch=wrap_up.BRANCH,
            order=5,
        ),
    ),
    state_keys=(
        StateKey(name=ROWS, structure=True, summary="the choice row of each call"),
        StateKey(name=OUTCOMES, structure=True, summary="the outcome row of each reply"),
        StateKey(name=SERVED, structure=True, summary="request.tools, by name"),
    ),
    events=(ToolChoice, AnsweredOffWire),
    recorded_events=(ToolChoice, AnsweredOffWire),
    ports=("decisions",),
    projection=2,
    active=lambda options: options.get(OPTION) is not None,
)
