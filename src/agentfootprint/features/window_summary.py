"""``window={"keep_last_turns": N, "summarize": True}``: what leaves the window is folded into
a summary by a model call of its own (the seed's ``summarizeOldest`` compaction).

At a call where messages would leave the served window, two stages run before it:

1. ``summarize-plan`` commits, as ``served_messages``, what the summariser is served: the
   library's opening message (with the previous summary, if any), the leaving messages *by
   reference* into the history, and the library's request for a summary. The system prompt
   and the tools are served as they are (vendors refuse tool calls in a request that defines
   no tools), and nothing is copied.
2. ``call-llm-summarize`` makes that call: the loop's own call stage, at the run's next call
   index, receipted (or marked) like every call, billed like every call. Its reply's text is
   committed as ``window_summary`` ``{text, call, folded}`` (tool calls in it are not run),
   ``served_messages`` is set to the window with the summary message ahead of it
   (:data:`~agentfootprint.features.context_window.SUMMARY_FRAME_PREFIX`), and what left is
   recorded as ``agentfootprint.context.evicted`` with reason ``summarized``.

So a verifier rebuilds the summariser's request from committed state like any other, and a
replay answers it from the recording. A pinned tool result stays raw while what is around
it is folded (the seed's caveat), and is folded when it stands down.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from agentfootprint.features import context_window as windowing
from agentfootprint.features import llm_call
from agentfootprint.features.base import Feature, Options, StageSpec, StateKey
from agentfootprint.runtime.run import StageContext

#: the committed plan of the summariser call this iteration makes (deleted once made)
PENDING_KEY = "window_folding"
#: the marker the summariser's library-written messages open with
FOLD_FRAME_PREFIX = "[window summary request — "


def _opening(previous: Any) -> dict[str, Any]:
    before = (
        "the summary of the turns before them, written earlier in this run, was:\n"
        + str(previous["text"])
        if previous is not None
        else "nothing earlier had been summarised"
    )
    return {
        "role": "user",
        "content": FOLD_FRAME_PREFIX
        + "the messages after this one had left the served window of this conversation; "
        + before
        + "]",
    }


CLOSING = {
    "role": "user",
    "content": FOLD_FRAME_PREFIX + "this call was made for a summary of the conversation above "
    "(the earlier summary included): the facts, values, identifiers and results that later "
    "turns may need, and what was asked and decided. Its text replaced those messages in what "
    "the model is served next; the messages stay in the log.]",
}


async def summarize_plan(ctx: StageContext) -> None:
    """Commit the summariser's served list when messages are about to leave the window."""
    selection = windowing.select(ctx)
    if not selection.left or selection.previous == selection.segments:
        return
    previous = ctx.scope.get(windowing.SUMMARY_KEY)
    served: list[dict[str, Any]] = [{"message": _opening(previous)}]
    served += [{"history": [start, end]} for start, end in selection.left]
    served.append({"message": CLOSING})
    ctx.scope.set(windowing.KEY, served)
    ctx.scope.set(PENDING_KEY, {"left": [[s, e] for s, e in selection.left]})


async def call_summarizer(ctx: StageContext) -> None:
    """Make the planned summariser call; the window then serves its summary."""
    s = ctx.scope
    pending = s.get(PENDING_KEY)
    if pending is None:
        return
    await llm_call.call_llm(ctx)
    reply = s.get("last_response")
    previous = s.get(windowing.SUMMARY_KEY)
    folded = sum(end - start for start, end in pending["left"])
    s.set(
        windowing.SUMMARY_KEY,
        {
            "text": reply["content"],
            "call": ctx.calls - 1,
            "folded": folded + (previous["folded"] if previous is not None else 0),
        },
    )
    s.delete(PENDING_KEY)
    # the window as it stands now; what left is what the plan folded (the history has not
    # moved since: the served list being replaced is the summariser's own)
    selection = dataclasses.replace(
        windowing.select(ctx), left=[(start, end) for start, end in pending["left"]]
    )
    s.set(windowing.KEY, selection.segments)
    await windowing.record(ctx, selection, "summarized")


FEATURE: Feature[Options] = Feature(
    name="window-summary",
    summary="what leaves the window folded into a summary by a call of its own",
    order=24,
    stages=(
        StageSpec(name="summarize-plan", fn=summarize_plan, phase="iteration", order=23),
        StageSpec(
            name="call-llm-summarize",
            fn=call_summarizer,
            phase="iteration",
            order=24,
            calls_model=True,
        ),
    ),
    state_keys=(
        StateKey(name=windowing.SUMMARY_KEY, structure=True, summary="the window's summary"),
        StateKey(name=PENDING_KEY, structure=True, summary="the summariser call planned"),
    ),
    ports=("model",),
    projection=2,
    active=lambda options: bool((options.get(windowing.OPTION) or {}).get("summarize")),
)
