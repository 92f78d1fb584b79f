"""Testing support: the scripted provider, the store contract, the verify-every-run plugin."""

from agentfootprint.core.providers.mock import MockProvider, reply, tool_call

__all__ = ["MockProvider", "reply", "tool_call"]
