"""What the integrity commands' scenario tests share: the CLI runner, the producer and the
lookup a run arms its checks with (a `lun` column written blank, an empty lookup keyed on a
value the producer served), and a copy of a log with chosen rows changed."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from click.testing import CliRunner

import agentfootprint as af
from agentfootprint.cli import main
from agentfootprint.testing.tamper import read_rows, reencoded, rewrite, tampering

SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}}
WWPN = "10:00:00:90:fa:12:34:56"


def cli(*args: Any) -> Any:
    return CliRunner().invoke(main, [str(a) for a in args])


def producer_and_lookup(hosts: Callable[[Any], Any], **declared: Any) -> list[af.Tool]:
    """``list_hosts`` (it returns ``hosts(args)``, and declares ``declared``) and ``lookup``
    (its arguments come from ``list_hosts``; it finds nothing)."""
    return [
        af.define_tool(
            name="list_hosts",
            description="List the hosts.",
            input_schema=SCHEMA,
            execute=hosts,
            **declared,
        ),
        af.define_tool(
            name="lookup",
            description="Look a host up.",
            input_schema=SCHEMA,
            execute=lambda args: [],
            arguments_from=["list_hosts"],
        ),
    ]


def hosts_and_lookup() -> list[af.Tool]:
    """The producer declaring ``lun`` a number and returning it blank, and the lookup."""
    return producer_and_lookup(
        lambda args: [{"wwpn": WWPN, "lun": ""}], result_columns={"lun": "number"}
    )


def forged(
    db: Path,
    run_id: str,
    copy: Path,
    change: Callable[[dict[str, Any]], None],
    *,
    event: str | None = None,
    write: str | None = None,
) -> Path:
    """``copy``: the log ``db`` with ``run_id``'s events of kind ``event`` (or its writes of
    key ``write``) changed by ``change``, every hash recomputed."""
    needle = f'"name":"{event}"' if event is not None else f'"path":"{write}"'
    kind = "event" if event is not None else "write"
    shutil.copyfile(db, copy)
    with tampering(copy) as connection:
        rows = []
        for row in read_rows(connection, run_id):
            ours = row.type == kind and needle.encode() in row.body
            rows.append(reencoded(row, change) if ours else (row.type, row.ts, row.body))
        rewrite(connection, run_id, rows)
    return copy
