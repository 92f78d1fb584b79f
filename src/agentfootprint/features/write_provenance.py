"""``write_provenance``: each recorded write names the keys its stage read before it.

``"reads-prefix"`` records the run in log format v6, whose every ``write`` carries
``reads`` (docs/log-format.md section 5.10): the keys the stage had read before it last
changed the written key, sorted. The verifier checks that each named key existed when the
commit started or is written by it; ``agentfootprint why`` walks the chain of writes and the
reads behind each. ``"off"`` (the default): the run records what it recorded before the
option existed. Recorded in ``run.open.options`` when on. A replay records in its original's
format, so it records ``reads`` exactly when the original did.
"""

from __future__ import annotations

from typing import Any

from agentfootprint.features.base import MISSING, Feature, Given, Options, OptionSpec, refuse

__all__ = ["FEATURE", "OPTION", "READS_PREFIX"]

OPTION = "write_provenance"
READS_PREFIX = "reads-prefix"


def _write_provenance(value: Any, given: Given) -> str | None:
    if value is MISSING or value is None or value == "off":
        return None  # not recorded: the rows of a run before the option existed
    if value != READS_PREFIX:
        raise refuse(
            OPTION,
            f"must be 'off' (the default) or 'reads-prefix' (each write records the keys its "
            f"stage read before it: log format v6), got {value!r}",
        )
    return READS_PREFIX


FEATURE: Feature[Options] = Feature(
    name="write-provenance",
    summary="each write records the keys its stage read before it (log format v6)",
    options=(
        OptionSpec(
            name=OPTION,
            seed="writeProvenance",
            check=_write_provenance,
            recorded=True,
            summary="reads-prefix: each write names the keys read before it (log format v6)",
        ),
    ),
)
