"""``inputs_layer`` and ``argument_ask_context``: every argument a ruled tool runs with is
accounted for, the model's, the default the library filled in, or the person's answer.

A tool rules arguments with ``define_tool(ask_or_assume=...)`` (``runtime/argument_rules.py``).
Before a reply's batch runs (the ``batch_ready`` hook, in the tool-calls stage: an agent whose
ruled tools are never called records the same rows), one row per ruled argument per call is
filed as a recorded ``agentfootprint.findings.argument`` event (names and sources, never a
value): ``model`` (the model gave it), ``default`` (the default, given by the model or filled
in), ``asked`` (left out under an ``ask`` rule), ``answered`` (filled from the person's answer)
or ``refused`` (no valid answer after three rounds: the call is refused by name). With
``answer_layer`` armed the rows are committed to ``argument_rows`` too (the answer's standing
reads them: ``argument-assumed``, ``argument-unverified``). Arguments
left out under an ``ask`` rule are asked once for the whole batch, before any of its calls
runs, as an input pause (``pending.kind = "input"``, fields ``f1``, ``f2``... each bound to
the calls that left that argument out, in ``pending.context.agentfootprint``). The answer is
checked against the field's schema; an invalid or missing one is asked again, at most three
rounds in all. The fills are state (``argument_fills``: call id -> ``{"values": {...},
"refused": [...]}``), so a resume in another process runs the batch with them; a filled
call's result carries a note saying what was filled.

``argument_ask_context()`` adds the host's own object to the ask's ``context`` beside the
reserved key ``agentfootprint``; its answer is a recorded decision, so a replay never calls it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import jsonschema

from agentfootprint.errors import CanonicalFormError, RunError
from agentfootprint.features.answer_layer import OPTION as ANSWER_LAYER
from agentfootprint.features.base import (
    MISSING,
    Feature,
    HookContext,
    OptionSpec,
    PauseRequest,
    StateKey,
    ToolResult,
    refuse,
    unreadable_decision,
)
from agentfootprint.features.tool_dispatch import parse_arguments
from agentfootprint.logformat.canonical import canon
from agentfootprint.runtime.argument_rules import ArgumentRule
from agentfootprint.runtime.events import AgentEvent
from agentfootprint.runtime.scope import to_json_value
from agentfootprint.runtime.tools import Tool, ToolOutcome

OPTION = "inputs_layer"
CONTEXT_OPTION = "argument_ask_context"
FILLS = "argument_fills"
#: the rows as state, with the answer layer armed (its reading: ``integrity.assessment``)
ROWS = "argument_rows"
RESERVED = "agentfootprint"
#: rounds of asking before a call whose argument has no valid answer is refused
ROUNDS = 3
#: what starts the note on a filled call's result (and what ``unnote`` strips)
NOTE_MARK = "\n\n[Arguments you left out were filled in: "


@dataclass(frozen=True, kw_only=True)
class ArgumentFiled(AgentEvent):
    """One ruled argument of one call: where its value came from (never the value)."""

    kind: ClassVar[str] = "agentfootprint.findings.argument"
    tool: str
    tool_call_id: str
    argument: str
    #: ``model``, ``default``, ``asked``, ``answered`` or ``refused``
    source: str
    filled: bool = False
    round: int | None = field(default=None, metadata={"omit_none": True})


@dataclass(frozen=True, kw_only=True)
class AskContextGiven(AgentEvent):
    """The host's ``argument_ask_context()`` answer for one ask (a recorded decision)."""

    kind: ClassVar[str] = "agentfootprint.inputs.ask_context"
    request: str
    context: dict[str, Any]


@dataclass(frozen=True, slots=True)
class InputsSettings:
    ask_context: Callable[[], Any] | None
    #: the answer layer is armed: each row is also committed to ``argument_rows``, which it
    #: reads (unarmed, the layer records the same rows as before it read them)
    rows: bool = False


def _ruled(given: Mapping[str, Any]) -> list[Tool]:
    return [t for t in given.get("tools") or () if isinstance(t, Tool) and t.rules]


def _inputs_layer(value: Any, given: Mapping[str, Any]) -> bool | None:
    """True when armed (recorded in ``run.open.options``), else None (not recorded)."""
    ruled = _ruled(given)
    if value is MISSING or value is None:
        return True if ruled else None
    if isinstance(value, Mapping) and "argument_sources" in value:
        raise refuse(
            OPTION,
            "{'argument_sources': True} (declared sources) needs the findings ledger, which "
            "this library does not have yet; give True",
        )
    if not isinstance(value, bool):
        raise refuse(OPTION, f"must be True or False, got {value!r}")
    if not value and ruled:
        raise refuse(
            OPTION,
            f"tool {ruled[0].name!r} rules arguments (ask_or_assume), so its calls go through "
            "the inputs layer; it cannot be switched off (they would run unruled)",
        )
    return True if value else None


def _ask_context(value: Any, given: Mapping[str, Any]) -> Any:
    if value is MISSING or value is None:
        return None
    if not callable(value):
        raise refuse(CONTEXT_OPTION, f"must be a function returning a dict, got {value!r}")
    if not _ruled(given) and given.get(OPTION) is not True:
        raise refuse(
            CONTEXT_OPTION,
            "is the context of the inputs layer's ask: give a tool with ask_or_assume (or "
            "inputs_layer=True) too",
        )
    return value


@dataclass(slots=True)
class _Binding:
    """One field of an ask: a tool's argument, left out by these calls."""

    field: str
    tool: str
    argument: str
    calls: list[str]


Fills = dict[str, dict[str, Any]]  # call id -> {"values": {...}, "refused": [...]}


def _fill(fills: Fills, call_id: str, argument: str, value: Any) -> None:
    fills.setdefault(call_id, {"values": {}, "refused": []})["values"][argument] = value


def _rows_of_batch(
    ctx: HookContext[InputsSettings], calls: list[dict[str, Any]]
) -> tuple[list[ArgumentFiled], Fills, list[_Binding]]:
    """The batch's rows, its default fills (call id -> argument -> value) and what must be
    asked (one field per tool argument, bound to every call that left it out)."""
    rows: list[ArgumentFiled] = []
    fills: Fills = {}
    asks: dict[tuple[str, str], _Binding] = {}
    for call in calls:
        tool = ctx.tool(call["name"])
        if tool is None or not tool.rules:
            continue
        arguments, problem = parse_arguments(call["arguments"])
        if problem is not None or not isinstance(arguments, dict):
            continue  # the dispatch refuses it: nothing to rule
        for rule in tool.rules:
            row = {"run_id": ctx.run_id, "tool": tool.name, "tool_call_id": call["id"]}
            if rule.argument in arguments:
                given = arguments[rule.argument]
                same = rule.has_assume and _same(given, rule.assume)
                rows.append(
                    ArgumentFiled(
                        **row, argument=rule.argument, source="default" if same else "model"
                    )
                )
            elif rule.has_assume:
                _fill(fills, call["id"], rule.argument, rule.assume)
                rows.append(
                    ArgumentFiled(**row, argument=rule.argument, source="default", filled=True)
                )
            else:
                key = (tool.name, rule.argument)
                if key not in asks:
                    asks[key] = _Binding(f"f{len(asks) + 1}", tool.name, rule.argument, [])
                asks[key].calls.append(call["id"])
                rows.append(ArgumentFiled(**row, argument=rule.argument, source="asked", round=1))
    return rows, fills, list(asks.values())


def _same(a: Any, b: Any) -> bool:
    try:
        return canon(a) == canon(b)
    except CanonicalFormError:
        return False


def _rule(ctx: HookContext[InputsSettings], tool: str, argument: str) -> ArgumentRule | None:
    found = ctx.tool(tool)
    return next((r for r in found.rules if r.argument == argument), None) if found else None


async def _ask(
    ctx: HookContext[InputsSettings],
    bindings: list[_Binding],
    round_: int,
    problems: Mapping[str, str],
) -> PauseRequest:
    """One question for the batch: a field per binding."""
    fields: dict[str, Any] = {}
    lines = []
    for binding in bindings:
        rule = _rule(ctx, binding.tool, binding.argument)
        assert rule is not None
        fields[binding.field] = rule.field_schema()
        why = problems.get(binding.field)
        lines.append(
            f"{binding.field}: {rule.ask} ({binding.argument} of {binding.tool})"
            + (f" The last answer was not valid: {why}." if why else "")
        )
    request = f"pause-{int(ctx.scope.get('pause_count', 0)) + 1}"
    context: dict[str, Any] = {
        RESERVED: {
            "ask": "arguments",
            "round": round_,
            "fields": [
                {"field": b.field, "tool": b.tool, "argument": b.argument, "calls": b.calls}
                for b in bindings
            ],
        }
    }
    context.update(await _host_context(ctx, request))
    question = "The tool calls need values only you can give. " + " ".join(lines)
    return PauseRequest(kind="input", question=question, fields=fields, context=context)


async def _host_context(ctx: HookContext[InputsSettings], request: str) -> dict[str, Any]:
    """``argument_ask_context()``'s object, asked through the decision port (a replay takes
    the recorded one and never calls it) and recorded; refused naming the option unless it
    is a JSON object without the reserved key."""
    host = ctx.options.ask_context
    if host is None:
        return {}
    recorded = ctx.decisions.recorded(AskContextGiven.kind, {"request": request})
    if recorded is None:
        given = host()
        if not isinstance(given, Mapping):
            raise refuse(CONTEXT_OPTION, f"must return a dict, returned {type(given).__name__}")
        try:
            context = to_json_value(dict(given), (CONTEXT_OPTION,))
        except CanonicalFormError as exc:
            raise refuse(CONTEXT_OPTION, f"returned a value that is not JSON ({exc})") from exc
        if RESERVED in context:
            raise refuse(CONTEXT_OPTION, f"may not use the reserved key {RESERVED!r}")
    else:
        context = recorded.get("context")
        if not isinstance(context, dict) or RESERVED in context:
            raise unreadable_decision(ctx, AskContextGiven.kind, "context")
    await ctx.emit(AskContextGiven(run_id=ctx.run_id, request=request, context=context))
    return dict(context)


async def _batch(
    ctx: HookContext[InputsSettings], calls: list[dict[str, Any]], resuming: bool
) -> PauseRequest | None:
    """File the batch's rows and fills; ask the person once for what only they can give."""
    if resuming:
        pending = ctx.scope.get("pending")
        if isinstance(pending, dict) and pending.get("kind") == "input":
            return await _answered(ctx, pending)
        return None  # (a consent resume: the batch's fills stand)
    rows, fills, asks = _rows_of_batch(ctx, calls)
    await _filed(ctx, rows, fills)
    _set_fills(ctx, fills)
    return await _ask(ctx, asks, 1, {}) if asks else None


async def _answered(
    ctx: HookContext[InputsSettings], pending: dict[str, Any]
) -> PauseRequest | None:
    """A resume of an input pause: bind each valid answer to its calls; ask again what is
    missing or invalid, or, after the last round, refuse those calls."""
    s = ctx.scope
    ours = _bindings(pending)
    round_ = ours["round"]
    answer = s.get("resume_answer")
    answer = answer if isinstance(answer, dict) else {}
    fills: Fills = {
        k: {"values": dict(v["values"]), "refused": list(v["refused"])}
        for k, v in (s.get(FILLS) or {}).items()
    }
    fields = pending.get("fields") or {}
    again: list[_Binding] = []
    problems: dict[str, str] = {}
    filed: list[ArgumentFiled] = []
    for bound in ours["fields"]:
        binding = _Binding(bound["field"], bound["tool"], bound["argument"], list(bound["calls"]))
        why = _invalid(answer, binding.field, fields.get(binding.field, {}))
        for call_id in binding.calls:
            if why is None:
                _fill(fills, call_id, binding.argument, answer[binding.field])
            elif round_ >= ROUNDS:
                fills.setdefault(call_id, {"values": {}, "refused": []})["refused"].append(
                    binding.argument
                )
            if why is None or round_ >= ROUNDS:
                filed.append(
                    ArgumentFiled(
                        run_id=ctx.run_id,
                        tool=binding.tool,
                        tool_call_id=call_id,
                        argument=binding.argument,
                        source="answered" if why is None else "refused",
                        filled=why is None,
                        round=round_,
                    )
                )
        if why is not None and round_ < ROUNDS:
            again.append(binding)
            problems[binding.field] = why
    await _filed(ctx, filed, fills)
    _set_fills(ctx, fills)
    if not again:
        return None
    renumbered = [_Binding(f"f{i + 1}", b.tool, b.argument, b.calls) for i, b in enumerate(again)]
    renamed = {f"f{i + 1}": problems[b.field] for i, b in enumerate(again)}
    return await _ask(ctx, renumbered, round_ + 1, renamed)


async def _filed(ctx: HookContext[InputsSettings], rows: list[ArgumentFiled], fills: Fills) -> None:
    """Each row recorded as its event, in order; with the answer layer armed, committed to
    ``argument_rows`` too (names and sources, and the value of a default the library filled
    in: the one value the answer's standing names that no call holds)."""
    for row in rows:
        await ctx.emit(row)
    if not ctx.options.rows or not rows:
        return
    committed = []
    for row in rows:
        entry = {
            "tool": row.tool,
            "tool_call_id": row.tool_call_id,
            "argument": row.argument,
            "source": row.source,
        }
        if row.filled and row.source == "default":
            entry["value"] = fills[row.tool_call_id]["values"][row.argument]
        committed.append(entry)
    ctx.scope.append(ROWS, committed)


def _bindings(pending: Mapping[str, Any]) -> dict[str, Any]:
    """The ask's own record (``context.agentfootprint``) as the paused run wrote it; a
    :class:`RunError` when it cannot be read (a redaction policy committed part of it and the
    resume has no vault to open it)."""
    context = pending.get("context")
    ours = context.get(RESERVED) if isinstance(context, dict) else None
    fields = ours.get("fields") if isinstance(ours, dict) else None
    readable = (
        isinstance(ours, dict)
        and type(ours.get("round")) is int
        and isinstance(fields, list)
        and all(
            isinstance(f, dict)
            and all(isinstance(f.get(k), str) for k in ("field", "tool", "argument"))
            and isinstance(f.get("calls"), list)
            and all(isinstance(c, str) for c in f["calls"])
            for f in fields
        )
    )
    if not readable:
        raise RunError(
            f"the pause {pending.get('request_id')!r} asked for arguments, but what it bound "
            "them to cannot be read (redacted: resume with the disclosure vault)"
        )
    assert isinstance(ours, dict)
    return ours


def _invalid(answer: Mapping[str, Any], name: str, schema: Any) -> str | None:
    """Why the answer to field ``name`` is not valid (None: it is)."""
    if name not in answer:
        return "no answer was given"
    try:
        validator = jsonschema.Draft202012Validator(schema if isinstance(schema, dict) else {})
        error = jsonschema.exceptions.best_match(validator.iter_errors(answer[name]))
    except jsonschema.exceptions.SchemaError:
        return "its question cannot be checked"
    return None if error is None else str(error.message)


def _set_fills(ctx: HookContext[InputsSettings], fills: Fills) -> None:
    s = ctx.scope
    if fills:
        s.set(FILLS, fills)
    elif FILLS in s:
        s.delete(FILLS)


def refusal(tool: str, arguments: list[str]) -> str:
    """What the model reads for a call refused for want of a valid answer."""
    return (
        f"Error: tool '{tool}' was not run: the user gave no valid value for "
        f"{', '.join(arguments)} after {ROUNDS} questions. Do not call it again without them."
    )


def note(filled: Mapping[str, Any], sources: Mapping[str, str]) -> str:
    said = "; ".join(
        f"{name} = {canon(v).decode()} ({sources[name]})" for name, v in filled.items()
    )
    return f"{NOTE_MARK}{said}.]"


class _InputsLayer(Feature[InputsSettings]):
    def settings(self, options: Mapping[str, Any]) -> InputsSettings:
        return InputsSettings(
            ask_context=options.get(CONTEXT_OPTION), rows=bool(options.get(ANSWER_LAYER))
        )

    async def batch_ready(
        self, ctx: HookContext[InputsSettings], calls: list[dict[str, Any]], resuming: bool
    ) -> PauseRequest | None:
        return await _batch(ctx, calls, resuming)

    async def tool_arguments(
        self, ctx: HookContext[InputsSettings], call: ToolResult
    ) -> dict[str, Any] | ToolOutcome | None:
        filled = (ctx.scope.get(FILLS) or {}).get(call.tool_call_id)
        if not filled or not isinstance(call.arguments, dict):
            return None
        if filled["refused"]:
            return ToolOutcome(content=refusal(call.tool, filled["refused"]), is_error=True)
        return {**call.arguments, **filled["values"]}

    async def tool_result_noted(
        self, ctx: HookContext[InputsSettings], result: ToolResult, outcome: ToolOutcome
    ) -> ToolOutcome:
        filled = (ctx.scope.get(FILLS) or {}).get(result.tool_call_id)
        if not filled or filled["refused"] or not isinstance(outcome.content, str):
            return outcome
        filled = filled["values"]
        tool = ctx.tool(result.tool)
        rules = {r.argument: r for r in tool.rules} if tool is not None else {}
        sources = {
            name: "the default"
            if rules.get(name) and rules[name].has_assume
            else "the user's answer"
            for name in filled
        }
        return ToolOutcome(
            content=outcome.content + note(filled, sources), is_error=outcome.is_error
        )

    def unnote(self, ctx: HookContext[InputsSettings], content: str) -> str:
        head, mark, tail = content.rpartition(NOTE_MARK)
        return head if mark and tail.endswith(".]") and "\n" not in tail else content


FEATURE = _InputsLayer(
    name="inputs-layer",
    summary="ruled arguments: defaults filled, the person asked once a batch, rows filed",
    order=60,
    options=(
        OptionSpec(
            name=OPTION,
            seed="inputsLayer",
            check=_inputs_layer,
            recorded=True,
            summary="the inputs layer (armed by any tool with ask_or_assume)",
        ),
        OptionSpec(
            name=CONTEXT_OPTION,
            seed="argumentAskContext",
            check=_ask_context,
            summary="the host's context for the inputs layer's ask",
        ),
    ),
    state_keys=(
        StateKey(name=FILLS, summary="the values filled into a batch's ruled arguments"),
        StateKey(
            name=ROWS,
            summary="with answer_layer armed: the rows, one per ruled argument per call, "
            "that the answer's standing reads",
        ),
    ),
    events=(ArgumentFiled, AskContextGiven),
    recorded_events=(ArgumentFiled, AskContextGiven),
    ports=("decisions",),
    pauses=True,
    active=lambda options: bool(options.get(OPTION)),
)
