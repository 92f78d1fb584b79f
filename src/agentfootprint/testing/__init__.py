"""Testing support: the scripted provider, the store contract, the verify-every-run plugin."""

from agentfootprint.runtime.mock_provider import MockProvider, reply, tool_call
from agentfootprint.testing.replay import NoModel, assert_replays, silent_twins

__all__ = ["MockProvider", "NoModel", "assert_replays", "reply", "silent_twins", "tool_call"]
