"""Build the request projection 4 vectors (docs/log-format.md section 8: ``served_system``,
``served_results``) in ``tests/vectors/projection4/``: ``*.db``, their ``*.afp`` bundle
twins, and the index ``projection4.json``.

Run ``python tests/vectors/build_projection4.py`` to rebuild them. No agent writes projection
4 yet (the findings ledger will), so each vector is written row by row
(``tests/projection4_logs.py``): a run whose calls are served system pieces through
``served_system`` (a request-only piece after a slice; a slice that drops a piece and another
piece, with a tool result replaced through ``served_results``) and its continuation (the
edits removed, then a piece before a slice), every receipt minted by the library's
``RequestHasher``. The damaged vectors: a ``served_system`` out of range, with overlapping
slices, with a wrong member, with a piece that is not an object; a ``served_results`` naming
no served tool result; a receipt minted for the unedited system list; a prompt-cache marker
past the served system list (in range of ``system_pieces``). Each receipt there is minted for
what a verifier that did not refuse the damage would rebuild (a slice clamped, a wrong member
read as a piece, a marker checked before the edit), so only the refusal section 8 demands
fails it: with **receipt**, at the root's second receipt. Each
entry of ``projection4.json`` names the run the expected verdict is about (``run``), that
verdict or failure code and its seq (``code``, ``seq``), and every verdict whole-file
verification gives (``verdicts``). Both verifiers, the library's and the independent one of
``tests/spec``, must give them (``tests/spec/test_projection4_cases.py``); the report's
JavaScript verifier too (``tests/browser``, which opens every vector).
"""

from __future__ import annotations

import re
import sqlite3
import sys
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the log builder

from vector_index import Entry, verdicts

import agentfootprint as af
from agentfootprint.exchange.bundle_write import write_bundle
from projection4_logs import CHILD, LEDGER, ROOT, SYSTEM, Damage, served_run

HERE = Path(__file__).resolve().parent / "projection4"

Build = Callable[[Any], None]
#: the root's commit whose edits the damaged vectors change (the one before its second call)
EDITED = 4
MARKS = {"system": [1], "tools": [], "messages": []}


def _valid(store: Any) -> None:
    served_run(store)


def _marked_piece(store: Any) -> None:
    """A marker on index 2 of the first call's served system: the piece after the slice
    (system_pieces holds 2), moved to 1 before the second call."""
    served_run(
        store,
        extra={
            (ROOT, 1): [("cache_markers", "set", {**MARKS, "system": [2]})],
            (ROOT, EDITED): [("cache_markers", "set", MARKS)],
        },
    )


def _written(value: Any, lenient: list[Any]) -> Build:
    """The root's commit 4 writes ``value`` as its served_system; its call 1 is receipted for
    ``lenient``, the system list a verifier that did not refuse the value would serve (Python
    slices clamp, a wrong member read as a piece...): only the refusal fails the receipt."""
    return lambda store: served_run(
        store,
        Damage(
            written={(ROOT, EDITED, "served_system"): value},
            served={(ROOT, 1): lambda request: {**request, "system": lenient}},
        ),
    )


def _no_result_named(store: Any) -> None:
    """served_results names call_9, which no served message carries; the receipt hashes the
    messages unreplaced (what ignoring the name would serve)."""

    def unreplaced(state: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in state.items() if k != "served_results"}

    served_run(
        store,
        Damage(
            written={
                (ROOT, EDITED, "served_results"): [{"tool_call_id": "call_9", "content": "a"}]
            },
            minted={(ROOT, 1): unreplaced},
        ),
    )


def _unedited(store: Any) -> None:
    """The writer hashed system_pieces whole, though the state served a slice and a piece."""

    def without(state: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in state.items() if k != "served_system"}

    served_run(store, Damage(minted={(ROOT, 1): without}))


def _marker_past(store: Any) -> None:
    """One piece served in place of system_pieces (which holds 2), and a marker on index 1:
    in range of system_pieces, past the served list. The receipt is minted for that state
    without the markers' check, as a writer that checked them before the edit would."""
    alone = [{"piece": LEDGER[1]}]
    served_run(
        store,
        Damage(
            written={(ROOT, EDITED, "served_system"): alone},
            minted={(ROOT, 1): lambda state: {**state, "served_system": alone}},
            unchecked=frozenset({(ROOT, 1)}),
        ),
        extra={(ROOT, EDITED): [("cache_markers", "set", MARKS)]},
    )


#: (about, build, the run whose verdict is expected, that verdict or failure code)
CASES: list[tuple[str, Build, str, str]] = [
    ("system pieces served across calls and a continuation", _valid, CHILD, "VALID_UNSIGNED"),
    ("a cache marker on a served piece", _marked_piece, CHILD, "VALID_UNSIGNED"),
    (
        "served_system out of range",
        _written([{"system": [0, 3]}, {"piece": LEDGER[1]}], [*SYSTEM, LEDGER[1]]),
        ROOT,
        "receipt",
    ),
    (
        "served_system with overlapping slices",
        _written([{"system": [0, 2]}, {"system": [1, None]}], [*SYSTEM, SYSTEM[1]]),
        ROOT,
        "receipt",
    ),
    (
        "served_system with a wrong member",
        _written([{"system": [0, 1]}, {"message": LEDGER[1]}], [SYSTEM[0], LEDGER[1]]),
        ROOT,
        "receipt",
    ),
    (
        "served_system with a piece that is not an object",
        _written(
            [{"system": [0, 1]}, {"piece": LEDGER[1]["text"]}], [SYSTEM[0], LEDGER[1]["text"]]
        ),
        ROOT,
        "receipt",
    ),
    (
        "served_results naming no served tool result",
        _no_result_named,
        ROOT,
        "receipt",
    ),
    ("a receipt that does not match the served system", _unedited, ROOT, "receipt"),
    ("a cache marker past the served system", _marker_past, ROOT, "receipt"),
]


def build(folder: Path) -> list[Entry]:
    folder.mkdir(parents=True, exist_ok=True)
    entries = []
    for about, make, run, expected in CASES:
        stem = re.sub("[^a-z0-9]+", "-", about.lower()).strip("-")
        db, afp = folder / f"{stem}.db", folder / f"{stem}.afp"
        for stale in [*folder.glob(f"{stem}.db*"), afp]:
            stale.unlink(missing_ok=True)
        with af.SqliteStore(db) as store:
            make(store)
        _compact(db)
        with af.SqliteStore(db, readonly=True) as store:
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
    (HERE / "projection4.json").write_bytes(index + b"\n")
    print(f"wrote {len(entries)} vectors to {HERE}", file=sys.stderr)


if __name__ == "__main__":
    main()
