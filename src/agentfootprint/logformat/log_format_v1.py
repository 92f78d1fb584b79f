"""Log format v1: no call markers; a ``run.open`` without ``projection`` means projection 1.

With receipts off, v1 has no mark of a model call of its own: a call is a commit of the
``call-llm`` stage (which breaks the moment a second stage calls the model; v2 marks calls
instead). v1 writers did not record the projection, and v1 verifiers applied projection 1
whatever ``run.open`` said. docs/log-format.md appendix A.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from agentfootprint.logformat.log_format_spec import LogFormat

__all__ = ["FORMAT"]

#: the stage whose commits are model calls in a v1 log without receipts
CALL_STAGE: Final = "call-llm"


def _calls_by_stage(marker: Mapping[str, Any]) -> int:
    return 1 if marker.get("stage") == CALL_STAGE else 0


FORMAT: Final = LogFormat(
    name="agentfootprint/log/v1",
    version=1,
    marks_calls=False,
    writes_ahead=False,
    may_seal=False,
    implied_projection=1,
    calls_without_receipts=_calls_by_stage,
)
