"""A sealed run cut with its close and seal in PostgreSQL is INVALID seal-log when verified
alone, as in SQLite (docs/log-format.md section 9.2 step 5; the SQLite and memory cases are in
tests/scenario/test_seal_log_per_run.py)."""

from __future__ import annotations

import psycopg
import pytest

import agentfootprint as af
from agentfootprint.errors import VerificationError
from agentfootprint.store.postgres import PostgresStore
from agentfootprint.testing.seals import SIGNER


def test_a_cut_sealed_run_is_invalid_seal_log_by_every_path(pg_database: str) -> None:
    with af.Agent(
        provider=af.MockProvider(["one", "two"]), model="m", store=pg_database, signer=SIGNER
    ) as agent:
        ids = [agent.run_sync(q).run_id for q in ("first", "second")]
    with psycopg.connect(pg_database, autocommit=True) as conn:  # the holder's cut
        conn.execute("ALTER TABLE events DISABLE TRIGGER USER")
        conn.execute(
            "DELETE FROM events WHERE run_id = %s AND type IN ('run.close', 'run.seal')",
            (ids[0],),
        )
    with PostgresStore(pg_database, readonly=True) as store:
        verifier = af.Verifier(store, trusted_keys=[SIGNER.public])
        with pytest.raises(VerificationError) as info:
            verifier.verify(ids[0])
        assert info.value.code == "seal-log"
        verdicts = list(af.Verifier(store, trusted_keys=[SIGNER.public]).verify_all())
    assert sorted(run_id for run_id, _ in verdicts) == sorted(ids)
    codes = {r: v.code if isinstance(v, VerificationError) else v.outcome for r, v in verdicts}
    assert codes == {ids[0]: "seal-log", ids[1]: af.Outcome.VALID}
