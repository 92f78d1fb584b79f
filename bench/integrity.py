"""What the integrity checks cost: record time and log bytes per iteration, every check armed
against none.

On this suite's conversation shape (``common.Conversation``: 4 tool-call iterations per turn,
each turn continuing the previous one), with rowset results: each tool result is a JSON array
of 5 rows ``{"id", "rank", "title"}`` (about 500 characters), each final answer names a row of
its turn. Each call asks for the first row of the
previous result (a value the model was served: the unsupported-argument check finds it in the
newest result and stops there). Two variants alternate in every round:

* ``none``: no integrity option, no declaration (the rows of a run before the checks existed);
* ``every check armed``: the tool declares ``arguments_from`` (itself), ``result_columns``
  (the three columns) and ``period``; ``check_column_types="warn"``,
  ``notice_empty_lookups=True``, ``notice_prior_turn_evidence=True``, ``external_grounds``
  (an app provider yielding one entry), ``results_layer=True`` and
  ``integrity_posture="dev"``. Every result is read by the column checks, the empty-lookup
  check and the results layer, every reply's call by the unsupported-argument check (its
  frame: the whole request served), every answer by the prior-turn check (an index of every
  result of the conversation).

Figures: ms per tool-call iteration recorded into a ``MemoryStore`` (the fastest of the
rounds), and bytes per iteration of an SQLite log.

Usage::

    python bench/integrity.py            # N = 800, 3 rounds
    python bench/integrity.py --quick    # N = 200, 2 rounds
    python bench/integrity.py --split    # and each check alone
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common
from common import (
    ITERATIONS_PER_TURN,
    TOOL_DESCRIPTION,
    TOOL_NAME,
    TOOL_SCHEMA,
    Conversation,
    call_id,
    db_bytes,
    environment,
    print_environment,
    remove_db,
    run_agent_conversation,
)

import agentfootprint as af

logging.disable(logging.WARNING)

COLUMNS = {"id": "string", "rank": "number", "title": "string"}
N_MAX = 10**9  #: set to N by main (the last turn may be short)


def rows(iteration: int) -> str:
    """A rowset of 5 rows, about 500 characters."""
    return json.dumps(
        [
            {
                "id": f"doc-{iteration:06d}-{k}",
                "rank": k + 1,
                "title": f"Report {iteration} section {k}: " + "lorem ipsum dolor " * 2,
            }
            for k in range(5)
        ]
    )


def arguments(iteration: int) -> dict[str, Any]:
    """Each call asks for the row after the first row of the previous result: a value the
    model was served (the first call asks for one it was not)."""
    return {"query": f"doc-{iteration - 1:06d}-0", "top_k": 5}


def answer(turn: int) -> str:
    """A final answer naming a row of its own turn (the prior-turn check passes it)."""
    last = min((turn + 1) * ITERATIONS_PER_TURN, N_MAX) - 1
    return f"Turn {turn}: the best match is doc-{last:06d}-0."


@dataclass(frozen=True)
class Rowsets(Conversation):
    """The conversation with rowset results and answers naming a row of their turn."""

    def __post_init__(self) -> None:
        self.results.update({i: rows(i) for i in range(self.n)})

    def replies(self) -> list[af.LLMResponse | str]:
        out: list[af.LLMResponse | str] = []
        for turn, iterations in enumerate(self.turns):
            for i in iterations:
                call = af.tool_call(TOOL_NAME, arguments(i), id=call_id(i))
                out.append(af.reply("", tool_calls=[call]))
            out.append(answer(turn))
        return out

    def tool_fn(self) -> Callable[[dict[str, Any]], str]:
        results = self.results

        def search_docs(args: dict[str, Any]) -> str:
            return results[int(args["query"].split("-")[1]) + 1]

        return search_docs


def declaring(conv: Conversation) -> af.Tool:
    return af.define_tool(
        name=TOOL_NAME,
        description=TOOL_DESCRIPTION,
        input_schema=TOOL_SCHEMA,
        execute=conv.tool_fn(),
        arguments_from=[TOOL_NAME],
        result_columns=COLUMNS,
        period="query",
    )


def grounds() -> list[dict[str, str]]:
    return [{"value": "query", "source": "viewer-selection"}]


def alone(conv: Conversation) -> dict[str, dict[str, Any]]:
    """Each check (or layer) armed alone, with the declaration it needs."""

    def tool(**declared: Any) -> list[af.Tool]:
        return [
            af.define_tool(
                name=TOOL_NAME,
                description=TOOL_DESCRIPTION,
                input_schema=TOOL_SCHEMA,
                execute=conv.tool_fn(),
                **declared,
            )
        ]

    sourced = tool(arguments_from=[TOOL_NAME])
    return {
        "  column types": {"tools": tool(result_columns=COLUMNS), "check_column_types": "warn"},
        "  unsupported arg": {"tools": sourced},
        "  + external grounds": {"tools": sourced, "external_grounds": grounds},
        "  + empty lookups": {"tools": sourced, "notice_empty_lookups": True},
        "  prior turn": {"notice_prior_turn_evidence": True},
        "  results layer": {"tools": tool(period="query"), "results_layer": True},
        "  answer layer": {"answer_layer": True},
        "  dev posture": {"integrity_posture": "dev"},
    }


ARMED: dict[str, Any] = {
    "check_column_types": "warn",
    "notice_empty_lookups": True,
    "notice_prior_turn_evidence": True,
    "external_grounds": grounds,
    "results_layer": True,
    "integrity_posture": "dev",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="N = 200, 2 rounds")
    parser.add_argument("--n", type=int, default=800)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--split", action="store_true", help="also each check alone")
    args = parser.parse_args()
    n, rounds = (200, 2) if args.quick else (args.n, args.rounds)
    print_environment(environment())
    global N_MAX
    N_MAX = n
    common.final_text = answer  # the suite's check of each turn's answer: ours name a row
    conv = Rowsets(n)
    variants: dict[str, dict[str, Any]] = {
        "none": {},
        "every check armed": {"tools": [declaring(conv)], **ARMED},
        "+ answer_layer": {"tools": [declaring(conv)], **ARMED, "answer_layer": True},
    }
    if args.split:  # each dial alone, with the declaration it pairs with
        variants.update(alone(conv))
    best: dict[str, float] = {}
    size: dict[str, int] = {}
    for _ in range(rounds):
        for name, options in variants.items():
            ran = run_agent_conversation(conv, af.MemoryStore(), **options)
            ms = ran.seconds * 1000 / ran.iterations
            best[name] = min(best.get(name, ms), ms)
    for name, options in variants.items():
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "integrity.db"
            ran = run_agent_conversation(conv, str(path), **options)
            size[name] = db_bytes(path) // ran.iterations
            remove_db(path)
    base, base_size = best["none"], size["none"]
    print(f"\nN={n}: ms per iteration into memory (fastest of {rounds}); SQLite bytes/iteration")
    for name, ms in best.items():
        print(
            f"  {name:<22} {ms:7.3f} ms  x{ms / base:5.3f}   {size[name]:>7} bytes  "
            f"x{size[name] / base_size:5.2f}"
        )


if __name__ == "__main__":
    main()
