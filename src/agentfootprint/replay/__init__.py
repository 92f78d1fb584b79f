"""agentfootprint.replay: the read side, replay against new code, and run diffs.

``from agentfootprint.replay import replay`` (async) or ``agentfootprint.replay_sync``.
Names resolve lazily, so the read side imports nothing of the runtime.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "replay": "agentfootprint.replay.replayer",
    "replay_sync": "agentfootprint.replay.replayer",
    "ReplayResult": "agentfootprint.replay.replayer",
    "diff_runs": "agentfootprint.replay.diff",
    "same_recording": "agentfootprint.replay.diff",
    "RunDiff": "agentfootprint.replay.diff",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agentfootprint.replay' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
