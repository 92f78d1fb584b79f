"""The HTML report in headless Chromium: its verdicts against the command line's.

Every vector of tests/vectors (the bundles as they are; a report made from each database)
is opened from file:// and the page's verdicts (each run's outcome, or its failure code and
seq) must equal ``agentfootprint verify --json``'s, with the same keys pinned. The page may
leave a run UNDECIDED (a redaction pattern it cannot read exactly as the writer did) only
where this file says so, and never shows such a run as valid. No page may make a request.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest
from browser_support import open_report
from click.testing import CliRunner

import agentfootprint as af
from agentfootprint.agent.demo import DEMO_QUESTIONS, build_demo_agent, demo_script, demo_tools
from agentfootprint.cli import main
from agentfootprint.exchange.transfer import export_runs
from agentfootprint.store.sqlite import SqliteStore
from agentfootprint.testing.seals import OTHER, SIGNER
from artifact_logs import placed_run

VECTORS = Path(__file__).parents[1] / "vectors"
DOCS = Path(__file__).parents[2] / "docs"
FILES = sorted(
    p.relative_to(VECTORS).as_posix()
    for p in VECTORS.rglob("*")
    if p.suffix in (".afp", ".db") and "__pycache__" not in p.parts
)
#: the keys the seals' and proofs' descriptors pin for a file (beside every file unpinned)
PINNED = {
    entry["file"]: tuple(entry["keys"])
    for name in ("seals.json", "proven.json")
    for entry in json.loads((VECTORS / name).read_text())
    if entry["keys"] and set(entry["keys"]) <= {"signer", "other"}  # not the refused keys
}
SIGNERS = {"signer": SIGNER, "other": OTHER}
CASES = [(f, ()) for f in FILES] + sorted((f, k) for f, k in PINNED.items())
#: files a run of which the page may leave UNDECIDED: a version 1 policy's patterns are
#: Python `re` under a step budget (docs/log-format.md appendix C), not read in a browser
UNDECIDED = {"catastrophic-pattern.afp", "catastrophic-pattern.db"}
PASS = {"VALID", "VALID_UNSIGNED", "UNSEALED"}

Verdict = tuple[str | None, str, int | None]


def cli(*args: str) -> Any:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def cli_verdicts(path: Path, keys: tuple[str, ...]) -> tuple[int, list[Verdict]]:
    pins = [a for k in keys for a in ("--key", SIGNERS[k].public.text)]
    result = cli("verify", "--json", str(path), *pins)
    document = json.loads(result.stdout)
    verdicts: list[Verdict] = []
    for run in document["runs"]:
        if run["outcome"] == "INVALID":
            verdicts.append((run["run_id"], run["error"]["code"], run["error"]["seq"]))
        else:
            verdicts.append((run["run_id"], run["outcome"], None))
    if "error" in document and not verdicts:
        error = document["error"]
        verdicts.append((error["run_id"], error["code"], error["seq"]))
    return result.exit_code, verdicts


def page_verdicts(opened: Any) -> list[Verdict]:
    return [(v["run"], v["code"], None if v["code"] in PASS else v["seq"]) for v in opened.verdicts]


def make_report(source: Path, out: Path, *args: str) -> Any:
    return cli("report", str(source), "--out", str(out), *args)


@pytest.mark.parametrize(
    ("name", "keys"), CASES, ids=[f"{f}{'+' + '+'.join(k) if k else ''}" for f, k in CASES]
)
def test_the_page_gives_the_command_lines_verdicts(
    browser: Any, tmp_path: Path, name: str, keys: tuple[str, ...]
) -> None:
    path = VECTORS / name
    exit_code, expected = cli_verdicts(path, keys)
    pins = [a for k in keys for a in ("--key", SIGNERS[k].public.text)]
    out = tmp_path / "report.html"
    made = make_report(path, out, *pins)
    if exit_code == 2:  # not a log, or newer than this reader: refused as verify refuses
        assert made.exit_code == 2, made.output
        assert not out.exists()
        return
    assert made.exit_code == 0, made.output
    opened = open_report(browser, out)
    assert opened.requests == []  # nothing fetched: the CSP forbids it, and none is tried
    assert opened.errors == []  # no console error, no uncaught exception, whatever the file
    got = page_verdicts(opened)
    if name in UNDECIDED:
        undecided = {run for run, code, _ in got if code == "undecided"}
        assert undecided, got
        assert all(code not in PASS for run, code, _ in expected if run in undecided)
        got = [v for v in got if v[0] not in undecided]
        expected = [v for v in expected if v[0] not in undecided]
    assert Counter(got) == Counter(expected), (got, expected)
    valid = all(code in PASS - {"UNSEALED"} for _, code, _ in expected) and expected
    assert (opened.state == "valid") == bool(valid and name not in UNDECIDED), opened.state


# -- the demo: real runs, their digests ---------------------------------------------------------


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The README's main job: two sealed runs of the travel helper (its pinned key)."""
    folder = tmp_path_factory.mktemp("demo")
    cwd = Path.cwd()
    os.chdir(folder)
    try:
        result = cli("demo")
    finally:
        os.chdir(cwd)
    assert result.exit_code == 0, result.output
    key = re.search(r"--key (ed25519:\S+)", result.output)
    assert key is not None
    return folder / "agentfootprint.db", key.group(1)


def _receipts(db: Path) -> dict[str, list[dict[str, Any]]]:
    """Each run's receipts as the log holds them, each list of digests expanded (keep/add)."""
    out: dict[str, list[dict[str, Any]]] = {}
    last: dict[str, dict[str, list[str]]] = {}  # each run's lists at its end
    with SqliteStore(db, readonly=True) as store:
        for run_id in store.run_ids():  # parents first
            lists: dict[str, list[str]] = {"system": [], "messages": [], "tools": []}
            calls = out.setdefault(run_id, [])
            for event in store.read(run_id):
                if event.type == "run.open":  # a continuation's receipts keep its parent's
                    parent = orjson.loads(event.body).get("parent")
                    if parent:
                        lists = dict(last[parent["run_id"]])
                if event.type != "receipt":
                    continue
                body = orjson.loads(event.body)
                for kind in lists:
                    lists[kind] = lists[kind][: body[kind]["keep"]] + body[kind]["add"]
                calls.append({"request": body["request"], **{k: list(v) for k, v in lists.items()}})
            last[run_id] = lists
    return out


def test_the_page_recomputes_every_digest_of_the_demo_runs(
    browser: Any, tmp_path: Path, demo_db: tuple[Path, str]
) -> None:
    db, key = demo_db
    out = tmp_path / "demo.html"
    assert make_report(db, out, "--key", key).exit_code == 0
    opened = open_report(
        browser, out, runs=True, then=lambda page: page.locator("code.head").all_inner_texts()
    )
    assert opened.requests == []
    with SqliteStore(db, readonly=True) as store:  # each run's head, shown for comparison
        heads = [af.Verifier(store).verify(run).head.hex() for run in store.run_ids()]
    assert opened.then == heads
    assert opened.state == "valid"
    assert {v["code"] for v in opened.verdicts} == {"VALID"}  # sealed, the key pinned
    logged = _receipts(db)
    assert {run["run_id"] for run in opened.report["runs"]} == set(logged)
    for run in opened.report["runs"]:
        calls = logged[run["run_id"]]
        assert len(run["calls"]) == len(calls) > 0
        for page_call, receipt in zip(run["calls"], calls, strict=True):
            assert page_call["request"]["computed"] == receipt["request"]
            assert page_call["request"]["recorded"] == receipt["request"]
            for kind in ("system", "messages", "tools"):
                pieces = page_call["pieces"][kind]
                assert [p["digest"] for p in pieces] == receipt[kind]
                assert [p["recorded"] for p in pieces] == receipt[kind]


_BUNDLE = re.compile(rb'(<script type="application/vnd\.agentfootprint\.bundle\+base64" '
                     rb'id="af-bundle">)([A-Za-z0-9+/=]*)(</script>)')  # fmt: skip


def _in_bundle(change: Any) -> Any:
    """A change of the embedded bundle's bytes, as a change of the report's HTML."""

    def tamper(html: bytes) -> bytes:
        found = _BUNDLE.search(html)
        assert found is not None
        bundle = change(base64.b64decode(found.group(2)))
        return html[: found.start(2)] + base64.b64encode(bundle) + html[found.end(2) :]

    return tamper


def _one_base64_character(html: bytes) -> bytes:
    """One character of the base64 text itself changed, halfway through it."""
    found = _BUNDLE.search(html)
    assert found is not None
    at = found.start(2) + len(found.group(2)) // 2
    return html[:at] + (b"B" if html[at : at + 1] == b"A" else b"A") + html[at + 1 :]


@pytest.mark.parametrize(
    "tamper",
    [
        pytest.param(_in_bundle(lambda b: b.replace(b"Lisbon", b"Lisbin", 1)), id="a letter"),
        pytest.param(_in_bundle(lambda b: b.replace(b'"seq":3,', b'"seq":4,', 1)), id="a seq"),
        pytest.param(
            _in_bundle(lambda b: b.replace(b'max_tokens\\":512', b'max_tokens\\":612', 1)),
            id="a param",
        ),
        pytest.param(_one_base64_character, id="a base64 character"),
    ],
)
def test_one_character_changed_in_the_embedded_bundle_turns_the_page_red_as_the_cli_does(
    browser: Any, tmp_path: Path, demo_db: tuple[Path, str], tamper: Any
) -> None:
    db, key = demo_db
    out = tmp_path / "demo.html"
    assert make_report(db, out, "--key", key).exit_code == 0
    html = tamper(out.read_bytes())
    assert html != out.read_bytes()
    found = _BUNDLE.search(html)
    assert found is not None
    (tmp_path / "tampered.afp").write_bytes(base64.b64decode(found.group(2)))
    exit_code, expected = cli_verdicts(tmp_path / "tampered.afp", ())
    assert exit_code == 1
    out.write_bytes(html)
    opened = open_report(browser, out)
    assert opened.state == "invalid"
    failed = Counter(v for v in expected if v[1] not in PASS)
    assert failed and Counter(v for v in page_verdicts(opened) if v[1] not in PASS) == failed


# -- what an auditor reads ----------------------------------------------------------------------

SHOTS = os.environ.get("AFP_WRITE_SCREENSHOTS")  # set: the screenshots go to docs/images/


def _shot(page: Any, tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 10_000  # a rendered page, not a blank one
    if SHOTS:
        (DOCS / "images").mkdir(exist_ok=True)
        shutil.copy(path, DOCS / "images" / name)
    return path


def test_a_sealed_redacted_tool_using_run_reads_well(browser: Any, tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    policy = af.RedactionPolicy(keys=["city"], patterns=["(?i)^from$"])

    class Travel:  # a permission checker: its decisions are recorded, and shown per call
        def check(self, request: af.PermissionRequest) -> af.Decision:
            return af.Decision.allow(f"{request.tool} is a travel tool", by="travel-policy")

    with build_demo_agent(db, signer=SIGNER, redact=policy, permission_checker=Travel()) as agent:
        first = agent.run_sync(DEMO_QUESTIONS[0])
        agent.run_sync(DEMO_QUESTIONS[1], continue_from=first)
    out = tmp_path / "report.html"
    assert make_report(db, out, "--key", SIGNER.public.text).exit_code == 0

    def read(page: Any) -> dict[str, str]:  # in the browser's thread
        section = page.locator(f"section[data-run='{first.run_id}']")
        section.locator("summary", has_text="Model calls").click()
        section.locator("summary", has_text="call 1 ").click()
        section.get_by_text("Request digest recorded").wait_for()  # built when first opened
        calls = section.inner_text()
        section.locator("summary", has_text="Redacted values").click()
        section.get_by_text("Redaction policy").wait_for()
        redacted = section.inner_text()
        section.locator("summary", has_text="Tool calls").click()
        section.get_by_text("recorded events").wait_for()
        tools = section.inner_text().split("Tool calls")[1]
        _shot(page, tmp_path, "report-run.png")
        page.fill("#af-search", "convert_currency")
        return {
            "calls": calls,
            "redacted": redacted,
            "tools": tools,
            "hits": page.locator("#af-hits").inner_text(),
        }

    opened = open_report(browser, out, then=read)
    assert opened.state == "valid", opened.verdicts
    assert {v["code"] for v in opened.verdicts} == {"VALID"}
    seen = opened.then
    assert "Request digest recorded" in seen["calls"] and "✗" not in seen["calls"]
    assert ".city" in seen["redacted"]  # where a value was committed, never the value
    assert "get_weather" in seen["tools"] and "Lisbon" not in seen["tools"]
    assert "allow by travel-policy" in seen["tools"] and "ms" in seen["tools"]
    assert "events match" in seen["hits"]


def test_the_diff_of_two_runs_shows_the_first_request_that_differs(
    browser: Any, tmp_path: Path
) -> None:
    db = tmp_path / "runs.db"
    ids = []
    for system in ("You are a concise travel helper.", "You are a chatty travel helper."):
        with af.Agent(
            provider=af.MockProvider(demo_script()),
            model="scripted-travel-model",
            system=[system, "Use the tools for facts; never guess a forecast or a rate."],
            tools=demo_tools(),
            store=db,
        ) as agent:
            ids.append(str(agent.run_sync(DEMO_QUESTIONS[0]).run_id))
    out = tmp_path / "diff.html"
    made = make_report(db, out, "--diff", *ids)
    assert made.exit_code == 0, made.output

    def read(page: Any) -> str:
        _shot(page, tmp_path, "report-diff.png")
        return str(page.locator("#af-diff").inner_text())

    opened = open_report(browser, out, then=read)
    assert opened.state == "valid"
    assert "Request 0 differs" in opened.then
    assert "system: 1 of 2 differ" in opened.then
    assert "messages: 0 of 1 differ" in opened.then


def test_the_report_command_refuses_what_it_cannot_make(tmp_path: Path) -> None:
    valid = VECTORS / "valid.db"
    for args, words in (
        (["--run", "nope"], "no run 'nope'"),
        (["--diff", "a", "a"], "two different runs"),
        (["--key", "ed25519:AAAA"], "key"),
    ):
        result = cli("report", str(valid), "--out", str(tmp_path / "r.html"), *args)
        assert result.exit_code == 2, result.output
        assert words in result.output
        assert not (tmp_path / "r.html").exists()
    result = cli("report", str(valid), "--out", str(valid))
    assert result.exit_code == 2
    assert valid.read_bytes()[:16] == b"SQLite format 3\x00"


def test_a_bundle_of_version_3_is_refused_by_the_page_as_newer_never_read_as_version_1(
    browser: Any, tmp_path: Path
) -> None:
    """The page reads bundle versions 1 and 2 (docs/report.md); a report made of a bundle
    that carries artifacts (log-format section 13.5) embeds it as it is, and the page says
    it is newer than it knows: not judged, never green."""
    log = af.SqliteStore(tmp_path / "log.db")
    carried = af.MemoryArtifacts()
    placed_run(log, carried, "run-a", [b"a" * 3000])
    export_runs(log, ["run-a"], tmp_path / "runs.afp", artifacts=carried)
    log.close()
    out = tmp_path / "report.html"
    assert make_report(tmp_path / "runs.afp", out).exit_code == 0
    opened = open_report(browser, out)
    assert opened.errors == [] and opened.state == "invalid"
    assert page_verdicts(opened) == [(None, "usage", None)]
    assert "newer than 2" in opened.verdicts[0]["reason"]


@pytest.mark.parametrize(
    "name",
    [
        "quotations-committed-every-disclosure-proven",
        "a-disclosure-that-does-not-open-its-commitment",
    ],
)
def test_the_page_opens_exactly_the_disclosures_that_hash_to_their_commitments(
    browser: Any, tmp_path: Path, name: str
) -> None:
    db, disclosures = VECTORS / "echoes" / f"{name}.db", VECTORS / "echoes" / f"{name}.json"
    out = tmp_path / "report.html"
    made = make_report(db, out, "--disclosures", str(disclosures))
    assert made.exit_code == 0, made.output
    proven = json.loads(
        cli("verify", "--json", str(db), "--disclosures", str(disclosures)).stdout
    ).get("proven", [])
    opened = open_report(browser, out, then=lambda page: page.evaluate("window.AFReport.opened"))
    given = json.loads(disclosures.read_text())["disclosures"]
    assert len(opened.then) == len({d["commitment"] for d in given})  # each in the runs
    good = {(d["key"], json.loads(d["value"])) for d in opened.then if d["ok"]}
    assert good == {(p["key"], p["value"]) for p in proven}  # the CLI proves the same ones
    wrong = [
        d for d in given if d["commitment"] not in {o["commitment"] for o in opened.then if o["ok"]}
    ]
    assert bool(wrong) == ("does-not-open" in name)


def test_without_webcrypto_the_page_checks_nothing_and_marks_nothing_green(
    browser: Any, tmp_path: Path
) -> None:
    """A page served where the browser gives no WebCrypto (plain http from another host)."""
    out = tmp_path / "report.html"
    assert make_report(VECTORS / "valid.afp", out).exit_code == 0
    opened = open_report(
        browser,
        out,
        before="Object.defineProperty(globalThis.crypto, 'subtle', {value: undefined})",
        then=lambda page: page.evaluate(
            "document.querySelectorAll('.mark-ok, .verdict.ok, .chip.ok').length"
        ),
    )
    assert opened.state == "error" and "nothing was checked" in opened.report["error"]
    assert opened.then == 0


def test_the_embedded_bundle_downloads_byte_for_byte(browser: Any, tmp_path: Path) -> None:
    source = VECTORS / "proven-valid.afp"
    out = tmp_path / "report.html"
    assert make_report(source, out).exit_code == 0

    def download(page: Any) -> bytes:
        with page.expect_download() as started:
            page.click("#af-download")
        return Path(started.value.path()).read_bytes()

    opened = open_report(browser, out, then=download)
    assert opened.then == source.read_bytes()
    assert [u for u in opened.requests if not u.startswith("blob:")] == []


def test_a_key_pasted_in_the_page_is_pinned_and_the_runs_verified_again(
    browser: Any, tmp_path: Path
) -> None:
    out = tmp_path / "report.html"
    assert make_report(VECTORS / "sealed-valid.db", out).exit_code == 0

    def pin(page: Any) -> list[str]:
        page.fill("#af-key", "ed25519:not-base64")
        page.click("#af-pin")
        refused = page.locator("#af-key-note").inner_text()
        page.fill("#af-key", SIGNER.public.text)
        page.click("#af-pin")
        page.wait_for_function("window.AFReport.pinned && window.AFReport.pinned.length === 1")
        page.wait_for_function("window.AFReport.verdicts.every((v) => v.code === 'VALID')")
        return [refused, page.locator(".controls").nth(1).inner_text()]

    opened = open_report(browser, out, then=pin)
    assert {v["code"] for v in opened.verdicts} == {"VALID_UNSIGNED"}  # before the pin
    refused, pinned = opened.then
    assert "ed25519:BASE64" in refused
    assert SIGNER.public.text in pinned
