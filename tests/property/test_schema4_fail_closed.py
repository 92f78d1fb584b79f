"""Reading a damaged schema-4 file is fail-closed (docs/log-format.md section 4): whatever the
bytes of an ``appends`` row, a name or a template, every run gets a verdict (valid, or a
failure code), never an exception and never work out of proportion to the file, and the run
whose append was changed does not verify unless the change left its rows as they were."""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from contextlib import closing
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentfootprint.errors import VerificationError
from agentfootprint.store.sqlite import SqliteStore
from agentfootprint.testing.tamper import appends_of, set_append, tampering
from agentfootprint.verify.verifier import Verifier

VALID = Path(__file__).resolve().parents[1] / "vectors" / "schema4" / "valid.db"
ANY_VALUE = st.one_of(  # every column here is NOT NULL
    st.integers(-(2**63), 2**63 - 1),
    st.binary(max_size=40),
    st.text(max_size=10),
    st.floats(allow_nan=False),
)


@st.composite
def edits(draw: st.DrawFn, data: bytes) -> bytes:
    out = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "insert", "delete", "cut", "set"]))
        at = draw(st.integers(0, max(len(out) - 1, 0)))
        if kind == "flip" and out:
            out[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "insert":
            out[at:at] = draw(st.binary(min_size=1, max_size=12))
        elif kind == "delete" and out:
            del out[at : at + draw(st.integers(1, 8))]
        elif kind == "cut":
            del out[at:]
        elif out:
            out[at] = draw(st.sampled_from([0x00, 0x7F, 0x80, 0xFF, 0x01, 0x03, 0x05]))
    return bytes(out)


def _verdicts(path: Path) -> dict[str, Any]:
    with SqliteStore(path, readonly=True) as store:
        return {
            run_id: verdict.code if isinstance(verdict, VerificationError) else verdict.outcome
            for run_id, verdict in Verifier(store).verify_all()
        }


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_a_damaged_append_gets_a_verdict(data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "log.db"
        shutil.copyfile(VALID, path)
        with closing(sqlite3.connect(path)) as conn:
            run_ids = [r[0] for r in conn.execute("SELECT run_id FROM run_keys ORDER BY run_key")]
        run_id = data.draw(st.sampled_from(run_ids), label="run")
        with tampering(path) as conn:
            appends = appends_of(conn, run_id)
            target = data.draw(st.sampled_from(appends), label="append")
            column = data.draw(st.sampled_from(["data", "data", "data", "count", "ts", "head"]))
            if column == "data":
                value: Any = data.draw(edits(target.data), label="data")
            else:
                value = data.draw(ANY_VALUE, label=column)
            set_append(conn, target.pos, **{column: value})
            changed = value != getattr(target, column)
        verdicts = _verdicts(path)
        assert set(verdicts) == set(run_ids)
        if changed:
            assert isinstance(verdicts[run_id], str), (column, value)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    table=st.sampled_from(["names.text", "opens.prefix", "opens.suffix", "run_keys.run_id"]),
    value=ANY_VALUE,
)
def test_a_damaged_name_template_or_key_gets_a_verdict(table: str, value: Any) -> None:
    name, column = table.split(".")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "log.db"
        shutil.copyfile(VALID, path)
        with tampering(path) as conn:
            conn.execute(f"UPDATE {name} SET {column} = ? WHERE rowid = 1", (value,))
        verdicts = _verdicts(path)
        assert len(verdicts) >= 3  # a changed run id is a run the index does not list
