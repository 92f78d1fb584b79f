"""agentfootprint.core."""
