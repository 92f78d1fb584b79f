"""Sampling settings: ``top_p``, ``stop``, ``seed``, ``presence_penalty``,
``frequency_penalty`` and ``model_settings`` (a vendor's extra request fields).

Each is served in the request's ``params`` beside ``temperature`` and ``max_tokens`` (the
seed stage commits them, :func:`agentfootprint.features.turn.call_params`), so every
receipt hashes them and the verifier rebuilds them from the log. A setting left out is
not in ``params`` at all: a run without them records the rows it recorded before they
existed.

A setting is served only to a provider that sends it: the provider's class attribute
``sampling_settings`` names those it maps to its vendor's request (the shipped adapters,
``MockProvider`` all of them). Any other is refused at construction naming the option and
the provider, since a receipt would otherwise prove a request the model was never sent.
``model_settings`` keys may not be fields the adapter sets itself (its class attribute
``body_fields``) nor the name of an option that serves the same thing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Final

from agentfootprint.errors import AgentFootprintError
from agentfootprint.features.base import (
    MISSING,
    Feature,
    Given,
    OptionCheck,
    Options,
    OptionSpec,
    refuse,
)
from agentfootprint.features.llm_call import NAME as LLM_CALL
from agentfootprint.logformat.canonical import check_ijson
from agentfootprint.runtime.provider import SAMPLING_SETTINGS
from agentfootprint.store.redaction import refuse_reserved_key

__all__ = ["FEATURE", "MAX_STOP", "SETTINGS", "params"]

#: the settings this feature owns, in the order they are described
SETTINGS: Final = SAMPLING_SETTINGS
#: the most stop sequences accepted (OpenAI's API takes 4; the vendor's bound applies)
MAX_STOP: Final = 16
#: options that serve a member of ``params`` themselves: never a ``model_settings`` key
_SERVED: Final = frozenset({"temperature", "max_tokens", "stop_sequences", *SETTINGS})


def _provider_sends(option: str, given: Given) -> None:
    """Refuse ``option`` unless the provider declares it sends it."""
    provider = given.resolved("provider")
    name = getattr(provider, "name", type(provider).__name__)
    declared = getattr(provider, "sampling_settings", None)
    if declared is None:
        raise refuse(
            option,
            f"provider {name!r} declares no sampling_settings, so {option} would be recorded "
            "as served and never reach the model: remove it, or declare "
            f"sampling_settings = frozenset({{{option!r}, ...}}) on the provider's class "
            "naming the settings it sends",
        )
    if not isinstance(declared, frozenset | set | tuple | list) or not all(
        isinstance(s, str) for s in declared
    ):
        raise refuse(
            option,
            f"provider {name!r} declares sampling_settings={declared!r}, which is not a "
            "collection of setting names (a frozenset of str)",
        )
    if option not in declared:
        sent = ", ".join(sorted(declared)) or "none"
        raise refuse(
            option,
            f"provider {name!r} does not send {option} (it sends: {sent}); remove it, or use "
            "a provider that supports it",
        )


def _number(option: str, value: Any, low: float, high: float) -> float | None:
    if value is MISSING or value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not low <= value <= high
    ):
        raise refuse(option, f"must be a finite number from {low:g} to {high:g}, got {value!r}")
    return value


def _top_p(value: Any, given: Given) -> float | None:
    checked = _number("top_p", value, 0, 1)
    if checked is not None:
        _provider_sends("top_p", given)
    return checked


def _penalty(option: str) -> OptionCheck:
    def check(value: Any, given: Given) -> float | None:
        checked = _number(option, value, -2, 2)
        if checked is not None:
            _provider_sends(option, given)
        return checked

    return check


def _seed(value: Any, given: Given) -> int | None:
    if value is MISSING or value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise refuse("seed", f"must be an integer (the vendor's sampling seed), got {value!r}")
    _provider_sends("seed", given)
    return value


def _stop(value: Any, given: Given) -> list[str] | None:
    """One stop sequence or a list of them, served as a list either way."""
    if value is MISSING or value is None:
        return None
    sequences = [value] if isinstance(value, str) else value
    if (
        not isinstance(sequences, Sequence)
        or isinstance(sequences, bytes)
        or not 1 <= len(sequences) <= MAX_STOP
        or not all(isinstance(s, str) and s for s in sequences)
    ):
        raise refuse(
            "stop",
            f"must be a non-empty string or a list of 1 to {MAX_STOP} non-empty strings, got "
            f"{value!r}",
        )
    _provider_sends("stop", given)
    return list(sequences)


def _model_settings(value: Any, given: Given) -> dict[str, Any] | None:
    """The vendor's extra request fields: a JSON object, sent as given, merged last."""
    if value is MISSING or value is None:
        return None
    if not isinstance(value, Mapping):
        raise refuse(
            "model_settings",
            f"must be a mapping of the vendor's request fields to JSON values, got {value!r}",
        )
    settings = _json(value)
    if not settings:
        return None  # nothing to send: served as if absent
    for key in settings:
        if not key:
            raise refuse("model_settings", "a field name may not be empty")
        if key in _SERVED:
            option = "stop" if key == "stop_sequences" else key
            raise refuse(
                "model_settings",
                f"{key!r} is served by the option {option}=: pass it there (checked, and "
                "sent under the vendor's name)",
            )
    _provider_sends("model_settings", given)
    provider = given.resolved("provider")
    fields = getattr(provider, "body_fields", None)
    if not isinstance(fields, frozenset | set | tuple | list):
        fields = ()
    taken = sorted(key for key in settings if key in fields)
    if taken:
        raise refuse(
            "model_settings",
            f"{', '.join(map(repr, taken))}: the provider "
            f"{getattr(provider, 'name', '?')!r} sets "
            f"{'this field' if len(taken) == 1 else 'these fields'} of the request itself; "
            "model_settings may only add fields",
        )
    return settings


def _json(value: Mapping[Any, Any]) -> dict[str, Any]:
    """``value`` as plain JSON (dicts and lists), or a refusal naming the path at fault."""

    def plain(item: Any) -> Any:
        if isinstance(item, Mapping):
            return {key: plain(member) for key, member in item.items()}
        if isinstance(item, list | tuple):
            return [plain(member) for member in item]
        return item

    copied: dict[str, Any] = plain(value)
    try:
        check_ijson(copied)
        refuse_reserved_key(copied, "model_settings")
    except AgentFootprintError as exc:
        raise refuse("model_settings", f"must be JSON: {exc}") from None
    return copied


def params(options: Mapping[str, Any]) -> dict[str, Any]:
    """The settings set, as served in ``params`` (those left out are absent)."""
    return {name: options[name] for name in SETTINGS if options.get(name) is not None}


FEATURE: Feature[Options] = Feature(
    name="sampling",
    summary="sampling settings and the vendor's extra fields, served in params",
    needs=(LLM_CALL,),
    options=(
        OptionSpec(name="top_p", seed=None, check=_top_p, summary="served in params"),
        OptionSpec(name="stop", seed=None, check=_stop, summary="served in params"),
        OptionSpec(name="seed", seed=None, check=_seed, summary="served in params"),
        OptionSpec(
            name="presence_penalty",
            seed=None,
            check=_penalty("presence_penalty"),
            summary="served in params",
        ),
        OptionSpec(
            name="frequency_penalty",
            seed=None,
            check=_penalty("frequency_penalty"),
            summary="served in params",
        ),
        OptionSpec(
            name="model_settings",
            seed=None,
            check=_model_settings,
            summary="the vendor's extra request fields, served in params",
        ),
    ),
    # declarations only: the seed stage serves them (turn.call_params)
    active=lambda options: False,
)
