"""Verification against its floor: a minimal Python re-hash of the same chain (issue 13).

The conversation of ``overhead.py`` (N tool-call iterations, 4 per turn, every turn
``run_sync(msg, continue_from=prev)``) is recorded once to a SQLite file. Then, in one
process and alternating within every repetition (the one measured first rotates):

* ``verify``: ``af.Verifier(store).verify_all()`` over the file (every run must come out
  ``VALID_UNSIGNED``), with one store opened once for all repetitions;
* ``floor``: the least any verifier must do, in plain Python over the same rows of the
  same database (one ``sqlite3`` connection opened once): for each run (in the order
  ``store.run_ids()`` gives), its rows in seq order, and for each row the event hash
  ``H("event", '{"body":' || body || ',"run":' || canon(run) || ',"seq":' || seq ||
  ',"ts":' || ts || ',"type":' || canon(type) || '}')`` and the chain link
  ``H("chain", c_prev || e)`` (docs/log-format.md sections 3 and 5.1). Schema 1 (the
  ``events`` table): both compared with the hashes the row stores. Schema 2 (``rows``,
  docs/log-format.md section 4): the run's key looked up once (one query for all runs), its
  rows by ``pos`` range, the type named from its code, a NULL ``ts`` taken from the row
  before in its batch, an empty commit marker's body rebuilt from ``stage``, ``commit_no``
  and ``stage_k``, and the link compared with the head stored at the end of each batch (a
  run's last row must hold one). Nothing else: no parse, no canonical check, no fold, no
  receipt;
* ``floor+json``: the floor, and each body parsed with orjson and proven canonical by the
  round trip (step 2.2 of docs/log-format.md section 9.2, which every row needs before
  anything type-specific): how much of the gap is that alone;
* ``read``: only reading the same rows through ``store.read`` (what SQLite and row
  objects cost the verifier);
* ``base`` (with ``--baseline SRC``): ``verify`` again, by the ``agentfootprint`` of another
  source tree (a child process that imports it from ``SRC``, opens the same file once and
  times each ``verify_all`` it is asked for, so its figure has no process start in it).

Printed: median, min-max and the spread (max/min) of each, and ``verify / floor`` per
repetition (median and range). Then, untimed, how many bodies the canonical check proves
by the orjson round trip and how many take the full check, and a cProfile of one
``verify_all`` (top functions by own time and cumulative time).

The file is recorded in storage schema 4 (what a new file gets: one row per append; the floor
reads its records decoded by the store's ``chain_rows``, which hashes nothing), or 2 with
``--schema 2``, or 1 with ``--schema 1``, whose rows store both hashes (``bench/leaner.py``
compares the layouts).

Target (issue 26): verify within 2x of the floor (issue 13 asked 4x).

Usage::

    python bench/verify_floor.py                 # N = 800, 9 repetitions (about 20 s)
    python bench/verify_floor.py --schema 1      # the same over a storage schema 1 file
    python bench/verify_floor.py --n 200 --repeat 5
    python bench/verify_floor.py --no-profile --json floor.json
    python bench/verify_floor.py --baseline /tmp/before/src   # before/after in one run
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import orjson
from common import (
    Conversation,
    announce,
    environment,
    median,
    print_environment,
    profile_report,
    profiled,
    remove_db,
    run_agent_conversation,
    write_figures,
)

import agentfootprint as af
from agentfootprint.testing.tamper import new_file_schema

DEFAULT_N = 800
DEFAULT_REPEAT = 9
TARGET = 2.0

_EVENT = b"afp/v1/event\x00"
_CHAIN = b"afp/v1/chain\x00"
_ROWS = (
    "SELECT seq, type, ts, body, event_hash, chain_hash FROM events WHERE run_id = ? ORDER BY seq"
)
_ROWS_V2 = (
    "SELECT pos, type, ts, body, head, stage, commit_no, stage_k FROM rows "
    "WHERE pos BETWEEN ? AND ? ORDER BY pos"
)
#: schema 2's type codes (docs/log-format.md section 4)
_TYPE_NAMES = {1: "run.open", 2: "write", 3: "receipt", 4: "event", 5: "commit", 6: "run.close"}
_SEQ_BITS = 32


def _json_string(text: str) -> bytes:
    """canon() of a run id or event type: plain ASCII with nothing to escape (checked)."""
    if not text.isascii() or not text.isprintable() or '"' in text or "\\" in text:
        raise SystemExit(f"the floor assumes plain ASCII run ids and types, got {text!r}")
    return b'"' + text.encode("ascii") + b'"'


def _proven(body: bytes) -> None:
    """Step 2.2 of every row, before anything type-specific: the body parsed as JSON and
    proven canonical by the round trip (what ``floor+json`` adds to the floor)."""
    if orjson.dumps(orjson.loads(body), option=orjson.OPT_SORT_KEYS) != body:
        raise SystemExit("floor+json: a body the round trip does not prove canonical")


def floor(conn: sqlite3.Connection, run_ids: list[str], bodies: bool = False) -> int:
    """Re-hash every run's chain from the rows (``bodies``: and prove each body canonical
    JSON); return the number of rows checked."""
    sha256 = hashlib.sha256
    types: dict[str, bytes] = {}
    rows_checked = 0
    for run_id in run_ids:
        run = b',"run":' + _json_string(run_id) + b',"seq":'
        head = bytes(32)
        expected = 0
        for seq, type_, ts, body, stored_event, stored_chain in conn.execute(_ROWS, (run_id,)):
            if seq != expected:
                raise SystemExit(f"floor: run {run_id} seq {seq} where {expected} was expected")
            kind = types.get(type_)
            if kind is None:
                kind = types[type_] = b',"type":' + _json_string(type_) + b"}"
            if bodies:
                _proven(body)
            event = sha256(
                _EVENT + b'{"body":' + body + run + str(seq).encode() + b',"ts":'
                + str(ts).encode() + kind
            ).digest()  # fmt: skip
            if event != stored_event:
                raise SystemExit(f"floor: run {run_id} seq {seq}: event hash differs")
            head = sha256(_CHAIN + head + event).digest()
            if head != stored_chain:
                raise SystemExit(f"floor: run {run_id} seq {seq}: chain hash differs")
            expected += 1
        rows_checked += expected
    return rows_checked


def floor_v2(conn: sqlite3.Connection, run_ids: list[str], bodies: bool = False) -> int:
    """:func:`floor` over a schema-2 file: the rows rebuilt as section 4 says, every event hash
    and link computed, each stored head compared; return the number of rows checked."""
    sha256 = hashlib.sha256
    tails = {code: b',"type":' + _json_string(name) + b"}" for code, name in _TYPE_NAMES.items()}
    keys = dict(conn.execute("SELECT run_id, run_key FROM run_keys"))
    rows_checked = 0
    for run_id in run_ids:
        base = keys[run_id] << _SEQ_BITS
        run = b',"run":' + _json_string(run_id) + b',"seq":'
        head = bytes(32)
        expected = 0
        ts = stored_head = None
        span = (base, base | ((1 << _SEQ_BITS) - 1))
        for pos, code, stored_ts, body, stored_head, stage, number, k in conn.execute(
            _ROWS_V2, span
        ):
            seq = pos - base
            if seq != expected:
                raise SystemExit(f"floor: run {run_id} seq {seq} where {expected} was expected")
            if stored_ts is not None:
                ts = stored_ts
            elif ts is None:
                raise SystemExit(f"floor: run {run_id} seq {seq}: no ts")
            if body is None:  # an empty commit marker
                stage_run = _json_string(f"{stage}#{k}")
                body = b'{"commit":%d,"stage":%s,"stage_run":%s,"writes":0}' % (
                    number, _json_string(stage), stage_run
                )  # fmt: skip
            if bodies:
                _proven(body)
            event = sha256(
                _EVENT + b'{"body":' + body + run + str(seq).encode() + b',"ts":'
                + str(ts).encode() + tails[code]
            ).digest()  # fmt: skip
            head = sha256(_CHAIN + head + event).digest()
            if stored_head is not None:
                if head != stored_head:
                    raise SystemExit(f"floor: run {run_id} seq {seq}: chain hash differs")
                ts = None  # the next batch carries its own ts
            expected += 1
        if stored_head is None:
            raise SystemExit(f"floor: run {run_id}: its last row holds no head")
        rows_checked += expected
    return rows_checked


def floor_v4(store: af.SqliteStore, run_ids: list[str], bodies: bool = False) -> int:
    """:func:`floor` over a schema-4 file: its records decoded by the store (``chain_rows``,
    which hashes nothing: an append's last row carries its stored head), then every event
    hash and link computed and each stored head compared."""
    sha256 = hashlib.sha256
    tails: dict[str, bytes] = {}
    rows_checked = 0
    for run_id in run_ids:
        run = b',"run":' + _json_string(run_id) + b',"seq":'
        head = bytes(32)
        expected = 0
        stored_head = None
        for _, seq, type_, ts, body, _, stored_head in store.chain_rows(run_id) or ():
            if seq != expected or body is None:
                raise SystemExit(f"floor: run {run_id} seq {seq} where {expected} was expected")
            tail = tails.get(type_)
            if tail is None:
                tail = tails[type_] = b',"type":' + _json_string(type_) + b"}"
            if bodies:
                _proven(body)
            event = sha256(
                _EVENT + b'{"body":' + body + run + str(seq).encode() + b',"ts":'
                + str(ts).encode() + tail
            ).digest()  # fmt: skip
            head = sha256(_CHAIN + head + event).digest()
            if type(stored_head) is bytes and head != stored_head:
                raise SystemExit(f"floor: run {run_id} seq {seq}: chain hash differs")
            expected += 1
        if type(stored_head) is not bytes:
            raise SystemExit(f"floor: run {run_id}: its last row holds no head")
        rows_checked += expected
    return rows_checked


def verify(store: af.SqliteStore, runs: int) -> int:
    results = list(af.Verifier(store).verify_all())
    bad = [r for _, r in results if getattr(r, "outcome", None) is not af.Outcome.VALID_UNSIGNED]
    if bad or len(results) != runs:
        raise SystemExit(f"{len(bad)} of {len(results)} runs did not verify: {bad[:1]!r}")
    return sum(r.events for _, r in results if isinstance(r, af.RunVerification))


def read(store: af.SqliteStore, run_ids: list[str]) -> int:
    count = 0
    for run_id in run_ids:
        for _row in store.read(run_id):
            count += 1
    return count


class Baseline:
    """``verify`` by another source tree's ``agentfootprint``, in a child process."""

    def __init__(self, src: Path, path: Path, runs: int) -> None:
        env = {**os.environ, "PYTHONPATH": str(src)}
        command = [sys.executable, __file__, "--child", str(path), "--child-runs", str(runs)]
        self.child = subprocess.Popen(
            command, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        self.origin = self._answer()  # where the child imported agentfootprint from
        if not self.origin.startswith(str(src.resolve())):
            self.close()
            raise SystemExit(f"the baseline child imported agentfootprint from {self.origin}")

    def _answer(self) -> str:
        assert self.child.stdout is not None
        line = self.child.stdout.readline()
        if not line:
            raise SystemExit("the baseline child ended")
        return line.strip()

    def seconds(self) -> float:
        assert self.child.stdin is not None
        self.child.stdin.write("go\n")
        self.child.stdin.flush()
        return float(self._answer())

    def close(self) -> None:
        if self.child.stdin is not None:
            self.child.stdin.close()
        self.child.wait(timeout=60)


def child(path: Path, runs: int) -> int:
    """The baseline child: verify ``path`` once per ``go`` line, printing the seconds."""
    store = af.SqliteStore(path)
    try:
        verify(store, runs)  # warm-up, and a check
        print(Path(af.__file__).resolve(), flush=True)
        for line in sys.stdin:
            if line.strip() == "go":
                seconds, _ = _timed(lambda: verify(store, runs))
                print(seconds, flush=True)
    finally:
        store.close()
    return 0


def _timed(fn: Callable[[], int]) -> tuple[float, int]:
    gc.collect()
    t0 = time.perf_counter()
    value = fn()
    return time.perf_counter() - t0, value


def canonical_paths(bodies: list[bytes]) -> dict[str, int]:
    """How the canonical check goes for each stored body (untimed): proven by the orjson
    round trip, or through the full check."""
    from agentfootprint.logformat import canonical

    counts: dict[str, int] = {}
    proves = getattr(canonical, "parse_canonical", None)
    for body in bodies:
        if proves is None:
            key = "full check (no fast path in this tree)"
        else:
            key = "orjson round trip" if proves(body)[1] else "full check"
        counts[key] = counts.get(key, 0) + 1
    return counts


def _spread(values: list[float]) -> str:
    return f"{min(values):.4f}-{max(values):.4f} s ({max(values) / min(values):.2f}x)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--n", type=int, default=DEFAULT_N, help=f"N (default {DEFAULT_N})")
    parser.add_argument("--repeat", type=int, default=DEFAULT_REPEAT, help="repetitions")
    parser.add_argument("--json", type=Path, help="write the figures to this JSON file")
    parser.add_argument("--no-profile", action="store_true", help="skip the cProfile")
    parser.add_argument("--top", type=int, default=20, help="functions shown by the profile")
    parser.add_argument("--baseline", type=Path, help="also time verify by the tree SRC")
    parser.add_argument(
        "--schema", type=int, choices=(1, 2, 4), default=4, help="storage schema (default 4)"
    )
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--child-runs", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        return child(args.child, args.child_runs)
    n, repeat = args.n, max(1, args.repeat)

    env = environment()
    print_environment(env)
    schema = args.schema
    announce([n], f"; schema {schema}, {repeat} repetitions, verify vs floor vs read, alternating")
    with tempfile.TemporaryDirectory(prefix="afp-floor-") as tmp:
        path = Path(tmp) / f"floor-{n}.sqlite"
        remove_db(path)
        with new_file_schema(schema):
            recorder = af.SqliteStore(path)
        try:
            recorded = run_agent_conversation(Conversation(n), recorder)
        finally:
            recorder.close()
        store = af.SqliteStore(path)
        conn = sqlite3.connect(path)
        try:
            run_ids = store.run_ids()
            if len(run_ids) != recorded.turns:
                raise SystemExit(f"{len(run_ids)} runs in the file, {recorded.turns} recorded")
            if store.layout != schema:
                raise SystemExit(f"the file has storage schema {store.layout}, not {schema}")
            bodies = [row.body for run_id in run_ids for row in store.read(run_id)]
            body_bytes = sum(len(body) for body in bodies)
            plain = floor if schema == 1 else floor_v2

            def floor_of(*, bodies: bool) -> int:
                if schema == 4:
                    return floor_v4(store, run_ids, bodies)
                return plain(conn, run_ids, bodies)

            variants: dict[str, Callable[[], int]] = {
                "verify": lambda: verify(store, len(run_ids)),
                "floor": lambda: floor_of(bodies=False),
                "floor+json": lambda: floor_of(bodies=True),
                "read": lambda: read(store, run_ids),
            }
            events = {name: fn() for name, fn in variants.items()}  # warm-up, and a check
            if len(set(events.values())) != 1:
                raise SystemExit(f"the variants counted different rows: {events}")
            baseline = None
            if args.baseline is not None:
                baseline = Baseline(args.baseline, path, len(run_ids))
                print(f"# base: {baseline.origin}")
            names = list(variants) + (["base"] if baseline is not None else [])
            times: dict[str, list[float]] = {name: [] for name in names}
            ratios: list[float] = []
            base_ratios: list[float] = []
            for rep in range(repeat):
                order = names[rep % len(names) :] + names[: rep % len(names)]
                this: dict[str, float] = {}
                for name in order:
                    if name == "base":
                        assert baseline is not None
                        this[name] = baseline.seconds()
                    else:
                        this[name], _ = _timed(variants[name])
                    times[name].append(this[name])
                ratios.append(this["verify"] / this["floor"])
                if baseline is not None:
                    base_ratios.append(this["base"] / this["floor"])
            if baseline is not None:
                baseline.close()
            paths = canonical_paths(bodies)
            profile = None
            if not args.no_profile:
                profiler, _, seconds = profiled(variants["verify"])
                profile = profile_report(
                    profiler, f"\n## cProfile of one verify_all ({seconds:.3f} s)", args.top
                )
        finally:
            conn.close()
            store.close()

    rows = events["verify"]
    print(
        f"\nN={n}, storage schema {schema}: {len(run_ids)} runs, {rows:,} events, "
        f"{body_bytes / 1e6:.3f} MB of bodies, {repeat} repetitions"
    )
    print(f"{'variant':<10} {'median s':>9} {'us/event':>9}  {'min-max (max/min)':<28}")
    for name in names:
        med = median(times[name])
        print(f"{name:<10} {med:>9.4f} {med / rows * 1e6:>9.2f}  {_spread(times[name]):<28}")
    ratio = median(ratios)
    vs_median = median(times["verify"]) / median(times["floor"])
    print(
        f"\nverify / floor: {ratio:.2f}x (median of per-repetition ratios; "
        f"{min(ratios):.2f}x-{max(ratios):.2f}x; ratio of medians {vs_median:.2f}x)"
    )
    if base_ratios:
        print(
            f"base / floor:   {median(base_ratios):.2f}x ({min(base_ratios):.2f}x-"
            f"{max(base_ratios):.2f}x); verify / base "
            f"{median(times['verify']) / median(times['base']):.2f}x"
        )
    met = "MET" if ratio <= TARGET else "NOT MET"
    print(f"target verify within {TARGET:.0f}x of the floor: {met}")
    print(
        "read / floor: "
        f"{median(times['read']) / median(times['floor']):.2f}x (reading rows through the store)"
    )
    print(
        "floor+json / floor: "
        f"{median(times['floor+json']) / median(times['floor']):.2f}x (each body also parsed and "
        "proven canonical, step 2.2); verify / floor+json: "
        f"{median(times['verify']) / median(times['floor+json']):.2f}x"
    )
    shown = ", ".join(f"{k} {v:,}" for k, v in paths.items())
    print(f"\ncanonical check of the stored bodies: {shown}")
    if profile is not None:
        print(profile)
    write_figures(
        args.json,
        {
            "environment": env,
            "n": n,
            "schema": schema,
            "runs": len(run_ids),
            "events": rows,
            "body_bytes": body_bytes,
            "times": times,
            "ratios": ratios,
            "ratio_median": ratio,
            "base_ratios": base_ratios,
            "canonical_paths": paths,
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
