"""Random mutations of a real export bundle are never VALID, and raise only documented errors.

A bundle of three real runs (a root, its continuation, a redacted run) is exported once per
module. Each example changes one thing in it: any field of any event line (run, seq, type,
ts, body, either hash), an indexed member of a manifest entry, or whole lines (dropped,
duplicated, swapped). Then the file is either left with its old trailer (the digest must
catch it) or re-framed as a forger would (trailer digest and counts recomputed), so that only
the framing rules and the verifier are left to catch it. Whatever the mutation, opening and
whole-file verification either refuse the file (``VerificationError``, or ``FileError`` for a
file that no longer looks like a bundle) or report at least one failure: never all VALID.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import agentfootprint as af
from agentfootprint.errors import FileError, VerificationError
from agentfootprint.verify.bundle import BundleSource
from agentfootprint.verify.verifier import Verifier

FIELDS = ("run", "seq", "type", "ts", "body", "event_hash", "chain_hash")
INDEXED = ("run_id", "conversation_id", "parent_run_id", "opened_at", "events", "head")


def _add(args: dict[str, Any]) -> Any:
    return args["a"] + args["b"]


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    folder = tmp_path_factory.mktemp("bundle")
    db = folder / "log.db"
    add = af.define_tool(
        name="add",
        description="Add.",
        input_schema={
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
            "required": ["a", "b"],
        },
        execute=_add,
    )
    script = af.MockProvider(
        [af.reply(tool_calls=[af.tool_call("add", {"a": 2, "b": 3})]), "5.", "Yes, 5."]
    )
    with af.Agent(provider=script, model="m", tools=[add], store=db) as agent:
        root = agent.run_sync("2 + 3?")
        child = agent.run_sync("Sure?", continue_from=root)
    secret = af.MockProvider(
        [af.reply(tool_calls=[af.tool_call("add", {"a": 1, "b": 1})]), '{"ssn": "x"}']
    )
    with af.Agent(
        provider=secret, model="m", tools=[add], store=db, redact=af.RedactionPolicy(["ssn"])
    ) as agent:
        redacted = agent.run_sync("1 + 1?")
    out = folder / "all.afp"
    with af.SqliteStore(db, readonly=True) as store:
        af.export_runs(store, [child.run_id, redacted.run_id], out)
    return out.read_bytes()


def _split(data: bytes) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    lines = data.rstrip(b"\n").split(b"\n")
    return orjson.loads(lines[0]), [orjson.loads(line) for line in lines[1:-1]]


def _framed(manifest: dict[str, Any], events: list[dict[str, Any]], reframe: bool) -> bytes:
    if reframe:
        manifest = {**manifest, "counts": {**manifest["counts"], "events": len(events)}}
    data = orjson.dumps(manifest) + b"\n" + b"".join(orjson.dumps(e) + b"\n" for e in events)
    trailer = {"end": True, "events": len(events), "sha256": hashlib.sha256(data).hexdigest()}
    return data + orjson.dumps(trailer) + b"\n"


def _other(value: Any, draw: Any) -> Any:
    """A value of the same field that differs from ``value``."""
    if isinstance(value, bool) or value is None:
        return draw(st.sampled_from([0, "x", not value if isinstance(value, bool) else 1]))
    if isinstance(value, int):
        return value + draw(st.sampled_from([-1, 1, 1000])) if draw(st.booleans()) else str(value)
    assert isinstance(value, str)
    if len(value) == 64 and all(c in "0123456789abcdef" for c in value):
        i = draw(st.integers(0, 63))
        return value[:i] + ("0" if value[i] != "0" else "1") + value[i + 1 :]
    if value and draw(st.booleans()):
        i = draw(st.integers(0, len(value) - 1))
        changed = chr(ord(value[i]) ^ draw(st.sampled_from([1, 2, 32])))
        return value[:i] + changed + value[i + 1 :]
    return value + draw(st.sampled_from(["x", " ", "0", "}"]))


@st.composite
def mutations(draw: Any, data: bytes) -> tuple[bytes, str]:
    manifest, events = _split(data)
    kind = draw(st.sampled_from(["field", "manifest", "drop", "duplicate", "swap"]))
    if kind == "field":
        i = draw(st.integers(0, len(events) - 1))
        name = draw(st.sampled_from(FIELDS))
        events[i] = {**events[i], name: _other(events[i][name], draw)}
        what = f"line {i + 2} {name}"
    elif kind == "manifest":
        i = draw(st.integers(0, len(manifest["runs"]) - 1))
        name = draw(st.sampled_from(INDEXED))
        entry = manifest["runs"][i]
        runs = list(manifest["runs"])
        runs[i] = {**entry, name: _other(entry[name], draw)}
        manifest = {**manifest, "runs": runs}
        what = f"manifest run {i} {name}"
    elif kind == "drop":
        i = draw(st.integers(0, len(events) - 1))
        del events[i]
        what = f"line {i + 2} dropped"
    elif kind == "duplicate":
        i = draw(st.integers(0, len(events) - 1))
        events.insert(i, events[i])
        what = f"line {i + 2} duplicated"
    else:
        i = draw(st.integers(0, len(events) - 2))
        j = draw(st.integers(i + 1, len(events) - 1))
        events[i], events[j] = events[j], events[i]
        what = f"lines {i + 2} and {j + 2} swapped"
    reframe = draw(st.booleans())
    mutated = _framed(manifest, events, reframe)
    if not reframe:  # the old trailer: the one the recorded bytes had
        mutated = (
            mutated[: mutated.rstrip(b"\n").rfind(b"\n") + 1]
            + data.rstrip(b"\n").rsplit(b"\n", 1)[1]
            + b"\n"
        )
    return mutated, what + (" (re-framed)" if reframe else " (old trailer)")


def _verdicts(path: Path) -> list[Any]:
    with BundleSource(path) as source:
        return [verdict for _, verdict in Verifier(source).verify_all()]


def test_the_bundle_itself_is_valid(bundle: bytes, tmp_path: Path) -> None:
    path = tmp_path / "b.afp"
    path.write_bytes(bundle)
    verdicts = _verdicts(path)
    assert len(verdicts) == 3
    assert all(getattr(v, "outcome", None) is af.Outcome.VALID_UNSIGNED for v in verdicts)


@given(data=st.data())
@example(data=None)  # None: a row's seq turned into a string, re-framed (pinned below)
def test_a_mutated_bundle_is_never_valid(
    bundle: bytes, tmp_path_factory: pytest.TempPathFactory, data: Any
) -> None:
    if data is None:
        manifest, events = _split(bundle)
        events[3] = {**events[3], "seq": "3"}
        mutated, what = _framed(manifest, events, True), "line 5 seq as text (re-framed)"
    else:
        mutated, what = data.draw(mutations(bundle), label="mutation")
    assert mutated != bundle, what  # every mutation changes a value
    path = tmp_path_factory.mktemp("m") / "m.afp"
    path.write_bytes(mutated)
    try:
        verdicts = _verdicts(path)
    except (VerificationError, FileError):
        return  # refused as a bundle: the framing (or the digest) caught it
    failures = [v for v in verdicts if isinstance(v, VerificationError)]
    assert failures, f"{what}: every run verified"
