"""``report``: one HTML file an auditor opens in a browser, which verifies the runs it holds."""

from __future__ import annotations

from pathlib import Path

import click

from agentfootprint.cli._common import DB, INPUT_FILE, Database, check_output, write_output
from agentfootprint.cli._progress import PROGRESS_EPILOG, progress
from agentfootprint.cli.verifying import disclosures_file
from agentfootprint.errors import UsageError
from agentfootprint.report import report_html
from agentfootprint.seal.signer import PublicKey, load_public_key
from agentfootprint.version import __version__

__all__ = ["report_command"]


@click.command("report", epilog=PROGRESS_EPILOG)
@click.argument("source", type=DB)
@click.option(
    "--run",
    "run_ids",
    multiple=True,
    metavar="ID",
    help="A run to show (its ancestors come along). Repeatable; default: every run.",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="The HTML file to write (in an existing folder; never SOURCE or an SQLite file).",
)
@click.option(
    "--key",
    "keys",
    multiple=True,
    metavar="KEY",
    help="A public key to pin in the page (ed25519:... or a public key file), as `verify "
    "--key`: a seal under it shows who sealed the run. The reader can pin more. Repeatable.",
)
@click.option(
    "--diff",
    nargs=2,
    metavar="A B",
    help="Two runs to compare: the page opens on the first request where they differ, "
    "piece by piece.",
)
@click.option(
    "--disclosures",
    type=INPUT_FILE,
    help="A disclosures file (from `disclose`): the page opens each value whose commitment "
    "is in the runs and hashes to it, and shows it beside its commitment. The report then "
    "holds those values in clear.",
)
def report_command(
    source: Database,
    run_ids: tuple[str, ...],
    out: Path,
    keys: tuple[str, ...],
    diff: tuple[str, str] | None,
    disclosures: Path | None,
) -> None:
    """Write one HTML file that verifies the runs of SOURCE in the reader's browser.

    SOURCE is a database or an export bundle; it is read only. The file holds the runs
    as an export bundle (redacted values only as commitments) and a verifier written
    from docs/log-format.md: opened in a browser, with no network and no install, it
    recomputes every event hash, the chain, each request the model was served and its
    receipt, and the seals under the pinned keys, then shows the run: its stages and
    commits, each model call's request piece by piece with its digest, the replies,
    the tool calls, usage, redacted values and seals. It marks green only what it
    computed itself. A database's run index and seal log cannot travel in a bundle:
    this command checks them and the page shows what failed, marked as found here.

    The command is not a verification (its exit code says the file was written); use
    `verify` for a verdict on the command line, and the page for one an auditor can
    see for themselves (docs/report.md).

    \b
    Exit codes:
      0  the report was written
      2  usage error: SOURCE missing or not a log; an unknown --run or --diff run;
         --out a folder, in a missing folder, SOURCE itself or an SQLite file; a --key
         that is not a public key; a bad disclosures file
    """
    check_output(out, source)
    pinned: list[PublicKey] = [load_public_key(key) for key in keys]
    opened = disclosures_file(disclosures) if disclosures is not None else []
    if diff is not None and diff[0] == diff[1]:
        raise UsageError("--diff needs two different runs", option="--diff")
    with progress(desc="report", unit="runs") as bar:
        made = report_html(
            source,
            run_ids=run_ids,
            keys=pinned,
            diff=diff,
            disclosures=opened,
            library=f"agentfootprint {__version__}",
            on_progress=bar.at,
        )
    write_output(out, made.html)
    click.echo(
        f"wrote {out} ({len(made.runs)} runs, {made.events} events, {len(made.html):,} bytes); "
        "open it in a browser: it verifies the runs itself"
    )
