"""Log format v3: v2's rows in v2's order, a call's receipts written ahead of the call.

What changes is when rows reach the store: a call's receipts are written (durably) before
its request is sent, ahead of the rest of its commit, so a log may end after them (a crash
during the call: UNSEALED, where v2 says ``truncated``). docs/log-format.md section 6.1.
"""

from __future__ import annotations

from typing import Final

from agentfootprint.logformat.log_format_spec import LogFormat
from agentfootprint.logformat.log_format_v2 import calls_by_marker

__all__ = ["FORMAT"]

FORMAT: Final = LogFormat(
    name="agentfootprint/log/v3",
    version=3,
    marks_calls=True,
    writes_ahead=True,
    may_seal=False,
    implied_projection=None,
    calls_without_receipts=calls_by_marker,
)
