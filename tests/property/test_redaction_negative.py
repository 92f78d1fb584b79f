"""Forged redacted logs, disclosures and bundles fail verification, each with its own code.

Two redacted runs are recorded once per module (one under a key policy, one under
``conversation_redaction()``, each with a disclosure vault). Each example edits a fresh copy
of the database through a raw ``sqlite3`` connection with the append-only triggers dropped,
and re-chains the run (every event and chain hash recomputed), so only the redaction and
receipt checks can catch the edit:

* a changed digest in a served message: ``receipt`` at the next receipt;
* a changed digest in a value never served, with the vault's disclosures: ``disclosure``;
* a commitment moved to another key: ``disclosure`` ("names key"), or ``receipt`` if served;
* a digest repeated (a reused salt): ``commitment-reuse``;
* plaintext under a policy key: ``leak``; a malformed commitment: ``commitment``;
* a policy that is not what its digest says, or not in normal form: ``policy``;
* a disclosure that opens nothing, or nothing the log holds: ``disclosure``;
* bundles: dropped, duplicated or altered events with the framing recomputed fail on the
  events (``rows``, ``hash``, ``chain``); without it, or cut anywhere, or with a manifest
  that lies, ``bundle`` (and never another exception type).

Then bad input is refused where it enters, and a continued redacted run keeps its
parent's digests. Tampering happens after the runs closed (they were verified then).
"""

from __future__ import annotations

import hashlib
import itertools
import re
import sqlite3
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, NamedTuple

import orjson
import pytest
from click.testing import CliRunner
from hypothesis import assume, given
from hypothesis import strategies as st

import agentfootprint as af
from agentfootprint.cli import main
from agentfootprint.logformat.canonical import canon
from agentfootprint.logformat.commitments import (
    COMMIT_KEY,
    Disclosure,
    b64url,
    commitment_digest,
    parse_json_container,
)
from agentfootprint.logformat.request import RequestHasher, build_request
from agentfootprint.testing.redaction_strategies import json_text, key_policy, leaks
from agentfootprint.testing.tamper import (
    Row,
    plain,
    read_rows,
    rewrite,
    scratch_copy,
    tampering,
    verification_error,
)

HEX = "0123456789abcdef"
SECRETS = {
    name: "S3CR3T" + hashlib.sha256(name.encode()).hexdigest()[:32]
    for name in ("input", "ssn", "email", "account", "token", "result_email", "text")
}


# -- the recorded runs (helpers as in test_tamper.py) ----------------------------------------


class Site(NamedTuple):
    """One commitment in a row: its position in the row's walk, digest and key."""

    seq: int
    index: int  # type: ignore[assignment]  # (a field named like tuple.index)
    digest: str
    key: str | None


class Recorded:
    """The recorded database and vaults, the runs' rows, and where to put copies."""

    def __init__(
        self,
        *,
        path: Path,
        keys: str,
        text: str,
        vaults: dict[str, Path],
        rows: dict[str, list[Row]],
        bundle: bytes,
        scratch_dir: Path,
    ) -> None:
        self.path = path
        self.keys = keys
        self.text = text
        self.vaults = vaults
        self.rows = rows
        self.bundle = bundle
        self.scratch_dir = scratch_dir
        self.counter = itertools.count()

    def __repr__(self) -> str:
        return f"Recorded(keys={self.keys}, text={self.text})"

    def copy(self) -> AbstractContextManager[Path]:
        """A fresh copy of the recorded database, removed afterwards."""
        return scratch_copy(self.path, self.scratch_dir / f"copy{next(self.counter)}.db")

    def disclosures(self, run_id: str) -> list[Disclosure]:
        vault = af.DisclosureVault(self.vaults[run_id])
        try:
            return vault.disclose(vault.commitments(run_id))
        finally:
            vault.close()

    def sites(self, run_id: str) -> list[Site]:
        return [site for row in self.rows[run_id] for site in row_sites(row)]


def _lookup(args: Any) -> Any:
    return {"email": SECRETS["result_email"], "meta": json_text({"api_token": SECRETS["token"]})}


def _tools() -> list[af.Tool]:
    return [af.define_tool(name="lookup", description="looks things up", execute=_lookup)]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    root = tmp_path_factory.mktemp("redacted")
    path = root / "runs.db"
    vaults = {"keys": root / "keys-vault.db", "text": root / "text-vault.db"}
    store = af.SqliteStore(path)
    keys_agent = af.Agent(
        provider=af.MockProvider(
            [
                af.reply(
                    "looking",
                    tool_calls=[
                        af.tool_call("lookup", {"ssn": SECRETS["ssn"], "email": SECRETS["email"]}),
                        af.tool_call("lookup", json_text({"account_number": SECRETS["account"]})),
                    ],
                ),
                "done",
            ]
        ),
        model="m",
        system="you are careful",
        tools=_tools(),
        store=store,
        redact=key_policy(),
        disclosures=vaults["keys"],
    )
    keys = keys_agent.run_sync(json_text({"ssn": SECRETS["input"], "note": "hello"}))
    text_agent = af.Agent(
        provider=af.MockProvider(
            [
                af.reply("let me see", tool_calls=[af.tool_call("lookup", {"q": "balance"})]),
                "your balance is " + SECRETS["text"],
            ]
        ),
        model="m",
        tools=_tools(),
        store=store,
        redact=af.conversation_redaction(),
        disclosures=vaults["text"],
    )
    text = text_agent.run_sync("what is my balance?")
    verifier = af.Verifier(store)
    for run_id in (keys.run_id, text.run_id):
        assert verifier.verify(run_id).outcome is af.Outcome.VALID_UNSIGNED
    bundle = root / "export.jsonl"
    af.export_runs(store, [keys.run_id, text.run_id], bundle)
    keys_agent.close()
    text_agent.close()
    store.close()
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA journal_mode=DELETE")  # one self-contained file to copy
        rows = {r: read_rows(conn, r) for r in (keys.run_id, text.run_id)}
    finally:
        conn.close()
    return Recorded(
        path=path,
        keys=keys.run_id,
        text=text.run_id,
        vaults={keys.run_id: vaults["keys"], text.run_id: vaults["text"]},
        rows=rows,
        bundle=bundle.read_bytes(),
        scratch_dir=tmp_path_factory.mktemp("copies"),
    )


@contextmanager
def forged(recorded: Recorded, run_id: str, edits: dict[int, bytes]) -> Iterator[Path]:
    """A copy whose run has the given bodies replaced (by seq) and is re-chained."""
    rows = plain(recorded.rows[run_id])
    for seq, body in edits.items():
        rows[seq] = (rows[seq][0], rows[seq][1], body)
    with recorded.copy() as path:
        with tampering(path) as conn:
            rewrite(conn, run_id, rows)
        yield path


def disclosure_error(
    path: Path, run_id: str, disclosures: list[Disclosure]
) -> af.VerificationError:
    """The log verifies; checking the disclosures against it fails: that error."""
    store = af.SqliteStore(path)
    try:
        verifier = af.Verifier(store)
        assert verifier.verify(run_id).outcome is af.Outcome.VALID_UNSIGNED
        with pytest.raises(af.VerificationError) as info:
            verifier.check_disclosures(disclosures)
    finally:
        store.close()
    return info.value


# -- editing commitments ---------------------------------------------------------------------

Change = Callable[[int, dict[str, Any], str | None], Any]


def _edit(value: Any, change: Change, key: str | None, counter: Iterator[int]) -> Any:
    """``value`` with each commitment replaced by ``change(index, commitment, key)``;
    JSON text inside strings is searched and, when changed, written back canonically."""
    kind = type(value)
    if kind is dict:
        if COMMIT_KEY in value:
            return change(next(counter), value, key)
        return {k: _edit(v, change, k, counter) for k, v in value.items()}
    if kind is list:
        return [_edit(v, change, key, counter) for v in value]
    if kind is str:
        inner = parse_json_container(value)
        if inner is not None:
            edited = _edit(inner, change, key, counter)
            if canon(edited) != canon(inner):
                return canon(edited).decode("utf-8")
    return value


def edit_row(row: Row, change: Change) -> bytes:
    """``row``'s body with its commitments changed, canonical again."""
    body = row.value
    counter = itertools.count()
    if row.type == "write" and "value" in body:
        key = body["path"] if body["verb"] == "set" else None
        body["value"] = _edit(body["value"], change, key, counter)
    else:
        body = _edit(body, change, None, counter)
    return canon(body)


def row_sites(row: Row) -> list[Site]:
    found: list[Site] = []

    def note(index: int, commitment: dict[str, Any], key: str | None) -> Any:
        found.append(Site(row.seq, index, commitment[COMMIT_KEY], key))
        return commitment

    edit_row(row, note)
    return found


def at(index: int, replacement: Callable[[dict[str, Any]], Any]) -> Change:
    """A change that replaces only the ``index``-th commitment of a row."""

    def change(i: int, commitment: dict[str, Any], key: str | None) -> Any:
        return replacement(commitment) if i == index else commitment

    return change


def other_hex(digest: str, position: int) -> str:
    char = HEX[(HEX.index(digest[position]) + 1) % 16]
    return digest[:position] + char + digest[position + 1 :]


def write_rows(rows: Sequence[Row], path: str) -> list[Row]:
    return [r for r in rows if r.type == "write" and r.value["path"] == path]


def next_receipt(rows: Sequence[Row], seq: int) -> Row:
    return next(r for r in rows[seq:] if r.type == "receipt")


def served_sites(recorded: Recorded, run_id: str) -> list[tuple[Site, Row]]:
    """Commitments in history writes that a later receipt serves, with that receipt."""
    rows = recorded.rows[run_id]
    out: list[tuple[Site, Row]] = []
    for row in write_rows(rows, "history"):
        if any(r.type == "receipt" for r in rows[row.seq :]):
            out.extend((site, next_receipt(rows, row.seq)) for site in row_sites(row))
    return out


# -- the recorded runs are sound ---------------------------------------------------------------


def test_recorded_runs_hold_commitments_not_secrets(recorded: Recorded) -> None:
    data = recorded.path.read_bytes() + recorded.bundle
    assert not [name for name, secret in SECRETS.items() if leaks(secret, data)]
    for run_id in (recorded.keys, recorded.text):
        sites = recorded.sites(run_id)
        assert len(sites) == len({s.digest for s in sites}) > 3
        held = {d.commitment for d in recorded.disclosures(run_id)}
        assert held == {s.digest for s in sites}
        with recorded.copy() as path:
            with tampering(path) as conn:  # re-chaining unchanged rows changes nothing
                rewrite(conn, run_id, plain(recorded.rows[run_id]))
            store = af.SqliteStore(path)
            try:
                verifier = af.Verifier(store)
                assert verifier.verify(run_id).outcome is af.Outcome.VALID_UNSIGNED
                proven = verifier.check_disclosures(recorded.disclosures(run_id))
            finally:
                store.close()
        assert {p.commitment for p in proven} == held


# -- changed, moved, repeated, leaked and malformed commitments ---------------------------------


@given(data=st.data())
def test_changed_digest_in_a_served_message_fails_the_next_receipt(
    recorded: Recorded, data: st.DataObject
) -> None:
    run_id = data.draw(st.sampled_from([recorded.keys, recorded.text]), label="run")
    site, receipt = data.draw(st.sampled_from(served_sites(recorded, run_id)), label="site")
    position = data.draw(st.integers(0, 63), label="hex position")
    row = recorded.rows[run_id][site.seq]
    body = edit_row(row, at(site.index, lambda c: {COMMIT_KEY: other_hex(c[COMMIT_KEY], position)}))
    with forged(recorded, run_id, {site.seq: body}) as path:
        error = verification_error(path, run_id)
    assert (error.code, error.seq) == ("receipt", receipt.seq), error
    assert "messages piece" in error.reason


@pytest.mark.parametrize("path", ["user_message", "final_answer"])
def test_changed_digest_in_an_unserved_value_fails_its_disclosure(
    recorded: Recorded, path: str
) -> None:
    """``user_message`` and ``final_answer`` are never served, so no receipt notices; the
    vault's disclosure for the original digest finds no run that holds it."""
    run_id = recorded.text
    (row,) = write_rows(recorded.rows[run_id], path)
    (site,) = row_sites(row)
    assert site.key == path
    changed = other_hex(site.digest, 7)
    body = edit_row(row, at(0, lambda c: {COMMIT_KEY: changed}))
    disclosures = recorded.disclosures(run_id)
    with forged(recorded, run_id, {row.seq: body}) as path_:
        error = disclosure_error(path_, run_id, disclosures)
        # every other disclosure still proves its value
        others = [d for d in disclosures if d.commitment != site.digest]
        store = af.SqliteStore(path_)
        try:
            verifier = af.Verifier(store)
            verifier.verify(run_id)
            assert len(verifier.check_disclosures(others)) == len(others)
        finally:
            store.close()
    assert error.code == "disclosure", error
    assert "no verified run holds" in error.reason and site.digest in error.reason


def swapped(row: Row, first: Site, second: Site) -> bytes:
    def change(i: int, commitment: dict[str, Any], key: str | None) -> Any:
        if i == first.index:
            return {COMMIT_KEY: second.digest}
        if i == second.index:
            return {COMMIT_KEY: first.digest}
        return commitment

    return edit_row(row, change)


def key_pairs(row: Row) -> list[tuple[Site, Site]]:
    sites = row_sites(row)
    return [(a, b) for a, b in itertools.combinations(sites, 2) if a.key != b.key]


@given(data=st.data())
def test_commitments_swapped_between_keys_fail_their_disclosures(
    recorded: Recorded, data: st.DataObject
) -> None:
    """In ``last_response`` (never served) the log still verifies; the disclosures do not."""
    run_id = recorded.keys
    row = write_rows(recorded.rows[run_id], "last_response")[0]
    first, second = data.draw(st.sampled_from(key_pairs(row)), label="pair")
    with forged(recorded, run_id, {row.seq: swapped(row, first, second)}) as path:
        error = disclosure_error(path, run_id, recorded.disclosures(run_id))
    assert (error.code, error.seq, error.run_id) == ("disclosure", row.seq, run_id), error
    assert "names key" in error.reason


@given(data=st.data())
def test_commitments_swapped_in_a_served_message_fail_the_next_receipt(
    recorded: Recorded, data: st.DataObject
) -> None:
    run_id = recorded.keys
    rows = recorded.rows[run_id]
    candidates = [row for row in write_rows(rows, "history") if key_pairs(row)]
    candidates = [row for row in candidates if any(r.type == "receipt" for r in rows[row.seq :])]
    row = data.draw(st.sampled_from(candidates), label="write")
    first, second = data.draw(st.sampled_from(key_pairs(row)), label="pair")
    with forged(recorded, run_id, {row.seq: swapped(row, first, second)}) as path:
        error = verification_error(path, run_id)
    assert (error.code, error.seq) == ("receipt", next_receipt(rows, row.seq).seq), error


@given(data=st.data())
def test_a_repeated_digest_is_salt_reuse(recorded: Recorded, data: st.DataObject) -> None:
    run_id = data.draw(st.sampled_from([recorded.keys, recorded.text]), label="run")
    sites = recorded.sites(run_id)
    source = data.draw(st.integers(0, len(sites) - 2), label="source")
    target = sites[data.draw(st.integers(source + 1, len(sites) - 1), label="target")]
    copied = sites[source].digest
    row = recorded.rows[run_id][target.seq]
    # A `set` that records a key again may repeat, in place, the commitments of what did not
    # change (full mode does): copying into the same key is that case, not reuse.
    written = orjson.loads(recorded.rows[run_id][sites[source].seq].body)
    into = orjson.loads(row.body)
    assume(not (into.get("verb") == "set" and into.get("path") == written.get("path")))
    body = edit_row(row, at(target.index, lambda c: {COMMIT_KEY: copied}))
    with forged(recorded, run_id, {target.seq: body}) as path:
        error = verification_error(path, run_id)
    assert (error.code, error.seq) == ("commitment-reuse", target.seq), error
    assert copied in error.reason and "appears twice" in error.reason


@given(data=st.data(), value=st.sampled_from(["123-45-6789", 42, None, ["x"], {"a": 1}]))
def test_plaintext_under_a_policy_key_is_a_leak(
    recorded: Recorded, data: st.DataObject, value: Any
) -> None:
    run_id = data.draw(st.sampled_from([recorded.keys, recorded.text]), label="run")
    site = data.draw(st.sampled_from(recorded.sites(run_id)), label="site")
    row = recorded.rows[run_id][site.seq]
    body = edit_row(row, at(site.index, lambda c: value))
    with forged(recorded, run_id, {site.seq: body}) as path:
        error = verification_error(path, run_id)
    assert (error.code, error.seq) == ("leak", site.seq), error
    assert "plaintext under the policy key" in error.reason


MALFORMED: list[Callable[[str], Any]] = [
    lambda d: {COMMIT_KEY: "xyz"},
    lambda d: {COMMIT_KEY: d, "extra": 1},
    lambda d: {COMMIT_KEY: d.upper()},
    lambda d: {COMMIT_KEY: d[:-1]},
    lambda d: {COMMIT_KEY: d + "0"},
    lambda d: {COMMIT_KEY: 7},
    lambda d: {COMMIT_KEY: [d]},
    lambda d: {COMMIT_KEY: None},
]


@given(data=st.data(), malformed=st.sampled_from(MALFORMED))
def test_a_malformed_commitment_is_refused(
    recorded: Recorded, data: st.DataObject, malformed: Callable[[str], Any]
) -> None:
    run_id = data.draw(st.sampled_from([recorded.keys, recorded.text]), label="run")
    site = data.draw(st.sampled_from(recorded.sites(run_id)), label="site")
    row = recorded.rows[run_id][site.seq]
    body = edit_row(row, at(site.index, lambda c: malformed(c[COMMIT_KEY])))
    with forged(recorded, run_id, {site.seq: body}) as path:
        error = verification_error(path, run_id)
    assert (error.code, error.seq) == ("commitment", site.seq), error
    assert "malformed commitment" in error.reason


# -- the policy in run.open ---------------------------------------------------------------------


def _digest_changed(opened: dict[str, Any]) -> None:
    opened["policy_digest"] = other_hex(opened["policy_digest"], 0)


def _keys_unsorted(opened: dict[str, Any]) -> None:
    opened["policy"]["keys"] = sorted(opened["policy"]["keys"], reverse=True)


def _key_repeated(opened: dict[str, Any]) -> None:
    opened["policy"]["keys"] = [*opened["policy"]["keys"], opened["policy"]["keys"][0]]


def _key_dropped_digest_kept(opened: dict[str, Any]) -> None:
    opened["policy"]["keys"] = opened["policy"]["keys"][1:]


def _version(opened: dict[str, Any]) -> None:
    opened["policy"]["v"] = 4


def _version_one(opened: dict[str, Any]) -> None:
    opened["policy"]["v"] = 1  # (a version 1 document of the same keys has another digest)


def _version_text(opened: dict[str, Any]) -> None:
    opened["policy"]["v"] = "2"


def _extra_member(opened: dict[str, Any]) -> None:
    opened["policy"]["flags"] = "i"


def _bad_pattern(opened: dict[str, Any]) -> None:
    opened["policy"]["patterns"] = ["("]


def _policy_gone(opened: dict[str, Any]) -> None:
    opened["policy"] = None


@pytest.mark.parametrize(
    ("forge", "words"),
    [
        (_digest_changed, "policy_digest does not match"),
        (_key_dropped_digest_kept, "policy_digest does not match"),
        (_keys_unsorted, "not in its normal form"),
        (_key_repeated, "not in its normal form"),
        (_version, "malformed"),
        (_version_one, "policy_digest does not match"),
        (_version_text, "malformed"),
        (_extra_member, "malformed"),
        (_policy_gone, "malformed"),
    ],
)
@pytest.mark.parametrize("run", ["keys", "text"])
def test_a_forged_policy_is_refused(
    recorded: Recorded, run: str, forge: Callable[[dict[str, Any]], None], words: str
) -> None:
    run_id = getattr(recorded, run)
    opened = recorded.rows[run_id][0].value
    forge(opened)
    with forged(recorded, run_id, {0: canon(opened)}) as path:
        error = verification_error(path, run_id)
    assert (error.code, error.seq) == ("policy", 0), error
    assert words in error.reason


@pytest.mark.parametrize("run", ["keys", "text"])
def test_a_policy_pattern_that_is_not_a_regex_is_refused(recorded: Recorded, run: str) -> None:
    run_id = getattr(recorded, run)
    opened = recorded.rows[run_id][0].value
    _bad_pattern(opened)
    with forged(recorded, run_id, {0: canon(opened)}) as path:
        error = verification_error(path, run_id)
    assert (error.code, error.seq) == ("policy", 0), error


# -- disclosures ----------------------------------------------------------------------------------


@given(data=st.data())
def test_a_disclosure_for_another_commitment_does_not_open_it(
    recorded: Recorded, data: st.DataObject
) -> None:
    run_id = data.draw(st.sampled_from([recorded.keys, recorded.text]), label="run")
    disclosures = recorded.disclosures(run_id)
    taken, target = data.draw(st.permutations(disclosures), label="pair")[:2]
    where = {s.digest: s.seq for s in recorded.sites(run_id)}
    store = af.SqliteStore(recorded.path)
    try:
        verifier = af.Verifier(store)
        verifier.verify(run_id)
        with pytest.raises(af.VerificationError) as info:
            verifier.check_disclosures([replace(taken, commitment=target.commitment)])
    finally:
        store.close()
    error = info.value
    assert (error.code, error.run_id, error.seq) == ("disclosure", run_id, where[target.commitment])
    assert "does not open" in error.reason


@pytest.mark.parametrize("field", ["salt", "key", "value"])
def test_a_disclosure_with_a_changed_field_does_not_open(recorded: Recorded, field: str) -> None:
    run_id = recorded.keys
    original = recorded.disclosures(run_id)[0]
    changed = {"salt": b64url(bytes(16)), "key": "email", "value": "something else"}[field]
    if field == "key" and original.key == "email":
        changed = "ssn"
    with pytest.raises(af.VerificationError) as info:
        checked(recorded, run_id, [replace(original, **{field: changed})])
    assert info.value.code == "disclosure" and "does not open" in info.value.reason


def checked(recorded: Recorded, run_id: str, disclosures: list[Disclosure]) -> list[Any]:
    store = af.SqliteStore(recorded.path)
    try:
        verifier = af.Verifier(store)
        verifier.verify(run_id)
        return verifier.check_disclosures(disclosures)
    finally:
        store.close()


def test_an_unreferenced_disclosure_is_refused(recorded: Recorded) -> None:
    salt = b64url(b"\x01" * 16)
    stray = Disclosure(
        commitment=commitment_digest(salt, "ssn", "000-00-0000"),
        salt=salt,
        key="ssn",
        value="000-00-0000",
    )
    assert stray.opens()
    with pytest.raises(af.VerificationError) as info:
        checked(recorded, recorded.keys, [*recorded.disclosures(recorded.keys), stray])
    error = info.value
    assert (error.code, error.run_id, error.seq) == ("disclosure", "-", None)
    assert "no verified run holds" in error.reason and str(error).startswith("disclosures:")
    # a disclosure of another run's commitment is no proof for a verifier that has not seen it
    other = recorded.disclosures(recorded.text)[0]
    with pytest.raises(af.VerificationError, match="no verified run holds"):
        checked(recorded, recorded.keys, [other])


def test_cli_verify_refuses_a_forged_disclosures_file(recorded: Recorded) -> None:
    disclosures = recorded.disclosures(recorded.keys)
    forged_one = replace(disclosures[0], commitment=disclosures[1].commitment)
    document = {
        "agentfootprint_disclosures": 1,
        "disclosures": [forged_one.to_json()],
    }
    with tempfile.TemporaryDirectory() as tmp:
        opened = Path(tmp) / "opened.json"
        opened.write_bytes(orjson.dumps(document))
        result = CliRunner().invoke(
            main,
            ["verify", str(recorded.path), "--run", recorded.keys, "--disclosures", str(opened)],
        )
    assert result.exit_code == 1, result.output
    assert "does not open" in result.output and "PROVEN" not in result.output


# -- bundles ---------------------------------------------------------------------------------------


class Bundle(NamedTuple):
    manifest: dict[str, Any]
    events: list[dict[str, Any]]
    trailer: dict[str, Any]


def read_bundle(data: bytes) -> Bundle:
    lines = data.rstrip(b"\n").split(b"\n")
    return Bundle(
        orjson.loads(lines[0]),
        [orjson.loads(line) for line in lines[1:-1]],
        orjson.loads(lines[-1]),
    )


def with_trailer(manifest: Any, events: Sequence[Any]) -> bytes:
    """The bundle's lines and a trailer computed for them (anyone can compute it)."""
    body = orjson.dumps(manifest) + b"\n" + b"".join(orjson.dumps(e) + b"\n" for e in events)
    trailer = {"end": True, "events": len(events), "sha256": hashlib.sha256(body).hexdigest()}
    return body + orjson.dumps(trailer) + b"\n"


def bundle_bytes(bundle: Bundle, *, framing: bool) -> bytes:
    """The bundle file; with ``framing`` the manifest's runs and counts and the trailer
    are recomputed from the events (what a forger who edits events does)."""
    if not framing:
        body = orjson.dumps(bundle.manifest) + b"\n"
        body += b"".join(orjson.dumps(e) + b"\n" for e in bundle.events)
        return body + orjson.dumps(bundle.trailer) + b"\n"
    runs = []
    for entry in bundle.manifest["runs"]:
        rows = [e for e in bundle.events if e["run"] == entry["run_id"]]
        runs.append({**entry, "events": len(rows), "head": rows[-1]["chain_hash"] if rows else ""})
    counts = {**bundle.manifest["counts"], "events": len(bundle.events)}
    return with_trailer({**bundle.manifest, "runs": runs, "counts": counts}, bundle.events)


@contextmanager
def bundle_file(data: bytes) -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "export.jsonl"
        path.write_bytes(data)
        yield path


def bundle_error(data: bytes) -> af.VerificationError:
    """Opening the bundle fails (its framing): that error, which must be code ``bundle``."""
    with bundle_file(data) as path:
        try:
            af.BundleSource(path)
        except af.VerificationError as exc:
            assert exc.code == "bundle", exc
            return exc
    raise AssertionError("the bundle opened")


def verify_bundle_run(data: bytes, run_id: str) -> af.RunVerification:
    with bundle_file(data) as path:
        return af.Verifier(af.BundleSource(path)).verify(run_id)


def bundle_run_error(data: bytes, run_id: str) -> af.VerificationError:
    with bundle_file(data) as path:
        source = af.BundleSource(path)  # the framing is consistent
        with pytest.raises(af.VerificationError) as info:
            af.Verifier(source).verify(run_id)
    return info.value


def test_the_bundle_round_trips(recorded: Recorded) -> None:
    bundle = read_bundle(recorded.bundle)
    assert bundle_bytes(bundle, framing=True) == recorded.bundle
    assert bundle_bytes(bundle, framing=False) == recorded.bundle
    for run_id in (recorded.keys, recorded.text):
        assert verify_bundle_run(recorded.bundle, run_id).outcome is af.Outcome.VALID_UNSIGNED


EDITS = ("drop", "duplicate", "body", "event_hash", "chain_hash")


def edited(bundle: Bundle, index: int, edit: str, draw: Callable[..., Any]) -> Bundle:
    events = [dict(e) for e in bundle.events]
    event = events[index]
    if edit == "drop":
        del events[index]
    elif edit == "duplicate":
        events.insert(index + 1, dict(event))
    elif edit == "body":
        body = event["body"]
        position = draw(st.integers(0, len(body) - 1), label="position")
        char = draw(st.sampled_from('0a{}",:x '), label="char")
        if body[position] == char:
            char = "y" if char != "y" else "z"
        event["body"] = body[:position] + char + body[position + 1 :]
    else:
        event[edit] = other_hex(event[edit], draw(st.integers(0, 63), label="hex position"))
    return bundle._replace(events=events)


@given(data=st.data(), edit=st.sampled_from(EDITS))
def test_edited_bundle_events_fail_on_the_events(
    recorded: Recorded, data: st.DataObject, edit: str
) -> None:
    """With the framing recomputed the bundle opens, and the verifier finds the edit."""
    bundle = read_bundle(recorded.bundle)
    index = data.draw(st.integers(0, len(bundle.events) - 1), label="event")
    event = bundle.events[index]
    run_id, seq = event["run"], event["seq"]
    last = seq == max(e["seq"] for e in bundle.events if e["run"] == run_id)
    data_ = bundle_bytes(edited(bundle, index, edit, data.draw), framing=True)
    if edit == "drop" and last:
        # run.close gone: a consistent prefix, what a crash leaves (not a forgery it can tell)
        assert event["type"] == "run.close"
        assert verify_bundle_run(data_, run_id).outcome is af.Outcome.UNSEALED
        return
    error = bundle_run_error(data_, run_id)
    expected = {
        "drop": ({"rows"}, seq),
        "duplicate": ({"rows"}, seq + 1),
        "body": ({"canonical", "hash"}, seq),
        "event_hash": ({"hash"}, seq),
        "chain_hash": ({"chain"}, seq),
    }[edit]
    assert error.code in expected[0] and error.seq == expected[1], error
    assert error.run_id == run_id


@given(data=st.data(), edit=st.sampled_from(EDITS))
def test_edited_bundle_without_its_framing_is_refused(
    recorded: Recorded, data: st.DataObject, edit: str
) -> None:
    bundle = read_bundle(recorded.bundle)
    index = data.draw(st.integers(0, len(bundle.events) - 1), label="event")
    error = bundle_error(bundle_bytes(edited(bundle, index, edit, data.draw), framing=False))
    assert re.search("trailer digest|counts differ|truncated", error.reason), error


@given(offset=st.integers(min_value=0))
def test_a_truncated_bundle_is_refused(recorded: Recorded, offset: int) -> None:
    data = recorded.bundle
    cut = data[: offset % len(data)]
    bundle_error(cut)  # code "bundle", nothing else raised


def test_a_bundle_cut_at_any_line_boundary_is_refused(recorded: Recorded) -> None:
    data = recorded.bundle
    ends = [i + 1 for i, byte in enumerate(data) if byte == ord("\n")]
    offsets = {0, 1, len(data) - 1} | {e + d for e in ends for d in (-2, -1, 0, 1)}
    offsets |= set(range(0, len(data), 997))
    for offset in sorted(o for o in offsets if 0 <= o < len(data)):
        bundle_error(data[:offset])
    with bundle_file(data[: ends[-2]]) as path:  # the trailer line cut off whole
        result = CliRunner().invoke(main, ["verify", str(path)])
    assert result.exit_code == 1 and "INVALID" in result.output


@given(position=st.integers(min_value=0), mask=st.integers(1, 255))
def test_a_flipped_byte_without_new_framing_is_refused(
    recorded: Recorded, position: int, mask: int
) -> None:
    data = bytearray(recorded.bundle)
    data[position % len(data)] ^= mask
    bundle_error(bytes(data))


@pytest.mark.parametrize("lie", ["head", "events", "run_id", "extra run"])
def test_a_manifest_that_lies_about_a_run_is_refused(recorded: Recorded, lie: str) -> None:
    bundle = read_bundle(recorded.bundle)
    manifest = dict(bundle.manifest)
    runs = [dict(entry) for entry in manifest["runs"]]
    if lie == "head":
        runs[0]["head"] = other_hex(runs[0]["head"], 5)
    elif lie == "events":
        runs[0]["events"] -= 1
    elif lie == "run_id":
        runs[0]["run_id"] = "0" * 32
    else:
        runs.append({**runs[0], "run_id": "f" * 32})
    manifest["runs"] = runs
    # only the trailer is recomputed: the manifest keeps its lie
    error = bundle_error(with_trailer(manifest, bundle.events))
    assert "manifest" in error.reason, error


def _manifest(change: Callable[[dict[str, Any]], None]) -> Callable[[Bundle], Bundle]:
    def forge(bundle: Bundle) -> Bundle:
        manifest = orjson.loads(orjson.dumps(bundle.manifest))
        change(manifest)
        return bundle._replace(manifest=manifest)

    return forge


def _first_row(**fields: Any) -> Callable[[Bundle], Bundle]:
    def forge(bundle: Bundle) -> Bundle:
        return bundle._replace(events=[{**bundle.events[0], **fields}, *bundle.events[1:]])

    return forge


@pytest.mark.parametrize(
    "forge",
    [
        pytest.param(_manifest(lambda m: m.update(counts=5)), id="counts-not-object"),
        pytest.param(_manifest(lambda m: m.update(runs=5)), id="runs-not-list"),
        pytest.param(_manifest(lambda m: m.update(runs=[5])), id="run-not-object"),
        pytest.param(_manifest(lambda m: m["runs"][0].update(run_id=[1])), id="run-id-list"),
        pytest.param(_first_row(run=[1]), id="row-run-list"),
        pytest.param(_first_row(seq="0"), id="row-seq-string"),
        pytest.param(_first_row(body=5), id="row-body-not-string"),
        pytest.param(_first_row(type=5), id="row-type-not-string"),
        pytest.param(_first_row(ts="1"), id="row-ts-string"),
        pytest.param(_first_row(event_hash="zz"), id="row-hash-not-hex"),
        pytest.param(_manifest(lambda m: m.update(agentfootprint_bundle=0)), id="version"),
    ],
)
def test_a_malformed_bundle_with_consistent_framing_fails_closed(
    recorded: Recorded, forge: Callable[[Bundle], Bundle]
) -> None:
    """Whoever forges a bundle can recompute its trailer: what is inside must still fail
    with VerificationError (when opening it, or verifying its runs), nothing else."""
    bundle = forge(read_bundle(recorded.bundle))
    with (
        bundle_file(with_trailer(bundle.manifest, bundle.events)) as path,
        pytest.raises(af.VerificationError),
    ):
        verifier = af.Verifier(af.BundleSource(path))
        for run_id in (recorded.keys, recorded.text):
            verifier.verify(run_id)


# -- bad input is refused where it enters ---------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"keys": "ssn"}, "must be a list"),
        ({"keys": b"ssn"}, "must be a list"),
        ({"keys": 3}, "must be a list"),
        ({"keys": [""]}, "non-empty strings"),
        ({"keys": ["ssn", None]}, "non-empty strings"),
        ({"patterns": "ssn"}, "must be a list"),
        ({"patterns": [""]}, "non-empty strings"),
        ({"patterns": ["("]}, "not RE2 syntax"),
        ({"patterns": ["[a-"]}, "not RE2 syntax"),
        ({"patterns": ["(?<!x)token"]}, "not RE2 syntax"),
        ({"patterns": [r"(a)\1"]}, "not RE2 syntax"),
        ({"patterns": [re.compile(r"(?=x)y")]}, "not RE2 syntax"),
        ({}, "names no key"),
        ({"keys": [], "patterns": []}, "names no key"),
        ({"patterns": [re.compile("ssn", re.IGNORECASE)]}, "without flags"),
        ({"patterns": [re.compile("ssn", re.MULTILINE)]}, "without flags"),
        ({"keys": ["history"]}, "matches 'history'"),
        ({"keys": ["ssn", "tool_schemas"]}, "matches 'tool_schemas'"),
        ({"patterns": ["^hist"]}, "matches 'history'"),
        ({"patterns": ["(?i)MODEL"]}, "matches 'model'"),
        ({"keys": ["$commit"]}, "reserved"),
    ],
)
def test_an_invalid_policy_is_refused_at_construction(kwargs: dict[str, Any], words: str) -> None:
    """Refused by RedactionPolicy itself, or (a state key the loop's features declare as
    structure) by the agent it is given to, before anything is recorded."""
    with pytest.raises(af.UsageError) as caught:
        policy = af.RedactionPolicy(**kwargs)
        af.Agent(provider=af.MockProvider(["x"]), model="m", redact=policy)
    assert caught.value.option == "redact", caught.value
    assert words in str(caught.value)


def test_a_compiled_pattern_without_flags_is_accepted() -> None:
    policy = af.RedactionPolicy(patterns=[re.compile("token$")])
    assert policy.patterns == ("token$",)


def test_a_compiled_pattern_with_inline_flags_is_accepted() -> None:
    policy = af.RedactionPolicy(patterns=[re.compile("(?i)token")])
    assert policy.patterns == ("(?i)token",)


@pytest.mark.parametrize(
    ("options", "option"),
    [
        ({"redact": "ssn"}, "redact"),
        ({"redact": ["ssn"]}, "redact"),
        ({"redact": {"keys": ["ssn"]}}, "redact"),
        ({"disclosures": "vault.db"}, "disclosures"),
        ({"redact": key_policy(), "disclosures": 42}, "disclosures"),
    ],
)
def test_invalid_redaction_options_are_refused(options: dict[str, Any], option: str) -> None:
    with pytest.raises(af.UsageError) as caught:
        af.Agent(provider=af.MockProvider(["x"]), model="m", **options)
    assert caught.value.option == option


@pytest.mark.parametrize(
    ("result", "path"),
    [
        ({"a": {"$commit": "ab" * 32}}, 'result.a["$commit"]'),
        ([{"ok": 1}, {"$commit": "x"}], 'result[1]["$commit"]'),
        ('{"a": [{"$commit": "x"}]}', 'result.a[0]["$commit"]'),
        ('[{"deep": "{\\"$commit\\": 1}"}]', 'result[0].deep["$commit"]'),
    ],
)
@pytest.mark.parametrize("redact", [None, key_policy()])
def test_a_reserved_key_in_a_tool_result_is_that_call_s_error(
    result: Any, path: str, redact: Any
) -> None:
    tool = af.define_tool(name="t", description="d", execute=lambda args: result)
    agent = af.Agent(
        provider=af.MockProvider([af.reply(tool_calls=[af.tool_call("t", {})]), "went on"]),
        model="m",
        tools=[tool],
        redact=redact,
    )
    outcome = agent.run_sync("go")
    message = outcome.state["history"][2]
    assert message["is_error"] is True
    assert path in message["content"] and "'$commit' is reserved" in message["content"]
    assert outcome.outcome == "answered" and outcome.answer == "went on"


@pytest.mark.parametrize(
    ("message", "path"),
    [
        ('{"$commit": "' + "ab" * 32 + '"}', 'message["$commit"]'),
        ('{"a": [{"$commit": "x"}]}', 'message.a[0]["$commit"]'),
        ('[1, {"b": "{\\"$commit\\": 2}"}]', 'message[1].b["$commit"]'),
    ],
)
def test_a_reserved_key_in_the_run_input_writes_nothing(message: str, path: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "r.db"
        agent = af.Agent(
            provider=af.MockProvider(["x"]),
            model="m",
            store=db,
            redact=key_policy(),
            disclosures=Path(tmp) / "v.db",
        )
        with pytest.raises(af.ReservedKeyError) as caught:
            agent.run_sync(message)
        assert caught.value.path == path
        assert agent.store.runs() == []
        assert agent.vault is not None and agent.vault.commitments() == []
        assert agent.config.provider.requests == []  # type: ignore[attr-defined]
        agent.close()


def test_a_reserved_key_in_a_model_tool_call_fails_the_call() -> None:
    agent = af.Agent(
        provider=af.MockProvider(
            [af.reply(tool_calls=[af.tool_call("t", '{"x": {"$commit": "y"}}')]), "never"]
        ),
        model="m",
        tools=[af.define_tool(name="t", description="d", execute=lambda a: "ok")],
        redact=key_policy(),
    )
    with pytest.raises(af.ProviderCallError, match="reserved") as caught:
        agent.run_sync("go")
    check = af.Verifier(agent.store).verify(str(caught.value.run_id))
    assert check.close is not None and check.close["outcome"] == "failed"


# -- a redacted run continues with its digests unchanged -----------------------------------------

HOW = ("same agent", "fresh agent with the vault", "fresh agent without a vault")


def _conversation(root: Path, how: str, mode: str) -> tuple[str, str, af.MockProvider]:
    """A parent run and its continuation; returns their ids and the child's provider."""
    db, vault = root / "c.db", root / "c-vault.db"

    def agent(script: list[Any], *, with_vault: bool = True) -> af.Agent:
        return af.Agent(
            provider=af.MockProvider(script),
            model="m",
            tools=_tools(),
            store=db,
            redact=key_policy(),
            disclosures=vault if with_vault else None,
            commit_values=mode,
        )

    call = af.tool_call("lookup", {"ssn": SECRETS["ssn"], "email": SECRETS["email"]})
    child_script = [af.reply(tool_calls=[af.tool_call("lookup", {"q": "again"})]), "second"]
    script = [af.reply("looking", tool_calls=[call]), "first answer"]
    first = agent(script + child_script if how == "same agent" else script)
    parent = first.run_sync(json_text({"ssn": SECRETS["input"]}))
    if how == "same agent":
        child = first.run_sync("and then?", continue_from=parent)
        provider = first.config.provider
        first.close()
    else:
        first.close()
        second = agent(child_script, with_vault=how == "fresh agent with the vault")
        child = second.run_sync("and then?", continue_from=parent.run_id)
        provider = second.config.provider
        second.close()
    assert isinstance(provider, af.MockProvider)
    return parent.run_id, child.run_id, provider


def _kept_digests(root: Path, parent: str, child: str) -> tuple[list[str], list[str], list[str]]:
    store = af.SqliteStore(root / "c.db")
    try:
        verifier = af.Verifier(store)
        assert verifier.verify(child).outcome is af.Outcome.VALID_UNSIGNED
        final = verifier.verify(parent).final_state
        calls = verifier.verify(parent).close["calls"]  # type: ignore[index]
        last = af.receipt_at(store, parent, calls - 1)
        first = af.receipt_at(store, child, 0)
        assert last is not None and first is not None
        recorded = RequestHasher().digests(build_request(final)).messages
        return list(last.messages), list(first.messages), recorded
    finally:
        store.close()


@pytest.mark.parametrize("how", HOW)
def test_a_continued_redacted_run_keeps_its_parent_s_digests(how: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        parent, child, provider = _conversation(root, how, "delta")
        last, first, recorded = _kept_digests(root, parent, child)
        # the prefix the parent's last request had, and the final answer appended after it
        assert first[: len(last)] == last
        assert first[: len(recorded)] == recorded and len(recorded) == len(last) + 1
        data = b"".join(
            Path(f"{root / 'c.db'}{s}").read_bytes()
            for s in ("", "-wal")
            if Path(f"{root / 'c.db'}{s}").exists()
        )
        assert not [name for name, secret in SECRETS.items() if leaks(secret, data)]
    served = orjson.dumps(provider.requests[-2]["messages"])  # the child's first call
    if how == "fresh agent without a vault":  # nothing can open them: commitments served
        assert SECRETS["ssn"].encode() not in served and b"$commit" in served
    else:
        assert SECRETS["ssn"].encode() in served and SECRETS["input"].encode() in served


@pytest.mark.parametrize("how", HOW)
def test_full_mode_continued_redacted_run_keeps_its_parent_s_digests(how: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        parent, child, _ = _conversation(root, how, "full")
        last, first, _ = _kept_digests(root, parent, child)
    assert first[: len(last)] == last


def test_full_mode_keeps_message_digests_within_a_run() -> None:
    agent = af.Agent(
        provider=af.MockProvider([af.reply(tool_calls=[af.tool_call("lookup", {})]), "done"]),
        model="m",
        tools=_tools(),
        redact=af.RedactionPolicy(keys=["ssn"]),
        commit_values="full",
    )
    result = agent.run_sync(json_text({"ssn": SECRETS["input"]}))
    first, second = (af.receipt_at(agent.store, result.run_id, k) for k in (0, 1))
    assert first is not None and second is not None
    assert second.messages[: len(first.messages)] == first.messages


def test_a_continuation_under_another_policy_does_not_record_the_parent_s_secrets() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)

        def agent(policy: af.RedactionPolicy, script: list[Any]) -> af.Agent:
            return af.Agent(
                provider=af.MockProvider(script),
                model="m",
                tools=_tools(),
                store=root / "c.db",
                redact=policy,
                disclosures=root / "v.db",
                commit_values="full",
            )

        first = agent(af.RedactionPolicy(keys=["ssn"]), ["noted"])
        parent = first.run_sync(json_text({"ssn": SECRETS["input"]}))
        first.close()
        second = agent(af.RedactionPolicy(keys=["email"]), ["and again"])
        second.run_sync("anything else?", continue_from=parent.run_id)
        second.close()
        data = b"".join(
            Path(f"{root / 'c.db'}{s}").read_bytes()
            for s in ("", "-wal")
            if Path(f"{root / 'c.db'}{s}").exists()
        )
    assert not leaks(SECRETS["input"], data)
