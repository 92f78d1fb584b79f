"""The seal's in-toto Statement v1: built from a run's close facts as canonical JSON, parsed
back strictly, and sealed / opened through DSSE under caller-pinned keys."""

from __future__ import annotations

import base64
import json
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentfootprint.errors import SealError, UsageError
from agentfootprint.logformat.canonical import canon
from agentfootprint.seal import (
    PAYLOAD_TYPE,
    PREDICATE_TYPE,
    STATEMENT_TYPE,
    Ed25519Signer,
    SealFacts,
    build_statement,
    open_seal,
    parse_statement,
    seal_run,
    sign_envelope,
    statement_bytes,
)

SIGNER = Ed25519Signer.from_seed(bytes(32))
FACTS = SealFacts(
    run_id="run-1",
    head="ab" * 32,
    events=12,
    policy_digest="cd" * 32,
    receipts=3,
    outcome="answered",
    final_answer_digest="ef" * 32,
)


def test_the_statement() -> None:
    assert build_statement(FACTS) == {
        "_type": "https://in-toto.io/Statement/v1",
        "subject": [{"name": "run:run-1", "digest": {"sha256": "ab" * 32}}],
        "predicateType": "https://agentfootprint.dev/seal/v1",
        "predicate": {
            "run_id": "run-1",
            "events": 12,
            "policy_digest": "cd" * 32,
            "receipts": 3,
            "outcome": "answered",
            "final_answer_digest": "ef" * 32,
        },
    }
    assert (STATEMENT_TYPE, PREDICATE_TYPE, PAYLOAD_TYPE) == (
        "https://in-toto.io/Statement/v1",
        "https://agentfootprint.dev/seal/v1",
        "application/vnd.in-toto+json",
    )
    assert statement_bytes(FACTS) == canon(build_statement(FACTS))
    assert statement_bytes(FACTS).startswith(b'{"_type":"https://in-toto.io/Statement/v1",')


def test_optional_and_null_members() -> None:
    with_wire = replace(FACTS, wire_list_digest="01" * 32)
    assert build_statement(with_wire)["predicate"]["wire_list_digest"] == "01" * 32
    assert "wire_list_digest" not in build_statement(FACTS)["predicate"]
    bare = replace(FACTS, policy_digest=None, final_answer_digest=None, outcome="failed")
    assert build_statement(bare)["predicate"]["policy_digest"] is None
    for facts in (FACTS, with_wire, bare):
        assert parse_statement(statement_bytes(facts)) == facts


_hex = st.binary(min_size=32, max_size=32).map(bytes.hex)


@st.composite
def _facts(draw: st.DrawFn) -> SealFacts:
    events = draw(st.integers(min_value=2, max_value=2**53 - 1))
    return SealFacts(
        run_id=draw(st.text(min_size=1, max_size=40)),
        head=draw(_hex),
        events=events,
        policy_digest=draw(st.none() | _hex),
        receipts=draw(st.integers(min_value=0, max_value=min(events - 1, 10**6))),
        outcome=draw(st.sampled_from(["answered", "stopped_early", "failed"])),
        final_answer_digest=draw(st.none() | _hex),
        wire_list_digest=draw(st.none() | _hex),
    )


@given(_facts())
def test_round_trip(facts: SealFacts) -> None:
    payload = statement_bytes(facts)
    assert parse_statement(payload) == facts
    opened, key_ids = open_seal(seal_run(facts, SIGNER), [SIGNER.public])
    assert opened == facts and key_ids == (SIGNER.key_id,)


@pytest.mark.parametrize(
    ("change", "member"),
    [
        ({"run_id": ""}, "run_id"),
        ({"run_id": 5}, "run_id"),
        ({"run_id": "\ud800"}, "run_id"),
        ({"head": "AB" * 32}, "head"),
        ({"head": "ab" * 31}, "head"),
        ({"events": 1}, "events"),
        ({"events": True}, "events"),
        ({"events": 2**53}, "events"),
        ({"receipts": -1}, "receipts"),
        ({"receipts": 12}, "receipts"),
        ({"outcome": "ok"}, "outcome"),
        ({"policy_digest": ""}, "policy_digest"),
        ({"final_answer_digest": "ef" * 33}, "final_answer_digest"),
        ({"wire_list_digest": "x"}, "wire_list_digest"),
    ],
)
def test_facts_are_checked(change: dict[str, Any], member: str) -> None:
    with pytest.raises(UsageError, match=f"SealFacts {member}:") as refused:
        replace(FACTS, **change)
    assert refused.value.option == member


def _edited(edit: Any) -> bytes:
    value = build_statement(FACTS)
    edit(value)
    return canon(value)


@pytest.mark.parametrize(
    ("edit", "where"),
    [
        (lambda v: v.update(_type="https://in-toto.io/Statement/v0.1"), "$._type"),
        (lambda v: v.update(predicateType="https://slsa.dev/provenance/v1"), "$.predicateType"),
        (lambda v: v.update(extra=1), "$"),
        (lambda v: v.pop("predicate"), "$"),
        (lambda v: v["subject"].append(v["subject"][0]), "$.subject"),
        (lambda v: v.update(subject=[]), "$.subject"),
        (lambda v: v.update(subject={}), "$.subject"),
        (lambda v: v["subject"][0].update(name="run:other"), "$.subject[0].name"),
        (lambda v: v["subject"][0].update(uri="x"), "$.subject[0]"),
        (lambda v: v["subject"][0]["digest"].update(sha512="00"), "$.subject[0].digest"),
        (lambda v: v["subject"][0]["digest"].update(sha256="00"), "$.subject[0].digest.sha256"),
        (lambda v: v["predicate"].update(sealed_at=1), "$.predicate"),
        (lambda v: v["predicate"].pop("receipts"), "$.predicate"),
        (lambda v: v["predicate"].update(wire_list_digest=None), "$.predicate.wire_list_digest"),
        (lambda v: v["predicate"].update(events="12"), "$.predicate.events"),
        (lambda v: v["predicate"].update(outcome="won"), "$.predicate.outcome"),
        (lambda v: v["predicate"].update(run_id=1), "$.subject[0].name"),
        (lambda v: v.update(predicate=[]), "$.predicate"),
    ],
)
def test_strict_parsing(edit: Any, where: str) -> None:
    with pytest.raises(SealError) as refused:
        parse_statement(_edited(edit))
    assert refused.value.code == "statement"
    assert refused.value.where == f"statement {where}", refused.value


@pytest.mark.parametrize(
    "payload",
    [
        json.dumps(build_statement(FACTS)).encode(),  # whitespace, key order
        statement_bytes(FACTS).replace(b'"events":12', b'"events":12.0'),
        statement_bytes(FACTS).replace(b'{"_type"', b'{"_type":"x","_type"'),  # duplicate
        b"not json",
        b"",
    ],
)
def test_non_canonical_payloads_are_refused(payload: bytes) -> None:
    with pytest.raises(SealError, match="not canonical JSON"):
        parse_statement(payload)


def test_open_seal_verifies_before_parsing() -> None:
    """A correctly signed envelope of another type, or one not signed by a pinned key, is
    refused before its payload is read; a signed non-statement is refused after."""
    envelope = seal_run(FACTS, SIGNER)
    other = Ed25519Signer.from_seed(b"\x01" * 32)
    with pytest.raises(SealError) as untrusted:
        open_seal(envelope, [other.public])
    assert untrusted.value.code == "untrusted-key"
    with pytest.raises(SealError) as wrong_type:
        open_seal(
            sign_envelope("application/json", statement_bytes(FACTS), SIGNER), [SIGNER.public]
        )
    assert wrong_type.value.code == "payload-type"
    with pytest.raises(SealError) as not_statement:
        open_seal(sign_envelope(PAYLOAD_TYPE, b"{}", SIGNER), [SIGNER.public])
    assert not_statement.value.code == "statement"


def test_a_rewritten_statement_fails_the_signature() -> None:
    """The forgery a seal stops: the final answer's digest changed, the payload re-encoded."""
    document = json.loads(seal_run(FACTS, SIGNER))
    forged = replace(FACTS, final_answer_digest="00" * 32)
    document["payload"] = base64.b64encode(statement_bytes(forged)).decode()
    with pytest.raises(SealError) as refused:
        open_seal(json.dumps(document), [SIGNER.public])
    assert refused.value.code == "bad-signature"


@given(
    facts=_facts(),
    position=st.integers(min_value=0, max_value=10**6),
    delta=st.integers(min_value=1, max_value=255),
)
def test_any_single_byte_mutation_of_a_seal_is_rejected(
    facts: SealFacts, position: int, delta: int
) -> None:
    """A seal with one byte changed does not open, except for a base64 character swapped
    for its twin in the other alphabet (same bytes: the identical statement opens)."""
    seal = seal_run(facts, SIGNER)
    index = position % len(seal)
    mutated = bytearray(seal)
    mutated[index] = (mutated[index] + delta) % 256
    try:
        opened, _ = open_seal(bytes(mutated), [SIGNER.public])
    except SealError:
        return
    assert {seal[index], mutated[index]} in ({ord("+"), ord("-")}, {ord("/"), ord("_")})
    assert opened == facts
