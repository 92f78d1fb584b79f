"""Log format v2: v1's rows, with each model call marked on its commit marker.

With receipts off, a commit that called the model carries ``"call": k`` on its marker
(docs/log-format.md section 5.6), and ``run.open`` names the projection it was served under.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from agentfootprint.logformat.log_format_spec import LogFormat

__all__ = ["FORMAT", "calls_by_marker"]


def calls_by_marker(marker: Mapping[str, Any]) -> int:
    """1 if the commit marker carries ``call`` (the rule of v2 and every later format)."""
    return 1 if "call" in marker else 0


FORMAT: Final = LogFormat(
    name="agentfootprint/log/v2",
    version=2,
    marks_calls=True,
    writes_ahead=False,
    may_seal=False,
    implied_projection=None,
    calls_without_receipts=calls_by_marker,
)
