"""Log format v4: v3 with seals (the current format of a run recorded with a signer).

A run recorded by an agent with a signer names the signer's key in ``run.open`` (``seal``)
and ends with a ``run.seal`` row after ``run.close``, in the same batch (docs/seals.md,
docs/log-format.md section 5.8). A run without a signer is still recorded in v3.
"""

from __future__ import annotations

from typing import Final

from agentfootprint.logformat.log_format_spec import LogFormat
from agentfootprint.logformat.log_format_v2 import calls_by_marker

__all__ = ["FORMAT"]

FORMAT: Final = LogFormat(
    name="agentfootprint/log/v4",
    version=4,
    marks_calls=True,
    writes_ahead=True,
    may_seal=True,
    implied_projection=None,
    calls_without_receipts=calls_by_marker,
)
