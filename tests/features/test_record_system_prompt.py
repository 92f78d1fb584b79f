"""``record_system_prompt``: the assembled system prompt on ``llm_start``, opt-in."""

from __future__ import annotations

from typing import Any

import pytest

import agentfootprint as af


def _llm_starts(**options: Any) -> list[dict[str, Any]]:
    starts: list[af.AgentEvent] = []
    agent = af.Agent(
        provider=af.MockProvider(["ok"]), model="m", system=["You are terse.", "Cite."], **options
    )
    agent.on("agentfootprint.stream.llm_start", starts.append)
    agent.run_sync("hi")
    return [e.payload() for e in starts]


def test_the_assembled_prompt_rides_llm_start_only_when_asked() -> None:
    (off,) = _llm_starts()
    assert "system_prompt_text" not in off and off["system_prompt_chars"] == 21
    (on,) = _llm_starts(record_system_prompt=True)
    assert on["system_prompt_text"] == "You are terse.\n\nCite."
    assert on["system_prompt_chars"] == len(on["system_prompt_text"])


def test_the_recorded_prompt_is_covered_by_redaction() -> None:
    (start,) = _llm_starts(record_system_prompt=True, redact=af.RedactionPolicy(keys=["text"]))
    assert "terse" not in start["system_prompt_text"]
    assert start["system_prompt_text"].count('{"$commit":') == 2


@pytest.mark.parametrize("value", ["yes", 1])
def test_record_system_prompt_is_true_or_false(value: Any) -> None:
    with pytest.raises(af.UsageError) as caught:
        af.Agent(provider=af.MockProvider(["x"]), model="m", record_system_prompt=value)
    assert caught.value.option == "record_system_prompt"
