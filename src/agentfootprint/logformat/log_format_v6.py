"""Log format v6: v5 with write provenance (docs/log-format.md section 5.10).

Every ``write`` body carries ``reads``: the state keys its stage had read before it made
that write, sorted, each of them a key of the state the commit started from or one the
commit writes. Recorded by an agent with ``write_provenance="reads-prefix"``, and by a
replay of such a run. Pauses and seals are as in v5.
"""

from __future__ import annotations

from typing import Final

from agentfootprint.logformat.log_format_spec import LogFormat
from agentfootprint.logformat.log_format_v2 import calls_by_marker

__all__ = ["FORMAT"]

FORMAT: Final = LogFormat(
    name="agentfootprint/log/v6",
    version=6,
    marks_calls=True,
    writes_ahead=True,
    may_seal=True,
    implied_projection=None,
    calls_without_receipts=calls_by_marker,
    may_pause=True,
    records_reads=True,
)
