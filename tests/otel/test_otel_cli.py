"""``agentfootprint otel DB RUN``: the spans an OTLP/HTTP receiver on 127.0.0.1 gets from the
command, decoded with opentelemetry-proto, are the spans ``--json`` prints (ids, times and
attributes the log's); the database is never changed; every failure is one line and its exit
code. Every run closed here is verified by the pytest plugin as well."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import orjson
import pytest

pytest.importorskip(
    "opentelemetry.proto", reason="the otel extra is not installed: pip install -e '.[otel]'"
)

from click.testing import CliRunner
from otel_support import EMAIL, agent_for, converse, decoded_spans, receiver

import agentfootprint as af
from agentfootprint.cli import main
from agentfootprint.cli._boundary import EXIT_INVALID, EXIT_OK, EXIT_USAGE
from agentfootprint.otel import SCHEMA_URL
from agentfootprint.otel import mapping as m
from agentfootprint.testing.tamper import read_rows, reencoded, rewrite, tampering


@pytest.fixture
def recorded(tmp_path: Path) -> tuple[Path, list[str]]:
    """The two-turn conversation in a closed SQLite file (under the email policy)."""
    agent = agent_for(tmp_path)
    first, second = converse(agent)
    agent.close()
    return tmp_path / "log.db", [first.run_id, second.run_id]


def fingerprint(db: Path) -> dict[str, tuple[str, int]]:
    """Each file of the database (``-wal`` and ``-shm`` too): its digest and mtime."""
    return {
        p.name: (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
        for p in sorted(db.parent.glob(db.name + "*"))
    }


def printed(db: Path, run_id: str, *more: str) -> list[dict[str, Any]]:
    shown = CliRunner().invoke(main, ["otel", str(db), run_id, "--json", *more])
    assert shown.exit_code == EXIT_OK, shown.output
    return [orjson.loads(line) for line in shown.output.splitlines()]


@pytest.mark.parametrize("content", [False, True])
def test_the_receiver_gets_the_logs_spans(recorded: tuple[Path, list[str]], content: bool) -> None:
    db, runs = recorded
    before = fingerprint(db)
    flag = ["--content"] if content else []
    for run_id in runs:
        with receiver() as collector:
            sent = CliRunner().invoke(
                main, ["otel", str(db), run_id, "--endpoint", collector.url, *flag]
            )
        assert sent.exit_code == EXIT_OK, sent.output
        got = decoded_spans(collector.requests())
        assert [path for path, _, _ in collector.received] == ["/v1/traces"]
        assert collector.received[0][1] == "application/x-protobuf"
        assert {(s.pop("scope"), s.pop("service")) for s in got} == {
            (("agentfootprint", SCHEMA_URL), "agentfootprint")
        }
        expected = printed(db, run_id, *flag)
        key = lambda span: span["span_id"]  # noqa: E731
        assert sorted(got, key=key) == sorted(expected, key=key)
        root = next(s for s in got if s["parent_span_id"] is None)
        assert f"sent {len(got)} spans of run {run_id} (VALID_UNSIGNED)" in sent.output
        assert f"trace {root['trace_id']}" in sent.output
        assert root["attributes"][m.VERIFY_OUTCOME] == "VALID_UNSIGNED"
        operations = sorted(s["attributes"][m.OPERATION] for s in got)
        assert operations.count("invoke_agent") == 1 and "chat" in operations
        everything = b"".join(body for _, _, body in collector.received)
        assert EMAIL.encode() not in everything  # the planted secret: in no byte sent
        assert (b"$commit" in everything) is content
    assert fingerprint(db) == before  # read-only: nothing created or changed


def test_the_json_lines_repeat_and_need_no_collector(recorded: tuple[Path, list[str]]) -> None:
    db, runs = recorded
    once = printed(db, runs[0])
    assert once == printed(db, runs[0])
    assert [s["name"] for s in once][:2] == ["invoke_agent helper", "chat m"]
    assert once[0]["start_time_unix_nano"] % 1_000_000 == 0  # the rows' milliseconds


def test_the_endpoint_from_the_environment(recorded: tuple[Path, list[str]]) -> None:
    db, runs = recorded
    with receiver() as collector:
        base = collector.url.removesuffix("/v1/traces")
        sent = CliRunner().invoke(
            main, ["otel", str(db), runs[0]], env={"OTEL_EXPORTER_OTLP_ENDPOINT": base}
        )
    assert sent.exit_code == EXIT_OK, sent.output
    assert [path for path, _, _ in collector.received] == ["/v1/traces"]


def test_a_collector_that_refuses_is_one_line_exit_2(recorded: tuple[Path, list[str]]) -> None:
    db, runs = recorded
    with receiver(status=400) as collector:
        sent = CliRunner().invoke(main, ["otel", str(db), runs[0], "--endpoint", collector.url])
    assert sent.exit_code == EXIT_USAGE
    assert sent.output.startswith("Error: the collector at ") and "400" in sent.output
    assert len(sent.output.splitlines()) == 1 and "Traceback" not in sent.output
    assert len(collector.received) == 1  # a refusal is not retried


def test_a_run_that_does_not_verify_sends_nothing(recorded: tuple[Path, list[str]]) -> None:
    db, runs = recorded
    with tampering(db) as conn:
        rows = read_rows(conn, runs[0])

        def edit(body: dict[str, Any]) -> None:
            if body.get("path") == "history" and body.get("verb") == "set":
                body["value"][0]["content"] = "something else"  # not what was served

        rewrite(conn, runs[0], [reencoded(r, edit) for r in rows])
    with receiver() as collector:
        sent = CliRunner().invoke(main, ["otel", str(db), runs[0], "--endpoint", collector.url])
    assert sent.exit_code == EXIT_INVALID, sent.output
    assert "does not verify" in sent.output and collector.received == []
    printing = CliRunner().invoke(main, ["otel", str(db), runs[0], "--json"])
    assert printing.exit_code == EXIT_INVALID and "{" not in printing.output


@pytest.mark.parametrize(
    ("arguments", "env", "said"),
    [
        ([], {}, "no collector named: give --endpoint URL"),
        (["--endpoint", "ftp://x"], {}, "--endpoint: expected an http:// or https:// URL"),
        (["--endpoint", "http://127.0.0.1:9", "--json"], {}, "--json prints the spans"),
        (["--key", "nonsense", "--json"], {}, "nonsense"),
        (["--timeout", "0", "--json"], {}, "--timeout"),
    ],
)
def test_usage_errors_are_one_line_exit_2(
    recorded: tuple[Path, list[str]], arguments: list[str], env: dict[str, str], said: str
) -> None:
    db, runs = recorded
    found = CliRunner().invoke(
        main,
        ["otel", str(db), runs[0], *arguments],
        env={"OTEL_EXPORTER_OTLP_ENDPOINT": "", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "", **env},
    )
    assert found.exit_code == EXIT_USAGE
    assert found.output.startswith("Error: ") and said in found.output
    assert len(found.output.splitlines()) == 1 and "Traceback" not in found.output


def test_an_unknown_run_or_file(tmp_path: Path, recorded: tuple[Path, list[str]]) -> None:
    db, _ = recorded
    unknown = CliRunner().invoke(main, ["otel", str(db), "nope", "--json"])
    assert unknown.exit_code == EXIT_USAGE and "no run 'nope'" in unknown.output
    missing = CliRunner().invoke(main, ["otel", str(tmp_path / "absent.db"), "r", "--json"])
    assert missing.exit_code == EXIT_USAGE and not (tmp_path / "absent.db").exists()


def test_a_pinned_key_makes_a_sealed_run_valid(tmp_path: Path) -> None:
    from agentfootprint.testing.seals import OTHER, SIGNER

    agent = af.Agent(
        provider=af.MockProvider(["sealed"]),
        model="m",
        store=tmp_path / "log.db",
        signer=SIGNER,
    )
    run_id = agent.run_sync("hi").run_id
    agent.close()
    db = tmp_path / "log.db"
    for keys, outcome in (
        ([], "VALID_UNSIGNED"),
        (["--key", OTHER.public.text], "VALID_UNSIGNED"),
        (["--key", SIGNER.public.text], "VALID"),
    ):
        (root, _) = printed(db, run_id, *keys)
        assert root["attributes"][m.VERIFY_OUTCOME] == outcome


def test_sending_again_sends_the_same_bytes(recorded: tuple[Path, list[str]]) -> None:
    """Ids from the run id and times from the rows: a second export repeats the first."""
    db, runs = recorded
    bodies = []
    for _ in range(2):
        with receiver() as collector:
            sent = CliRunner().invoke(main, ["otel", str(db), runs[1], "--endpoint", collector.url])
        assert sent.exit_code == EXIT_OK, sent.output
        bodies.append(collector.received[0][2])
    assert bodies[0] == bodies[1]
