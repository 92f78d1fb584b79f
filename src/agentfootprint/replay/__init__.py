"""agentfootprint.replay."""
