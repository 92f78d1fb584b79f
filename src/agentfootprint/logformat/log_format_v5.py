"""Log format v5: v4 with pauses (docs/log-format.md section 5.9).

A run may close with outcome ``paused`` and the question it waits on (``pending``); the run
that continues it carries ``resumes`` (the person's answer, committed by its first stage,
``resume``) or ``abandons`` (set aside explicitly) naming that question. Seals are as in v4.
Recorded by an agent that may pause (a feature declared ``pauses=True``), and by a run
that continues a paused one.
"""

from __future__ import annotations

from typing import Final

from agentfootprint.logformat.log_format_spec import LogFormat
from agentfootprint.logformat.log_format_v2 import calls_by_marker

__all__ = ["FORMAT"]

FORMAT: Final = LogFormat(
    name="agentfootprint/log/v5",
    version=5,
    marks_calls=True,
    writes_ahead=True,
    may_seal=True,
    implied_projection=None,
    calls_without_receipts=calls_by_marker,
    may_pause=True,
)
