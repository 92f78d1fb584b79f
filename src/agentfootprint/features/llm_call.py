"""The model call: the request built from committed state, receipted, served, answered.

The request is :func:`~agentfootprint.logformat.request.build_request` of committed state under
the run's projection, and nothing else: hooks see its JSON after it was built and may add
fields to the ``llm_start`` event, never to the request. The reply comes through the run's
model port (the provider live; the recording in a replay).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from agentfootprint.errors import (
    CanonicalFormError,
    ModelRequestsBlocked,
    ProviderCallError,
    ProviderError,
    RecordTooLargeError,
    ReservedKeyError,
    RunError,
)
from agentfootprint.features.base import (
    MISSING,
    Feature,
    Options,
    OptionSpec,
    StageSpec,
    StateKey,
    boolean,
    refuse,
)
from agentfootprint.features.registry import hooks_at
from agentfootprint.logformat.canonical import MAX_SAFE_INT, canon
from agentfootprint.logformat.hashing import hexdigest
from agentfootprint.logformat.request import build_request
from agentfootprint.runtime.events import IterationStart, LLMEnd, LLMStart, LLMToken, WireExchange
from agentfootprint.runtime.provider import LLMResponse, Request, ToolCall, Usage, WireRecord
from agentfootprint.runtime.run import RunState, StageContext, exception_text
from agentfootprint.store.redaction import refuse_reserved_key

NAME = "llm-call"


def _provider(value: Any, given: Mapping[str, Any]) -> Any:
    if value is MISSING or value is None or not callable(getattr(value, "complete", None)):
        raise refuse(
            "provider",
            "an object with an async complete(request) method is required "
            "(e.g. agentfootprint.MockProvider([...]))",
        )
    return value


def assembled(pieces: Any) -> str:
    """The assembled system prompt from pieces as served or recorded: their texts joined by
    a blank line (a text that is not a string, such as a commitment, as its JSON)."""
    texts = []
    for piece in pieces:
        text = piece.get("text") if isinstance(piece, dict) else piece
        texts.append(text if isinstance(text, str) else canon(text).decode("utf-8"))
    return "\n\n".join(texts)


def system_prompt_text(served: Mapping[str, Any]) -> str:
    """The assembled system prompt of a served request."""
    return assembled(served["system"])


class PromptChars:
    """``len(system_prompt_text(served))``, kept for the piece list it was measured on
    (committed lists are replaced, never mutated: the same object is the same text). The
    model call's cache across the agent's runs; ``context_budget`` reads it too."""

    __slots__ = ("chars", "pieces")

    def __init__(self) -> None:
        self.pieces: object = None
        self.chars = 0

    def of(self, served: Mapping[str, Any]) -> int:
        pieces = served["system"]
        if self.pieces is not pieces:
            self.pieces, self.chars = pieces, len(system_prompt_text(served))
        return self.chars


def _prompt_chars(run: RunState) -> PromptChars:
    cached = run.seam.caches.get(NAME)
    if cached is None:
        cached = run.seam.caches[NAME] = PromptChars()
    chars: PromptChars = cached
    return chars


async def call_llm(ctx: StageContext) -> None:
    """Build the request from committed state, receipt it, send it, commit the reply."""
    run, s = ctx.run, ctx.scope
    stage = ctx.stage_run.rpartition("#")[0]
    if stage not in run.seam.model_stages:
        raise RunError(
            f"stage {stage!r} calls the model but does not declare calls_model=True in its "
            "StageSpec (the run indexes and marks the calls of declared stages)",
            run_id=run.run_id,
        )
    if ctx.model_calls:
        raise RunError(
            f"stage {ctx.stage_run} makes a second model call; a stage makes at most one "
            "(the log marks each call on its stage's commit)",
            run_id=run.run_id,
        )
    iteration = s.get("iteration")
    version = run.seam.projection
    served = build_request(s.committed, version=version)  # what the provider is sent
    ctx.served = served
    call = run.calls
    extras: dict[str, Any] = {}
    for hook in hooks_at(ctx, Feature.request_served):
        extras.update(await hook(ctx, served))
    if ctx.listens(IterationStart.kind):
        await ctx.emit(IterationStart(run_id=run.run_id, iteration=iteration))
    if ctx.listens(LLMStart.kind):
        await ctx.emit(
            LLMStart(
                run_id=run.run_id,
                iteration=iteration,
                call=call,
                model=served["model"],
                messages=len(served["messages"]),
                tools=len(served["tools"]),
                temperature=served["params"].get("temperature"),
                system_prompt_chars=_prompt_chars(run).of(served),
                **extras,
            )
        )
    model = ctx.model
    request_digest: str | None = None  # the receipt's request digest, for llm_end
    if run.config.record_receipt or model.checks_requests:
        # the receipt hashes the recorded (committed) form
        recorded = (
            served
            if run.committed is s.committed
            else build_request(run.committed, version=version)
        )
        digests = run.hasher.digests(recorded)
        model.check(call, digests, recorded)  # a refused request is never served, nor receipted
        if run.config.record_receipt:
            ctx.mint_receipt(digests)
            request_digest = digests.request
    # the receipt and what came before are durable before the request leaves
    await ctx.write_ahead()
    run.calls += 1
    ctx.model_calls += 1
    started = time.perf_counter()
    on_token = None
    if ctx.listens(LLMToken.kind):

        async def on_token(text: str) -> None:
            await ctx.emit(LLMToken(run_id=run.run_id, iteration=iteration, call=call, text=text))

    try:
        response = await model.complete(call, Request.from_served(served), on_token=on_token)
    except ModelRequestsBlocked:  # misuse (a real provider under test), not a provider failure
        raise
    except ProviderError as exc:  # the provider's own error: what it says, status and all
        if exc.wire is not None:  # the attempts it made are evidence of the failed call
            await ctx.emit(wire_exchange(ctx, call, exc.wire))
        raise ProviderCallError(
            f"provider {model.name!r} failed on call {call}: {exc}",
            run_id=run.run_id,
            status=exc.status,
            retryable=exc.retryable,
        ) from exc
    except RunError as exc:
        exc.run_id = run.run_id
        raise
    except Exception as exc:
        raise ProviderCallError(
            f"provider {model.name!r} failed on call {call}: " + exception_text(exc),
            run_id=run.run_id,
        ) from exc
    if not isinstance(response, LLMResponse):
        raise ProviderCallError(
            f"provider returned {type(response).__name__}, not LLMResponse", run_id=run.run_id
        )
    replayed = model.recorded(call)
    if response.wire is not None and not replayed:
        await ctx.emit(wire_exchange(ctx, call, response.wire))
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
    s.set("usage", summed(s.get("usage"), record["usage"]))
    for received in hooks_at(ctx, Feature.reply_received):
        await received(ctx, call, response)
    if not ctx.listens(LLMEnd.kind):
        return
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
            request_digest=request_digest,
        )
    )


def summed(usage: dict[str, int], reply: dict[str, int]) -> dict[str, int]:
    """The turn's usage with one reply's added; cache figures appear once a reply has them
    (a run whose provider reports none records the usage of earlier releases)."""
    total = {
        "input": usage["input"] + reply["input"],
        "output": usage["output"] + reply["output"],
        "calls": usage["calls"] + 1,
    }
    for key in ("cache_read", "cache_write"):
        if key in usage or key in reply:
            total[key] = usage.get(key, 0) + reply.get(key, 0)
    return total


def wire_exchange(ctx: StageContext, call: int, wire: WireRecord) -> WireExchange:
    """The recorded evidence of a call's HTTP attempts: each body's SHA-256 (domain
    ``wire/request``, ``wire/response``), committed under a redaction policy."""
    boundary = ctx.run.boundary
    attempts = []
    for attempt in wire.attempts:
        entry: dict[str, Any] = {}
        for key, body in (("request", attempt.request_body), ("response", attempt.response_body)):
            if body is None:
                entry[key] = None
                continue
            digest = hexdigest(f"wire/{key}", body)
            entry[key] = (
                digest if boundary is None else boundary.commit_always(f"wire_{key}", digest)
            )
        entry["status"] = attempt.status
        entry["error"] = attempt.error
        if attempt.retry_after is not None:
            entry["retry_after"] = attempt.retry_after
        attempts.append(entry)
    return WireExchange(run_id=ctx.run_id, call=call, attempts=attempts)


def _malformed(response: LLMResponse) -> str | None:
    """What of a reply is not the type the loop and the log need (the dataclasses do not
    check their fields: an adapter's bug is named here, not met as an AttributeError)."""
    if not isinstance(response.content, str):
        return f"content is {type(response.content).__name__}, not str"
    if not isinstance(response.stop_reason, str):
        return f"stop_reason is {type(response.stop_reason).__name__}, not str"
    usage = response.usage
    counts = (usage.input, usage.output) if isinstance(usage, Usage) else ()
    cached = (usage.cache_read, usage.cache_write) if isinstance(usage, Usage) else ()
    if (
        not isinstance(usage, Usage)
        or not all(type(n) is int and 0 <= n <= MAX_SAFE_INT for n in counts)
        or not all(n is None or (type(n) is int and 0 <= n <= MAX_SAFE_INT) for n in cached)
    ):
        return (
            "usage must be Usage(input=..., output=..., cache_read=..., cache_write=...) with "
            "integers from 0 to 2**53 - 1 (cache figures may be None)"
        )
    if not isinstance(response.tool_calls, tuple | list):
        return f"tool_calls is {type(response.tool_calls).__name__}, not a tuple of ToolCall"
    for index, tool_call in enumerate(response.tool_calls):
        if not isinstance(tool_call, ToolCall):
            return f"tool_calls[{index}] is {type(tool_call).__name__}, not ToolCall"
        if not isinstance(tool_call.id, str) or not isinstance(tool_call.name, str):
            return f"tool_calls[{index}] id and name must be strings"
    return None


FEATURE: Feature[Options] = Feature(
    name=NAME,
    summary="the model call: request from committed state, receipt, reply",
    order=50,
    options=(
        OptionSpec(
            name="provider", seed="provider", check=_provider, summary="the model port, live"
        ),
        OptionSpec(
            name="record_receipt",
            seed="recordReceipt",
            check=boolean("record_receipt", True),
            recorded=True,
            summary="a receipt per call",
        ),
    ),
    stages=(
        StageSpec(name="call-llm", fn=call_llm, phase="iteration", order=50, calls_model=True),
    ),
    state_keys=(
        StateKey(name="last_response", structure=True, summary="the latest reply"),
        StateKey(name="usage", structure=True, summary="tokens and calls of the turn"),
    ),
    events=(IterationStart, LLMStart, LLMToken, LLMEnd, WireExchange),
    recorded_events=(WireExchange,),
    live_only_events=(WireExchange,),
    ports=("model",),
)
