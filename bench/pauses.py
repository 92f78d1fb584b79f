"""What pauses and the leak guard cost (issue 27), measured side by side in one run.

1. **The leak guard per body.** The conversation of ``overhead.py`` (N tool-call iterations, 4
   per turn, each turn continuing the last), its tool declaring a credential
   (``needs={"credential": "docs"}``, issued by ``static_tokens``: one 40-character token
   withheld in every run) under a 3-key redaction policy, is recorded to a fresh SQLite file
   with the guard on, and again with it switched off (the test-only switch), alternating,
   ``--repeat`` times. Printed: the median CPU time of each recording (the process's), the
   difference per body, and that difference against the CPU time per body (issue 27's
   target: at most 5% of record time).
2. **Bytes of a pause and its resume.** One turn of 4 tool calls whose first call needs a
   consent: recorded as a pause and its resume (two runs), and as the same turn with the
   token issued at once (one run). Printed: rows and body bytes of each, and the difference.

Usage::

    python bench/pauses.py              # N = 800, 5 repetitions (about a minute on 2 vCPU)
    python bench/pauses.py --n 200 --repeat 3
"""

from __future__ import annotations

import argparse
import gc
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (
    TOOL_DESCRIPTION,
    TOOL_NAME,
    TOOL_SCHEMA,
    Conversation,
    environment,
    methods_timed,
    print_environment,
    run_agent_conversation,
)

import agentfootprint as af
from agentfootprint.runtime import leak_guard
from agentfootprint.testing.leaks import guard_switched_off

TOKEN = "ghp_" + "Zq7vK2mN9xR4tB8wL1cY6dF3hJ5sP0gA2eU4"  # 40 characters
POLICY = af.RedactionPolicy(keys=["email", "account_number", "ssn"])


def needing_tool(conv: Conversation) -> af.Tool:
    return af.define_tool(
        name=TOOL_NAME,
        description=TOOL_DESCRIPTION,
        input_schema=TOOL_SCHEMA,
        execute=conv.tool_fn(),
        needs={"credential": "docs"},
    )


def record(conv: Conversation, folder: Path, name: str) -> tuple[float, int]:
    """CPU seconds of the process while the conversation is recorded (the guard is CPU work;
    the wall clock of a shared machine is noisier), and its bodies."""
    db = folder / f"{name}.db"
    store = af.SqliteStore(db)
    try:
        gc.collect()
        cpu = time.process_time()
        run_agent_conversation(
            conv,
            store,
            tools=[needing_tool(conv)],
            credentials=af.static_tokens({"docs": TOKEN}),
            redact=POLICY,
        )
        cpu = time.process_time() - cpu
        bodies = sum(1 for rid in store.run_ids() for _ in store.read(rid))
    finally:
        store.close()
    for path in folder.glob(f"{name}.db*"):
        path.unlink()
    return cpu, bodies


def guard_work(conv: Conversation, folder: Path) -> tuple[float, int]:
    """Seconds spent inside the guard itself (its methods timed one by one, so an upper
    bound) while the conversation is recorded with the guard on, and its bodies."""
    with methods_timed(leak_guard.LeakGuard, ("withhold", "holds", "checked")) as spent:
        _, bodies = record(conv, folder, "timed")
    return spent[0], bodies


def guard_cost(n: int, repeat: int) -> None:
    conv = Conversation(n)
    on: list[float] = []
    off: list[float] = []
    bodies = 0
    with tempfile.TemporaryDirectory(prefix="afbench-pauses-") as tmp:
        folder = Path(tmp)
        record(conv, folder, "warm")
        for i in range(repeat):
            for guarded in (True, False) if i % 2 == 0 else (False, True):
                if guarded:
                    seconds, bodies = record(conv, folder, f"on{i}")
                    on.append(seconds)
                else:
                    with guard_switched_off():
                        seconds, bodies = record(conv, folder, f"off{i}")
                    off.append(seconds)
        inside = statistics.median(guard_work(conv, folder)[0] for _ in range(repeat))
    t_on, t_off = statistics.median(on), statistics.median(off)
    per_body_off = t_off / bodies * 1e6
    extra = (t_on - t_off) / bodies * 1e6
    print(f"\n1. the leak guard, N={n} ({bodies:,} bodies), {repeat} alternating repetitions")
    print("| recording | median CPU s | µs a body |")
    print("|---|---:|---:|")
    print(f"| guard off | {t_off:.3f} | {per_body_off:.1f} |")
    print(f"| guard on (1 token, 3-key policy) | {t_on:.3f} | {t_on / bodies * 1e6:.1f} |")
    print(
        f"guard: {extra:+.2f} µs a body = {extra / per_body_off:+.2%} of record time "
        f"(runs on/off: {' '.join(f'{s:.2f}' for s in on)} / "
        f"{' '.join(f'{s:.2f}' for s in off)})"
    )
    print(
        f"inside the guard (its methods timed): {inside * 1e6 / bodies:.2f} µs a body = "
        f"{inside / t_off:.2%} of record CPU time"
    )


def _rows(store: Any, run_ids: list[str]) -> tuple[int, int]:
    rows = [e for rid in run_ids for e in store.read(rid)]
    return len(rows), sum(len(bytes(e.body)) for e in rows)


def pause_bytes() -> None:
    conv = Conversation(4)
    tool = needing_tool(conv)
    replies = conv.replies()
    service = af.static_tokens({}, consent_url="https://consent.example/{service}")
    paused_agent = af.Agent(
        provider=af.MockProvider(replies), model="m", tools=[tool], credentials=service
    )
    paused = paused_agent.run_sync("look it up")
    assert paused.outcome == "paused"
    service.grant("docs", TOKEN)
    resumed = paused_agent.resume_sync(paused)
    assert resumed.outcome == "answered"
    straight = af.Agent(
        provider=af.MockProvider(replies),
        model="m",
        tools=[tool],
        credentials=af.static_tokens({"docs": TOKEN}),
    )
    plain = straight.run_sync("look it up")
    assert plain.answer == resumed.answer
    pair = _rows(paused_agent.store, [paused.run_id, resumed.run_id])
    one = _rows(straight.store, [plain.run_id])
    print("\n2. one turn of 4 tool calls, the first needing a consent")
    print("| recorded as | runs | rows | body bytes |")
    print("|---|---:|---:|---:|")
    print(f"| token issued at once | 1 | {one[0]} | {one[1]:,} |")
    print(f"| a pause and its resume | 2 | {pair[0]} | {pair[1]:,} |")
    print(
        f"the pause costs {pair[0] - one[0]} rows and {pair[1] - one[1]:,} body bytes "
        f"({pair[1] / one[1] - 1:+.1%})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--n", type=int, default=800, help="iterations (default 800)")
    parser.add_argument("--repeat", type=int, default=5, help="repetitions (default 5)")
    args = parser.parse_args()
    logging.getLogger("agentfootprint.context").setLevel(logging.ERROR)
    print_environment(environment())
    guard_cost(args.n, args.repeat)
    pause_bytes()


if __name__ == "__main__":
    main()
