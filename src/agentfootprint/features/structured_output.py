"""``output_type``: the answer as a typed value, its schema served, the answer validated.

``Agent(output_type=Answer)`` (a dataclass, a ``TypedDict``, a pydantic model, or a JSON
Schema mapping; :mod:`agentfootprint.runtime.output_schemas`) serves the answer's schema in
the request's ``params`` as ``output: {"name", "schema", "strict"}`` (the seed stage commits
it, :func:`agentfootprint.features.turn.call_params`), so every receipt hashes it, the
verifier rebuilds it and a replay compares it: a changed schema diverges at call 0 as a
``params`` divergence. Each provider sends it the way its vendor takes one (OpenAI's
``response_format`` json_schema with its strict flag, Anthropic's ``output_config.format``,
the mock records it), and only a provider that says so (the class attribute
``structured_output = True``): a receipt would otherwise prove a schema the model was never
sent.

At the route, a reply asking for no tool is the answer: it must be JSON fitting the schema
(and, for a class, convert to it). One that does not is recorded as
``agentfootprint.validation.output_invalid`` ``{iteration, call, issues, retry, failures}``
(paths, keywords, expectations and the JSON types received, never a value) and, while
``output_retries`` allows (default 2, 0 to 10) and ``max_iterations`` leaves a pass, the
route takes the ``output-retry`` branch: the answer and a marked teaching message
(:data:`~agentfootprint.runtime.output_schemas.OUTPUT_FRAME_PREFIX`) join the history, the
iteration advances and the model is asked again. Past the bound the run fails with
:class:`~agentfootprint.errors.OutputValidationError`, closed ``failed``.
``RunResult.output`` is the typed value (a dataclass or pydantic instance, a ``TypedDict``'s
dict, a schema's JSON). A turn that stopped early (``max_iterations``, a cost budget, a
wrap-up call) is not checked: its ``output`` is the value when its answer fits, else None.

Absent, nothing is served, no stage is added and no hook runs: the rows of before.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from agentfootprint.errors import OutputValidationError, RunError
from agentfootprint.features.base import (
    MISSING,
    Feature,
    Given,
    HookContext,
    Options,
    OptionSpec,
    StageSpec,
    count,
    refuse,
)
from agentfootprint.features.llm_call import NAME as LLM_CALL
from agentfootprint.runtime.events import AgentEvent, IterationEnd
from agentfootprint.runtime.output_schemas import OutputSchema, output_schema, teaching_message
from agentfootprint.runtime.run import StageContext

__all__ = [
    "BRANCH",
    "DEFAULT_RETRIES",
    "FEATURE",
    "MAX_RETRIES",
    "OutputInvalid",
    "output_of",
    "params",
]

NAME = "structured-output"
OPTION = "output_type"
RETRIES = "output_retries"
#: the route branch (and its one stage) that asks the model again
BRANCH = "output-retry"
DEFAULT_RETRIES = 2
MAX_RETRIES = 10
#: request fields a vendor's structured output is sent in: ``model_settings`` may not set
#: them beside ``output_type``
_VENDOR_FIELDS = ("response_format", "output_config", "output_format")


@dataclass(frozen=True, kw_only=True)
class OutputInvalid(AgentEvent):
    """An answer that did not fit ``output_type``, and whether the model is asked again."""

    kind: ClassVar[str] = "agentfootprint.validation.output_invalid"
    iteration: int
    call: int  #: the model call whose reply it was
    issues: list[dict[str, Any]]
    retry: bool  #: asked again (False: the run fails)
    failures: int  #: answers refused in this run so far, this one included


@dataclass(frozen=True, slots=True)
class Settings:
    """What the hook reads: the schema, the retries, the loop's bound."""

    output: OutputSchema
    retries: int
    max_iterations: int


def _output_type(value: Any, given: Given) -> OutputSchema | None:
    if value is MISSING or value is None:
        return None
    resolved = output_schema(value)
    provider = given.resolved("provider")
    name = getattr(provider, "name", type(provider).__name__)
    if getattr(provider, "structured_output", False) is not True:
        raise refuse(
            OPTION,
            f"provider {name!r} declares no structured_output, so the schema would be "
            "recorded as served and never reach the model: use a provider that sends "
            "request.params['output'] (the openai and anthropic adapters, MockProvider) and "
            "declares structured_output = True on its class",
        )
    settings = given.get("model_settings")
    if isinstance(settings, Mapping):
        taken = [key for key in _VENDOR_FIELDS if key in settings]
        if taken:
            raise refuse(
                OPTION,
                f"model_settings sets {taken[0]!r}, which output_type serves: remove it from "
                "model_settings",
            )
    return resolved


def _retries(value: Any, given: Given) -> int | None:
    typed = given.get(OPTION) is not None
    if value is MISSING or value is None:
        return DEFAULT_RETRIES if typed else None
    checked = count(RETRIES, value, "output_retries", low=0, high=MAX_RETRIES)
    if not typed:
        raise refuse(
            RETRIES,
            "applies to an answer checked against output_type=...: give output_type too, or "
            "remove output_retries",
        )
    return checked


def params(options: Mapping[str, Any]) -> dict[str, Any]:
    """``{"output": {...}}`` as served in ``params`` when ``output_type`` is set, else {}."""
    output = options.get(OPTION)
    return {"output": output.served()} if isinstance(output, OutputSchema) else {}


def output_of(options: Mapping[str, Any], answer: Any) -> Any:
    """``RunResult.output``: the typed value of ``answer`` (None without ``output_type``, or
    for an answer that does not fit it: a turn that stopped early)."""
    output = options.get(OPTION)
    if not isinstance(output, OutputSchema):
        return None
    value, issues = output.check(answer)
    return None if issues else value


class _StructuredOutput(Feature[Settings]):
    def settings(self, options: Options) -> Settings:
        output = options[OPTION]
        assert isinstance(output, OutputSchema)  # active only with one
        return Settings(
            output=output,
            retries=int(options[RETRIES]),
            max_iterations=int(options["max_iterations"]),
        )

    async def answer_check(self, ctx: HookContext[Settings]) -> str | None:
        settings = ctx.options
        s = ctx.scope
        if s.get("params", {}).get("output") != settings.output.served():
            # a run answering a pause serves what the paused run committed at its seed
            raise RunError(
                "the run serves another output schema than this agent's output_type (it "
                "continues a run of an agent configured otherwise): resume it with that agent",
                run_id=ctx.run_id,
            )
        _, issues = settings.output.check(s.get("last_response")["content"])
        if not issues:
            return None
        failures = ctx.memory(lambda: [0])
        failures[0] += 1
        iteration = s.get("iteration")
        retry = failures[0] <= settings.retries and iteration < settings.max_iterations
        await ctx.emit(
            OutputInvalid(
                run_id=ctx.run_id,
                iteration=iteration,
                call=ctx.calls - 1,
                issues=issues,
                retry=retry,
                failures=failures[0],
            )
        )
        if retry:
            return BRANCH
        bound = (
            f"output_retries={settings.retries}"
            if failures[0] > settings.retries
            else f"max_iterations={settings.max_iterations} (no pass left to ask again)"
        )
        shown = "; ".join(f"{i['path']}: {i['message']}" for i in issues[:3])
        raise OutputValidationError(
            f"the answer does not fit output_type {settings.output.name!r} after "
            f"{failures[0]} answer(s), the bound {bound}: {shown}",
            issues=issues,
            failures=failures[0],
            run_id=ctx.run_id,
        )


async def ask_again(ctx: StageContext) -> None:
    """The refused answer and the teaching message join the history; the next pass asks."""
    s = ctx.scope
    output: OutputSchema = ctx.config.options[OPTION]
    answer = s.get("last_response")["content"]
    _, issues = output.check(answer)
    iteration = s.get("iteration")
    s.append(
        "history",
        [
            {"role": "assistant", "content": answer},
            {"role": "user", "content": teaching_message(output, issues)},
        ],
    )
    s.set("iteration", iteration + 1)
    if ctx.listens(IterationEnd.kind):
        await ctx.emit(IterationEnd(run_id=ctx.run_id, iteration=iteration))


FEATURE = _StructuredOutput(
    name=NAME,
    summary="the answer as a typed value: its schema served, the answer validated and retried",
    order=55,
    needs=(LLM_CALL, "route"),
    options=(
        OptionSpec(
            name=OPTION,
            seed=None,
            check=_output_type,
            summary="the answer's type, its schema served in params",
        ),
        OptionSpec(
            name=RETRIES,
            seed=None,
            check=_retries,
            recorded=True,
            summary="answers that do not fit asked again",
        ),
    ),
    stages=(
        StageSpec(
            name=BRANCH,
            fn=ask_again,
            phase="branch",
            branch=BRANCH,
            order=0,
            loops=True,
            description="ask again: the answer did not fit output_type",
        ),
    ),
    events=(OutputInvalid,),
    recorded_events=(OutputInvalid,),
    active=lambda options: options.get(OPTION) is not None,
)
