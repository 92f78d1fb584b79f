"""Schema 2 stores an empty commit marker as its ``(stage, commit, k)`` columns. The writer
reads the candidates of the runtime's plain markers with one pattern match instead of a JSON
parse (store/sqlite_layout.py); whatever either path reads is rebuilt and compared, so the
two must decide every body alike: compacted to the same columns, or stored as it is."""

from __future__ import annotations

from collections.abc import Callable

import orjson
from hypothesis import example, given
from hypothesis import strategies as st

from agentfootprint.store.base import StoredEvent
from agentfootprint.store.sqlite_layout import _compact_commit, _parsed_marker

MUTATIONS: dict[str, Callable[[bytes], bytes]] = {
    "as written": lambda b: b,
    "a leading zero in the commit": lambda b: b.replace(b'"commit":', b'"commit":0', 1),
    "a leading zero in k": lambda b: b.replace(b"#", b"#0", 1),
    "a space": lambda b: b.replace(b",", b", ", 1),
    "an escaped first letter": lambda b: b.replace(b'"stage":"', b'"stage":"\\u0073', 1),
    "another stage_run": lambda b: b.replace(b'"stage_run":"', b'"stage_run":"x', 1),
    "writes 1": lambda b: b.replace(b'"writes":0', b'"writes":1'),
    "a member more": lambda b: b[:-1] + b',"z":0}',
}

STAGES = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
NUMBERS = st.integers(0, 2**53 + 5)


@given(STAGES, NUMBERS, NUMBERS, st.sampled_from(sorted(MUTATIONS)))
@example("system-prompt", 12, 5, "as written")
@example("tool-calls", 2**53 - 1, 2**53 - 1, "as written")
@example("s", 2**53, 1, "as written")  # past the safe integers: stored as it is
@example('a"b', 3, 1, "as written")  # a name with an escape: read by the JSON parse
@example("é", 3, 1, "as written")
@example("", 0, 0, "a leading zero in k")
def test_the_pattern_and_the_json_parse_decide_every_marker_alike(
    stage: str, number: int, k: int, mutation: str
) -> None:
    body = b'{"commit":%d,"stage":%s,"stage_run":%s,"writes":0}' % (
        number,
        orjson.dumps(stage),
        orjson.dumps(f"{stage}#{k}"),
    )
    body = MUTATIONS[mutation](body)
    event = StoredEvent(
        run_id="r", seq=0, type="commit", ts=0, body=body, event_hash=b"", chain_hash=b""
    )
    decided = _compact_commit(event)
    assert decided == _parsed_marker(body)
    if mutation == "as written" and number < 2**53 and k < 2**53:
        assert decided == (stage, number, k)
