"""Log formats, and the one rule that finds a run's model calls in each.

A receipt is the mark of a model call when receipts are on. With receipts off, format v1
has no mark of its own: a call is a commit of the ``call-llm`` stage, which breaks the
moment a second stage calls the model (a summariser, a wrap-up). Format v2 marks such a
commit explicitly: ``"call": k`` on its commit marker. :func:`commit_calls` is the rule
everything uses (the verifier's neighbours, the read side, recording, replay); nothing
else compares stage names. docs/log-format.md section 5.6 is the normative text.

Format v3 has v2's rows in v2's order; what changes is when they reach the store: a
call's receipts are written (durably) before the request is sent, ahead of the rest of its
commit, so a log may end after them (a crash during the call: UNSEALED, where v2 says
``truncated``). :data:`MARKED_FORMATS` and :data:`WRITE_AHEAD_FORMATS` name the formats
each rule applies to.

Format v4 is v3 with seals (docs/seals.md): a run recorded by an agent with a signer names
the signer's key in ``run.open`` (``seal``) and ends with a ``run.seal`` row after
``run.close``, in the same batch. :data:`SEALED_FORMATS` names the formats a seal may appear
in; a run without a signer is still recorded in v3.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

__all__ = [
    "LOG_FORMATS",
    "LOG_FORMAT_V1",
    "LOG_FORMAT_V2",
    "LOG_FORMAT_V3",
    "LOG_FORMAT_V4",
    "MARKED_FORMATS",
    "SEALED_FORMATS",
    "WRITE_AHEAD_FORMATS",
    "commit_calls",
]

LOG_FORMAT_V1: Final = "agentfootprint/log/v1"
LOG_FORMAT_V2: Final = "agentfootprint/log/v2"
LOG_FORMAT_V3: Final = "agentfootprint/log/v3"
LOG_FORMAT_V4: Final = "agentfootprint/log/v4"
#: every log format this version reads and verifies, oldest first
LOG_FORMATS: Final = (LOG_FORMAT_V1, LOG_FORMAT_V2, LOG_FORMAT_V3, LOG_FORMAT_V4)
#: formats whose commit markers carry ``call`` when receipts are off
MARKED_FORMATS: Final = frozenset({LOG_FORMAT_V2, LOG_FORMAT_V3, LOG_FORMAT_V4})
#: formats whose receipts are written ahead of their call (a log may end after them)
WRITE_AHEAD_FORMATS: Final = frozenset({LOG_FORMAT_V3, LOG_FORMAT_V4})
#: formats in which a run may be sealed (``run.open.seal``, a ``run.seal`` row)
SEALED_FORMATS: Final = frozenset({LOG_FORMAT_V4})
#: the stage whose commits are model calls in a v1 log without receipts
_V1_CALL_STAGE: Final = "call-llm"


def commit_calls(log_format: str, marker: Mapping[str, Any], receipts_in_batch: int) -> int:
    """How many model calls the commit closed by ``marker`` made.

    The receipts of its batch when there are any (each receipt is one call); otherwise, in
    formats v2 and v3, 1 if the marker carries ``call`` and 0 if not; in format v1, 1 if the
    marker's stage is ``call-llm``. A format this code does not know raises ``ValueError``:
    the caller read a log it should have refused.
    """
    if receipts_in_batch:
        return receipts_in_batch
    if log_format in MARKED_FORMATS:
        return 1 if "call" in marker else 0
    elif log_format == LOG_FORMAT_V1:
        return 1 if marker.get("stage") == _V1_CALL_STAGE else 0
    else:
        raise ValueError(
            f"unknown log format {log_format!r} (this version reads {', '.join(LOG_FORMATS)})"
        )
