"""Shared pieces of the agentfootprint benchmarks (``overhead.py``, ``verify.py``).

The scripted conversation is the one ``langgraph_peer.py`` replays, byte for byte:

* one *turn* per ``agent.run_sync(user_msg, continue_from=previous_result)``;
* ``ITERATIONS_PER_TURN`` tool-call iterations per turn (the last turn may be
  shorter), each one model reply with one ``search_docs`` call and one tool
  result of ``RESULT_CHARS`` characters, then one final text answer;
* ``N`` counts tool-call iterations over the whole conversation.

The text generators are copies of the ones in ``langgraph_peer.py`` (so this
module does not import LangGraph); ``overhead.py`` checks that they agree.
Nothing here calls a model: replies come from ``af.MockProvider``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import io
import json
import os
import platform
import pstats
import random
import sqlite3
import statistics
import string
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import agentfootprint as af

SEED = 20240611
TOOL_NAME = "search_docs"
ITERATIONS_PER_TURN = 4
RESULT_CHARS = 500
SIZES = (50, 200, 800)
QUICK_SIZES = (50, 200)
MODEL = "m"
SYSTEM = "You are a research assistant. Use search_docs to look things up, then answer."
_ALPHABET = string.ascii_letters + string.digits + "      .,;:-"

TOOL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string"},
        "top_k": {"type": "integer", "minimum": 1},
    },
    "required": ["query"],
    "additionalProperties": False,
}
TOOL_DESCRIPTION = "Search the documentation and return the best matching passage."


# -- the scripted conversation (same text as langgraph_peer.py) -------------------------
def pattern(seed: int, n_chars: int) -> str:
    """Deterministic pseudo-text of exactly ``n_chars`` characters."""
    rng = random.Random(seed)
    return "".join(rng.choice(_ALPHABET) for _ in range(n_chars))


def tool_result(iteration: int, result_chars: int = RESULT_CHARS) -> str:
    head = f"result #{iteration}: "
    body = pattern(SEED + iteration, max(result_chars - len(head), 0))
    return (head + body)[:result_chars] if result_chars > 0 else ""


def user_text(turn: int) -> str:
    return f"Turn {turn}: please look this up and summarise. " + pattern(SEED - turn, 80)


def final_text(turn: int) -> str:
    return f"Final answer for turn {turn}: " + pattern(SEED * 2 + turn, 120)


def tool_args(iteration: int) -> dict[str, Any]:
    return {"query": f"query {iteration}", "top_k": 5}


def call_id(iteration: int) -> str:
    return f"call_{iteration:06d}"


@dataclass(frozen=True)
class Conversation:
    """The script of an ``n``-iteration conversation, with its tool results precomputed.

    Tool results are generated once, before any timing, so the timed tool
    function is a dictionary lookup in every variant (agent, plain loop).
    """

    n: int
    per_turn: int = ITERATIONS_PER_TURN
    result_chars: int = RESULT_CHARS
    results: dict[int, str] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if not self.results:
            self.results.update({i: tool_result(i, self.result_chars) for i in range(self.n)})

    @property
    def turns(self) -> list[list[int]]:
        """The tool-call iteration indices of each turn."""
        return [
            list(range(first, min(first + self.per_turn, self.n)))
            for first in range(0, self.n, self.per_turn)
        ]

    def replies(self) -> list[af.LLMResponse | str]:
        """Every model reply of the conversation, in call order."""
        out: list[af.LLMResponse | str] = []
        for turn, iterations in enumerate(self.turns):
            for i in iterations:
                call = af.tool_call(TOOL_NAME, tool_args(i), id=call_id(i))
                out.append(af.reply("", tool_calls=[call]))
            out.append(final_text(turn))
        return out

    def provider(self) -> af.MockProvider:
        return af.MockProvider(replies=self.replies(), record=False)

    def tool_fn(self) -> Callable[[dict[str, Any]], str]:
        results = self.results

        def search_docs(args: dict[str, Any]) -> str:
            return results[int(args["query"].rsplit(" ", 1)[1])]

        return search_docs

    def tool(self) -> af.Tool:
        return af.define_tool(
            name=TOOL_NAME,
            description=TOOL_DESCRIPTION,
            input_schema=TOOL_SCHEMA,
            execute=self.tool_fn(),
        )


# -- the agentfootprint run -----------------------------------------------------------------
@dataclass
class AgentRun:
    seconds: float  # summed wall time of the run_sync calls
    turns: int
    iterations: int  # tool-call iterations (the final-answer call of each turn not counted)
    calls: int  # model calls
    run_ids: list[str]


def conversation_agent(conv: Conversation, provider: Any, store: Any, **options: Any) -> af.Agent:
    """The benchmark's agent (model, system prompt, the conversation's tool); ``options``
    (``system``, ``redact``, ``record_receipt``...) override or add to its own."""
    return af.Agent(
        provider=provider,
        model=MODEL,
        **{"system": SYSTEM, "tools": [conv.tool()], "store": store, **options},
    )


def run_agent_conversation(conv: Conversation, store: Any, **options: Any) -> AgentRun:
    """Run the conversation turn by turn, each turn continuing the previous result.

    ``store`` is anything ``af.Agent(store=...)`` takes. Only the ``run_sync``
    calls are timed (not building the script, the tool or the agent).
    """
    agent = conversation_agent(conv, conv.provider(), store, **options)
    seconds = 0.0
    previous: af.RunResult | None = None
    run_ids: list[str] = []
    iterations = calls = 0
    for turn, planned in enumerate(conv.turns):
        message = user_text(turn)
        t0 = time.perf_counter()
        previous = agent.run_sync(message, continue_from=previous)
        seconds += time.perf_counter() - t0
        if previous.outcome != "answered" or previous.iterations != len(planned) + 1:
            raise RuntimeError(
                f"turn {turn}: outcome {previous.outcome!r} after {previous.iterations} "
                f"iterations; expected 'answered' after {len(planned) + 1}"
            )
        if previous.answer != final_text(turn):
            raise RuntimeError(f"turn {turn}: unexpected answer")
        run_ids.append(previous.run_id)
        iterations += previous.iterations - 1
        calls += previous.calls
    return AgentRun(
        seconds=seconds,
        turns=len(run_ids),
        iterations=iterations,
        calls=calls,
        run_ids=run_ids,
    )


# -- the plain loop (no agentfootprint in the loop) -----------------------------------------
async def _plain_turn(
    provider: af.MockProvider,
    tool_fn: Callable[[dict[str, Any]], str],
    system: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    messages: list[dict[str, Any]],
    user: str,
) -> str:
    """A minimal ReAct turn over a message list: same provider, same tool function."""
    messages.append({"role": "user", "content": user})
    while True:
        request = {
            "model": MODEL,
            "params": {},
            "system": system,
            "messages": messages,
            "tools": tools,
        }
        response = await provider.complete(request)
        if not response.tool_calls:
            messages.append({"role": "assistant", "content": response.content})
            return response.content
        results = [
            {
                "role": "tool",
                "tool_call_id": c.id,
                "name": c.name,
                "content": tool_fn(c.arguments),
            }
            for c in response.tool_calls
        ]
        messages.append(
            {
                "role": "assistant",
                "content": response.content,
                "tool_calls": [
                    {"id": c.id, "name": c.name, "arguments": c.arguments}
                    for c in response.tool_calls
                ],
            }
        )
        messages.extend(results)


def run_plain_conversation(conv: Conversation) -> float:
    """The same conversation without agentfootprint: summed wall time of the turns.

    Each turn is one ``asyncio.run`` (as ``run_sync`` does); the tool function is
    called directly (the agent runs sync tools through ``asyncio.to_thread``).
    """
    provider = conv.provider()
    tool_fn = conv.tool_fn()
    system = [{"source": "base", "text": SYSTEM}]
    tools = [{"name": TOOL_NAME, "description": TOOL_DESCRIPTION, "input_schema": TOOL_SCHEMA}]
    messages: list[dict[str, Any]] = []
    seconds = 0.0
    for turn in range(len(conv.turns)):
        t0 = time.perf_counter()
        answer = asyncio.run(
            _plain_turn(provider, tool_fn, system, tools, messages, user_text(turn))
        )
        seconds += time.perf_counter() - t0
        if answer != final_text(turn):
            raise RuntimeError(f"plain loop, turn {turn}: unexpected answer")
    return seconds


# -- SQLite files -----------------------------------------------------------------------------
def remove_db(path: str | os.PathLike[str]) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        with contextlib.suppress(FileNotFoundError):
            os.remove(f"{os.fspath(path)}{suffix}")


def db_bytes(path: str | os.PathLike[str]) -> int:
    """Size of the database file plus its -wal and -shm files, if present."""
    base = os.fspath(path)
    return sum(
        os.path.getsize(base + suffix)
        for suffix in ("", "-wal", "-shm")
        if os.path.exists(base + suffix)
    )


def checkpoint_and_measure(path: str | os.PathLike[str]) -> int:
    """``PRAGMA wal_checkpoint(TRUNCATE)`` on a separate connection, then :func:`db_bytes`.

    Call it after every other connection to the file is closed.
    """
    conn = sqlite3.connect(os.fspath(path))
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    finally:
        conn.close()
    return db_bytes(path)


def db_breakdown(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Where the bytes of an agentfootprint database go (rows, bodies, pages per b-tree), in
    either storage schema (docs/log-format.md section 4). In schema 2 a compact empty commit
    marker stores no body (0 body bytes), the run id is stored once per run (``run_keys``)
    and the hash bytes are the chain heads kept, one per batch."""
    conn = sqlite3.connect(os.fspath(path))
    try:
        v2 = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'rows'"
        ).fetchone()
        if v2:
            names = ("run.open", "write", "receipt", "event", "commit", "run.close")
            by_type = {
                names[row[0] - 1]: {"rows": row[1], "body_bytes": row[2] or 0}
                for row in conn.execute(
                    "SELECT type, COUNT(*), SUM(LENGTH(body)) FROM rows GROUP BY type ORDER BY type"
                )
            }
            by_type = dict(sorted(by_type.items()))
            (empty_commits,) = conn.execute(
                "SELECT COUNT(*) FROM rows WHERE type = 5 AND (body IS NULL "
                "OR json_extract(body, '$.writes') = 0)"
            ).fetchone()
            (id_bytes,) = conn.execute("SELECT SUM(LENGTH(run_id)) FROM run_keys").fetchone()
            (hash_bytes,) = conn.execute("SELECT SUM(LENGTH(head)) FROM rows").fetchone()
        else:
            by_type = {
                row[0]: {"rows": row[1], "body_bytes": row[2]}
                for row in conn.execute(
                    "SELECT type, COUNT(*), SUM(LENGTH(body)) FROM events GROUP BY type "
                    "ORDER BY type"
                )
            }
            (empty_commits,) = conn.execute(
                "SELECT COUNT(*) FROM events WHERE type = 'commit' "
                "AND json_extract(body, '$.writes') = 0"
            ).fetchone()
            (id_bytes,) = conn.execute("SELECT SUM(LENGTH(run_id)) FROM events").fetchone()
            (hash_bytes,) = conn.execute(
                "SELECT SUM(LENGTH(event_hash) + LENGTH(chain_hash)) FROM events"
            ).fetchone()
        pages: dict[str, int] = {}
        with contextlib.suppress(sqlite3.Error):  # dbstat is a compile-time option
            pages = {
                name: int(size)
                for name, size in conn.execute(
                    "SELECT name, SUM(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC"
                )
            }
    finally:
        conn.close()
    return {
        "by_type": by_type,
        "empty_commits": empty_commits,
        "run_id_bytes_in_events": id_bytes,
        "hash_bytes": hash_bytes,
        "btree_bytes": pages,
    }


def conversation_order(store: af.SqliteStore | af.MemoryStore) -> list[str]:
    """Run ids from the root of the (single) conversation down the parent chain."""
    infos = store.runs()
    children: dict[str | None, list[str]] = {}
    for info in infos:
        children.setdefault(info.parent_run_id, []).append(info.run_id)
    order: list[str] = []
    frontier = list(children.get(None, []))
    while frontier:
        run_id = frontier.pop(0)
        order.append(run_id)
        frontier.extend(children.get(run_id, []))
    if len(order) != len(infos):
        raise RuntimeError(f"{len(infos) - len(order)} runs are not reachable from a root run")
    return order


# -- reporting -----------------------------------------------------------------------------
def median(values: Iterable[float]) -> float:
    return float(statistics.median(list(values)))


def repeats_for(n: int, override: int | None) -> int:
    """Timing repetitions: ``--repeat`` if given, else 3 for N <= 200 and 1 above."""
    if override is not None:
        return max(1, override)
    return 3 if n <= 200 else 1


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version(), "sqlite": sqlite3.sqlite_version}
    for pkg in (
        "agentfootprint",
        "orjson",
        "rfc8785",
        "sqlite-utils",
        "langgraph",
        "langgraph-checkpoint",
        "langgraph-checkpoint-sqlite",
    ):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "not installed"
    return out


def environment() -> dict[str, Any]:
    return {
        "date": time.strftime("%Y-%m-%d"),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "executable": sys.executable,
        "versions": versions(),
    }


def print_environment(env: dict[str, Any]) -> None:
    v = env["versions"]
    print(f"# {env['date']}  {env['platform']}  cpus={env['cpus']}")
    print("# " + ", ".join(f"{k} {val}" for k, val in v.items()))


def verdict(ok: bool | None) -> str:
    return "n/a" if ok is None else ("MET" if ok else "NOT MET")


# -- what every script's command line and output share ----------------------------------
def bench_arguments(
    doc: str | None, *, repeat_default: int | None, repeat_help: str, profile_help: str
) -> argparse.ArgumentParser:
    """``--quick``, ``--repeat``, ``--json``, ``--profile N`` and ``--top``; scripts add more."""
    parser = argparse.ArgumentParser(description=(doc or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="N = 50, 200 only")
    parser.add_argument("--repeat", type=int, default=repeat_default, help=repeat_help)
    parser.add_argument("--json", type=Path, help="write the figures to this JSON file")
    parser.add_argument("--profile", type=int, metavar="N", help=profile_help)
    parser.add_argument("--top", type=int, default=25, help="functions shown by --profile")
    return parser


def announce(sizes: Iterable[int], what: str = "") -> None:
    """The line naming the conversation shape and the sizes measured."""
    print(
        f"# {ITERATIONS_PER_TURN} tool-call iterations per turn, {RESULT_CHARS}-char results, "
        f"N = {', '.join(map(str, sizes))}{what}"
    )


def profiled(fn: Callable[[], Any]) -> tuple[cProfile.Profile, Any, float]:
    """(profiler, value, seconds) of one call of ``fn`` under cProfile."""
    profiler = cProfile.Profile()
    t0 = time.perf_counter()
    profiler.enable()
    try:
        value = fn()
    finally:
        profiler.disable()
    return profiler, value, time.perf_counter() - t0


def profile_report(
    profiler: cProfile.Profile, title: str, top: int, *, cumulative: bool = True
) -> str:
    """``title``, then the top functions by cumulative time (optional) and by own time."""
    out = io.StringIO()
    out.write(title.rstrip("\n") + "\n")
    stats = pstats.Stats(profiler, stream=out).strip_dirs()
    if cumulative:
        stats.sort_stats("cumulative").print_stats(top)
    stats.sort_stats("tottime").print_stats(top)
    return out.getvalue()


def write_figures(path: Path | None, figures: dict[str, Any]) -> None:
    """Write ``figures`` (environment included by the caller) as JSON, when asked to."""
    if path is not None:
        path.write_text(json.dumps(figures, indent=2) + "\n")
        print(f"\nfigures written to {path}")


@contextlib.contextmanager
def methods_timed(owner: Any, names: Sequence[str]) -> Iterator[list[float]]:
    """Within the block, ``owner``'s methods ``names`` are timed call by call (an upper bound:
    the timer's own cost is in it); the one-item list holds the seconds spent in them."""
    spent = [0.0]
    originals = {name: getattr(owner, name) for name in names}

    def timed(fn: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[0] += time.perf_counter() - t0

        return call

    try:
        for name, fn in originals.items():
            setattr(owner, name, timed(fn))
        yield spent
    finally:
        for name, fn in originals.items():
            setattr(owner, name, fn)
