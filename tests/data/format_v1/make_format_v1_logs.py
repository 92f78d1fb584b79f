"""Record logs of log format 1 (run with the code of commit fdc8431, the last format-1 writer).

Usage, from the repository root, with that commit's ``src`` on the path::

    git worktree add /tmp/v1 fdc8431
    PYTHONPATH=/tmp/v1/src python tests/data/format_v1/make_format_v1_logs.py

It writes ``format_v1.db`` next to this script: runs whose shapes format 2 changed or must
keep reading (receipts off, where format 1 finds model calls by the ``call-llm`` stage name;
classic mode; a turn stopped at the iteration cap; a recorded ``args_invalid`` finding; a
continued conversation; a failed run). ``AGENTS`` gives, per run, the agent configuration
that recorded it, so today's code can replay it (``tests/scenario/test_format_v1_logs.py``).
The file is data: today's writer records format 2, so it cannot be re-made with it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import agentfootprint as af

HERE = Path(__file__).resolve().parent
SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}


def lookup() -> af.Tool:
    return af.define_tool(
        name="lookup",
        description="Look a word up.",
        input_schema=SCHEMA,
        execute=lambda args: f"found {args.get('q')!r}",
    )


def ask(q: Any) -> af.LLMResponse:
    return af.reply(tool_calls=[af.tool_call("lookup", {"q": q})])


def _agent(store: Any, script: list[Any], **options: Any) -> af.Agent:
    return af.Agent(
        provider=af.MockProvider(script),
        model="m",
        system="Answer briefly.",
        tools=[lookup()],
        store=store,
        **options,
    )


#: name -> (options, script, message, parent name or None)
RUNS: dict[str, tuple[dict[str, Any], list[Any], str, str | None]] = {
    "receipts-off": ({"record_receipt": False}, [ask("a"), ask("b"), "done"], "find a, b", None),
    "classic": ({"react_mode": "classic"}, [ask("c"), "ok"], "and c?", "receipts-off"),
    "stopped-early": ({"max_iterations": 1}, [ask("d")], "find d", None),
    "args-warned": ({"tool_arg_validation": "warn"}, [ask(7), "fine"], "find 7", None),
    "receipts-off-classic": (
        {"record_receipt": False, "react_mode": "classic", "commit_values": "full"},
        [ask("e"), ask("e"), "twice"],
        "find e twice",
        None,
    ),
}

#: per run name, a factory of an agent recording into ``store`` as the original did
AGENTS: dict[str, Callable[[Any], af.Agent]] = {
    name: (lambda store, options=options, script=script: _agent(store, list(script), **options))
    for name, (options, script, _, _) in RUNS.items()
}


class Down(Exception):
    pass


def main() -> None:
    path = HERE / "format_v1.db"
    if path.exists():
        path.unlink()
    store = af.SqliteStore(path)
    done: dict[str, af.RunResult] = {}
    for name, (_, _, message, parent) in RUNS.items():
        agent = AGENTS[name](store)
        done[name] = agent.run_sync(message, continue_from=done[parent] if parent else None)
    calls = iter([ask("f")])

    def respond(request: Any) -> Any:
        for reply in calls:
            return reply
        raise Down("503")

    failing = af.Agent(
        provider=af.MockProvider(respond=respond),
        model="m",
        tools=[lookup()],
        store=store,
    )
    with contextlib.suppress(af.RunError):  # recorded as a failed run
        failing.run_sync("find f")
    store.close()
    names = {r.run_id: n for n, r in done.items()}
    (HERE / "runs.txt").write_text("".join(f"{rid} {n}\n" for rid, n in names.items()))


if __name__ == "__main__":
    main()
