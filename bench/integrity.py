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

Figures: ms per tool-call iteration recorded into a new SQLite file (the store a run records
to, at ``--durability``: ``full`` by default, as the store's) and into a ``MemoryStore`` (no
store cost: the checks' share of the time at its largest), each the fastest of the rounds
(every other round runs the variants in reverse order, and the median of each round's ratio
to ``none`` is printed beside it); the bytes per iteration of the rows' bodies the log holds,
and those of the SQLite file (file and WAL sizes: whole pages). ``--instructions``
counts instead of timing (valgrind's cachegrind, ``I refs``, as ``instructions.py``): every
user-space instruction of one process recording N iterations, less the same process recording
none, divided by N; the count does not move with the machine's load, where the time of a
shared 2-vCPU machine moves by 10-20% from run to run (two runs of one variant against each
other read x0.95 to x1.02 by either time figure).

Usage::

    python bench/integrity.py                  # N = 800, 5 rounds
    python bench/integrity.py --durability normal   # the SQLite file at durability normal
    python bench/integrity.py --quick          # N = 200, 2 rounds
    python bench/integrity.py --split          # and each check alone
    python bench/integrity.py --instructions   # N = 200, instructions (needs valgrind)
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import logging
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
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
    AgentRun,
    Conversation,
    call_id,
    conversation_agent,
    db_bytes,
    environment,
    print_environment,
    remove_db,
    run_agent_conversation,
    user_text,
)

import agentfootprint as af

logging.disable(logging.WARNING)

COLUMNS = {"id": "string", "rank": "number", "title": "string"}
STORES = ("sqlite", "memory")  #: where each variant records, in every round
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


def variants_of(conv: Conversation, split: bool) -> dict[str, dict[str, Any]]:
    variants: dict[str, dict[str, Any]] = {
        "none": {},
        "every check armed": {"tools": [declaring(conv)], **ARMED},
        "+ answer_layer": {"tools": [declaring(conv)], **ARMED, "answer_layer": True},
    }
    if split:  # each dial alone, with the declaration it pairs with
        variants.update(alone(conv))
    return variants


def child(n: int, name: str) -> None:
    """One process recording ``n`` iterations of ``name`` (after the same 8-iteration
    warm-up for every ``n``, so the difference of two counts is the n iterations)."""
    global N_MAX
    common.final_text = answer
    for size in (8, n):
        if size:
            N_MAX = size
            conv = Rowsets(size)
            run_agent_conversation(conv, af.MemoryStore(), **variants_of(conv, True)[name])


def _count(n: int, name: str) -> int:
    command = [
        *("valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null"),
        *(sys.executable, str(Path(__file__).resolve()), "--child", str(n), name),
    ]
    env = dict(os.environ, PYTHONHASHSEED="0")
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    found = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"valgrind run failed ({name}, n={n}):\n{done.stderr[-2000:]}")
    return int(found[1].replace(",", ""))


def instructions(n: int, split: bool) -> None:
    """Instructions per iteration of each variant (two processes at a time)."""
    if shutil.which("valgrind") is None:
        raise SystemExit("--instructions needs valgrind (apt-get install valgrind)")
    names = list(variants_of(Rowsets(1), split))
    jobs = [(size, name) for name in names for size in (0, n)]
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        counts = dict(zip(jobs, pool.map(lambda job: _count(*job), jobs), strict=True))
    per = {name: (counts[n, name] - counts[0, name]) / n for name in names}
    print(f"\nN={n}: instructions per iteration (cachegrind I refs, less the same process at N=0)")
    for name in names:
        print(f"  {name:<22} {per[name] / 1e6:7.3f} M  x{per[name] / per['none']:5.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="N = 200, 2 rounds")
    parser.add_argument("--n", type=int, default=800)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--split", action="store_true", help="also each check alone")
    parser.add_argument(
        "--durability",
        choices=("full", "normal"),
        default="full",
        help="the SQLite file's durability (default: full, the store's own default)",
    )
    parser.add_argument(
        "--instructions", action="store_true", help="count instructions (N = 200 unless --n)"
    )
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(int(args.child[0]), args.child[1])
        return
    print_environment(environment())
    if args.instructions:
        instructions(200 if "--n" not in sys.argv else args.n, args.split)
        return
    n, rounds = (200, 2) if args.quick else (args.n, args.rounds)
    global N_MAX
    N_MAX = n
    common.final_text = answer  # the suite's check of each turn's answer: ours name a row
    conv = Rowsets(n)
    variants = variants_of(conv, args.split)
    times: dict[str, dict[str, list[float]]] = {
        store: {v: [] for v in variants} for store in STORES
    }
    logged: dict[str, int] = {}
    size: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as folder:
        for round_ in range(rounds):
            memory = {name: af.MemoryStore() for name in variants}
            ran = interleaved(conv, variants, memory, round_)
            for name, run in ran.items():
                times["memory"][name].append(run.seconds * 1000 / run.iterations)
                logged[name] = log_bytes(memory[name], run.run_ids) // run.iterations
            paths = {name: Path(folder) / f"{k}.db" for k, name in enumerate(variants)}
            files = {
                name: af.SqliteStore(path, durability=args.durability)
                for name, path in paths.items()
            }
            ran = interleaved(conv, variants, files, round_)
            for name, run in ran.items():
                files[name].close()
                times["sqlite"][name].append(run.seconds * 1000 / run.iterations)
                size[name] = db_bytes(paths[name]) // run.iterations
                remove_db(paths[name])
    print(
        f"\nN={n}: ms per iteration (fastest of {rounds} rounds, and the median of each round's "
        "ratio to none in the same round), recording into a new SQLite file (the store a run "
        f"records to; durability={args.durability!r}) and into memory (no store: the checks' "
        "CPU share at its largest); log bytes (the rows' bodies) and SQLite file bytes per "
        "iteration"
    )
    print(f"  {'':<22} {'SQLite file':>31}   {'memory':>31}")
    for name in variants:
        cells = []
        for store in STORES:
            ms, base = times[store][name], times[store]["none"]
            paired = statistics.median(t / b for t, b in zip(ms, base, strict=True))
            cells.append(f"{min(ms):6.3f} ms x{min(ms) / min(base):5.3f} (paired x{paired:5.3f})")
        print(
            f"  {name:<22} {'   '.join(cells)}"
            f"   {logged[name]:>6} B  x{logged[name] / logged['none']:5.3f}"
            f"   {size[name]:>7} B  x{size[name] / size['none']:5.2f}"
        )


def interleaved(
    conv: Conversation, variants: dict[str, dict[str, Any]], stores: dict[str, Any], round_: int
) -> dict[str, AgentRun]:
    """Every variant's conversation recorded in lockstep, turn by turn: turn t of each variant
    (in an order that turns around every turn and every round) before turn t + 1 of any, so a
    slow spell of a shared machine falls on the variants alike. Only the ``run_sync`` calls
    are timed, as :func:`common.run_agent_conversation` times them."""
    names = list(variants)
    agents = {
        name: conversation_agent(conv, conv.provider(), stores[name], **variants[name])
        for name in names
    }
    previous: dict[str, af.RunResult | None] = dict.fromkeys(names)
    seconds = dict.fromkeys(names, 0.0)
    run_ids: dict[str, list[str]] = {name: [] for name in names}
    iterations = dict.fromkeys(names, 0)
    for turn, planned in enumerate(conv.turns):
        for name in names if (turn + round_) % 2 == 0 else names[::-1]:
            message = user_text(turn)
            t0 = time.perf_counter()
            result = agents[name].run_sync(message, continue_from=previous[name])
            seconds[name] += time.perf_counter() - t0
            if result.outcome != "answered" or result.iterations != len(planned) + 1:
                raise RuntimeError(f"{name}, turn {turn}: {result.outcome!r}")
            if result.answer != answer(turn):
                raise RuntimeError(f"{name}, turn {turn}: unexpected answer")
            previous[name] = result
            run_ids[name].append(result.run_id)
            iterations[name] += result.iterations - 1
    return {
        name: AgentRun(
            seconds=seconds[name],
            turns=len(run_ids[name]),
            iterations=iterations[name],
            calls=0,
            run_ids=run_ids[name],
        )
        for name in names
    }


def log_bytes(store: Any, run_ids: list[str]) -> int:
    """The bytes of the rows' bodies the runs recorded (what a log holds, before any store's
    pages)."""
    return sum(len(row.body) for run_id in run_ids for row in store.read(run_id))


if __name__ == "__main__":
    main()
