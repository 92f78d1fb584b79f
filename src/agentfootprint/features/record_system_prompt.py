"""``record_system_prompt``: the assembled system prompt on every ``llm_start`` event. Opt-in.

With it on, ``agentfootprint.stream.llm_start`` carries ``system_prompt_text``: the served
pieces' texts joined by a blank line, as the provider received them. Off (the default) the
event keeps its earlier members (``system_prompt_chars`` reports the length either way).
The default is a privacy decision: the assembled prompt is as sensitive as everything in
it, and large. Under a redaction policy the event carries the prompt assembled from the
pieces *as recorded*: a piece whose text was committed contributes its commitment's JSON,
never the value, so listeners see what the log holds.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentfootprint.features.base import Feature, HookContext, Options, OptionSpec, boolean
from agentfootprint.features.llm_call import assembled
from agentfootprint.logformat.request import build_request

OPTION = "record_system_prompt"


class _RecordSystemPrompt(Feature[Options]):
    async def request_served(
        self, ctx: HookContext[Options], served: Mapping[str, Any]
    ) -> Mapping[str, Any]:
        pieces = served["system"]
        recorded = ctx.recorded_state
        if recorded is not ctx.scope.committed:  # under a policy: the recorded form
            pieces = build_request(recorded, version=ctx.projection)["system"]
        return {"system_prompt_text": assembled(pieces)}


FEATURE = _RecordSystemPrompt(
    name="record-system-prompt",
    summary="the assembled system prompt on llm_start",
    order=140,
    options=(
        OptionSpec(
            name=OPTION,
            seed="recordSystemPrompt",
            check=boolean(OPTION, False),
            summary="assembled prompt on llm_start",
        ),
    ),
    active=lambda options: bool(options.get(OPTION)),
)
