"""What the context window (issue 11) costs to record, store and verify, against no window.

The conversation is the one of ``overhead.py`` (N tool-call iterations, 4 per turn, every
turn ``run_sync(msg, continue_from=prev)``), recorded to a fresh SQLite file by three agents
that differ only in their window options:

* ``none``: no window (every request serves the whole history);
* ``window``: ``window={"keep_last_turns": 4}``, ``keep_last_tool_results`` at its default
  (2 with a window);
* ``window-pins0``: the same window with ``keep_last_tool_results=0``.

Within a repetition every N and every variant runs once, the variants one after the other
with the first one rotating between repetitions; figures are medians over the repetitions.
Per run: the summed ``run_sync`` time, then one ``Verifier(store).verify_all()`` over the
file (timed; every run must come out ``VALID_UNSIGNED``), then the database bytes after
``wal_checkpoint(TRUNCATE)`` (``common.checkpoint_and_measure``) and the number of
``agentfootprint.context.evicted`` events. Everything is divided by N.

Then, untimed, once per variant at the largest N: the mean size of the request the model
is served (messages, and characters of system and message text), counted by a
``MockProvider`` that looks at each request. A mock answers in microseconds whatever it is
sent, so this is the only place the window's saving shows here.

Usage::

    python bench/window.py                  # N = 50, 800, 9 repetitions (about 45 s on 2 vCPU)
    python bench/window.py --quick          # N = 50, 200, 3 repetitions
    python bench/window.py --repeat 9 --json window.json
"""

from __future__ import annotations

import argparse
import gc
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (
    Conversation,
    announce,
    checkpoint_and_measure,
    conversation_agent,
    environment,
    final_text,
    median,
    print_environment,
    remove_db,
    run_agent_conversation,
    user_text,
    write_figures,
)

import agentfootprint as af

KEEP_LAST_TURNS = 4
SIZES = (50, 800)
QUICK_SIZES = (50, 200)
DEFAULT_REPEAT = 9
QUICK_REPEAT = 3
WARMUP_N = 8
EVICTED = "agentfootprint.context.evicted"

VARIANTS: dict[str, dict[str, Any]] = {
    "none": {},
    "window": {"window": {"keep_last_turns": KEEP_LAST_TURNS}},
    "window-pins0": {
        "window": {"keep_last_turns": KEEP_LAST_TURNS},
        "keep_last_tool_results": 0,
    },
}
BASE = "none"


@dataclass(frozen=True)
class Sample:
    """One recorded, verified and measured conversation (figures per iteration)."""

    record_ms: float
    verify_ms: float
    db_bytes: float
    evicted: float
    runs: int


def _evicted(path: Path) -> int:
    """The eviction events of the file, read through the store (either storage schema)."""
    store = af.SqliteStore(path, readonly=True)
    try:
        events = (e for run_id in store.run_ids() for e in store.read(run_id))
        return sum(
            1 for e in events if e.type == "event" and orjson.loads(e.body).get("name") == EVICTED
        )
    finally:
        store.close()


def measure(n: int, options: Mapping[str, Any], directory: Path) -> Sample:
    """Record the N-iteration conversation to a fresh file, verify every run, measure."""
    path = directory / f"window-{n}.sqlite"
    remove_db(path)
    conv = Conversation(n)
    gc.collect()
    store = af.SqliteStore(path)
    try:
        run = run_agent_conversation(conv, store, **options)
        t0 = time.perf_counter()
        results = list(af.Verifier(store).verify_all())
        verify_s = time.perf_counter() - t0
    finally:
        store.close()
    bad = [r for _, r in results if getattr(r, "outcome", None) is not af.Outcome.VALID_UNSIGNED]
    if bad or len(results) != run.turns:
        raise SystemExit(
            f"N={n} {dict(options)}: {len(bad)} of {len(results)} runs did not verify "
            f"(expected {run.turns} VALID_UNSIGNED): {bad[:1]!r}"
        )
    size = checkpoint_and_measure(path)
    evicted = _evicted(path)
    remove_db(path)
    return Sample(
        record_ms=run.seconds / n * 1e3,
        verify_ms=verify_s / n * 1e3,
        db_bytes=size / n,
        evicted=evicted / n,
        runs=len(results),
    )


class CountingProvider(af.MockProvider):
    """The scripted mock, also counting what each request serves (messages, text chars)."""

    def __init__(self, replies: list[af.LLMResponse | str]) -> None:
        super().__init__(replies=replies, record=False)
        self.calls = self.messages = self.chars = 0

    async def complete(self, request: Mapping[str, Any]) -> af.LLMResponse:
        served = request.get("messages") or []
        self.calls += 1
        self.messages += len(served)
        self.chars += sum(len(p.get("text", "")) for p in request.get("system") or [])
        self.chars += sum(len(m.get("content") or "") for m in served)
        return await super().complete(request)


def request_sizes(n: int, options: Mapping[str, Any]) -> dict[str, float]:
    """Mean messages and text characters served per model call (untimed, MemoryStore)."""
    conv = Conversation(n)
    provider = CountingProvider(conv.replies())
    agent = conversation_agent(conv, provider, af.MemoryStore(), **options)
    previous: af.RunResult | None = None
    for turn in range(len(conv.turns)):
        previous = agent.run_sync(user_text(turn), continue_from=previous)
        if previous.answer != final_text(turn):
            raise SystemExit(f"request sizes, N={n} {dict(options)}: turn {turn} answered wrong")
    return {
        "calls": provider.calls,
        "messages_per_call": provider.messages / provider.calls,
        "chars_per_call": provider.chars / provider.calls,
    }


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.3f}x" if b else "n/a"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="N = 50, 200, 3 repetitions")
    parser.add_argument("--repeat", type=int, help=f"repetitions (default {DEFAULT_REPEAT})")
    parser.add_argument("--sizes", type=int, nargs="+", help="N values (default 50 800)")
    parser.add_argument("--json", type=Path, help="write the figures to this JSON file")
    args = parser.parse_args(argv)
    sizes = tuple(args.sizes or (QUICK_SIZES if args.quick else SIZES))
    repeat = max(1, args.repeat or (QUICK_REPEAT if args.quick else DEFAULT_REPEAT))
    names = list(VARIANTS)

    env = environment()
    print_environment(env)
    announce(sizes, f"; {repeat} repetitions, window keep_last_turns={KEEP_LAST_TURNS}")
    started = time.perf_counter()
    samples: dict[tuple[int, str], list[Sample]] = {(n, v): [] for n in sizes for v in names}
    with tempfile.TemporaryDirectory(prefix="afp-window-") as tmp:
        directory = Path(tmp)
        for name in names:  # warm-up: imports, first-call costs
            measure(WARMUP_N, VARIANTS[name], directory)
        for rep in range(repeat):
            order = names[rep % len(names) :] + names[: rep % len(names)]
            for n in sizes:
                for name in order:
                    samples[(n, name)].append(measure(n, VARIANTS[name], directory))
            print(f"# repetition {rep + 1}/{repeat} done ({time.perf_counter() - started:.0f} s)")

    med = {
        key: {
            field: median(getattr(s, field) for s in values)
            for field in ("record_ms", "verify_ms", "db_bytes", "evicted")
        }
        for key, values in samples.items()
    }
    spread = {
        key: (min(s.record_ms for s in values), max(s.record_ms for s in values))
        for key, values in samples.items()
    }

    print("\nms and bytes per tool-call iteration (median); ratios: variant / none")
    print(
        f"{'N':>5} {'variant':<13} {'runs':>5} {'record ms':>10} {'(min-max)':>13} "
        f"{'verify ms':>10} {'bytes':>8} {'evicted':>8} {'record':>8} {'verify':>8} {'bytes':>8}"
    )
    for n in sizes:
        base = med[(n, BASE)]
        for name in names:
            m = med[(n, name)]
            lo, hi = spread[(n, name)]
            print(
                f"{n:>5} {name:<13} {samples[(n, name)][0].runs:>5} {m['record_ms']:>10.3f} "
                f"{f'{lo:.3f}-{hi:.3f}':>13} {m['verify_ms']:>10.3f} {m['db_bytes']:>8,.0f} "
                f"{m['evicted']:>8.3f} {_ratio(m['record_ms'], base['record_ms']):>8} "
                f"{_ratio(m['verify_ms'], base['verify_ms']):>8} "
                f"{_ratio(m['db_bytes'], base['db_bytes']):>8}"
            )

    lo_n, hi_n = min(sizes), max(sizes)
    print(f"\nflatness, per iteration N={hi_n} / N={lo_n}")
    print(f"{'variant':<13} {'bytes':>8} {'record':>8} {'verify':>8}")
    for name in names:
        a, b = med[(hi_n, name)], med[(lo_n, name)]
        print(
            f"{name:<13} {_ratio(a['db_bytes'], b['db_bytes']):>8} "
            f"{_ratio(a['record_ms'], b['record_ms']):>8} "
            f"{_ratio(a['verify_ms'], b['verify_ms']):>8}"
        )

    sizes_served = {name: request_sizes(hi_n, VARIANTS[name]) for name in names}
    base_served = sizes_served[BASE]
    print(f"\nserved request per model call at N={hi_n} (mean; untimed pass)")
    print(f"{'variant':<13} {'calls':>6} {'messages':>9} {'chars':>9} {'chars / none':>13}")
    for name in names:
        s = sizes_served[name]
        print(
            f"{name:<13} {s['calls']:>6.0f} {s['messages_per_call']:>9.1f} "
            f"{s['chars_per_call']:>9,.0f} "
            f"{_ratio(s['chars_per_call'], base_served['chars_per_call']):>13}"
        )
    print(f"\ntotal {time.perf_counter() - started:.0f} s")

    write_figures(
        args.json,
        {
            "environment": env,
            "sizes": sizes,
            "repeat": repeat,
            "variants": VARIANTS,
            "median": {f"{n}/{v}": med[(n, v)] for n, v in med},
            "samples": {f"{n}/{v}": [asdict(s) for s in ss] for (n, v), ss in samples.items()},
            "served": sizes_served,
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
