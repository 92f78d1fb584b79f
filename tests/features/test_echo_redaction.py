"""Echo redaction (docs/log-format.md section 12.8): a value committed from a tool result and
quoted by the model is committed wherever the conversation quotes it, and the verifier, given
the value's disclosure, reports a quotation left in clear as ``leak``.

Every run closed here is verified by the pytest plugin as well.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import agentfootprint as af
from agentfootprint.cli import main
from agentfootprint.logformat.canonical import canon
from agentfootprint.logformat.commitments import Disclosure, is_commitment
from agentfootprint.logformat.echo import ECHO_MIN_CHARS, EchoSearch, literals_of
from agentfootprint.store.memory_vault import MemoryVault
from agentfootprint.store.redaction import Boundary
from agentfootprint.testing.replay import NoModel, silent_twins
from agentfootprint.testing.tamper import read_rows, rewrite, tampering

EMAIL = "ann.lee@example.com"
ANSWER = f"Ann's address is {EMAIL}, on file since 2019."


def lookup(record: dict[str, Any] | None = None) -> af.Tool:
    found = record if record is not None else {"email": EMAIL, "name": "Ann"}
    return af.define_tool(name="lookup", description="find a person", execute=lambda a: found)


def quoting(answer: str = ANSWER) -> af.MockProvider:
    return af.MockProvider([af.reply(tool_calls=[af.tool_call("lookup", {"q": "Ann"})]), answer])


def agent_for(
    tmp_path: Path, provider: Any, tool: af.Tool | None = None, **options: Any
) -> af.Agent:
    return af.Agent(
        provider=provider,
        model="m",
        tools=[tool or lookup()],
        store=tmp_path / "log.db",
        redact=af.RedactionPolicy(keys=["email"]),
        disclosures=tmp_path / "vault.db",
        **options,
    )


def recorded_bytes(tmp_path: Path) -> bytes:
    return b"".join(
        p.read_bytes() for p in (tmp_path / "log.db", tmp_path / "log.db-wal") if p.exists()
    )


def disclosures_of(agent: af.Agent, run_id: str) -> list[Disclosure]:
    vault = agent.vault
    assert vault is not None
    return vault.disclose(vault.commitments(run_id))


def test_a_quoted_value_is_committed_in_the_answer_history_and_events(tmp_path: Path) -> None:
    agent = agent_for(tmp_path, quoting())
    seen: list[af.AgentEvent] = []
    agent.on("*", seen.append)
    result = agent.run_sync("what is Ann's email?")
    assert result.answer == ANSWER  # the caller and the model get the live text
    assert EMAIL.encode() not in recorded_bytes(tmp_path)
    assert EMAIL not in repr(seen)  # a listener's copy is the recorded form
    verifier = af.Verifier(agent.store)
    recorded = verifier.verify(result.run_id).final_state
    assert is_commitment(recorded["final_answer"])
    assert is_commitment(recorded["history"][-1]["content"])
    opened = disclosures_of(agent, result.run_id)
    by_key: dict[str, list[Any]] = {}
    for disclosure in opened:
        by_key.setdefault(disclosure.key, []).append(disclosure.value)
    assert by_key["email"] == [EMAIL]
    assert ANSWER in by_key["final_answer"] and ANSWER in by_key["content"]
    proven = verifier.check_disclosures(opened)  # no quotation in clear
    assert {p.value for p in proven} >= {EMAIL, ANSWER}
    agent.close()


def _reverted(path: Path, run_id: str, echoes: list[Disclosure]) -> None:
    """A hand-made log: the run's echo commitments replaced by the text they hide, every
    hash recomputed (what a writer without echo redaction would have recorded)."""
    vault = MemoryVault()
    vault.put(run_id, echoes)
    with tampering(path) as conn:
        rows = read_rows(conn, run_id)
        rewrite(
            conn,
            run_id,
            [(r.type, r.ts, canon(vault.reveal(r.value))) for r in rows],
        )


def test_the_verifier_reports_a_quotation_left_in_clear(tmp_path: Path) -> None:
    agent = agent_for(tmp_path, quoting())
    result = agent.run_sync("what is Ann's email?")
    opened = disclosures_of(agent, result.run_id)
    agent.close()
    echoes = [d for d in opened if d.key != "email"]
    assert echoes
    _reverted(tmp_path / "log.db", result.run_id, echoes)
    store = af.SqliteStore(tmp_path / "log.db")
    verifier = af.Verifier(store)
    # the run itself verifies: "final_answer" and "content" are not policy keys
    assert verifier.verify(result.run_id).outcome is af.Outcome.VALID_UNSIGNED
    (email,) = [d for d in opened if d.key == "email"]
    with pytest.raises(af.VerificationError) as caught:
        verifier.check_disclosures([email])
    error = caught.value
    assert error.code == "leak" and error.run_id == result.run_id
    seqs = {r.seq: r for r in store.read(result.run_id)}
    first_clear = min(s for s, r in seqs.items() if EMAIL.encode() in r.body)
    assert error.seq == first_clear > verifier.commitments[email.commitment][1]
    assert "echo redaction" in str(error) and "'email'" in str(error)
    with pytest.raises(af.VerificationError, match="no verified run holds"):
        verifier.check_disclosures(echoes)  # the hand-made log has no echo commitments
    store.close()
    file = tmp_path / "email.json"
    file.write_bytes(canon({"agentfootprint_disclosures": 1, "disclosures": [email.to_json()]}))
    shown = CliRunner().invoke(
        main, ["verify", str(tmp_path / "log.db"), "--disclosures", str(file)]
    )
    assert shown.exit_code == 1, shown.output
    assert "leak" in shown.output and "echo redaction" in shown.output
    plain_check = CliRunner().invoke(main, ["verify", str(tmp_path / "log.db")])
    assert plain_check.exit_code == 0, plain_check.output


def test_a_value_in_clear_before_its_commitment_is_not_an_echo(tmp_path: Path) -> None:
    """The user typed the address before the tool's result committed it: the log held it in
    clear already, so an answer left quoting it hides nothing more (section 12.8, step 1). The
    writer commits the answer all the same."""
    agent = agent_for(tmp_path, quoting())
    result = agent.run_sync(f"is {EMAIL} Ann's address?")
    opened = disclosures_of(agent, result.run_id)
    agent.close()
    assert [d.key for d in opened if d.key != "email"]  # the answer was committed
    _reverted(tmp_path / "log.db", result.run_id, [d for d in opened if d.key != "email"])
    store = af.SqliteStore(tmp_path / "log.db")
    verifier = af.Verifier(store)
    assert verifier.verify(result.run_id).outcome is af.Outcome.VALID_UNSIGNED
    assert verifier.check_disclosures([d for d in opened if d.key == "email"])
    store.close()


def test_short_values_are_not_searched_and_numbers_are_by_their_text(tmp_path: Path) -> None:
    record = {"email": "a@b.io", "ssn": 123456789, "name": "Ann"}
    agent = af.Agent(
        provider=quoting("Ann (a@b.io) has the number 123456789."),
        model="m",
        tools=[lookup(record)],
        store=tmp_path / "log.db",
        redact=af.RedactionPolicy(keys=["email", "ssn"]),
        disclosures=tmp_path / "vault.db",
    )
    result = agent.run_sync("who is Ann?")
    final = af.Verifier(agent.store).verify(result.run_id).final_state["final_answer"]
    assert is_commitment(final)  # the number's text, 9 characters, is a literal
    assert literals_of(record) == ["123456789"]  # "a@b.io" is shorter than 8
    agent.close()
    short = af.Agent(
        provider=quoting("Ann's address is a@b.io."),
        model="m",
        tools=[lookup({"email": "a@b.io"})],
        store=tmp_path / "short.db",
        redact=af.RedactionPolicy(keys=["email"]),
    )
    result = short.run_sync("who is Ann?")
    final = af.Verifier(short.store).verify(result.run_id).final_state["final_answer"]
    assert final == "Ann's address is a@b.io."  # under the minimum: recorded as it is
    short.close()


def test_a_continued_run_commits_quotations_of_what_it_inherits(tmp_path: Path) -> None:
    """The child is served the parent's values open (in memory, or from the vault in a new
    agent), so it commits the model's quotations of them."""
    provider = af.MockProvider(
        [
            af.reply(tool_calls=[af.tool_call("lookup", {"q": "Ann"})]),
            "Found Ann.",
            f"As I said: {EMAIL}.",
            f"Once more: {EMAIL}.",
        ]
    )
    agent = agent_for(tmp_path, provider)
    first = agent.run_sync("find Ann")
    in_memory = agent.run_sync("her address?", continue_from=first)
    agent.close()
    again = agent_for(tmp_path, provider)  # a new agent: the parent's values from the vault
    from_log = again.run_sync("her address, again?", continue_from=in_memory.run_id)
    assert from_log.answer == f"Once more: {EMAIL}."
    assert EMAIL.encode() not in recorded_bytes(tmp_path)
    for run in (in_memory, from_log):
        state = af.Verifier(again.store).verify(run.run_id).final_state
        assert is_commitment(state["final_answer"])
    again.close()


def replayed_identically(tmp_path: Path, run_id: str) -> af.Agent:
    """``run_id`` of the log in ``tmp_path`` replayed (with its vault, no model, no tool):
    the replay records what the original recorded; the replaying agent, to read or close."""
    replayer = af.Agent(
        provider=NoModel(),
        model="m",
        tools=silent_twins([lookup()], []),
        store=af.MemoryStore(),
        redact=af.RedactionPolicy(keys=["email"]),
    )
    store = af.SqliteStore(tmp_path / "log.db")
    try:
        replayed = af.replay_sync(replayer, store, run_id, disclosures=tmp_path / "vault.db")
        assert af.same_recording(store, run_id, replayer.store, replayed.result.run_id)
    finally:
        store.close()
    return replayer


def test_a_replay_records_the_quotations_byte_for_byte(tmp_path: Path) -> None:
    agent = agent_for(tmp_path, quoting())
    original = agent.run_sync("what is Ann's email?")
    agent.close()
    replayed_identically(tmp_path, original.run_id).close()


def test_a_version_2_run_replays_and_continues_as_recorded(tmp_path: Path) -> None:
    """An earlier writer (policy version 2) left the quotation in clear: its replay records
    version 2 again, byte for byte, and the verifier asks no echo check of it."""
    agent = af.Agent(
        provider=quoting(),
        model="m",
        tools=[lookup()],
        store=tmp_path / "log.db",
        redact=af.RedactionPolicy(keys=["email"]).at_version(2),
        disclosures=tmp_path / "vault.db",
    )
    original = agent.run_sync("what is Ann's email?")
    opened = disclosures_of(agent, original.run_id)
    assert [d.key for d in opened] == ["email"]  # no echo commitments
    assert EMAIL.encode() in recorded_bytes(tmp_path)
    verifier = af.Verifier(agent.store)
    verifier.verify(original.run_id)
    assert verifier.check_disclosures(opened)  # version 2: no echo check
    agent.close()
    replayer = replayed_identically(tmp_path, original.run_id)
    (replay_id,) = replayer.store.run_ids()
    opened_body: Any = next(iter(replayer.store.read(replay_id))).decoded()
    assert opened_body["policy"]["v"] == 2
    replayer.close()
    later = agent_for(tmp_path, af.MockProvider([f"Still {EMAIL}."]))
    child = later.run_sync("sure?", continue_from=original.run_id)
    child_open: Any = next(iter(later.store.read(child.run_id))).decoded()
    assert child_open["policy"]["v"] == 3  # a new run takes on echo redaction
    assert is_commitment(af.Verifier(later.store).verify(child.run_id).final_state["final_answer"])
    later.close()


def test_a_policy_version_is_3_or_2_and_nothing_else() -> None:
    policy = af.RedactionPolicy(keys=["email"])
    assert policy.version == 3 and policy.at_version(3) is policy
    assert policy.at_version(2).document.to_json()["v"] == 2
    assert (policy.at_version(2) | policy).version == 3  # a continuation takes the newer duty
    for bad in (1, 4, "3"):
        with pytest.raises(ValueError, match="version"):
            policy.at_version(bad)  # type: ignore[arg-type]


# -- the boundary -----------------------------------------------------------------------------


def test_the_boundary_searches_conversation_members_only() -> None:
    boundary = Boundary(af.RedactionPolicy(keys=["email"]))
    boundary.commit({"email": EMAIL})
    quoted = f"mail {EMAIL} now"
    value = {
        "content": quoted,  # conversation text
        "result": [{"note": quoted}],  # under a conversation member, at any depth
        "arguments": '{"to": "' + quoted + '"}',  # walkable JSON text inside one
        "name": quoted,  # not a conversation member
        "tool_call_id": quoted,
    }
    committed = boundary.commit(value)
    assert is_commitment(committed["content"])
    assert is_commitment(committed["result"][0]["note"])
    assert committed["arguments"].startswith('{"to":{"$commit":')
    assert committed["name"] == quoted and committed["tool_call_id"] == quoted
    keys = [d.key for d in boundary.take_disclosures()]
    assert keys == ["email", "to", "content", "note"]  # members by sorted name, depth first


def test_a_version_2_boundary_commits_no_echo() -> None:
    boundary = Boundary(af.RedactionPolicy(keys=["email"]).at_version(2))
    boundary.commit({"email": EMAIL})
    assert boundary.echo is None
    assert boundary.commit({"content": f"mail {EMAIL}"}) == {"content": f"mail {EMAIL}"}


def test_literals_and_the_search() -> None:
    value = {"b": ["x" * ECHO_MIN_CHARS, "short", 12345678, 1234567, True, None], "a": 1.5e300}
    assert literals_of(value) == ["1.5e+300", "x" * ECHO_MIN_CHARS, "12345678"]
    search = EchoSearch()
    assert not search and search.found("anything at all") is None
    search.learn(value)
    assert len(search) == 3 and search.found("id 12345678!") == "12345678"
    assert search.found("1234567") is None
