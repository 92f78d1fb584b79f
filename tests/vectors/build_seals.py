"""Build the sealed-run and checkpoint vectors (issue 14) in this folder: ``sealed-*.db``,
their checkpoint notes ``*.checkpoint`` and the index ``seals.json``.

Run ``python tests/vectors/build_seals.py`` to rebuild them (``build.py`` makes the unsealed
vectors; the two sets are independent). Every vector starts from runs recorded for real by a
sealing agent (the fixed test key ``agentfootprint.testing.seals.SIGNER``, a real SQLite
file in storage schema 2) and is then damaged the way a holder of the file would, hashes
recomputed where the attack needs them. Each entry of ``seals.json`` says which public keys
the verifier pins (``keys``: ``signer``, ``other`` or none), the failure codes whole-file
verification must report, the outcomes of the runs that verify, the exit code of ``verify``
with those keys and of ``verify --require-signature``, and, for checkpoint vectors, the note
to check (``checkpoint``) and the code it must fail with (``checkpoint_code``, empty when it
is CONSISTENT). An entry may name one run to verify alone (``run``, with ``run_code``, its
outcome or failure code, and ``run_exit``, the exit of ``verify --run``), and a key that proves
nothing (``small-order``, ``non-canonical``: docs/seals.md section 1), which every reader
refuses before judging anything (``refused``: words of the error; exit 2).
``tests/scenario/test_seal_vectors.py`` and ``tests/spec/test_independent_verifier.py`` run
them all. ``python tests/vectors/build_seals.py FILE...`` rebuilds only the named vectors
(the index keeps the others' run ids).
"""

from __future__ import annotations

import base64
import shutil
import sqlite3
import sys
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import orjson

import agentfootprint as af
from agentfootprint.logformat.canonical import canon
from agentfootprint.seal import parse_envelope, sign_envelope
from agentfootprint.seal.ed25519_keys import SMALL_ORDER_ENCODINGS
from agentfootprint.seal.merkle import root
from agentfootprint.seal.note import Checkpoint
from agentfootprint.seal.signer import key_id_of
from agentfootprint.seal.statement import SealFacts, parse_statement
from agentfootprint.testing.seals import OTHER, SIGNER
from agentfootprint.testing.tamper import (
    new_file_schema,
    plain,
    read_rows,
    reencoded,
    rewrite,
    tampering,
)
from agentfootprint.verify.checkpoint import log_leaves, make_checkpoint, sign_checkpoint_with

HERE = Path(__file__).resolve().parent
ORIGIN = "example.com/sealed-vectors"


@dataclass(frozen=True)
class Runs:
    """The base: a sealed root run with a tool call, its sealed continuation, a sealed run
    under a redaction policy."""

    root: str
    child: str
    redacted: str


@dataclass
class Entry:
    file: str
    about: str
    keys: list[str]  # "signer" / "other": the public keys pinned
    codes: list[str]  # failure codes of whole-file verification
    outcomes: list[str]  # the outcomes of the runs that verify
    exit: int  # verify DB --key ...
    exit_required: int  # verify DB --key ... --require-signature
    checkpoint: str = ""  # a note file to check against the database
    checkpoint_code: str = ""  # "" = CONSISTENT
    run_role: str = ""  # a field of Runs: the run verified alone (its id is the index's "run")
    run_code: str = ""  # its outcome or failure code, verified alone
    run_exit: int = 0  # verify DB --run ID --key ...
    refused: str = ""  # a pinned key is refused: words of the error
    extra: dict[str, Any] = field(default_factory=dict)


Damage = Callable[[Path, Runs], str | None]  # returns a checkpoint file name, or None
VECTORS: list[tuple[Entry, Damage]] = []


def vector(entry: Entry) -> Callable[[Damage], Damage]:
    def register(damage: Damage) -> Damage:
        VECTORS.append((entry, damage))
        return damage

    return register


def _lookup(args: dict[str, Any]) -> Any:
    return {"name": args["name"], "ssn": "123-45-6789"}


def record(path: Path) -> Runs:
    lookup = af.define_tool(
        name="lookup",
        description="Look a customer up.",
        input_schema={
            "type": "object",
            "properties": {"name": {"type": "string"}},
            "required": ["name"],
        },
        execute=_lookup,
    )
    script = af.MockProvider(
        [
            af.reply(tool_calls=[af.tool_call("lookup", {"name": "Ada"})]),
            "Found Ada.",
            "Still Ada.",
            af.reply(tool_calls=[af.tool_call("lookup", {"name": "Bob"})]),
            "Found Bob.",
        ]
    )
    with af.Agent(provider=script, model="m", tools=[lookup], store=path, signer=SIGNER) as a:
        root_run = a.run_sync("Find Ada.")
        child = a.run_sync("Sure?", continue_from=root_run)
    with af.Agent(
        provider=af.MockProvider(
            [af.reply(tool_calls=[af.tool_call("lookup", {"name": "Bob"})]), "Found Bob."]
        ),
        model="m",
        tools=[lookup],
        store=path,
        signer=SIGNER,
        redact=af.RedactionPolicy(keys=["ssn"]),
    ) as a:
        redacted = a.run_sync("Find Bob.")
    return Runs(root_run.run_id, child.run_id, redacted.run_id)


def _envelope(rows: list[Any]) -> dict[str, Any]:
    return orjson.loads(rows[-1].value["dsse"])


def _with_envelope(rows: list[Any], envelope: dict[str, Any] | bytes) -> list[Any]:
    text = (
        envelope.decode()
        if isinstance(envelope, bytes)
        else orjson.dumps(envelope, option=orjson.OPT_SORT_KEYS).decode()
    )
    out = plain(rows)
    out[-1] = ("run.seal", rows[-1].ts, canon({"dsse": text}))
    return out


def _rechain(db: Path, run_id: str, change: Callable[[list[Any]], list[Any]]) -> None:
    with tampering(db) as conn:
        rewrite(conn, run_id, change(read_rows(conn, run_id)))


def _note(db: Path, name: str, note: bytes) -> str:
    (db.parent / name).write_bytes(note)
    return name


def _checkpoint_now(db: Path) -> bytes:
    store = af.SqliteStore(db, readonly=True)
    try:
        return make_checkpoint(af.Verifier(store), SIGNER, ORIGIN)
    finally:
        store.close()


# -- sealed runs ---------------------------------------------------------------------------


@vector(
    Entry(
        "sealed-valid.db", "three sealed runs, the signer pinned", ["signer"], [], ["VALID"], 0, 0
    )
)
def _valid(db: Path, runs: Runs) -> None:
    return None


@vector(
    Entry(
        "sealed-unpinned.db", "three sealed runs, no key pinned", [], [], ["VALID_UNSIGNED"], 0, 1
    )
)
def _unpinned(db: Path, runs: Runs) -> None:
    return None


@vector(
    Entry(
        "sealed-untrusted-key.db",
        "three sealed runs, another key pinned",
        ["other"],
        [],
        ["VALID_UNSIGNED"],
        0,
        1,
    )
)
def _untrusted(db: Path, runs: Runs) -> None:
    return None


@vector(
    Entry(
        "sealed-byte-flipped-in-seal.db",
        "one byte of the root's seal row changed, "
        "nothing re-hashed (schema 2: the next stored head fails)",
        ["signer"],
        ["ancestry", "chain"],
        ["VALID"],
        1,
        1,
    )
)
def _flip(db: Path, runs: Runs) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute("DROP TRIGGER IF EXISTS rows_no_update")
        (key,) = conn.execute(
            "SELECT run_key FROM run_keys WHERE run_id = ?", (runs.root,)
        ).fetchone()
        pos, body = conn.execute(
            "SELECT pos, body FROM rows WHERE pos >> 32 = ? ORDER BY pos DESC LIMIT 1", (key,)
        ).fetchone()
        changed = bytearray(body)
        changed[len(changed) // 2] ^= 0x01
        conn.execute("UPDATE rows SET body = ? WHERE pos = ?", (bytes(changed), pos))
    return None


@vector(
    Entry(
        "sealed-options-rehashed.db",
        "the root's run.open options edited and every hash recomputed, the seal kept",
        ["signer"],
        ["ancestry", "seal"],
        ["VALID"],
        1,
        1,
    )
)
def _options(db: Path, runs: Runs) -> None:
    def change(rows: list[Any]) -> list[Any]:
        out = plain(rows)
        out[0] = reencoded(rows[0], lambda b: b["options"].__setitem__("max_iterations", 99))
        return out

    _rechain(db, runs.root, change)
    return None


@vector(
    Entry(
        "sealed-row-inserted.db",
        "a write inserted into the redacted run with the chain recomputed, the seal kept",
        ["signer"],
        ["seal"],
        ["VALID"],
        1,
        1,
    )
)
def _inserted(db: Path, runs: Runs) -> None:
    def change(rows: list[Any]) -> list[Any]:
        out = plain(rows)
        at = next(i for i, r in enumerate(rows) if r.type == "commit" and r.value["writes"] == 0)
        marker = rows[at].value
        out[at] = ("event", rows[at].ts, canon({"name": "forged", "payload": {}}))
        return [*out[: at + 1], ("commit", rows[at].ts, canon(marker)), *out[at + 1 :]]

    _rechain(db, runs.redacted, change)
    return None


@vector(
    Entry(
        "sealed-head-truncated.db",
        "the redacted run's run.open removed (head truncation), re-chained",
        ["signer"],
        ["structure"],
        ["VALID"],
        1,
        1,
    )
)
def _head_cut(db: Path, runs: Runs) -> None:
    _rechain(db, runs.redacted, lambda rows: plain(rows)[1:])
    return None


@vector(
    Entry(
        "sealed-seal-removed.db",
        "the redacted run's run.seal removed, re-chained",
        ["signer"],
        ["seal"],
        ["VALID"],
        1,
        1,
    )
)
def _removed(db: Path, runs: Runs) -> None:
    _rechain(db, runs.redacted, lambda rows: plain(rows)[:-1])
    return None


@vector(
    Entry(
        "sealed-event-after-seal.db",
        "an event appended after the redacted run's seal",
        ["signer"],
        ["structure"],
        ["VALID"],
        1,
        1,
    )
)
def _after(db: Path, runs: Runs) -> None:
    _rechain(db, runs.redacted, lambda rows: [*plain(rows), plain(rows)[-3]])
    return None


@vector(
    Entry(
        "sealed-seal-swapped.db",
        "the root's seal replaced by the redacted run's",
        ["signer"],
        ["ancestry", "seal"],
        ["VALID"],
        1,
        1,
    )
)
def _swapped(db: Path, runs: Runs) -> None:
    with tampering(db) as conn:
        other = read_rows(conn, runs.redacted)[-1]
        rows = plain(read_rows(conn, runs.root))
        rewrite(conn, runs.root, [*rows[:-1], (other.type, other.ts, other.body)])
    return None


@vector(
    Entry(
        "sealed-receipts-swapped.db",
        "the redacted run's receipt replaced by the root's first (across runs), re-chained",
        ["signer"],
        ["receipt"],
        ["VALID"],
        1,
        1,
    )
)
def _receipts(db: Path, runs: Runs) -> None:
    with tampering(db) as conn:
        theirs = next(r for r in read_rows(conn, runs.root) if r.type == "receipt")
        rows = read_rows(conn, runs.redacted)
        out = plain(rows)
        at = next(i for i, r in enumerate(rows) if r.type == "receipt")
        out[at] = (theirs.type, rows[at].ts, theirs.body)
        rewrite(conn, runs.redacted, out)
    return None


@vector(
    Entry(
        "sealed-payload-type.db",
        "the redacted run's statement re-signed by the signer under another payloadType",
        ["signer"],
        ["seal"],
        ["VALID"],
        1,
        1,
    )
)
def _payload_type(db: Path, runs: Runs) -> None:
    def change(rows: list[Any]) -> list[Any]:
        payload = base64.b64decode(_envelope(rows)["payload"])
        return _with_envelope(rows, sign_envelope("application/json", payload, SIGNER))

    _rechain(db, runs.redacted, change)
    return None


@vector(
    Entry(
        "sealed-empty-signatures.db",
        "the redacted run's envelope with no signature",
        ["signer"],
        ["seal"],
        ["VALID"],
        1,
        1,
    )
)
def _no_signatures(db: Path, runs: Runs) -> None:
    _rechain(
        db, runs.redacted, lambda rows: _with_envelope(rows, {**_envelope(rows), "signatures": []})
    )
    return None


@vector(
    Entry(
        "sealed-empty-sig.db",
        "the redacted run's signature emptied",
        ["signer"],
        ["seal"],
        ["VALID"],
        1,
        1,
    )
)
def _empty_sig(db: Path, runs: Runs) -> None:
    def change(rows: list[Any]) -> list[Any]:
        envelope = _envelope(rows)
        envelope["signatures"] = [{**envelope["signatures"][0], "sig": ""}]
        return _with_envelope(rows, envelope)

    _rechain(db, runs.redacted, change)
    return None


@vector(
    Entry(
        "sealed-bad-signature.db",
        "the redacted run's signature bytes changed (its keyid "
        "kept): INVALID under the pinned signer",
        ["signer"],
        ["seal"],
        ["VALID"],
        1,
        1,
    )
)
def _bad_signature(db: Path, runs: Runs) -> None:
    def change(rows: list[Any]) -> list[Any]:
        envelope = _envelope(rows)
        sig = bytearray(base64.b64decode(envelope["signatures"][0]["sig"]))
        sig[0] ^= 0x01
        encoded = base64.b64encode(bytes(sig)).decode()
        envelope["signatures"] = [{**envelope["signatures"][0], "sig": encoded}]
        return _with_envelope(rows, envelope)

    _rechain(db, runs.redacted, change)
    return None


@vector(
    Entry(
        "sealed-bad-signature-unpinned.db",
        "the same changed signature with no key "
        "pinned: its facts stand, so the run is VALID_UNSIGNED (nothing proven)",
        [],
        [],
        ["VALID_UNSIGNED"],
        0,
        1,
    )
)
def _bad_signature_unpinned(db: Path, runs: Runs) -> None:
    return _bad_signature(db, runs)


@vector(
    Entry(
        "sealed-resigned-by-other.db",
        "the redacted run rewritten, named as sealed by another key and re-sealed with it",
        ["signer"],
        [],
        ["VALID", "VALID_UNSIGNED"],
        0,
        1,
    )
)
def _resigned(db: Path, runs: Runs) -> None:
    from agentfootprint.seal import parse_envelope, seal_run
    from agentfootprint.seal.statement import SealFacts, parse_statement

    with tampering(db) as conn:
        rows = read_rows(conn, runs.redacted)
        *kept, seal = rows
        triples = plain(kept)
        triples[0] = reencoded(kept[0], lambda b: b.__setitem__("seal", {"key_id": OTHER.key_id}))
        rewrite(conn, runs.redacted, triples)
        head = read_rows(conn, runs.redacted)[-1].chain_hash.hex()
        facts = parse_statement(parse_envelope(seal.value["dsse"]).payload)
        envelope = seal_run(SealFacts(**{**facts.__dict__, "head": head}), OTHER)
        rewrite(
            conn,
            runs.redacted,
            [*triples, ("run.seal", seal.ts, canon({"dsse": envelope.decode()}))],
        )
    return None


@vector(
    Entry(
        "sealed-tail-cut.db",
        "the redacted run cut at a batch boundary (its close and seal), the seal log kept: "
        "INVALID seal-log by every path, listed once",
        ["signer"],
        ["seal-log"],
        ["VALID"],
        1,
        1,
        run_role="redacted",
        run_code="seal-log",
        run_exit=1,
    )
)
def _tail_cut(db: Path, runs: Runs) -> None:
    _rechain(db, runs.redacted, lambda rows: plain(rows)[:-2])
    return None


# -- keys that prove nothing ---------------------------------------------------------------

#: the identity point, and a non-canonical spelling of it (y = p + 1): under either, a
#: signature (R of small order, S = 0) verifies for every message in OpenSSL
DEGENERATE = {"small-order": SMALL_ORDER_ENCODINGS[0], "non-canonical": SMALL_ORDER_ENCODINGS[12]}


def _forged(db: Path, runs: Runs, key: bytes) -> None:
    """The redacted run rewritten, named as sealed by ``key`` and "signed" with a forged
    signature that verifies under it: pinned, such a key would make the forgery VALID."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    def forged(data: bytes) -> bytes:  # no private key: the signature every message has
        for r in SMALL_ORDER_ENCODINGS[:8]:
            try:
                Ed25519PublicKey.from_public_bytes(key).verify(r + bytes(32), data)
            except InvalidSignature:
                continue
            return r + bytes(32)
        raise AssertionError("no forged signature verifies under this key")

    with tampering(db) as conn:
        *kept, seal = read_rows(conn, runs.redacted)
        triples = plain(kept)
        triples[0] = reencoded(kept[0], lambda b: b.__setitem__("seal", {"key_id": key_id_of(key)}))
        rewrite(conn, runs.redacted, triples)
        head = read_rows(conn, runs.redacted)[-1].chain_hash.hex()
        facts = parse_statement(parse_envelope(seal.value["dsse"]).payload)
        statement = canon(af.seal.build_statement(SealFacts(**{**facts.__dict__, "head": head})))
        kind = b"application/vnd.in-toto+json"
        sig = forged(b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(statement), statement))
        envelope = orjson.dumps(
            {
                "payload": base64.b64encode(statement).decode(),
                "payloadType": kind.decode(),
                "signatures": [{"keyid": key_id_of(key), "sig": base64.b64encode(sig).decode()}],
            },
            option=orjson.OPT_SORT_KEYS,
        )
        rewrite(
            conn,
            runs.redacted,
            [*triples, ("run.seal", seal.ts, canon({"dsse": envelope.decode()}))],
        )


@vector(
    Entry(
        "sealed-forged-small-order-key.db",
        "the redacted run forged and 'signed' under the identity point; that key pinned: "
        "refused (it would verify the forgery), exit 2",
        ["small-order"],
        [],
        [],
        2,
        2,
        refused="is of small order",
    )
)
def _small_order(db: Path, runs: Runs) -> None:
    _forged(db, runs, DEGENERATE["small-order"])


@vector(
    Entry(
        "sealed-forged-non-canonical-key.db",
        "the redacted run forged under a non-canonical spelling of the identity (y = p + 1); "
        "that key pinned: refused, exit 2",
        ["non-canonical"],
        [],
        [],
        2,
        2,
        refused="is not a canonical encoding",
    )
)
def _non_canonical(db: Path, runs: Runs) -> None:
    _forged(db, runs, DEGENERATE["non-canonical"])


# -- checkpoints ---------------------------------------------------------------------------


@vector(
    Entry(
        "checkpoint-consistent.db",
        "a checkpoint of two sealed runs; one more sealed since: the log only grew",
        ["signer"],
        [],
        ["VALID"],
        0,
        0,
        checkpoint="checkpoint-consistent.checkpoint",
    )
)
def _consistent(db: Path, runs: Runs) -> str:
    store = af.SqliteStore(db, readonly=True)  # the tree as it was before the third seal
    leaves = log_leaves(af.Verifier(store))
    store.close()
    note = sign_checkpoint_with(Checkpoint(ORIGIN, 2, root(leaves[:2])), SIGNER)
    return _note(db, "checkpoint-consistent.checkpoint", note)


@vector(
    Entry(
        "checkpoint-shrunk.db",
        "a sealed run cut with its seal log row after a checkpoint of all three",
        ["signer"],
        [],
        ["UNSEALED", "VALID"],
        3,
        1,
        checkpoint="checkpoint-shrunk.checkpoint",
        checkpoint_code="checkpoint",
    )
)
def _shrunk(db: Path, runs: Runs) -> str:
    name = _note(db, "checkpoint-shrunk.checkpoint", _checkpoint_now(db))
    with tampering(db) as conn:
        conn.execute("DELETE FROM seal_log WHERE run_id = ?", (runs.redacted,))
        rewrite(conn, runs.redacted, plain(read_rows(conn, runs.redacted))[:-2])
    return name


@vector(
    Entry(
        "checkpoint-forked.db",
        "a checkpoint of the same size whose root is another tree's (a forked log)",
        ["signer"],
        [],
        ["VALID"],
        0,
        0,
        checkpoint="checkpoint-forked.checkpoint",
        checkpoint_code="checkpoint",
    )
)
def _forked(db: Path, runs: Runs) -> str:
    note = sign_checkpoint_with(Checkpoint(ORIGIN, 3, bytes(range(32))), SIGNER)
    return _note(db, "checkpoint-forked.checkpoint", note)


@vector(
    Entry(
        "checkpoint-reordered.db",
        "the seal log's first two leaves swapped after a checkpoint",
        ["signer"],
        [],
        ["VALID"],
        0,
        0,
        checkpoint="checkpoint-reordered.checkpoint",
        checkpoint_code="checkpoint",
    )
)
def _reordered(db: Path, runs: Runs) -> str:
    name = _note(db, "checkpoint-reordered.checkpoint", _checkpoint_now(db))
    with tampering(db) as conn:
        conn.execute("DELETE FROM seal_log")
        for leaf, run_id in enumerate([runs.child, runs.root, runs.redacted]):
            conn.execute("INSERT INTO seal_log VALUES (?, ?)", (leaf, run_id))
    return name


@vector(
    Entry(
        "checkpoint-other-signer.db",
        "a checkpoint signed by a key the caller did not pin",
        ["signer"],
        [],
        ["VALID"],
        0,
        0,
        checkpoint="checkpoint-other-signer.checkpoint",
        checkpoint_code="note/unverified",
    )
)
def _other_signer(db: Path, runs: Runs) -> str:
    store = af.SqliteStore(db, readonly=True)
    note = make_checkpoint(af.Verifier(store), OTHER, ORIGIN)
    store.close()
    return _note(db, "checkpoint-other-signer.checkpoint", note)


@vector(
    Entry(
        "checkpoint-bad-signature.db",
        "a checkpoint whose size was changed after the pinned key signed it",
        ["signer"],
        [],
        ["VALID"],
        0,
        0,
        checkpoint="checkpoint-bad-signature.checkpoint",
        checkpoint_code="note/signature",
    )
)
def _bad_note(db: Path, runs: Runs) -> str:
    note = _checkpoint_now(db).replace(b"\n3\n", b"\n2\n", 1)
    return _note(db, "checkpoint-bad-signature.checkpoint", note)


# -- building ------------------------------------------------------------------------------


def _compact(db: Path) -> None:
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA journal_mode=DELETE")
    conn.execute("VACUUM")
    conn.close()


def build(target: Path = HERE, only: set[str] | None = None) -> list[Entry]:
    """Build every vector (or the files named in ``only``) into ``target``, and the index of
    all of them (an entry not rebuilt keeps its run id from the index there)."""
    old_index = target / "seals.json"
    known = (
        {e["file"]: e.get("run", "") for e in orjson.loads(old_index.read_bytes())}
        if old_index.exists()
        else {}
    )
    ran: dict[str, str] = {}
    built = []
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        base = work / "base.db"
        with new_file_schema(2):  # the vectors' layout (their damage edits schema 2's rows)
            runs = record(base)
        _compact(base)
        for entry, damage in VECTORS:
            if only is not None and entry.file not in only:
                continue
            db = work / entry.file
            shutil.copyfile(base, db)
            note = damage(db, runs)
            _compact(db)
            shutil.copyfile(db, target / entry.file)
            if note:
                shutil.copyfile(work / note, target / note)
            ran[entry.file] = getattr(runs, entry.run_role) if entry.run_role else ""
            built.append(entry)
    index = []
    for entry, _ in VECTORS:
        row = {k: v for k, v in asdict(entry).items() if k not in ("extra", "run_role")}
        row["run"] = ran.get(entry.file, known.get(entry.file, ""))
        index.append(row)
    (target / "seals.json").write_bytes(orjson.dumps(index, option=orjson.OPT_INDENT_2) + b"\n")
    return built


if __name__ == "__main__":
    named = set(sys.argv[1:]) or None
    if named is None:
        for old in [*HERE.glob("sealed-*.db"), *HERE.glob("checkpoint-*.*")]:
            old.unlink()
    made = build(only=named)
    print(f"built {len(made)} sealed vectors in {HERE}", file=sys.stderr)
