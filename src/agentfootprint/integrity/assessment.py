"""The answer's standing: one fold over the committed record (upstream's answer layer).

:func:`assess` reads a run's state (the committed state it ended with) and ``since`` (the
lengths, at the run's start, of the lists that only grow: ``history``, ``argument_rows``,
``period_rows``), and says what the record holds against the run's answer:

* ``reasons``: each reason of :data:`REASONS` that one committed row of this turn supports,
  in upstream's fold order, each named once;
* ``checked``: the checks that had something of this turn to read (:data:`CHECKS`);
* ``standing``: ``ask`` (a reason of the ask class: the run waits on a person), ``not-sure``
  (any other reason), ``consistent`` (a check ran and no reason fired: never a verification),
  ``not-assessed`` (nothing on the record to check the answer against).

Upstream has a fifth standing, ``known``, which needs a SUPPORTING row: a passed answer
validation for the answer's exact bytes. This project has no answer validation, and no row
here supports an answer (an argument row, a period row or a found value only fails to refute
it), so ``known`` never appears: "never known from silence".

"This turn" is what the run appended: the tool results the history gained after
``since["history"]`` (each read with its call, which a run answering a pause finds before
its start), the argument and period rows past their ``since`` lengths. The answer is the
model's last reply (``last_response.content``, which a standing line never changes); a run
that pauses has none. Every value the answer states is looked for in every tool result of
the history (:class:`~agentfootprint.integrity.evidence.EvidenceIndex`), earlier turns' too.

Pure and total: the same state and ``since`` give the same assessment, in the run and
afterwards from the log (``agentfootprint assess``); a malformed state never raises (what
cannot be read supports no reason and runs no check). It reads only the keys it needs,
through ``state.get`` (a stage's tracked reads name exactly those).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from agentfootprint.integrity.evidence import EvidenceIndex, answer_values
from agentfootprint.integrity.rail import ToolCall, is_absence, read_result, tool_calls_of

__all__ = [
    "CHECKS",
    "CHECK_WORDS",
    "GROWING",
    "MAX_CLAUSES",
    "REASONS",
    "STANDINGS",
    "Reason",
    "assess",
    "line",
    "recorded_form",
    "since_of",
]

Standing = Literal["ask", "not-sure", "consistent", "not-assessed"]
#: the standings, strongest first (upstream's precedence, less ``known``: see the docstring)
STANDINGS: Final[tuple[Standing, ...]] = ("ask", "not-sure", "consistent", "not-assessed")
#: the lists that only grow, whose lengths at a run's start say where its turn begins
GROWING: Final = ("history", "argument_rows", "period_rows")
#: the non-assumed clauses a standing line names before "… and N more" (upstream's cap)
MAX_CLAUSES: Final = 12


@dataclass(frozen=True, kw_only=True, slots=True)
class Reason:
    """One row of the closed table: a reason, its layer and class, upstream's words for it,
    and the state keys it reads."""

    reason: str
    layer: int | None  #: upstream's honesty layer (None: every layer)
    klass: Literal["ask", "not-sure"]
    words: str  #: upstream's ``REASON_WORDS`` clause, verbatim
    reads: tuple[str, ...]


#: Upstream's reasons that this project reads from its own committed rows, in upstream's fold
#: order. Left out, with no row here to read them from: ``coverage-gap`` (no coverage
#: envelope), ``sources-conflict`` (no conflict row), ``value-survived-revision`` (no answer
#: revision), ``steps-unfinished`` (no skill steps), ``answer-check-failed`` and
#: ``check-unreachable`` (no answer validation). This project adds no reason of its own.
REASONS: Final[tuple[Reason, ...]] = (
    # a pause waiting for a person (a consent, a tool's own question): ``pending`` present
    # and not the inputs layer's ask
    Reason(
        reason="asked",
        layer=None,
        klass="ask",
        words="a question the run asked is still waiting for its answer",
        reads=("pending",),
    ),
    # upstream's ``argumentAsk`` waiting: here the inputs layer's input pause, ``pending``
    # with ``context.agentfootprint.ask == "arguments"``
    Reason(
        reason="argument-asked",
        layer=2,
        klass="ask",
        words="the run asked you for values its calls need, and the answer has not come yet",
        reads=("pending",),
    ),
    # an argument row of this turn with ``source: "default"`` (its clause is per row:
    # ``words`` is upstream's template)
    Reason(
        reason="argument-assumed",
        layer=2,
        klass="not-sure",
        words="{argument} = {value} was assumed by {tool}'s rule, not given by you",
        reads=("argument_rows", "history"),
    ),
    # an argument row of this turn with ``source: "model"`` (every row here is of a ruled
    # argument)
    Reason(
        reason="argument-unverified",
        layer=2,
        klass="not-sure",
        words="a value a call ran with came from the model, with no source on the record",
        reads=("argument_rows",),
    ),
    # an ``af.absent`` envelope among this turn's tool results
    Reason(
        reason="declared-absent",
        layer=3,
        klass="not-sure",
        words="a tool said nothing matched",
        reads=("history",),
    ),
    # a top-level empty array among this turn's tool results
    Reason(
        reason="empty-undeclared",
        layer=3,
        klass="not-sure",
        words="a lookup came back empty without saying what it searched",
        reads=("history",),
    ),
    Reason(
        reason="period-not-held",
        layer=3,
        klass="not-sure",
        words="a tool's data does not reach the time the question asked about",
        reads=("period_rows",),
    ),
    Reason(
        reason="period-partly-held",
        layer=3,
        klass="not-sure",
        words="a tool's data covers only part of the time the question asked about",
        reads=("period_rows",),
    ),
    Reason(
        reason="period-unknown",
        layer=3,
        klass="not-sure",
        words="a tool could not say what time its data covers",
        reads=("period_rows",),
    ),
    Reason(
        reason="period-undeclared",
        layer=3,
        klass="not-sure",
        words="a tool did not say what time its result covers",
        reads=("period_rows",),
    ),
    # a value the answer states that no tool result of the history carries
    Reason(
        reason="value-unsupported",
        layer=4,
        klass="not-sure",
        words="names or numbers in the answer appear in no tool result",
        reads=("last_response", "history"),
    ),
    Reason(
        reason="stopped-early",
        layer=4,
        klass="not-sure",
        words="the run stopped before the model finished",
        reads=("stopped_early",),
    ),
)
_BY_NAME: Final = {r.reason: r for r in REASONS}
#: the period row verdicts that fire a reason (``covered`` fires none)
_PERIOD_REASONS: Final = {
    "not-held": "period-not-held",
    "partly-held": "period-partly-held",
    "unknown": "period-unknown",
    "undeclared": "period-undeclared",
}

#: the checks this project runs, in upstream's order, with upstream's ``CHECK_WORDS``
CHECK_WORDS: Final[Mapping[str, str]] = {
    "argument-rules": "argument rules",
    "result-period": "the time each result covered",
    "result-shape": "what came back",
    "names-and-numbers": "names and numbers",
}
CHECKS: Final = tuple(CHECK_WORDS)

_ASK_LINE: Final = "Ask \u2014 the run stopped to ask a question before it could answer."
_NOT_ASSESSED_LINE: Final = "Not assessed \u2014 no check applied to this answer."
#: upstream's clause when no assumed value can be named (a crafted assessment)
_ASSUMED_UNNAMED: Final = (
    "a before-tool rule set a value a call ran with and did not say where it came from"
)


def since_of(state: Any) -> dict[str, int]:
    """The lengths of the growing lists in ``state`` (a run's starting state): its
    ``since``. A key that is not a list counts 0."""
    if not isinstance(state, Mapping):
        return dict.fromkeys(GROWING, 0)
    return {key: len(_list(state.get(key))) for key in GROWING}


def assess(
    state: Mapping[str, Any],
    since: Mapping[str, int],
    index: Callable[[], EvidenceIndex] | None = None,
) -> dict[str, Any]:
    """The fold: ``{"standing", "reasons", "checked"}`` (reason and check names, in table
    order), and ``"assumed"`` (``[{"tool", "argument", "value"?}]``, what the standing line
    names) when ``argument-assumed`` fired. See the module docstring. ``index``: the evidence
    index of ``state``'s history, when the caller keeps one (a run's cache); else it is
    built here."""
    if not isinstance(state, Mapping):
        state = {}
    if not isinstance(since, Mapping):
        since = {}
    fired: set[str] = set()
    checked: set[str] = set()
    pending = state.get("pending")
    if pending is not None:
        fired.add("argument-asked" if _argument_ask(pending) else "asked")
    history = _list(state.get("history"))
    first = _start(since, "history", len(history))
    calls = tool_calls_of(history, _turn_start(history, first))
    assumed = _argument_rows(state, since, calls, fired, checked)
    for call in calls:
        if call.history_index < first or call.content is None or call.is_error:
            continue  # a result an earlier run appended, no result, or an error
        checked.add("result-shape")
        value = read_result(call.content)
        if is_absence(value):
            fired.add("declared-absent")
        elif isinstance(value, list) and not value:
            fired.add("empty-undeclared")
    for row in _new_rows(state, since, "period_rows"):
        checked.add("result-period")
        verdict = row.get("verdict")
        if isinstance(verdict, str) and verdict in _PERIOD_REASONS:
            fired.add(_PERIOD_REASONS[verdict])
    response = state.get("last_response")
    answer = response.get("content") if isinstance(response, Mapping) else None
    values = answer_values(answer) if pending is None and isinstance(answer, str) else []
    if values:
        evidence = index() if index is not None else EvidenceIndex.of(history)
        if not evidence.truncated:  # a truncated index could call a served value unserved
            checked.add("names-and-numbers")
            if not all(evidence.serves(value) for value in values):
                fired.add("value-unsupported")
    if isinstance(state.get("stopped_early"), Mapping):
        fired.add("stopped-early")
    reasons = [r.reason for r in REASONS if r.reason in fired]
    out: dict[str, Any] = {
        "standing": _standing(reasons, checked),
        "reasons": reasons,
        "checked": [c for c in CHECKS if c in checked],
    }
    if "argument-assumed" in fired:
        out["assumed"] = assumed
    return out


def recorded_form(assessment: Mapping[str, Any], standing_line: bool) -> dict[str, Any]:
    """What the answer layer commits as ``answer_assessment``: the standing, the reason and
    check names, and, with ``standing_line``, the line (never the assumed values alone)."""
    out: dict[str, Any] = {
        "standing": assessment.get("standing"),
        "reasons": list(assessment.get("reasons") or ()),
        "checked": list(assessment.get("checked") or ()),
    }
    if standing_line:
        out["line"] = line(assessment)
    return out


def line(assessment: Mapping[str, Any]) -> str:
    """Upstream's standing line (``STANDING_LINE_VERSION`` 1) for an assessment of
    :func:`assess`: the standing's opening and, for ``not-sure``, one clause per reason in
    fold order (``argument-assumed`` one per assumed value, never capped; the others at most
    :data:`MAX_CLAUSES`, then "… and N more (in the run record)")."""
    if not isinstance(assessment, Mapping):
        return _NOT_ASSESSED_LINE
    standing = assessment.get("standing")
    if standing == "ask":
        return _ASK_LINE
    if standing == "not-sure":
        return "Not sure \u2014 " + "; ".join(_clauses(assessment)) + "."
    if standing == "consistent":
        ran = [c for c in _strings(assessment.get("checked")) if c in CHECK_WORDS]
        names = " \u00b7 ".join(dict.fromkeys(CHECK_WORDS[c] for c in ran))
        if len(ran) == 1:
            return (
                "Consistent with the run's record \u2014 1 check ran and did not fire: "
                f"{names}. This is not a verification."
            )
        return (
            f"Consistent with the run's record \u2014 {len(ran)} checks ran and none fired: "
            f"{names}. This is not a verification."
        )
    return _NOT_ASSESSED_LINE


def _clauses(assessment: Mapping[str, Any]) -> list[str]:
    clauses: list[str] = []
    left_out = 0
    named = 0
    for reason in dict.fromkeys(_strings(assessment.get("reasons"))):
        if reason == "argument-assumed":
            clauses.extend(_assumed_clauses(assessment.get("assumed")))
            continue
        known = _BY_NAME.get(reason)
        if known is None:
            continue
        if named >= MAX_CLAUSES:
            left_out += 1
            continue
        named += 1
        clauses.append(known.words)
    if left_out:
        clauses.append(f"\u2026 and {left_out} more (in the run record)")
    return clauses


def _assumed_clauses(assumed: Any) -> list[str]:
    """One clause per distinct (tool, argument, value shown): upstream's with the value, or,
    where the record holds no value, upstream's hidden form less its parenthesis (which names
    a tool's view this project does not have)."""
    out: list[str] = []
    for entry in assumed if isinstance(assumed, list) else ():
        if not isinstance(entry, Mapping):
            continue
        tool, argument = entry.get("tool"), entry.get("argument")
        if not isinstance(tool, str) or not isinstance(argument, str):
            continue
        if "value" in entry:
            shown = _stringify(entry["value"])
            clause = f"{argument} = {shown} was assumed by {tool}'s rule, not given by you"
        else:
            clause = f"{argument} was assumed by {tool}'s rule, not given by you"
        if clause not in out:
            out.append(clause)
    return out or [_ASSUMED_UNNAMED]


def _stringify(value: Any) -> str:
    """``JSON.stringify(value)``: compact, non-ASCII as it is."""
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return "null"


def _standing(reasons: list[str], checked: set[str]) -> Standing:
    if any(_BY_NAME[r].klass == "ask" for r in reasons):
        return "ask"
    if reasons:
        return "not-sure"
    return "consistent" if checked else "not-assessed"


def _argument_ask(pending: Any) -> bool:
    """``pending`` is the inputs layer's ask for arguments (an input pause whose context's
    reserved member says ``"ask": "arguments"``)."""
    if not isinstance(pending, Mapping) or pending.get("kind") != "input":
        return False
    context = pending.get("context")
    ours = context.get("agentfootprint") if isinstance(context, Mapping) else None
    return isinstance(ours, Mapping) and ours.get("ask") == "arguments"


def _argument_rows(
    state: Mapping[str, Any],
    since: Mapping[str, Any],
    calls: list[ToolCall],
    fired: set[str],
    checked: set[str],
) -> list[dict[str, Any]]:
    """Read this turn's argument rows (``{"tool", "tool_call_id", "argument", "source",
    ...}``, the inputs layer's ``agentfootprint.findings.argument`` members): fire
    ``argument-assumed`` and ``argument-unverified``; the assumed entries, each with the
    value where the record holds one (the row's own ``value``, else the call's arguments
    as the model sent them)."""
    assumed: list[dict[str, Any]] = []
    arguments = {c.tool_call_id: c.arguments for c in calls}
    for row in _new_rows(state, since, "argument_rows"):
        tool, argument = row.get("tool"), row.get("argument")
        if not isinstance(tool, str) or not isinstance(argument, str):
            continue
        checked.add("argument-rules")
        source = row.get("source")
        if source == "model":
            fired.add("argument-unverified")
        elif source == "default":
            fired.add("argument-assumed")
            entry: dict[str, Any] = {"tool": tool, "argument": argument}
            call_id = row.get("tool_call_id")
            sent = arguments.get(call_id) if isinstance(call_id, str) else None
            if "value" in row:
                entry["value"] = row["value"]
            elif isinstance(sent, Mapping) and argument in sent:
                entry["value"] = sent[argument]
            if entry not in assumed:
                assumed.append(entry)
    return assumed


def _list(value: Any) -> Sequence[Any]:
    """``value`` when it is a list (a committed list may be a shared version), else ()."""
    if isinstance(value, Sequence) and not isinstance(value, str | bytes | bytearray):
        return value
    return ()


def _strings(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list | tuple) else []


def _start(since: Mapping[str, Any], key: str, length: int) -> int:
    """Where this run's part of a list begins: its ``since`` length, within the list."""
    given = since.get(key, 0)
    if isinstance(given, bool) or not isinstance(given, int) or given < 0:
        return 0
    return min(given, length)


def _new_rows(state: Mapping[str, Any], since: Mapping[str, Any], key: str) -> list[Any]:
    """The rows of ``key`` this run appended (objects only)."""
    rows = _list(state.get(key))
    return [r for r in rows[_start(since, key, len(rows)) :] if isinstance(r, Mapping)]


def _turn_start(history: Sequence[Any], first: int) -> int:
    """Where the calls whose results this run appended begin: the run's own user message
    (a new turn), else the last one before it (a run answering a pause finishes a batch
    its parent asked for), else the start."""
    for i in range(first, len(history)):
        if _is_user(history[i]):
            return i
    for i in range(min(first, len(history)) - 1, -1, -1):
        if _is_user(history[i]):
            return i
    return 0


def _is_user(message: Any) -> bool:
    return isinstance(message, Mapping) and message.get("role") == "user"
