"""The integrity findings of a run, recorded and recomputed from the log.

:func:`findings` verifies the run (and its ancestors), then reads what it recorded:
``agentfootprint.integrity.context_error`` findings, ``external_ground_used`` excusals and
the ``disposition`` ledger. With ``recompute=True`` it also drives a fresh
:class:`~agentfootprint.integrity.passes.IntegrityPass` over the verified events, item by item
in the order the run met them: each reply against the request it was served (rebuilt by the
projection), each tool result as the history holds it, the answer at the end. The dials come
from ``run.open``'s options and the declarations from the committed ``tool_contracts``; the
external grounds from the recorded decisions. A refusal under ``enforce`` keeps no rows: its
recorded findings are taken when the history holds exactly the refusal they make, and the
difference is reported otherwise.

Recorded equal to recomputed means today's checks, run on the log, file exactly what the run
filed. It says nothing about whether the answer is right: a check that did not fire is not
evidence that nothing is wrong (docs/integrity.md).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentfootprint.audit.assessment import AssessmentReport, assess_run
from agentfootprint.audit.read import RunReader
from agentfootprint.audit.sources import check_run_id, naming_run, opened
from agentfootprint.integrity.column_types import refusal_text
from agentfootprint.integrity.contracts import Contract, read_contracts
from agentfootprint.integrity.evidence import EvidenceIndex
from agentfootprint.integrity.passes import Armed, Arming, IntegrityPass
from agentfootprint.integrity.period import period_rows_of
from agentfootprint.integrity.rail import Finding, ToolCall, tool_calls_of
from agentfootprint.integrity.reading import result_of
from agentfootprint.integrity.records import (
    CONTEXT_ERROR,
    DISPOSITION,
    EXTERNAL_GROUND_USED,
    EXTERNAL_GROUNDS,
    ROWS_REFUSED,
    call_of,
    findings_of,
)
from agentfootprint.integrity.unsupported import frame_of, read_entries
from agentfootprint.logformat.shared_lists import as_list
from agentfootprint.verify.verifier import RowSource, Verifier, shared_verifier

__all__ = ["FindingsReport", "Trail", "findings"]

#: the stage whose commit holds the results of a reply's tool calls, each through the
#: tool-result hooks (``features.tool_dispatch.TOOL_CALLS_STAGE``: named here, as the read
#: side imports no feature)
_TOOL_STAGE = "tool-calls"
#: the turn's first stage (``features.turn.SEED_STAGE``): the integrity feature commits its
#: agent's declarations there (its ``turn_start`` hook)
_SEED_STAGE = "seed"
#: the option ``run.open`` records whenever the run's agent armed a check (``observe`` or
#: ``dev``): it took part, and judged with the declarations its turn's start committed
POSTURE = "integrity_posture"
#: the stage in which logs of an earlier build committed the declarations, after the start
_CONTRACTS_STAGE = "integrity-contracts"
#: the inputs layer's fills (``features.inputs_layer.FILLS``): call id -> ``{"values",
#: "refused"}``, the arguments a ruled call ran with beside the model's
_FILLS = "argument_fills"

_KINDS = (
    CONTEXT_ERROR,
    EXTERNAL_GROUND_USED,
    EXTERNAL_GROUNDS,
    ROWS_REFUSED,
    DISPOSITION,
)


@dataclass(frozen=True, kw_only=True, slots=True)
class Trail:
    """What one side says: the findings in order, the excusals, the disposition, the
    results layer's period rows of the run and the answer's standing (None: not armed)."""

    findings: tuple[Mapping[str, Any], ...] = ()
    used: tuple[Mapping[str, Any], ...] = ()
    disposition: Mapping[str, Any] | None = None
    period_rows: tuple[Mapping[str, Any], ...] = ()
    standing: Mapping[str, Any] | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class FindingsReport:
    """A run's recorded findings, and (when asked) the recomputed ones beside them."""

    run_id: str
    outcome: str
    armed: bool  #: a check was armed (the run filed a disposition)
    recorded: Trail
    recomputed: Trail | None = None
    differences: tuple[str, ...] = field(default=())
    #: the run was recorded under a redaction policy: the results layer and the answer layer
    #: read values a policy may have committed, so their rows are not recomputed (the
    #: integrity checks are refused beside a policy)
    redacted: bool = False

    @property
    def agrees(self) -> bool:
        return not self.differences


def findings(
    source: RowSource | str | os.PathLike[str],
    run_id: str,
    *,
    recompute: bool = False,
    verifier: Verifier | None = None,
) -> FindingsReport:
    """``run_id``'s integrity findings (see the module docstring); the run is verified
    first (a failure raises)."""
    check_run_id(run_id)
    with opened(source) as rows, naming_run():
        checker = verifier or shared_verifier(rows)
        verified = checker.verify(run_id)
        reader = RunReader(rows, verifier=checker)
        walk = _Walk(reader, run_id, recompute)
        walk.run()
        standing = assess_run(rows, run_id)
        recorded = walk.recorded(standing)
        outcome = str((verified.close or {}).get("outcome", "unsealed"))
        redacted = verified.policy is not None
        if not recompute:
            return FindingsReport(
                run_id=run_id,
                outcome=outcome,
                armed=_armed(recorded),
                recorded=recorded,
                redacted=redacted,
            )
        again = walk.recomputed(outcome, standing)
        if redacted:  # not recomputed: what the run recorded stands on both sides
            again = dataclasses.replace(
                again, period_rows=recorded.period_rows, standing=recorded.standing
            )
        differences = _differences(recorded, again)
        if not redacted and recorded.standing == again.standing and standing.matches is False:
            # the committed standing equals the fold, the recorded event does not
            out = standing.recorded_event
            differences.append(
                f"standing: recorded agentfootprint.answer.assessed {dict(out or {})!r}, "
                f"recomputed {again.standing!r}"
            )
        return FindingsReport(
            run_id=run_id,
            outcome=outcome,
            armed=_armed(recorded) or _armed(again),
            recorded=recorded,
            recomputed=again,
            differences=tuple(differences),
            redacted=redacted,
        )


def _armed(trail: Trail) -> bool:
    return bool(trail.disposition or trail.period_rows or trail.standing)


def _payload(event: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in event.items() if k != "run_id"}


class _Walk:
    """One pass over a verified run: its recorded integrity events, and (recomputing) the
    items the checks meet, fed to a fresh pass as the run met them."""

    def __init__(self, reader: RunReader, run_id: str, recompute: bool) -> None:
        self.reader = reader
        self.run_id = run_id
        self.recompute = recompute
        self.events: dict[str, list[dict[str, Any]]] = {kind: [] for kind in _KINDS}
        self.check: IntegrityPass | None = None
        self.filed: list[Finding] = []
        self.used: list[dict[str, str]] = []
        self.grounds = 0  #: the external grounds decisions read so far
        self.final: Mapping[str, Any] = {}
        # the history as the walk has read it: its length at the last commit, the calls it
        # asked for (id -> tool, arguments), and how far the lookups' grounds reach
        self.seen = -1
        self.asked: dict[str, tuple[str, Any]] = {}
        self.grounded = 0
        self.refused: dict[str, list[dict[str, Any]]] = {}
        self.start: Mapping[str, Any] = {}  #: the state the run started from
        #: the run's open body until its checks are armed (at the commit that shows which
        #: declarations its agent judged with: ``_arm``)
        self.opening: Mapping[str, Any] | None = None
        self.contracts: Mapping[str, Contract] = {}
        self.results_layer = False

    def run(self) -> None:
        request: dict[str, Any] | None = None
        replied = False  #: the commit being read wrote a reply (a failed call writes none)
        state: dict[str, Any] = {}

        def observe(step: Any, before: dict[str, Any]) -> None:
            nonlocal request, replied, state
            state = before
            if step.type == "write" and step.body.get("path") == "last_response":
                replied = True
            elif step.type == "run.open":
                self.start = dict(before)
                if self.recompute:
                    self._open(step.body, before)
            elif step.type == "event" and step.body.get("name") in self.events:
                payload = _payload(step.body.get("payload") or {})
                self.events[step.body["name"]].append(payload)
                if step.body["name"] == ROWS_REFUSED:
                    call_id = payload.get("tool_call_id")
                    if isinstance(call_id, str):
                        self.refused[call_id] = payload.get("findings") or []
            elif step.type == "commit":
                if self.opening is not None:
                    self._arm(before, step.body.get("stage"))
                if self.check is not None:
                    if replied and request is not None:
                        self._reply(request, before.get("last_response"))
                    elif replied:  # a call no receipt marks: its request comes after this
                        unreceipted.append(before.get("last_response"))
                    self._results(
                        before.get("history"),
                        step.body.get("stage") == _TOOL_STAGE,
                        before.get(_FILLS),
                    )
                request, replied = None, False

        unreceipted: list[Any] = []
        for served, receipt in self.reader.served_calls(self.run_id, observe=observe):
            if receipt is None and unreceipted:
                self._reply(served, unreceipted.pop())
            else:
                request = dict(served)
        if self.opening is not None:  # no commit showed the declarations: none were made
            self._arm({}, None)
        self.final = state

    # -- recomputing ------------------------------------------------------------------------

    def _open(self, body: Mapping[str, Any], before: Mapping[str, Any]) -> None:
        self.opening = body  # armed at the commit that shows the declarations (``_arm``)

    def _arm(self, state: Mapping[str, Any], stage: Any) -> None:
        """The checks the run armed, at the commit after which ``state`` holds the
        declarations its agent judged with: a resume's first (it inherits them, committed
        again by the resuming agent), else the turn's start stage's, when ``run.open``
        records that the agent took part (``integrity_posture``, recorded whenever a check is
        armed, or ``results_layer``). A log of an earlier build commits them in an
        ``integrity-contracts`` stage after the start, which arms the checks again (nothing
        is judged in between); one that records neither and has no such stage armed nothing
        and checked nothing, whatever it inherited."""
        body = self.opening or {}
        resumes = body.get("resumes") is not None
        options = body.get("options")
        options = options if isinstance(options, Mapping) else {}
        if not resumes and stage == _SEED_STAGE:
            if POSTURE in options or options.get("results_layer") is True:
                self._armed(options, read_contracts(state.get("tool_contracts")))
            return  # an earlier build's contracts stage, if any, commits next
        self.opening = None
        if resumes or stage == _CONTRACTS_STAGE:
            self._armed(options, read_contracts(state.get("tool_contracts")))
        elif self.check is None and not self.contracts:
            self._armed(options, {})

    def _armed(self, options: Mapping[str, Any], contracts: Mapping[str, Contract]) -> None:
        """The run's pass, armed by ``options`` with ``contracts`` (None: nothing armed)."""
        armed = Armed.from_options(options)
        self.contracts, self.results_layer = contracts, options.get("results_layer") is True
        self.check = None
        arming = Arming.of(armed, contracts)
        if not arming.checking:
            return
        self.check = IntegrityPass(arming)
        if armed.posture == "dev":
            self.check.canaries()
        history = as_list(self.start.get("history") or [])
        self._learn(history, 0)
        self.seen = len(history)

    def _reply(self, request: Mapping[str, Any], response: Any) -> None:
        assert self.check is not None
        self.check.meets("choice")
        raw = response.get("tool_calls") if isinstance(response, Mapping) else None
        calls = [
            call_of(str(c.get("name")), str(c.get("id")), c.get("arguments"))
            for c in raw or ()
            if isinstance(c, Mapping)
        ]
        if not self.check.wants_frame(calls):
            findings, used = self.check.choice(calls, None)
        else:
            frame = frame_of(request)
            judged = self.check.judge_choice(calls, frame)
            decisions = self.events[EXTERNAL_GROUNDS]
            if self.grounds < len(decisions) and self.check.unserved(judged):
                entries = read_entries(decisions[self.grounds].get("entries"))
                self.grounds += 1
                judged = self.check.judge_choice(calls, frame, entries)
            findings, used = self.check.choice(calls, frame, judged=judged)
        self.filed.extend(findings)
        self.used.extend(used)

    def _learn(self, history: Sequence[Any], start: int) -> None:
        for message in history[start:]:
            if isinstance(message, Mapping) and message.get("role") == "assistant":
                for call in message.get("tool_calls") or ():
                    if isinstance(call, Mapping) and isinstance(call.get("id"), str):
                        self.asked[call["id"]] = (str(call.get("name")), call.get("arguments"))

    def _results(self, history: Any, judged: bool, fills: Any = None) -> None:
        """The tool results a commit appended, each judged as the run judged it (``judged``:
        the commit is the tool-calls stage's, whose results the run's hooks saw; an abandoned
        pause's "was not run" results pass none), against the results committed before; a
        call the inputs layer filled is judged with the arguments it ran with (``fills``)."""
        assert self.check is not None
        history = as_list(history or [])
        if len(history) <= self.seen:
            return
        before = self.seen
        for i in range(self.grounded, before):
            message = history[i]
            if isinstance(message, Mapping) and message.get("role") == "tool":
                # a ground is the tool its message names, as the run's reading takes it (an
                # id the provider reused later names another call: not this result's tool)
                self.check.saw(result_of(message, i))
        self.grounded = before
        self._learn(history, before)
        for i in range(before, len(history)) if judged else ():
            message = history[i]
            if isinstance(message, Mapping) and message.get("role") == "tool":
                self._write(_filled(self._call(message, i), fills))
        self.seen = len(history)

    def _call(self, message: Mapping[str, Any], index: int) -> ToolCall:
        result = result_of(message, index)
        tool, arguments = self.asked.get(result.tool_call_id, (result.tool, None))
        made = call_of(tool, result.tool_call_id, arguments)
        return result._replace(tool=made.tool, arguments=made.arguments)

    def _write(self, call: ToolCall) -> None:
        assert self.check is not None
        self.check.meets("write")
        recorded = findings_of(self.refused.get(call.tool_call_id))
        if (
            recorded
            and call.content is not None
            and call.content.startswith(refusal_text(call.tool, recorded))
        ):
            self.filed.extend(self.check.columns_enforced(call.tool, recorded))
        else:
            found, _, _ = self.check.columns(call)
            self.filed.extend(found)
        self.filed.extend(self.check.empty_lookup(call))

    def recorded(self, standing: AssessmentReport) -> Trail:
        dispositions = self.events[DISPOSITION]
        start = len(as_list(self.start.get("period_rows") or []))
        return Trail(
            findings=tuple(self.events[CONTEXT_ERROR]),
            used=tuple(self.events[EXTERNAL_GROUND_USED]),
            disposition=dispositions[-1] if dispositions else None,
            period_rows=tuple(as_list(self.final.get("period_rows") or [])[start:]),
            standing=standing.recorded if standing.recorded_event is not None else None,
        )

    def _period_rows(self) -> tuple[Mapping[str, Any], ...]:
        """The rows the results layer files for this run's results, judged again."""
        history = as_list(self.final.get("history") or [])
        start = len(as_list(self.start.get("history") or []))
        calls = [c for c in tool_calls_of(history) if c.history_index >= start]
        calls.sort(key=lambda c: c.history_index)
        return tuple(period_rows_of(calls, self.contracts, self.results_layer))

    def recomputed(self, outcome: str, standing: AssessmentReport) -> Trail:
        layers = Trail(
            period_rows=self._period_rows(),
            standing=standing.expected if standing.matches is not None else None,
        )
        if self.check is None:
            return layers
        answer = self.final.get("final_answer")
        if (
            self.check.on["prior-turn-evidence"]
            and outcome in ("answered", "stopped_early")
            and isinstance(answer, str)
        ):
            self.check.meets("claim")
            index = EvidenceIndex.of(as_list(self.final.get("history") or []))
            self.filed.extend(self.check.claim(answer, index))
        return Trail(
            findings=tuple(_event_payload(f) for f in self.filed),
            used=tuple(dict(u) for u in self.used),
            disposition=self.check.disposition(),
            period_rows=layers.period_rows,
            standing=layers.standing,
        )


def _filled(call: ToolCall, fills: Any) -> ToolCall:
    """``call`` with the values the inputs layer filled in, as its ``tool_arguments`` hook
    hands them to the tool (and so to the run's checks): a call it refused ran with none."""
    fill = fills.get(call.tool_call_id) if isinstance(fills, Mapping) else None
    if (
        not isinstance(fill, Mapping)
        or fill.get("refused")
        or not isinstance(fill.get("values"), Mapping)
        or not isinstance(call.arguments, Mapping)
    ):
        return call
    return call._replace(arguments={**call.arguments, **fill["values"]})


def _event_payload(finding: Finding) -> dict[str, Any]:
    """A finding as its recorded event holds it."""
    return finding.payload()


def _differences(recorded: Trail, again: Trail) -> list[str]:
    out: list[str] = []
    for what, theirs, ours in (
        ("finding", recorded.findings, again.findings),
        ("external ground used", recorded.used, again.used),
    ):
        for i in range(max(len(theirs), len(ours))):
            left = theirs[i] if i < len(theirs) else None
            right = ours[i] if i < len(ours) else None
            if left != right:
                out.append(f"{what} {i}: recorded {_brief(left)}, recomputed {_brief(right)}")
    if recorded.disposition != again.disposition:
        out.append(
            f"disposition: recorded {recorded.disposition!r}, recomputed {again.disposition!r}"
        )
    if recorded.period_rows != again.period_rows:
        out.append(
            f"period rows: recorded {list(recorded.period_rows)!r}, recomputed "
            f"{list(again.period_rows)!r}"
        )
    if recorded.standing != again.standing:
        out.append(f"standing: recorded {recorded.standing!r}, recomputed {again.standing!r}")
    return out


def _brief(value: Mapping[str, Any] | None) -> str:
    if value is None:
        return "nothing"
    kind = value.get("kind", value.get("source", "?"))
    return f"{kind} {value.get('subjects', value.get('path', ''))!r}"
