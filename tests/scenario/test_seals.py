"""Sealed runs (log format v4, issue 14): an agent with a signer seals every run at its close,
and the verifier proves the seal against the rows and the caller's pinned keys.

The forgeries here are the ones an unkeyed log cannot catch: whoever holds the file edits a
run and recomputes every hash (``testing.tamper.rewrite``). Once the run is sealed, the
original seal no longer attests the rewritten run, so it is INVALID; a forger who also
re-signs with a key of their own gets VALID_UNSIGNED at best, which ``--require-signature``
refuses.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

import agentfootprint as af
from agentfootprint.cli import main as cli
from agentfootprint.errors import UsageError, VerificationError
from agentfootprint.logformat.log_formats import LOG_FORMAT_V3, LOG_FORMAT_V4
from agentfootprint.seal import (
    build_statement,
    generate_key_file,
    load_signer,
    parse_envelope,
    seal_run,
    sign_envelope,
)
from agentfootprint.seal.facts import final_answer_digest
from agentfootprint.seal.statement import SealFacts, parse_statement
from agentfootprint.testing.seals import OTHER, SIGNER
from agentfootprint.testing.tamper import (
    plain,
    read_rows,
    reencoded,
    rewrite,
    tampering,
)


def echo_tool() -> af.Tool:
    return af.define_tool(
        name="echo",
        description="Echo the arguments.",
        input_schema={"type": "object", "properties": {"x": {"type": "integer"}}},
        execute=lambda args: {"echoed": args},
    )


def script() -> list[Any]:
    return [af.reply(tool_calls=[af.tool_call("echo", {"x": 1})]), "the answer is 1"]


def sealed_agent(store: Any, signer: Any = SIGNER, **options: Any) -> af.Agent:
    return af.Agent(
        provider=af.MockProvider(script()),
        model="m",
        tools=[echo_tool()],
        store=store,
        signer=signer,
        **options,
    )


def verify(path: Path, run_id: str, keys: tuple[Any, ...] = ()) -> af.RunVerification:
    store = af.SqliteStore(path, readonly=True)
    try:
        return af.Verifier(store, trusted_keys=keys).verify(run_id)
    finally:
        store.close()


def failure(path: Path, run_id: str, keys: tuple[Any, ...] = (SIGNER.public,)) -> VerificationError:
    with pytest.raises(VerificationError) as info:
        verify(path, run_id, keys)
    return info.value


@pytest.fixture
def sealed(tmp_path: Path) -> tuple[Path, str]:
    """One sealed run in a fresh SQLite file."""
    path = tmp_path / "sealed.db"
    with sealed_agent(path) as agent:
        result = agent.run_sync("echo 1")
    assert result.outcome == "answered"
    return path, result.run_id


# -- what a sealed run records ------------------------------------------------------------------


def test_a_sealed_run_ends_with_its_seal_and_names_its_key(sealed: tuple[Path, str]) -> None:
    path, run_id = sealed
    store = af.SqliteStore(path, readonly=True)
    rows = list(store.read(run_id))
    store.close()
    assert [rows[-2].type, rows[-1].type] == ["run.close", "run.seal"]
    opened = orjson.loads(rows[0].body)
    assert opened["format"] == LOG_FORMAT_V4
    assert opened["seal"] == {"key_id": SIGNER.key_id}
    envelope = orjson.loads(rows[-1].body)["dsse"].encode()
    facts = parse_statement(parse_envelope(envelope).payload)
    # the seal attests the head after run.close and the count up to it
    store = af.SqliteStore(path, readonly=True)
    closed = list(store.read(run_id))[:-1]
    store.close()
    assert facts.head == closed[-1].chain_hash.hex()
    assert facts.events == len(closed)
    assert facts.outcome == "answered" and facts.receipts == 2
    assert facts.final_answer_digest == final_answer_digest({"final_answer": "the answer is 1"})
    assert facts.policy_digest is None and facts.wire_list_digest is None


def test_outcomes_follow_the_keys_the_caller_pins(sealed: tuple[Path, str]) -> None:
    path, run_id = sealed
    unpinned = verify(path, run_id)
    assert unpinned.outcome is af.Outcome.VALID_UNSIGNED
    assert unpinned.seal_key_id == SIGNER.key_id and unpinned.signed_by == ()
    assert "key not pinned: verify --key" in (unpinned.seal_note or "")
    pinned = verify(path, run_id, (SIGNER.public,))
    assert pinned.outcome is af.Outcome.VALID and pinned.signed_by == (SIGNER.key_id,)
    assert pinned.seal_note is None
    for form in (SIGNER.public.text, SIGNER.public.raw, SIGNER.public.pem):
        assert verify(path, run_id, (form,)).outcome is af.Outcome.VALID
    elsewhere = verify(path, run_id, (OTHER.public,))
    assert elsewhere.outcome is af.Outcome.VALID_UNSIGNED
    assert "not pinned" in (elsewhere.seal_note or "")
    both = verify(path, run_id, (OTHER.public, SIGNER.public))
    assert both.outcome is af.Outcome.VALID and both.signed_by == (SIGNER.key_id,)


def test_an_agent_without_a_signer_records_format_3_unsealed(tmp_path: Path) -> None:
    path = tmp_path / "plain.db"
    with sealed_agent(path, signer=None) as agent:
        result = agent.run_sync("echo 1")
    store = af.SqliteStore(path, readonly=True)
    rows = list(store.read(result.run_id))
    store.close()
    opened = orjson.loads(rows[0].body)
    assert opened["format"] == LOG_FORMAT_V3 and "seal" not in opened
    assert rows[-1].type == "run.close"
    verified = verify(path, result.run_id, (SIGNER.public,))
    assert verified.outcome is af.Outcome.VALID_UNSIGNED and verified.seal_key_id is None
    assert verified.seal_note is not None and "not sealed" in verified.seal_note


def test_a_continuation_a_failed_run_and_a_redacted_run_are_sealed(tmp_path: Path) -> None:
    path = tmp_path / "many.db"
    with sealed_agent(path, redact=af.conversation_redaction()) as agent:
        first = agent.run_sync("echo 1")
    with af.Agent(
        provider=af.MockProvider(["second answer"]),
        model="m",
        store=path,
        signer=SIGNER,
        redact=af.conversation_redaction(),
    ) as agent:
        second = agent.run_sync("and again", continue_from=first)
    with af.Agent(provider=af.MockProvider([]), model="m", store=path, signer=SIGNER) as agent:
        with pytest.raises(af.RunError):
            agent.run_sync("the script is empty")
        store = agent.store
        failed = [r for r in store.runs() if r.run_id not in (first.run_id, second.run_id)]
    assert len(failed) == 1
    for run_id in (first.run_id, second.run_id, failed[0].run_id):
        verified = verify(path, run_id, (SIGNER.public,))
        assert verified.outcome is af.Outcome.VALID, run_id
    store = af.SqliteStore(path, readonly=True)
    facts = parse_statement(
        parse_envelope(orjson.loads(list(store.read(failed[0].run_id))[-1].body)["dsse"]).payload
    )
    redacted = parse_statement(
        parse_envelope(orjson.loads(list(store.read(first.run_id))[-1].body)["dsse"]).payload
    )
    store.close()
    assert facts.outcome == "failed" and facts.final_answer_digest is None
    assert redacted.policy_digest == af.conversation_redaction().digest


def test_a_sealed_run_replays_without_a_model_call(sealed: tuple[Path, str]) -> None:
    path, run_id = sealed
    store = af.SqliteStore(path)
    try:
        for signer in (None, SIGNER):
            agent = af.Agent(
                provider=af.MockProvider([]),
                model="m",
                tools=[echo_tool()],
                store=store,
                signer=signer,
            )
            replayed = af.replay_sync(agent, store, run_id)
            verified = af.Verifier(store, trusted_keys=[SIGNER.public]).verify(
                replayed.result.run_id
            )
            expected = af.Outcome.VALID if signer else af.Outcome.VALID_UNSIGNED
            assert verified.outcome is expected
    finally:
        store.close()


# -- forgeries that pass without a seal ---------------------------------------------------------


def _forged(path: Path, run_id: str, change: Any, tmp_path: Path, name: str) -> Path:
    """A copy of ``path`` whose run ``run_id`` had ``change(rows)`` applied to the rows before
    its seal, every hash recomputed, and the original seal put back at the end."""
    copy = tmp_path / f"{name}.db"
    shutil.copyfile(path, copy)
    with tampering(copy) as conn:
        *kept, seal = read_rows(conn, run_id)
        assert seal.type == "run.seal"
        rewrite(conn, run_id, [*change(kept), (seal.type, seal.ts, seal.body)])
    return copy


def _edit(index: int, change: Any) -> Any:
    def apply(rows: list[Any]) -> list[Any]:
        out = plain(rows)
        out[index] = reencoded(rows[index], change)
        return out

    return apply


def test_forgeries_that_verify_unsealed_are_invalid_once_sealed(
    sealed: tuple[Path, str], tmp_path: Path
) -> None:
    path, run_id = sealed
    store = af.SqliteStore(path, readonly=True)
    rows = list(store.read(run_id))
    store.close()
    answer_at = next(
        i
        for i, row in enumerate(rows)
        if row.type == "write" and orjson.loads(row.body)["path"] == "final_answer"
    )

    def options(body: dict[str, Any]) -> None:
        body["options"]["max_iterations"] = 99

    def answer(body: dict[str, Any]) -> None:
        body["value"] = "the answer is 2"

    forgeries = {"options": _edit(0, options), "answer": _edit(answer_at, answer)}
    for name, change in forgeries.items():
        forged = _forged(path, run_id, change, tmp_path, name)
        # without the seal the forgery would pass: the same rows with the seal dropped
        error = failure(forged, run_id)
        assert error.code == "seal", (name, error)
        assert "does not attest this run" in str(error) and "head" in str(error)


def test_policy_dropped_and_values_in_clear_is_invalid_once_sealed(tmp_path: Path) -> None:
    """The forger swaps a redacted run for a recording of the same conversation in clear,
    under the same run id and clock, and keeps the original seal."""
    ports = af.Ports(clock=lambda: 1_800_000_000_000, run_ids=lambda: "run-0001")
    redacted, clear = tmp_path / "redacted.db", tmp_path / "clear.db"
    with sealed_agent(redacted, redact=af.conversation_redaction(), ports=ports) as agent:
        agent.run_sync("echo 1")
    with sealed_agent(clear, ports=ports) as agent:
        agent.run_sync("echo 1")
    conn_clear = af.SqliteStore(clear, readonly=True)
    clear_rows = [(r.type, r.ts, r.body) for r in list(conn_clear.read("run-0001"))[:-1]]
    conn_clear.close()
    with tampering(redacted) as conn:
        seal = read_rows(conn, "run-0001")[-1]
        rewrite(conn, "run-0001", [*clear_rows, (seal.type, seal.ts, seal.body)])
    error = failure(redacted, "run-0001")
    assert error.code == "seal" and "policy_digest" in str(error)


def test_a_seal_removed_or_followed_by_rows_is_invalid(
    sealed: tuple[Path, str], tmp_path: Path
) -> None:
    path, run_id = sealed
    removed = _forged(path, run_id, plain, tmp_path, "kept")
    with tampering(removed) as conn:
        rewrite(conn, run_id, plain(read_rows(conn, run_id))[:-1])
    error = failure(removed, run_id)
    assert error.code == "seal" and "the seal was removed" in str(error)
    after = tmp_path / "after.db"
    after.write_bytes(path.read_bytes())
    with tampering(after) as conn:
        rows = plain(read_rows(conn, run_id))
        rewrite(conn, run_id, [*rows, rows[-3]])
    error = failure(after, run_id)
    assert error.code == "structure" and "after run.seal" in str(error)


def test_a_seal_of_another_run_or_another_type_is_invalid(tmp_path: Path) -> None:
    path = tmp_path / "two.db"
    with sealed_agent(path) as agent:
        first = agent.run_sync("echo 1")
    with sealed_agent(path) as agent:
        second = agent.run_sync("echo 1")
    store = af.SqliteStore(path, readonly=True)
    other_seal = list(store.read(second.run_id))[-1]
    rows = list(store.read(first.run_id))
    store.close()
    with tampering(path) as conn:
        kept = plain(read_rows(conn, first.run_id))[:-1]
        rewrite(conn, first.run_id, [*kept, ("run.seal", other_seal.ts, other_seal.body)])
    error = failure(path, first.run_id)
    assert error.code == "seal" and "run_id" in str(error)
    # a correct statement signed under another payload type
    facts = parse_statement(parse_envelope(orjson.loads(rows[-1].body)["dsse"]).payload)
    relabelled = sign_envelope(
        "application/json",
        orjson.dumps(build_statement(facts), option=orjson.OPT_SORT_KEYS),
        SIGNER,
    )
    with tampering(path) as conn:
        kept = plain(read_rows(conn, first.run_id))[:-1]
        body = orjson.dumps({"dsse": relabelled.decode()})
        rewrite(conn, first.run_id, [*kept, ("run.seal", rows[-1].ts, body)])
    error = failure(path, first.run_id)
    assert error.code == "seal" and "payloadType" in str(error)


def test_a_forger_who_re_signs_gets_valid_unsigned_at_best(
    sealed: tuple[Path, str], tmp_path: Path
) -> None:
    """Rewrite the run, name the forger's key in run.open and seal again with it: every
    check that needs no key passes, and the seal is by a key the auditor did not pin."""
    path, run_id = sealed
    with tampering(path) as conn:
        rows = read_rows(conn, run_id)
        *kept, _ = rows
        triples = plain(kept)

        def forge(body: dict[str, Any]) -> None:
            body["options"]["max_iterations"] = 99
            body["seal"] = {"key_id": OTHER.key_id}

        triples[0] = reencoded(kept[0], forge)
        rewrite(conn, run_id, triples)
        rechained = read_rows(conn, run_id)
        facts = parse_statement(parse_envelope(orjson.loads(rows[-1].body)["dsse"]).payload)
        forged = SealFacts(
            **{**facts.__dict__, "head": rechained[-1].chain_hash.hex()},
        )
        envelope = seal_run(forged, OTHER)
        seal_row = ("run.seal", rows[-1].ts, orjson.dumps({"dsse": envelope.decode()}))
        rewrite(conn, run_id, [*triples, seal_row])
    verified = verify(path, run_id, (SIGNER.public,))
    assert verified.outcome is af.Outcome.VALID_UNSIGNED
    assert verified.seal_key_id == OTHER.key_id and "not pinned" in (verified.seal_note or "")
    result = CliRunner().invoke(
        cli, ["verify", str(path), "--key", SIGNER.public.text, "--require-signature"]
    )
    assert result.exit_code == 1, result.output


def test_a_tail_cut_with_its_seal_is_told_from_a_crash_by_the_seal_log(
    sealed: tuple[Path, str],
) -> None:
    """What a seal alone cannot show (docs/seals.md section 4): cut at a batch boundary, the
    close and the seal go together and the run's rows alone read as one that never closed.
    The database's seal log still lists it, and verifying the run alone consults it: INVALID
    seal-log, not UNSEALED (docs/seals.md section 7). Cut with its seal log row too, it
    reads as a crash; --require-signature refuses it."""
    path, run_id = sealed
    with tampering(path) as conn:
        rows = plain(read_rows(conn, run_id))
        rewrite(conn, run_id, rows[:-2])
    assert failure(path, run_id).code == "seal-log"
    assert failure(path, run_id, ()).code == "seal-log"  # whatever the keys
    with tampering(path) as conn:
        conn.execute("DELETE FROM seal_log WHERE run_id = ?", (run_id,))
    assert verify(path, run_id, (SIGNER.public,)).outcome is af.Outcome.UNSEALED
    result = CliRunner().invoke(
        cli, ["verify", str(path), "--key", SIGNER.public.text, "--require-signature"]
    )
    assert result.exit_code == 1, result.output


# -- the signer -------------------------------------------------------------------------------


class FailingSigner:
    """A remote signer that is down when the run closes."""

    key_id = SIGNER.key_id
    public_key = SIGNER.public_key

    def sign(self, data: bytes) -> bytes:
        raise ConnectionError("the KMS is unreachable")


class LyingSigner:
    """A misconfigured remote signer: signs with another key than it names."""

    key_id = SIGNER.key_id
    public_key = SIGNER.public_key

    def sign(self, data: bytes) -> bytes:
        return OTHER.sign(data)


@pytest.mark.parametrize("signer", [FailingSigner(), LyingSigner()], ids=["down", "lying"])
def test_a_seal_that_cannot_be_made_leaves_the_run_open(tmp_path: Path, signer: Any) -> None:
    path = tmp_path / "unsealed.db"
    with sealed_agent(path, signer=signer) as agent:
        with pytest.raises((af.RunError, UsageError)) as info:
            agent.run_sync("echo 1")
        (opened,) = agent.store.runs()
    assert "sealed" in str(info.value) or "signature" in str(info.value)
    info = opened
    # everything the run committed before its close is there; no close, no seal
    verified = verify(path, info.run_id, (SIGNER.public,))
    assert verified.outcome is af.Outcome.UNSEALED
    store = af.SqliteStore(path, readonly=True)
    types = [row.type for row in list(store.read(info.run_id))]
    store.close()
    assert "run.close" not in types and "run.seal" not in types and types[-1] == "commit"


def test_a_signer_is_checked_at_construction() -> None:
    class Mismatched:
        key_id = OTHER.key_id
        public_key = SIGNER.public_key

        def sign(self, data: bytes) -> bytes:
            return SIGNER.sign(data)

    for wrong in (Mismatched(), object(), "seal.key"):
        with pytest.raises(UsageError) as info:
            af.Agent(provider=af.MockProvider(["x"]), model="m", signer=wrong)
        assert info.value.option == "signer"


# -- the command line ---------------------------------------------------------------------------


def test_cli_verify_with_keys_require_signature_and_json(
    sealed: tuple[Path, str], tmp_path: Path
) -> None:
    path, run_id = sealed
    runner = CliRunner()
    plain_run = runner.invoke(cli, ["verify", str(path)])
    assert plain_run.exit_code == 0 and plain_run.output.startswith("VALID  ")
    assert "; key not pinned: verify --key KEY checks who sealed it)" in plain_run.output
    refused = runner.invoke(cli, ["verify", str(path), "--require-signature"])
    assert refused.exit_code == 1
    key_file = tmp_path / "seal.pub"
    key_file.write_bytes(SIGNER.public.pem)
    for key in (str(key_file), SIGNER.public.text):
        done = runner.invoke(cli, ["verify", str(path), "--key", key, "--require-signature"])
        assert done.exit_code == 0, done.output
        assert done.output.startswith("VALID ") and SIGNER.key_id in done.output
    shown = runner.invoke(cli, ["verify", str(path), "--key", SIGNER.public.text, "--json"])
    assert shown.exit_code == 0
    document = json.loads(shown.output)
    assert document == {
        "runs": [
            {
                "run_id": run_id,
                "outcome": "VALID",
                "events": document["runs"][0]["events"],
                "receipts": 2,
                "sealed": True,
                "key_pinned": True,
                "signed_by": [SIGNER.key_id],
                "seal_key_id": SIGNER.key_id,
                "note": None,
                "inclusion": None,  # a database's run: its place is --checkpoint's business
            }
        ],
        "exit": 0,
    }
    timeline = runner.invoke(cli, ["show", str(path), run_id])
    assert timeline.exit_code == 0 and f"run sealed by key {SIGNER.key_id}" in timeline.output
    bad = runner.invoke(cli, ["verify", str(path), "--key", "ed25519:not-a-key"])
    assert bad.exit_code == 2 and "Traceback" not in bad.output


def test_the_private_key_is_never_in_the_log_the_output_or_an_error(tmp_path: Path) -> None:
    """Planted key: the private key's seed, PEM and base64 appear nowhere a run or a command
    writes, failing paths included."""
    key_path = tmp_path / "planted.key"
    generate_key_file(key_path)
    signer = load_signer(key_path)
    pem = key_path.read_bytes()
    secrets = [pem, *pem.splitlines()[1:-1]]
    path = tmp_path / "planted.db"
    with sealed_agent(path, signer=signer) as agent:
        result = agent.run_sync("echo 1")
    bundle = tmp_path / "planted.afp"
    store = af.SqliteStore(path)
    af.export_runs(store, [result.run_id], bundle)
    store.close()
    proven = tmp_path / "planted-proven.afp"  # a checkpoint signed with the planted key
    runner = CliRunner()
    export = ["export", str(path), "--run", result.run_id, "--out", str(proven)]
    outputs = [
        runner.invoke(cli, [*export, "--key", str(key_path)]).output,
        runner.invoke(cli, ["verify", str(proven), "--key", signer.public.text]).output,
        runner.invoke(cli, ["verify", str(path), "--key", str(key_path)]).output,
        runner.invoke(cli, ["verify", str(bundle), "--json"]).output,
        runner.invoke(cli, ["keys", "show", str(key_path)]).output,
        runner.invoke(cli, ["show", str(path), result.run_id]).output,
    ]
    assert "inclusion proofs of 1 sealed runs" in outputs[0] and "pinned key" in outputs[1]
    written = [
        path.read_bytes(),
        bundle.read_bytes(),
        proven.read_bytes(),
        *(o.encode() for o in outputs),
    ]
    for blob in written:
        for secret in secrets:
            assert secret not in blob
    # a private key file given where a public key is asked for is refused without quoting it
    assert "private key" in outputs[2] and outputs[2].count("BEGIN") == 0
