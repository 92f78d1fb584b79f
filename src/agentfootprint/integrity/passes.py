"""One run's integrity pass: every armed check, driven item by item, and its ledger.

The run drives an :class:`IntegrityPass` as things happen (a reply, a tool result, the
answer); ``agentfootprint findings --recompute`` drives a fresh one over the log, item by item
in the same order. Both go through the same methods, so "recorded equals recomputed" compares
one path with itself on the record, and a difference means the log and today's code disagree.

Which checks are armed follows the seed: ``unsupported-argument`` by a tool declaring
``arguments_from``; ``empty-lookup`` by ``notice_empty_lookups`` and such a tool;
``column-type-mismatch`` and ``missing-column`` by ``check_column_types`` other than ``off``
and a tool declaring ``result_columns``; ``prior-turn-evidence`` by
``notice_prior_turn_evidence``. Every check is a row of the ledger, armed or not: an unarmed
check is a row, never a silence.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agentfootprint.integrity import column_types, empty_lookup, prior_turn, unsupported
from agentfootprint.integrity.contracts import Contract
from agentfootprint.integrity.evidence import EvidenceIndex
from agentfootprint.integrity.rail import (
    NOT_APPLICABLE,
    Finding,
    Judgement,
    Ledger,
    ToolCall,
)

__all__ = [
    "CHECKS",
    "Armed",
    "Arming",
    "CanaryTally",
    "DeadCheck",
    "IntegrityPass",
    "canary_judgements",
    "canary_tally",
]

#: every check and its seam, in the ledger's order
CHECKS: tuple[tuple[str, str], ...] = (
    (unsupported.CHECK, unsupported.SEAM),
    (column_types.CHECKS[0], column_types.SEAM),
    (column_types.CHECKS[1], column_types.SEAM),
    (empty_lookup.CHECK, empty_lookup.SEAM),
    (prior_turn.CHECK, prior_turn.SEAM),
)
_CANARIES: dict[str, Callable[[], Judgement]] = {
    unsupported.CHECK: unsupported.canary,
    column_types.CHECKS[0]: column_types.canary,
    empty_lookup.CHECK: empty_lookup.canary,
    prior_turn.CHECK: prior_turn.canary,
}


def canary_judgements() -> dict[str, Judgement]:
    """Each check's own pure function on its synthetic defect."""
    return {check: canary() for check, canary in _CANARIES.items()}


@dataclass(frozen=True, kw_only=True, slots=True)
class Armed:
    """The dials (as ``run.open`` records them) and the declarations they pair with."""

    posture: str = "observe"  #: ``observe`` or ``dev``
    column_types: str = "off"  #: ``off``, ``warn`` or ``enforce``
    empty_lookups: bool = False
    prior_turn: bool = False

    def checks(self, contracts: Mapping[str, Contract]) -> dict[str, bool]:
        """Each check's name: armed or not, with these declarations."""
        sourced = any(c.arguments_from for c in contracts.values())
        columns = self.column_types != "off" and any(c.result_columns for c in contracts.values())
        return {
            unsupported.CHECK: sourced,
            column_types.CHECKS[0]: columns,
            column_types.CHECKS[1]: columns,
            empty_lookup.CHECK: self.empty_lookups and sourced,
            prior_turn.CHECK: self.prior_turn,
        }

    def any(self, contracts: Mapping[str, Contract]) -> bool:
        """A check is armed with these declarations (:attr:`Arming.checking`)."""
        return Arming.of(self, contracts).checking

    @staticmethod
    def from_options(options: Mapping[str, Any]) -> Armed:
        """From resolved (or recorded) options; anything unreadable reads as off."""
        posture = options.get("integrity_posture")
        columns = options.get("check_column_types")
        return Armed(
            posture=posture if posture in ("observe", "dev") else "observe",
            column_types=columns if columns in ("warn", "enforce") else "off",
            empty_lookups=options.get("notice_empty_lookups") is True,
            prior_turn=options.get("notice_prior_turn_evidence") is True,
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class Arming:
    """What the dials arm with these declarations: a pure function of both, made once (for
    an agent's settings, or a recomputed run at its open) and read by each of its runs'
    passes, which never change it."""

    armed: Armed
    contracts: Mapping[str, Contract]
    on: Mapping[str, bool]  #: each check's name: armed or not
    #: the tools whose calls the unsupported-argument check reads (``arguments_from``)
    sourced: frozenset[str]
    #: a check judges the choice seam (a reply's calls): else a reply is only counted
    at_choice: bool
    #: a check judges the write seam (a tool's result): else a result is only counted
    at_write: bool
    #: a check is armed, or the posture is ``dev`` (else the run is not checked at all)
    checking: bool

    @staticmethod
    def of(armed: Armed, contracts: Mapping[str, Contract]) -> Arming:
        contracts = dict(contracts)
        on = armed.checks(contracts)
        return Arming(
            armed=armed,
            contracts=contracts,
            on=on,
            sourced=frozenset(t for t, c in contracts.items() if c.arguments_from),
            at_choice=on[unsupported.CHECK],
            at_write=any(on[name] for name in (*column_types.CHECKS, empty_lookup.CHECK)),
            checking=armed.posture == "dev" or any(on.values()),
        )


@dataclass(frozen=True, slots=True)
class DeadCheck:
    """Why a check is dead (``integrity_posture="dev"``): upstream's ``checker_dead``."""

    check: str
    seam: str
    detail: str

    @property
    def message(self) -> str:
        return (
            f"[integrity] checker_dead: {self.check!r} at the {self.seam} seam {self.detail} "
            "A green report from a check that never ran is decoration, not health: re-wire "
            "the check or disarm it."
        )


@dataclass(frozen=True, slots=True)
class CanaryTally:
    """What the canaries file in a run's ledger: each row's synthetic findings, and the
    canaries missed. A pure function of constant input (:func:`canary_tally`), so an agent
    makes it once for all its runs."""

    synthetic: tuple[tuple[str, int], ...]
    missed: tuple[DeadCheck, ...]


def canary_tally(judged: Mapping[str, Judgement] | None = None) -> CanaryTally:
    """Every check's canary (armed or not, as upstream) counted: ``judged``, or
    :func:`canary_judgements`."""
    judged = canary_judgements() if judged is None else judged
    synthetic: dict[str, int] = {}
    missed: list[DeadCheck] = []
    for check in _CANARIES:
        caught = [f for f in judged[check].findings if f.synthetic]
        for name in column_types.CHECKS if check in column_types.CHECKS else (check,):
            synthetic[name] = synthetic.get(name, 0) + sum(1 for f in caught if f.check == name)
        if not caught:
            seam = dict(CHECKS)[check]
            missed.append(DeadCheck(check, seam, "was handed 1 synthetic defect and caught 0."))
    return CanaryTally(tuple(synthetic.items()), tuple(missed))


class IntegrityPass:
    """The armed checks of one run, fed item by item; see the module docstring."""

    def __init__(self, arming: Arming) -> None:
        self.armed = arming.armed
        self.contracts = arming.contracts
        self.on = arming.on
        self.sourced = arming.sourced
        self.at_choice = arming.at_choice
        self.at_write = arming.at_write
        self.ledger = Ledger(CHECKS)
        self.produced = empty_lookup.Produced()
        self.canaries_missed: list[DeadCheck] = []
        #: the items each seam met (a reply, a tool result, an answer): work existed
        self.met: dict[str, int] = {"choice": 0, "write": 0, "claim": 0}

    # -- the canaries (``dev``): each check's own function on its synthetic defect

    def canaries(self, tally: CanaryTally | None = None) -> None:
        """Every check's canary counted in the ledger; a miss is kept in
        :attr:`canaries_missed` (the run fails on it). ``tally``: the canaries' outcome made
        once for an agent (:func:`canary_tally`); else they are run here."""
        tally = canary_tally() if tally is None else tally
        rows = self.ledger.rows
        for name, count in tally.synthetic:
            rows[name].synthetic += count
        self.canaries_missed.extend(tally.missed)

    def meets(self, seam: str) -> None:
        """The run met an item of ``seam`` (a reply, a tool result, an answer): counted by
        the caller, apart from the checks, so a check that files nothing is seen dead."""
        self.met[seam] += 1

    # -- the choice seam: a reply's calls against the frame the model chose from

    def judge_choice(
        self,
        calls: Sequence[ToolCall],
        frame: unsupported.Frame | None,
        entries: Sequence[Mapping[str, str]] = (),
    ) -> list[tuple[Judgement, list[dict[str, str]]]]:
        """One reply's armed calls judged against ``frame`` (pure, nothing filed): each
        call's judgement and the external grounds its excusals used; empty when the check
        is off, no call is armed or there is no frame."""
        if not self.on[unsupported.CHECK] or frame is None:
            return []
        return [
            unsupported.judge_arguments(self.contracts[c.tool], c, frame, entries)
            for c in calls
            if c.tool in self.sourced
        ]

    @staticmethod
    def unserved(judged: Sequence[tuple[Judgement, Any]]) -> bool:
        """Whether a value of a reply judged with no external ground is served nowhere in
        its frame: only then are the app's external grounds asked for (a value the frame
        serves needs no excuse)."""
        return any(judgement.findings for judgement, _ in judged)

    def choice(
        self,
        calls: Sequence[ToolCall],
        frame: unsupported.Frame | None,
        entries: Sequence[Mapping[str, str]] = (),
        *,
        judged: Sequence[tuple[Judgement, list[dict[str, str]]]] | None = None,
    ) -> tuple[list[Finding], list[dict[str, str]]]:
        """One reply filed (one disposition for the reply): its armed calls judged, or
        ``judged`` (:meth:`judge_choice` of the same calls, frame and entries); the new
        findings and the external grounds each excusal used."""
        check = unsupported.CHECK
        if not self.on[check]:
            return [], []
        if judged is None:
            judged = self.judge_choice(calls, frame, entries)
        if not judged:
            self.ledger.file(check, NOT_APPLICABLE)
            return [], []
        findings = [f for judgement, _ in judged for f in judgement.findings]
        used = [entry for _, excused in judged for entry in excused]
        return self.ledger.file(check, Judgement.found(*findings)), used

    def wants_frame(self, calls: Sequence[ToolCall]) -> bool:
        """A reply with these calls is judged against its frame (else none is built)."""
        return self.at_choice and any(c.tool in self.sourced for c in calls)

    # -- the write seam: a tool's result, as the model is about to read it

    def columns(self, call: ToolCall) -> tuple[list[Finding], str | None, tuple[Finding, ...]]:
        """The column checks of one result: the new findings (by identity), under
        ``enforce`` the refusal the model reads instead of the rows (None: the rows stand),
        and every finding the refusal rests on (a repeat of an earlier one included)."""
        mismatch = column_types.CHECKS[0]
        if not self.on[mismatch]:
            return [], None, ()
        contract = self.contracts.get(call.tool)
        if contract is None or not contract.result_columns:
            judgement = NOT_APPLICABLE
        else:
            judgement = column_types.judge_columns(contract, call, mode=self.armed.column_types)
        filed, refusal = self._columns_filed(call.tool, judgement)
        return filed, refusal, judgement.findings

    def columns_enforced(self, tool: str, findings: Sequence[Finding]) -> list[Finding]:
        """The recompute's door for a result the run refused under ``enforce``: the rows are
        not in the log, so the recorded findings (whose refusal the history holds, checked
        by the caller) are filed in their place."""
        filed, _ = self._columns_filed(tool, Judgement.found(*findings))
        return filed

    def _columns_filed(self, tool: str, judgement: Judgement) -> tuple[list[Finding], str | None]:
        if not judgement.findings:  # the common case: one verdict for both checks
            for name in column_types.CHECKS:
                self.ledger.file(name, judgement)
            return [], None
        fresh: set[int] = set()
        for name in column_types.CHECKS:
            own = tuple(f for f in judgement.findings if f.check == name)
            filed = self.ledger.file(name, Judgement(verdict=judgement.verdict, findings=own))
            fresh.update(map(id, filed))
        filed = [f for f in judgement.findings if id(f) in fresh]  # in the judge's order
        refusal = None
        if judgement.findings and self.armed.column_types == "enforce":
            refusal = column_types.refusal_text(tool, judgement.findings)
        return filed, refusal

    def empty_lookup(self, call: ToolCall) -> list[Finding]:
        """The empty-lookup check of one result, against the results served before the
        call was asked for (:meth:`saw`)."""
        check = empty_lookup.CHECK
        if not self.on[check]:
            return []
        contract = self.contracts.get(call.tool)
        if contract is None or not contract.arguments_from:
            return self.ledger.file(check, NOT_APPLICABLE)
        return self.ledger.file(
            check, empty_lookup.judge_empty_lookup(contract, call, self.produced)
        )

    def reads_grounds(self, call: ToolCall) -> bool:
        """Whether the empty-lookup check of ``call`` reads the results served before it
        (:attr:`produced`): only a lookup that came back empty does, so the run brings them
        up to date only then."""
        return self.on[empty_lookup.CHECK] and empty_lookup.came_back_empty(call)

    def saw(self, call: ToolCall) -> None:
        """A result the model has been served (a ground for later calls' lookups)."""
        if self.on[empty_lookup.CHECK]:
            self.produced.add(call)

    # -- the claim seam: the final answer

    def claim(self, answer: str, index: EvidenceIndex) -> list[Finding]:
        """The answer against the index of the history it ends (the turn being answered
        is the index's last)."""
        check = prior_turn.CHECK
        if not self.on[check]:
            return []
        judgement = prior_turn.judge_prior_turn(
            answer, index, index.current_turn, index.tool_results_this_turn
        )
        return self.ledger.file(check, judgement)

    # -- the run's end

    def disposition(self) -> dict[str, Any]:
        """``agentfootprint.integrity.disposition``'s payload."""
        on = self.on
        rows = [row.json(armed=on[check]) for check, row in self.ledger.rows.items()]
        return {"posture": self.armed.posture, "rows": rows}

    def dead(self) -> DeadCheck | None:
        """The first armed check that met work and filed nothing (upstream's liveness
        theorem), or the first canary missed; None: every check is alive."""
        if self.canaries_missed:
            return self.canaries_missed[0]
        for check, seam in CHECKS:
            row = self.ledger.rows[check]
            if self.on[check] and self.met[seam] and row.work == 0:
                return DeadCheck(
                    check,
                    seam,
                    "filed no disposition at all in a run where work existed: not pass, not "
                    "fail, not not-applicable, not unreachable.",
                )
        return None
