"""Disclosed values proven against the commitments verified runs hold (docs/log-format.md
section 12.6): each disclosure must open its commitment, the commitment must sit in a run
that verified, under the disclosure's key."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from agentfootprint.errors import VerificationError
from agentfootprint.logformat.commitments import Disclosure

__all__ = ["ProvenValue", "prove_disclosures"]


@dataclass(frozen=True, kw_only=True, slots=True)
class ProvenValue:
    """A redacted value proven by its disclosure: where it sits and what it is."""

    run_id: str
    seq: int
    key: str
    commitment: str
    value: Any


def prove_disclosures(
    commitments: Mapping[str, tuple[str, int, str | None]], disclosures: Iterable[Disclosure]
) -> list[ProvenValue]:
    """Prove each disclosure against ``commitments`` (digest -> the run, seq and key it was
    first seen under in a verified run); raises on the first that does not stand."""
    proven = []
    for disclosure in disclosures:
        seen = commitments.get(disclosure.commitment)
        if not disclosure.opens():
            raise VerificationError(
                seen[0] if seen else "-",
                seen[1] if seen else None,
                f"disclosure for {disclosure.commitment} does not open it (the salt, key "
                "or value differs from what was committed)",
                code="disclosure",
                where=None if seen else "disclosures",
            )
        if seen is None:
            raise VerificationError(
                "-",
                None,
                f"disclosure for {disclosure.commitment}: no verified run holds that commitment",
                code="disclosure",
                where="disclosures",
            )
        run_id, seq, key = seen
        if key != disclosure.key:
            raise VerificationError(
                run_id,
                seq,
                f"disclosure for {disclosure.commitment} names key "
                f"{disclosure.key!r} but the log holds it under {key!r}",
                code="disclosure",
            )
        proven.append(
            ProvenValue(
                run_id=run_id,
                seq=seq,
                key=key,
                commitment=disclosure.commitment,
                value=disclosure.value,
            )
        )
    return proven
