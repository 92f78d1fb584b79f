"""Tool dispatch: each requested tool run in order, through the run's tools port.

A call is checked before it runs (no such tool, arguments not JSON, arguments refused by
validation in ``enforce`` mode: answered without running), then the ``tool_permission``
hooks of active features may answer it instead (a permission checker's denial). Its
outcome passes the ``tool_result`` hooks of active features (before ``tool_end``: what the
event and the model both carry) and then the ``tool_result_noted`` hooks (after it). The
turn and its results join the history as one write.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import orjson

from agentfootprint.errors import CanonicalFormError
from agentfootprint.features import tool_teardown
from agentfootprint.features.base import (
    MISSING,
    Feature,
    Options,
    OptionSpec,
    StageSpec,
    ToolResult,
    refuse,
)
from agentfootprint.features.registry import hooks_at
from agentfootprint.logformat.canonical import canon, parse
from agentfootprint.runtime.events import ArgsInvalid, IterationEnd, ToolEnd, ToolStart, detached
from agentfootprint.runtime.run import StageContext, exception_text, structured_details
from agentfootprint.runtime.scope import to_json_value
from agentfootprint.runtime.tools import (
    ResultRoom,
    ToolContext,
    ToolOutcome,
    call_tool,
    describe_type,
    result_text,
    teaching_message,
    validate_arguments,
)

#: the stage that runs a reply's tool calls (the replay reads their results at its commit)
TOOL_CALLS_STAGE = "tool-calls"


def _validation(value: Any, given: Mapping[str, Any]) -> str:
    value = "enforce" if value is MISSING else value
    if value not in ("enforce", "warn", "off"):
        raise refuse(
            "tool_arg_validation", f"must be one of 'enforce', 'warn', 'off', got {value!r}"
        )
    return str(value)


def parse_arguments(raw: Any) -> tuple[Any, str | None]:
    """The model's arguments text read as the log reads JSON (``verify.canonical.parse``): a
    number is a double, so an integer token beyond +-(2**53 - 1) is the double it denotes
    (what the log can record, and what a replay reads back from canonical text that wrote
    an integral double such as ``1e16`` as its digits); ``(None, why)`` for text that is not
    JSON."""
    if isinstance(raw, str):
        try:
            return parse(raw), None
        except orjson.JSONDecodeError as exc:
            return None, f"the arguments are not valid JSON ({exc})"
    return raw, None


async def _one_call(
    ctx: StageContext, call: dict[str, Any], iteration: int, room: ResultRoom
) -> ToolOutcome:
    name, call_id = call["name"], call["id"]
    if ctx.listens(ToolStart.kind):
        await ctx.emit(
            ToolStart(
                run_id=ctx.run_id,
                iteration=iteration,
                tool_call_id=call_id,
                tool=name,
                arguments=call["arguments"],
            )
        )
    started = time.perf_counter()
    # the tools port sees the call before anything runs (a replay checks it, in order)
    expected = ctx.tools.expect(call)
    outcome, arguments, ran = await _dispatch(ctx, call, iteration, expected)
    if expected is None:  # a recorded answer was recorded once already: it fits
        outcome = room.admit(name, outcome)
    result = ToolResult(
        tool=name, tool_call_id=call_id, arguments=arguments, iteration=iteration, ran=ran
    )
    for hook in hooks_at(ctx, Feature.tool_result):
        outcome = await hook(ctx, result, outcome)
    if ctx.listens(ToolEnd.kind):
        await ctx.emit(
            ToolEnd(
                run_id=ctx.run_id,
                iteration=iteration,
                tool_call_id=call_id,
                tool=name,
                result=outcome.content,
                is_error=outcome.is_error,
                duration_ms=(time.perf_counter() - started) * 1000,
            )
        )
    for hook in hooks_at(ctx, Feature.tool_result_noted):
        outcome = await hook(ctx, result, outcome)
    return outcome


async def _dispatch(
    ctx: StageContext, call: dict[str, Any], iteration: int, expected: Any
) -> tuple[ToolOutcome, Any, bool]:
    """Run the tool, or answer without running it; ``expected`` (the recorded call) means
    the tools port answers and no tool runs. Returns the outcome, the parsed arguments
    and whether the tool was run (or, replayed, would have been)."""
    tools = ctx.tools
    tool = ctx.config.tool(call["name"])
    arguments: Any = None
    refusal: ToolOutcome | None = None
    if tool is None:
        known = ", ".join(t.name for t in ctx.config.tools) or "none"
        refusal = ToolOutcome(
            content=f"Error: there is no tool named '{call['name']}'. Available tools: {known}.",
            is_error=True,
        )
    else:
        arguments, problem = parse_arguments(call["arguments"])
        if problem is not None:
            refusal = ToolOutcome(
                content=f"Error: tool '{tool.name}' was not run: {problem}.", is_error=True
            )
        else:
            refusal = await _validate(ctx, tool, call, arguments, iteration)
    if refusal is not None:
        if expected is not None:
            tools.not_run(expected, refusal.content)
        return refusal, arguments, False
    assert tool is not None
    asked = ToolResult(
        tool=tool.name, tool_call_id=call["id"], arguments=arguments, iteration=iteration, ran=False
    )
    for hook in hooks_at(ctx, Feature.tool_permission):
        # a denial answers the call (a replay takes the original's recorded decision, so a
        # call the original denied is denied again: its recorded result is that denial)
        denied = await hook(ctx, asked)
        if denied is not None:
            return denied, arguments, False
    if expected is not None:  # answered from the recording: no side effects
        content, is_error = tools.answer(expected)
        if isinstance(content, str):  # what the tool returned, before the notes on it
            for unnote in reversed(hooks_at(ctx, Feature.unnote)):
                content = unnote(ctx, content)
        return ToolOutcome(content=content, is_error=is_error), arguments, True
    run = ctx.run  # the tool acts within the run: its conversation, teardowns and writer
    tool_ctx = ToolContext(
        run_id=run.run_id,
        conversation_id=run.conversation_id,
        tool_call_id=call["id"],
        iteration=iteration,
        tool=tool.name,
        teardown_sink=tool_teardown.registrar(run, tool.name, call["id"]),
    )
    await run.flush()  # the reply that asked for this call is durable before the tool acts
    try:
        # the tool's own copy: what it does to its arguments never reaches the history or
        # what the features compare (the arguments may be the reply's, in state)
        value = await call_tool(
            tool, detached(arguments), tool_ctx, grace=tool_teardown.exit_grace(ctx.config.options)
        )
    except Exception as exc:
        return _raised(tool.name, exc), arguments, True
    return result_text(tool.name, value), arguments, True


async def _validate(
    ctx: StageContext, tool: Any, call: dict[str, Any], arguments: Any, iteration: int
) -> ToolOutcome | None:
    """Argument validation by mode: the teaching message when ``enforce`` refuses."""
    mode = ctx.config.tool_arg_validation
    if mode != "off":
        issues = validate_arguments(tool, arguments)
        if issues:
            await ctx.emit(
                ArgsInvalid(
                    run_id=ctx.run_id,
                    iteration=iteration,
                    tool_call_id=call["id"],
                    tool=tool.name,
                    mode=mode,
                    issues=issues,
                )
            )
            if mode == "enforce":
                return ToolOutcome(content=teaching_message(tool, issues), is_error=True)
    return None


async def tool_calls(ctx: StageContext) -> None:
    """Run each requested tool in order; the turn and its results join the history."""
    s = ctx.scope
    response = s.get("last_response")
    iteration = s.get("iteration")
    room = ResultRoom()  # the results are recorded together, in one body
    outcomes = [await _one_call(ctx, call, iteration, room) for call in response["tool_calls"]]
    assistant = {
        "role": "assistant",
        "content": response["content"],
        "tool_calls": [_served_call(c) for c in response["tool_calls"]],
    }
    results = []
    for call, outcome in zip(response["tool_calls"], outcomes, strict=True):
        message: dict[str, Any] = {
            "role": "tool",
            "tool_call_id": call["id"],
            "name": call["name"],
            "content": outcome.content,
        }
        if outcome.is_error:
            message["is_error"] = True
        results.append(message)
    s.append("history", [assistant, *results])
    s.set("iteration", iteration + 1)
    if ctx.listens(IterationEnd.kind):
        await ctx.emit(IterationEnd(run_id=ctx.run_id, iteration=iteration))


def _raised(tool_name: str, exc: Exception) -> ToolOutcome:
    """A tool's exception as its error result. Structured data the exception carries (one
    dict or list argument) is given as JSON, so its keys stay visible to redaction."""
    details = structured_details(exc)
    if details is not None:
        error = {"tool": tool_name, "type": type(exc).__name__, "details": details}
        return ToolOutcome(content=canon({"error": error}).decode("utf-8"), is_error=True)
    return ToolOutcome(
        content=f"Error: tool '{tool_name}' raised " + exception_text(exc),
        is_error=True,
    )


def recordable_arguments(arguments: Any) -> Any:
    """Parsed tool-call arguments as the log may hold them: JSON, or the name of their type."""
    try:
        return to_json_value(arguments)
    except CanonicalFormError:
        return describe_type(arguments)


def _served_call(call: dict[str, Any]) -> dict[str, Any]:
    arguments, problem = parse_arguments(call["arguments"])
    if problem is not None:  # keep what the model sent, as text
        arguments = call["arguments"]
    return {"id": call["id"], "name": call["name"], "arguments": recordable_arguments(arguments)}


FEATURE: Feature[Options] = Feature(
    name="tool-dispatch",
    summary="tool calls run in order, checked first, results into the history",
    order=70,
    options=(
        OptionSpec(
            name="tool_arg_validation",
            seed="toolArgValidation",
            check=_validation,
            recorded=True,
            summary="JSON Schema check of arguments",
        ),
    ),
    stages=(StageSpec(name=TOOL_CALLS_STAGE, fn=tool_calls, phase="tool", order=0),),
    events=(ToolStart, ToolEnd, ArgsInvalid),
    recorded_events=(ArgsInvalid,),
    ports=("tools",),
)
