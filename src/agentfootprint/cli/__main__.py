"""``python -m agentfootprint.cli``: the same command as ``agentfootprint``."""

from agentfootprint.cli import main

main(prog_name="agentfootprint")
