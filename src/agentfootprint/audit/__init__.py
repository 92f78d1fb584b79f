"""agentfootprint.audit: the read side: runs, served requests, receipts, tool calls and diffs.

Every name here is also at the top level (``agentfootprint.replay``,
``agentfootprint.diff_runs``, ``agentfootprint.state_at``...). Names resolve lazily,
so the read side imports nothing of the runtime. Replay is
:mod:`agentfootprint.replayer`, one layer up.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "diff_runs": "agentfootprint.audit.diff",
    "same_recording": "agentfootprint.audit.diff",
    "RunDiff": "agentfootprint.audit.diff",
    "RunReader": "agentfootprint.audit.read",
    "state_at": "agentfootprint.audit.read",
    "commit_value_at": "agentfootprint.audit.read",
    "served_at": "agentfootprint.audit.read",
    "receipt_at": "agentfootprint.audit.read",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agentfootprint.audit' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
