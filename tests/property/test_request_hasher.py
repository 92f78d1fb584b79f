"""The incremental hashers equal the reference definitions byte for byte."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from agentfootprint.verify.canonical import canon, canon_object
from agentfootprint.verify.chain import event_envelope
from agentfootprint.verify.fold import compress_digests, expand_digests
from agentfootprint.verify.hashing import hexdigest
from agentfootprint.verify.request import PROJECTION, RequestHasher, request_digest

texts = st.text(max_size=20)
messages = st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant"]), "content": texts})
pieces = st.lists(st.fixed_dictionaries({"source": st.just("base"), "text": texts}), max_size=3)
tools = st.lists(st.fixed_dictionaries({"name": texts, "description": texts}), max_size=3)
params = st.dictionaries(
    st.sampled_from(["temperature", "max_tokens"]),
    st.integers(0, 9) | st.floats(0, 2, allow_nan=False),
    max_size=2,
)
# A sequence of calls: each call's history either extends the previous one (append), is
# rewritten (a window), or is a fresh list with equal content (identity lost, digests equal).
steps = st.lists(
    st.tuples(
        st.sampled_from(["extend", "rewrite", "copy"]),
        st.lists(messages, max_size=3),
        pieces,
        tools,
        params,
    ),
    min_size=1,
    max_size=8,
)


def reference(request: dict[str, Any]) -> tuple[dict[str, list[str]], str]:
    lists = {
        kind: [hexdigest(tag, canon(p)) for p in request[kind]]
        for kind, (_key, tag) in PROJECTION.items()
    }
    return lists, request_digest(request["model"], request["params"], lists)


@given(steps)
def test_incremental_request_digest_equals_reference(plan: list[Any]) -> None:
    hasher = RequestHasher()
    history: list[dict[str, Any]] = []
    previous: dict[str, list[str]] = {kind: [] for kind in PROJECTION}
    for how, new, system, tool_list, call_params in plan:
        if how == "extend":
            history = history + new
        elif how == "rewrite":
            history = new + history[len(new) :]
        else:
            history = [dict(m) for m in history] + new
        request = {
            "model": "m",
            "params": call_params,
            "system": system,
            "messages": history,
            "tools": tool_list,
        }
        lists, digest = reference(request)
        got = hasher.digests(request)
        assert got.request == digest
        for kind in PROJECTION:
            assert list(got.pieces(kind)) == lists[kind]
            stored = compress_digests(previous[kind], lists[kind])
            assert expand_digests(previous[kind], stored) == lists[kind]
            previous[kind] = lists[kind]
        fork = hasher.fork()
        assert fork.digests(request).request == digest


@given(
    st.text(),
    st.integers(0, 2**53 - 1),
    st.text(min_size=1),
    st.integers(0, 2**53 - 1),
    st.dictionaries(st.text(), st.integers(-(2**53 - 1), 2**53 - 1)),
)
def test_event_envelope_equals_canon_object(
    run_id: str, seq: int, type_: str, ts: int, body: dict[str, int]
) -> None:
    data = canon(body)
    members = {
        "body": data,
        "run": canon(run_id),
        "seq": canon(seq),
        "ts": canon(ts),
        "type": canon(type_),
    }
    assert event_envelope(run_id, seq, type_, ts, data) == canon_object(members)
    assert canon_object(members) == canon(
        {"body": body, "run": run_id, "seq": seq, "ts": ts, "type": type_}
    )
