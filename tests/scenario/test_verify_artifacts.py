"""``agentfootprint verify LOG --artifacts STORE``, ``artifacts erase`` and ``artifacts list``
through the command line (docs/artifacts.md, "Verifying artifacts").

The logs are hand-built (tests/artifact_logs.py: the minted event and the ticket exactly as
docs/artifacts.md specifies, written through ``RunWriter``), the stores real directories and
SQLite files, and every damage is done behind the store's back, as a forger or a failing disk
would: the log's own verdict must stay what it is, the artifact's line must say what
happened.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import orjson
import pytest
from click.testing import CliRunner, Result

import agentfootprint as af
from agentfootprint.cli import EXIT_INVALID, EXIT_OK, EXIT_UNSEALED, EXIT_USAGE, main
from agentfootprint.logformat.hashing import hexdigest
from agentfootprint.store.artifacts import ArtifactStore
from agentfootprint.store.artifacts_file import FileArtifacts, scope_key
from agentfootprint.store.artifacts_sqlite import SqliteArtifacts
from artifact_logs import Placed, placed_run

BIG = b"id,total\n" + b"".join(b"%d,%d\n" % (i, i * 3) for i in range(200))
OTHER = b"a second result, placed too: " + b"z" * 400


def invoke(*args: str | Path) -> Result:
    """The command, in process; never a traceback, whatever happens."""
    result = CliRunner().invoke(main, [str(arg) for arg in args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    return result


def lines(result: Result, word: str) -> list[str]:
    return [line for line in result.stdout.splitlines() if line.startswith(word)]


def snapshot(path: Path) -> dict[str, bytes]:
    """Every file under ``path`` (or the file itself) and its bytes: what "unchanged" means."""
    if path.is_file():
        return {path.name: path.read_bytes()}
    return {
        str(p.relative_to(path)): p.read_bytes() if p.is_file() else b"<dir>"
        for p in sorted(path.rglob("*"))
    }


@pytest.fixture(params=["directory", "sqlite"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], ArtifactStore]:
    """Each test runs against both persistent backends."""
    where = tmp_path / ("artifacts" if request.param == "directory" else "artifacts.db")

    def make() -> ArtifactStore:
        return FileArtifacts(where) if request.param == "directory" else SqliteArtifacts(where)

    return make


@pytest.fixture
def recorded(
    tmp_path: Path, backend: Callable[[], ArtifactStore]
) -> Iterator[tuple[Path, Path, list[Placed]]]:
    """A log with one closed run that placed two results, and the store holding them."""
    log = af.SqliteStore(tmp_path / "runs.db")
    with backend() as store:
        placed = placed_run(log, store, "run-1", [BIG, OTHER])
        held = Path(store.holds_path or "")
    log.close()
    yield tmp_path / "runs.db", held, placed


def flip_stored_byte(store: Path, item: Placed, at: int = 0) -> None:
    """Change one byte of an artifact's stored content, as a failing disk or a forger would."""
    if store.is_dir():
        path = store / scope_key(item.scope) / f"{item.ref}.bin"
        data = bytearray(path.read_bytes())
        data[at] ^= 0x01
        path.write_bytes(bytes(data))
        return
    with sqlite3.connect(store) as conn:
        (content,) = conn.execute(
            "SELECT content FROM artifacts WHERE scope = ? AND ref = ?", (item.scope, item.ref)
        ).fetchone()
        data = bytearray(content)
        data[at] ^= 0x01
        conn.execute(
            "UPDATE artifacts SET content = ? WHERE scope = ? AND ref = ?",
            (bytes(data), item.scope, item.ref),
        )
    conn.close()


def delete_behind_the_back(store: Path, item: Placed) -> None:
    """Remove an artifact's bytes, head and tombstone without the store knowing."""
    if store.is_dir():
        folder = store / scope_key(item.scope)
        for suffix in (".bin", ".head.json", ".tomb.json"):
            (folder / f"{item.ref}{suffix}").unlink(missing_ok=True)
        return
    with sqlite3.connect(store) as conn:
        for table in ("artifacts", "tombstones"):
            conn.execute(f"DELETE FROM {table} WHERE scope = ? AND ref = ?", (item.scope, item.ref))
    conn.close()


def test_every_artifact_ok_after_the_logs_own_verdict(
    recorded: tuple[Path, Path, list[Placed]],
) -> None:
    db, store, placed = recorded
    before = snapshot(store)
    result = invoke("verify", db, "--artifacts", store)
    assert result.exit_code == EXIT_OK, result.output
    out = result.stdout.splitlines()
    assert out[0].startswith("VALID ") and "run run-1" in out[0]
    assert out[1:] == [
        f"ARTIFACT        {p.ref} run run-1 seq {p.seq}: ok" for p in placed
    ]  # one line each, after the verdicts, in seq order
    assert snapshot(store) == before  # opened read-only: not a byte changed


def test_a_flipped_byte_is_a_mismatch_naming_both_digests_while_the_log_stays_valid(
    recorded: tuple[Path, Path, list[Placed]],
) -> None:
    db, store, placed = recorded
    flip_stored_byte(store, placed[0], at=17)
    changed = bytearray(BIG)
    changed[17] ^= 0x01
    found = hexdigest("artifact", bytes(changed))
    result = invoke("verify", db, "--artifacts", store)
    assert result.exit_code == EXIT_INVALID
    (verdict,) = lines(result, "VALID")  # the log's own verdict does not depend on the store
    assert "run run-1" in verdict
    first, second = lines(result, "ARTIFACT")
    assert f"{placed[0].ref} run run-1 seq 1: mismatch" in first
    assert placed[0].digest in first and found in first  # recorded and found, both named
    assert second.endswith(": ok")
    alone = invoke("verify", db)  # without --artifacts nothing about the store is said
    assert alone.exit_code == EXIT_OK and "ARTIFACT" not in alone.output


def test_an_artifact_erased_with_the_command_is_erased_and_the_log_verifies(
    recorded: tuple[Path, Path, list[Placed]],
) -> None:
    db, store, placed = recorded
    erased = invoke(
        "artifacts", "erase", store, "--scope", "run-1", "--ref", placed[1].ref,
        "--reason", "request 42",
    )  # fmt: skip
    assert erased.exit_code == EXIT_OK, erased.output
    assert f"erased {placed[1].ref} from scope run-1: {len(OTHER)} bytes removed" in erased.stdout
    with (FileArtifacts if store.is_dir() else SqliteArtifacts)(store, readonly=True) as opened:
        assert opened.read("run-1", placed[1].ref) is None
        tomb = opened.tombstone("run-1", placed[1].ref)
    assert tomb is not None and (tomb.reason, tomb.note) == ("erased", "request 42")
    assert tomb.digest == placed[1].digest
    result = invoke("verify", db, "--artifacts", store)
    assert result.exit_code == EXIT_OK, result.output
    assert lines(result, "VALID")
    ok, gone = lines(result, "ARTIFACT")
    assert ok.endswith(": ok")
    assert f"{placed[1].ref} run run-1 seq 2: erased (" in gone and "note: request 42" in gone
    again = invoke("artifacts", "erase", store, "--scope", "run-1", "--ref", placed[1].ref)
    assert again.exit_code == EXIT_USAGE and "removed already (erased at" in again.output


@pytest.mark.parametrize("how", ["remove", "sweep"])
def test_an_artifact_retention_removed_is_expired(
    tmp_path: Path, backend: Callable[[], ArtifactStore], how: str
) -> None:
    log = af.SqliteStore(tmp_path / "runs.db")
    with backend() as store:
        (item,) = placed_run(log, store, "run-1", [BIG], expires_at=1_700_000_500_000)
        if how == "remove":
            store.remove("run-1", item.ref, reason="expired", at=1_700_000_600_000, note="ttl")
        else:
            assert [t.ref for t in store.sweep("run-1", 1_700_000_900_000)] == [item.ref]
        held = Path(store.holds_path or "")
    log.close()
    result = invoke("verify", tmp_path / "runs.db", "--artifacts", held)
    assert result.exit_code == EXIT_OK, result.output
    (line,) = lines(result, "ARTIFACT")
    assert f"{item.ref} run run-1 seq 1: expired (" in line and "note: ttl" in line


def test_bytes_and_tombstone_gone_behind_the_stores_back_is_missing(
    recorded: tuple[Path, Path, list[Placed]],
) -> None:
    db, store, placed = recorded
    delete_behind_the_back(store, placed[0])
    result = invoke("verify", db, "--artifacts", store)
    assert result.exit_code == EXIT_INVALID
    assert lines(result, "VALID")
    missing, ok = lines(result, "ARTIFACT")
    assert f"{placed[0].ref} run run-1 seq 1: missing (" in missing and ok.endswith(": ok")


def test_a_rechained_log_whose_ticket_names_another_digest_is_a_mismatch(
    tmp_path: Path, backend: Callable[[], ArtifactStore]
) -> None:
    forged = "0" * 64

    def other_digest(ticket: dict[str, Any]) -> dict[str, Any]:
        return {**ticket, "digest": forged}

    log = af.SqliteStore(tmp_path / "runs.db")
    with backend() as store:
        (item,) = placed_run(log, store, "run-1", [BIG], tamper=other_digest)
        held = Path(store.holds_path or "")
    log.close()
    alone = invoke("verify", tmp_path / "runs.db")
    assert alone.exit_code == EXIT_OK and lines(alone, "VALID")  # VALID on its own
    result = invoke("verify", tmp_path / "runs.db", "--artifacts", held)
    assert result.exit_code == EXIT_INVALID
    (line,) = lines(result, "ARTIFACT")
    assert f"{item.ref} run run-1 seq 1: mismatch" in line
    assert "the ticket in the history for call call_0 has digest" in line
    assert forged in line and item.digest in line  # the store's bytes are right: the ticket lies


def test_json_adds_one_object_per_artifact(recorded: tuple[Path, Path, list[Placed]]) -> None:
    db, store, placed = recorded
    flip_stored_byte(store, placed[1])
    result = invoke("verify", db, "--artifacts", store, "--json")
    assert result.exit_code == EXIT_INVALID
    document = orjson.loads(result.stdout)  # one JSON object, whatever happens
    assert [run["outcome"] for run in document["runs"]] == ["VALID_UNSIGNED"]
    assert document["exit"] == EXIT_INVALID
    ok, bad = document["artifacts"]
    assert ok == {
        "run_id": "run-1",
        "seq": 1,
        "scope": "run-1",
        "ref": placed[0].ref,
        "tool_call_id": "call_0",
        "digest": placed[0].digest,
        "status": "ok",
        "found": placed[0].digest,
        "detail": ok["detail"],
    }
    assert (bad["status"], bad["ref"], bad["digest"]) == (
        "mismatch",
        placed[1].ref,
        placed[1].digest,
    )
    assert bad["found"] not in (None, placed[1].digest) and bad["found"] in bad["detail"]
    plain = orjson.loads(invoke("verify", db, "--json").stdout)
    assert "artifacts" not in plain  # no store named, no artifact check


def test_the_output_does_not_depend_on_the_time_it_runs(
    tmp_path: Path, backend: Callable[[], ArtifactStore]
) -> None:
    log = af.SqliteStore(tmp_path / "runs.db")
    with backend() as store:
        (item,) = placed_run(log, store, "run-1", [BIG], expires_at=1)  # stated expiry long past
        held = Path(store.holds_path or "")
    log.close()
    now = invoke("verify", tmp_path / "runs.db", "--artifacts", held)
    assert now.exit_code == EXIT_OK
    assert lines(now, "ARTIFACT") == [f"ARTIFACT        {item.ref} run run-1 seq 1: ok"]
    far = 4_102_444_800  # 2100-01-01: whatever the clock says, the same output
    with (
        mock.patch.object(time, "time", return_value=far),
        mock.patch.object(time, "time_ns", return_value=far * 10**9),
    ):
        later = invoke("verify", tmp_path / "runs.db", "--artifacts", held)
    assert (later.exit_code, later.stdout) == (now.exit_code, now.stdout)


def test_only_verified_runs_are_checked_and_an_unsealed_one_is(tmp_path: Path) -> None:
    log = af.SqliteStore(tmp_path / "runs.db")
    with FileArtifacts(tmp_path / "artifacts") as store:
        placed_run(log, store, "broken", [BIG], broken=True)
        (open_item,) = placed_run(log, store, "crashed", [OTHER], closed=False)
    log.close()
    result = invoke("verify", tmp_path / "runs.db", "--artifacts", tmp_path / "artifacts")
    assert result.exit_code == EXIT_INVALID  # the broken run's own verdict
    assert len(lines(result, "INVALID")) == 1 and len(lines(result, "UNSEALED")) == 1
    (line,) = lines(result, "ARTIFACT")  # none for the run that does not verify
    assert line == f"ARTIFACT        {open_item.ref} run crashed seq 1: ok"
    only = invoke(
        "verify", tmp_path / "runs.db", "--run", "crashed", "--artifacts", tmp_path / "artifacts"
    )
    assert only.exit_code == EXIT_UNSEALED and lines(only, "ARTIFACT") == [line]


def test_a_log_without_artifacts_says_so(tmp_path: Path) -> None:
    log = af.SqliteStore(tmp_path / "runs.db")
    placed_run(log, None, "plain", [])
    log.close()
    FileArtifacts(tmp_path / "artifacts").close()
    result = invoke("verify", tmp_path / "runs.db", "--artifacts", tmp_path / "artifacts")
    assert result.exit_code == EXIT_OK
    assert result.stdout.splitlines()[-1] == "no artifacts to check: no verified run minted one"


@pytest.mark.parametrize("json_out", [False, True])
@pytest.mark.parametrize(
    "what",
    ["missing", "log itself", "another log", "alien directory", "empty directory", "text", "fifo"],
)
def test_a_store_that_is_not_one_is_a_usage_error_and_nothing_is_created(
    recorded: tuple[Path, Path, list[Placed]], tmp_path: Path, what: str, json_out: bool
) -> None:
    db, _, _ = recorded
    target = {
        "missing": tmp_path / "absent",
        "log itself": db,
        "another log": tmp_path / "other.db",
        "alien directory": tmp_path / "photos",
        "empty directory": tmp_path / "empty",
        "text": tmp_path / "notes.txt",
        "fifo": tmp_path / "pipe",
    }[what]
    if what == "another log":
        af.SqliteStore(target).close()
    elif what == "alien directory":
        target.mkdir()
        (target / "cat.jpg").write_bytes(b"\xff\xd8")
    elif what == "empty directory":
        target.mkdir()
    elif what == "text":
        target.write_text("not a store")
    elif what == "fifo":
        os.mkfifo(target)  # refused before it is opened: an open would block
    before = {p.name: snapshot(p) for p in tmp_path.iterdir()}
    result = invoke("verify", db, "--artifacts", target, *(["--json"] if json_out else []))
    assert result.exit_code == EXIT_USAGE, result.output
    assert {p.name: snapshot(p) for p in tmp_path.iterdir()} == before  # nothing made or changed
    if json_out:
        document = orjson.loads(result.stdout)
        assert document["exit"] == EXIT_USAGE and document["runs"] == []
    else:
        assert result.stdout == ""  # no verdict before the usage error
        assert result.output.startswith("Error: ") and result.output.count("\n") == 1
    if what == "log itself":
        assert "is the log itself" in result.output


def test_erase_refuses_what_it_cannot_erase_and_never_creates_a_store(
    recorded: tuple[Path, Path, list[Placed]], tmp_path: Path
) -> None:
    _, store, placed = recorded
    before = snapshot(store)
    unknown = invoke("artifacts", "erase", store, "--scope", "run-1", "--ref", "art_" + "x" * 22)
    assert unknown.exit_code == EXIT_USAGE and "no artifact art_xxxx" in unknown.output
    other_scope = invoke("artifacts", "erase", store, "--scope", "run-2", "--ref", placed[0].ref)
    assert other_scope.exit_code == EXIT_USAGE and "in scope run-2" in other_scope.output
    not_a_ref = invoke("artifacts", "erase", store, "--scope", "run-1", "--ref", "orders.csv")
    assert not_a_ref.exit_code == EXIT_USAGE and "is not an artifact ref" in not_a_ref.output
    assert snapshot(store) == before
    (tmp_path / "empty").mkdir()
    for target in (tmp_path / "absent", tmp_path / "absent.db", tmp_path / "empty"):
        refused = invoke("artifacts", "erase", target, "--scope", "s", "--ref", placed[0].ref)
        assert refused.exit_code == EXIT_USAGE and refused.output.startswith("Error: ")
    assert not (tmp_path / "absent").exists() and not (tmp_path / "absent.db").exists()
    assert list((tmp_path / "empty").iterdir()) == []  # an empty folder did not become a store


def test_list_shows_the_live_artifacts_of_a_scope_read_only(
    recorded: tuple[Path, Path, list[Placed]],
) -> None:
    _, store, placed = recorded
    before = snapshot(store)
    listed = invoke("artifacts", "list", store, "--scope", "run-1")
    assert listed.exit_code == EXIT_OK
    assert [line.split()[0] for line in listed.stdout.splitlines()] == [p.ref for p in placed]
    assert f"{len(BIG)} bytes  digest {placed[0].digest}" in listed.stdout
    document = orjson.loads(invoke("artifacts", "list", store, "--scope", "run-1", "--json").stdout)
    assert document["scope"] == "run-1"
    assert [(a["ref"], a["bytes"], a["digest"]) for a in document["artifacts"]] == [
        (p.ref, len(p.content), p.digest) for p in placed
    ]
    empty = invoke("artifacts", "list", store, "--scope", "nobody")
    assert empty.exit_code == EXIT_OK and empty.stdout == "no artifacts in scope nobody\n"
    assert snapshot(store) == before
    invoke("artifacts", "erase", store, "--scope", "run-1", "--ref", placed[0].ref)
    after = invoke("artifacts", "list", store, "--scope", "run-1")
    assert [line.split()[0] for line in after.stdout.splitlines()] == [placed[1].ref]


def test_a_real_agent_runs_artifacts_verify_and_an_erasure_keeps_the_log_valid(
    tmp_path: Path,
) -> None:
    export = af.define_tool(
        name="export",
        description="Export the orders.",
        input_schema={"type": "object", "properties": {}},
        execute=lambda args: BIG.decode(),
    )
    agent = af.Agent(
        provider=af.MockProvider([af.reply(tool_calls=[af.tool_call("export", {})]), "done"]),
        model="m",
        tools=[export],
        store=str(tmp_path / "runs.db"),
        artifacts={"store": af.FileArtifacts(tmp_path / "artifacts"), "max_inline_chars": 300},
    )
    with agent:
        result = agent.run_sync("export the orders")
    assert result.answer == "done"
    db, store = tmp_path / "runs.db", tmp_path / "artifacts"
    checked = invoke("verify", db, "--artifacts", store, "--json")
    assert checked.exit_code == EXIT_OK, checked.output
    (artifact,) = orjson.loads(checked.stdout)["artifacts"]
    assert (artifact["status"], artifact["scope"]) == ("ok", result.conversation_id)
    assert artifact["run_id"] == result.run_id
    erased = invoke(
        "artifacts", "erase", store, "--scope", result.conversation_id, "--ref", artifact["ref"]
    )
    assert erased.exit_code == EXIT_OK, erased.output
    after = invoke("verify", db, "--artifacts", store)
    assert after.exit_code == EXIT_OK
    assert lines(after, "VALID") and lines(after, "ARTIFACT")[0].split(": ")[1].startswith("erased")
    assert [p.name for p in store.rglob("*.bin")] == []  # the bytes are gone from the store


def test_verify_artifacts_runs_where_the_runtime_cannot_be_imported(
    recorded: tuple[Path, Path, list[Placed]],
) -> None:
    db, store, placed = recorded
    blocked = textwrap.dedent(
        f"""
        import importlib.abc, sys

        RUNNING = ("agentfootprint.runtime", "agentfootprint.features", "agentfootprint.agent")

        class NoRuntime(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if any(name == m or name.startswith(m + ".") for m in RUNNING):
                    raise ImportError(f"{{name}} is blocked")
                return None

        sys.meta_path.insert(0, NoRuntime())
        from agentfootprint.cli import main
        sys.argv = ["agentfootprint", "verify", {str(db)!r}, "--artifacts", {str(store)!r}]
        main()
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", blocked], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == EXIT_OK, done.stderr
    assert [line.split()[1] for line in done.stdout.splitlines()[1:]] == [p.ref for p in placed]


def test_a_bundle_is_checked_against_the_artifacts_it_carries_or_against_a_store_named(
    recorded: tuple[Path, Path, list[Placed]], tmp_path: Path
) -> None:
    db, store, placed = recorded
    erased = invoke("artifacts", "erase", store, "--scope", "run-1", "--ref", placed[1].ref)
    assert erased.exit_code == EXIT_OK
    bundle = tmp_path / "audit.afp"
    exported = invoke("export", db, "--run", "run-1", "--out", bundle, "--artifacts", store)
    assert exported.exit_code == EXIT_OK, exported.output
    flip_stored_byte(store, placed[0])  # the store changes after the export; the bundle not
    before = snapshot(bundle)
    carried = invoke("verify", bundle)  # no --artifacts: the bundle's own artifacts
    assert carried.exit_code == EXIT_OK, carried.output
    assert lines(carried, "VALID")
    ok, gone = lines(carried, "ARTIFACT")
    assert ok == f"ARTIFACT        {placed[0].ref} run run-1 seq 1: ok"
    assert f"{placed[1].ref} run run-1 seq 2: erased (" in gone
    against_store = invoke("verify", bundle, "--artifacts", store)
    assert against_store.exit_code == EXIT_INVALID
    changed, _ = lines(against_store, "ARTIFACT")
    assert f"{placed[0].ref} run run-1 seq 1: mismatch (the stored" in changed
    assert invoke("verify", bundle, "--artifacts", bundle).exit_code == EXIT_USAGE
    assert snapshot(bundle) == before
    plain = tmp_path / "plain.afp"
    assert invoke("export", db, "--run", "run-1", "--out", plain).exit_code == EXIT_OK
    assert "ARTIFACT" not in invoke("verify", plain).output  # a bundle without artifacts


def test_a_damaged_file_inside_the_store_is_named_without_a_traceback(tmp_path: Path) -> None:
    log = af.SqliteStore(tmp_path / "runs.db")
    with FileArtifacts(tmp_path / "artifacts") as opened:
        (item,) = placed_run(log, opened, "run-1", [BIG])
    log.close()
    store = tmp_path / "artifacts"
    head = store / scope_key("run-1") / f"{item.ref}.head.json"
    head.write_bytes(b'{"scope": 1}')
    for args in (
        ["verify", tmp_path / "runs.db", "--artifacts", store],
        ["artifacts", "list", store, "--scope", "run-1"],
    ):
        result = invoke(*args)
        assert result.exit_code == EXIT_USAGE
        assert f"{item.ref}.head.json" in result.output.splitlines()[-1]
