"""``init``: create a log's tables (or apply the migrations an older one lacks), nothing else."""

from __future__ import annotations

import contextlib

import click

from agentfootprint.cli._boundary import one_line
from agentfootprint.cli._common import TARGET_DB, Database
from agentfootprint.store.urls import open_store_url

__all__ = ["init_command"]


@click.command("init")
@click.argument("db", type=TARGET_DB)
def init_command(db: Database) -> None:
    """Make DB a log: create its tables, or apply the migrations an older log lacks.

    DB is a file path or sqlite:///PATH (a new file is created), or a postgresql:// URL
    naming an empty database or schema. Run it once as the role that is to own the
    tables, before writers (who then need only SELECT and INSERT) and auditors connect
    (docs/stores.md, "Operating PostgreSQL"). A log is left as it is; anything else is
    refused and left unchanged. Prints the schema version.

    \b
    Exit codes:
      0  DB is a log (created, migrated, or already one)
      2  usage error: DB is not a log (it says what it is), of a newer schema version,
         cannot be written or reached
    """
    with contextlib.closing(open_store_url(db, option="DB")) as store:
        version = getattr(store, "schema_version", None)
        shown = f", schema version {version()}" if callable(version) else ""
    click.echo(f"{one_line(db)} is an agentfootprint log{shown}")
