"""Export reads and hashes each run once: the verifier hands the writer its rows and hashes.

``export_runs`` verifies each run as it writes it. The rows the verification read and each
row's event and chain hash as the verifier computed them (``Verifier.hashes_for``) are what
the writer writes: nothing is hashed twice, and the seal log is read once per export, not
once per run. The bytes are those of the plain writer, which reads each run through the
store (whose ``read`` computes what schema 2 and 4 do not store).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import agentfootprint as af
from agentfootprint.exchange import bundle_write
from agentfootprint.exchange.bundle_write import write_bundle
from agentfootprint.logformat import chain
from agentfootprint.store import sqlite_layout
from agentfootprint.testing.seals import SIGNER
from agentfootprint.verify import row_checks
from agentfootprint.version import __version__


def _lookup(args: dict[str, Any]) -> dict[str, Any]:
    return {"name": args["name"], "ssn": "123-45-6789", "notes": "x" * 100}


def _record(path: Path, conversations: int = 3) -> list[str]:
    """Conversations of three runs each: sealed or not, redacted or not."""
    tool = af.define_tool(
        name="lookup",
        description="Look a customer up.",
        input_schema={"type": "object", "properties": {"name": {"type": "string"}}},
        execute=_lookup,
    )
    for index in range(conversations):
        call = af.reply(tool_calls=[af.tool_call("lookup", {"name": "Ada"})])
        script = af.MockProvider([call, "Found.", "Yes.", "Done."])
        with af.Agent(
            provider=script,
            model="m",
            tools=[tool],
            store=path,
            signer=SIGNER if index % 2 == 0 else None,
            redact=af.RedactionPolicy(keys=["ssn"]) if index % 3 != 1 else None,
        ) as agent:
            run = agent.run_sync("Find Ada.")
            run = agent.run_sync("Sure?", continue_from=run)
            agent.run_sync("And?", continue_from=run)
    with af.SqliteStore(path, readonly=True) as store:
        return store.run_ids()


class _Counted:
    """A function that counts its calls."""

    def __init__(self, function: Any) -> None:
        self.function, self.calls = function, 0

    def __call__(self, *args: Any) -> Any:
        self.calls += 1
        return self.function(*args)


def test_export_hashes_each_row_once_and_writes_the_plain_writers_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "log.db"
    ids = _record(db)
    plain = tmp_path / "plain.afp"
    with af.SqliteStore(db, readonly=True) as store:
        rows = sum(len(list(store.read(run_id))) for run_id in ids)
        # the plain writer: each run read through the store (which computes the hashes it
        # does not keep), nothing verified
        write_bundle(store, ids, plain, library=f"agentfootprint {__version__}")
    counted = _Counted(chain.event_hash)
    for module in (row_checks, sqlite_layout, chain):  # every caller of event_hash
        monkeypatch.setattr(module, "event_hash", counted)
    assert not hasattr(bundle_write, "event_hash")  # the writer hashes nothing itself
    exported = tmp_path / "exported.afp"
    with af.SqliteStore(db, readonly=True) as store:
        af.export_runs(store, ids, exported)
    assert counted.calls == rows  # the verifier's, once per row: the writer reused them
    assert exported.read_bytes() == plain.read_bytes()


def test_a_child_exported_alone_writes_its_ancestors_as_read(tmp_path: Path) -> None:
    """The run asked for is written from its verification's rows; its ancestors, verified
    first (the verifier's, not kept), are read again: the same bytes either way."""
    db = tmp_path / "log.db"
    ids = _record(db, conversations=1)
    with af.SqliteStore(db, readonly=True) as store:
        af.export_runs(store, [ids[-1]], tmp_path / "child.afp")
        write_bundle(
            store, [ids[-1]], tmp_path / "plain.afp", library=f"agentfootprint {__version__}"
        )
    assert (tmp_path / "child.afp").read_bytes() == (tmp_path / "plain.afp").read_bytes()
    with af.BundleSource(tmp_path / "child.afp") as bundle:
        assert bundle.run_ids() == ids


class _CountedSeals(af.SqliteStore):
    """A real SQLite store that counts reads of its seal log, and can give a first read
    from before the last seals were stored."""

    late = 0  # how many leaves the first read leaves out

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.seal_reads = 0

    def seal_log(self) -> list[tuple[object, object]]:
        self.seal_reads += 1
        log = super().seal_log()
        if self.seal_reads == 1 and self.late:
            return log[: len(log) - self.late]
        return log


def test_export_reads_the_seal_log_once(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    ids = _record(db)
    with _CountedSeals(db, readonly=True) as store:
        assert len(store.seal_log()) == 6  # two sealed conversations of three runs
        store.seal_reads = 0
        af.export_runs(store, ids, tmp_path / "b.afp")
        assert store.seal_reads == 1  # once per export, not once per run (9 runs)


def test_a_run_sealed_after_the_first_read_is_looked_up_afresh(tmp_path: Path) -> None:
    """A sealed run the export's first copy of the seal log does not list (sealed after it
    was read) is looked up in a fresh read, as a verification's own read would be."""
    db = tmp_path / "log.db"
    ids = _record(db)
    with af.SqliteStore(db, readonly=True) as store:
        af.export_runs(store, ids, tmp_path / "expected.afp")
    with _CountedSeals(db, readonly=True) as store:
        store.late = 2
        af.export_runs(store, ids, tmp_path / "b.afp")
        assert store.seal_reads > 1
    assert (tmp_path / "b.afp").read_bytes() == (tmp_path / "expected.afp").read_bytes()


def test_a_sealed_run_the_log_does_not_list_still_fails_export(tmp_path: Path) -> None:
    """The copy read once per export never hides a finding: a sealed run that no read of
    the seal log lists is INVALID, and export refuses it."""
    db = tmp_path / "log.db"
    ids = _record(db, conversations=1)

    class Unlisted(af.SqliteStore):
        def seal_log(self) -> list[tuple[object, object]]:
            return super().seal_log()[:-1]

    with Unlisted(db, readonly=True) as store, pytest.raises(af.VerificationError) as caught:
        af.export_runs(store, ids, tmp_path / "b.afp")
    assert caught.value.code == "seal-log"
    assert not (tmp_path / "b.afp").exists()
