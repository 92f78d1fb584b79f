"""The turn: the agent's identity, the model and its parameters, and the seed stage.

The seed stage starts a turn: the user message joins the history, the model and its call
parameters are committed (the request serves them from state), and the counters reset.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from agentfootprint.features import sampling, structured_output
from agentfootprint.features.base import (
    MISSING,
    Feature,
    Options,
    OptionSpec,
    StageSpec,
    StateKey,
    count,
    refuse,
)
from agentfootprint.features.registry import hooks_at
from agentfootprint.features.tool_dispatch import abandon_pause
from agentfootprint.logformat.commitments import read_json_text
from agentfootprint.runtime.events import TurnStart
from agentfootprint.runtime.run import ReplayInput, StageContext

#: the stage that starts a turn (the replay reads the recorded input at its commit)
SEED_STAGE = "seed"
_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")
#: the highest temperature accepted (OpenAI's range is 0 to 2, Anthropic's 0 to 1)
MAX_TEMPERATURE = 2


def _model(value: Any, given: Mapping[str, Any]) -> str:
    if not isinstance(value, str) or not value.strip():
        shown = None if value is MISSING else value
        raise refuse("model", f"a non-empty model name string is required, got {shown!r}")
    if read_json_text(value) is not None:  # a redaction policy would rewrite or commit it
        raise refuse(
            "model", f"a model name may not be JSON object or array text, got {value[:60]!r}"
        )
    return value


def _name(value: Any, given: Mapping[str, Any]) -> str:
    value = "Agent" if value is MISSING else value
    if not isinstance(value, str) or not value.strip():
        raise refuse("name", f"must be a non-empty string, got {value!r}")
    return value


def _id(value: Any, given: Mapping[str, Any]) -> str:
    value = "agent" if value is MISSING else value
    if not isinstance(value, str) or not _ID.match(value):
        raise refuse("id", f"must be 1-128 characters of A-Z a-z 0-9 _ . : -, got {value!r}")
    return value


def _temperature(value: Any, given: Mapping[str, Any]) -> float | None:
    if value is MISSING or value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not 0 <= value <= MAX_TEMPERATURE
    ):
        raise refuse(
            "temperature",
            f"must be a finite number from 0 to {MAX_TEMPERATURE} (the widest vendor range), "
            f"got {value!r}",
        )
    return value


def _max_tokens(value: Any, given: Mapping[str, Any]) -> int | None:
    if value is MISSING or value is None:
        return None
    return count("max_tokens", value, "max_tokens")


def call_params(options: Mapping[str, Any]) -> dict[str, Any]:
    """Call parameters as served (only those set): ``temperature``, ``max_tokens``, the
    sampling settings (:mod:`agentfootprint.features.sampling`) and the answer's schema
    (``output``: :mod:`agentfootprint.features.structured_output`)."""
    params: dict[str, Any] = {}
    if options.get("temperature") is not None:
        params["temperature"] = options["temperature"]
    if options.get("max_tokens") is not None:
        params["max_tokens"] = options["max_tokens"]
    params.update(sampling.params(options))
    params.update(structured_output.params(options))
    return params


async def seed(ctx: StageContext) -> None:
    """Start the turn: the user message joins the history; counters reset."""
    s = ctx.scope
    config = ctx.config
    message = ctx.run.input_message  # the turn's input, held by the run
    if "pending" in s:  # a new turn on a paused run abandons its question
        abandon_pause(ctx)
    content = message
    if isinstance(message, ReplayInput):  # a replay restores both recorded forms as they were
        message, content = message.user_message, message.content
    s.set("agent", {"id": config.id, "name": config.name})
    s.set("model", config.model)
    s.set("params", call_params(config.options))
    s.append("history", [{"role": "user", "content": content}])
    s.set("user_message", message)
    s.set("iteration", 1)
    s.set("usage", {"input": 0, "output": 0, "calls": 0})
    for key in ("final_answer", "stopped_early", "last_response"):
        if key in s:
            s.delete(key)
    for hook in hooks_at(ctx, Feature.turn_start):
        await hook(ctx)
    await ctx.emit(
        TurnStart(run_id=ctx.run_id, conversation_id=ctx.run.conversation_id, message=message)
    )


FEATURE: Feature[Options] = Feature(
    name="turn",
    summary="the turn's start: identity, model, call parameters, the user message",
    order=0,
    options=(
        OptionSpec(name="model", seed="model", check=_model, summary="served as request.model"),
        OptionSpec(name="name", seed="name", check=_name, summary="display name"),
        OptionSpec(name="id", seed="id", check=_id, summary="stable agent id"),
        OptionSpec(
            name="temperature", seed="temperature", check=_temperature, summary="served in params"
        ),
        OptionSpec(
            name="max_tokens", seed="maxTokens", check=_max_tokens, summary="served in params"
        ),
    ),
    stages=(
        StageSpec(name=SEED_STAGE, fn=seed, phase="start", order=0, description="start the turn"),
    ),
    state_keys=(
        StateKey(name="agent", structure=True, summary="the agent's id and name"),
        StateKey(name="model", structure=True, summary="request.model"),
        StateKey(name="params", structure=True, summary="request.params"),
        StateKey(name="history", structure=True, summary="the conversation, as recorded"),
        StateKey(name="iteration", structure=True, summary="the loop's pass, from 1"),
        StateKey(name="user_message", summary="the turn's input"),
    ),
    events=(TurnStart,),
)
