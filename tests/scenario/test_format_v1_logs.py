"""Logs of log format 1, recorded by the last format-1 writer, verify and replay today.

``tests/data/format_v1/format_v1.db`` (see its ``make_format_v1_logs.py``) holds runs whose
shapes format 2 reads differently or must keep reading: receipts off (format 1 finds a model
call by its ``call-llm`` stage, format 2 by the commit's ``call`` marker), classic mode, a
continued conversation, a turn stopped at the cap, a recorded finding and a failed run.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from recorded_logs import maker, pristine_copy, runs

import agentfootprint as af
from agentfootprint.logformat.canonical import parse

DATA = Path(__file__).resolve().parents[1] / "data" / "format_v1"
RUNS = runs("format_v1")
MAKER = maker("format_v1", "make_format_v1_logs")


@pytest.fixture
def log(tmp_path: Path) -> Path:
    """A copy of the file (reading never changes it; the copy keeps the data pristine)."""
    return pristine_copy(DATA / "format_v1.db", tmp_path)


def test_every_format_1_run_verifies_and_the_file_is_untouched() -> None:
    before = hashlib.sha256((DATA / "format_v1.db").read_bytes()).hexdigest()
    with af.SqliteStore(DATA / "format_v1.db", readonly=True) as store:
        found = list(af.Verifier(store).verify_all())
        assert len(found) == 6
        for run_id, checked in found:
            assert isinstance(checked, af.RunVerification), (run_id, checked)
            assert checked.outcome == af.Outcome.VALID_UNSIGNED
        opened = [parse(next(iter(store.read(r))).body) for r, _ in found]
    assert {o["format"] for o in opened} == {"agentfootprint/log/v1"}
    assert hashlib.sha256((DATA / "format_v1.db").read_bytes()).hexdigest() == before


#: runs a newer default changes on replay (each shown as a divergence below)
_CHANGED_BY_A_DEFAULT = ("receipts-off-classic", "stopped-early")


@pytest.mark.parametrize("name", [n for n in MAKER.RUNS if n not in _CHANGED_BY_A_DEFAULT])
def test_each_format_1_run_replays_byte_for_byte(name: str, log: Path) -> None:
    """Today's code replays each run row for row, in the original's log format (a receipts-off
    run of format 1 carries no call marker, and neither does its replay)."""
    agent = MAKER.AGENTS[name](None)
    replayed = af.replay_sync(agent, log, RUNS[name])
    assert replayed.result.outcome in ("answered", "stopped_early")
    rows = list(agent.store.read(replayed.result.run_id))
    assert parse(rows[0].body)["format"] == "agentfootprint/log/v1"


def test_a_new_default_shows_as_a_divergence_where_it_changes_what_is_served(log: Path) -> None:
    """The run calls one tool twice alike: today's default ``repeated_call_nudge`` notes the
    repeat, so a replay diverges at the next call; with the nudge off it replays exactly."""
    name = "receipts-off-classic"
    with pytest.raises(af.ReplayDivergence) as caught:
        af.replay_sync(MAKER.AGENTS[name](None), log, RUNS[name])
    # receipts were off: the rebuilt request is compared whole
    assert (caught.value.call, caught.value.kind) == (2, "request")
    options, script, _, _ = MAKER.RUNS[name]
    quiet = MAKER._agent(None, list(script), **options, repeated_call_nudge=False)
    assert af.replay_sync(quiet, log, RUNS[name]).calls_checked == 3


def test_the_wrap_up_default_shows_as_a_divergence_on_the_run_cut_at_the_cap(log: Path) -> None:
    """The run stopped at the cap with a tool call pending: today's default
    ``wrap_up_at_max_iterations`` makes one more call the original did not, so a replay
    diverges there; with the option off it replays exactly, in format 1."""
    name = "stopped-early"
    with pytest.raises(af.ReplayDivergence) as caught:
        af.replay_sync(MAKER.AGENTS[name](None), log, RUNS[name])
    assert (caught.value.call, caught.value.kind) == (1, "calls")
    options, script, _, _ = MAKER.RUNS[name]
    plain = MAKER._agent(None, list(script), **options, wrap_up_at_max_iterations=False)
    replayed = af.replay_sync(plain, log, RUNS[name])
    assert replayed.calls_checked == 1 and replayed.result.outcome == "stopped_early"
    rows = list(plain.store.read(replayed.result.run_id))
    assert parse(rows[0].body)["format"] == "agentfootprint/log/v1"
