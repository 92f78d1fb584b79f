"""Tool dispatch: each requested tool run in order, through the run's tools port.

A call is checked before it runs (no such tool, arguments not JSON, arguments refused by
validation in ``enforce`` mode: answered without running), then the ``tool_permission``
hooks of active features may answer it instead (a permission checker's denial), then the
``tool_ready`` hooks may answer it, grant its context something (a credential) or pause
the run at it (a question for a person). Before any call of a batch runs, ``batch_ready``
hooks may pause the run on a question for the whole batch (the inputs layer's ask). Its
outcome passes the ``tool_result`` hooks of active features (before ``tool_end``: what the
event and the model both carry) and then the ``tool_result_noted`` hooks (after it). The turn
and its results join the history as one write.

A batch that pauses joins the history with the results of the calls before the paused one,
and the run closes ``paused`` on the question (``pending``, docs/log-format.md section
5.9). The run that answers it enters at the ``resume`` stage, which commits the answer, and
then finishes the batch here from the paused call on.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from agentfootprint.errors import CanonicalFormError
from agentfootprint.features import tool_teardown
from agentfootprint.features.base import (
    MISSING,
    Feature,
    Options,
    OptionSpec,
    PauseRequest,
    StageSpec,
    StateKey,
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
#: the first stage of a run that answers a pause: it commits the answer
RESUME_STAGE = "resume"


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
) -> ToolOutcome | PauseRequest:
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
    dispatched, arguments, ran = await _dispatch(ctx, call, iteration, expected)
    if isinstance(dispatched, PauseRequest):
        return dispatched  # the call waits for a person: it has no outcome in this run
    outcome = dispatched
    result = ToolResult(
        tool=name,
        tool_call_id=call_id,
        arguments=arguments,
        iteration=iteration,
        ran=ran,
        recorded=expected is not None,
    )
    for hook in hooks_at(ctx, Feature.tool_result):
        outcome = await hook(ctx, result, outcome)
    if expected is None:  # (a recorded answer was recorded once already: it fits)
        # measured as the hooks left it: a result placed in the artifact store or capped is
        # recorded as its ticket or marker, whatever size the tool returned
        outcome = room.admit(name, outcome)
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
) -> tuple[ToolOutcome | PauseRequest, Any, bool]:
    """Run the tool, or answer without running it; ``expected`` (the recorded call) means
    the tools port answers and no tool runs. Returns the outcome (or the pause a
    ``tool_ready`` hook asked for), the parsed arguments and whether the tool was run (or,
    replayed, would have been)."""
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
            for given in hooks_at(ctx, Feature.tool_arguments):
                proposed = ToolResult(
                    tool=tool.name,
                    tool_call_id=call["id"],
                    arguments=arguments,
                    iteration=iteration,
                    ran=False,
                )
                changed = await given(ctx, proposed)
                if isinstance(changed, ToolOutcome):
                    # a feature's answer, as a permission denial is (a replay's feature
                    # answers from the same state): the call is not run
                    return changed, arguments, False
                if changed is not None:
                    arguments = changed
            refusal = await _validate(ctx, tool, call, arguments, iteration)
    if refusal is not None:
        if expected is not None:
            tools.not_run(expected, refusal.content)
        return refusal, arguments, False
    assert tool is not None
    asked = ToolResult(
        tool=tool.name,
        tool_call_id=call["id"],
        arguments=arguments,
        iteration=iteration,
        ran=False,
        recorded=expected is not None,
    )
    for hook in hooks_at(ctx, Feature.tool_permission):
        # a denial answers the call (a replay takes the original's recorded decision, so a
        # call the original denied is denied again: its recorded result is that denial)
        denied = await hook(ctx, asked)
        if denied is not None:
            return denied, arguments, False
    grant: dict[str, Any] = {}
    for ready in hooks_at(ctx, Feature.tool_ready):
        answered = await ready(ctx, asked, grant)
        if isinstance(answered, PauseRequest):
            if expected is not None:  # the original must have paused here too
                tools.not_run(expected, "(paused: " + answered.question + ")")
            return answered, arguments, False
        if answered is not None:  # (a replay's hook answers from its recorded decision)
            return answered, arguments, False
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
        credential=grant.get("credential"),
        time=grant.get("time"),
        **({"artifacts": grant["artifacts"]} if "artifacts" in grant else {}),
    )
    await run.flush()  # the reply that asked for this call is durable before the tool acts
    # the tool's own copy: what it does to its arguments never reaches the history or what
    # the features compare (the arguments may be the reply's, in state); a ref it wants is
    # the resolved artifact in that copy
    own = detached(arguments)
    if grant.get("wanted"):
        own.update(grant["wanted"])
    try:
        value = await call_tool(
            tool, own, tool_ctx, grace=tool_teardown.exit_grace(ctx.config.options)
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
    """Run each requested tool in order; the turn and its results join the history. A run
    that answers a pause finishes the paused batch: from the paused call on, after the
    results the paused run recorded."""
    s = ctx.scope
    response = s.get("last_response")
    iteration = s.get("iteration")
    calls = response["tool_calls"]
    resuming = ctx.run.resume_answer is not None and "pending" in s
    done = results_recorded(s.get("history")) if resuming else 0
    room = ResultRoom()  # the results are recorded together, in one body
    outcomes: list[ToolOutcome] = []
    paused: PauseRequest | None = None
    for ready in hooks_at(ctx, Feature.batch_ready):  # a question for the whole batch
        paused = await ready(ctx, calls[done:], resuming)
        if paused is not None:
            break
    for call in calls[done:] if paused is None else ():
        outcome = await _one_call(ctx, call, iteration, room)
        if isinstance(outcome, PauseRequest):
            paused = outcome
            break
        outcomes.append(outcome)
    turn: list[dict[str, Any]] = []
    if not resuming:
        turn.append(
            {
                "role": "assistant",
                "content": response["content"],
                "tool_calls": [_served_call(c) for c in calls],
            }
        )
    for call, outcome in zip(calls[done:], outcomes, strict=False):
        message: dict[str, Any] = {
            "role": "tool",
            "tool_call_id": call["id"],
            "name": call["name"],
            "content": outcome.content,
        }
        if outcome.is_error:
            message["is_error"] = True
        turn.append(message)
    if turn:
        s.append("history", turn)
    if paused is not None:
        _pause(ctx, calls[done + len(outcomes)], paused)
        return
    if resuming:  # the question is answered and its batch finished
        s.delete("pending")
        s.delete("resume_answer")
    s.set("iteration", iteration + 1)
    if ctx.listens(IterationEnd.kind):
        await ctx.emit(IterationEnd(run_id=ctx.run_id, iteration=iteration))


def results_recorded(history: Any) -> int:
    """How many results of the last assistant turn the history holds (the calls a paused
    batch answered before it paused; a replay reads the recorded history the same way)."""
    count = 0
    messages = history if isinstance(history, Sequence) and not isinstance(history, str) else ()
    for message in reversed(messages):
        if not isinstance(message, dict) or message.get("role") != "tool":
            break
        count += 1
    return count


def _pause(ctx: StageContext, call: dict[str, Any], request: PauseRequest) -> None:
    """Close the run ``paused`` at ``call``: the question as ``pending``, named by a request
    id unique in the conversation (the count of its pauses, kept in state)."""
    s = ctx.scope
    if "resume_answer" in s:  # the answer was used; the next resume writes its own
        s.delete("resume_answer")
    number = int(s.get("pause_count", 0)) + 1
    s.set("pause_count", number)
    pending: dict[str, Any] = {
        "request_id": f"pause-{number}",
        "kind": request.kind,
        "tool_call_id": call["id"],
        "tool": call["name"],
        "question": request.question,
    }
    if request.fields is not None:
        pending["fields"] = to_json_value(request.fields)
    if request.context is not None:
        pending["context"] = to_json_value(request.context)
    if request.service is not None:
        pending["service"] = request.service
    ctx.pause(pending, request.private)


#: the members of ``pending`` (docs/log-format.md section 5.9): read as structure by the
#: verifier, so a redaction policy of an agent that may pause may not name them
PENDING_MEMBERS = (
    "request_id",
    "kind",
    "tool_call_id",
    "tool",
    "question",
    "fields",
    "context",
    "service",
)


def refuse_pending_members(policy: Any) -> None:
    """Refuse (``UsageError`` naming ``redact``) a policy that would commit a member of a
    pause's ``pending`` record (the record would not verify)."""
    matches = policy.document.matcher()
    for member in PENDING_MEMBERS:
        if matches(member):
            raise refuse(
                "redact",
                f"the policy matches {member!r}, a member of the question a paused run "
                "records (pending, read as structure), and this agent may pause "
                "(credentials=...); name other keys",
            )


def abandon_pause(ctx: StageContext) -> None:
    """A new turn on a paused run that abandons its question (``run(..., abandon=True)``):
    each call of the paused batch still without a result gets one saying it was not run
    (a vendor refuses a history whose tool calls lack results), and ``pending`` goes."""
    s = ctx.scope
    pending = s.get("pending")
    if pending is None:
        return
    calls = s.get("last_response")["tool_calls"]
    done = results_recorded(s.get("history"))
    waiting = [
        {
            "role": "tool",
            "tool_call_id": call["id"],
            "name": call["name"],
            "content": f"Error: tool '{call['name']}' was not run: the run paused at "
            f"{'it' if call['id'] == pending['tool_call_id'] else 'an earlier call'} to ask "
            "a person, and the question was abandoned.",
            "is_error": True,
        }
        for call in calls[done:]
    ]
    if waiting:
        s.append("history", waiting)
    s.delete("pending")
    if "resume_answer" in s:
        s.delete("resume_answer")


async def resume(ctx: StageContext) -> None:
    """A resume's first stage: the person's answer is committed (``resume_answer``)."""
    answer = ctx.run.resume_answer
    if answer is None:
        raise RuntimeError("the resume stage ran in a run that answers no pause")
    ctx.scope.set("resume_answer", answer)
    for hook in hooks_at(ctx, Feature.resumed):
        await hook(ctx)


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
    stages=(
        StageSpec(name=TOOL_CALLS_STAGE, fn=tool_calls, phase="tool", order=0),
        StageSpec(
            name=RESUME_STAGE,
            fn=resume,
            phase="resume",
            order=0,
            description="commit a person's answer to the run's pause",
        ),
    ),
    state_keys=(
        StateKey(
            name="pending",
            structure=True,
            summary="the question a paused run waits on (log format v5)",
        ),
        StateKey(name="resume_answer", summary="a person's answer to a pause"),
        StateKey(name="pause_count", structure=True, summary="pauses in the conversation so far"),
    ),
    events=(ToolStart, ToolEnd, ArgsInvalid),
    recorded_events=(ArgsInvalid,),
    ports=("tools",),
)
