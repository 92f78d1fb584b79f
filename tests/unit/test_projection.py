"""The projection registry, log format 2, and the verifier's dispatch on both.

Projection v1 is today's ``build_request``, byte for byte; v2 adds ``served_messages``
(history slices by reference, messages that are not in it) and ``served_tools`` (a subset by
name). The logs below are built the way the other verifier tests build crafted logs: a
:class:`RunWriter` over a :class:`MemoryStore` writes every row with correct hashes, so only
the checks on what the rows say stand between a log and its verdict.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import agentfootprint as af
import agentfootprint.logformat.request as request_module
from agentfootprint.audit.read import RunReader
from agentfootprint.logformat.calls import commit_calls
from agentfootprint.logformat.canonical import canon, parse
from agentfootprint.logformat.fold import compress_digests
from agentfootprint.logformat.hashing import hexdigest
from agentfootprint.logformat.log_formats import (
    LOG_FORMAT,
    LOG_FORMAT_V1,
    LOG_FORMAT_V2,
    LOG_FORMAT_V3,
    LOG_FORMAT_V4,
    LOG_FORMAT_V5,
    LOG_FORMAT_V6,
    LOG_FORMATS,
)
from agentfootprint.logformat.request import (
    PIECE_KINDS,
    PROJECTION,
    PROJECTIONS,
    REQUEST_VERSION,
    ProjectionError,
    RequestHasher,
    build_request,
    projection,
    request_digest,
)
from agentfootprint.store.memory import MemoryStore
from agentfootprint.store.sqlite import SqliteStore
from agentfootprint.store.writer import RunWriter
from agentfootprint.verify.verifier import Verifier

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "golden" / "demo.db"


def msg(text: str, role: str = "user") -> dict[str, Any]:
    return {"role": role, "content": text}


HISTORY = [msg("a"), msg("b", "assistant"), msg("c"), msg("d", "assistant"), msg("e")]
TOOLS = [
    {"name": "search", "description": "s", "input_schema": {}},
    {"name": "fetch", "description": "f", "input_schema": {}},
    {"name": "sum", "description": "+", "input_schema": {}},
]


def state(**extra: Any) -> dict[str, Any]:
    return {
        "model": "m",
        "params": {"temperature": 0.5},
        "system_pieces": [{"source": "base", "text": "be brief"}],
        "history": HISTORY,
        "tool_schemas": TOOLS,
        **extra,
    }


# -- projection v1: today's behaviour -------------------------------------------------------


def test_v1_describes_itself_as_run_open_always_recorded_it() -> None:
    described = projection(1).describe()
    assert described == {
        "version": 1,
        "keys": {"system": "system_pieces", "messages": "history", "tools": "tool_schemas"},
    }
    assert canon(described) == (
        b'{"keys":{"messages":"history","system":"system_pieces","tools":"tool_schemas"},'
        b'"version":1}'
    )
    assert described["keys"] == {field: key for field, (key, _) in PROJECTION.items()}
    assert PIECE_KINDS == ("system", "messages", "tools") and REQUEST_VERSION == 1


def test_the_golden_runs_recorded_v1_s_description_and_verify() -> None:
    store = SqliteStore(GOLDEN, readonly=True)
    try:
        for info in store.runs():
            opened = next(iter(store.read(info.run_id)))
            assert canon(projection(1).describe()) in opened.body
            verified = Verifier(store).verify(info.run_id)
            assert (verified.projection, verified.log_format) == (1, LOG_FORMAT_V1)
    finally:
        store.close()


def test_v1_serves_the_five_keys_as_they_are_and_ignores_v2_s_keys() -> None:
    s = state(served_messages=[{"history": [0, 1]}], served_tools=[])
    request = build_request(s)
    assert list(request) == ["model", "params", "system", "messages", "tools"]
    assert request["messages"] is HISTORY and request["tools"] is TOOLS
    assert request == build_request(s, version=1) == projection(1).build(s)
    assert build_request({"model": "m"}) == {
        "model": "m",
        "params": {},
        "system": [],
        "messages": [],
        "tools": [],
    }


def test_v1_refuses_what_it_refused_before() -> None:
    with pytest.raises(ProjectionError) as missing:
        build_request({})
    assert missing.value.key == "model"
    assert str(missing.value) == "state has no 'model': the seed stage writes it before any call"
    with pytest.raises(ProjectionError, match="state key history is an object, not an array"):
        build_request({"model": "m", "history": {}})


def test_both_projections_hash_the_same_request_shape() -> None:
    assert {PROJECTIONS[v].request_version for v in (1, 2)} == {1}
    request = build_request(state())
    assert RequestHasher(1).digests(request) == RequestHasher(2).digests(request)
    assert build_request(state(), version=2) == request  # no edits: v2 serves what v1 does


@pytest.mark.parametrize("version", [0, 5, -1, True, "2", 2.0, None])
def test_an_unknown_projection_version_is_refused(version: Any) -> None:
    with pytest.raises(ProjectionError) as caught:
        build_request(state(), version=version)
    assert caught.value.key == "projection"
    assert "projection version" in str(caught.value)
    with pytest.raises(ProjectionError):
        RequestHasher(version)


# -- projection v3: prompt-cache markers ----------------------------------------------------

MARKS = {"system": [0], "tools": [2], "messages": [4]}


def test_v3_serves_the_markers_as_prompt_cache_under_request_shape_2() -> None:
    spec = projection(3)
    assert spec.request_version == 2 and spec.piece_kinds == PIECE_KINDS
    assert spec.describe() == {
        "version": 3,
        "keys": {"system": "system_pieces", "messages": "history", "tools": "tool_schemas"},
        "edits": {"messages": "served_messages", "tools": "served_tools"},
        "fields": {"prompt_cache": "cache_markers"},
    }
    marks = dict(MARKS)
    request = build_request(state(cache_markers=marks), version=3)
    assert request["prompt_cache"] is marks  # the state's object, as it is
    assert {k: v for k, v in request.items() if k != "prompt_cache"} == build_request(state())
    # absent: nothing marked, still shape 2 (the shape is the projection's, not the state's)
    unmarked = build_request(state(), version=3)
    assert unmarked["prompt_cache"] == {"system": [], "tools": [], "messages": []}
    # the messages digest list still comes first: the SHA-256 state extends call to call
    assert spec.member_order == (
        "messages", "model", "params", "prompt_cache", "system", "tools", "v"
    )  # fmt: skip


def test_v3_hashes_the_markers_and_the_shape_into_the_request_digest() -> None:
    request = build_request(state(cache_markers=MARKS), version=3)
    got = RequestHasher(3).digests(request)
    lists = {k: got.pieces(k) for k in PIECE_KINDS}
    assert got.request == request_digest(
        "m", {"temperature": 0.5}, lists, request_version=2, scalars={"prompt_cache": MARKS}
    )
    plain = RequestHasher(2).digests(build_request(state(), version=2))
    assert lists == {k: plain.pieces(k) for k in PIECE_KINDS}  # same pieces, same digests
    assert got.request != plain.request
    moved = build_request(state(cache_markers={**MARKS, "messages": [3]}), version=3)
    assert RequestHasher(3).digests(moved).request != got.request


def test_v3_markers_index_the_lists_as_served_after_the_edits() -> None:
    edited = state(served_messages=[{"history": [3, None]}], served_tools=["fetch"])
    marks = {"system": [], "tools": [0], "messages": [1]}
    assert build_request({**edited, "cache_markers": marks}, version=3)["prompt_cache"] == marks
    with pytest.raises(ProjectionError, match="messages\\[0\\] marks 2, out of range"):
        build_request({**edited, "cache_markers": {**marks, "messages": [2]}}, version=3)


def test_v1_and_v2_ignore_cache_markers() -> None:
    for version in (1, 2):
        request = build_request(state(cache_markers="anything"), version=version)
        assert "prompt_cache" not in request


@pytest.mark.parametrize(
    ("markers", "words"),
    [
        ([0], "is an array, not an object"),
        (None, "is null, not an object"),
        ({"system": [], "tools": []}, "has no messages member"),
        ({**MARKS, "images": []}, "unknown member 'images'"),
        ({**MARKS, "tools": 2}, "tools is a number, not an array"),
        ({**MARKS, "tools": [True]}, "tools[0] is a boolean, not an integer"),
        ({**MARKS, "tools": [1.0]}, "tools[0] is a number, not an integer"),
        ({**MARKS, "tools": [3]}, "tools[0] marks 3, out of range (0 <= index < 3"),
        ({**MARKS, "tools": [-1]}, "tools[0] marks -1, out of range"),
        ({**MARKS, "tools": [1, 1]}, "tools[1] marks 1 after 1 (not increasing)"),
        ({**MARKS, "tools": [2, 1]}, "tools[1] marks 1 after 2"),
        ({**MARKS, "system": [1]}, "system[0] marks 1, out of range (0 <= index < 1"),
        ({"system": [0], "tools": [0, 1], "messages": [3, 4]}, "places 5 markers, more than 4"),
    ],
)
def test_v3_refuses_markers_that_do_not_apply(markers: Any, words: str) -> None:
    with pytest.raises(ProjectionError) as caught:
        build_request(state(cache_markers=markers), version=3)
    assert caught.value.key == "cache_markers"
    assert words in str(caught.value)
    assert "at most 4 in all" in str(caught.value)  # and says what it must be


def test_four_markers_are_allowed() -> None:
    marks = {"system": [0], "tools": [0, 2], "messages": [4]}
    assert build_request(state(cache_markers=marks), version=3)["prompt_cache"] == marks


def test_a_v3_run_verifies_and_the_reader_serves_its_markers() -> None:
    agent = af.Agent(
        provider=af.MockProvider(["one", "two"]), model="m", cache_strategy="breakpoints"
    )
    first = agent.run_sync("hi")
    result = agent.run_sync("again", continue_from=first)  # a continued run, markers moved
    assert result.state["cache_markers"] == {"system": [], "tools": [], "messages": [2]}
    assert af.verify_run(agent.store, result.run_id).projection == 3
    served = af.served_at(agent.store, result.run_id, 0)
    assert served["prompt_cache"] == result.state["cache_markers"]
    assert served == agent.config.provider.requests[-1]


# -- projection v2: served_messages ---------------------------------------------------------


SUMMARY = {"role": "user", "content": "summary of a-b"}


@pytest.mark.parametrize(
    ("segments", "served"),
    [
        ([{"history": [0, None]}], HISTORY),
        ([{"history": [3, None]}], HISTORY[3:]),  # a window
        ([{"history": [1, 3]}], HISTORY[1:3]),
        ([{"message": SUMMARY}, {"history": [2, None]}], [SUMMARY, *HISTORY[2:]]),
        (  # a replaced tool result: the slices around it are the history's own objects
            [{"history": [0, 2]}, {"message": SUMMARY}, {"history": [3, 5]}],
            [*HISTORY[:2], SUMMARY, *HISTORY[3:]],
        ),
        ([{"history": [0, 2]}, {"history": [2, 4]}], HISTORY[:4]),  # adjacent slices
        ([{"history": [5, 5]}, {"history": [5, None]}], []),  # empty slices at the end
        ([], []),  # nothing served
        ([{"message": SUMMARY}, {"message": SUMMARY}], [SUMMARY, SUMMARY]),
    ],
)
def test_served_messages_concatenates_its_segments(segments: list[Any], served: list[Any]) -> None:
    request = build_request(state(served_messages=segments), version=2)
    assert request["messages"] == served
    assert all(a is b for a, b in zip(request["messages"], served, strict=True))


def test_without_served_messages_v2_serves_the_history_itself() -> None:
    request = build_request(state(), version=2)
    assert request["messages"] is HISTORY and request["tools"] is TOOLS


def test_a_history_of_the_wrong_type_is_refused_before_the_edit() -> None:
    with pytest.raises(ProjectionError) as caught:
        build_request(state(history="x", served_messages=[]), version=2)
    assert caught.value.key == "history"


@pytest.mark.parametrize(
    ("segments", "words"),
    [
        ({"history": [0, 1]}, "is an object, not an array"),
        ("history", "is a string, not an array"),
        (None, "is null, not an array"),
        (3, "is a number, not an array"),
        ([[0, 1]], "[0] is an array, not an object with one member"),
        (["message"], "[0] is a string, not an object with one member"),
        ([{}], "[0] is an object with 0 members, not an object with one member"),
        (
            [{"history": [0, 1], "message": SUMMARY}],
            "[0] is an object with 2 members, not an object with one member",
        ),
        ([{"slice": [0, 1]}], "[0] has the unknown member 'slice'"),
        ([{"history": 2}], "[0] history is a number, not an array [start, end]"),
        ([{"history": [0]}], "[0] history is an array of 1 items, not an array [start, end]"),
        ([{"history": [0, 1, 2]}], "[0] history is an array of 3 items"),
        ([{"history": [None, 2]}], "[0] history start is null, not an integer"),
        ([{"history": [True, 2]}], "[0] history start is a boolean, not an integer"),
        ([{"history": [0.5, 2]}], "[0] history start is a number, not an integer"),
        ([{"history": ["0", 2]}], "[0] history start is a string, not an integer"),
        ([{"history": [0, False]}], "[0] history end is a boolean, not an integer or null"),
        ([{"history": [0, "end"]}], "[0] history end is a string, not an integer or null"),
        ([{"history": [-1, 2]}], "[0] history slice [-1, 2] is out of range"),
        ([{"history": [0, 6]}], "(0 <= start <= end <= 5, the length of history)"),
        ([{"history": [3, 2]}], "[0] history slice [3, 2] is out of range"),
        ([{"history": [6, None]}], "[0] history slice [6, 5] is out of range"),
        (
            [{"history": [0, 3]}, {"history": [2, 4]}],
            "[1] slices history from 2, before the end 3 of the slice before it",
        ),
        (  # slices go back, with a message between them
            [{"history": [3, None]}, {"message": SUMMARY}, {"history": [0, 1]}],
            "[2] slices history from 0, before the end 5 of the slice before it",
        ),
        ([{"message": "summary"}], "[0] message is a string, not an object"),
        ([{"message": [SUMMARY]}], "[0] message is an array, not an object"),
    ],
)
def test_served_messages_that_do_not_apply_are_refused(segments: Any, words: str) -> None:
    with pytest.raises(ProjectionError) as caught:
        build_request(state(served_messages=segments), version=2)
    assert caught.value.key == "served_messages"
    assert str(caught.value).startswith("state key served_messages ")
    assert words in str(caught.value)
    assert "it must be an array of segments" in str(caught.value)  # what to do


# -- projection v2: served_tools ------------------------------------------------------------


@pytest.mark.parametrize(
    ("names", "served"),
    [
        (["search", "fetch", "sum"], TOOLS),
        (["sum", "search"], [TOOLS[2], TOOLS[0]]),  # in the order of the names
        (["fetch"], [TOOLS[1]]),
        ([], []),  # every tool withheld
    ],
)
def test_served_tools_selects_schemas_by_name(names: list[str], served: list[Any]) -> None:
    request = build_request(state(served_tools=names), version=2)
    assert all(a is b for a, b in zip(request["tools"], served, strict=True))


@pytest.mark.parametrize(
    ("names", "schemas", "words"),
    [
        ("search", TOOLS, "is a string, not an array"),
        ({"search": True}, TOOLS, "is an object, not an array"),
        (None, TOOLS, "is null, not an array"),
        ([1], TOOLS, "[0] is a number, not a tool name"),
        (["search", None], TOOLS, "[1] is null, not a tool name"),
        (["serach"], TOOLS, "[0] names 'serach', which no schema of tool_schemas has"),
        (["sum", "sum"], TOOLS, "names 'sum' twice"),
        (["sum"], [*TOOLS, {"name": "sum"}], "two schemas are named 'sum'"),
        ([], [{"description": "no name"}], "tool_schemas[0] has no string name"),
        (["a"], [{"name": "a"}, {"name": 7}], "tool_schemas[1] has no string name"),
        (["a"], [{"name": "a"}, "b"], "tool_schemas[1] has no string name"),
    ],
)
def test_served_tools_that_do_not_apply_are_refused(
    names: Any, schemas: list[Any], words: str
) -> None:
    with pytest.raises(ProjectionError) as caught:
        build_request(state(served_tools=names, tool_schemas=schemas), version=2)
    assert caught.value.key == "served_tools"
    assert words in str(caught.value)
    assert "[] serves no tool" in str(caught.value)  # what to do


# -- the hasher stays incremental under v2 --------------------------------------------------


def counted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The piece tags the request module hashes from now on (one per canonicalised piece)."""
    tags: list[str] = []
    real = request_module.hexdigest

    def counting(tag: str, data: bytes) -> str:
        if tag.startswith("piece/"):
            tags.append(tag)
        return real(tag, data)

    monkeypatch.setattr(request_module, "hexdigest", counting)
    return tags


def test_a_sliding_window_hashes_each_message_once(monkeypatch: pytest.MonkeyPatch) -> None:
    tags = counted(monkeypatch)
    hasher = RequestHasher(2)
    history: list[Any] = []
    for i in range(12):
        history = [*history, msg(f"m{i}")]  # the fold appends: old objects carried along
        s = {
            "model": "m",
            "history": history,
            "served_messages": [{"history": [max(0, i - 3), None]}],
        }
        request = build_request(s, version=2)
        got = hasher.digests(request)
        lists = {
            k: [hexdigest(t, canon(p)) for p in request[k]] for k, (_, t) in PROJECTION.items()
        }
        assert got.request == request_digest("m", {}, lists)
    assert tags.count("piece/message") == 12  # each message once, though windows slide


def test_a_message_spliced_between_kept_ends_is_hashed_not_assumed() -> None:
    """v1's shortcut (first and last objects in place, so all are) does not hold for a
    spliced list: the message between them must be hashed for what it is."""
    first = [msg("a"), msg("b"), msg("c")]
    hasher = RequestHasher(2)
    hasher.digests(build_request({"model": "m", "history": first}, version=2))
    grown = [*first, msg("d")]
    s = {
        "model": "m",
        "history": grown,
        "served_messages": [{"history": [0, 1]}, {"message": msg("X")}, {"history": [2, None]}],
    }
    request = build_request(s, version=2)
    assert request["messages"][0] is first[0] and request["messages"][2] is first[2]
    expected = [hexdigest("piece/message", canon(m)) for m in request["messages"]]
    assert hasher.digests(request).messages == expected


def test_a_subset_of_tools_reuses_the_schemas_digests(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pieces of the previous call keep their digests wherever they move."""
    hasher = RequestHasher(2)
    hasher.digests(build_request(state(), version=2))
    tags = counted(monkeypatch)
    for names in (["sum", "search"], ["search"], ["search"], []):
        request = build_request(state(served_tools=names), version=2)
        expected = [hexdigest("piece/tool", canon(t)) for t in request["tools"]]
        assert hasher.digests(request).tools == expected
    assert "piece/tool" not in tags


# -- log format 2 and the verifier's dispatch -----------------------------------------------


def test_log_formats() -> None:
    assert LOG_FORMATS == (
        LOG_FORMAT_V1,
        LOG_FORMAT_V2,
        LOG_FORMAT_V3,
        LOG_FORMAT_V4,
        LOG_FORMAT_V5,
        LOG_FORMAT_V6,
    )
    assert LOG_FORMAT == LOG_FORMAT_V3  # an unsealed run; a sealed one is v4 (test_seals.py)


def opened(
    run_id: str = "r",
    *,
    log_format: str = LOG_FORMAT_V2,
    receipts: bool = True,
    version: Any = 2,
    **extra: Any,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "format": log_format,
        "run_id": run_id,
        "conversation_id": "c",
        "parent": None,
        "options": {"record_receipt": receipts},
        "projection": {**projection(2).describe(), "version": version},
        **extra,
    }
    return body


def marker(index: int, writes: int = 0, stage: str = "s", **extra: Any) -> tuple[str, Any]:
    body = {"commit": index, "stage": stage, "stage_run": f"{stage}#{index}", "writes": writes}
    return ("commit", {**body, **extra})


def setting(index: int, values: dict[str, Any], **extra: Any) -> list[tuple[str, Any]]:
    writes = [
        ("write", {"commit": index, "path": k, "verb": "set", "value": v})
        for k, v in values.items()
    ]
    return [*writes, marker(index, len(writes), **extra)]


class Receipts:
    """Mints the receipts a writer would, call after call, under one projection."""

    def __init__(self, version: int = 2) -> None:
        self.version = version
        self.hasher = RequestHasher(version)
        self.previous: dict[str, list[str]] = {kind: [] for kind in PIECE_KINDS}
        self.calls = 0

    def __call__(self, s: dict[str, Any], commit: int) -> tuple[str, dict[str, Any]]:
        served = self.hasher.digests(build_request(s, version=self.version))
        body = {
            "call": self.calls,
            "commit": commit,
            "model": served.model,
            "params": served.params,
            "request": served.request,
        }
        for kind in PIECE_KINDS:
            body[kind] = compress_digests(self.previous[kind], served.pieces(kind))
            self.previous[kind] = served.pieces(kind)
        self.calls += 1
        return ("receipt", body)


def close(commits: int, receipts: int, calls: int | None = None) -> list[tuple[str, Any]]:
    body = {"outcome": "answered", "commits": commits, "receipts": receipts}
    if calls is not None:
        body["calls"] = calls
    return [("run.close", body)]


def record(store: MemoryStore, opening: dict[str, Any], *batches: list[tuple[str, Any]]) -> None:
    writer = RunWriter(store, opening["run_id"], clock=lambda: 1_700_000_000_000)
    writer.append([("run.open", opening)])
    for batch in batches:
        writer.append(batch)


def failure(store: MemoryStore, run_id: str = "r") -> af.VerificationError:
    with pytest.raises(af.VerificationError) as caught:
        Verifier(store).verify(run_id)
    assert caught.value.run_id == run_id
    return caught.value


SEED = {"model": "m", "history": HISTORY[:3], "tool_schemas": TOOLS}
WINDOW = {"served_messages": [{"message": SUMMARY}, {"history": [2, None]}]}


def receipted_v2_run(store: MemoryStore, version: int = 2, run_id: str = "r") -> None:
    """Two calls served through served_messages / served_tools, receipts on."""
    mint = Receipts(version)
    after_seed = dict(SEED)
    edited = {**after_seed, **WINDOW, "served_tools": ["sum"]}
    record(
        store,
        opened(run_id, version=version),
        setting(0, SEED),
        [*setting(1, {**WINDOW, "served_tools": ["sum"]})],
        [mint(edited, 2), marker(2, stage="call-llm")],
        [mint(edited, 3), marker(3, stage="summarise")],
        close(4, 2, 2),
    )


def test_a_v2_run_served_through_edits_verifies() -> None:
    store = MemoryStore()
    receipted_v2_run(store)
    verified = Verifier(store).verify("r")
    assert verified.outcome is af.Outcome.VALID_UNSIGNED
    assert (verified.projection, verified.log_format, verified.receipts) == (2, LOG_FORMAT_V2, 2)
    hasher = Verifier(store).hasher_after("r")
    assert hasher.version == 2


def test_the_projection_is_read_from_run_open_not_assumed() -> None:
    """The same receipts under projection 1 describe another request (the whole history,
    every tool): the run.open's version decides, so the receipt fails."""
    store = MemoryStore()
    receipted_v2_run(store)
    rows = list(store.read("r"))
    relabelled = MemoryStore()
    writer = RunWriter(relabelled, "r", clock=lambda: 1_700_000_000_000)
    writer.append([("run.open", opened(version=1))])
    for row in rows[1:]:
        writer.append([(row.type, parse(row.body))])
    error = failure(relabelled)
    assert error.code == "receipt" and "messages piece 0" in error.reason


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"version": 5}, "unknown projection version 5"),
        ({"version": 0}, "unknown projection version 0"),
        ({"version": "2"}, "projection version is a string, not an integer"),
        ({"version": True}, "projection version is a boolean, not an integer"),
        ({"version": 2.5}, "projection version is a number, not an integer"),
        ({"version": None}, "projection version is null, not an integer"),
    ],
)
@pytest.mark.parametrize("log_format", LOG_FORMATS)
def test_an_unknown_or_malformed_projection_version_is_structure(
    change: dict[str, Any], words: str, log_format: str
) -> None:
    store = MemoryStore()
    body = opened(log_format=log_format)
    body["projection"] = {**body["projection"], **change}
    record(store, body, close(0, 0, 0))
    error = failure(store)
    assert (error.code, error.seq) == ("structure", 0)
    assert words in error.reason and error.reason.startswith("run.open ")


@pytest.mark.parametrize(
    ("member", "words"),
    [
        ("absent", "run.open has no projection member"),
        (None, "run.open projection is null, not an object"),
        (2, "run.open projection is a number, not an object"),
        ("v2", "run.open projection is a string, not an object"),
        ({"keys": {}}, "run.open projection has no version member"),
    ],
)
def test_a_v2_run_open_without_a_projection_is_structure(member: Any, words: str) -> None:
    store = MemoryStore()
    body = opened()
    if member == "absent":
        del body["projection"]
    else:
        body["projection"] = member
    record(store, body, close(0, 0, 0))
    error = failure(store)
    assert (error.code, error.seq) == ("structure", 0)
    assert words in error.reason


def test_a_v1_run_open_without_a_projection_means_projection_1() -> None:
    """Format v1 did not require the member: its absence was always read as projection 1."""
    store = MemoryStore()
    body = opened(log_format=LOG_FORMAT_V1)
    del body["projection"]
    mint = Receipts(1)
    record(store, body, setting(0, SEED), [mint(SEED, 1), marker(1)], close(2, 1, 1))
    verified = Verifier(store).verify("r")
    assert (verified.projection, verified.log_format) == (1, LOG_FORMAT_V1)
    body["projection"] = None  # present, but no projection: refused in v1 too
    other = MemoryStore()
    record(other, body, close(0, 0, 0))
    assert (failure(other).code, failure(other).seq) == ("structure", 0)


def test_an_unknown_log_format_names_the_ones_known() -> None:
    store = MemoryStore()
    record(store, opened(log_format="agentfootprint/log/v9"), close(0, 0, 0))
    error = failure(store)
    assert (error.code, error.seq) == ("structure", 0)
    assert "agentfootprint/log/v9" in error.reason and LOG_FORMAT_V3 in error.reason


def test_a_continued_run_may_use_another_projection_than_its_parent() -> None:
    store = MemoryStore()
    mint = Receipts(1)
    root = opened("root", version=1)
    record(store, root, setting(0, SEED), [mint(SEED, 1), marker(1)], close(2, 1, 1))
    parent = Verifier(store).verify("root")
    link = {"run_id": "root", "events": parent.events, "head": parent.head.hex()}
    mint.hasher = mint.hasher.fork(2)
    mint.version, mint.calls = 2, 0
    edited = {**SEED, **WINDOW}
    record(
        store,
        opened("child", parent=link),
        setting(0, WINDOW),
        [mint(edited, 1), marker(1)],
        close(2, 1, 1),
    )
    verifier = Verifier(store)
    child = verifier.verify("child")
    assert (child.projection, child.ancestors) == (2, ("root",))
    assert verifier.hasher_after("child").version == 2
    assert verifier.hasher_after("root").version == 1


# -- format v2's call markers ---------------------------------------------------------------


def unreceipted(*batches: list[tuple[str, Any]], log_format: str = LOG_FORMAT_V2) -> MemoryStore:
    store = MemoryStore()
    record(store, opened(log_format=log_format, receipts=False), setting(0, SEED), *batches)
    return store


def test_calls_marked_on_their_commits_verify_whatever_the_stage() -> None:
    store = unreceipted(
        [marker(1, stage="call-llm", call=0)],
        [marker(2, stage="route")],
        [marker(3, stage="summarise", call=1)],
        close(4, 0, 2),
    )
    verified = Verifier(store).verify("r")
    assert verified.outcome is af.Outcome.VALID_UNSIGNED and verified.receipts == 0


def test_an_unsealed_v2_run_checks_the_markers_it_has() -> None:
    store = unreceipted([marker(1, call=0)], [marker(2, call=1)])
    assert Verifier(store).verify("r").outcome is af.Outcome.UNSEALED


@pytest.mark.parametrize(
    ("batches", "seq", "words"),
    [
        pytest.param(  # a call with no marker: run.close counts more calls than markers
            [[marker(1, stage="call-llm")], close(2, 0, 1)],
            6,
            "run.close counts 1 calls but 0 commit markers carry call",
            id="missing",
        ),
        pytest.param(
            [[marker(1, call=0)], [marker(2, call=1)], close(3, 0, 1)],
            7,
            "run.close counts 1 calls but 2 commit markers carry call",
            id="extra",
        ),
        pytest.param(
            [[marker(1, call=1)], close(2, 0, 1)],
            5,
            "commit 1 carries call 1 where call 0 was expected",
            id="out-of-order",
        ),
        pytest.param(
            [[marker(1, call=0)], [marker(2, call=0)], close(3, 0, 2)],
            6,
            "commit 2 carries call 0 where call 1 was expected",
            id="repeated",
        ),
        pytest.param(
            [[marker(1, call=0)], close(2, 0)],
            6,
            "field 'calls' missing or not int",
            id="close-without-calls",
        ),
        pytest.param(
            [[marker(1, call=True)], close(2, 0, 1)],
            5,
            "field 'call' missing or not int",
            id="call-a-boolean",
        ),
        pytest.param(
            [[marker(1, call="0")], close(2, 0, 1)],
            5,
            "field 'call' missing or not int",
            id="call-a-string",
        ),
        pytest.param(
            [[marker(1, call=None)], close(2, 0, 1)],
            5,
            "field 'call' missing or not int",
            id="call-null",
        ),
    ],
)
def test_call_markers_that_disagree_are_structure(
    batches: list[list[tuple[str, Any]]], seq: int, words: str
) -> None:
    error = failure(unreceipted(*batches))
    assert (error.code, error.seq) == ("structure", seq), error
    assert words in error.reason


def test_with_receipts_on_no_commit_marker_carries_call() -> None:
    store = MemoryStore()
    mint = Receipts()
    record(store, opened(), setting(0, SEED), [mint(SEED, 1), marker(1, call=0)], close(2, 1, 1))
    error = failure(store)
    assert (error.code, error.seq) == ("structure", 6)
    assert "receipts are on" in error.reason


def test_a_receipt_in_a_v2_run_without_receipts_is_structure() -> None:
    mint = Receipts()
    error = failure(unreceipted([mint(SEED, 1), marker(1)], close(2, 1, 1)))
    assert (error.code, error.seq) == ("structure", 5)
    assert "receipts are off" in error.reason


def test_format_v1_ignores_call_members_and_needs_no_calls() -> None:
    """v1 stays as it was: a ``call`` on a marker is a member the table does not list."""
    store = unreceipted(
        [marker(1, call=7)], [marker(2, stage="call-llm")], close(3, 0), log_format=LOG_FORMAT_V1
    )
    assert Verifier(store).verify("r").log_format == LOG_FORMAT_V1


# -- finding calls: commit_calls and the reader ---------------------------------------------


@pytest.mark.parametrize(
    ("log_format", "body", "receipts", "calls"),
    [
        (LOG_FORMAT_V1, {"stage": "call-llm"}, 0, 1),
        (LOG_FORMAT_V1, {"stage": "summarise"}, 0, 0),
        (LOG_FORMAT_V1, {"stage": "route", "call": 0}, 0, 0),
        (LOG_FORMAT_V1, {"stage": "call-llm"}, 2, 2),
        (LOG_FORMAT_V2, {"stage": "call-llm"}, 0, 0),
        (LOG_FORMAT_V2, {"stage": "summarise", "call": 3}, 0, 1),
        (LOG_FORMAT_V2, {"stage": "s"}, 1, 1),
        (LOG_FORMAT_V2, {"stage": "s"}, 3, 3),
    ],
)
def test_commit_calls(log_format: str, body: dict[str, Any], receipts: int, calls: int) -> None:
    assert commit_calls(log_format, body, receipts) == calls


def test_commit_calls_refuses_a_format_it_does_not_know() -> None:
    with pytest.raises(ValueError, match="unknown log format 'agentfootprint/log/v9'"):
        commit_calls("agentfootprint/log/v9", {"stage": "call-llm"}, 0)


def test_the_reader_finds_marked_calls_and_serves_them_under_the_run_s_projection() -> None:
    edited = {**SEED, **WINDOW, "served_tools": ["fetch"]}
    store = unreceipted(
        setting(1, {**WINDOW, "served_tools": ["fetch"]}),
        [marker(2, stage="call-llm", call=0)],
        [marker(3, stage="summarise", call=1)],
        [marker(4, stage="call-llm")],  # no call marker: no call, whatever its stage
        close(5, 0, 2),
    )
    Verifier(store).verify("r")
    reader = RunReader(store)
    served = reader.served_requests("r")
    assert served == [build_request(edited, version=2)] * 2
    assert served[0]["messages"] == [SUMMARY, HISTORY[2]] and served[0]["tools"] == [TOOLS[1]]
    assert reader.served_at("r", 1) == served[1] and reader.receipt_at("r", 0) is None
    with pytest.raises(af.UsageError, match="has no call 2"):
        reader.served_at("r", 2)


def test_the_reader_finds_v1_calls_by_their_stage() -> None:
    store = unreceipted(
        [marker(1, stage="call-llm")],
        [marker(2, stage="summarise", call=0)],
        close(3, 0),
        log_format=LOG_FORMAT_V1,
    )
    assert RunReader(store).served_requests("r") == [build_request(SEED)]


def test_the_reader_rebuilds_receipted_v2_calls() -> None:
    store = MemoryStore()
    receipted_v2_run(store)
    reader = RunReader(store)
    served = reader.served_requests("r")
    assert len(served) == 2 and served[0]["messages"] == [SUMMARY, HISTORY[2]]
    receipt = reader.receipt_at("r", 1)
    assert receipt is not None and receipt.call == 1 and receipt.commit == 3


def test_the_reader_refuses_a_run_open_with_an_unknown_projection() -> None:
    store = MemoryStore()
    record(store, opened(version=9), close(0, 0, 0))
    with pytest.raises(af.VerificationError) as caught:
        RunReader(store).served_requests("r")
    assert caught.value.code == "structure" and "projection version 9" in caught.value.reason
