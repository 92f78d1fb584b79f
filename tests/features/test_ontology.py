"""``ontology`` and ``ontology_ask``: a declared domain map served as a constant system piece."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from feature_support import lookup, record, replays, rows, without_open

import agentfootprint as af
from agentfootprint.features.ontology import ONTOLOGY_INSTRUCTION, ontology_text
from agentfootprint.logformat.canonical import canon, parse
from agentfootprint.logformat.hashing import hexdigest


def spec(version: str = "1", meaning: str = "money received from customers") -> dict[str, Any]:
    return {
        "name": "sales",
        "version": version,
        "sources": {"warehouse": "the sales warehouse"},
        "nodes": {
            "revenue": {
                "meaning": meaning,
                "unit": "USD",
                "aliases": ["sales"],
                "sources": [{"source": "warehouse", "via": "lookup", "coverage": "2020-"}],
            },
            "churn": {"meaning": "customers lost in a period"},
        },
        "relations": [{"from": "churn", "relation": "reduces", "to": "revenue"}],
    }


def _script() -> list[Any]:
    return [af.reply(tool_calls=[af.tool_call("lookup", {"q": "revenue"})]), "done"]


def _receipts(agent: af.Agent, run_id: str) -> list[dict[str, Any]]:
    return [parse(e.body) for e in agent.store.read(run_id) if e.type == "receipt"]


def test_the_piece_is_served_and_its_receipt_digest_is_computed_by_hand() -> None:
    ontology = af.define_ontology(spec())
    agent, result = record(_script, [lookup()], system="Be brief.", ontology=ontology)
    assert result.state["system_pieces"] == [
        {"source": "base", "text": "Be brief."},
        {"source": "ontology", "text": ontology_text(ontology)},
        {"source": "ontology-instruction", "text": ONTOLOGY_INSTRUCTION},
    ]
    by_hand = hexdigest(
        "piece/system", canon({"source": "ontology", "text": ontology_text(ontology)})
    )
    first = _receipts(agent, result.run_id)[0]
    assert first["system"]["add"][1] == by_hand
    assert "revenue (unit: USD)" in ontology_text(ontology)
    assert "revenue: in warehouse, read by tool lookup" in ontology_text(ontology)
    assert "held by no source here: churn" in ontology_text(ontology)
    opened = parse(next(iter(agent.store.read(result.run_id))).body)
    assert opened["options"]["ontology"] == {
        "name": "sales",
        "version": "1",
        "fingerprint": hexdigest("ontology", canon(ontology.spec)),
    }
    assert opened["options"]["ontology_ask"] == "use-the-map"


def test_served_fires_per_call_with_counts_only_and_is_not_recorded() -> None:
    seen: list[af.AgentEvent] = []
    agent = af.Agent(
        provider=af.MockProvider(_script()),
        model="m",
        tools=[lookup()],
        ontology=af.define_ontology(spec()),
    )
    agent.on("agentfootprint.ontology.served", seen.append)
    result = agent.run_sync("go")
    payloads = [e.payload() for e in seen]
    assert [p["call"] for p in payloads] == [0, 1] and result.calls == 2
    assert payloads[0]["nodes"] == 2 and payloads[0]["relations"] == 1
    assert "meaning" not in str(payloads) and "customers" not in str(payloads)
    recorded = [parse(e.body) for e in agent.store.read(result.run_id) if e.type == "event"]
    assert not any(r["name"] == "agentfootprint.ontology.served" for r in recorded)


def test_a_via_naming_an_unknown_tool_is_refused_naming_the_map_and_the_tool() -> None:
    with pytest.raises(af.UsageError) as caught:
        af.Agent(provider=af.MockProvider([]), model="m", ontology=af.define_ontology(spec()))
    assert caught.value.option == "ontology"
    assert "'sales'" in str(caught.value) and "'lookup'" in str(caught.value)


def test_the_map_is_detached_from_the_callers_spec() -> None:
    given = spec()
    ontology = af.define_ontology(given)
    text, fingerprint = ontology_text(ontology), ontology.fingerprint
    given["nodes"]["revenue"]["meaning"] = "changed"
    given["relations"][0]["relation"] = "changed"
    assert ontology_text(ontology) == text and ontology.fingerprint == fingerprint
    assert af.define_ontology(spec()).fingerprint == fingerprint  # same map, same fingerprint
    assert af.define_ontology(spec(version="2")).fingerprint != fingerprint


def test_a_map_edited_after_it_was_defined_is_refused_and_serves_what_was_defined() -> None:
    ontology = af.define_ontology(spec())
    text = ontology.text
    ontology.spec["nodes"]["revenue"]["meaning"] = "edited in place"
    assert ontology.text == text and "edited in place" not in text
    with pytest.raises(af.UsageError, match="changed after define_ontology") as caught:
        af.Agent(provider=af.MockProvider([]), model="m", tools=[lookup()], ontology=ontology)
    assert caught.value.option == "ontology"


@pytest.mark.parametrize(
    "bad",
    [
        {**spec(), "extra": 1},
        {**spec(), "nodes": {}},
        {**spec(), "nodes": {"x": {"meaning": ""}}},
        {**spec(), "nodes": {"x": {"meaning": "m", "sources": [{"source": "nope", "via": "t"}]}}},
        {**spec(), "relations": [{"from": "churn", "relation": "r", "to": "profit"}]},
        {**spec(), "name": ""},
        "not a map",
    ],
)
def test_a_bad_spec_is_refused(bad: Any) -> None:
    with pytest.raises(af.UsageError) as caught:
        af.define_ontology(bad)
    assert caught.value.option == "ontology" and "define_ontology(spec)" in str(caught.value)


@pytest.mark.parametrize(
    ("options", "option"),
    [
        ({"ontology_ask": "none"}, "ontology_ask"),
        ({"ontology_ask": "use-the-map"}, "ontology_ask"),
        ({"ontology": spec()}, "ontology"),
        ({"ontology": af.define_ontology(spec()), "ontology_ask": "always"}, "ontology_ask"),
    ],
)
def test_misconfiguration_is_refused_at_construction(options: dict[str, Any], option: str) -> None:
    with pytest.raises(af.UsageError) as caught:
        af.Agent(provider=af.MockProvider([]), model="m", tools=[lookup()], **options)
    assert caught.value.option == option


def test_absent_records_the_same_rows() -> None:
    plain, a = record(_script, [lookup()], system="Be brief.")
    none, b = record(_script, [lookup()], system="Be brief.", ontology=None)
    assert rows(plain.store, a.run_id) == rows(none.store, b.run_id)


def test_a_replay_is_identical() -> None:
    ontology = af.define_ontology(spec())
    agent, result = record(_script, [lookup()], ontology=ontology)
    replays(agent, result, ontology=ontology)  # matched call for call
    twin = af.Agent(
        provider=af.MockProvider([]),
        model="m",
        tools=[lookup()],
        store=af.MemoryStore(),
        ontology=ontology,
    )
    again = af.replay_sync(twin, agent.store, result.run_id)
    assert af.same_recording(agent.store, result.run_id, twin.store, again.result.run_id)


def test_a_changed_map_replays_as_a_system_divergence_at_call_0() -> None:
    agent, result = record(_script, [lookup()], ontology=af.define_ontology(spec()))
    changed = af.define_ontology(spec(version="2", meaning="gross bookings"))
    with pytest.raises(af.ReplayDivergence) as caught:
        replays(agent, result, ontology=changed)
    assert caught.value.kind == "system" and caught.value.call == 0
    assert "money received from customers" in caught.value.diff
    assert "gross bookings" in caught.value.diff


def test_the_two_asks_differ_in_exactly_one_receipted_piece() -> None:
    ontology = af.define_ontology(spec())
    use, a = record(_script, [lookup()], ontology=ontology, ontology_ask="use-the-map")
    none, b = record(_script, [lookup()], ontology=ontology, ontology_ask="none")
    with_ask = _receipts(use, a.run_id)[0]["system"]["add"]
    without = _receipts(none, b.run_id)[0]["system"]["add"]
    assert with_ask[:-1] == without and len(with_ask) == len(without) + 1
    instruction = {"source": "ontology-instruction", "text": ONTOLOGY_INSTRUCTION}
    assert with_ask[-1] == hexdigest("piece/system", canon(instruction))
    assert without_open(rows(use.store, a.run_id)) != without_open(rows(none.store, b.run_id))


DOCS = Path(__file__).resolve().parents[2] / "docs" / "ontology.md"


def test_the_docs_example_runs_and_verifies() -> None:
    (example,) = re.findall(r"```python\n(.*?)```", DOCS.read_text(encoding="utf-8"), flags=re.S)
    namespace: dict[str, Any] = {}
    exec(compile(example, str(DOCS), "exec"), namespace)  # the asserts are the doc's own
    result = namespace["result"]
    assert result.answer == "Revenue is 120 USD."
    namespace["agent"].close()
