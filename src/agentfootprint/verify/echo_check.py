"""Proven values checked for echoes (docs/log-format.md section 12.8): under a version 3
policy, a value committed at seq ``s`` of a run must not be quoted in clear in the
conversation's text of a later body of that run, unless the run held it in clear already."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agentfootprint.errors import VerificationError
from agentfootprint.logformat.canonical import json_path
from agentfootprint.logformat.echo import conversation_texts, literals_of
from agentfootprint.verify.body_checks import scanned_value
from agentfootprint.verify.disclosure_check import ProvenValue

__all__ = ["EchoRun", "check_echoes"]


@dataclass(frozen=True, kw_only=True, slots=True)
class EchoRun:
    """What the check reads of one verified run."""

    #: ``run.open.policy.v`` (None: no policy)
    policy_version: int | None
    #: the run's initial state (a continued run's parent's final state; else empty)
    initial_state: Mapping[str, Any]
    #: ``(seq, type, body)`` of every row, in seq order
    bodies: Iterable[tuple[int, str, Any]]


def check_echoes(proven: Sequence[ProvenValue], runs: Callable[[str], EchoRun]) -> None:
    """Raise :class:`VerificationError` (code ``leak``) at the first quotation of a proven
    value left in clear; ``runs(run_id)`` reads a verified run."""
    by_run: dict[str, list[tuple[int, str, str]]] = {}  # run -> [(seq, literal, key)]
    for value in proven:
        literals = literals_of(value.value)
        if literals:
            by_run.setdefault(value.run_id, []).extend(
                (value.seq, literal, value.key) for literal in literals
            )
    for run_id, wanted in by_run.items():
        run = runs(run_id)
        if run.policy_version != 3:
            continue  # its writer had no echo duty (section 12.8)
        _check_run(run_id, run, wanted)


def _check_run(run_id: str, run: EchoRun, wanted: list[tuple[int, str, str]]) -> None:
    inherited = [text for _at, _under, text in conversation_texts(dict(run.initial_state))]
    # (seq committed, literal) pairs the run held in clear at or before that seq
    cleared = {(s, lit) for s, lit, _key in wanted if any(lit in text for text in inherited)}
    for seq, type_, body in run.bodies:
        scanned = scanned_value(type_, body) if type(body) is dict else None
        if scanned is None:
            continue
        name, value, path = scanned
        for at, under, text in conversation_texts(value, name, path):
            for committed_at, literal, key in wanted:
                if literal not in text or (committed_at, literal) in cleared:
                    continue
                if seq <= committed_at:  # in clear before it was committed: not hidden by it
                    cleared.add((committed_at, literal))
                    continue
                raise VerificationError(
                    run_id,
                    seq,
                    f"{json_path(at)} (under {under!r}) quotes in clear the value committed "
                    f"under {key!r} at seq {committed_at} (echo redaction: it must be "
                    "committed)",
                    code="leak",
                )
