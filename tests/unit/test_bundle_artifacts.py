"""Bundle version 3, the library's side (docs/log-format.md section 13.5): without a store the
writer writes the very bytes it always wrote; with one, a version 3 bundle whose artifacts are
read back a line at a time, never held whole to open it, and refused when the file changes
under the reader; import takes the runs only; ``export --artifacts STORE`` on the command line.
The verdicts, and the framing a holder can break, are in tests/spec/test_artifact_cases.py,
where the independent verifier gives the same ones."""

from __future__ import annotations

import sqlite3
import tracemalloc
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

import agentfootprint as af
from agentfootprint.audit.bundle_artifacts import check_bundle_artifacts
from agentfootprint.cli import main
from agentfootprint.errors import UsageError, VerificationError
from agentfootprint.exchange.bundle_write import write_bundle
from agentfootprint.exchange.transfer import export_runs, import_bundle
from agentfootprint.store.artifacts import MemoryArtifacts, open_artifacts
from agentfootprint.store.artifacts_file import FileArtifacts
from agentfootprint.verify.bundle import BundleSource
from agentfootprint.verify.verifier import Verifier
from artifact_logs import placed_run

VECTORS = Path(__file__).resolve().parents[1] / "vectors"
#: the size of the large artifact: ten lines of 1 MiB, the last one short
BIG = 10_000_000


@pytest.mark.parametrize("name", ["valid", "unsealed", "body-changed", "row-dropped"])
def test_without_a_store_the_writer_writes_the_bytes_it_always_wrote(
    tmp_path: Path, name: str
) -> None:
    """The vectors' bundles were written before version 3 existed: written again from their
    databases, byte for byte the same."""
    db = VECTORS / f"{name}.db"
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        ids = [
            row[0]
            for row in conn.execute("SELECT run_id FROM events GROUP BY run_id ORDER BY MIN(rowid)")
        ]
    conn.close()
    out = tmp_path / "again.afp"
    store = af.SqliteStore(db, readonly=True)
    try:
        manifest = write_bundle(store, ids, out, library="agentfootprint vectors")
    finally:
        store.close()
    assert "artifacts" not in manifest and manifest["agentfootprint_bundle"] == 1
    assert out.read_bytes() == (VECTORS / f"{name}.afp").read_bytes()


@pytest.fixture
def log(tmp_path: Path) -> Any:
    """A log whose run ``run-a`` placed two results in a FileArtifacts store, and ``run-b``
    placed none."""
    path = tmp_path / "log.db"
    store = af.SqliteStore(path)
    with FileArtifacts(tmp_path / "artifacts") as artifacts:
        placed = placed_run(store, artifacts, "run-a", [b"a" * BIG, b"small"])
    placed_run(store, None, "run-b", [])
    store.close()
    return {"path": path, "artifacts": tmp_path / "artifacts", "placed": placed}


def export(log: dict[str, Any], out: Path, run_ids: list[str], store: Any = None) -> Any:
    source = af.SqliteStore(log["path"], readonly=True)
    try:
        return export_runs(source, run_ids, out, artifacts=store)
    finally:
        source.close()


def test_a_store_given_makes_version_3_and_without_one_a_bundle_carries_none(
    log: dict[str, Any], tmp_path: Path
) -> None:
    plain = export(log, tmp_path / "plain.afp", ["run-a"])
    assert plain["agentfootprint_bundle"] == 1 and "artifacts" not in plain
    with BundleSource(tmp_path / "plain.afp") as source:
        assert source.artifact_source() is None
        assert list(check_bundle_artifacts(source)) == []
    with open_artifacts(log["artifacts"], readonly=True) as store:
        none = export(log, tmp_path / "none.afp", ["run-b"], store)
        carried = export(log, tmp_path / "carried.afp", ["run-a"], store)
    assert none["agentfootprint_bundle"] == 3 and none["artifacts"] == []
    assert carried["agentfootprint_bundle"] == 3
    assert [(e["ref"], e["status"], e["bytes"]) for e in carried["artifacts"]] == [
        (p.ref, "ok", len(p.content)) for p in log["placed"]
    ]
    with BundleSource(tmp_path / "none.afp") as source:
        found = source.artifact_source()
        assert source.version == 3 and found is not None and found.entries() == ()


def test_an_artifact_is_read_back_a_line_at_a_time_and_opening_never_holds_it_whole(
    log: dict[str, Any], tmp_path: Path
) -> None:
    out = tmp_path / "runs.afp"
    with open_artifacts(log["artifacts"], readonly=True) as store:
        export(log, out, ["run-a"], store)
    big = log["placed"][0]
    tracemalloc.start()
    try:
        source = BundleSource(out)  # ten lines of 1 MiB, hashed as they go by
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    with source:
        assert peak < len(big.content)  # one line at a time, never the artifact
        carried = source.artifact_source()
        assert carried is not None
        pieces = list(carried.chunks(big.scope, big.ref))
        assert [len(piece) for piece in pieces] == [1 << 20] * 9 + [BIG - 9 * (1 << 20)]
        assert b"".join(pieces) == big.content == carried.read(big.scope, big.ref)
        assert carried.read(big.scope, "art_" + "0" * 22) is None
        assert carried.tombstone(big.scope, big.ref) is None


def test_a_chunk_changed_while_the_bundle_is_open_is_refused(
    log: dict[str, Any], tmp_path: Path
) -> None:
    out = tmp_path / "runs.afp"
    with open_artifacts(log["artifacts"], readonly=True) as store:
        export(log, out, ["run-a"], store)
    small = log["placed"][1]
    with BundleSource(out) as source:
        carried = source.artifact_source()
        assert carried is not None and carried.read(small.scope, small.ref) == b"small"
        big = log["placed"][0]
        data = out.read_bytes()  # the same size, its first line still base64 of "a"s
        out.write_bytes(data.replace(b"YWFh", b"YWFi", 1))
        with pytest.raises(VerificationError, match="changed while it was open") as caught:
            carried.read(big.scope, big.ref)
        assert caught.value.code == "bundle"


def test_importing_a_version_3_bundle_imports_its_runs_only(
    log: dict[str, Any], tmp_path: Path
) -> None:
    out = tmp_path / "runs.afp"
    with open_artifacts(log["artifacts"], readonly=True) as store:
        export(log, out, ["run-a", "run-b"], store)
    target = af.SqliteStore(tmp_path / "copy.db")
    try:
        with BundleSource(out) as source:
            assert import_bundle(source, target) == ["run-a", "run-b"]
        verdicts = dict(Verifier(target).verify_all())
        assert {run: v.outcome.value for run, v in verdicts.items()} == {
            "run-a": "VALID_UNSIGNED",
            "run-b": "VALID_UNSIGNED",
        }
    finally:
        target.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "artifacts",
        "copy.db",
        "log.db",
        "runs.afp",
    ]


def test_the_writer_refuses_an_artifacts_argument_that_is_no_store(
    log: dict[str, Any], tmp_path: Path
) -> None:
    with pytest.raises(UsageError, match="'artifacts' must be an artifact store") as caught:
        export(log, tmp_path / "runs.afp", ["run-a"], store=str(log["artifacts"]))
    assert caught.value.option == "artifacts"
    assert not (tmp_path / "runs.afp").exists()


def test_a_store_the_runs_never_put_in_lists_each_artifact_missing(
    log: dict[str, Any], tmp_path: Path
) -> None:
    manifest = export(log, tmp_path / "runs.afp", ["run-a"], MemoryArtifacts())
    assert [e["status"] for e in manifest["artifacts"]] == ["missing", "missing"]
    with BundleSource(tmp_path / "runs.afp") as source:
        assert [v.status for v in check_bundle_artifacts(source)] == ["missing", "missing"]


# -- the command line ------------------------------------------------------------------------


def test_export_with_artifacts_on_the_command_line(log: dict[str, Any], tmp_path: Path) -> None:
    out = tmp_path / "runs.afp"
    listing = sorted(p.name for p in log["artifacts"].rglob("*"))
    asked = ["export", str(log["path"]), "--run", "run-a", "--out", str(out)]
    result = CliRunner().invoke(main, [*asked, "--artifacts", str(log["artifacts"])])
    assert result.exit_code == 0, result.output
    assert "artifacts: 2 (2 ok)" in result.output
    assert orjson.loads(out.read_bytes().split(b"\n")[0])["agentfootprint_bundle"] == 3
    assert sorted(p.name for p in log["artifacts"].rglob("*")) == listing  # only read
    verified = CliRunner().invoke(main, ["verify", str(out)])
    assert verified.exit_code == 0, verified.output
    assert all(p.ref in verified.output for p in log["placed"])


@pytest.mark.parametrize("which", ["missing", "the log", "a text file"])
def test_export_refuses_a_store_it_cannot_read_and_writes_nothing(
    log: dict[str, Any], tmp_path: Path, which: str
) -> None:
    store = {
        "missing": tmp_path / "nowhere",
        "the log": log["path"],
        "a text file": tmp_path / "notes.txt",
    }[which]
    if which == "a text file":
        store.write_text("not a store\n")
    before = sorted(p.name for p in tmp_path.iterdir())
    out = tmp_path / "runs.afp"
    result = CliRunner().invoke(
        main,
        [
            "export",
            str(log["path"]),
            "--run",
            "run-a",
            "--out",
            str(out),
            "--artifacts",
            str(store),
        ],
    )
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and "Error:" in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == before
