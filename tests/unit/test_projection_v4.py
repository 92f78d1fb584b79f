"""Request projection v4 (docs/log-format.md section 8): v3 plus ``served_system`` (the system
list served as slices of ``system_pieces`` by reference and pieces that are not in it) and
``served_results`` (tool results served with another content, on the wire only).

What is proven here: the segments serve the very objects of ``system_pieces`` in order, and
every malformed value is refused naming the key and saying what it must be; the edits apply
in the documented order, and ``cache_markers`` index the lists as served after them; the
run.open description; the receipt hasher's digests for a spliced system list equal the
digests computed from nothing, call after call; and logs whose served system changes from
call to call (a piece added, removed, changed; a continued run) verify, while a receipt
minted for another system list, or a state whose edit does not apply, fails with
**receipt** at that receipt.
"""

from __future__ import annotations

from typing import Any

import pytest

import agentfootprint as af
import agentfootprint.logformat.request as request_module
from agentfootprint.audit.read import RunReader
from agentfootprint.logformat.canonical import canon
from agentfootprint.logformat.hashing import hexdigest
from agentfootprint.logformat.request import (
    PIECE_KINDS,
    ProjectionError,
    RequestHasher,
    build_request,
    projection,
    request_digest,
)
from agentfootprint.store.base import EventReader
from agentfootprint.store.sqlite import SqliteStore
from agentfootprint.testing.tamper import plain, read_rows, reencoded, rewrite, tampering
from agentfootprint.verify.verifier import Verifier
from projection4_logs import (
    CHILD,
    LEDGER,
    ROOT,
    ROOT_STEPS,
    SYSTEM,
    Damage,
    Minter,
    Step,
    served_run,
    write_run,
)

A, B, C = (
    {"source": "base", "text": "be brief"},
    {"source": "rules", "text": "cite"},
    {"source": "persona", "text": "a guide"},
)
PIECES = [A, B, C]
PIECE = {"source": "findings", "text": "Established: 9 am."}
EMPTY: dict[str, Any] = {}
TOOL_RESULT = {"role": "tool", "tool_call_id": "c1", "name": "lookup", "content": "long text"}
HISTORY = [
    {"role": "user", "content": "hours?"},
    {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "lookup"}]},
    TOOL_RESULT,
]


def state(**extra: Any) -> dict[str, Any]:
    return {"model": "m", "system_pieces": PIECES, "history": HISTORY, **extra}


# -- what v4 is ----------------------------------------------------------------------------


def test_v4_describes_its_edits_and_keeps_request_shape_2() -> None:
    spec = projection(4)
    assert spec.version == 4 and spec.request_version == 2
    assert spec.describe() == {
        "version": 4,
        "keys": {"system": "system_pieces", "messages": "history", "tools": "tool_schemas"},
        "edits": {
            "messages": ["served_messages", "served_results"],
            "tools": "served_tools",
            "system": "served_system",
        },
        "fields": {"prompt_cache": "cache_markers"},
    }
    assert canon(spec.describe()) == (
        b'{"edits":{"messages":["served_messages","served_results"],"system":"served_system",'
        b'"tools":"served_tools"},"fields":{"prompt_cache":"cache_markers"},'
        b'"keys":{"messages":"history","system":"system_pieces","tools":"tool_schemas"},'
        b'"version":4}'
    )
    # the fields one edit changes keep their description (what runs of v2 and v3 recorded)
    assert projection(3).describe()["edits"] == {
        "messages": "served_messages",
        "tools": "served_tools",
    }
    assert spec.member_order == projection(3).member_order  # messages first: the SHA-256 grows
    assert spec.edited == {"system", "messages", "tools"}  # the hasher compares them by object


def test_without_its_keys_v4_serves_what_v3_serves() -> None:
    s = state(served_messages=[{"history": [1, None]}], cache_markers=None)
    s.pop("cache_markers")
    request = build_request(s, version=4)
    assert request == build_request(s, version=3)
    assert request["system"] is PIECES
    assert RequestHasher(4).digests(request) == RequestHasher(3).digests(request)


def test_v1_to_v3_ignore_the_v4_keys() -> None:
    s = state(served_system="anything", served_results=7)
    for version in (1, 2, 3):
        request = build_request(s, version=version)
        assert request["system"] is PIECES and request["messages"] is HISTORY


# -- served_system -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("segments", "served"),
    [
        ([{"system": [0, None]}], PIECES),
        ([{"system": [0, None]}, {"piece": PIECE}], [*PIECES, PIECE]),  # a piece after a slice
        ([{"piece": PIECE}, {"system": [1, None]}], [PIECE, B, C]),  # before, dropping one
        ([{"system": [0, 1]}, {"piece": PIECE}, {"system": [2, 3]}], [A, PIECE, C]),
        ([{"system": [0, 1]}, {"system": [1, 2]}], [A, B]),  # adjacent slices
        ([{"system": [3, 3]}, {"system": [3, None]}], []),  # empty slices at the end
        ([{"piece": PIECE}], [PIECE]),
        ([{"piece": EMPTY}], [EMPTY]),  # any object
        ([], []),  # no system piece served
    ],
)
def test_served_system_concatenates_its_segments(segments: list[Any], served: list[Any]) -> None:
    request = build_request(state(served_system=segments), version=4)
    assert request["system"] == served
    # by reference: the very objects of system_pieces and of the segments
    assert all(a is b for a, b in zip(request["system"], served, strict=True))
    assert PIECES == [A, B, C]  # nothing edited in place


def test_a_system_pieces_of_the_wrong_type_is_refused_before_the_edit() -> None:
    with pytest.raises(ProjectionError) as caught:
        build_request(state(system_pieces={}, served_system=[]), version=4)
    assert caught.value.key == "system_pieces"


@pytest.mark.parametrize(
    ("segments", "words"),
    [
        ({"system": [0, 1]}, "is an object, not an array"),
        ("system", "is a string, not an array"),
        (None, "is null, not an array"),
        ([[0, 1]], "[0] is an array, not an object with one member"),
        ([{}], "[0] is an object with 0 members, not an object with one member"),
        (
            [{"system": [0, 1], "piece": PIECE}],
            "[0] is an object with 2 members, not an object with one member",
        ),
        ([{"message": PIECE}], "[0] has the unknown member 'message'"),
        ([{"history": [0, 1]}], "[0] has the unknown member 'history'"),
        ([{"system": 2}], "[0] system is a number, not an array [start, end]"),
        ([{"system": [0]}], "[0] system is an array of 1 items, not an array [start, end]"),
        ([{"system": [None, 2]}], "[0] system start is null, not an integer"),
        ([{"system": [True, 2]}], "[0] system start is a boolean, not an integer"),
        ([{"system": [0.0, 2]}], "[0] system start is a number, not an integer"),
        ([{"system": [0, False]}], "[0] system end is a boolean, not an integer or null"),
        ([{"system": [0, "end"]}], "[0] system end is a string, not an integer or null"),
        ([{"system": [-1, 2]}], "[0] system slice [-1, 2] is out of range"),
        ([{"system": [0, 4]}], "(0 <= start <= end <= 3, the length of system_pieces)"),
        ([{"system": [2, 1]}], "[0] system slice [2, 1] is out of range"),
        ([{"system": [4, None]}], "[0] system slice [4, 3] is out of range"),
        (
            [{"system": [0, 2]}, {"system": [1, None]}],
            "[1] slices system_pieces from 1, before the end 2 of the slice before it",
        ),
        (  # slices go back, a piece between them
            [{"system": [2, None]}, {"piece": PIECE}, {"system": [0, 1]}],
            "[2] slices system_pieces from 0, before the end 3 of the slice before it",
        ),
        ([{"piece": "be brief"}], "[0] piece is a string, not an object"),
        ([{"piece": [PIECE]}], "[0] piece is an array, not an object"),
        ([{"piece": None}], "[0] piece is null, not an object"),
    ],
)
def test_served_system_that_does_not_apply_is_refused(segments: Any, words: str) -> None:
    with pytest.raises(ProjectionError) as caught:
        build_request(state(served_system=segments), version=4)
    assert caught.value.key == "served_system"
    assert str(caught.value).startswith("state key served_system ")
    assert words in str(caught.value)
    assert "it must be an array of segments" in str(caught.value)  # and says what to do


# -- served_results ------------------------------------------------------------------------


def test_served_results_replaces_a_tool_result_on_the_wire_only() -> None:
    ticket = [{"tool_call_id": "c1", "content": "[ticket]"}]
    request = build_request(state(served_results=ticket), version=4)
    served = request["messages"]
    assert served[2] == {**TOOL_RESULT, "content": "[ticket]"}
    assert served[0] is HISTORY[0] and served[1] is HISTORY[1]  # the others: the very objects
    assert TOOL_RESULT["content"] == "long text"  # the history keeps what the tool returned
    assert build_request(state(served_results=[]), version=4)["messages"] == HISTORY


def test_served_results_applies_to_the_messages_served_messages_chose() -> None:
    ticket = [{"tool_call_id": "c1", "content": "[ticket]"}]
    elsewhere = {"role": "tool", "tool_call_id": "c1", "content": "a message segment's"}
    chosen = [{"history": [0, 2]}, {"message": elsewhere}]
    request = build_request(state(served_messages=chosen, served_results=ticket), version=4)
    assert request["messages"][2] == {**elsewhere, "content": "[ticket]"}
    with pytest.raises(ProjectionError, match="names 'c1', which no served tool results carry"):
        build_request(
            state(served_messages=[{"history": [0, 2]}], served_results=ticket), version=4
        )


@pytest.mark.parametrize(
    ("replacements", "history", "words"),
    [
        ({"tool_call_id": "c1", "content": "x"}, HISTORY, "is an object, not an array"),
        ([["c1", "x"]], HISTORY, "[0] is not an object with exactly tool_call_id and content"),
        ([{"tool_call_id": "c1"}], HISTORY, "[0] is not an object with exactly tool_call_id"),
        (
            [{"tool_call_id": "c1", "content": "x", "role": "tool"}],
            HISTORY,
            "[0] is not an object with exactly tool_call_id and content",
        ),
        ([{"tool_call_id": 1, "content": "x"}], HISTORY, "[0] has a tool_call_id or content"),
        ([{"tool_call_id": "c1", "content": None}], HISTORY, "[0] has a tool_call_id or content"),
        (
            [{"tool_call_id": "c1", "content": "x"}, {"tool_call_id": "c1", "content": "y"}],
            HISTORY,
            "[1] names 'c1' a second time",
        ),
        (
            [{"tool_call_id": "c9", "content": "x"}],
            HISTORY,
            "[0] names 'c9', which no served tool results carry",
        ),
        (  # the assistant's call carries the id, but it is no tool result
            [{"tool_call_id": "c1", "content": "x"}],
            HISTORY[:2],
            "[0] names 'c1', which no served tool results carry",
        ),
        (
            [{"tool_call_id": "c1", "content": "x"}],
            [*HISTORY, TOOL_RESULT],
            "[0] names 'c1', which 2 served tool results carry",
        ),
    ],
)
def test_served_results_that_do_not_apply_are_refused(
    replacements: Any, history: list[Any], words: str
) -> None:
    with pytest.raises(ProjectionError) as caught:
        build_request(state(history=history, served_results=replacements), version=4)
    assert caught.value.key == "served_results"
    assert words in str(caught.value)
    assert "each naming exactly one served message of role tool" in str(caught.value)


# -- the order: markers index the lists as served after every edit ---------------------------


def marks(system: list[int]) -> dict[str, list[int]]:
    return {"system": system, "tools": [], "messages": []}


def test_cache_markers_index_the_served_system_list_after_the_edit() -> None:
    # index 3 is only there because a piece is served after the slice
    grown = state(served_system=[{"system": [0, None]}, {"piece": PIECE}], cache_markers=marks([3]))
    assert build_request(grown, version=4)["prompt_cache"] == marks([3])
    # index 1 is in system_pieces, but the served list holds one piece
    shrunk = state(served_system=[{"piece": PIECE}], cache_markers=marks([1]))
    with pytest.raises(ProjectionError) as caught:
        build_request(shrunk, version=4)
    assert caught.value.key == "cache_markers"
    assert "system[0] marks 1, out of range (0 <= index < 1, the system served)" in str(
        caught.value
    )
    # an edit that does not apply is named before the markers are checked
    both = state(served_system=[{"system": [9, None]}], cache_markers=marks([7]))
    with pytest.raises(ProjectionError) as first:
        build_request(both, version=4)
    assert first.value.key == "served_system"


def test_the_edits_apply_in_order() -> None:
    """served_messages first (served_results finds a result only it serves), served_system
    on its own list, and a bad served_results named before a bad served_system."""
    only_there = {"role": "tool", "tool_call_id": "z", "content": "raw"}
    s = state(
        served_messages=[{"message": only_there}],
        served_results=[{"tool_call_id": "z", "content": "ticket"}],
        served_system=[{"piece": PIECE}],
    )
    request = build_request(s, version=4)
    assert request["messages"] == [{**only_there, "content": "ticket"}]
    assert request["system"] == [PIECE]
    with pytest.raises(ProjectionError) as caught:
        build_request({**s, "served_results": 1, "served_system": 1}, version=4)
    assert caught.value.key == "served_results"


# -- the receipt hasher over a spliced system list -------------------------------------------


def from_nothing(request: dict[str, Any]) -> tuple[dict[str, list[str]], str]:
    """The digests of ``request`` computed from the page's definitions, with no cache."""
    tags = {"system": "piece/system", "messages": "piece/message", "tools": "piece/tool"}
    lists = {k: [hexdigest(tags[k], canon(p)) for p in request[k]] for k in PIECE_KINDS}
    digest = request_digest(
        request["model"],
        request["params"],
        lists,
        request_version=2,
        scalars={"prompt_cache": request["prompt_cache"]},
    )
    return lists, digest


def counted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    tags: list[str] = []
    real = request_module.hexdigest  # type: ignore[attr-defined]

    def counting(tag: str, data: bytes) -> str:
        if tag.startswith("piece/"):
            tags.append(tag)
        return real(tag, data)

    monkeypatch.setattr(request_module, "hexdigest", counting)
    return tags


def test_the_hasher_digests_a_served_system_that_changes_call_after_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tags = counted(monkeypatch)
    pieces = [A, B]
    other = {"source": "findings", "text": "Established: closed Mondays."}
    calls: list[tuple[list[Any], Any]] = [
        (pieces, None),  # system_pieces served whole
        (pieces, [{"system": [0, None]}, {"piece": PIECE}]),  # a piece added after a slice
        (pieces, [{"system": [0, 1]}, {"piece": PIECE}]),  # a piece of system_pieces withheld
        (pieces, [{"system": [0, 1]}, {"piece": other}]),  # the served piece changed
        (pieces, [{"piece": other}, {"system": [0, None]}]),  # moved before the slice
        (pieces, None),  # the edit removed: whole again
        ([*pieces, C], [{"system": [0, 1]}, {"piece": PIECE}, {"system": [2, None]}]),
    ]
    hasher = RequestHasher(4)
    hashed = 0
    for i, (system, segments) in enumerate(calls):
        s = {"model": "m", "system_pieces": system, "history": HISTORY}
        if segments is not None:
            s["served_system"] = segments
        request = build_request(s, version=4)
        before = len(tags)
        got = hasher.digests(request)
        hashed += tags[before:].count("piece/system")
        lists, digest = from_nothing(request)
        assert {k: list(got.pieces(k)) for k in PIECE_KINDS} == lists, i
        assert got.request == digest, i
        assert RequestHasher(4).digests(request) == got  # a fresh hasher: the same digests
    # a piece is hashed when first served, and again only when it comes back after a call
    # that did not serve it: A and B, PIECE, other, B again (call 4), PIECE again and C
    assert hashed == 2 + 1 + 1 + 1 + 2


def test_a_piece_spliced_between_kept_ends_is_hashed_not_assumed() -> None:
    """The shortcut for lists grown by appends (first and last objects in place, so all are)
    does not hold for a spliced system list: the piece between them is hashed for what it is."""
    hasher = RequestHasher(4)
    hasher.digests(build_request({"model": "m", "system_pieces": [A, B, C]}, version=4))
    s = {
        "model": "m",
        "system_pieces": [A, B, C, PIECE],
        "served_system": [{"system": [0, 1]}, {"piece": PIECE}, {"system": [2, None]}],
    }
    request = build_request(s, version=4)
    assert request["system"][0] is A and request["system"][2] is C  # the trap is set
    assert list(hasher.digests(request).system) == from_nothing(request)[0]["system"]


# -- logs: receipts over a changing served system verify ------------------------------------


def test_receipts_of_calls_whose_served_system_changes_verify(tmp_path: Any) -> None:
    """The root's calls: a piece after a slice, then a slice dropping a piece and another
    piece (and a tool result replaced); its continuation: the edits removed, then a piece
    before a slice. Each receipt minted by RequestHasher; both runs verify."""
    with SqliteStore(tmp_path / "p4.db") as store:
        served_run(store)
        verifier = Verifier(store)
        for run in (ROOT, CHILD):
            verified = verifier.verify(run)
            assert verified.outcome is af.Outcome.VALID_UNSIGNED
            assert (verified.projection, verified.receipts) == (4, 2)
        reader = RunReader(store)
        assert [r["system"] for r in reader.served_requests(ROOT)] == [
            [*SYSTEM, LEDGER[0]],
            [SYSTEM[0], LEDGER[1]],
        ]
        assert [r["system"] for r in reader.served_requests(CHILD)] == [
            SYSTEM,
            [LEDGER[2], SYSTEM[1]],
        ]
        tool_result = reader.served_at(ROOT, 1)["messages"][2]
        assert tool_result["content"].startswith("[result of call_1 kept on the record")
        assert reader.state_at(ROOT, 5)["history"][2]["content"].startswith("Opening hours")


def receipt_failure(store: Any, run: str = ROOT) -> af.VerificationError:
    with pytest.raises(af.VerificationError) as caught:
        Verifier(store).verify(run)
    return caught.value


def second_receipt_seq(store: EventReader) -> int:
    receipts = [e.seq for e in store.read(ROOT) if e.type == "receipt"]
    return receipts[1]


BAD: list[tuple[str, Any, str]] = [
    ("out of range", [{"system": [0, 3]}], "system slice [0, 3] is out of range"),
    ("overlapping", [{"system": [0, 2]}, {"system": [1, None]}], "slices system_pieces from 1"),
    ("a wrong member", [{"system": [0, 1]}, {"message": LEDGER[1]}], "unknown member 'message'"),
    ("a piece not an object", [{"piece": "Established"}], "[0] piece is a string"),
]


@pytest.mark.parametrize(("about", "written", "words"), BAD, ids=[b[0] for b in BAD])
def test_a_served_system_that_does_not_apply_fails_its_receipt(
    tmp_path: Any, about: str, written: Any, words: str
) -> None:
    with SqliteStore(tmp_path / "p4.db") as store:
        served_run(store, Damage(written={(ROOT, 4, "served_system"): written}))
        error = receipt_failure(store)
        assert (error.code, error.seq) == ("receipt", second_receipt_seq(store))
        assert "no request can be built here: state key served_system" in error.reason
        assert words in error.reason


def test_a_receipt_minted_for_another_system_list_fails(tmp_path: Any) -> None:
    """The writer hashed system_pieces whole, though the state served a slice and a piece."""

    def unedited(s: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in s.items() if k != "served_system"}

    with SqliteStore(tmp_path / "p4.db") as store:
        served_run(store, Damage(minted={(ROOT, 1): unedited}))
        error = receipt_failure(store)
        assert (error.code, error.seq) == ("receipt", second_receipt_seq(store))
        assert "call 1: system piece 1 was served as" in error.reason


def test_a_continued_run_may_serve_projection_4_after_a_projection_3_parent(
    tmp_path: Any,
) -> None:
    """The hasher forked from projection 3 to 4 keeps the parent's lists for keep/add."""
    seed = ROOT_STEPS[0]
    minter = Minter(version=3)
    with SqliteStore(tmp_path / "p4.db") as store:
        root, state = write_run(store, ROOT, [seed, Step("call-llm", call=True)], minter)
        child_minter = Minter(version=4)
        child_minter.hasher = minter.hasher.fork(4)
        child_minter.previous = dict(minter.previous)
        steps = [
            Step("findings", (("served_system", "set", [{"piece": PIECE}, {"system": [1, 2]}]),)),
            Step("call-llm", call=True),
        ]
        write_run(store, CHILD, steps, child_minter, state=state, parent=root)
        verifier = Verifier(store)
        assert verifier.verify(ROOT).projection == 3
        assert verifier.verify(CHILD).projection == 4
        assert verifier.hasher_after(CHILD).version == 4


def test_the_projection_is_read_from_run_open_not_assumed(tmp_path: Any) -> None:
    """The same rows relabelled projection 3: served_system is ignored, so the receipt
    (minted for the slice and the piece) describes another system list."""
    path = tmp_path / "p4.db"
    with SqliteStore(path) as store:
        write_run(store, ROOT, ROOT_STEPS[:3], Minter(version=4))
    with tampering(path) as conn:
        rows = read_rows(conn, ROOT)
        out = plain(rows)
        out[0] = reencoded(rows[0], lambda body: body["projection"].update(version=3))
        rewrite(conn, ROOT, out)
    with SqliteStore(path, readonly=True) as store:
        error = receipt_failure(store)
        assert error.code == "receipt" and "call 0: 2 system pieces were served" in error.reason
