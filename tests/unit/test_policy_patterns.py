"""Policy documents and their patterns: version 2 (RE2, linear time) and version 1 (Python
``re``, recorded by older writers, matched under a budget of counted steps that fails closed).

* new policies are RE2, in the version 2 pattern subset, recorded as ``{"v": 2, ...}``; they
  record and verify;
* a recorded version 2 pattern outside the subset (``\\pL``, as earlier writers accepted)
  keeps verifying, and a run recorded under it can be continued;
* a malformed version 2 document (with a correct digest) is a ``policy`` failure;
* the v1 logs in ``tests/data/redaction_v1`` (recorded by the last v1 writer) keep
  verifying, from the database and from the bundle, and their disclosures still prove;
* a v1 document whose pattern backtracks catastrophically fails closed with
  ``policy-budget`` once its steps are spent (a count: the verdict is the same on any
  machine), never hanging;
* continuing a v1 run records the joined policy as version 2, or refuses, naming a v1
  pattern RE2 cannot read.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import re2
from click.testing import CliRunner

import agentfootprint as af
from agentfootprint.cli import main
from agentfootprint.exchange.bundle_write import write_bundle
from agentfootprint.logformat.canonical import canon
from agentfootprint.logformat.commitments import (
    LEGACY_BUDGET_STEPS,
    LEGACY_BUDGET_STEPS_PER_KEY,
    MatchBudgetExceeded,
    PolicyDocument,
    re2_refusal,
)
from agentfootprint.logformat.hashing import hexdigest
from agentfootprint.logformat.legacy_match import LegacyPattern
from agentfootprint.store.redaction import Boundary
from agentfootprint.testing.tamper import plain, read_rows, reencoded, rewrite, tampering

DATA = Path(__file__).resolve().parents[1] / "data" / "redaction_v1"
#: the three runs of v1.db: a root, its continuation, a root whose pattern is not RE2
ROOT, CHILD, LEGACY = (
    "01a2321e3d401af1c07c8449c60f67e1",
    "01a2321e3d4b735c78194d3827b590b4",
    "01a2321e3d50585db06917173bc4a592",
)
#: backtracks exponentially on LONG_KEY (so does ^(a+)+$)
CATASTROPHIC = "^(a|aa)+$"
LONG_KEY = "a" * 60 + "b"


def invoke(*args: str | Path) -> Any:
    return CliRunner().invoke(main, [str(a) for a in args])


# -- version 2 ------------------------------------------------------------------------------


def test_a_v2_policy_records_and_verifies(tmp_path: Path) -> None:
    """RE2 syntax Python ``re`` lacks (``\\z``) and a key beyond 256 characters."""
    long_key = "x" * 300 + "_secret"
    tool = af.define_tool(
        name="t",
        description="d",
        execute=lambda a: {"Émail": "ann@example.com", long_key: "s-1", "name": "Ann"},
    )
    policy = af.RedactionPolicy(keys=["ssn"], patterns=[r"^[^\x00-\x7f]mail\z", r"_secret\z"])
    agent = af.Agent(
        provider=af.MockProvider([af.reply(tool_calls=[af.tool_call("t", {"ssn": "1"})]), "ok"]),
        model="m",
        tools=[tool],
        store=tmp_path / "r.db",
        redact=policy,
    )
    result = agent.run_sync("go")
    opened: Any = next(iter(agent.store.read(result.run_id))).decoded()
    assert opened["policy"] == {
        "v": 3,  # version 2's patterns, and echo redaction
        "keys": ["ssn"],
        "patterns": [r"^[^\x00-\x7f]mail\z", r"_secret\z"],
    }
    assert opened["policy_digest"] == policy.digest
    recorded = b"".join(row.body for row in agent.store.read(result.run_id))
    assert b"ann@example.com" not in recorded and b"s-1" not in recorded
    assert af.Verifier(agent.store).verify(result.run_id).outcome is af.Outcome.VALID_UNSIGNED
    agent.close()


@pytest.mark.unverified
def test_a_recorded_v2_pattern_outside_the_subset_keeps_verifying(
    recorded: tuple[Path, str],
) -> None:
    """Earlier writers took any pattern RE2 compiles; the subset is asked of new policies
    only. The verifier matches such a pattern with RE2 (here it finds a leak), and a run
    recorded under it continues with the pattern carried."""
    db, run_id = recorded
    with pytest.raises(af.UsageError, match=re.escape("at position 1: a Unicode class \\p")):
        af.RedactionPolicy(patterns=[r"^\pLmail\z"])
    old = PolicyDocument(keys=("ssn",), patterns=(r"^\pLmail\z",))
    with_policy(db, run_id, old.to_json(), old.digest())
    store = af.SqliteStore(db)
    assert af.Verifier(store).verify(run_id).outcome is af.Outcome.VALID_UNSIGNED
    store.close()
    agent = af.Agent(provider=af.MockProvider(["again"]), model="m", store=db)
    child = agent.run_sync("more", continue_from=run_id)
    opened: Any = next(iter(agent.store.read(child.run_id))).decoded()
    assert opened["policy"]["patterns"] == [r"^\pLmail\z"]
    agent.close()
    leaking = PolicyDocument(keys=("ssn",), patterns=(r"^\pL+b\z",))  # matches LONG_KEY
    with_policy(db, run_id, leaking.to_json(), leaking.digest())
    assert verification_error(db, run_id).code == "leak"


def test_v2_matching_is_re2_search() -> None:
    matches = PolicyDocument(keys=("ssn",), patterns=("(?i)token$", r"^\d+$")).matcher()
    assert matches("API_TOKEN") and matches("ssn") and matches("123")
    assert not matches("token\n")  # RE2's $ is the end of the key (Python's also before \n)
    assert not matches("١٢٣")  # RE2's \d is ASCII
    assert matches("a" * 100_000 + "token")  # linear: any key length
    # RE2 builds an automaton: no backtracking, whatever the pattern (its program is small)
    slow = PolicyDocument(keys=(), patterns=("^(a+)+$", CATASTROPHIC)).matcher()
    assert not slow("a" * 100_000 + "b")
    assert all(re2.compile(p).programsize < 20 for p in ("^(a+)+$", CATASTROPHIC))


def test_re2_refusals_are_named() -> None:
    assert re2_refusal("(?i)token") is None
    assert "invalid perl operator" in str(re2_refusal("(?<=x)y"))
    assert re2_refusal(r"(a)\1") is not None and re2_refusal("(") is not None
    assert re2_refusal("\ud800") is not None
    with pytest.raises(af.UsageError, match=re.escape("'(?=x)y' is not RE2 syntax")):
        af.RedactionPolicy(patterns=[re.compile("(?=x)y")])
    compiled = af.RedactionPolicy(patterns=[re.compile("(?i)token")])
    assert compiled.patterns == ("(?i)token",)


@pytest.mark.parametrize(
    ("document", "words"),
    [
        ({"v": 2, "keys": [], "patterns": ["(?<!x)token"]}, "not RE2 syntax"),
        ({"v": 2, "keys": [], "patterns": [r"(a)\1"]}, "not RE2 syntax"),
        ({"v": 2, "keys": [], "patterns": ["("]}, "not RE2 syntax"),
        ({"v": 2, "keys": [], "patterns": [""]}, "non-empty strings"),
        ({"v": 2, "keys": [""], "patterns": []}, "non-empty strings"),
        ({"v": 2, "keys": "ssn", "patterns": []}, "non-empty strings"),
        ({"v": 2, "keys": ["ssn"], "patterns": "x"}, "non-empty strings"),
        ({"v": 2, "keys": ["ssn"]}, "{v, keys, patterns}"),
        ({"v": 2, "keys": ["ssn"], "patterns": [], "flags": "i"}, "{v, keys, patterns}"),
        ({"v": 4, "keys": ["ssn"], "patterns": []}, "unknown policy version 4"),
        ({"v": "2", "keys": ["ssn"], "patterns": []}, "unknown policy version"),
        ({"v": 2.0, "keys": ["ssn"], "patterns": []}, "unknown policy version"),
        ({"v": 1, "keys": [], "patterns": ["("]}, "not a Python regular expression"),
        ([2, ["ssn"], []], "{v, keys, patterns}"),
    ],
)
def test_malformed_policy_documents_are_refused(document: Any, words: str) -> None:
    with pytest.raises(ValueError, match=re.escape(words)):
        PolicyDocument.from_json(document)


@pytest.fixture
def recorded(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A database holding one run under ``keys=["ssn"]`` whose tool result has a 61-character
    key of ``a``s and a ``b`` (what a catastrophic pattern chokes on)."""
    db = tmp_path / "r.db"
    tool = af.define_tool(
        name="t", description="d", execute=lambda a: {LONG_KEY: 1, "ssn": "s", "x": "y"}
    )
    agent = af.Agent(
        provider=af.MockProvider([af.reply(tool_calls=[af.tool_call("t", {})]), "ok"]),
        model="m",
        tools=[tool],
        store=db,
        redact=af.RedactionPolicy(keys=["ssn"]),
    )
    run_id = agent.run_sync("go").run_id
    agent.close()
    yield db, run_id


def with_policy(db: Path, run_id: str, document: dict[str, Any], digest: str | None) -> None:
    """Put ``document`` in the run's ``run.open`` (its digest recomputed unless given), and
    re-chain the run, as a forger who can recompute hashes would."""

    def change(body: dict[str, Any]) -> None:
        body["policy"] = document
        body["policy_digest"] = digest

    with tampering(db) as conn:
        rows = read_rows(conn, run_id)
        out = plain(rows)
        out[0] = reencoded(rows[0], change)
        rewrite(conn, run_id, out)


def verification_error(db: Path, run_id: str) -> af.VerificationError:
    store = af.SqliteStore(db)
    try:
        with pytest.raises(af.VerificationError) as caught:
            af.Verifier(store).verify(run_id)
    finally:
        store.close()
    return caught.value


@pytest.mark.unverified
@pytest.mark.parametrize(
    "document",
    [
        {"v": 2, "keys": ["ssn"], "patterns": ["(?<!x)token"]},
        {"v": 2, "keys": ["ssn"], "patterns": [r"(\w)\1"]},
        {"v": 2, "keys": ["ssn", "ssn"], "patterns": []},
        {"v": 2, "keys": ["x", "ssn"], "patterns": []},
        {"v": 4, "keys": ["ssn"], "patterns": []},
        {"v": 2, "keys": ["ssn"], "patterns": [], "note": ""},
    ],
)
def test_a_forged_v2_document_with_its_digest_is_a_policy_failure(
    recorded: tuple[Path, str], document: dict[str, Any]
) -> None:
    db, run_id = recorded
    with_policy(db, run_id, document, hexdigest("policy", canon(document)))
    error = verification_error(db, run_id)
    assert (error.code, error.seq) == ("policy", 0), error


@pytest.mark.unverified
def test_a_v1_document_with_a_python_only_pattern_verifies(recorded: tuple[Path, str]) -> None:
    """Version 1 patterns are Python ``re``: a lookbehind is fine there."""
    db, run_id = recorded
    legacy = PolicyDocument(keys=("ssn",), patterns=("(?<!x)token",), version=1)
    with_policy(db, run_id, legacy.to_json(), legacy.digest())
    store = af.SqliteStore(db)
    assert af.Verifier(store).verify(run_id).outcome is af.Outcome.VALID_UNSIGNED
    store.close()


# -- version 1: the recorded golden logs ----------------------------------------------------


@pytest.fixture
def v1_logs(tmp_path: Path) -> tuple[Path, Path]:
    db, bundle = tmp_path / "v1.db", tmp_path / "v1.afp"
    shutil.copyfile(DATA / "v1.db", db)
    shutil.copyfile(DATA / "v1.afp", bundle)
    return db, bundle


def test_the_v1_logs_keep_verifying(v1_logs: tuple[Path, Path]) -> None:
    db, bundle = v1_logs
    for source in (af.SqliteStore(db, readonly=True), af.BundleSource(bundle)):
        verifier = af.Verifier(source)
        for run_id in (ROOT, CHILD, LEGACY):
            check = verifier.verify(run_id)
            assert check.outcome is af.Outcome.VALID_UNSIGNED
        assert verifier.verify(CHILD).ancestors == (ROOT,)
    for path in (db, bundle):
        shown = invoke("verify", path, "--disclosures", DATA / "v1-disclosures.json")
        assert shown.exit_code == 0, shown.output
        assert shown.output.count("PROVEN") == 14 and 'ssn = "078-05-1120"' in shown.output
    assert (DATA / "v1.db").read_bytes() == db.read_bytes()


def test_a_v1_run_continues_under_a_v3_policy(v1_logs: tuple[Path, Path]) -> None:
    db, _ = v1_logs
    agent = af.Agent(
        provider=af.MockProvider(["again"]),
        model="m",
        store=db,
        redact=af.RedactionPolicy(keys=["iban"]),
    )
    result = agent.run_sync('{"email": "bob@example.com"}', continue_from=CHILD)
    opened: Any = next(iter(agent.store.read(result.run_id))).decoded()
    assert opened["policy"] == {
        "v": 3,  # the continuation takes on its own writer's duties (echo redaction)
        "keys": ["iban", "ssn"],
        "patterns": ["(?i)(^|_)e-?mail($|_)", "(?i)token"],
    }
    recorded = b"".join(row.body for row in agent.store.read(result.run_id))
    assert b"bob@example.com" not in recorded
    check = af.Verifier(agent.store).verify(result.run_id)
    assert check.outcome is af.Outcome.VALID_UNSIGNED and check.ancestors == (ROOT, CHILD)
    agent.close()


def test_a_v1_run_whose_pattern_re2_cannot_read_is_not_continued(
    v1_logs: tuple[Path, Path],
) -> None:
    db, _ = v1_logs
    agent = af.Agent(provider=af.MockProvider(["x"]), model="m", store=db)
    with pytest.raises(af.ContinuationError, match=re.escape("'(?<!x)token'")):
        agent.run_sync("hello", continue_from=LEGACY)
    agent.close()


def test_a_recorded_document_becomes_a_v2_policy() -> None:
    legacy = {"v": 1, "keys": ["ssn"], "patterns": ["(?i)token"]}
    policy = af.RedactionPolicy.from_document(legacy)
    assert policy.document.to_json() == {**legacy, "v": 2}
    assert af.RedactionPolicy.from_document(policy.document.to_json()) == policy
    with pytest.raises(af.UsageError, match=r"'\(\?<!x\)token' \(a version 1 policy"):
        af.RedactionPolicy.from_document({"v": 1, "keys": [], "patterns": ["(?<!x)token"]})
    with pytest.raises(af.UsageError, match="unknown policy version"):
        af.RedactionPolicy.from_document({"v": 9, "keys": ["a"], "patterns": []})


# -- version 1: the budget of steps ----------------------------------------------------------


def test_a_catastrophic_v1_pattern_runs_out_of_its_budget() -> None:
    matches = PolicyDocument(keys=("ssn",), patterns=(CATASTROPHIC,), version=1).matcher()
    assert matches("ssn") and matches("aaaa") and not matches("abc")
    with pytest.raises(MatchBudgetExceeded, match=re.escape(repr(CATASTROPHIC))) as caught:
        matches(LONG_KEY)
    assert isinstance(caught.value, ValueError) and "61 characters" in str(caught.value)
    assert f"{LEGACY_BUDGET_STEPS:,} steps" in str(caught.value)
    with pytest.raises(MatchBudgetExceeded):
        matches("abcd")  # spent: every later key that needs the patterns fails, at once
    # the verdict is a count: the same pattern and key take the same steps anywhere
    alone = LegacyPattern(CATASTROPHIC)
    alone.allowance = 10**9
    assert alone.search("a" * 20 + "b") is False and alone.steps == 150_065


def test_v1_matching_keeps_its_meaning_and_many_keys_fit_the_budget() -> None:
    matches = PolicyDocument(keys=(), patterns=(r"(?i)token$", r"^\d+$"), version=1).matcher()
    assert matches("token\n")  # Python's $ also matches before a final newline
    assert matches("١٢٣")  # Python's \d is Unicode
    assert not matches("x" * 300 + "token")  # version 1: patterns skip keys over 256 chars
    assert not any(matches(f"key{i}x") for i in range(50_000))  # legitimate volume
    # what one such key costs, counted: far below the steps each key adds to the budget
    counted = [LegacyPattern(p) for p in (r"(?i)token$", r"^\d+$")]
    for pattern in counted:
        pattern.allowance = LEGACY_BUDGET_STEPS_PER_KEY
        assert not pattern.search("key49999x")
    assert sum(p.steps for p in counted) < LEGACY_BUDGET_STEPS_PER_KEY // 10


@pytest.mark.unverified
def test_a_log_with_a_catastrophic_v1_pattern_fails_closed(
    recorded: tuple[Path, str], tmp_path: Path
) -> None:
    db, run_id = recorded
    legacy = PolicyDocument(keys=("ssn",), patterns=(CATASTROPHIC,), version=1)
    with_policy(db, run_id, legacy.to_json(), legacy.digest())
    error = verification_error(db, run_id)
    assert error.code == "policy-budget" and CATASTROPHIC in error.reason
    # the same from a bundle, and through the CLI: INVALID (exit 1), no traceback
    bundle = tmp_path / "forged.afp"
    store = af.SqliteStore(db, readonly=True)
    write_bundle(store, [run_id], bundle, library="forger")
    store.close()
    with pytest.raises(af.VerificationError) as caught:
        af.Verifier(af.BundleSource(bundle)).verify(run_id)
    assert caught.value.code == "policy-budget"
    for path in (db, bundle):
        shown = invoke("verify", path)
        assert shown.exit_code == 1 and "Traceback" not in shown.output, shown.output
        assert "policy-budget" in shown.output or "budget" in shown.output


@pytest.mark.unverified
def test_a_v1_pattern_that_backtracks_exponentially_fails_on_every_machine(
    recorded: tuple[Path, str],
) -> None:
    """``^(a+)+$`` with a long key: the budget counts the steps ``re`` would backtrack
    through, not what a faster engine (the ``regex`` module once used here) gets away with."""
    db, run_id = recorded
    legacy = PolicyDocument(keys=("ssn",), patterns=("^(a+)+$",), version=1)
    with_policy(db, run_id, legacy.to_json(), legacy.digest())
    assert verification_error(db, run_id).code == "policy-budget"


def test_the_boundary_never_records_under_a_v1_document() -> None:
    """A policy made for recording is version 2 whatever it came from."""
    legacy = {"v": 1, "keys": ["ssn"], "patterns": ["(?i)token"]}
    boundary = Boundary(af.RedactionPolicy.from_document(legacy))
    assert boundary.policy.document.version == 2
