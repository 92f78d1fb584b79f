"""agentfootprint.core.providers."""
