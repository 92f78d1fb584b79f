"""What echo redaction costs (issue 27, docs/log-format.md section 12.8), measured side by side.

The conversation of ``redaction.py`` (N tool-call iterations, 4 per turn, each turn continuing
the last; every call's arguments and result carry an ``ssn``, an ``email`` and an
``account_number``, distinct per iteration) is recorded under the 3-key policy as version 3
(echo redaction: every text of the conversation searched for every value committed so far,
the parent's included: 3 new literals per iteration, 2,400 at N=800) and as version 2 (no
search), alternating, ``--repeat`` times, each to a fresh SQLite file. Printed: the median
CPU time of each (the process's: the search is CPU work), the difference per body and
against the record time per body.

The same conversation with **every final answer quoting** the turn's last e-mail address (the
worst case: each answer committed in ``final_answer``, the history and the events) is
recorded under version 3 once more: the quotation commitments it made, and that no address is
left in clear anywhere in the file. And, steadier than the difference of two noisy recordings,
the search's own time (its methods timed call by call: an upper bound) and the redaction
boundary's time under each version (what echo redaction adds to it, the search included).

Usage::

    python bench/echoes.py              # N = 800, 5 repetitions (about 2 minutes on 2 vCPU)
    python bench/echoes.py --n 200 --repeat 3
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
    conversation_agent,
    environment,
    final_text,
    methods_timed,
    print_environment,
    user_text,
)
from redaction import PII_KEYS, PiiConversation, pii

import agentfootprint as af
from agentfootprint.logformat import echo
from agentfootprint.store.redaction import Boundary


def policy(version: int) -> af.RedactionPolicy:
    return af.RedactionPolicy(keys=list(PII_KEYS)).at_version(version)


def quoted_answer(conv: PiiConversation, turn: int) -> str:
    return f"{final_text(turn)} Contact: {pii(conv.turns[turn][-1])['email']}."


def replies(conv: PiiConversation, quoting: bool) -> list[Any]:
    if not quoting:
        return conv.replies()
    out: list[Any] = []
    finals = iter(range(len(conv.turns)))
    for reply in conv.replies():
        out.append(quoted_answer(conv, next(finals)) if isinstance(reply, str) else reply)
    return out


def record(conv: PiiConversation, db: Path, version: int, quoting: bool = False) -> float:
    """CPU seconds while the conversation is recorded (only the turns, not the setup)."""
    store = af.SqliteStore(db)
    agent = conversation_agent(
        conv,
        af.MockProvider(replies=replies(conv, quoting), record=False),
        store,
        redact=policy(version),
    )
    try:
        previous: af.RunResult | None = None
        gc.collect()
        cpu = time.process_time()
        for turn, _planned in enumerate(conv.turns):
            previous = agent.run_sync(user_text(turn), continue_from=previous)
            if previous.outcome != "answered":
                raise RuntimeError(f"turn {turn}: {previous.outcome}")
        return time.process_time() - cpu
    finally:
        agent.close()
        store.close()


def timed_work(conv: PiiConversation, db: Path, version: int, owner: Any, names: Any) -> float:
    """Seconds spent inside ``owner``'s methods ``names`` while the conversation is recorded
    under ``version``."""
    with methods_timed(owner, names) as spent:
        record(conv, db, version)
    return spent[0]


def search_work(conv: PiiConversation, db: Path) -> float:
    """The echo search itself: ``EchoSearch``'s methods, under version 3."""
    return timed_work(conv, db, 3, echo.EchoSearch, ("learn", "found", "fork", "__init__"))


def boundary_work(conv: PiiConversation, db: Path, version: int) -> float:
    """The whole redaction boundary (``Boundary.commit`` and ``commit_entry``): its
    difference between versions 3 and 2 is what echo redaction adds to it, search included."""
    return timed_work(conv, db, version, Boundary, ("commit", "commit_entry"))


def bodies_of(db: Path) -> tuple[int, list[bytes]]:
    store = af.SqliteStore(db)
    try:
        rows = [bytes(e.body) for rid in store.run_ids() for e in store.read(rid)]
        return len(rows), rows
    finally:
        store.close()


def cost(n: int, repeat: int) -> None:
    conv = PiiConversation(n)
    times: dict[int, list[float]] = {2: [], 3: []}
    with tempfile.TemporaryDirectory(prefix="afbench-echoes-") as tmp:
        folder = Path(tmp)
        record(conv, folder / "warm.db", 3)
        bodies, _ = bodies_of(folder / "warm.db")
        for i in range(repeat):
            for version in (3, 2) if i % 2 == 0 else (2, 3):
                db = folder / f"v{version}-{i}.db"
                times[version].append(record(conv, db, version))
                for path in folder.glob(f"v{version}-{i}.db*"):
                    path.unlink()
        inside = statistics.median(
            search_work(conv, folder / f"timed{i}.db") for i in range(repeat)
        )
        walls = {
            version: statistics.median(
                boundary_work(conv, folder / f"b{version}-{i}.db", version) for i in range(repeat)
            )
            for version in (2, 3)
        }
        quoting_db = folder / "quoting.db"
        t_quoting = record(conv, quoting_db, 3, quoting=True)
        quoted_bodies, rows = bodies_of(quoting_db)
        addresses = [pii(i)["email"].encode() for i in range(n)]
        clear = sum(row.count(a) for row in rows for a in addresses)
        answers = [quoted_answer(conv, t).encode() for t in range(len(conv.turns))]
        quoted_clear = sum(row.count(a) for row in rows for a in answers)
        committed_answers = sum(
            b'"path":"final_answer"' in row and b'"value":{"$commit"' in row for row in rows
        )
    v2, v3 = statistics.median(times[2]), statistics.median(times[3])
    per_body = v2 / bodies * 1e6
    extra = (v3 - v2) / bodies * 1e6
    print(f"\n1. echo redaction, N={n} ({bodies:,} bodies), {repeat} alternating repetitions")
    print("| recorded under the 3-key policy as | median CPU s | µs a body |")
    print("|---|---:|---:|")
    print(f"| version 2 (no echo search) | {v2:.3f} | {per_body:.1f} |")
    print(f"| version 3 (echo redaction, {3 * n:,} literals at the end) | {v3:.3f} | "
          f"{v3 / bodies * 1e6:.1f} |")  # fmt: skip
    print(
        f"echo search: {extra:+.2f} µs a body = {extra / per_body:+.2%} of record time "
        f"(runs v3/v2: {' '.join(f'{s:.2f}' for s in times[3])} / "
        f"{' '.join(f'{s:.2f}' for s in times[2])})"
    )
    print(
        f"inside the search (its methods timed): {inside * 1e6 / bodies:.2f} µs a body = "
        f"{inside / v2:.2%} of record CPU time"
    )
    walled = (walls[3] - walls[2]) * 1e6 / bodies
    print(
        f"the redaction boundary: {walls[2] * 1e6 / bodies:.2f} µs a body under version 2, "
        f"{walls[3] * 1e6 / bodies:.2f} under version 3: echo redaction adds {walled:.2f} µs "
        f"a body = {walled / per_body:.2%} of record time"
    )
    print(
        f"\n2. every answer quoting an address: {quoted_bodies:,} bodies in {t_quoting:.2f} CPU s; "
        f"final answers committed: {committed_answers} of {len(conv.turns)}; addresses in "
        f"clear in the file's rows: {clear}; answers in clear: {quoted_clear}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--n", type=int, default=800, help="iterations (default 800)")
    parser.add_argument("--repeat", type=int, default=5, help="repetitions (default 5)")
    args = parser.parse_args()
    logging.getLogger("agentfootprint.context").setLevel(logging.ERROR)
    print_environment(environment())
    cost(args.n, args.repeat)


if __name__ == "__main__":
    main()
