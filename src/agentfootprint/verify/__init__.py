"""agentfootprint.verify."""
