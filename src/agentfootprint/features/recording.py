"""How a run is recorded: where (``store``), how values are committed (``commit_values``)
and what is kept out of the log (``redact``, with its ``disclosures`` vault)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentfootprint.features.base import MISSING, Feature, Options, OptionSpec, refuse
from agentfootprint.runtime.ports import Ports
from agentfootprint.store.redaction import RedactionPolicy


def _commit_values(value: Any, given: Mapping[str, Any]) -> str:
    value = "delta" if value is MISSING else value
    if value not in ("delta", "full"):
        raise refuse("commit_values", f"must be one of 'delta', 'full', got {value!r}")
    return str(value)


def _redact(value: Any, given: Mapping[str, Any]) -> RedactionPolicy | None:
    if value is MISSING or value is None:
        return None
    if not isinstance(value, RedactionPolicy):
        raise refuse(
            "redact",
            "must be a RedactionPolicy(keys=[...], patterns=[...]) or "
            f"conversation_redaction(), got {value!r}",
        )
    refuse_structure_keys(value)
    return value


def refuse_structure_keys(policy: RedactionPolicy) -> None:
    """A policy may not name a state key the loop reads as structure (its whole value would
    become one commitment); the keys are those the features declare."""
    from agentfootprint.features.registry import structure_keys

    matches = policy.document.matcher()
    for key in sorted(structure_keys()):
        if matches(key):
            raise refuse(
                "redact",
                f"the policy matches {key!r}, a state key or request field the loop reads "
                "as structure; name the keys inside it instead (for the conversation's text "
                "use conversation_redaction())",
            )


def _disclosures(value: Any, given: Mapping[str, Any]) -> Any:
    if value is MISSING or value is None:
        return None
    if given.get("redact") is None:
        raise refuse(
            "disclosures",
            "a disclosure vault keeps what a redaction policy commits; give redact=... too",
        )
    return value  # opened by the agent (a path or a DisclosureVault)


def _passed(value: Any, given: Mapping[str, Any]) -> Any:
    return None if value is MISSING else value  # opened and checked by the agent


def _ports(value: Any, given: Mapping[str, Any]) -> Ports:
    if value is MISSING or value is None:
        return Ports()
    if not isinstance(value, Ports):
        raise refuse(
            "ports",
            f"must be agentfootprint.Ports(clock=..., run_ids=..., salts=...), got {value!r}",
        )
    if value.model is not None or value.tools is not None:
        raise refuse(
            "ports",
            "the model and tools ports come from provider= and tools=; a replay "
            "plugs recorded ones in itself",
        )
    return value


FEATURE: Feature[Options] = Feature(
    name="recording",
    summary="where and how a run is recorded",
    order=5,
    options=(
        OptionSpec(
            name="commit_values",
            seed="commitValues",
            check=_commit_values,
            recorded=True,
            summary="delta or full writes",
        ),
        OptionSpec(name="redact", seed="redact", check=_redact, summary="redaction policy"),
        OptionSpec(
            name="disclosures", seed=None, check=_disclosures, summary="the disclosure vault"
        ),
        OptionSpec(name="store", seed=None, check=_passed, summary="the log"),
        OptionSpec(name="ports", seed=None, check=_ports, summary="clock, run ids and salts"),
    ),
    ports=("clock", "run_ids", "salts"),
)
