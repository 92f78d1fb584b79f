"""``max_tool_result_chars``: the ceiling on one tool result, in characters. Opt-in.

Over the cap, the result is *replaced* by a marker naming the tool, the size, the cap and
the one action that helps, carrying the first characters of the real result verbatim::

    {"head": "id,customer,total\\n1001,...", "reason": "orders_export returned 812431
     chars, over the 20000-char cap. Narrow the request and call again.", "truncated": true}

The marker is the result: the ``tool`` message the model reads, the history the log keeps
and the ``tool_end`` event all carry it, so the large result reaches neither the log nor an
event sink. ``head`` gets what the cap leaves after the marker's other members, so a bigger
cap buys a bigger head; the marker fits in the cap whenever the cap exceeds its sentence.
Omitted, results are never measured nor replaced (the rows are those of earlier releases).

Under a redaction policy the head of a result that is JSON text is empty: a cut JSON text is
text the policy cannot read into (by the JSON-text rule), so the values under its keys
would be recorded in clear.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from agentfootprint.features.base import (
    MAX_COUNT,
    MISSING,
    Feature,
    HookContext,
    OptionSpec,
    ToolResult,
    refuse,
)
from agentfootprint.logformat.canonical import canon
from agentfootprint.logformat.commitments import read_json_text
from agentfootprint.runtime.tools import ToolOutcome

OPTION = "max_tool_result_chars"


def _check(value: Any, given: Mapping[str, Any]) -> int | None:
    if value is MISSING or value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_COUNT:
        raise refuse(
            OPTION,
            f"must be a positive integer number of characters up to {MAX_COUNT}, got {value!r} "
            "(0 is not 'off': omit the option to leave results unmeasured)",
        )
    return value


def marker(tool: str, content: str, cap: int, *, head: bool = True) -> str:
    """The marker replacing ``content`` (canonical JSON text, at most ``cap`` characters
    when the cap leaves room for its sentence); ``head=False`` leaves its head empty."""
    reason = (
        f"{tool} returned {len(content)} chars, over the {cap}-char cap. "
        "Narrow the request and call again."
    )
    frame = _text({"head": "", "reason": reason, "truncated": True})
    room = max(0, cap - len(frame)) if head else 0
    head_text = content[:room]
    while head_text and len(_text({"head": head_text, "reason": reason, "truncated": True})) > cap:
        # escapes (quotes, newlines, control characters) take more than one character
        cut = max(1, len(_text(head_text)) - len(head_text))
        head_text = head_text[: max(0, len(head_text) - cut)]
    return _text({"head": head_text, "reason": reason, "truncated": True})


def _text(value: Any) -> str:
    return canon(value).decode("utf-8")


def is_marker(content: str) -> bool:
    """``content`` is a marker this feature wrote (it is left as it is: capping is idempotent,
    so a replay answering with the recorded marker serves it unchanged)."""
    if not content.startswith('{"head":'):
        return False
    try:
        value = orjson.loads(content)
    except orjson.JSONDecodeError:
        return False
    return (
        isinstance(value, dict)
        and value.keys() == {"head", "reason", "truncated"}
        and value["truncated"] is True
        and isinstance(value["head"], str)
        and isinstance(value["reason"], str)
    )


class _MaxToolResultChars(Feature[int]):
    def settings(self, options: Mapping[str, Any]) -> int:
        """The cap, in characters."""
        cap: int = options[OPTION]
        return cap

    async def tool_result(
        self, ctx: HookContext[int], result: ToolResult, outcome: ToolOutcome
    ) -> ToolOutcome:
        cap = ctx.options
        content = outcome.content
        if not isinstance(content, str) or len(content) <= cap or is_marker(content):
            return outcome
        head = not ctx.redacting or read_json_text(content) is None
        return ToolOutcome(
            content=marker(result.tool, content, cap, head=head), is_error=outcome.is_error
        )


FEATURE = _MaxToolResultChars(
    name="max-tool-result-chars",
    summary="a tool result over the cap is replaced by a marker",
    order=110,
    options=(
        OptionSpec(
            name=OPTION,
            seed="maxToolResultChars",
            check=_check,
            recorded=True,
            summary="the cap on one tool result, in characters",
        ),
    ),
    active=lambda options: options.get(OPTION) is not None,
)
