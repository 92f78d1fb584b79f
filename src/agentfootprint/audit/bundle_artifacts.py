"""A version 3 bundle's artifacts judged against the runs it carries (docs/log-format.md section
13.5, "Verifying artifacts").

A bundle offers its artifacts as an artifact source
(:meth:`~agentfootprint.verify.bundle.BundleSource.artifact_source`), so ``check_minted``
(:mod:`agentfootprint.audit.artifacts`) can read it as it reads a store. But a bundle says more
than a store: each entry claims a digest and a size, and a status a store never gives
(``withheld``: a run under a redaction policy exports digests only). Section 13.5 judges those
claims too: an entry that describes another artifact than the minted event is a ``mismatch``
even when the bytes it carries are right. :func:`check_carried` is that judgement: the event's
shape and the ticket cross-check are ``check_minted``'s (steps 1 and 2), the rest reads the
entries and the digest the bundle's opening computed of each ``ok`` entry's bytes, chunk by
chunk, so no artifact is held whole here.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import replace
from typing import Any, Final

from agentfootprint.audit.artifacts import (
    ArtifactVerdict,
    Minted,
    check_minted,
    verified_minted,
)
from agentfootprint.verify.bundle import BundleSource
from agentfootprint.verify.bundle_artifacts import BundleArtifacts
from agentfootprint.verify.results import RunVerification

__all__ = ["check_bundle_artifacts", "check_carried"]


class _Nothing:
    """A source holding nothing: ``check_minted`` over it says ``missing`` exactly when the
    event's shape and the ticket pass (section 13.5 steps 1 and 2), its ``mismatch`` when not."""

    def read(self, scope: str, ref: str) -> bytes | None:
        return None

    def tombstone(self, scope: str, ref: str) -> None:
        return None


_NOTHING: Final = _Nothing()


def check_carried(
    verification: RunVerification, minted: Iterable[Minted], carried: BundleArtifacts
) -> Iterator[ArtifactVerdict]:
    """One verdict per minted event of a run that verified, in seq order, against the
    artifacts a bundle carries (section 13.5 "Verifying artifacts", steps 1 to 6)."""
    events = list(minted)
    judged = check_minted(verification, events, _NOTHING)
    for event, verdict in zip(events, judged, strict=True):
        if verdict.status != "missing":  # its shape or its ticket: steps 1 and 2
            yield verdict
        else:
            yield _judged(verdict, event.payload["bytes"], carried)


def _judged(verdict: ArtifactVerdict, size: int, carried: BundleArtifacts) -> ArtifactVerdict:
    """Steps 3 to 6: the bundle's entry for the event's scope and ref, and its bytes."""
    digest = verdict.digest
    entry = carried.entry(verdict.scope, verdict.ref)
    if entry is None:
        return replace(verdict, detail="the bundle lists no artifact of this conversation and ref")
    if entry.digest != digest or entry.bytes != size:
        return replace(
            verdict,
            status="mismatch",
            found=entry.digest,
            detail=f"the bundle's entry says digest {entry.digest} and {entry.bytes} bytes; the "
            f"log records {digest} and {size}",
        )
    if entry.status == "ok":
        found = carried.content_digest(entry.scope, entry.ref)
        if found != digest:
            return replace(
                verdict,
                status="mismatch",
                found=found,
                detail=f"the bundle's {entry.bytes} bytes hash to {found}; the log records "
                f"{digest}",
            )
        return replace(
            verdict,
            status="ok",
            found=found,
            detail=f"the bundle carries the {size} bytes the recorded digest names",
        )
    if entry.removed is not None:
        at, note = entry.removed
        return replace(
            verdict,
            status=entry.status,
            detail=f"its store had removed its bytes when it was exported (at {at}, unix ms)"
            + (f"; note: {note}" if note else ""),
        )
    if entry.status == "withheld":
        return replace(
            verdict,
            status="withheld",
            detail="the bundle lists its digest without its bytes: a run that minted it "
            "records a redaction policy",
        )
    return replace(
        verdict,
        detail="its store held neither its bytes nor a tombstone when the bundle was exported",
    )


def check_bundle_artifacts(
    bundle: BundleSource,
    *,
    run_ids: Iterable[str] | None = None,
    trusted_keys: Iterable[Any] | None = (),
) -> Iterator[ArtifactVerdict]:
    """Verify the bundle's runs (every run, or only ``run_ids``) and judge each artifact a
    verified run minted against the artifacts the bundle carries (:func:`check_carried`).
    A bundle of version 1 or 2 carries none: no verdicts. A run that fails verification
    yields none either: its own verdict is the log's."""
    carried = bundle.artifact_source()
    if carried is None:
        return
    for verified, minted in verified_minted(bundle, run_ids, trusted_keys):
        yield from check_carried(verified, minted, carried)
