"""LangGraph peer for the side-by-side storage benchmark.

Replays a scripted agent conversation on ONE LangGraph thread persisted by
``langgraph-checkpoint-sqlite``'s ``SqliteSaver`` and measures wall time, node
executions, checkpoint rows and on-disk size.

The conversation has the same shape as the one our agent records:

* per turn: one user message (``HumanMessage``) at the start and one final
  answer (``AIMessage`` without tool calls) at the end;
* per tool-call iteration: one ``AIMessage`` carrying a tool call and one
  ``ToolMessage`` whose content is a ~``result_chars``-character result.

No model is called. The graph is the canonical ReAct loop
(``START -> agent -> tools -> agent -> ... -> END``) with deterministic,
scripted nodes, and state is ``MessagesState`` (``add_messages`` reducer).
Each turn is one ``graph.invoke`` on ``thread_id="bench"``.

``channel="delta"`` runs the same graph with LangGraph's beta ``DeltaChannel`` as the
messages channel instead (``DeltaMessagesState``): a checkpoint stores only that step's
writes, plus a full snapshot of the list every ``snapshot_frequency`` updates (its
default, 100). The reducer is ``_messages_delta_reducer``, the batch form of
``add_messages`` that ``DeltaChannel``'s own documentation names for a messages list
(``add_messages`` itself takes one update, not the list of a step's writes). Every
message here carries an id, so the two reducers give the same list (checked by
``bench/delta.py``).

Usage::

    python bench/langgraph_peer.py          # N = 50, 200
    python bench/langgraph_peer.py --full   # N = 50, 200, 800
    python bench/langgraph_peer.py --channel delta

or, from another script in ``bench/``::

    from langgraph_peer import run_langgraph_conversation
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import sqlite3
import string
import sys
import tempfile
import time
from typing import Annotated, Any, Literal

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.message import _messages_delta_reducer
from typing_extensions import TypedDict

THREAD_ID = "bench"
SEED = 20240611
TOOL_NAME = "search_docs"
_ALPHABET = string.ascii_letters + string.digits + "      .,;:-"
Channel = Literal["add_messages", "delta"]
CHANNELS: tuple[Channel, ...] = ("add_messages", "delta")


class DeltaMessagesState(TypedDict):
    """``MessagesState`` with the messages in a ``DeltaChannel`` (default snapshot frequency,
    100 updates), as ``DeltaChannel``'s documentation declares a messages list."""

    messages: Annotated[list[AnyMessage], DeltaChannel(_messages_delta_reducer)]


def delta_state(snapshot_frequency: int) -> type[Any]:
    """``DeltaMessagesState`` with another ``snapshot_frequency`` (for sensitivity runs)."""
    channel = DeltaChannel(_messages_delta_reducer, snapshot_frequency=snapshot_frequency)
    return TypedDict(  # type: ignore[operator]
        "DeltaMessagesState", {"messages": Annotated[list[AnyMessage], channel]}
    )


def _pattern(seed: int, n_chars: int) -> str:
    """Deterministic pseudo-text of exactly ``n_chars`` characters."""
    rng = random.Random(seed)
    return "".join(rng.choice(_ALPHABET) for _ in range(n_chars))


def _tool_result(iteration: int, result_chars: int) -> str:
    head = f"result #{iteration}: "
    body = _pattern(SEED + iteration, max(result_chars - len(head), 0))
    return (head + body)[:result_chars] if result_chars > 0 else ""


def _user_text(turn: int) -> str:
    return f"Turn {turn}: please look this up and summarise. " + _pattern(SEED - turn, 80)


def _final_text(turn: int) -> str:
    return f"Final answer for turn {turn}: " + _pattern(SEED * 2 + turn, 120)


def _remove_db(db_path: str) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        with contextlib.suppress(FileNotFoundError):
            os.remove(db_path + suffix)


def _db_bytes(db_path: str) -> int:
    return sum(
        os.path.getsize(db_path + suffix)
        for suffix in ("", "-wal", "-shm")
        if os.path.exists(db_path + suffix)
    )


def _build_graph(
    result_chars: int,
    counter: dict[str, int],
    channel: Channel = "add_messages",
    snapshot_frequency: int | None = None,
) -> StateGraph[Any]:
    """The ReAct loop with scripted nodes. ``counter`` tracks node executions; ``channel``
    picks the state schema (``MessagesState`` or ``DeltaMessagesState``, the latter with
    DeltaChannel's default snapshot frequency unless ``snapshot_frequency`` is given)."""
    schema: type[Any] = {"add_messages": MessagesState, "delta": DeltaMessagesState}[channel]
    if channel == "delta" and snapshot_frequency is not None:
        schema = delta_state(snapshot_frequency)

    def agent(state: Any, config: RunnableConfig) -> dict[str, Any]:
        counter["steps"] += 1
        conf = config["configurable"]
        turn: int = conf["bench_turn"]
        first_iteration: int = conf["bench_first_iteration"]
        planned: int = conf["bench_tool_iterations"]
        # Tool results already produced in this turn (since the last user message).
        done = 0
        for msg in reversed(state["messages"]):
            if isinstance(msg, HumanMessage):
                break
            if isinstance(msg, ToolMessage):
                done += 1
        if done < planned:
            i = first_iteration + done
            call = {
                "name": TOOL_NAME,
                "args": {"query": f"query {i}", "top_k": 5},
                "id": f"call_{i:06d}",
                "type": "tool_call",
            }
            return {"messages": [AIMessage(content="", tool_calls=[call], id=f"ai-{i:06d}")]}
        return {"messages": [AIMessage(content=_final_text(turn), id=f"final-{turn:06d}")]}

    def tools(state: Any) -> dict[str, Any]:
        counter["steps"] += 1
        last = state["messages"][-1]
        assert isinstance(last, AIMessage) and last.tool_calls
        out = []
        for call in last.tool_calls:
            i = int(str(call["id"]).removeprefix("call_"))
            out.append(
                ToolMessage(
                    content=_tool_result(i, result_chars),
                    tool_call_id=call["id"],
                    name=call["name"],
                    id=f"tool-{i:06d}",
                )
            )
        return {"messages": out}

    def route(state: Any) -> str:
        last = state["messages"][-1]
        return "tools" if isinstance(last, AIMessage) and last.tool_calls else END

    builder = StateGraph(schema)
    # the nodes take ``state: Any`` so LangGraph infers no second schema from annotations
    builder.add_node("agent", agent)
    builder.add_node("tools", tools)
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route, ["tools", END])
    builder.add_edge("tools", "agent")
    return builder


def run_langgraph_conversation(
    n_iterations: int,
    db_path: str,
    *,
    iterations_per_turn: int = 4,
    result_chars: int = 500,
    channel: Channel = "add_messages",
    keep_messages: bool = False,
    snapshot_frequency: int | None = None,
) -> dict[str, Any]:
    """Run ``n_iterations`` scripted tool-call iterations on one checkpointed thread.

    Returns ``{"n", "channel", "seconds", "steps", "db_bytes", "checkpoints", "writes"}``:
    ``seconds`` is the summed wall time of the ``invoke`` calls, ``steps`` the number of
    node executions, ``db_bytes`` the size of the database (plus any -wal/-shm) after a
    ``wal_checkpoint(TRUNCATE)`` and close, ``checkpoints`` / ``writes`` the rows in
    ``checkpoints`` / ``writes``. With ``keep_messages``, also ``"messages"``: the thread's
    final messages read back through ``graph.get_state`` after the last turn (untimed; for
    ``"delta"`` that rebuilds the list from the stored snapshot and writes).
    ``snapshot_frequency`` overrides DeltaChannel's default (100; ``"delta"`` only).
    """
    if n_iterations < 0:
        raise ValueError("n_iterations must be >= 0")
    if iterations_per_turn <= 0:
        raise ValueError("iterations_per_turn must be > 0")
    if channel not in CHANNELS:
        raise ValueError(f"channel must be one of {CHANNELS}")

    _remove_db(db_path)
    counter = {"steps": 0}
    seconds = 0.0

    conn = sqlite3.connect(db_path, check_same_thread=False)
    try:
        saver = SqliteSaver(conn)
        graph = _build_graph(result_chars, counter, channel, snapshot_frequency).compile(
            checkpointer=saver
        )

        turn = 0
        first = 0
        while first < n_iterations:
            k = min(iterations_per_turn, n_iterations - first)
            config: RunnableConfig = {
                "configurable": {
                    "thread_id": THREAD_ID,
                    "bench_turn": turn,
                    "bench_first_iteration": first,
                    "bench_tool_iterations": k,
                },
                # Each turn is 2k+1 node executions; keep the default limit out of the way.
                "recursion_limit": 2 * k + 10,
            }
            user = HumanMessage(content=_user_text(turn), id=f"user-{turn:06d}")
            t0 = time.perf_counter()
            graph.invoke({"messages": [user]}, config=config)
            seconds += time.perf_counter() - t0
            turn += 1
            first += k

        messages = None
        if keep_messages:
            final: RunnableConfig = {"configurable": {"thread_id": THREAD_ID}}
            messages = list(graph.get_state(final).values.get("messages", []))
        (checkpoints,) = conn.execute("SELECT COUNT(*) FROM checkpoints").fetchone()
        (writes,) = conn.execute("SELECT COUNT(*) FROM writes").fetchone()
        conn.commit()
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()

    out: dict[str, Any] = {
        "n": n_iterations,
        "channel": channel,
        "seconds": seconds,
        "steps": counter["steps"],
        "db_bytes": _db_bytes(db_path),
        "checkpoints": checkpoints,
        "writes": writes,
    }
    if keep_messages:
        out["messages"] = messages
    return out


def _versions() -> str:
    from importlib.metadata import PackageNotFoundError, version

    parts = []
    for pkg in ("langgraph", "langgraph-checkpoint", "langgraph-checkpoint-sqlite"):
        try:
            parts.append(f"{pkg}=={version(pkg)}")
        except PackageNotFoundError:
            parts.append(f"{pkg}==?")
    return ", ".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="also run N=800")
    parser.add_argument("--iterations-per-turn", type=int, default=4)
    parser.add_argument("--result-chars", type=int, default=500)
    parser.add_argument(
        "--channel", choices=CHANNELS, default="add_messages", help="the messages channel"
    )
    args = parser.parse_args(argv)

    sizes = [50, 200, 800] if args.full else [50, 200]
    print(
        f"# {_versions()}; iterations_per_turn={args.iterations_per_turn}, "
        f"result_chars={args.result_chars}, channel={args.channel}"
    )
    header = (
        f"{'N':>6} {'steps':>7} {'ckpts':>7} {'db bytes':>14} "
        f"{'bytes/iter':>12} {'ms/iter':>9} {'seconds':>9}"
    )
    print(header)
    print("-" * len(header))
    with tempfile.TemporaryDirectory(prefix="lg-peer-") as tmp:
        for n in sizes:
            r = run_langgraph_conversation(
                n,
                os.path.join(tmp, f"langgraph-{n}.sqlite"),
                iterations_per_turn=args.iterations_per_turn,
                result_chars=args.result_chars,
                channel=args.channel,
            )
            per_iter = r["db_bytes"] / n
            ms_iter = 1000 * r["seconds"] / n
            print(
                f"{n:>6} {r['steps']:>7} {r['checkpoints']:>7} {r['db_bytes']:>14,} "
                f"{per_iter:>12,.0f} {ms_iter:>9.2f} {r['seconds']:>9.2f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
