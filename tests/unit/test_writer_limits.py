"""The writers: the size limit of ``RunWriter``, and ``write_bundle`` streaming safely.

One body limit bounds what the writer records and every bundle line.

``RunWriter.append`` refuses a body over ``MAX_BODY_BYTES`` (and an envelope over
``MAX_ENVELOPE_BYTES``) with :class:`RecordTooLargeError` before anything is appended, so
every run it writes can be exported: a bundle line is at most its envelope plus twice its
body, the worst case being a body made only of ``"`` and ``\\`` (each escaped to two bytes).
``write_bundle`` reads each run while it writes it, names a file it cannot write, and never
leaves a partial file behind (reading bundles: ``test_bundle_reading.py``).
"""

from __future__ import annotations

import errno
import os
import sqlite3
import subprocess
import sys
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import orjson
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import agentfootprint as af
from agentfootprint.exchange.bundle_write import write_bundle
from agentfootprint.logformat import limits
from agentfootprint.logformat.canonical import canon
from agentfootprint.logformat.chain import GENESIS
from agentfootprint.store.base import StoredEvent
from agentfootprint.store.writer import RunWriter, envelope_bytes
from agentfootprint.testing.permissions import unprivileged
from agentfootprint.testing.store_contract import open_body
from agentfootprint.verify.bundle import BundleSource
from examples_budget import scaled

TS = 1_700_000_000_000


def _writer(store: af.EventStore, run_id: str = "r" * 32) -> RunWriter:
    writer = RunWriter(store, run_id, clock=lambda: TS)
    writer.append([("run.open", open_body(run_id))])
    return writer


def _string_of_size(size: int, char: str = "a") -> str:
    """A string whose canonical form is exactly ``size`` bytes (``char`` is one byte, or
    two when JSON escapes it)."""
    width = len(canon(char)) - 2
    assert (size - 2) % width == 0
    return char * ((size - 2) // width)


def test_a_body_of_exactly_the_limit_is_recorded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "MAX_BODY_BYTES", 4096)
    store = af.MemoryStore()
    writer = _writer(store)
    value = _string_of_size(4096)
    [row] = writer.append([("event", value)])
    assert len(row.body) == 4096 and writer.seq == 2


@pytest.mark.parametrize("position", [0, 1, 2])
def test_a_body_over_the_limit_is_refused_and_nothing_of_its_batch_is_kept(
    monkeypatch: pytest.MonkeyPatch, position: int
) -> None:
    monkeypatch.setattr(limits, "MAX_BODY_BYTES", 4096)
    store = af.MemoryStore()
    writer = _writer(store)
    seq, head = writer.seq, writer.head
    batch: list[tuple[str, Any]] = [("event", {"name": "small"}) for _ in range(3)]
    batch[position] = ("event", _string_of_size(4098))
    with pytest.raises(af.RecordTooLargeError) as caught:
        writer.append(batch)
    assert isinstance(caught.value, af.CanonicalFormError)
    assert f"seq {seq + position}" in str(caught.value) and "4098 bytes" in str(caught.value)
    assert "MAX_BODY_BYTES" in str(caught.value)
    assert (writer.seq, writer.head) == (seq, head)  # the head did not move
    assert len(list(store.read(writer.run_id))) == 1  # only run.open
    writer.append([("run.close", {"outcome": "answered", "commits": 0, "receipts": 0})])
    assert [r.seq for r in store.read(writer.run_id)] == [0, 1]


def test_run_open_over_the_limit_records_no_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "MAX_BODY_BYTES", 64)
    store = af.MemoryStore()
    writer = RunWriter(store, "r1")
    with pytest.raises(af.RecordTooLargeError):
        writer.append([("run.open", {**open_body("r1"), "system": "x" * 100})])
    assert store.run_ids() == [] and writer.head == GENESIS and writer.seq == 0


def test_the_real_limit_is_64_mib(tmp_path: Path) -> None:
    """Without patching: one byte over MAX_BODY_BYTES is refused, into a real SQLite file."""
    assert limits.MAX_BODY_BYTES == 64 * 1024 * 1024
    with af.SqliteStore(tmp_path / "r.db") as store:
        writer = _writer(store)
        with pytest.raises(af.RecordTooLargeError):
            writer.append([("event", _string_of_size(limits.MAX_BODY_BYTES + 2))])
        assert len(list(store.read(writer.run_id))) == 1


def test_small_bodies_are_kept_at_their_own_size() -> None:
    """A store that keeps rows in memory holds each body at about its size: orjson's small
    outputs otherwise keep a 4 KiB buffer each (300 MiB for 70 000 events)."""
    store = af.MemoryStore()
    writer = _writer(store)
    tracemalloc.start()
    try:
        for commit in range(2000):
            writer.append([("commit", {"commit": commit, "stage": "call-llm", "writes": 0})])
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert held / 2000 < 1024, held / 2000  # the row, its hashes and the body: well under 4 KiB


def test_a_run_id_too_long_for_a_bundle_line_is_refused() -> None:
    store = af.MemoryStore()
    base = envelope_bytes("", 0, "run.open", TS)
    fits = "i" * (limits.MAX_ENVELOPE_BYTES - base)
    assert envelope_bytes(fits, 0, "run.open", TS) == limits.MAX_ENVELOPE_BYTES
    _writer(store, fits)  # exactly the limit
    longer = fits + "i"
    with pytest.raises(af.RecordTooLargeError, match="MAX_ENVELOPE_BYTES"):
        RunWriter(store, longer, clock=lambda: TS).append([("run.open", open_body(longer))])
    assert longer not in store.run_ids()


def test_a_run_id_that_is_not_unicode_text_is_a_canonical_form_error() -> None:
    with pytest.raises(af.CanonicalFormError):
        RunWriter(af.MemoryStore(), "a\ud800").append([("run.open", open_body("a"))])


def _line(run_id: str, seq: int, type_: str, ts: int, body: bytes) -> bytes:
    return orjson.dumps(
        {
            "run": run_id,
            "seq": seq,
            "type": type_,
            "ts": ts,
            "body": body.decode(),
            "event_hash": "0" * 64,
            "chain_hash": "0" * 64,
        }
    )


@given(
    run_id=st.text(max_size=40),
    type_=st.sampled_from(["run.open", "write", 'x"\\\n\x00é']),
    seq=st.integers(-(2**53) + 1, 2**53 - 1),
    ts=st.integers(-(2**53) + 1, 2**53 - 1),
    value=st.recursive(
        st.none() | st.booleans() | st.integers(-(2**53) + 1, 2**53 - 1) | st.text(),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
        max_leaves=12,
    ),
)
@example(run_id='"\\', type_="write", seq=0, ts=0, value='"\\\x00\n\u2028')
@settings(max_examples=scaled(60))
def test_a_line_is_its_envelope_plus_at_most_twice_its_body(
    run_id: str, type_: str, seq: int, ts: int, value: Any
) -> None:
    body = canon(value)
    line = _line(run_id, seq, type_, ts, body)
    envelope = envelope_bytes(run_id, seq, type_, ts)
    assert len(_line(run_id, seq, type_, ts, b"")) == envelope
    assert envelope + len(body) <= len(line) <= envelope + 2 * len(body)


@pytest.mark.slow
def test_the_largest_line_the_writer_can_produce_is_exactly_the_bundle_line_limit(
    tmp_path: Path,
) -> None:
    """The worst case, for real: a body of MAX_BODY_BYTES made only of ``"`` and ``\\``
    (every byte escapes to two) in a run whose id makes the envelope MAX_ENVELOPE_BYTES.
    The writer accepts both, the exporter writes the line, the reader reads it back."""
    store = af.MemoryStore()
    base = envelope_bytes("", 1, "run.close", TS)  # the longest type: the largest envelope
    run_id = "i" * (limits.MAX_ENVELOPE_BYTES - base)
    writer = _writer(store, run_id)
    half = (limits.MAX_BODY_BYTES - 2) // 2
    value = '"\\' * (half // 2) + '"' * (half % 2)
    [row] = writer.append([("run.close", value)])
    del value
    assert len(row.body) == limits.MAX_BODY_BYTES and set(row.body) == {ord('"'), ord("\\")}
    out = tmp_path / "big.afp"
    write_bundle(store, [run_id], out, library="t")
    with out.open("rb") as handle:
        handle.readline()
        handle.readline()  # run.open
        line = handle.readline()
    assert len(line) - 1 == 2 * limits.MAX_BODY_BYTES + limits.MAX_ENVELOPE_BYTES
    assert len(line) - 1 == limits.MAX_BUNDLE_LINE_BYTES
    del line
    with BundleSource(out) as source:
        back = list(source.read(run_id))
    assert StoredEvent.copy_of(back[1]) == row


# -- write_bundle: streaming, and never a partial file ------------------------------------------


def _unprivileged(code: str, *args: str) -> str:
    """Run ``code`` in a child that file permissions bind (as root: without the DAC
    capabilities); its output."""
    command = unprivileged([sys.executable, "-c", code, *args])
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _copies(store: af.MemoryStore, count: int) -> list[str]:
    """``count`` small closed runs."""
    ids = []
    for index in range(count):
        run_id = f"{index:032x}"
        writer = RunWriter(store, run_id, clock=lambda: TS)
        writer.append([("run.open", open_body(run_id))])
        writer.append([("event", {"name": "x", "data": "y" * 64}), ("commit", {"commit": 0})])
        writer.append([("run.close", {"outcome": "answered"})])
        ids.append(run_id)
    return ids


class Logged(NamedTuple):
    db: Path
    root: str
    child: str
    other: str


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Logged:
    """A root run, its continuation and an unrelated run, in a SQLite log."""
    db = tmp_path_factory.mktemp("writer") / "runs.db"
    agent = af.Agent(provider=af.MockProvider(["one", "two", "three"]), model="m", store=db)
    root = agent.run_sync("hi")
    child = agent.run_sync("again", continue_from=root)
    other = agent.run_sync("elsewhere")
    agent.close()
    return Logged(db, root.run_id, child.run_id, other.run_id)


@pytest.fixture
def small() -> tuple[af.MemoryStore, list[str]]:
    store = af.MemoryStore()
    return store, _copies(store, 3)


def test_an_output_in_a_missing_folder_is_a_file_error(
    small: tuple[af.MemoryStore, list[str]], tmp_path: Path
) -> None:
    store, ids = small
    out = tmp_path / "no" / "such" / "b.afp"
    with pytest.raises(af.FileError) as caught:
        write_bundle(store, ids, out, library="t")
    assert str(out.parent) in str(caught.value) and caught.value.path == str(out)
    assert not out.parent.exists()


def test_an_output_that_is_a_folder_is_a_file_error(
    small: tuple[af.MemoryStore, list[str]], tmp_path: Path
) -> None:
    store, ids = small
    with pytest.raises(af.FileError, match="is a folder"):
        write_bundle(store, ids, tmp_path, library="t")
    assert list(tmp_path.iterdir()) == []


def test_an_output_in_a_read_only_folder_is_a_file_error(tmp_path: Path) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    out = _unprivileged(
        "import sys\n"
        "from pathlib import Path\n"
        "import agentfootprint as af\n"
        "from agentfootprint.store.writer import RunWriter\n"
        "from agentfootprint.testing.store_contract import open_body\n"
        "from agentfootprint.exchange.bundle_write import write_bundle\n"
        "store = af.MemoryStore()\n"
        "RunWriter(store, 'r').append([('run.open', open_body('r'))])\n"
        "target = Path(sys.argv[1]) / 'b.afp'\n"
        "try:\n"
        "    write_bundle(store, ['r'], target, library='t')\n"
        "except af.FileError as exc:\n"
        "    print('FileError', exc)\n",
        str(folder),
    )
    assert "FileError" in out and "permission denied" in out, out
    assert list(folder.iterdir()) == []


def test_no_room_is_a_file_error_and_leaves_nothing(
    small: tuple[af.MemoryStore, list[str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, ids = small

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    out = tmp_path / "b.afp"
    with pytest.raises(af.FileError, match="no room left"):
        write_bundle(store, ids, out, library="t")
    assert list(tmp_path.iterdir()) == []


def test_the_source_log_and_sqlite_files_are_never_replaced(
    recorded: Logged, tmp_path: Path
) -> None:
    before = recorded.db.read_bytes()
    with af.SqliteStore(recorded.db) as store:
        with pytest.raises(af.FileError, match="the log being exported"):
            write_bundle(store, [recorded.other], recorded.db, library="t")
        other = tmp_path / "vault.db"
        sqlite3.connect(other).execute("CREATE TABLE t (x)").connection.close()
        with pytest.raises(af.FileError, match="SQLite database"):
            write_bundle(store, [recorded.other], other, library="t")
    assert recorded.db.read_bytes() == before


class _Failing:
    """A source whose second run's rows fail half way (an I/O error in a store)."""

    def __init__(self, store: af.MemoryStore, run_id: str) -> None:
        self.store, self.run_id, self.reads = store, run_id, 0

    def read(self, run_id: str, *, start: int = 0) -> Iterator[Any]:
        if run_id != self.run_id:
            return self.store.read(run_id, start=start)
        self.reads += 1
        return self._rows(run_id) if self.reads > 1 else self.store.read(run_id)

    def _rows(self, run_id: str) -> Iterator[Any]:
        rows = self.store.read(run_id)
        yield next(rows)
        raise af.StoreError("the disk went away")


def test_an_error_while_writing_leaves_no_partial_file(
    small: tuple[af.MemoryStore, list[str]], tmp_path: Path
) -> None:
    store, ids = small
    out = tmp_path / "b.afp"
    with pytest.raises(af.StoreError, match="went away"):
        write_bundle(_Failing(store, ids[1]), ids, out, library="t")
    assert list(tmp_path.iterdir()) == []


class _Rewritten:
    """A source that hands out another head the second time a run is read."""

    def __init__(self, store: af.MemoryStore, run_id: str) -> None:
        self.store, self.run_id, self.reads = store, run_id, 0

    def read(self, run_id: str, *, start: int = 0) -> Iterator[Any]:
        rows = list(self.store.read(run_id, start=start))
        if run_id == self.run_id:
            self.reads += 1
            if self.reads > 1:
                last = rows[-1]
                rows[-1] = StoredEvent(
                    **{
                        **{f: getattr(last, f) for f in StoredEvent.__slots__},
                        "chain_hash": b"\1" * 32,
                    }
                )
        return iter(rows)


def test_a_run_that_changed_between_the_two_reads_is_refused(
    small: tuple[af.MemoryStore, list[str]], tmp_path: Path
) -> None:
    store, ids = small
    out = tmp_path / "b.afp"
    with pytest.raises(af.StoreError, match="changed while it was exported"):
        write_bundle(_Rewritten(store, ids[2]), ids, out, library="t")
    assert list(tmp_path.iterdir()) == []


def test_a_run_that_grew_is_written_as_it_was_counted(
    small: tuple[af.MemoryStore, list[str]], tmp_path: Path
) -> None:
    store, ids = small

    class Growing:
        reads = 0

        def read(self, run_id: str, *, start: int = 0) -> Iterator[Any]:
            self.reads += 1
            rows = list(store.read(run_id, start=start))
            if self.reads > len(ids):  # the writing pass sees one row more
                extra = StoredEvent(**{**{f: getattr(rows[-1], f) for f in StoredEvent.__slots__}})
                rows.append(extra)
            return iter(rows)

    out = tmp_path / "b.afp"
    manifest = write_bundle(Growing(), ids, out, library="t")
    with BundleSource(out) as source:
        assert [r.events for r in source.runs()] == [r["events"] for r in manifest["runs"]]


def _raw_run(store: af.MemoryStore, run_id: str, body: bytes) -> None:
    writer = RunWriter(store, run_id)
    writer.append([("run.open", open_body(run_id))])
    good = writer.append([("event", {"name": "x"})])[0]
    store.append(
        [
            StoredEvent(
                **{**{f: getattr(good, f) for f in StoredEvent.__slots__}, "seq": 2, "body": body}
            )
        ]
    )


def test_a_body_no_bundle_can_carry_is_refused(tmp_path: Path) -> None:
    store = af.MemoryStore()
    _raw_run(store, "r", b'{"x":"\xff"}')
    out = tmp_path / "b.afp"
    with pytest.raises(af.VerificationError) as caught:
        write_bundle(store, ["r"], out, library="t")
    assert caught.value.code == "canonical" and caught.value.seq == 2
    assert list(tmp_path.iterdir()) == []


def test_a_line_over_the_limit_is_refused_before_anything_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A row recorded before the writer enforced the limit (or by another writer)."""
    store = af.MemoryStore()
    _raw_run(store, "r", b'{"x":"' + b"y" * 2000 + b'"}')
    monkeypatch.setattr(limits, "MAX_BUNDLE_LINE_BYTES", 1500)
    out = tmp_path / "b.afp"
    with pytest.raises(af.RecordTooLargeError, match="seq 2"):
        write_bundle(store, ["r"], out, library="t")
    assert list(tmp_path.iterdir()) == []


def test_a_manifest_over_the_limit_asks_for_fewer_runs(
    small: tuple[af.MemoryStore, list[str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, ids = small
    monkeypatch.setattr(limits, "MAX_BUNDLE_LINE_BYTES", 600)
    with pytest.raises(af.UsageError, match="export fewer runs"):
        write_bundle(store, ids, tmp_path / "b.afp", library="t")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("run_ids", [[], "abc", [1], None])
def test_run_ids_must_be_a_list_of_strings(
    small: tuple[af.MemoryStore, list[str]], tmp_path: Path, run_ids: Any
) -> None:
    store, _ = small
    with pytest.raises(af.UsageError):
        write_bundle(store, run_ids, tmp_path / "b.afp", library="t")


def test_an_unknown_run_is_not_exported(
    small: tuple[af.MemoryStore, list[str]], tmp_path: Path
) -> None:
    store, ids = small
    with pytest.raises(af.RunNotFoundError):
        write_bundle(store, [*ids, "nope"], tmp_path / "b.afp", library="t")
    assert list(tmp_path.iterdir()) == []


def test_ancestors_come_from_run_open_not_the_index(recorded: Logged, tmp_path: Path) -> None:
    """A runs table that hides the parent does not drop it from the export."""
    db = tmp_path / "copy.db"
    db.write_bytes(recorded.db.read_bytes())
    conn = sqlite3.connect(db)
    conn.execute("DROP TRIGGER runs_no_update")
    conn.execute("UPDATE runs SET parent_run_id = NULL")
    conn.commit()
    conn.close()
    out = tmp_path / "b.afp"
    with af.SqliteStore(db) as store:
        manifest = write_bundle(store, [recorded.child], out, library="t")
    assert [r["run_id"] for r in manifest["runs"]] == [recorded.root, recorded.child]
    assert manifest["runs"][1]["parent_run_id"] == recorded.root
    with BundleSource(out) as source:
        assert af.Verifier(source).verify(recorded.child).ancestors == (recorded.root,)


def test_a_parent_cycle_is_refused(tmp_path: Path) -> None:
    store = af.MemoryStore()
    for run_id, parent in (("a", "b"), ("b", "a")):
        link = {"run_id": parent, "events": 1, "head": "0" * 64}
        RunWriter(store, run_id).append([("run.open", open_body(run_id, "c", link))])
    with pytest.raises(af.VerificationError) as caught:
        write_bundle(store, ["a"], tmp_path / "b.afp", library="t")
    assert caught.value.code == "ancestry"


@pytest.mark.parametrize(
    ("argument", "value"),
    [("source", object()), ("out", None), ("out", 5), ("library", None), ("run_ids", ("a", 1))],
)
def test_write_bundle_names_a_wrong_argument(
    small: tuple[af.MemoryStore, list[str]], tmp_path: Path, argument: str, value: Any
) -> None:
    store, ids = small
    args: dict[str, Any] = {"source": store, "run_ids": ids, "out": tmp_path / "b.afp"}
    args["library"] = "t"
    args[argument] = value
    with pytest.raises(af.UsageError) as caught:
        write_bundle(**args)
    assert caught.value.option == argument and argument in str(caught.value)
    assert list(tmp_path.iterdir()) == []
