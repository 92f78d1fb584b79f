"""The verifier's step 2.2 with memory (``row_checks.CanonicalBodies``) against the reference
(``row_checks.canonical_body``): over any sequence of bodies, repeated or not, canonical or
not, under any row type, the memo gives the body the reference gives (equal, type for type),
the same finding (code, seq and message) where the reference refuses, and whether the bytes
may hold a commitment as ``may_commit`` says. Only a commit marker's body may be one shared
parse (it is only read); any other type gets a body of its own."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import example, given, settings
from hypothesis import strategies as st

from agentfootprint.errors import VerificationError
from agentfootprint.logformat.canonical import canon
from agentfootprint.verify.body_checks import RunCheck
from agentfootprint.verify.row_checks import CanonicalBodies, canonical_body, may_commit
from examples_budget import scaled

_TYPES = ["write", "receipt", "commit", "event", "run.close", "run.open"]

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**53) + 1, 2**53 - 1),
    st.text(alphabet=st.sampled_from('ab$\\"\u00e9\ue000 '), max_size=6),
)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from(["a", "b", "$commit", "é", "z"]), inner, max_size=3),
    ),
    max_leaves=8,
)


def _forms(value: Any) -> list[bytes]:
    """The canonical bytes of ``value`` and a few other serialisations of it (not canonical,
    or not an object), each a body a crafted file could hold."""
    canonical = canon(value)
    return [
        canonical,
        orjson.dumps(value),  # unsorted keys
        canonical.replace(b",", b", ", 1),
        canonical.replace(b"1", b"1.0", 1),
        b"[" + canonical + b"]",
    ]


_bodies = st.builds(lambda v, i: _forms(v)[i], _values, st.integers(0, 4)) | st.sampled_from(
    [b"{", b"{}", b"[]", b'{"a":1e400}', b'{"a":"\\ud800"}', b'{"b":1,"a":2}', b"\xff"]
)


def _outcome(call: Any, *args: Any) -> tuple[str, Any]:
    try:
        return ("ok", call(*args))
    except VerificationError as exc:
        return ("error", (exc.code, exc.seq, str(exc)))


def _reference(check: RunCheck, seq: int, data: bytes) -> tuple[dict[str, Any], bool]:
    return canonical_body(check, seq, data), may_commit(data)


@settings(max_examples=scaled(300), deadline=None)
@given(rows=st.lists(st.tuples(_bodies, st.sampled_from(_TYPES)), min_size=1, max_size=12))
@example(
    rows=[(b'{"commit":0,"stage":"s"}', "commit")] * 3 + [(b'{"commit":0,"stage":"s"}', "event")]
)
@example(rows=[(b'{"a":"$commit"}', "commit"), (b'{"a":"$commit"}', "commit")])
def test_remembered_bodies_agree_with_the_reference(rows: list[tuple[bytes, str]]) -> None:
    bodies = CanonicalBodies()
    check = RunCheck("r", {})
    handed: list[Any] = []  # every body handed out: only a commit marker's may be shared
    for seq, (data, type_) in enumerate(rows, start=1):
        want = _outcome(_reference, check, seq, data)
        got = _outcome(bodies.body, check, seq, type_, data)
        if want[0] == "ok":
            assert got[0] == "ok"
            (want_body, want_scan), (got_body, got_scan) = want[1], got[1]
            assert orjson.dumps(got_body) == orjson.dumps(want_body) and got_scan is want_scan
            assert canon(got_body) == data  # the bytes are the body's canonical form
            if type_ != "commit":  # a body the checks may keep (a close, a state value)
                assert all(got_body is not other for other in handed)
            handed.append(got_body)
        else:
            assert got == want
