"""One answer per pause on PostgreSQL, with writers racing: two processes' stores answer
the same paused run at the same moment, many times over; each time exactly one wins and the
other gets :class:`PauseAnsweredError` (the check runs under a transaction-scoped lock, after
it, so the loser sees the winner's committed run; docs/log-format.md section 5.9)."""

from __future__ import annotations

import threading
from typing import Any

import agentfootprint as af
from agentfootprint.store.postgres import PostgresStore
from agentfootprint.testing.store_contract import hashed_batch, open_body

ROUNDS = 25


def answering(run_id: str, parent: str, member: str) -> list[Any]:
    body = {**open_body(run_id, parent, {"run_id": parent}), member: "pause-1"}
    return hashed_batch(run_id, [("run.open", body)])


def test_racing_answers_to_one_pause_one_wins(pg_database: str) -> None:
    stores = [PostgresStore(pg_database) for _ in range(2)]
    try:
        for round_ in range(ROUNDS):
            parent = f"p{round_}"
            stores[0].append(hashed_batch(parent, [("run.open", open_body(parent))]))
            barrier = threading.Barrier(2)
            outcomes: list[Any] = [None, None]

            def answer(
                i: int, parent: str = parent, barrier: Any = barrier, outcomes: Any = outcomes
            ) -> None:
                batch = answering(f"{parent}-a{i}", parent, ("resumes", "abandons")[i])
                barrier.wait()
                try:
                    stores[i].append(batch)
                    outcomes[i] = "kept"
                except af.PauseAnsweredError as exc:
                    outcomes[i] = exc

            threads = [threading.Thread(target=answer, args=(i,)) for i in range(2)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(timeout=60)
            assert sorted(map(str, (type(o).__name__ for o in outcomes))) == [
                "PauseAnsweredError",
                "str",
            ], outcomes
            winner = outcomes.index("kept")
            loser = outcomes[1 - winner]
            assert loser.parent == parent and loser.answered_by == f"{parent}-a{winner}"
            children = [i.run_id for i in stores[0].runs() if i.parent_run_id == parent]
            assert children == [f"{parent}-a{winner}"]
    finally:
        for store in stores:
            store.close()
