"""Replay: re-running recorded runs against new code with no model calls, stopping at the first
request that is not byte-identical.
"""

from __future__ import annotations

from agentfootprint.replayer.replay_run import ReplayResult, replay, replay_sync

__all__ = ["ReplayResult", "replay", "replay_sync"]
