"""The ``agentfootprint`` command: run the demo, list and inspect runs, verify logs, replay.

One module per command group; every command runs inside the one error boundary
(:mod:`agentfootprint.cli._boundary`), which maps each error to its exit code:

* 0: success (every run verified and is closed: VALID, sealed or not; identical; written);
* 1: INVALID (a run, the run index, a bundle or a disclosure failed verification), a
  replay that diverged, a diff that found a difference;
* 2: usage and I/O (a missing, unreadable or unwritable file, a FIFO or a device, a file
  over its size bound, a file that is not a log or not a vault, a newer schema version,
  an unknown run, bad arguments: click's usage errors too, as one line), and any
  internal error (one line, no traceback; ``AGENTFOOTPRINT_DEBUG=1`` re-raises it);
* 3: every run is consistent but at least one never closed (UNSEALED: a crash).

The replay and diff modules are imported inside their commands: ``verify`` must keep
working where the runtime (``agentfootprint.core``) cannot be imported.
"""

from __future__ import annotations

import click

from agentfootprint.cli._boundary import (
    DEBUG_VARIABLE,
    EXIT_DIFFERENT,
    EXIT_INTERRUPTED,
    EXIT_INVALID,
    EXIT_OK,
    EXIT_UNSEALED,
    EXIT_USAGE,
    BoundaryGroup,
)
from agentfootprint.cli.artifacts import artifacts
from agentfootprint.cli.assess import assess_command
from agentfootprint.cli.checkpointing import checkpoint_command, consistency_command
from agentfootprint.cli.demo import demo
from agentfootprint.cli.evidence import evidence_command
from agentfootprint.cli.findings import findings_command
from agentfootprint.cli.init import init_command
from agentfootprint.cli.inspect import runs, served, show, state, tool_calls_command
from agentfootprint.cli.keys import keys
from agentfootprint.cli.replaying import diff_command, replay_command
from agentfootprint.cli.report import report_command
from agentfootprint.cli.scanning import scan_command
from agentfootprint.cli.telemetry import otel_command
from agentfootprint.cli.transfer import copy_command, export_command, import_command
from agentfootprint.cli.vault import disclose, erase, vault_key
from agentfootprint.cli.verifying import verify
from agentfootprint.cli.why import why_command
from agentfootprint.version import __version__

__all__ = [
    "EXIT_DIFFERENT",
    "EXIT_INTERRUPTED",
    "EXIT_INVALID",
    "EXIT_OK",
    "EXIT_UNSEALED",
    "EXIT_USAGE",
    "main",
]

_EPILOG = f"""\b
Exit codes (each command's --help says which apply):
  0  success: every run VALID (pinned key or not), identical, or written
  1  INVALID (a run, the run index, a bundle or a disclosure failed
     verification), a replay diverged, a diff found a difference
  2  usage or I/O: a file missing, unreadable, unwritable, not a regular file
     (a FIFO, a device) or too large, not a log or not a vault (the message
     says what it is), a newer schema version, an unknown run, bad arguments
     (one Error: line, never a usage block); also an internal error (one
     line, no traceback)
  3  UNSEALED: every run consistent, but one never closed (a crash)
  {EXIT_INTERRUPTED}  interrupted (Ctrl-C)

\b
Read-only commands (runs, show, served, state, why, findings, evidence, assess, tool-calls,
verify, scan, checkpoint's DB, consistency, diff, export's DB, report's SOURCE, otel's DB, copy's
SRC, replay's DB and VAULT, disclose's VAULT, verify's --artifacts STORE, artifacts list's
STORE)
never create, migrate or change a file. DB and VAULT are file paths,
sqlite:///PATH URLs (sqlite:////PATH for an absolute path) or
postgresql://USER@HOST:PORT/DBNAME URLs (docs/stores.md).
Set {DEBUG_VARIABLE}=1 to get the Python traceback of an internal error."""


@click.group(
    cls=BoundaryGroup,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog=_EPILOG,
)
@click.version_option(__version__, prog_name="agentfootprint")
def main() -> None:
    """agentfootprint: agent runs recorded as verifiable evidence.

    Every stage write is an append-only event in SQLite, every LLM call has a
    receipt of SHA-256 digests, and `verify` rebuilds each request the model
    was served from the log and checks it against its receipt.
    """


for _command in (
    demo,
    init_command,
    runs,
    show,
    served,
    verify,
    export_command,
    import_command,
    copy_command,
    disclose,
    erase,
    vault_key,
    replay_command,
    diff_command,
    state,
    tool_calls_command,
    keys,
    checkpoint_command,
    consistency_command,
    scan_command,
    report_command,
    otel_command,
    why_command,
    findings_command,
    evidence_command,
    assess_command,
    artifacts,
):
    main.add_command(_command)

main.start = (
    "`agentfootprint demo` records a run and verifies it; then `runs DB` lists what a log "
    "holds, `show DB RUN_ID` reads one run, and `verify DB` proves it."
)
main.sections = (
    ("Inspect a log", ("runs", "show", "served", "state", "why", "tool-calls", "diff")),
    ("Is the answer supported", ("findings", "evidence", "assess")),
    ("Verify", ("verify", "scan", "checkpoint", "consistency")),
    ("Share with an auditor", ("report", "export", "import", "copy", "disclose", "erase")),
    ("Observe", ("otel",)),
    ("Replay against new code", ("replay", "demo")),
    ("Keys and stores", ("keys", "vault-key", "init", "artifacts")),
)
