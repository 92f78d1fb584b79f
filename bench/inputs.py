"""What the inputs layer adds to the record (issue 27), against upstream's worst case.

Upstream measured its inputs layer at +35.9% commit bytes in the worst case: 49 filled calls
in 50 iterations. The same shape here: one turn of 50 iterations (49 tool calls and the
answer: ``max_iterations`` is capped at 50), each call of a ruled tool
(``ask_or_assume={"window": {"assume": "24h"}}``), recorded three ways into a memory store:

* ``plain``: the tool without rules, the model giving ``window`` every time;
* ``armed``: the ruled tool, the model giving ``window`` every time (a ``model`` row a call);
* ``filled``: the ruled tool, the model leaving ``window`` out in 48 calls of 49 (a
  ``default`` row, a fill in state, a note on the result).

Printed: rows and body bytes of each, and the difference per ruled call and in all against
``plain``.

Usage::

    python bench/inputs.py
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import environment, print_environment

import agentfootprint as af

N = 49  # tool-call iterations: the final answer makes the 50th (the hard cap)
SCHEMA = {
    "type": "object",
    "properties": {"q": {"type": "string"}, "window": {"type": "string"}},
    "required": ["q", "window"],
}


def tool(ruled: bool) -> af.Tool:
    return af.define_tool(
        name="metrics",
        description="Read the error metrics of a service.",
        input_schema=SCHEMA,
        execute=lambda args: {"service": args["q"], "errors": 3, "window": args["window"]},
        ask_or_assume={"window": {"assume": "24h"}} if ruled else None,
    )


def replies(left_out: int) -> list[Any]:
    out: list[Any] = []
    for i in range(N):
        arguments = {"q": f"service-{i}"}
        if i >= left_out:
            arguments["window"] = "24h"
        out.append(af.reply(tool_calls=[af.tool_call("metrics", arguments, id=f"call_{i:03d}")]))
    out.append("All services checked.")
    return out


def recorded(ruled: bool, left_out: int) -> tuple[int, int]:
    agent = af.Agent(
        provider=af.MockProvider(replies(left_out)),
        model="m",
        tools=[tool(ruled)],
        max_iterations=N + 1,
    )
    result = agent.run_sync("Check every service.")
    assert result.outcome == "answered", result.outcome
    rows = list(agent.store.read(result.run_id))
    return len(rows), sum(len(bytes(r.body)) for r in rows)


def main() -> None:
    print_environment(environment())
    plain = recorded(False, 0)
    armed = recorded(True, 0)
    filled = recorded(True, N - 1)
    print(f"\none turn of {N} ruled calls")
    print("| recorded | rows | body bytes | bytes against plain | per ruled call |")
    print("|---|---:|---:|---:|---:|")
    for name, (rows, size) in (("plain", plain), ("armed", armed), ("filled", filled)):
        extra = size - plain[1]
        print(f"| {name} | {rows} | {size:,} | {extra / plain[1]:+.1%} | {extra / N:+,.0f} B |")
    print("upstream's worst case (49 filled calls in 50 iterations): +35.9% commit bytes")


if __name__ == "__main__":
    main()
