"""Build the log format v6 vectors (docs/log-format.md section 5.10: ``reads`` on writes) in
``tests/vectors/provenance/``: ``*.db``, their ``*.afp`` bundle twins, and the index
``provenance.json``.

Run ``python tests/vectors/build_provenance.py`` to rebuild them. Every vector starts from
runs recorded for real by the library with ``write_provenance="reads-prefix"`` (the README's
quickstart: a tool call, then an answer; then a continuation), then its continuation's rows
are changed and re-chained, so that only the checks of section 5.10 can catch the change:
a ``reads`` naming a key absent at that commit (forged), out of order, missing, or present in
a format v3 run, and, valid, a ``reads`` naming a key its own commit writes after it. Each
entry of ``provenance.json`` names the run the expected verdict is about (``run``), that
verdict or failure code and its seq (``code``, ``seq``), and every verdict whole-file
verification gives (``verdicts``). Both verifiers, the library's and the independent one of
``tests/spec``, must give them (``tests/spec/test_provenance_cases.py``); the report's
JavaScript verifier too (``tests/browser``).
"""

from __future__ import annotations

import itertools
import re
import sqlite3
import sys
import tempfile
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import orjson
from vector_index import Entry, verdicts

import agentfootprint as af
from agentfootprint.exchange.bundle_write import write_bundle
from agentfootprint.logformat.canonical import canon
from agentfootprint.logformat.log_formats import LOG_FORMAT_V3
from agentfootprint.testing.tamper import Row, plain, read_rows, reencoded, rewrite, tampering

HERE = Path(__file__).resolve().parent / "provenance"
ROOT, CHILD = "run-root", "run-child"
_ANSWER = "final_answer"


def _add(args: dict[str, Any]) -> Any:
    return args["a"] + args["b"]


def record(path: Path) -> None:
    """The quickstart with write provenance, and its continuation (fixed ids and clock)."""
    ticks, ids = itertools.count(1_800_000_000_000), iter([ROOT, CHILD])
    add = af.define_tool(
        name="add",
        description="Add two numbers.",
        input_schema={
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
            "required": ["a", "b"],
        },
        execute=_add,
    )
    script = af.MockProvider(
        [af.reply(tool_calls=[af.tool_call("add", {"a": 2, "b": 3})]), "2 + 3 = 5.", "Still 5."]
    )
    with af.Agent(
        provider=script,
        model="my-model",
        system="You add numbers.",
        tools=[add],
        store=path,
        temperature=0,
        write_provenance="reads-prefix",
        ports=af.Ports(clock=lambda: next(ticks), run_ids=lambda: next(ids)),
    ) as agent:
        root = agent.run_sync("What is 2 + 3?")
        agent.run_sync("Sure?", continue_from=root)


Change = Callable[[list[Row]], list[tuple[str, int, bytes]]]


def _write_of(rows: list[Row], path: str, nth: int = 0) -> int:
    found = [i for i, r in enumerate(rows) if r.type == "write" and r.value["path"] == path]
    return found[nth]


def _reads(path: str, reads: Any, nth: int = 0) -> Change:
    """The ``nth`` write of ``path`` with ``reads`` replaced (a missing key: removed)."""

    def change(rows: list[Row]) -> list[tuple[str, int, bytes]]:
        out = plain(rows)
        i = _write_of(rows, path, nth)

        def edit(body: dict[str, Any]) -> None:
            if reads is None:
                del body["reads"]
            else:
                body["reads"] = reads

        out[i] = reencoded(rows[i], edit)
        return out

    return change


def _in_v3(rows: list[Row]) -> list[tuple[str, int, bytes]]:
    """The continuation said to be format v3, its writes keeping their ``reads``."""
    out = plain(rows)
    out[0] = reencoded(rows[0], lambda body: body.__setitem__("format", LOG_FORMAT_V3))
    return out


def _untouched(rows: list[Row]) -> list[tuple[str, int, bytes]]:
    return plain(rows)


#: two keys whose code point order (U+FFFF, then U+1F600) is not their UTF-16 order
_FFFF, _EMOJI = "\uffff", "\U0001f600"


def _code_point_order(rows: list[Row]) -> list[tuple[str, int, bytes]]:
    """The seed's commit also sets the keys U+FFFF and U+1F600; the answer's write then
    says it read both, sorted by code point (a sort by UTF-16 code unit reverses them)."""
    out = plain(rows)
    marker = next(i for i, r in enumerate(rows) if r.type == "commit")
    made = [
        (
            "write",
            rows[marker].ts,
            canon({"commit": 0, "path": key, "reads": [], "value": 1, "verb": "set"}),
        )
        for key in (_FFFF, _EMOJI)
    ]
    count = rows[marker].value["writes"] + 2
    out[marker] = reencoded(rows[marker], lambda body: body.__setitem__("writes", count))
    answer = _write_of(rows, _ANSWER, 1)
    read = ["iteration", "last_response", _FFFF, _EMOJI]
    out[answer] = reencoded(rows[answer], lambda body: body.__setitem__("reads", read))
    return out[:marker] + made + out[marker:]


#: (about, the change to the continuation's rows, the run the verdict is about, verdict)
CASES: list[tuple[str, Change, str, str]] = [
    ("the quickstart and its continuation, reads recorded", _untouched, CHILD, "VALID_UNSIGNED"),
    (
        "a forged reads naming a key absent at that commit",
        # the continuation's first reply (commit 4) said to have read final_answer, which its
        # seed stage deleted in commit 0
        _reads(
            "last_response",
            ["final_answer", "history", "iteration", "model", "params", "system_pieces"],
            nth=1,  # (its first write of last_response is the seed's delete)
        ),
        CHILD,
        "structure",
    ),
    (
        "reads naming a key its own commit writes after it",
        # the answer's history append (commit 6) said to have read final_answer, which the
        # seed deleted and the same commit writes after it: allowed (before or after it)
        _reads("history", ["final_answer", "iteration", "last_response"], nth=1),
        CHILD,
        "VALID_UNSIGNED",
    ),
    (
        "reads out of order",
        _reads("final_answer", ["last_response", "iteration"]),
        CHILD,
        "structure",
    ),
    (
        "reads naming a key twice",
        _reads("final_answer", ["iteration", "iteration"]),
        CHILD,
        "structure",
    ),
    ("reads holding a number", _reads("final_answer", ["iteration", 7]), CHILD, "structure"),
    ("a write without reads in format v6", _reads("final_answer", None), CHILD, "structure"),
    ("reads on writes in format v3", _in_v3, CHILD, "structure"),
    ("reads in code point order, not UTF-16 order", _code_point_order, CHILD, "VALID_UNSIGNED"),
]


def build(folder: Path) -> list[Entry]:
    folder.mkdir(parents=True, exist_ok=True)
    entries = []
    with tempfile.TemporaryDirectory() as scratch:
        base = Path(scratch) / "base.db"
        record(base)
        for about, change, run, expected in CASES:
            stem = re.sub("[^a-z0-9]+", "-", about.lower()).strip("-")
            db, afp = folder / f"{stem}.db", folder / f"{stem}.afp"
            for stale in [*folder.glob(f"{stem}.db*"), afp]:
                stale.unlink(missing_ok=True)
            db.write_bytes(base.read_bytes())
            with tampering(db) as conn:
                rewrite(conn, CHILD, change(read_rows(conn, CHILD)))
            _compact(db)
            with af.SqliteStore(db) as store:
                write_bundle(store, [ROOT, CHILD], afp, library="agentfootprint vectors")
            for path in (db, afp):
                found = verdicts(path)
                mine = [v for v in found if v[0] == run and v[1] == expected]
                if not mine:
                    raise SystemExit(f"{path.name}: {run} is not {expected}: {found}")
                entries.append(Entry(path.name, about, run, expected, mine[0][2], found))
    return entries


def _compact(db: Path) -> None:
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA journal_mode=DELETE")
    conn.execute("VACUUM")
    conn.close()


def main() -> None:
    entries = build(HERE)
    index = orjson.dumps([asdict(e) for e in entries], option=orjson.OPT_INDENT_2)
    (HERE / "provenance.json").write_bytes(index + b"\n")
    print(f"wrote {len(entries)} vectors to {HERE}", file=sys.stderr)


if __name__ == "__main__":
    main()
