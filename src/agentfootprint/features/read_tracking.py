"""``read_tracking``: a per-stage view of what each stage read, beside the run.

``RunResult.stage_reads`` is ``{stage_run: {key: ...}}``, one entry per stage execution,
its keys sorted: under ``"summary"`` a
:class:`~agentfootprint.runtime.reads.ReadMarker` per key (its JSON type, size, and the first
80 characters of a primitive's JSON); under ``"full"`` a detached copy of each value (every
read of a long history copies it); ``"off"`` (the default): None. The seed's Agent default
is ``"summary"``; here it is asked for, because it costs every run 5-10% of its recording
time (bench/reads.py) for a view few read, and a value a stage read is in the log anyway
(``state_at(commit - 1)``). Every value is described as the log holds
it (under a redaction policy, its committed form), so the view never shows what the log hides.
Never recorded: the rows are byte-identical in every mode (:mod:`agentfootprint.runtime.reads`
does the work at each commit).
"""

from __future__ import annotations

from typing import Any

from agentfootprint.features.base import MISSING, Feature, Given, Options, OptionSpec, refuse
from agentfootprint.runtime.reads import READ_MODES

__all__ = ["FEATURE", "OPTION"]

OPTION = "read_tracking"


def _read_tracking(value: Any, given: Given) -> str:
    value = "off" if value is MISSING or value is None else value
    if value not in READ_MODES:
        raise refuse(
            OPTION,
            f"must be 'summary' (each read's type, size and a short preview), 'full' (each "
            f"read's value) or 'off' (the default), got {value!r}",
        )
    return str(value)


FEATURE: Feature[Options] = Feature(
    name="read-tracking",
    summary="what each stage read, kept beside the run (RunResult.stage_reads)",
    options=(
        OptionSpec(
            name=OPTION,
            seed="readTracking",
            check=_read_tracking,
            summary="per-stage reads beside the run: summary, full or off (default); never "
            "recorded",
        ),
    ),
)
