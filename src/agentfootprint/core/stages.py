"""The agent loop's stages, each a named unit, and the chart they form.

State keys the stages write (the request is built from the first five):

``model``, ``params``, ``system_pieces``, ``history``, ``tool_schemas``
    what ``build_request`` projects (see ``verify/request.py``);
``agent``, ``user_message``, ``iteration``, ``last_response``, ``usage``,
``final_answer``, ``stopped_early``
    the loop's own bookkeeping.

Dynamic mode (default): seed -> system-prompt -> messages -> tools -> call-llm
-> route; ``tool-calls`` loops back to system-prompt, ``final`` goes to
prepare-final -> break-final. Classic mode runs system-prompt and tools once
and loops back to messages only.
"""

from __future__ import annotations

import time
from typing import Any

import orjson

from agentfootprint.core.chart import Chart, Stage
from agentfootprint.core.events import (
    ArgsInvalid,
    IterationEnd,
    IterationStart,
    LLMEnd,
    LLMStart,
    ToolEnd,
    ToolStart,
    TurnEnd,
    TurnStart,
)
from agentfootprint.core.providers.base import LLMResponse, ToolCall, Usage
from agentfootprint.core.run import (
    ReplayInput,
    StageContext,
    exception_text,
    structured_details,
)
from agentfootprint.core.scope import to_json_value
from agentfootprint.core.tools import (
    ResultRoom,
    ToolContext,
    ToolOutcome,
    call_tool,
    describe_type,
    result_text,
    teaching_message,
    validate_arguments,
)
from agentfootprint.errors import (
    CanonicalFormError,
    ProviderCallError,
    RecordTooLargeError,
    ReservedKeyError,
    RunError,
)
from agentfootprint.store.redaction import refuse_reserved_key
from agentfootprint.verify.canonical import MAX_SAFE_INT, canon
from agentfootprint.verify.request import build_request

__all__ = ["build_chart"]


async def seed(ctx: StageContext) -> None:
    """Start the turn: the user message joins the history; counters reset."""
    run, s = ctx.run, ctx.scope
    config = run.config
    message = run.input_message
    content = message
    if isinstance(message, ReplayInput):  # a replay restores both recorded forms as they were
        message, content = message.user_message, message.content
    s.set("agent", {"id": config.id, "name": config.name})
    s.set("model", config.model)
    s.set("params", config.params)
    s.append("history", [{"role": "user", "content": content}])
    s.set("user_message", message)
    s.set("iteration", 1)
    s.set("usage", {"input": 0, "output": 0, "calls": 0})
    for key in ("final_answer", "stopped_early", "last_response"):
        if key in s:
            s.delete(key)
    await ctx.emit(
        TurnStart(run_id=run.run_id, conversation_id=run.conversation_id, message=message)
    )


async def system_prompt(ctx: StageContext) -> None:
    """The system-prompt slot: one piece per configured system string."""
    ctx.scope.set(
        "system_pieces", [{"source": "base", "text": text} for text in ctx.run.config.system]
    )


async def messages(ctx: StageContext) -> None:
    """The messages slot: v1 serves the whole history, so it commits nothing."""


async def tools(ctx: StageContext) -> None:
    """The tools slot: the schemas served, in registration order."""
    ctx.scope.set("tool_schemas", [tool.schema for tool in ctx.run.config.tools])


async def call_llm(ctx: StageContext) -> None:
    """Build the request from committed state, receipt it, send it, commit the reply."""
    run, s = ctx.run, ctx.scope
    iteration = s.get("iteration")
    request = build_request(s.committed)  # what the provider is sent (live values)
    call = run.calls
    await ctx.emit(IterationStart(run_id=run.run_id, iteration=iteration))
    await ctx.emit(
        LLMStart(
            run_id=run.run_id,
            iteration=iteration,
            call=call,
            model=request["model"],
            messages=len(request["messages"]),
            tools=len(request["tools"]),
            temperature=request["params"].get("temperature"),
        )
    )
    if run.config.record_receipt or run.replay is not None:
        # the receipt hashes the recorded (committed) form
        recorded = request if run.committed is s.committed else build_request(run.committed)
        digests = run.hasher.digests(recorded)
        if run.replay is not None:  # a divergent request is never served, nor receipted
            run.replay.check_receipt(call, digests, recorded)
        if run.config.record_receipt:
            ctx.mint_receipt(digests)
    run.calls += 1
    started = time.perf_counter()
    try:
        response = await run.provider.complete(request)
    except RunError as exc:
        exc.run_id = run.run_id
        raise
    except Exception as exc:
        raise ProviderCallError(
            f"provider {getattr(run.provider, 'name', '?')!r} failed on call {call}: "
            + exception_text(exc),
            run_id=run.run_id,
        ) from exc
    if not isinstance(response, LLMResponse):
        raise ProviderCallError(
            f"provider returned {type(response).__name__}, not LLMResponse", run_id=run.run_id
        )
    replayed = run.replay is not None and run.replay.replaying(call)
    # a replayed reply is the recorded one (commitments where values were redacted)
    malformed = None if replayed else _malformed(response)
    if malformed is not None:
        raise ProviderCallError(f"provider reply is malformed: {malformed}", run_id=run.run_id)
    record = response.to_state()
    try:
        if not replayed:  # a recording may hold commitments
            refuse_reserved_key(record, "reply")
        s.set("last_response", record)
    except ReservedKeyError as exc:
        raise ProviderCallError(
            f"provider reply cannot be recorded: {exc}", run_id=run.run_id
        ) from exc
    except RecordTooLargeError as exc:
        raise ProviderCallError(
            f"provider reply is too large to record: {exc}", run_id=run.run_id
        ) from exc
    except CanonicalFormError as exc:
        raise ProviderCallError(f"provider reply is not JSON: {exc}", run_id=run.run_id) from exc
    usage = s.get("usage")
    s.set(
        "usage",
        {
            "input": usage["input"] + response.usage.input,
            "output": usage["output"] + response.usage.output,
            "calls": usage["calls"] + 1,
        },
    )
    await ctx.emit(
        LLMEnd(
            run_id=run.run_id,
            iteration=iteration,
            call=call,
            content=response.content,
            tool_calls=len(response.tool_calls),
            usage=dict(record["usage"]),
            stop_reason=response.stop_reason,
            duration_ms=(time.perf_counter() - started) * 1000,
        )
    )


def _malformed(response: LLMResponse) -> str | None:
    """What of a reply is not the type the loop and the log need (the dataclasses do not
    check their fields: an adapter's bug is named here, not met as an AttributeError)."""
    if not isinstance(response.content, str):
        return f"content is {type(response.content).__name__}, not str"
    if not isinstance(response.stop_reason, str):
        return f"stop_reason is {type(response.stop_reason).__name__}, not str"
    usage = response.usage
    if not isinstance(usage, Usage) or not all(
        type(n) is int and 0 <= n <= MAX_SAFE_INT for n in (usage.input, usage.output)
    ):
        return "usage must be Usage(input=..., output=...) with integers from 0 to 2**53 - 1"
    if not isinstance(response.tool_calls, tuple | list):
        return f"tool_calls is {type(response.tool_calls).__name__}, not a tuple of ToolCall"
    for index, call in enumerate(response.tool_calls):
        if not isinstance(call, ToolCall):
            return f"tool_calls[{index}] is {type(call).__name__}, not ToolCall"
        if not isinstance(call.id, str) or not isinstance(call.name, str):
            return f"tool_calls[{index}] id and name must be strings"
    return None


async def route(ctx: StageContext) -> str:
    """Decide: run the requested tools, or finish (also when the budget is spent)."""
    s = ctx.scope
    response = s.get("last_response")
    iteration = s.get("iteration")
    if not response["tool_calls"]:
        return "final"
    if iteration >= ctx.run.config.max_iterations:
        s.set(
            "stopped_early",
            {
                "reason": "max-iterations",
                "iteration": iteration,
                "pending_tool_calls": len(response["tool_calls"]),
            },
        )
        return "final"
    return "tool-calls"


def _parse_arguments(raw: Any) -> tuple[Any, str | None]:
    if isinstance(raw, str):
        try:
            return orjson.loads(raw), None
        except orjson.JSONDecodeError as exc:
            return None, f"the arguments are not valid JSON ({exc})"
    return raw, None


async def _one_call(
    ctx: StageContext, call: dict[str, Any], iteration: int, room: ResultRoom
) -> ToolOutcome:
    run = ctx.run
    name, call_id = call["name"], call["id"]
    await ctx.emit(
        ToolStart(
            run_id=run.run_id,
            iteration=iteration,
            tool_call_id=call_id,
            tool=name,
            arguments=call["arguments"],
        )
    )
    started = time.perf_counter()
    # a replay checks the call against the recording's, in order, before anything runs
    expected = run.replay.tool_call(call) if run.replay is not None else None
    outcome = await _dispatch(ctx, call, iteration, expected)
    if expected is None:  # a replayed answer was recorded once already: it fits
        outcome = room.admit(name, outcome)
    await ctx.emit(
        ToolEnd(
            run_id=run.run_id,
            iteration=iteration,
            tool_call_id=call_id,
            tool=name,
            result=outcome.content,
            is_error=outcome.is_error,
            duration_ms=(time.perf_counter() - started) * 1000,
        )
    )
    return outcome


async def _dispatch(
    ctx: StageContext, call: dict[str, Any], iteration: int, expected: Any
) -> ToolOutcome:
    """Run the tool, or answer without running it; a replay answers from the recording
    (``expected``, the recorded call) and never runs a tool."""
    run = ctx.run
    tool = run.config.tool(call["name"])
    arguments: Any = None
    refusal: ToolOutcome | None = None
    if tool is None:
        known = ", ".join(t.name for t in run.config.tools) or "none"
        refusal = ToolOutcome(
            content=f"Error: there is no tool named '{call['name']}'. Available tools: {known}.",
            is_error=True,
        )
    else:
        arguments, problem = _parse_arguments(call["arguments"])
        if problem is not None:
            refusal = ToolOutcome(
                content=f"Error: tool '{tool.name}' was not run: {problem}.", is_error=True
            )
        else:
            refusal = await _validate(ctx, tool, call, arguments, iteration)
    if refusal is not None:
        if expected is not None:
            run.replay.not_run(expected, refusal.content)
        return refusal
    assert tool is not None
    if expected is not None:  # a replay answers from the recording: no side effects
        content, is_error = run.replay.answer(expected)
        return ToolOutcome(content=content, is_error=is_error)
    tool_ctx = ToolContext(
        run_id=run.run_id,
        conversation_id=run.conversation_id,
        tool_call_id=call["id"],
        iteration=iteration,
        tool=tool.name,
    )
    try:
        value = await call_tool(tool, arguments, tool_ctx)
    except Exception as exc:
        return _raised(tool.name, exc)
    return result_text(tool.name, value)


async def _validate(
    ctx: StageContext, tool: Any, call: dict[str, Any], arguments: Any, iteration: int
) -> ToolOutcome | None:
    """Argument validation by mode: the teaching message when ``enforce`` refuses."""
    run = ctx.run
    mode = run.config.tool_arg_validation
    if mode != "off":
        issues = validate_arguments(tool, arguments)
        if issues:
            await ctx.emit(
                ArgsInvalid(
                    run_id=run.run_id,
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
    run, s = ctx.run, ctx.scope
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
    await ctx.emit(IterationEnd(run_id=run.run_id, iteration=iteration))


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


def _served_call(call: dict[str, Any]) -> dict[str, Any]:
    arguments, problem = _parse_arguments(call["arguments"])
    if problem is not None:  # keep what the model sent, as text
        arguments = call["arguments"]
    try:
        arguments = to_json_value(arguments)
    except CanonicalFormError:
        arguments = describe_type(arguments)
    return {"id": call["id"], "name": call["name"], "arguments": arguments}


async def prepare_final(ctx: StageContext) -> None:
    """The answer joins the history and becomes the turn's result."""
    run, s = ctx.run, ctx.scope
    response = s.get("last_response")
    iteration = s.get("iteration")
    answer = response["content"]
    s.append("history", [{"role": "assistant", "content": answer}])
    s.set("final_answer", answer)
    await ctx.emit(IterationEnd(run_id=run.run_id, iteration=iteration))
    await ctx.emit(
        TurnEnd(
            run_id=run.run_id,
            answer=answer,
            iterations=iteration,
            stopped_early=s.get("stopped_early"),
        )
    )


async def break_final(ctx: StageContext) -> None:
    """The end of the chart: commits nothing, stops the walk."""


def build_chart(react_mode: str) -> Chart:
    """The loop's chart for ``react_mode`` (built once per agent)."""
    loop_target = "system-prompt" if react_mode == "dynamic" else "messages"
    if react_mode == "dynamic":
        head = [
            Stage(name="seed", fn=seed, next="system-prompt", description="start the turn"),
            Stage(name="system-prompt", fn=system_prompt, next="messages"),
            Stage(name="messages", fn=messages, next="tools"),
            Stage(name="tools", fn=tools, next="call-llm"),
            Stage(name="call-llm", fn=call_llm, next="route"),
        ]
    else:
        head = [
            Stage(name="seed", fn=seed, next="system-prompt", description="start the turn"),
            Stage(name="system-prompt", fn=system_prompt, next="tools"),
            Stage(name="tools", fn=tools, next="messages"),
            Stage(name="messages", fn=messages, next="call-llm"),
            Stage(name="call-llm", fn=call_llm, next="route"),
        ]
    tail = [
        Stage(
            name="route",
            fn=route,
            kind="decider",
            branches={"tool-calls": "tool-calls", "final": "prepare-final"},
        ),
        Stage(name="tool-calls", fn=tool_calls, next=loop_target),
        Stage(name="prepare-final", fn=prepare_final, next="break-final"),
        Stage(name="break-final", fn=break_final, next=None),
    ]
    return Chart([*head, *tail], entry="seed")
