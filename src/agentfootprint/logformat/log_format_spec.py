"""What a log format is, as the request, the receipts and the call count see it.

Each log format is one instance of :class:`LogFormat`, defined in its own module
(:mod:`~agentfootprint.logformat.log_format_v1` to ``_v6``) and chosen in one place
(:func:`agentfootprint.logformat.log_formats.log_format`). A reader asks the format what it
needs to know (are calls marked? are receipts written ahead? may the run be sealed, or pause? what
projection does a ``run.open`` without one imply? do writes carry their reads?) instead of
comparing format names. docs/log-format.md sections 1.1, 5.6, 5.10 and 6.1 are the normative
text.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

__all__ = ["CLOSE_OUTCOMES", "PAUSED", "LogFormat"]

#: the outcomes of ``run.close`` in every format (docs/log-format.md section 5.7)
CLOSE_OUTCOMES: Final = ("answered", "stopped_early", "failed")
#: the outcome of a run that waits for a person: formats that may pause only (section 5.9)
PAUSED: Final = "paused"


@dataclass(frozen=True, kw_only=True, slots=True)
class LogFormat:
    """One log format: its name in ``run.open.format`` and the rules that differ by format."""

    #: ``run.open.format``: ``agentfootprint/log/v<n>``
    name: str
    version: int
    #: a commit marker carries ``"call": k`` for each model call when receipts are off
    marks_calls: bool
    #: a call's receipts reach the store (durably) before its request is sent, so a log may
    #: end after them (UNSEALED, not truncated)
    writes_ahead: bool
    #: a run may name a signer in ``run.open.seal`` and end with a ``run.seal`` row
    may_seal: bool
    #: the projection version a ``run.open`` without a ``projection`` member was served
    #: under; None: the member is required
    implied_projection: int | None
    #: how many model calls a commit made when its batch holds no receipt, from its marker
    calls_without_receipts: Callable[[Mapping[str, Any]], int]
    #: a run may close ``paused`` with a ``pending`` question, and a ``run.open`` may answer
    #: (``resumes``) or set aside (``abandons``) its paused parent's (docs/log-format.md 5.9)
    may_pause: bool = False
    #: every ``write`` body carries ``reads``, the keys its stage read before it
    #: (docs/log-format.md section 5.10)
    records_reads: bool = False

    @property
    def outcomes(self) -> tuple[str, ...]:
        """The outcomes a ``run.close`` of this format may have."""
        return (*CLOSE_OUTCOMES, PAUSED) if self.may_pause else CLOSE_OUTCOMES

    def commit_calls(self, marker: Mapping[str, Any], receipts_in_batch: int) -> int:
        """How many model calls the commit closed by ``marker`` made: the receipts of its
        batch when there are any (each receipt is one call), else the format's rule."""
        if receipts_in_batch:
            return receipts_in_batch
        return self.calls_without_receipts(marker)
