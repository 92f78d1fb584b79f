"""The one rule that finds a run's model calls, in every log format.

A receipt is the mark of a model call when receipts are on. With receipts off, each format
says what marks one (``LogFormat.calls_without_receipts``): a ``call`` member on the commit
marker from format v2 on, a commit of the ``call-llm`` stage in v1. :func:`commit_calls` is
the rule everything uses (the verifier's neighbours, the read side, recording, replay);
nothing else compares stage names. docs/log-format.md section 5.6 is the normative text,
appendix A the v1 rule.

The format names are :mod:`agentfootprint.logformat.log_formats`'s, where the formats are
chosen.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentfootprint.logformat.log_formats import log_format

__all__ = ["commit_calls"]


def commit_calls(log_format_name: str, marker: Mapping[str, Any], receipts_in_batch: int) -> int:
    """How many model calls the commit closed by ``marker`` made.

    The receipts of its batch when there are any (each receipt is one call); otherwise the
    rule of the format ``log_format_name``. A format this code does not know raises
    ``ValueError`` (:class:`~agentfootprint.logformat.log_formats.UnknownLogFormat`): the
    caller read a log it should have refused.
    """
    if receipts_in_batch:
        return receipts_in_batch
    return log_format(log_format_name).calls_without_receipts(marker)
