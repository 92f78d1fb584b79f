"""Testing support: the scripted provider, the store contract, the verify-every-run plugin."""

from agentfootprint.core.providers.mock import MockProvider, reply, tool_call
from agentfootprint.testing.replay import assert_replays

__all__ = ["MockProvider", "assert_replays", "reply", "tool_call"]
