"""What the integrity checks put on the record, read back: the recorded kinds, a call as the
choice seam reads it, and findings from their recorded payloads (the run writes them through
:mod:`agentfootprint.features.integrity`; ``findings --recompute`` reads them here, with no
runtime import: an auditor's process never loads the agent)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from agentfootprint.integrity.rail import Finding, ToolCall, read_arguments

__all__ = [
    "CONTEXT_ERROR",
    "DISPOSITION",
    "EXTERNAL_GROUNDS",
    "EXTERNAL_GROUND_USED",
    "ROWS_REFUSED",
    "call_of",
    "findings_of",
]

CONTEXT_ERROR: Final = "agentfootprint.integrity.context_error"
EXTERNAL_GROUND_USED: Final = "agentfootprint.integrity.external_ground_used"
EXTERNAL_GROUNDS: Final = "agentfootprint.integrity.external_grounds"
ROWS_REFUSED: Final = "agentfootprint.integrity.rows_refused"
DISPOSITION: Final = "agentfootprint.integrity.disposition"


def call_of(tool: str, call_id: str, arguments: Any) -> ToolCall:
    """A call as the choice seam reads it (no result yet); arguments sent as JSON text are
    parsed as the loop parses them (text that is not JSON reads as None)."""
    return ToolCall(
        tool=tool,
        tool_call_id=call_id,
        arguments=read_arguments(arguments),
        content=None,
        is_error=False,
        turn=0,
        history_index=-1,
    )


def findings_of(payloads: Any) -> list[Finding] | None:
    """Recorded finding payloads read back as findings (None: one is malformed). Only
    :class:`Finding`'s own plain members are read: nothing else is built from the log."""
    if not isinstance(payloads, list):
        return None
    out: list[Finding] = []
    for p in payloads:
        try:
            subjects = tuple((str(s["kind"]), str(s["id"])) for s in p["subjects"])
            facts = p.get("facts", {})
            seam = p["seam"]
            if seam not in ("write", "choice", "claim"):
                return None
            predicate = p.get("predicate")
            out.append(
                Finding(
                    check=str(p["check"]),
                    kind=str(p["kind"]),
                    seam=seam,
                    subjects=subjects,
                    witnesses=tuple(str(w) for w in p["witnesses"]),
                    message=str(p["message"]),
                    predicate=None if predicate is None else str(predicate),
                    advisory=p["advisory"] is True,
                    synthetic=p["synthetic"] is True,
                    facts=dict(facts) if isinstance(facts, Mapping) else {},
                )
            )
        except (KeyError, TypeError, AttributeError):
            return None
    return out
