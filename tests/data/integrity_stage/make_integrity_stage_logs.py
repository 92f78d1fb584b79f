"""Record logs whose integrity checks committed their declarations in an ``integrity-contracts``
stage (run with the code of commit 3731059, the last build that wrote that stage).

Usage, from the repository root, with that commit's ``src`` on the path::

    git worktree add /tmp/old3731 3731059
    PYTHONPATH=/tmp/old3731/src python tests/data/integrity_stage/make_integrity_stage_logs.py

It writes ``integrity_stage.db`` next to this script: a turn whose checks are armed by
their dials and a tool's ``arguments_from`` (an unserved argument, an empty lookup, a column
of the wrong type), its continuation by the same agent (the stage commits nothing new), a
continuation by an agent with no declarations (it inherits ``tool_contracts`` and checks
nothing), a ``dev`` turn, and a turn of the results layer alone. Today's build commits the
declarations in the turn's start stage and records the posture whenever a check is armed;
``findings --recompute`` reads both (``tests/scenario/test_integrity_stage_logs.py``). The
file is data: today's writer records no such stage, so it cannot be re-made with it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import agentfootprint as af

HERE = Path(__file__).resolve().parent
SCHEMA = {"type": "object", "properties": {"host": {"type": "string"}}}


def hosts(**declared: Any) -> af.Tool:
    return af.define_tool(
        name="list_hosts",
        description="List the hosts.",
        input_schema={"type": "object", "properties": {}},
        execute=lambda args: json.dumps([{"host": "esx-01"}, {"host": "esx-02"}]),
        **declared,
    )


def mappings(**declared: Any) -> af.Tool:
    rows = {"esx-01": [{"host": "esx-01", "lun": ""}], "esx-02": []}
    return af.define_tool(
        name="list_mappings",
        description="The LUN mappings of a host.",
        input_schema=SCHEMA,
        execute=lambda args: json.dumps(rows.get(args.get("host"), [])),
        **declared,
    )


def export(**declared: Any) -> af.Tool:
    return af.define_tool(
        name="nightly_export",
        description="The nightly export.",
        input_schema={"type": "object", "properties": {"window": {"type": "string"}}},
        execute=lambda args: json.dumps([{"rows": 3}]),
        **declared,
    )


def call(tool: str, arguments: dict[str, Any]) -> af.LLMResponse:
    return af.reply(tool_calls=[af.tool_call(tool, arguments)])


DECLARED = {"arguments_from": ["list_hosts"], "result_columns": {"host": "string", "lun": "number"}}
ARMED = {
    "check_column_types": "warn",
    "notice_empty_lookups": True,
    "notice_prior_turn_evidence": True,
}
TURN = [
    call("list_hosts", {}),
    call("list_mappings", {"host": "esx-01"}),
    call("list_mappings", {"host": "esx-02"}),
    call("list_mappings", {"host": "esx-99"}),
    "esx-01 maps LUN 0; esx-02 has none.",
]


def _agent(store: Any, script: list[Any], tools: list[af.Tool], **options: Any) -> af.Agent:
    return af.Agent(
        provider=af.MockProvider(list(script)),
        model="m",
        tools=tools,
        store=store,
        **options,
    )


#: name -> (agent factory, message, parent name or None)
RUNS: dict[str, tuple[Callable[[Any], af.Agent], str, str | None]] = {
    "observe": (
        lambda store: _agent(store, TURN, [hosts(), mappings(**DECLARED)], **ARMED),
        "Which LUNs do the hosts map?",
        None,
    ),
    "continued-same": (
        lambda store: _agent(
            store,
            [call("list_mappings", {"host": "esx-02"}), "Still none on esx-02."],
            [hosts(), mappings(**DECLARED)],
            **ARMED,
        ),
        "And esx-02 again?",
        "observe",
    ),
    "continued-bare": (
        lambda store: _agent(
            store,
            [call("list_mappings", {"host": "esx-77"}), "Nothing for esx-77."],
            [hosts(), mappings()],
        ),
        "And esx-77?",
        "continued-same",
    ),
    "dev": (
        lambda store: _agent(
            store, TURN, [hosts(), mappings(**DECLARED)], integrity_posture="dev", **ARMED
        ),
        "Which LUNs do the hosts map?",
        None,
    ),
    "period": (
        lambda store: _agent(
            store,
            [call("nightly_export", {"window": "2024-05-01"}), "3 rows."],
            [export(period="window")],
        ),
        "What did the nightly export hold?",
        None,
    ),
}


def main() -> None:
    path = HERE / "integrity_stage.db"
    if path.exists():
        path.unlink()
    store = af.SqliteStore(path)
    done: dict[str, af.RunResult] = {}
    for name, (agent, message, parent) in RUNS.items():
        done[name] = agent(store).run_sync(message, continue_from=done[parent] if parent else None)
    store.close()
    names = {r.run_id: n for n, r in done.items()}
    (HERE / "runs.txt").write_text("".join(f"{rid} {n}\n" for rid, n in names.items()))


if __name__ == "__main__":
    main()
