"""``repeated_call_nudge``: tell the model it already made this exact call and got this
exact answer. On by default.

When one tool is called with equal arguments and returns a byte-identical result again in
the same turn, one sentence (:data:`NOTE`) is appended to that result and one
``agentfootprint.tools.repeated_call`` event is recorded. The call still ran, the result is
unchanged beside the note, and a further identical call is not blocked: evidence, not a
gate. The tally is kept beside the dispatch loop for the run, never written to state, so a
turn that repeats nothing records the same rows with the option on or off.

Under a redaction policy a result that is JSON text (which the policy reads into, by the
JSON-text rule) is not compared: a sentence appended to it would make it text the policy
cannot read (the values under its keys would be recorded in clear), and what the log holds
of two equal results differs by their salts, so a replay without the vault could not tell
the repeat. Text results are compared as always.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from agentfootprint.errors import CanonicalFormError
from agentfootprint.features.base import (
    Feature,
    HookContext,
    Options,
    OptionSpec,
    ToolResult,
    boolean,
)
from agentfootprint.logformat.canonical import canon
from agentfootprint.logformat.commitments import read_json_text
from agentfootprint.runtime.events import AgentEvent
from agentfootprint.runtime.tools import ToolOutcome

OPTION = "repeated_call_nudge"
#: The sentence appended to a repeated result (after a blank line).
NOTE = (
    "\n\n[agentfootprint: this is the same call with the same arguments as an earlier one in "
    "this turn, and the same result; calling it again will not change it.]"
)


@dataclass(frozen=True, kw_only=True)
class RepeatedCall(AgentEvent):
    """A tool was called again with equal arguments and returned the identical result."""

    kind: ClassVar[str] = "agentfootprint.tools.repeated_call"
    iteration: int
    tool_call_id: str
    tool: str
    #: how many times this call has now returned this result in the turn (2 or more)
    count: int


#: per (tool, result): how often each argument list (canonical JSON) returned it, this turn
_Tally = dict[tuple[str, str], dict[bytes, int]]


class _RepeatedCallNudge(Feature[Options]):
    async def tool_result_noted(
        self, ctx: HookContext[Options], result: ToolResult, outcome: ToolOutcome
    ) -> ToolOutcome:
        content = outcome.content
        if not result.ran or not isinstance(content, str):
            return outcome
        if ctx.redacting and read_json_text(content) is not None:
            return outcome  # JSON under a policy: not compared (see the module docstring)
        by_arguments = ctx.memory(_Tally).setdefault((result.tool, content), {})
        key = _arguments(result)
        count = by_arguments[key] = by_arguments.get(key, 0) + 1
        if count < 2:
            return outcome
        await ctx.emit(
            RepeatedCall(
                run_id=ctx.run_id,
                iteration=result.iteration,
                tool_call_id=result.tool_call_id,
                tool=result.tool,
                count=count,
            )
        )
        return ToolOutcome(content=content + NOTE, is_error=outcome.is_error)

    def unnote(self, ctx: HookContext[Options], content: str) -> str:
        return content[: -len(NOTE)] if content.endswith(NOTE) else content

    async def turn_start(self, ctx: HookContext[Options]) -> None:
        ctx.forget()


def _arguments(result: ToolResult) -> bytes:
    """The arguments' canonical JSON (equal values, equal bytes); b"" when they are not JSON."""
    try:
        return canon(result.arguments)
    except CanonicalFormError:
        return b""


FEATURE = _RepeatedCallNudge(
    name="repeated-call-nudge",
    summary="a note on a repeated identical call and result",
    order=120,
    options=(
        OptionSpec(
            name=OPTION,
            seed="repeatedCallNudge",
            check=boolean(OPTION, True),
            recorded=True,
            summary="note identical repeated calls",
        ),
    ),
    events=(RepeatedCall,),
    recorded_events=(RepeatedCall,),
    active=lambda options: bool(options.get(OPTION)),
)
