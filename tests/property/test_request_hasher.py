"""The incremental hashers equal the reference definitions byte for byte, under every
projection: v1's plain lists, v2's spliced message segments and tool subsets, and v3's
cache markers (request shape 2)."""

from __future__ import annotations

import operator
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from agentfootprint.logformat.canonical import canon, canon_object
from agentfootprint.logformat.chain import (
    EVENT_TYPES,
    chain_hash,
    event_envelope,
    event_hash,
)
from agentfootprint.logformat.fold import compress_digests, expand_digests
from agentfootprint.logformat.hashing import digest, hexdigest
from agentfootprint.logformat.request import (
    PIECE_KINDS,
    PROJECTION,
    PROJECTIONS,
    Projection,
    RequestHasher,
    build_request,
    request_digest,
)

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


def reference(request: dict[str, Any], version: int = 1) -> tuple[dict[str, list[str]], str]:
    """Piece digests and the request digest by their definitions (docs section 8)."""
    spec = PROJECTIONS[version]
    lists = {
        f.name: [hexdigest(str(f.tag), canon(p)) for p in request[f.name]] for f in spec.pieces
    }
    scalars = {
        f.name: request[f.name]
        for f in spec.fields
        if f.tag is None and f.name not in ("model", "params")
    }
    digest = request_digest(
        request["model"],
        request["params"],
        lists,
        request_version=spec.request_version,
        scalars=scalars,
    )
    return lists, digest


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


def test_the_hasher_member_order_is_computed_from_the_field_names() -> None:
    for spec in PROJECTIONS.values():
        assert spec.member_order == tuple(sorted([f.name for f in spec.fields] + ["v"]))
        # so the SHA state extends, under every request shape (v3's prompt_cache included)
        assert spec.member_order[0] == spec.grows == "messages"
        assert spec.piece_kinds == PIECE_KINDS


def segments_for(data: st.DataObject, history: list[Any]) -> list[dict[str, Any]]:
    """A random served_messages: increasing, non-overlapping history slices (end null or
    not) around messages that are not in the history."""
    segments: list[dict[str, Any]] = []
    floor = 0
    for _ in range(data.draw(st.integers(0, 4))):
        if data.draw(st.booleans()):
            segments.append({"message": data.draw(messages)})
        elif floor <= len(history):
            start = data.draw(st.integers(floor, len(history)))
            end = data.draw(st.integers(start, len(history)) | st.none())
            segments.append({"history": [start, end]})
            floor = len(history) if end is None else end
    return segments


named_tools = st.lists(
    st.fixed_dictionaries({"name": texts, "description": texts}),
    max_size=4,
    unique_by=lambda t: t["name"],
)


@given(
    st.lists(
        st.tuples(st.sampled_from(["extend", "rewrite", "copy"]), st.lists(messages, max_size=3)),
        min_size=1,
        max_size=8,
    ),
    st.data(),
)
def test_incremental_request_digest_equals_reference_under_projection_2(
    plan: list[Any], data: st.DataObject
) -> None:
    """The state keeps its objects from call to call (as the fold does); served_messages
    and served_tools splice and select them, so the hasher sees the same objects at other
    positions, messages that are not in the history, and rewritten histories."""
    hasher = RequestHasher(2)
    history: list[dict[str, Any]] = []
    schemas = data.draw(named_tools)
    for how, new in plan:
        if how == "extend":
            history = history + new
        elif how == "rewrite":
            history = new + history[len(new) :]
        else:
            history = [dict(m) for m in history] + new
        state: dict[str, Any] = {"model": "m", "history": history, "tool_schemas": schemas}
        expected = history
        if data.draw(st.booleans()):
            segments = state["served_messages"] = segments_for(data, history)
            expected = []
            for segment in segments:
                if "message" in segment:
                    expected.append(segment["message"])
                else:
                    start, end = segment["history"]
                    expected.extend(history[start:end])
        if data.draw(st.booleans()):
            order = data.draw(st.permutations([t["name"] for t in schemas]))
            state["served_tools"] = list(order[: data.draw(st.integers(0, len(order)))])
        request = build_request(state, version=2)
        # served by reference: the very objects of the state, in segment order
        assert len(request["messages"]) == len(expected)
        assert all(map(operator.is_, request["messages"], expected))
        lists, digest = reference(request, 2)
        got = hasher.digests(request)
        assert got.request == digest
        for kind in PIECE_KINDS:
            assert list(got.pieces(kind)) == lists[kind]
        assert hasher.fork().digests(request).request == digest


def markers_for(data: st.DataObject, request: dict[str, Any]) -> dict[str, list[int]]:
    """Random cache markers that apply to the served lists (at most 4 in all)."""
    markers: dict[str, list[int]] = {}
    room = 4
    for name in ("system", "tools", "messages"):
        n = len(request[name])
        picked = data.draw(st.sets(st.integers(0, n - 1), max_size=min(room, n))) if n else set()
        markers[name] = sorted(picked)
        room -= len(picked)
    return markers


@given(
    st.lists(
        st.tuples(st.sampled_from(["extend", "rewrite", "copy"]), st.lists(messages, max_size=3)),
        min_size=1,
        max_size=8,
    ),
    st.data(),
)
def test_incremental_request_digest_equals_reference_under_projection_3(
    plan: list[Any], data: st.DataObject
) -> None:
    """Markers that move from call to call (the breakpoints strategy marks the last message)
    or stay, over windows and tool subsets: the incremental digest is the reference's."""
    hasher = RequestHasher(3)
    history: list[dict[str, Any]] = []
    schemas = data.draw(named_tools)
    system = data.draw(pieces)
    for how, new in plan:
        if how == "extend":
            history = history + new
        elif how == "rewrite":
            history = new + history[len(new) :]
        else:
            history = [dict(m) for m in history] + new
        state: dict[str, Any] = {
            "model": "m",
            "history": history,
            "tool_schemas": schemas,
            "system_pieces": system,
        }
        if data.draw(st.booleans()):
            state["served_messages"] = segments_for(data, history)
        if data.draw(st.booleans()):
            state["served_tools"] = [t["name"] for t in schemas][: data.draw(st.integers(0, 4))]
        if data.draw(st.booleans()):
            state["cache_markers"] = markers_for(data, build_request(state, version=3))
        request = build_request(state, version=3)
        lists, digest = reference(request, 3)
        got = hasher.digests(request)
        assert got.request == digest
        assert request["prompt_cache"] == state.get(
            "cache_markers", {"system": [], "tools": [], "messages": []}
        )
        for kind in PIECE_KINDS:
            assert list(got.pieces(kind)) == lists[kind]
        assert hasher.fork().digests(request).request == digest


def test_a_hasher_forked_into_another_projection_hashes_as_a_fresh_one() -> None:
    history = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]
    state = {"model": "m", "history": history, "served_messages": [{"history": [1, None]}]}
    parent = RequestHasher(1)
    parent.digests(build_request({"model": "m", "history": history}))
    request = build_request(state, version=2)
    child = parent.fork(2)
    assert child.version == 2 and parent.version == 1
    assert child.digests(request) == RequestHasher(2).digests(request)
    marked = build_request(
        {**state, "cache_markers": {"system": [], "tools": [], "messages": [0]}}, version=3
    )
    assert parent.fork(3).digests(marked) == RequestHasher(3).digests(marked)


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


@given(
    st.text(),
    st.lists(
        st.tuples(
            st.integers(0, 2**53 - 1),
            st.one_of(st.sampled_from(sorted(EVENT_TYPES)), st.text(min_size=1)),
            st.integers(-(2**53 - 1), 2**53 - 1),
            st.dictionaries(st.text(), st.text()),
        ),
        max_size=5,
    ),
)
def test_event_hash_and_chain_hash_hashed_in_parts_are_the_specs_digests(
    run_id: str, rows: list[tuple[int, str, int, dict[str, str]]]
) -> None:
    """The event hash and chain link, hashed in parts from copied states, are byte for byte
    ``H("event", envelope)`` and ``H("chain", c_prev || e)`` (docs/log-format.md section 3)."""
    head = bytes(32)
    for seq, type_, ts, body in rows:
        data = canon(body)
        e = event_hash(run_id, seq, type_, ts, data)
        assert e == digest("event", event_envelope(run_id, seq, type_, ts, data))
        assert chain_hash(head, e) == digest("chain", head + e)
        head = chain_hash(head, e)


def test_a_growing_field_that_does_not_sort_first_is_hashed_right() -> None:
    """The member order is computed, not assumed: a projection whose growing field sorts after
    others (here ``system``: ``messages``, ``model`` and ``params`` come before it) keeps its
    SHA-256 state only while those members' bytes stay the same."""
    spec = Projection(version=99, request_version=1, fields=PROJECTIONS[1].fields, grows="system")
    hasher = RequestHasher(spec)
    system: list[Any] = []
    for i in range(6):
        system = [*system, {"source": "base", "text": f"piece {i}"}]
        request = {
            "model": "m" if i < 3 else "n",
            "params": {"temperature": i % 2},
            "system": system,
            "messages": [{"role": "user", "content": "hi"}] * (i % 3),
            "tools": [],
        }
        lists, digest = reference(request)
        assert hasher.digests(request).request == digest
        assert [lists[k] for k in PIECE_KINDS] == [
            hasher.digests(request).pieces(k) for k in PIECE_KINDS
        ]
