"""``observer_delivery`` and ``observer_delivery_options``: when listeners get a run's events.

``"inline"`` (the default) delivers each event as it is emitted; ``"deferred"`` captures it
into a bounded queue of the run delivered by a task beside it, drained completely before
``run()`` returns (:mod:`agentfootprint.runtime.observers` says how). Neither is recorded:
delivery is not evidence, and the rows are the same whichever tier, and with no listener.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from agentfootprint.features.base import MISSING, Feature, Given, Options, OptionSpec, count, refuse
from agentfootprint.runtime.observers import DeliveryOptions

__all__ = ["DELIVERY", "FEATURE", "OPTIONS"]

DELIVERY = "observer_delivery"
OPTIONS = "observer_delivery_options"
_TIERS = ("inline", "deferred")
_OVERFLOW = ("drop-oldest", "sample", "block")
_CAPTURE = ("clone", "summary")
#: the most a queue may hold, and the longest slice a deliverer may take between stages
MAX_QUEUE = 1_000_000
MAX_FLUSH_BUDGET_MS = 60_000


def _delivery(value: Any, given: Given) -> str:
    value = "inline" if value is MISSING or value is None else value
    if value not in _TIERS:
        raise refuse(DELIVERY, f"must be 'inline' or 'deferred', got {value!r}")
    return str(value)


def _options(value: Any, given: Given) -> DeliveryOptions | None:
    if value is MISSING or value is None:
        return None
    if given.resolved(DELIVERY) != "deferred":
        raise refuse(
            OPTIONS,
            "sets the queue of deferred delivery: set observer_delivery='deferred' with it, or "
            "leave it out (nothing is ignored silently)",
        )
    if not isinstance(value, Mapping):
        raise refuse(OPTIONS, f"must be a mapping, got {type(value).__name__}")
    known = {"max_queue", "overflow", "sample_every", "capture", "flush_budget_ms"}
    unknown = sorted(str(k) for k in value if k not in known)
    if unknown:
        raise refuse(OPTIONS, f"unknown keys {unknown}; the keys are {sorted(known)}")
    resolved = DeliveryOptions()
    max_queue = count(
        OPTIONS, value.get("max_queue", resolved.max_queue), "max_queue", high=MAX_QUEUE
    )
    overflow = value.get("overflow", resolved.overflow)
    if overflow not in _OVERFLOW:
        raise refuse(OPTIONS, f"overflow must be one of {list(_OVERFLOW)}, got {overflow!r}")
    if "sample_every" in value and overflow != "sample":
        raise refuse(OPTIONS, "sample_every sets overflow='sample': give that with it")
    sample_every = count(
        OPTIONS, value.get("sample_every", resolved.sample_every), "sample_every", low=2
    )
    capture = value.get("capture", resolved.capture)
    if capture == "ref":
        raise refuse(
            OPTIONS,
            "capture='ref' is not offered: it would hand listeners the run's live objects, "
            "which a listener could change under the record; use 'clone' (a detached copy, "
            "the default) or 'summary' (a bounded one)",
        )
    if capture not in _CAPTURE:
        raise refuse(OPTIONS, f"capture must be 'clone' or 'summary', got {capture!r}")
    budget = value.get("flush_budget_ms", resolved.flush_budget_ms)
    if (
        isinstance(budget, bool)
        or not isinstance(budget, int | float)
        or not math.isfinite(budget)
        or not 0 <= budget <= MAX_FLUSH_BUDGET_MS
    ):
        raise refuse(
            OPTIONS,
            f"flush_budget_ms must be a number from 0 to {MAX_FLUSH_BUDGET_MS}, got {budget!r}",
        )
    return DeliveryOptions(
        max_queue=max_queue,
        overflow=overflow,
        sample_every=sample_every,
        capture=capture,
        flush_budget_ms=float(budget),
    )


FEATURE: Feature[Options] = Feature(
    name="observer-delivery",
    summary="when listeners get a run's events: inline or deferred",
    options=(
        OptionSpec(
            name=DELIVERY,
            seed="observerDelivery",
            check=_delivery,
            summary="inline (default) or deferred delivery to listeners; never recorded",
        ),
        OptionSpec(
            name=OPTIONS,
            seed="observerDeliveryOptions",
            check=_options,
            summary="deferred delivery's queue: size, overflow, capture, flush budget",
        ),
    ),
)
