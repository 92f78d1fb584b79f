"""Build the echo redaction vectors (issue 27, docs/log-format.md section 12.8) in
``tests/vectors/echoes/``: each ``*.db`` with its disclosures file ``*.json``, and the index
``echoes.json``.

Run ``python tests/vectors/build_echoes.py`` to rebuild them (the runs' clock, ids and salts
are fixed, so their rows come out the same). Each vector is a real recorded run, a tool's
result committing an address the model then quotes, some made by hand afterwards: the
quotations' commitments
replaced by the text they hide, every hash recomputed (what a writer without echo redaction
records). Each entry of ``echoes.json`` names the file, its disclosures file, and what
proving the disclosures gives once every run verified (``result``: null, or the failure code,
run and seq). Both verifiers, the library's and the independent one of ``tests/spec``, must
give it (``tests/spec/test_echo_cases.py``).
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import orjson

import agentfootprint as af
from agentfootprint.logformat.canonical import canon
from agentfootprint.logformat.commitments import Disclosure
from agentfootprint.store.memory_vault import MemoryVault
from agentfootprint.testing.tamper import read_rows, rewrite, tampering

HERE = Path(__file__).resolve().parent / "echoes"
EMAIL = "ann.lee@example.com"
ANSWER = f"Ann's address is {EMAIL}."


@dataclass(frozen=True)
class Entry:
    file: str
    disclosures: str
    about: str
    result: list[Any] | None


def _ports(prefix: str) -> af.Ports:
    ids = itertools.count()
    salts = itertools.count()
    return af.Ports(
        clock=lambda: 1_767_225_600_000,
        run_ids=lambda: f"{prefix}-{next(ids)}",
        salts=lambda: next(salts).to_bytes(16, "big"),
    )


def _agent(path: Path, replies: list[Any], prefix: str, **options: Any) -> af.Agent:
    lookup = af.define_tool(
        name="lookup",
        description="Find a person.",
        execute=lambda a: {"email": EMAIL, "name": "Ann"},
    )
    return af.Agent(
        provider=af.MockProvider(replies),
        model="m",
        tools=[lookup],
        store=path,
        redact=options.pop("redact", af.RedactionPolicy(keys=["email"])),
        disclosures=path.with_suffix(".vault"),
        ports=_ports(prefix),
        **options,
    )


def _quoting(answer: str = ANSWER) -> list[Any]:
    return [af.reply(tool_calls=[af.tool_call("lookup", {"q": "Ann"})]), answer]


def _recorded(
    path: Path, message: str = "Ann's address?", **options: Any
) -> tuple[str, list[Disclosure]]:
    agent = _agent(path, _quoting(), "run", **options)
    result = agent.run_sync(message)
    vault = agent.vault
    assert vault is not None
    opened = vault.disclose(vault.commitments(result.run_id))
    agent.close()
    return result.run_id, opened


def _revert(path: Path, run_id: str, echoes: list[Disclosure]) -> None:
    """The run's quotation commitments replaced by the text they hide; hashes recomputed."""
    vault = MemoryVault()
    vault.put(run_id, echoes)
    with tampering(path) as conn:
        rows = read_rows(conn, run_id)
        rewrite(conn, run_id, [(r.type, r.ts, canon(vault.reveal(r.value))) for r in rows])


def _first_clear(path: Path, run_id: str) -> int:
    store = af.SqliteStore(path)
    try:
        verifier = af.Verifier(store)
        verifier.verify(run_id)
        committed_at = min(seq for run, seq, _ in verifier.commitments.values() if run == run_id)
        return min(
            row.seq
            for row in store.read(run_id)
            if EMAIL.encode() in row.body and row.seq > committed_at
        )
    finally:
        store.close()


Build = Callable[[Path], tuple[list[Disclosure], list[Any] | None]]


def _committed(path: Path) -> tuple[list[Disclosure], list[Any] | None]:
    _, opened = _recorded(path)
    return opened, None


def _left_in_clear(path: Path) -> tuple[list[Disclosure], list[Any] | None]:
    run_id, opened = _recorded(path)
    _revert(path, run_id, [d for d in opened if d.key != "email"])
    return [d for d in opened if d.key == "email"], ["leak", run_id, _first_clear(path, run_id)]


def _in_clear_before(path: Path) -> tuple[list[Disclosure], list[Any] | None]:
    run_id, opened = _recorded(path, f"Is {EMAIL} Ann's address?")
    _revert(path, run_id, [d for d in opened if d.key != "email"])
    return [d for d in opened if d.key == "email"], None


def _version_2(path: Path) -> tuple[list[Disclosure], list[Any] | None]:
    _, opened = _recorded(path, redact=af.RedactionPolicy(keys=["email"]).at_version(2))
    assert [d.key for d in opened] == ["email"]
    return opened, None


def _continued_in_clear(path: Path) -> tuple[list[Disclosure], list[Any] | None]:
    """The child quotes the parent's value in clear: the check is per run (the value's
    commitment sits in the parent), so nothing is asked of the child."""
    agent = _agent(path, [*_quoting("Found Ann."), f"Again: {EMAIL}."], "run")
    parent = agent.run_sync("find Ann")
    child = agent.run_sync("her address?", continue_from=parent)
    vault = agent.vault
    assert vault is not None
    opened = vault.disclose(vault.commitments(parent.run_id))
    echoes = vault.disclose(vault.commitments(child.run_id))
    agent.close()
    assert echoes
    _revert(path, child.run_id, echoes)
    return [d for d in opened if d.key == "email"], None


def _does_not_open(path: Path) -> tuple[list[Disclosure], list[Any] | None]:
    run_id, opened = _recorded(path)
    (email,) = [d for d in opened if d.key == "email"]
    store = af.SqliteStore(path)
    try:
        verifier = af.Verifier(store)
        verifier.verify(run_id)
        seq = verifier.commitments[email.commitment][1]
    finally:
        store.close()
    forged = Disclosure(commitment=email.commitment, salt=email.salt, key="email", value="x@y.z")
    return [forged], ["disclosure", run_id, seq]


CASES: list[tuple[str, Build]] = [
    ("quotations committed: every disclosure proven", _committed),
    ("a quotation left in clear after the value was committed", _left_in_clear),
    ("a value the log held in clear before its commitment", _in_clear_before),
    ("a version 2 policy: no echo duty", _version_2),
    ("a continuation quoting its parent's value in clear: checked per run", _continued_in_clear),
    ("a disclosure that does not open its commitment", _does_not_open),
]


def _name(about: str) -> str:
    words = "".join(c if c.isalnum() else "-" for c in about.lower()).split("-")
    return "-".join(w for w in words if w)[:48].rstrip("-")


def build(folder: Path) -> list[Entry]:
    folder.mkdir(parents=True, exist_ok=True)
    entries = []
    for about, make in CASES:
        name = _name(about)
        path = folder / f"{name}.db"
        for old in folder.glob(f"{name}.*"):
            old.unlink()
        disclosures, result = make(path)
        path.with_suffix(".vault").unlink()
        document = {
            "agentfootprint_disclosures": 1,
            "disclosures": [d.to_json() for d in disclosures],
        }
        (folder / f"{name}.json").write_bytes(orjson.dumps(document, option=orjson.OPT_INDENT_2))
        entries.append(Entry(f"{name}.db", f"{name}.json", about, result))
    return entries


def proven(path: Path, disclosures: Path) -> list[Any] | None:
    """What the library gives: every run verified, then the disclosures proven."""
    data = orjson.loads(disclosures.read_bytes())
    opened = [Disclosure.from_json(d) for d in data["disclosures"]]
    store = af.SqliteStore(path)
    try:
        verifier = af.Verifier(store)
        for _run, outcome in verifier.verify_all():
            assert not isinstance(outcome, Exception), outcome
        try:
            verifier.check_disclosures(opened)
        except af.VerificationError as exc:
            return [exc.code, exc.run_id, exc.seq]
        return None
    finally:
        store.close()


def main() -> None:
    entries = build(HERE)
    for entry in entries:
        got = proven(HERE / entry.file, HERE / entry.disclosures)
        assert got == entry.result, (entry.about, got)
    index = [asdict(e) for e in entries]
    (HERE / "echoes.json").write_bytes(orjson.dumps(index, option=orjson.OPT_INDENT_2) + b"\n")
    sys.stdout.write(f"{len(entries)} echo vectors in {HERE}\n")


if __name__ == "__main__":
    main()
