"""What a flush costs in round trips, counted from libpq's trace of the messages a store's
connections exchange (never timed): a flush that seals nothing is one statement and one round
trip, a sealing flush one pipeline and one round trip, and handing a connection out of the
pool costs none while the server has said nothing on it."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import psycopg
import pytest

import agentfootprint as af
from agentfootprint.store.base import StoredEvent
from agentfootprint.store.postgres import PostgresStore
from agentfootprint.store.postgres_db import check_quietly
from agentfootprint.testing.seals import SIGNER


class Traced:
    """Every connection the store hands out traced by libpq; per checkout, the messages
    sent and received."""

    def __init__(self, store: PostgresStore, folder: Path) -> None:
        self.folder, self.checkouts = folder, list[list[tuple[str, str]]]()
        self.contexts: list[str] = []
        self._inner = store._db.connection
        store._db.connection = self._connection  # type: ignore[method-assign]

    @contextlib.contextmanager
    def _connection(self, context: str) -> Iterator[psycopg.Connection[Any]]:
        with self._inner(context) as conn:
            path = self.folder / f"{len(self.checkouts)}.trace"
            with path.open("w") as out:
                conn.pgconn.trace(out.fileno())
                try:
                    yield conn
                finally:
                    conn.pgconn.untrace()
            self.checkouts.append(_messages(path.read_text()))
            self.contexts.append(context)

    def appends(self) -> list[list[tuple[str, str]]]:
        return [m for m, c in zip(self.checkouts, self.contexts, strict=True) if "append" in c]

    def round_trips(self) -> list[int]:
        """Per append: the answers the client waited for (one ReadyForQuery each)."""
        return [sum(m == ("B", "ReadyForQuery") for m in msgs) for msgs in self.appends()]


def _messages(text: str) -> list[tuple[str, str]]:
    """(direction, message type) of each line of a libpq trace."""
    out = []
    for line in text.splitlines():
        fields = line.split("\t")
        if len(fields) >= 4:
            out.append((fields[1], fields[3].strip().split(" ")[0]))
    return out


def _record(store: PostgresStore, runs: int, *, signer: Any = None) -> None:
    provider = af.MockProvider(["answer"] * runs)
    with af.Agent(provider=provider, model="m", store=store, signer=signer) as agent:
        for i in range(runs):
            agent.run_sync(f"question {i}")


@pytest.fixture
def folder() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="af-trace-") as name:
        yield Path(name)


@pytest.mark.parametrize("signer", [None, SIGNER], ids=["unsigned", "sealed"])
def test_each_flush_is_one_round_trip(pg_database: str, folder: Path, signer: Any) -> None:
    with contextlib.closing(PostgresStore(pg_database, pool_size=1)) as store:
        _record(store, 8, signer=signer)  # the statements are prepared by now
        sealing: list[bool] = []
        append = store.append

        def noting(events: Sequence[StoredEvent]) -> None:
            sealing.append(any(e.type == "run.seal" for e in events))
            append(events)

        store.append = noting  # type: ignore[method-assign]
        traced = Traced(store, folder)
        _record(store, 3, signer=signer)
    assert len(traced.appends()) == len(sealing) >= 6
    assert traced.round_trips() == [1] * len(sealing), traced.appends()
    assert any(sealing) is (signer is not None)
    sent = {m for msgs in traced.appends() for d, m in msgs if d == "F"}
    assert "Query" not in sent  # no BEGIN, COMMIT or empty check query of its own


def test_a_quiet_connection_is_handed_out_without_a_round_trip(
    pg_database: str, folder: Path
) -> None:
    with psycopg.connect(pg_database, autocommit=True) as conn:
        path = folder / "check.trace"
        with path.open("w") as out:
            conn.pgconn.trace(out.fileno())
            check_quietly(conn)
            conn.pgconn.untrace()
        assert _messages(path.read_text()) == []


def test_a_connection_the_server_ended_is_refused(pg_database: str) -> None:
    with psycopg.connect(pg_database, autocommit=True) as conn:
        pid = conn.info.backend_pid
        with psycopg.connect(pg_database, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,))
        with pytest.raises(psycopg.OperationalError):
            check_quietly(conn)


def test_the_pool_replaces_a_connection_the_server_ended(pg_database: str) -> None:
    with contextlib.closing(PostgresStore(pg_database, pool_size=1)) as store:
        _record(store, 1)
        with store._db.connection("pid") as conn:
            pid = conn.info.backend_pid
        with psycopg.connect(pg_database, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,))
        _record(store, 1)  # the next flush gets a new connection, not an error
        assert len(store.runs()) == 2


def _sealed_run_batches() -> list[list[StoredEvent]]:
    """The batches a signed run flushes, as a store receives them."""
    batches: list[list[StoredEvent]] = []

    class Capture(af.MemoryStore):
        def append(self, events: Any) -> None:
            batches.append(list(events))
            super().append(events)

    _record(Capture(), 1, signer=SIGNER)  # type: ignore[arg-type]
    assert any(e.type == "run.seal" for e in batches[-1])
    return batches


def test_a_sealing_flush_is_kept_whole_or_not_at_all(pg_database: str) -> None:
    batches = _sealed_run_batches()
    run_id = batches[0][0].run_id
    with contextlib.closing(PostgresStore(pg_database, pool_size=1)) as store:
        for batch in batches[:-1]:
            store.append(batch)
        with psycopg.connect(pg_database, autocommit=True) as conn:  # a leaf already given
            conn.execute("INSERT INTO seal_log VALUES (0, %s, 0)", (run_id,))
        with pytest.raises(af.StoreError, match="sealed already") as info:
            store.append(batches[-1])
        assert not isinstance(info.value, af.StoreConflictError)
        stored = sum(1 for _ in store.read(run_id))
        assert stored == sum(len(b) for b in batches[:-1])  # the flush's rows rolled back
        assert store.seal_log() == [(0, run_id)]
        _record(store, 1, signer=SIGNER)  # the connection serves the next run
        assert len(store.seal_log()) == 2


def test_a_sealing_flush_at_a_taken_position_is_a_conflict(pg_database: str) -> None:
    batches = _sealed_run_batches()
    with contextlib.closing(PostgresStore(pg_database, pool_size=1)) as store:
        for batch in batches:
            store.append(batch)
        with contextlib.closing(PostgresStore(pg_database, pool_size=1)) as other:
            other._next_seq[batches[0][0].run_id] = batches[-1][0].seq  # as if it wrote them
            with pytest.raises(af.StoreConflictError):
                other.append(batches[-1])
        assert len(store.seal_log()) == 1


def test_a_lone_run_appends_in_place_and_concurrent_runs_on_threads(pg_database: str) -> None:
    """``run_sync`` (one task on its own loop) has nothing to serve while the database
    answers: its flushes run in the loop's thread. Runs sharing a loop are served meanwhile:
    their flushes go to the store's threads."""
    import asyncio
    import threading

    with contextlib.closing(PostgresStore(pg_database)) as store:
        threads: list[str] = []
        append = store.append

        def noting(events: Sequence[StoredEvent]) -> None:
            threads.append(threading.current_thread().name)
            append(events)

        store.append = noting  # type: ignore[method-assign]
        _record(store, 1)
        assert threads and set(threads) == {threading.current_thread().name}
        threads.clear()

        async def two_runs() -> None:
            agents = [
                af.Agent(provider=af.MockProvider([q]), model="m", store=store) for q in ("a", "b")
            ]
            await asyncio.gather(*(agent.run("question") for agent in agents))
            for agent in agents:
                agent.close()

        asyncio.run(two_runs())
        assert any(name.startswith("af-pg") for name in threads), threads
        assert len(store.runs()) == 3


def _batches(sizes: Sequence[int]) -> list[list[StoredEvent]]:
    """One run written in batches of ``sizes`` rows (the first opens it), as a store
    receives them."""
    from agentfootprint.store.writer import RunWriter
    from agentfootprint.testing.store_contract import open_body

    batches: list[list[StoredEvent]] = []

    class Capture(af.MemoryStore):
        def append(self, events: Any) -> None:
            batches.append(list(events))
            super().append(events)

    writer = RunWriter(Capture(), "sizes")
    writer.append(
        [("run.open", open_body("sizes"))] + [("write", _write(i)) for i in range(1, sizes[0])]
    )
    done = sizes[0]
    for size in sizes[1:]:
        writer.append([("write", _write(done + i)) for i in range(size)])
        done += size
    return batches


def _write(index: int) -> dict[str, Any]:
    return {"commit": index, "path": f"k{index}", "verb": "set", "value": "x" * (index % 50)}


def test_batches_of_every_size_are_stored_whole_and_in_order(pg_database: str) -> None:
    """Up to VALUES_ROWS rows a batch is one VALUES statement of its size, past it one
    statement of arrays: both store the rows byte for byte, positions in seq order."""
    from agentfootprint.store.postgres_rows import VALUES_ROWS

    sizes = [1, 2, VALUES_ROWS - 1, VALUES_ROWS, VALUES_ROWS + 1, 3 * VALUES_ROWS, 1]
    batches = _batches(sizes)
    assert [len(b) for b in batches] == sizes
    with contextlib.closing(PostgresStore(pg_database, pool_size=1)) as store:
        for batch in batches:
            store.append(batch)
        assert list(store.read("sizes")) == [e for b in batches for e in b]
        assert store.runs()[0].events == sum(sizes)
    with psycopg.connect(pg_database) as conn:
        seqs = [r[0] for r in conn.execute("SELECT seq FROM events ORDER BY position")]
        index = conn.execute("SELECT run_id, conversation_id, opened_at FROM runs").fetchall()
    assert seqs == list(range(sum(sizes)))
    assert index == [("sizes", "sizes", batches[0][0].ts)]


def test_each_batch_size_is_prepared_once_per_session(pg_database: str, folder: Path) -> None:
    """A batch of a size not yet written on a session prepares its statement there (one
    Parse, one round trip more), and only then."""
    batches = _batches([2, 3, 3, 5, 3, 5])
    with contextlib.closing(PostgresStore(pg_database, pool_size=1)) as store:
        traced = Traced(store, folder)
        for batch in batches:
            store.append(batch)
    parses = [sum(m == ("F", "Parse") for m in msgs) for msgs in traced.appends()]
    assert parses == [1, 1, 0, 1, 0, 0], traced.appends()
    assert traced.round_trips() == [1 + p for p in parses]


def test_a_session_that_lost_its_statements_prepares_them_again(pg_database: str) -> None:
    with contextlib.closing(PostgresStore(pg_database, pool_size=1)) as store:
        _record(store, 1)
        with store._db.connection("forgetting") as conn:
            conn.execute("DEALLOCATE ALL")  # as a pooler's new session would be
        _record(store, 2)
        outcomes = [r.outcome for _, r in af.Verifier(store).verify_all()]  # type: ignore[union-attr]
    assert outcomes == [af.Outcome.VALID_UNSIGNED] * 3


def test_a_taken_position_is_a_conflict_on_the_statement_path(pg_database: str) -> None:
    """A batch that seals nothing goes through the prepared statement; another writer's
    rows at its position are still a conflict, and nothing of the batch is kept."""
    batches = _batches([2, 3, 4])
    with contextlib.closing(PostgresStore(pg_database, pool_size=1)) as store:
        for batch in batches:
            store.append(batch)
        with contextlib.closing(PostgresStore(pg_database, pool_size=1)) as other:
            other._next_seq["sizes"] = batches[1][0].seq  # as if it wrote the first batch
            with pytest.raises(af.StoreConflictError, match="already taken"):
                other.append(batches[1])
        assert len(list(store.read("sizes"))) == 9


def test_a_lone_writer_is_served_by_one_session(pg_database: str) -> None:
    """The pool's first connection is ready when the store opens: a single writer's first
    flush does not wait for it (which made the pool grow a second one, then alternate the
    writer's flushes between two server processes)."""
    with contextlib.closing(PostgresStore(pg_database)) as store:
        pids: set[int] = set()
        inner = store._db.connection

        @contextlib.contextmanager
        def noting(context: str) -> Iterator[psycopg.Connection[Any]]:
            with inner(context) as conn:
                pids.add(conn.info.backend_pid)
                yield conn

        store._db.connection = noting  # type: ignore[method-assign]
        _record(store, 3)
    assert len(pids) == 1


def test_ctrl_c_during_a_flush_cancels_its_statement(pg_database: str) -> None:
    """A flush waiting on the server (here on another session's uncommitted row at its
    position) is interrupted by Ctrl-C as any psycopg query is: the statement is cancelled
    on the server, nothing of the batch is kept, and the session serves the next flush."""
    import _thread
    import threading
    import time

    batches = _batches([2, 3])
    with contextlib.closing(PostgresStore(pg_database, pool_size=1)) as store:
        store.append(batches[0])
        with store._db.connection("pid") as conn:
            pid = conn.info.backend_pid
        with psycopg.connect(pg_database) as blocker, psycopg.connect(pg_database) as watch:
            watch.autocommit = True
            blocker.execute(  # an open transaction holds the batch's first position
                "INSERT INTO events (run_id, seq, type, ts, body, event_hash, chain_hash) "
                "VALUES ('sizes', 2, 'write', 0, '', '', '')"
            )

            def interrupt_once_waiting() -> None:
                query = "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s"
                for _ in range(2000):  # until the flush waits on the lock (bounded)
                    if watch.execute(query, (pid,)).fetchone() == ("Lock",):
                        break
                    time.sleep(0.005)
                _thread.interrupt_main()

            threading.Thread(target=interrupt_once_waiting, daemon=True).start()
            with pytest.raises(KeyboardInterrupt):
                store.append(batches[1])
            state = watch.execute("SELECT state FROM pg_stat_activity WHERE pid = %s", (pid,))
            assert state.fetchone() == ("idle",)  # cancelled, not still waiting
            blocker.rollback()
        store.append(batches[1])  # the same session, the same position: written now
        assert len(list(store.read("sizes"))) == 5


def test_tools_of_one_reply_flush_once_and_an_empty_flush_sends_nothing(
    pg_database: str, folder: Path
) -> None:
    """A run flushes before each tool runs (docs/log-format.md section 6.1), but the tools
    of one reply run in one stage: nothing is committed between them, so the flushes before
    the second and third find nothing to write and send nothing. The run's appends: before
    each of its two model calls, before the first tool, and with its close."""
    from agentfootprint.runtime.mock_provider import reply, tool_call

    ran: list[str] = []

    def tool(name: str) -> af.Tool:
        return af.define_tool(
            name=name,
            description="A tool.",
            input_schema={"type": "object"},
            execute=lambda args: ran.append(name) or "ok",
        )

    calls = [tool_call(name, {}) for name in ("a", "b", "c")]
    provider = af.MockProvider([reply(tool_calls=calls), "done"])
    with contextlib.closing(PostgresStore(pg_database, pool_size=1)) as store:
        traced = Traced(store, folder)
        tools = [tool(n) for n in ("a", "b", "c")]
        with af.Agent(provider=provider, model="m", store=store, tools=tools) as agent:
            agent.run_sync("q")
    assert ran == ["a", "b", "c"]
    assert len(traced.appends()) == 4
