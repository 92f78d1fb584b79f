"""agentfootprint.store."""
