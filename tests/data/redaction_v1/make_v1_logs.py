"""Record the v1-policy golden logs (run with the code of commit 6343494, the last v1 writer).

Usage, from the repository root, with that commit's ``src`` on the path::

    git archive 6343494 src | tar -x -C /tmp/v1
    PYTHONPATH=/tmp/v1/src python tests/data/redaction_v1/make_v1_logs.py

It writes, next to this script: ``v1.db`` (three runs: a root, its continuation, and a
root whose pattern RE2 cannot compile), ``v1.afp`` (the export bundle of all three) and
``v1-disclosures.json`` (the disclosures of the first two runs). The files are data: today's
writer records policy documents of version 2, so they cannot be re-made with it.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import agentfootprint as af
from agentfootprint.exchange.transfer import export_runs
from agentfootprint.store.vault import disclosures_document

HERE = Path(__file__).resolve().parent
SECRET = {"ssn": "078-05-1120", "email": "ann@example.com", "api_token": "tok-9f2c"}


def lookup(arguments: dict[str, object]) -> str:
    return json.dumps({"name": "Ann", **SECRET, "note": json.dumps({"Refresh_TOKEN": "r-1"})})


def agent(store: af.SqliteStore, vault: af.DisclosureVault, patterns: list[str]) -> af.Agent:
    tool = af.define_tool(name="lookup", description="find a customer", execute=lookup)
    provider = af.MockProvider(
        [
            af.reply(tool_calls=[af.tool_call("lookup", {"ssn": SECRET["ssn"], "q": "Ann"})]),
            "Ann is on file.",
            af.reply(tool_calls=[af.tool_call("lookup", {"user_email": SECRET["email"]})]),
            "Still on file.",
        ]
    )
    return af.Agent(
        provider=provider,
        model="m",
        tools=[tool],
        store=store,
        redact=af.RedactionPolicy(keys=["ssn"], patterns=patterns),
        disclosures=vault,
    )


def main() -> None:
    db, bundle = HERE / "v1.db", HERE / "v1.afp"
    for stale in (db, bundle, HERE / "v1.vault", HERE / "v1-disclosures.json"):
        stale.unlink(missing_ok=True)
    store = af.SqliteStore(db)
    vault = af.DisclosureVault(HERE / "v1.vault")
    first = agent(store, vault, ["(?i)(^|_)e-?mail($|_)", "(?i)token"])
    root = first.run_sync('{"email": "ann@example.com", "q": "look her up"}')
    child = first.run_sync("again, by email", continue_from=root)
    legacy = agent(store, vault, ["(?<!x)token"])  # lookbehind: Python re, not RE2
    other = legacy.run_sync("look up Ann")
    export_runs(store, [child.run_id, other.run_id], bundle)
    disclosures = vault.disclose(vault.commitments(root.run_id) + vault.commitments(child.run_id))
    (HERE / "v1-disclosures.json").write_bytes(disclosures_document(disclosures))
    store.close()
    vault.close()
    (HERE / "v1.vault").unlink()
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    print(root.run_id, child.run_id, other.run_id)


if __name__ == "__main__":
    main()
