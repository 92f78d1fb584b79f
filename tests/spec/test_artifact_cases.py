"""Bundle version 3 (docs/log-format.md section 13.5) taught to the independent verifier from
the page: on bundles the library's writer makes of hand-built logs and real agent runs, with a
real artifact store, and on bundles a holder edited (a line changed, the trailer recomputed,
as anyone can), both verifiers give every run the same verdict and every minted artifact the
same status: ``ok``; ``mismatch`` for a byte flipped in the carried bytes and for an entry that
describes another artifact than the run recorded; ``bundle`` for a chunk missing, overlapping
or carried for an entry that is not ``ok``; ``withheld`` for a run under a redaction policy;
``expired``, ``erased`` and ``missing`` as the store said.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest import mock

import independent_verifier as iv
import orjson
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import agentfootprint as af
from agentfootprint.audit.bundle_artifacts import check_bundle_artifacts
from agentfootprint.exchange import bundle_write
from agentfootprint.exchange.transfer import export_runs
from agentfootprint.logformat.hashing import hexdigest
from agentfootprint.store.artifacts import Retention, open_artifacts
from agentfootprint.store.artifacts_file import FileArtifacts
from agentfootprint.testing.seals import SIGNER
from agentfootprint.verify.bundle import BundleSource
from agentfootprint.verify.verifier import VerificationError, Verifier
from artifact_logs import placed_run

#: small lines, so that a few kilobytes make several of them (section 13.5 allows 32 MiB)
CHUNK = 1000
CONTENTS = {
    "run-a": [bytes(range(256)) * 10, b"the second one"],  # 2,560 bytes: three lines
    "run-b": [b"z" * 999],
}
Both = tuple[dict[Any, str], list[tuple[Any, int, Any, str]] | str]


# -- the two verifiers, in one shape --------------------------------------------------------


def reference(path: Path, keys: tuple[Any, ...] = ()) -> Both:
    """``({run: outcome or code}, [(run, seq, ref, status)])``, or ``({None: code}, code)``
    when the bundle is not opened."""
    if not path.read_bytes().startswith(iv.BUNDLE_PREFIX):  # as open_log: then no log
        return {None: "usage"}, "usage"
    try:
        source = BundleSource(path)
    except VerificationError as exc:
        return {None: exc.code}, exc.code
    except af.FileError:  # a newer version: not judged
        return {None: "usage"}, "usage"
    with source:
        runs: dict[Any, str] = {}
        for run, result in Verifier(source, trusted_keys=keys).verify_all():
            runs[run] = (
                result.code if isinstance(result, VerificationError) else result.outcome.value
            )
        found = [
            (v.run_id, v.seq, v.ref, v.status)
            for v in check_bundle_artifacts(source, trusted_keys=keys)
        ]
    return runs, found


def independent(path: Path, keys: tuple[Any, ...] = ()) -> Both:
    raw = [key.raw for key in keys]
    runs = {run: code for run, code, _ in iv.verify_file(path, raw) if code != "index"}
    return runs, iv.artifact_verdicts(path, raw)


def both(path: Path, keys: tuple[Any, ...] = ()) -> Both:
    """What both verifiers say of the bundle, checked to be the same."""
    ours, theirs = reference(path, keys), independent(path, keys)
    assert ours == theirs, iv.explain_file(path)
    return ours


def edited(bundle: Path, out: Path, change: Callable[[list[bytes]], None]) -> Path:
    """The bundle with ``change(lines)`` applied to its lines before the trailer (the manifest
    first) and its trailer's digest recomputed: a holder's edit, not damage."""
    lines = bundle.read_bytes().split(b"\n")[:-1]
    trailer = orjson.loads(lines.pop())
    change(lines)
    body = b"".join(line + b"\n" for line in lines)
    trailer["sha256"] = hashlib.sha256(body).hexdigest()
    out.write_bytes(body + orjson.dumps(trailer) + b"\n")
    return out


def chunk_lines(lines: list[bytes]) -> list[int]:
    return [i for i, line in enumerate(lines) if line.startswith(b'{"artifact":')]


def manifest_edit(change: Callable[[dict[str, Any]], None]) -> Callable[[list[bytes]], None]:
    def edit(lines: list[bytes]) -> None:
        manifest = orjson.loads(lines[0])
        change(manifest)
        lines[0] = orjson.dumps(manifest)

    return edit


def chunk_edit(at: int, change: Callable[[dict[str, Any]], None]) -> Callable[[list[bytes]], None]:
    """Change the ``at``-th artifact line's object."""

    def edit(lines: list[bytes]) -> None:
        index = chunk_lines(lines)[at]
        value = orjson.loads(lines[index])
        change(value)
        lines[index] = orjson.dumps(value)

    return edit


# -- bundles made by the writer -------------------------------------------------------------


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A log of two hand-built runs whose tools' results were placed in a FileArtifacts
    store, and its version 3 bundle (written with lines of CHUNK bytes)."""
    folder = tmp_path_factory.mktemp("made")
    log = af.SqliteStore(folder / "log.db")
    with FileArtifacts(folder / "artifacts") as store:
        placed = [
            p for run, contents in CONTENTS.items() for p in placed_run(log, store, run, contents)
        ]
    log.close()
    bundle = folder / "runs.afp"
    write(folder / "log.db", folder / "artifacts", list(CONTENTS), bundle)
    return {"bundle": bundle, "placed": placed, "folder": folder}


def write(log_path: Path, store_path: Path, run_ids: list[str], out: Path, **more: Any) -> Any:
    """``export_runs`` with the store opened read-only, in lines of CHUNK bytes."""
    log = af.SqliteStore(log_path, readonly=True)
    store = open_artifacts(store_path, readonly=True)
    try:
        with mock.patch.object(bundle_write, "_CHUNK", CHUNK):
            return export_runs(log, run_ids, out, artifacts=store, **more)
    finally:
        store.close()
        log.close()


def statuses(found: Any) -> list[str]:
    return [status for _, _, _, status in found]


def test_a_bundle_of_version_3_carries_the_bytes_and_both_find_each_artifact_ok(
    made: dict[str, Any],
) -> None:
    bundle, placed = made["bundle"], made["placed"]
    runs, found = both(bundle)
    assert runs == {"run-a": "VALID_UNSIGNED", "run-b": "VALID_UNSIGNED"}
    assert found == [(p.run_id, p.seq, p.ref, "ok") for p in placed]
    lines = bundle.read_bytes().split(b"\n")
    assert lines[0].startswith(b'{"agentfootprint_bundle":3,')
    assert len(chunk_lines(lines)) == 3 + 1 + 1  # 2,560 bytes in lines of 1,000, then two
    with BundleSource(bundle) as source:
        carried = source.artifact_source()
        assert carried is not None
        for p in placed:
            assert carried.read(p.scope, p.ref) == p.content
            assert (
                carried.content_digest(p.scope, p.ref)
                == p.digest
                == hexdigest("artifact", p.content)
            )


def test_a_byte_flipped_in_a_chunk_is_a_mismatch_and_the_runs_still_verify(
    made: dict[str, Any], tmp_path: Path
) -> None:
    def flip(value: dict[str, Any]) -> None:
        data = bytearray(base64.b64decode(value["data"]))
        data[17] ^= 1
        value["data"] = base64.b64encode(bytes(data)).decode()

    out = edited(made["bundle"], tmp_path / "flipped.afp", chunk_edit(1, flip))
    runs, found = both(out)
    assert set(runs.values()) == {"VALID_UNSIGNED"}
    assert statuses(found) == ["mismatch", "ok", "ok"]


@pytest.mark.parametrize(
    ("name", "change"),
    [
        ("a chunk missing", lambda lines: lines.pop(chunk_lines(lines)[1])),
        ("the last chunk missing", lambda lines: lines.pop(chunk_lines(lines)[2])),
        ("an overlapping offset", chunk_edit(1, lambda v: v.update(offset=v["offset"] - 1))),
        ("a gap", chunk_edit(1, lambda v: v.update(offset=v["offset"] + 1))),
        (
            "a chunk twice",
            lambda lines: lines.insert(chunk_lines(lines)[1], lines[chunk_lines(lines)[1]]),
        ),
        ("entries out of order", lambda lines: lines.append(lines.pop(chunk_lines(lines)[0]))),
        (
            "a chunk for a withheld entry",
            manifest_edit(lambda m: m["artifacts"][1].update(status="withheld")),
        ),
        (
            "a chunk for a missing entry",
            manifest_edit(lambda m: m["artifacts"][2].update(status="missing")),
        ),
        (
            "a chunk past its entry's bytes",
            manifest_edit(lambda m: m["artifacts"][1].update(bytes=10)),
        ),
        (
            "an ok entry cut short",
            manifest_edit(lambda m: m["artifacts"][2].update(bytes=1000)),
        ),
        ("an event line after an artifact line", lambda lines: lines.append(lines[1])),
        ("data not base64", chunk_edit(0, lambda v: v.update(data=v["data"][:-4] + "!!!!"))),
        (
            "data with unused bits set",
            chunk_edit(3, lambda v: v.update(data=v["data"][:-2] + "Z=")),
        ),
        ("empty data", chunk_edit(3, lambda v: v.update(data=""))),
        ("a member more", chunk_edit(0, lambda v: v.update(more=1))),
        ("an index past the entries", chunk_edit(0, lambda v: v.update(artifact=9))),
        (
            "an entry with a member more",
            manifest_edit(lambda m: m["artifacts"][0].update(note="x")),
        ),
        (
            "a scope and ref twice",
            manifest_edit(
                lambda m: m["artifacts"].append(dict(m["artifacts"][0], status="missing"))
            ),
        ),
        (
            "an erased entry without removed",
            manifest_edit(lambda m: m["artifacts"][2].update(status="erased")),
        ),
        (
            "an entry naming an unlisted run",
            manifest_edit(lambda m: m["artifacts"][0].update(run_id="run-z")),
        ),
        ("no artifacts member", manifest_edit(lambda m: m.pop("artifacts"))),
    ],
)
def test_framing_a_holder_breaks_is_a_bundle_failure_for_both(
    made: dict[str, Any], tmp_path: Path, name: str, change: Callable[[list[bytes]], None]
) -> None:
    out = edited(made["bundle"], tmp_path / "edited.afp", change)
    assert both(out) == ({None: "bundle"}, "bundle"), name


def test_an_entry_that_describes_another_artifact_is_a_mismatch_though_its_bytes_are_right(
    made: dict[str, Any], tmp_path: Path
) -> None:
    other = hexdigest("artifact", b"another artifact")
    out = edited(
        made["bundle"],
        tmp_path / "entry.afp",
        manifest_edit(lambda m: m["artifacts"][1].update(digest=other)),
    )
    runs, found = both(out)
    assert set(runs.values()) == {"VALID_UNSIGNED"}
    assert statuses(found) == ["ok", "mismatch", "ok"]
    with BundleSource(out) as source:  # the bytes are the recorded ones: the entry lies
        (verdict,) = [v for v in check_bundle_artifacts(source) if v.status == "mismatch"]
        assert other in verdict.detail and made["placed"][1].digest in verdict.detail


def test_an_entry_listed_under_another_scope_is_missing(
    made: dict[str, Any], tmp_path: Path
) -> None:
    out = edited(
        made["bundle"],
        tmp_path / "scope.afp",
        manifest_edit(lambda m: m["artifacts"][2].update(scope="run-a")),
    )
    assert statuses(both(out)[1]) == ["ok", "ok", "missing"]


def test_the_store_says_expired_erased_or_missing_and_the_bundle_says_it_too(
    tmp_path: Path,
) -> None:
    log = af.SqliteStore(tmp_path / "log.db")
    with FileArtifacts(tmp_path / "artifacts", retention=Retention(max_count=2)) as store:
        placed = placed_run(log, store, "run-a", [b"a" * 300, b"b" * 300, b"c" * 300])
        (swept,) = store.sweep("run-a", now=1_700_000_000_005)  # max_count: the oldest goes
        assert swept.ref == placed[0].ref and swept.reason == "expired"
        store.remove("run-a", placed[1].ref, reason="erased", at=1_700_000_000_009, note="asked")
    never = placed_run(log, None, "run-b", [b"never stored"])
    log.close()
    out = tmp_path / "runs.afp"
    manifest = write(tmp_path / "log.db", tmp_path / "artifacts", ["run-a", "run-b"], out)
    assert [e["status"] for e in manifest["artifacts"]] == ["expired", "erased", "ok", "missing"]
    assert manifest["artifacts"][1]["removed"] == {"at": 1_700_000_000_009, "note": "asked"}
    runs, found = both(out)
    assert runs == {"run-a": "VALID_UNSIGNED", "run-b": "VALID_UNSIGNED"}
    assert found == [
        ("run-a", 1, placed[0].ref, "expired"),
        ("run-a", 2, placed[1].ref, "erased"),
        ("run-a", 3, placed[2].ref, "ok"),
        ("run-b", 1, never[0].ref, "missing"),
    ]


def test_a_ticket_that_names_another_digest_is_a_mismatch_though_the_bytes_are_carried(
    tmp_path: Path,
) -> None:
    log = af.SqliteStore(tmp_path / "log.db")
    with FileArtifacts(tmp_path / "artifacts") as store:
        other = hexdigest("artifact", b"other")
        placed_run(log, store, "run-a", [b"x" * 400], tamper=lambda t: {**t, "digest": other})
    log.close()
    out = tmp_path / "runs.afp"
    write(tmp_path / "log.db", tmp_path / "artifacts", ["run-a"], out)
    runs, found = both(out)
    assert runs == {"run-a": "VALID_UNSIGNED"} and statuses(found) == ["mismatch"]


def test_a_run_that_fails_verification_gives_no_artifact_verdict(tmp_path: Path) -> None:
    log = af.SqliteStore(tmp_path / "log.db")
    with FileArtifacts(tmp_path / "artifacts") as store:
        placed_run(log, store, "run-a", [b"x" * 400])
    log.close()
    out = tmp_path / "runs.afp"
    write(tmp_path / "log.db", tmp_path / "artifacts", ["run-a"], out)

    def break_commit(lines: list[bytes]) -> None:  # the commit's count, its hashes kept
        at = next(i for i, line in enumerate(lines) if b'"commit"' in line and b"stage_run" in line)
        lines[at] = lines[at].replace(b'\\"writes\\":1', b'\\"writes\\":2')

    runs, found = both(edited(out, tmp_path / "broken.afp", break_commit))
    assert runs["run-a"] not in ("VALID", "VALID_UNSIGNED", "UNSEALED") and found == []


# -- agent runs --------------------------------------------------------------------------


def export_tool(result: Any) -> af.Tool:
    return af.define_tool(
        name="export",
        description="Export the orders.",
        input_schema={"type": "object", "properties": {}},
        execute=lambda args: result,
    )


def agent_run(folder: Path, result: Any, **options: Any) -> str:
    """One agent run whose tool's result is placed in a FileArtifacts store."""
    with af.Agent(
        provider=af.MockProvider([af.reply(tool_calls=[af.tool_call("export", {})]), "done"]),
        model="m",
        tools=[export_tool(result)],
        store=folder / "log.db",
        artifacts={"store": FileArtifacts(folder / "artifacts"), "max_inline_chars": 1000},
        **options,
    ) as agent:
        return agent.run_sync("export the orders").run_id


def test_a_run_under_a_redaction_policy_has_its_artifacts_withheld(tmp_path: Path) -> None:
    rows = {
        "rows": [{"id": i, "card": "4111-1111-1111-1111" if i == 7 else "-"} for i in range(300)]
    }
    run_id = agent_run(tmp_path, rows, redact=af.RedactionPolicy(keys=["card"]))
    out = tmp_path / "runs.afp"
    manifest = write(tmp_path / "log.db", tmp_path / "artifacts", [run_id], out)
    (entry,) = manifest["artifacts"]
    assert entry["status"] == "withheld" and entry["removed"] is None
    assert not chunk_lines(out.read_bytes().split(b"\n"))  # digests only: no bytes
    runs, found = both(out)
    assert runs == {run_id: "VALID_UNSIGNED"}
    assert found == [(run_id, entry["seq"], entry["ref"], "withheld")]


def test_a_sealed_agent_run_exported_with_a_checkpoint_and_its_artifacts(tmp_path: Path) -> None:
    big = "id,total\n" + "".join(f"{i},{i * 3}\n" for i in range(3000))
    run_id = agent_run(tmp_path, big, signer=SIGNER)
    out = tmp_path / "runs.afp"
    manifest = write(
        tmp_path / "log.db", tmp_path / "artifacts", [run_id], out, signer=SIGNER, origin="o"
    )
    assert manifest["agentfootprint_bundle"] == 3 and "checkpoint" in manifest
    assert manifest["runs"][0]["inclusion"] is not None
    runs, found = both(out, (SIGNER.public,))
    assert runs == {run_id: "VALID"} and statuses(found) == ["ok"]
    assert iv.inclusions(out, [SIGNER.public.raw])[run_id] is not None


# -- random edits -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """A small version 3 bundle: two runs, three artifacts in five lines."""
    folder = tmp_path_factory.mktemp("small")
    log = af.SqliteStore(folder / "log.db")
    with FileArtifacts(folder / "artifacts") as store:
        placed_run(log, store, "run-a", [bytes(range(256)) * 5, b"second"])
        placed = placed_run(log, store, "run-b", [b"q" * 600])
        store.remove("run-b", placed[0].ref, reason="erased", at=5, note="n")
    log.close()
    out = folder / "runs.afp"
    with mock.patch.object(bundle_write, "_CHUNK", 600):
        write(folder / "log.db", folder / "artifacts", ["run-a", "run-b"], out)
    return out.read_bytes()


@given(
    how=st.sampled_from(["flip", "drop", "copy", "move"]),
    line=st.integers(0, 20),
    other=st.integers(0, 20),
    at=st.integers(0, 10**6),
    bit=st.integers(0, 7),
)
@example(how="flip", line=0, at=400, bit=0, other=0)  # inside the manifest's artifacts
@example(how="flip", line=13, at=40, bit=1, other=0)  # inside a chunk's data
@example(how="move", line=12, other=11, at=0, bit=0)  # an artifact line among the events
def test_both_verifiers_agree_on_a_bundle_a_holder_edited(
    small: bytes,
    tmp_path_factory: pytest.TempPathFactory,
    how: str,
    line: int,
    other: int,
    at: int,
    bit: int,
) -> None:
    """One line's bit flipped, a line dropped, copied or moved (any line but the trailer),
    the trailer recomputed: whatever breaks (the framing, a run, an artifact), both
    verifiers say the same of every run and every artifact."""
    folder = tmp_path_factory.mktemp("edit")
    source = folder / "small.afp"
    source.write_bytes(small)

    def edit(lines: list[bytes]) -> None:
        index, to = line % len(lines), other % len(lines)
        if how == "flip":
            data = bytearray(lines[index])
            data[at % len(data)] ^= 1 << bit
            lines[index] = bytes(data)
        elif how == "drop":
            lines.pop(index)
        elif how == "copy":
            lines.insert(to, lines[index])
        else:
            lines.insert(to, lines.pop(index))

    both(edited(source, folder / "edited.afp", edit))
