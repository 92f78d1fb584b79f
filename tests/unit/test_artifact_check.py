"""``agentfootprint.audit.artifacts``: each artifact a verified run minted, checked against a
store (docs/artifacts.md, "Verifying artifacts"): the statuses, the ticket cross-check, which
events are read (only those the verifier verified), and a property over damaged content.

The logs are hand-built SQLite files (tests/artifact_logs.py); the stores real backends.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import agentfootprint as af
from agentfootprint.audit.artifacts import (
    ArtifactVerdict,
    Minted,
    MintedWatch,
    check_artifacts,
    check_minted,
)
from agentfootprint.logformat.hashing import hexdigest
from agentfootprint.logformat.shared_lists import FoldedState
from agentfootprint.store.artifacts import ArtifactHead, MemoryArtifacts
from agentfootprint.store.artifacts_file import FileArtifacts, scope_key
from agentfootprint.verify.verifier import Outcome, Verifier
from artifact_logs import Placed, placed_run

BIG = b"orders," * 100
OTHER = b"x" * 700


@pytest.fixture
def log(tmp_path: Path) -> Iterator[af.SqliteStore]:
    store = af.SqliteStore(tmp_path / "runs.db")
    yield store
    store.close()


def statuses(verdicts: list[ArtifactVerdict]) -> list[tuple[str, str]]:
    return [(v.ref, v.status) for v in verdicts]


def test_ok_expired_erased_missing_and_a_changed_byte(log: af.SqliteStore) -> None:
    store = MemoryArtifacts()
    placed = placed_run(log, store, "run-1", [BIG, OTHER, b"three" * 60, b"four" * 80])
    store.remove("run-1", placed[1].ref, reason="expired", at=5, note="max_count")
    store.remove("run-1", placed[2].ref, reason="erased", at=6, note="request 7")
    missing = placed_run(log, None, "run-2", [b"never stored" * 30])  # its bytes never put
    verdicts = list(check_artifacts(log, store))
    assert statuses(verdicts) == [
        (placed[0].ref, "ok"),
        (placed[1].ref, "expired"),
        (placed[2].ref, "erased"),
        (placed[3].ref, "ok"),
        (missing[0].ref, "missing"),
    ]
    first = verdicts[0]
    assert (first.run_id, first.seq, first.scope, first.tool_call_id) == (
        "run-1",
        1,
        "run-1",
        "call_0",
    )
    assert first.digest == first.found == hexdigest("artifact", BIG) and not first.failed
    assert (
        "note: max_count" in verdicts[1].detail and "1970-01-01T00:00:00.005" in verdicts[1].detail
    )
    assert verdicts[4].found is None and verdicts[4].failed
    assert [v.failed for v in verdicts] == [False, False, False, False, True]


def test_a_byte_changed_in_the_store_is_a_mismatch_naming_both_digests(
    log: af.SqliteStore, tmp_path: Path
) -> None:
    with FileArtifacts(tmp_path / "artifacts") as store:
        (item,) = placed_run(log, store, "run-1", [BIG])
    stored = tmp_path / "artifacts" / scope_key("run-1") / f"{item.ref}.bin"
    stored.write_bytes(b"O" + BIG[1:])
    with FileArtifacts(tmp_path / "artifacts", readonly=True) as store:
        (verdict,) = check_artifacts(log, store)
    found = hexdigest("artifact", b"O" + BIG[1:])
    assert (verdict.status, verdict.found, verdict.digest) == ("mismatch", found, item.digest)
    assert found in verdict.detail and item.digest in verdict.detail and verdict.failed


def cross_checked(log: af.SqliteStore, change: Any) -> ArtifactVerdict:
    """The verdict on a run whose history's ticket was ``change``d before it was written
    (the run still verifies: the rows are chained as written)."""
    store = MemoryArtifacts()
    placed_run(log, store, "run-1", [BIG], tamper=change)
    assert next(Verifier(log).verify_all())[1].outcome is Outcome.VALID_UNSIGNED  # type: ignore[union-attr]
    (verdict,) = check_artifacts(log, store)
    return verdict


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (lambda t: {**t, "digest": "f" * 64}, "has digest 'ffff"),
        (lambda t: {**t, "bytes": 3}, "has bytes 3 where the minted event records 700"),
        (lambda t: {**t, "kind": "table"}, "has kind 'table' where"),
        (lambda t: {**t, "media_type": "application/json"}, "has media_type 'application/json'"),
        (lambda t: {**t, "expires_at": 9}, "has expires_at 9 where the minted event records none"),
        (lambda t: {**t, "ref": "art_" + "Z" * 22}, "(its ticket names art_ZZZZ"),
        (lambda t: {**t, "placed": False}, "holds no ticket naming"),
        (lambda t: {**t, "extra": 1}, "holds no ticket naming"),
        (lambda t: {k: v for k, v in t.items() if k != "reason"}, "holds no ticket naming"),
    ],
)
def test_the_ticket_in_the_history_must_be_the_one_the_event_describes(
    log: af.SqliteStore, change: Any, said: str
) -> None:
    verdict = cross_checked(log, change)
    assert verdict.status == "mismatch" and said in verdict.detail, verdict.detail
    assert verdict.found is None  # the store's bytes were not even read


def test_a_ticket_not_in_canonical_form_is_not_the_ticket(log: af.SqliteStore) -> None:
    store = MemoryArtifacts()
    (item,) = placed_run(log, store, "run-1", [BIG])
    run = Verifier(log).verify("run-1")
    history = run.final_state["history"]
    ticket = history[-1]["content"]
    (as_written,) = check_minted(run, [Minted(seq=1, payload=_payload(item))], store)
    assert as_written.status == "ok"
    # the same members, spaced: not the canonical text a ticket is (docs/artifacts.md)
    history[-1] = {**history[-1], "content": ticket.replace(",", ", ")}
    spaced = replace(run, final_state=FoldedState({"history": history}))
    (verdict,) = check_minted(spaced, [Minted(seq=1, payload=_payload(item))], store)
    assert verdict.status == "mismatch" and "holds no ticket naming" in verdict.detail


def _payload(item: Placed, **change: Any) -> dict[str, Any]:
    return {
        "iteration": 1,
        "tool": "export",
        "tool_call_id": item.tool_call_id,
        "ref": item.ref,
        "kind": "tool-result",
        "media_type": "text/plain; charset=utf-8",
        "bytes": len(item.content),
        "digest": item.digest,
        **change,
    }


@pytest.mark.parametrize(
    ("payload", "said"),
    [
        ("not an object", "its payload is not an object"),
        ({"ref": 1}, "ref is not a string"),
        ({"ref": "orders"}, "ref is not an artifact ref"),
        ({"digest": "ABC"}, "digest is not 64 lowercase hex digits"),
        ({"bytes": -1}, "bytes is not a non-negative integer"),
        ({"bytes": True}, "bytes is not a non-negative integer"),
        ({"expires_at": "soon"}, "expires_at is not a non-negative integer"),
    ],
)
def test_a_minted_event_of_another_shape_is_a_mismatch(
    log: af.SqliteStore, payload: Any, said: str
) -> None:
    store = MemoryArtifacts()
    (item,) = placed_run(log, store, "run-1", [BIG])
    run = Verifier(log).verify("run-1")
    given = payload if isinstance(payload, str) else _payload(item, **payload)
    (verdict,) = check_minted(run, [Minted(seq=1, payload=given)], store)
    assert verdict.status == "mismatch" and said in verdict.detail and verdict.failed


def test_a_record_that_lies_about_the_size_is_a_mismatch(log: af.SqliteStore) -> None:
    store = MemoryArtifacts()
    (item,) = placed_run(log, store, "run-1", [BIG], tamper=lambda t: {**t, "bytes": 5})
    run = Verifier(log).verify("run-1")
    (verdict,) = check_minted(run, [Minted(seq=1, payload=_payload(item, bytes=5))], store)
    assert verdict.status == "mismatch" and verdict.found == item.digest
    assert f"the stored bytes are {len(BIG)}; the log records 5" in verdict.detail


def test_a_tombstone_of_other_bytes_is_a_mismatch(log: af.SqliteStore) -> None:
    store, elsewhere = MemoryArtifacts(), MemoryArtifacts()
    (item,) = placed_run(log, elsewhere, "run-1", [BIG])
    other = b"something else entirely"
    head = ArtifactHead(
        scope="run-1",
        ref=item.ref,
        kind="tool-result",
        media_type="text/plain; charset=utf-8",
        size=len(other),
        digest=hexdigest("artifact", other),
        created_at=1,
        expires_at=None,
    )
    store.put(head, other)
    store.remove("run-1", item.ref, reason="erased", at=2)
    (verdict,) = check_artifacts(log, store)
    assert verdict.status == "mismatch" and verdict.found == head.digest
    assert "tombstone records digest" in verdict.detail


def test_scopes_are_the_runs_conversations(log: af.SqliteStore) -> None:
    store = MemoryArtifacts()
    (item,) = placed_run(log, None, "run-1", [BIG])
    # the same ref and bytes filed under another conversation are not this run's
    store.put(
        ArtifactHead(
            scope="run-2",
            ref=item.ref,
            kind="tool-result",
            media_type="text/plain; charset=utf-8",
            size=len(BIG),
            digest=item.digest,
            created_at=1,
            expires_at=None,
        ),
        BIG,
    )
    assert statuses(list(check_artifacts(log, store))) == [(item.ref, "missing")]


def test_runs_that_fail_give_no_verdict_and_run_ids_choose(log: af.SqliteStore) -> None:
    store = MemoryArtifacts()
    placed_run(log, store, "broken", [BIG], broken=True)
    (open_item,) = placed_run(log, store, "crashed", [OTHER], closed=False)
    (closed_item,) = placed_run(log, store, "closed", [BIG])
    assert statuses(list(check_artifacts(log, store))) == [
        (open_item.ref, "ok"),
        (closed_item.ref, "ok"),
    ]
    chosen = list(check_artifacts(log, store, run_ids=["closed", "broken"]))
    assert statuses(chosen) == [(closed_item.ref, "ok")]


def test_the_watch_keeps_only_whole_reads_and_changes_no_verdict(log: af.SqliteStore) -> None:
    store = MemoryArtifacts()
    placed = placed_run(log, store, "run-1", [BIG, OTHER])
    watch = MintedWatch(log)
    next(iter(watch.read("run-1")))  # a parent lookup reads the first row only
    assert watch.minted("run-1") == []
    list(watch.read("run-1", start=1))  # a read from a later seq is partial too
    assert watch.minted("run-1") == []
    plain = [(run, getattr(r, "head", r)) for run, r in Verifier(log).verify_all()]
    watched = [(run, getattr(r, "head", r)) for run, r in Verifier(watch).verify_all()]
    assert watched == plain
    assert [(m.seq, m.payload["ref"]) for m in watch.minted("run-1")] == [
        (1, placed[0].ref),
        (2, placed[1].ref),
    ]


def test_no_clock_is_read_an_expiry_long_past_is_ok_with_the_bytes(log: af.SqliteStore) -> None:
    store = MemoryArtifacts()
    (item,) = placed_run(log, store, "run-1", [BIG], expires_at=1)
    assert statuses(list(check_artifacts(log, store))) == [(item.ref, "ok")]


# -- the property: damaged content is never ok -------------------------------------------


@pytest.fixture(scope="module")
def one_artifact(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, Placed]]:
    folder = tmp_path_factory.mktemp("artifact-property")
    log = af.SqliteStore(folder / "runs.db")
    with FileArtifacts(folder / "artifacts") as store:
        (item,) = placed_run(log, store, "run-1", [BIG])
    log.close()
    yield folder / "runs.db", folder / "artifacts" / scope_key("run-1") / f"{item.ref}.bin", item


def damaged(content: bytes) -> st.SearchStrategy[bytes]:
    flips = st.tuples(st.integers(0, len(content) - 1), st.integers(1, 255)).map(
        lambda f: content[: f[0]] + bytes([content[f[0]] ^ f[1]]) + content[f[0] + 1 :]
    )
    cuts = st.integers(0, len(content) - 1).map(lambda n: content[:n])
    grown = st.binary(min_size=1, max_size=8).map(lambda tail: content + tail)
    return st.one_of(flips, cuts, grown)


@given(changed=damaged(BIG))
@example(changed=b"")  # everything gone but the file
@example(changed=BIG[:-1])  # the last byte cut
@example(changed=BIG + b"\x00")
def test_damaged_content_is_a_mismatch_never_ok(
    one_artifact: tuple[Path, Path, Placed], changed: bytes
) -> None:
    db, stored, item = one_artifact
    stored.write_bytes(changed)
    try:
        with (
            af.SqliteStore(db, readonly=True) as log,
            FileArtifacts(stored.parent.parent, readonly=True) as store,
        ):
            (verdict,) = check_artifacts(log, store)
    finally:
        stored.write_bytes(item.content)
    assert verdict.status == "mismatch" and verdict.failed
    assert verdict.found == hexdigest("artifact", changed) != item.digest
