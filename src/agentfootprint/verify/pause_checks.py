"""Format v5's pauses, as a verifier checks them (docs/log-format.md sections 5.9, 9.2, 9.3).

A paused run closes with ``pending`` (the question), equal to the ``pending`` its last commit
wrote; the run that continues it names that question in ``run.open``: ``resumes`` (its first
commit, the stage ``resume``, writes the answer) or ``abandons``. Each check raises the
:class:`~agentfootprint.errors.VerificationError` of its section's code; the whole-file check
of one answer per pause is :class:`PauseAnswers`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from agentfootprint.errors import VerificationError
from agentfootprint.logformat.canonical import canon
from agentfootprint.logformat.commitments import is_commitment
from agentfootprint.logformat.log_format_spec import PAUSED

if TYPE_CHECKING:
    from agentfootprint.logformat.log_format_spec import LogFormat
    from agentfootprint.verify.body_checks import RunCheck

__all__ = [
    "Answer",
    "PauseAnswers",
    "check_pending",
    "check_resume_commit",
    "open_answer",
    "parent_answered",
]

#: ``pending``'s members: the required ones with their types, then the optional ones
_REQUIRED: Final[tuple[tuple[str, type], ...]] = (
    ("request_id", str),
    ("kind", str),
    ("tool_call_id", str),
    ("tool", str),
    ("question", str),
)
_OPTIONAL: Final[tuple[tuple[str, type], ...]] = (
    ("fields", dict),
    ("context", dict),
    ("service", str),
)
_MEMBERS: Final = frozenset(name for name, _ in (*_REQUIRED, *_OPTIONAL))
_KINDS: Final = ("consent", "input")
_ANSWER_STAGE: Final = "resume"
_ANSWER_KEY: Final = "resume_answer"


class Answer(NamedTuple):
    """What a ``run.open`` says of its paused parent: ``resumes`` or ``abandons``, and the
    request it names."""

    member: str
    request_id: str


def open_answer(
    where: RunCheck, body: Mapping[str, Any], log_format: LogFormat, has_parent: bool
) -> Answer | None:
    """``run.open``'s ``resumes`` / ``abandons`` (section 9.2 step 5): **structure** outside
    format v5, when not a non-empty string, both at once, or without a parent."""
    given = [name for name in ("resumes", "abandons") if name in body]
    if not given:
        return None
    if not log_format.may_pause:
        raise where.fail(
            0, f"run.open {given[0]} outside format v5 ({log_format.name})", "structure"
        )
    if len(given) > 1:
        raise where.fail(0, "run.open both resumes and abandons its parent", "structure")
    value = body[given[0]]
    if type(value) is not str or not value:
        raise where.fail(0, f"run.open {given[0]} is not a non-empty string", "structure")
    if not has_parent:
        raise where.fail(0, f"run.open {given[0]} a pause but names no parent", "structure")
    return Answer(given[0], value)


def parent_answered(
    where: RunCheck, parent_id: str, close: Mapping[str, Any] | None, answer: Answer | None
) -> None:
    """Section 9.3 step 4 for a paused parent: continued only by the run that names its
    question; a run that names one continues a paused parent (**ancestry**)."""
    paused = close is not None and close.get("outcome") == PAUSED
    if not paused:
        if answer is not None:
            raise where.fail(
                0,
                f"run.open {answer.member} a pause, but parent run {parent_id} did not pause",
                "ancestry",
            )
        return
    assert close is not None  # paused
    request = close["pending"]["request_id"]  # the parent verified: its pending is well formed
    if answer is None:
        raise where.fail(
            0,
            f"parent run {parent_id} paused on request {request}: its continuation must "
            "resume or abandon it (run.open resumes / abandons)",
            "ancestry",
        )
    if answer.request_id != request:
        raise where.fail(
            0,
            f"run.open {answer.member} request {answer.request_id}, but parent run "
            f"{parent_id} paused on {request}",
            "ancestry",
        )


def check_pending(check: RunCheck, seq: int, body: Mapping[str, Any], outcome: str) -> None:
    """``run.close``'s ``pending`` (section 9.2, ``run.close``): only on a ``paused`` close,
    which must have it well formed and equal to the final state's (**structure**)."""
    if outcome != PAUSED:
        if "pending" in body and check.format.may_pause:
            raise check.fail(seq, f"run.close has pending but outcome {outcome}", "structure")
        return
    pending = body.get("pending")
    problem = _pending_problem(pending)
    if problem is not None:
        raise check.fail(seq, f"run.close pending {problem}", "structure")
    state = check.state.get("pending")
    if state is None or canon(state) != canon(pending):
        raise check.fail(
            seq,
            "run.close pending differs from the pending the run's last commit wrote",
            "structure",
        )


def _pending_problem(pending: Any) -> str | None:
    if type(pending) is not dict:
        return "is missing or not an object"
    extra = sorted(set(pending) - _MEMBERS)
    if extra:
        return f"has members section 5.9 does not list: {extra}"
    for name, kind in _REQUIRED:
        if type(pending.get(name)) is not kind:
            return f"member {name!r} missing or not {kind.__name__}"
    for name, kind in _OPTIONAL:
        if name in pending and type(pending[name]) is not kind:
            return f"member {name!r} is not {kind.__name__}"
    if not pending["request_id"]:
        return "request_id is empty"
    if pending["kind"] not in _KINDS:
        return f"kind {pending['kind']!r} is not one of {list(_KINDS)}"
    fields = pending.get("fields", {})
    if any(type(spec) is not dict for spec in fields.values()):
        return "fields holds a member that is not an object"
    return None


def check_resume_commit(check: RunCheck, seq: int, body: Mapping[str, Any]) -> None:
    """Commit 0 of a run that resumes its parent (section 9.2, ``commit``): the stage
    ``resume``, writing ``resume_answer`` within the fields asked (**structure**)."""
    if body.get("stage") != _ANSWER_STAGE:
        raise check.fail(
            seq,
            f"a resume's first commit is the stage {_ANSWER_STAGE!r}, not {body.get('stage')!r}",
            "structure",
        )
    written = [(verb, value) for _, path, verb, value in check.pending if path == _ANSWER_KEY]
    if not written or any(verb != "set" for verb, _ in written):
        raise check.fail(seq, f"a resume's first commit does not set {_ANSWER_KEY!r}", "structure")
    answer = written[-1][1]
    if is_commitment(answer):
        return  # committed whole under the run's policy: its members are not shown
    if type(answer) is not dict:
        raise check.fail(seq, f"{_ANSWER_KEY} is not an object", "structure")
    asked = check.initial.get("pending")
    fields = asked.get("fields") if isinstance(asked, Mapping) else None
    if isinstance(fields, Mapping):
        unasked = sorted(set(answer) - set(fields))
        if unasked:
            raise check.fail(
                seq, f"{_ANSWER_KEY} answers fields that were not asked: {unasked}", "structure"
            )


class PauseAnswers:
    """Whole-file verification, step 5 (section 9.5): the runs that continue each paused run,
    noted as their ``run.open`` passes section 9.3 (in whatever order the runs are verified);
    more than one for a pause, not counting those that verified UNSEALED (an answer whose
    writer died before it closed), is one **pause** finding."""

    __slots__ = ("_answers", "_unclosed")

    def __init__(self) -> None:
        #: paused run -> (its request, the runs continuing it, in the order first seen)
        self._answers: dict[str, tuple[str, dict[str, None]]] = {}
        #: runs that verified and never closed (UNSEALED): an answer whose writer died
        self._unclosed: set[str] = set()

    def answered(self, paused: str, request: str, run_id: str) -> None:
        self._answers.setdefault(paused, (request, {}))[1][run_id] = None

    def unclosed(self, run_id: str) -> None:
        self._unclosed.add(run_id)

    def findings(self) -> Iterator[VerificationError]:
        for paused, (request, answering) in self._answers.items():
            runs = [run for run in answering if run not in self._unclosed]
            if len(runs) > 1:
                yield VerificationError(
                    paused,
                    None,
                    f"request {request} of this paused run is answered by {len(runs)} runs "
                    f"({', '.join(runs)}): a pause is answered once",
                    code="pause",
                )
