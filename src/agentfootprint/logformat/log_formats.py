"""The log formats this version reads, and the one place that chooses among them.

``run.open.format`` names the format a run was recorded in; :func:`log_format` turns that
name into its :class:`~agentfootprint.logformat.log_format_spec.LogFormat` (one module per
version: :mod:`~agentfootprint.logformat.log_format_v1` to ``_v6``), and every rule that
differs by format is read from it. docs/log-format.md section 1.1 lists the formats;
appendix A describes v1 and v2, which only earlier writers recorded.
"""

from __future__ import annotations

from typing import Any, Final

from agentfootprint.logformat import (
    log_format_v1,
    log_format_v2,
    log_format_v3,
    log_format_v4,
    log_format_v5,
    log_format_v6,
)
from agentfootprint.logformat.log_format_spec import LogFormat

__all__ = [
    "LOG_FORMAT",
    "LOG_FORMATS",
    "LOG_FORMAT_V1",
    "LOG_FORMAT_V2",
    "LOG_FORMAT_V3",
    "LOG_FORMAT_V4",
    "LOG_FORMAT_V5",
    "LOG_FORMAT_V6",
    "LogFormat",
    "UnknownLogFormat",
    "known_log_format",
    "log_format",
]

LOG_FORMAT_V1: Final = log_format_v1.FORMAT.name
LOG_FORMAT_V2: Final = log_format_v2.FORMAT.name
LOG_FORMAT_V3: Final = log_format_v3.FORMAT.name
LOG_FORMAT_V4: Final = log_format_v4.FORMAT.name
LOG_FORMAT_V5: Final = log_format_v5.FORMAT.name
LOG_FORMAT_V6: Final = log_format_v6.FORMAT.name
_FORMATS: Final = (
    log_format_v1.FORMAT,
    log_format_v2.FORMAT,
    log_format_v3.FORMAT,
    log_format_v4.FORMAT,
    log_format_v5.FORMAT,
    log_format_v6.FORMAT,
)
#: every log format this version reads and verifies, oldest first
LOG_FORMATS: Final = tuple(f.name for f in _FORMATS)
#: the format an unsigned run is recorded in (a sealed one: v4); every one of LOG_FORMATS reads
LOG_FORMAT: Final = LOG_FORMAT_V3


class UnknownLogFormat(ValueError):
    """A ``run.open.format`` this version does not read: the log must be refused."""


def known_log_format(name: Any) -> LogFormat | None:
    """The format ``name`` names, or None when this version knows no such format."""
    if name == LOG_FORMAT_V1:
        return log_format_v1.FORMAT
    elif name == LOG_FORMAT_V2:
        return log_format_v2.FORMAT
    elif name == LOG_FORMAT_V3:
        return log_format_v3.FORMAT
    elif name == LOG_FORMAT_V4:
        return log_format_v4.FORMAT
    elif name == LOG_FORMAT_V5:
        return log_format_v5.FORMAT
    elif name == LOG_FORMAT_V6:
        return log_format_v6.FORMAT
    else:
        return None


def log_format(name: Any) -> LogFormat:
    """The format ``name`` names; :class:`UnknownLogFormat` for one this version does not read."""
    found = known_log_format(name)
    if found is None:
        raise UnknownLogFormat(
            f"unknown log format {name!r} (this version reads {', '.join(LOG_FORMATS)})"
        )
    return found
