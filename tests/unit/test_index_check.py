"""The run index checked as the runs verify (``IndexCheck``) finds what a check of the whole
index after every run finds, in the same order, whatever the index's order; and holds one
slot per run when the index is in the runs' order.

The model below is the whole-index check as section 9.5 states it: every entry in index
order (not text; listed twice; no events of it; disagrees with ``run.open``), then every run
with events and no entry, in run order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from agentfootprint.logformat.index_check import IndexCheck, RunFacts


@dataclass(frozen=True)
class Entry:
    run_id: Any
    conversation_id: Any
    parent_run_id: Any
    opened_at: Any


def _model(
    run_ids: list[Any], facts: dict[Any, RunFacts], entries: list[Entry]
) -> list[tuple[Any, int | None, str]]:
    found: list[tuple[Any, int | None, str]] = []
    listed: set[Any] = set()
    for entry in entries:
        run_id = entry.run_id
        if type(run_id) is not str:
            found.append((repr(run_id), None, "not text"))
            continue
        if run_id in listed:
            found.append((run_id, None, "twice"))
            continue
        listed.add(run_id)
        if run_id not in run_ids:
            found.append((run_id, None, "no event"))
            continue
        recorded = facts[run_id]
        indexed = (entry.conversation_id, entry.parent_run_id, entry.opened_at)
        if recorded is not None and any(
            type(a) is not type(b) or a != b for a, b in zip(indexed, recorded, strict=True)
        ):
            found.append((run_id, 0, "disagrees"))
    found.extend((run_id, None, "no row") for run_id in run_ids if run_id not in listed)
    return found


_WHY = {
    "not text": ", not text",
    "twice": "lists this run twice",
    "no event": "holds no event of it",
    "disagrees": "disagrees with the events",
    "no row": "has no row for it",
}


def _checked(
    run_ids: list[Any], facts: dict[Any, RunFacts], entries: list[Entry] | None
) -> tuple[list[tuple[Any, int | None, str]], int]:
    """What :class:`IndexCheck` finds, and the most entries it read ahead of the verdicts."""
    read = 0

    def counted() -> Any:
        nonlocal read
        for entry in entries or ():
            read += 1
            yield entry

    check = IndexCheck(run_ids, None if entries is None else counted())
    ahead = 0
    for verdicts, run_id in enumerate(run_ids, start=1):
        check.verdict(run_id, facts[run_id])
        ahead = max(ahead, read - verdicts)
    found = []
    for finding in check.findings():
        assert finding.code == "index"
        kind = next(k for k, why in _WHY.items() if why in finding.reason)
        found.append((finding.run_id, finding.seq, kind))
    return found, ahead


_IDS = st.sampled_from(["a", "b", "c", "d", "e"])
_FACT = st.tuples(
    st.sampled_from(["a", "c"]), st.sampled_from([None, "a"]), st.sampled_from([1, 2, 1.0])
)


@st.composite
def _cases(draw: st.DrawFn) -> tuple[list[Any], dict[Any, RunFacts], list[Entry]]:
    run_ids = draw(st.lists(_IDS, unique=True))
    facts = {run_id: draw(st.none() | _FACT) for run_id in run_ids}
    entry_ids = draw(st.lists(_IDS | st.sampled_from([b"a", 7]), max_size=8))
    entries = [Entry(run_id, *draw(_FACT)) for run_id in entry_ids]
    return run_ids, facts, entries


@given(_cases())
@example(
    (
        ["a", "b"],
        {"a": ("a", None, 1), "b": None},
        [Entry("b", "a", None, 1), Entry("a", "a", None, 1.0)],
    )
)
@example(
    (
        ["a"],
        {"a": ("a", None, 1)},
        [
            Entry("a", "a", None, 1),
            Entry("a", "a", None, 1),
            Entry("e", "c", "a", 2),
            Entry("e", "c", "a", 2),
        ],
    )
)
def test_findings_are_those_of_the_whole_index_check(
    case: tuple[list[Any], dict[Any, RunFacts], list[Entry]],
) -> None:
    run_ids, facts, entries = case
    assert _checked(run_ids, facts, entries)[0] == _model(run_ids, facts, entries)


def test_an_index_in_run_order_is_read_one_entry_ahead_at_most() -> None:
    run_ids = [f"run-{i}" for i in range(500)]
    facts: dict[Any, RunFacts] = {run_id: (run_id, None, i) for i, run_id in enumerate(run_ids)}
    entries = [Entry(run_id, run_id, None, i) for i, run_id in enumerate(run_ids)]
    found, ahead = _checked(run_ids, facts, entries)
    assert found == [] and ahead == 0
    entries[10], entries[11] = entries[11], entries[10]  # out of order: still no finding
    assert _checked(run_ids, facts, entries)[0] == []


def test_a_source_without_an_index_has_no_findings() -> None:
    assert _checked(["a"], {"a": None}, None) == ([], 0)
