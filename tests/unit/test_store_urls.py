"""Store URLs: what is a URL and what a path, every form accepted, every form refused."""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

import pytest

import agentfootprint as af
from agentfootprint.exchange.transfer import open_log
from agentfootprint.store.memory_vault import MemoryVault
from agentfootprint.store.urls import (
    KNOWN_FORMS,
    StoreLocation,
    is_store_url,
    open_store_url,
    open_vault_url,
    parse_store_url,
    refusal,
    store_file,
)
from agentfootprint.store.vault import DisclosureVault
from agentfootprint.testing.pytest_plugin import VerifiedRuns
from agentfootprint.verify.bundle import BundleSource

# -- accepted ------------------------------------------------------------------------------

ACCEPTED = [
    # SQLAlchemy's meaning: three slashes and a relative path, four and an absolute one
    ("sqlite:///runs.db", StoreLocation("sqlite", "runs.db")),
    ("sqlite:///logs/runs.db", StoreLocation("sqlite", "logs/runs.db")),
    ("sqlite:////abs/runs.db", StoreLocation("sqlite", "/abs/runs.db")),
    ("SQLite:///runs.db", StoreLocation("sqlite", "runs.db")),  # schemes ignore case
    # percent-decoding of the path (UTF-8)
    ("sqlite:///my%20runs.db", StoreLocation("sqlite", "my runs.db")),
    ("sqlite:///a%23b%3Fc%25d.db", StoreLocation("sqlite", "a#b?c%d.db")),
    ("sqlite:///r%C3%A9sum%C3%A9.db", StoreLocation("sqlite", "résumé.db")),
    ("sqlite:///%2Fabs.db", StoreLocation("sqlite", "/abs.db")),
    ("sqlite:///sp ace.db", StoreLocation("sqlite", "sp ace.db")),
    # the one query parameter
    ("sqlite:///runs.db?durability=full", StoreLocation("sqlite", "runs.db", "full")),
    ("sqlite:////r.db?durability=normal", StoreLocation("sqlite", "/r.db", "normal")),
    ("sqlite:///runs.db?", StoreLocation("sqlite", "runs.db")),  # an empty query: none
    ("memory:", StoreLocation("memory", None)),
    ("MEMORY:", StoreLocation("memory", None)),
    # paths, as before URLs: nothing that is not a known URL form changes meaning
    ("runs.db", StoreLocation("sqlite", "runs.db")),
    ("/abs/runs.db", StoreLocation("sqlite", "/abs/runs.db")),
    ("./sqlite:runs.db", StoreLocation("sqlite", "./sqlite:runs.db")),
    ("C:\\x\\runs.db", StoreLocation("sqlite", "C:\\x\\runs.db")),  # a drive letter
    ("C:/x/runs.db", StoreLocation("sqlite", "C:/x/runs.db")),
    ("c:runs.db", StoreLocation("sqlite", "c:runs.db")),
    ("C://x/runs.db", StoreLocation("sqlite", "C://x/runs.db")),  # one letter is a drive
    ("a:b.db", StoreLocation("sqlite", "a:b.db")),
    ("runs:2026-12-02.db", StoreLocation("sqlite", "runs:2026-12-02.db")),
    ("logs/a:b/runs.db", StoreLocation("sqlite", "logs/a:b/runs.db")),
    ("1:x.db", StoreLocation("sqlite", "1:x.db")),  # a scheme starts with a letter
    ("my-file:name", StoreLocation("sqlite", "my-file:name")),
    (" sqlite:///x", StoreLocation("sqlite", " sqlite:///x")),  # not at the start: a path
]


@pytest.mark.parametrize(("value", "expected"), ACCEPTED, ids=[v for v, _ in ACCEPTED])
def test_accepted_forms(value: str, expected: StoreLocation) -> None:
    assert parse_store_url(value) == expected
    assert refusal(value) is None
    assert store_file(value) == expected.path


@pytest.mark.parametrize(
    "value",
    [Path("runs.db"), Path("sqlite:") / "x.db", PurePosixPath("memory:"), PureWindowsPath("C:/x")],
)
def test_a_path_object_is_always_a_path(value: os.PathLike[str]) -> None:
    assert not is_store_url(value)
    assert parse_store_url(value) == StoreLocation("sqlite", os.fspath(value))


@pytest.mark.parametrize(
    ("value", "url"),
    [
        ("runs.db", False),
        ("C:\\x\\runs.db", False),
        ("C://x", False),
        ("a:b", False),
        ("ab:cd", False),
        ("sqlite:", True),
        ("sqlite:x", True),
        ("sqlite+pysqlite:///x", True),
        ("memory:", True),
        ("memory:x", True),
        ("postgresql:x", True),
        ("Postgres://h/db", True),
        ("postgresql+psycopg://h/db", True),
        ("mysql://h/db", True),
        ("file:///x.db", True),
        ("ab://x", True),
        ("ab:/x", False),
        ("", False),
    ],
)
def test_what_is_a_url(value: str, url: bool) -> None:
    assert is_store_url(value) is url


def test_a_location_is_frozen() -> None:
    location = parse_store_url("sqlite:///runs.db")
    with pytest.raises(dataclasses.FrozenInstanceError):
        location.path = "other.db"  # type: ignore[misc]


# -- refused --------------------------------------------------------------------------------

#: a PostgreSQL URL that parses, naming a port nothing listens on (connection refused)
UNREACHABLE = "postgresql://u:secret@127.0.0.1:9/db"
REFUSED = [
    ("postgresql:", "starts postgresql://"),
    ("postgresql:/h/db", "starts postgresql://"),
    ("postgresql://user:secret@db.example", "names no database"),
    ("postgresql://db.example/runs?durability=fast", "durability must be"),
    ("postgresql://user:secret@db.example/runs?colour=red", "libpq refuses"),
    ("postgres://db.example/runs#x", "no fragment"),
    ("mysql://user:secret@h/db", "unknown store URL scheme 'mysql'"),
    ("file:///runs.db", "unknown store URL scheme 'file'"),
    ("https://example.com/runs.db", "unknown store URL scheme 'https'"),
    ("sqlite+pysqlite:///runs.db", "unknown store URL scheme 'sqlite+pysqlite'"),
    ("sqlite://host/runs.db", "no host or port"),
    ("sqlite://host:5432/runs.db", "no host or port"),
    ("sqlite://user:secret@/runs.db", "no user or password"),
    ("sqlite://user@host/runs.db", "no user or password"),
    ("sqlite:///runs.db#part", "no fragment"),
    ("sqlite:///", "names no file"),
    ("sqlite:///?durability=full", "names no file"),
    ("sqlite://", "names no file"),
    ("sqlite:", "three slashes"),
    ("sqlite:runs.db", "three slashes"),
    ("sqlite:/runs.db", "three slashes"),
    ("sqlite:///runs.db?durability=fast", "must be 'full' or 'normal', not 'fast'"),
    ("sqlite:///runs.db?durability=", "must be 'full' or 'normal', not ''"),
    ("sqlite:///runs.db?durability=FULL", "must be 'full' or 'normal', not 'FULL'"),
    ("sqlite:///runs.db?mode=ro", "unknown query parameter 'mode'"),
    ("sqlite:///runs.db?timeout=5", "unknown query parameter 'timeout'"),
    ("sqlite:///runs.db?durability=full&durability=normal", "durability is given twice"),
    ("sqlite:///runs.db?durability", "not name=value pairs"),
    ("sqlite:///runs.db?durability=full&&x=1", "not name=value pairs"),
    ("sqlite:///50%.db", "percent-escape"),
    ("sqlite:///%zz.db", "percent-escape"),
    ("sqlite:///%ff.db", "not UTF-8"),
    ("sqlite:///a%00.db", "NUL"),
    ("memory:runs", "exactly 'memory:'"),
    ("memory://", "exactly 'memory:'"),
    ("memory:?durability=full", "exactly 'memory:'"),
    ("", "got ''"),
]


@pytest.mark.parametrize(("value", "fragment"), REFUSED, ids=[v for v, _ in REFUSED])
def test_refused_forms(value: str, fragment: str) -> None:
    with pytest.raises(af.UsageError) as caught:
        parse_store_url(value, option="store")
    message = str(caught.value)
    assert message.startswith("option 'store': "), message
    assert caught.value.option == "store"
    assert fragment in message, message
    assert "secret" not in message  # a URL's password is never echoed
    assert refusal(value) == message.removeprefix("option 'store': ")
    assert store_file(value) is None


@pytest.mark.parametrize(
    "value", ["postgresql://h", "mysql://h/db", "sqlite://h/x", "memory:x", None, 3]
)
def test_a_refusal_names_the_forms_known_or_the_one_to_write(value: object) -> None:
    message = refusal(value)
    assert message is not None
    assert KNOWN_FORMS in message or "sqlite:///PATH" in message or "'memory:'" in message


@pytest.mark.parametrize(
    "value",
    [
        "postgresql://user:secret@db.example:5432/runs",
        "postgres://db.example/runs?durability=normal",
        "PostgreSQL://db.example/runs",
        "postgresql+psycopg://db.example/runs?sslmode=require",
        "postgresql:///runs",
    ],
)
def test_postgresql_urls_parse_without_connecting(value: str) -> None:
    assert refusal(value) is None
    location = parse_store_url(value)
    assert location.kind == "postgresql" and location.path is None
    assert location.postgres is not None and "secret" not in str(location)
    assert store_file(value) is None
    assert location.durability == ("normal" if "normal" in value else None)
    assert "durability" not in location.postgres.conninfo  # libpq never sees it


@pytest.mark.parametrize(
    ("value", "fragment"),
    [(None, "got NoneType"), (3, "got int"), (b"runs.db", "got bytes"), (["x"], "got list")],
)
def test_wrong_types_are_refused_naming_the_option(value: object, fragment: str) -> None:
    with pytest.raises(af.UsageError, match=f"^option 'DB': .*{fragment}$"):
        parse_store_url(value, option="DB")


class _BytesPath:
    def __fspath__(self) -> bytes:
        return b"runs.db"


class _EmptyPath:
    def __fspath__(self) -> str:
        return ""


def test_path_objects_that_are_no_text_path_are_refused() -> None:
    with pytest.raises(af.UsageError, match="bytes"):
        parse_store_url(_BytesPath())
    with pytest.raises(af.UsageError, match="empty path"):
        parse_store_url(_EmptyPath())


# -- opening --------------------------------------------------------------------------------


def test_open_store_url_opens_each_form(tmp_path: Path) -> None:
    memory = open_store_url("memory:")
    assert isinstance(memory, af.MemoryStore)
    relative = tmp_path / "rel.db"
    for value, durability in [
        (f"sqlite:///{relative}", "full"),  # tmp_path is absolute: four slashes
        (f"sqlite:///{relative}?durability=normal", "normal"),
        (relative, "full"),
        (str(relative), "full"),
        (parse_store_url(f"sqlite:///{relative}?durability=normal"), "normal"),
    ]:
        store = open_store_url(value)
        try:
            assert isinstance(store, af.SqliteStore)
            assert store.durability == durability
            assert Path(store.path) == relative
        finally:
            store.close()
    store = open_store_url(f"sqlite:///{relative}", durability="normal")
    assert isinstance(store, af.SqliteStore) and store.durability == "normal"
    store.close()


def test_open_store_url_refusals(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/r.db?durability=normal"
    with pytest.raises(af.UsageError, match="the store URL says durability=normal"):
        open_store_url(url, durability="full")
    with pytest.raises(af.UsageError, match="must be 'full' or 'normal'"):
        open_store_url(url, durability="fast")
    with pytest.raises(af.UsageError, match="in-memory store keeps nothing"):
        open_store_url("memory:", durability="full")
    with pytest.raises(af.UsageError, match="nothing in it to read"):
        open_store_url("memory:", readonly=True)
    with pytest.raises(af.StoreUnavailableError, match="could not be reached") as caught:
        open_store_url(UNREACHABLE)
    assert "secret" not in str(caught.value)
    assert not (tmp_path / "r.db").exists()


def test_read_only_opening_never_creates_a_file(tmp_path: Path) -> None:
    missing = tmp_path / "missing.db"
    with pytest.raises(af.FileError, match=r"no such file|does not exist"):
        open_store_url(f"sqlite:///{missing}", readonly=True)
    with pytest.raises(af.FileError, match=r"no such file|does not exist"):
        open_log(f"sqlite:///{missing}")
    assert not missing.exists()


def test_open_log_reads_a_url_as_its_file(tmp_path: Path) -> None:
    db = tmp_path / "a b.db"
    with af.Agent(provider=af.MockProvider(["ok"]), model="m", store=db) as agent:
        run_id = agent.run_sync("hi").run_id
        af.export_runs(agent.store, [run_id], tmp_path / "runs.afp")
    encoded = f"sqlite:///{tmp_path}/a%20b.db"
    store = open_log(encoded)
    try:
        assert isinstance(store, af.SqliteStore) and store.readonly
        assert [run.run_id for run in store.runs()] == [run_id]
    finally:
        store.close()
    bundle = open_log(f"sqlite:///{tmp_path}/runs.afp")  # what the file holds decides
    try:
        assert isinstance(bundle, BundleSource)
    finally:
        bundle.close()
    with pytest.raises(af.UsageError, match=r"^option 'db': memory: .*nothing in it to read"):
        open_log("memory:")
    with pytest.raises(af.StoreUnavailableError, match="could not be reached"):
        open_log(UNREACHABLE, option="DB")


def test_open_vault_url(tmp_path: Path) -> None:
    vault = open_vault_url("memory:")
    assert isinstance(vault, MemoryVault)
    vault.close()
    with pytest.raises(af.UsageError, match="nothing in it to read"):
        open_vault_url("memory:", readonly=True)
    opened = open_vault_url(f"sqlite:///{tmp_path}/v%20x.db")
    try:
        assert isinstance(opened, DisclosureVault)
        assert (tmp_path / "v x.db").exists()
    finally:
        opened.close()
    with pytest.raises(af.UsageError, match=r"^option 'disclosures': .*master_key"):
        open_vault_url("postgres://h/db")


# -- Agent(store=URL) -------------------------------------------------------------------------


def _agent(**options: object) -> af.Agent:
    return af.Agent(provider=af.MockProvider(["ok"]), model="m", **options)


def test_an_agent_records_into_a_relative_sqlite_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, verified_runs: VerifiedRuns
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "logs").mkdir()
    with _agent(store="sqlite:///logs/my%20runs.db?durability=normal") as agent:
        assert isinstance(agent.store, af.SqliteStore)
        assert agent.store.durability == "normal"
        run_id = agent.run_sync("hi").run_id
    assert run_id in verified_runs.run_ids  # the plugin verified it as it closed
    assert (tmp_path / "logs" / "my runs.db").is_file()
    with af.SqliteStore(tmp_path / "logs" / "my runs.db", readonly=True) as store:
        assert af.verify_run(store, run_id).outcome.value == "VALID_UNSIGNED"
    with _agent(store="sqlite:///logs/my%20runs.db", durability="normal") as again:
        assert isinstance(again.store, af.SqliteStore) and again.store.durability == "normal"
    with _agent(store="sqlite:///logs/my%20runs.db?durability=full", durability="full") as same:
        assert isinstance(same.store, af.SqliteStore) and same.store.durability == "full"


def test_an_agent_records_into_memory(verified_runs: VerifiedRuns) -> None:
    agent = _agent(store="memory:")
    assert isinstance(agent.store, af.MemoryStore)
    run_id = agent.run_sync("hi").run_id
    assert run_id in verified_runs.run_ids
    assert af.verify_run(agent.store, run_id).outcome.value == "VALID_UNSIGNED"
    agent.close()  # the agent opened it: it closes it


@pytest.mark.parametrize(
    ("options", "option", "fragment"),
    [
        ({"store": "memory:", "durability": "full"}, "durability", "keeps nothing across"),
        (
            {"store": "sqlite:///r.db?durability=normal", "durability": "full"},
            "durability",
            "'full' but the store URL says durability=normal",
        ),
        ({"store": "postgresql://u:secret@h"}, "store", "names no database"),
        (
            {"store": "postgresql://u:secret@h/db?durability=full", "durability": "normal"},
            "durability",
            "'normal' but the store URL says durability=full",
        ),
        ({"store": "sqlite://host/r.db"}, "store", "no host or port"),
        ({"store": "memory:x"}, "store", "exactly 'memory:'"),
        ({"store": "mysql://h/db"}, "store", "unknown store URL scheme"),
        ({"store": "sqlite:///absent/r.db"}, "store", "absent"),
    ],
)
def test_an_agent_refuses_a_store_url(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    options: dict[str, object],
    option: str,
    fragment: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(af.UsageError) as caught:
        _agent(**options)
    message = str(caught.value)
    assert fragment in message and "secret" not in message, message
    assert message.startswith(f"option '{option}'") and caught.value.option == option
    assert list(tmp_path.iterdir()) == []  # nothing created


def test_an_agent_keeps_its_path_behaviour(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Strings that merely hold a colon are file paths, as before."""
    monkeypatch.chdir(tmp_path)
    with _agent(store="a:b.db") as agent:
        agent.run_sync("hi")
    assert (tmp_path / "a:b.db").is_file()
    with pytest.raises(af.UsageError, match="the in-memory store keeps nothing"):
        _agent(durability="full")


def test_the_url_example_of_docs_stores_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, verified_runs: VerifiedRuns
) -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "stores.md").read_text("utf-8")
    section = text.split("## Opening a store from a URL", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```py\n(.*?)```", section, flags=re.S)
    monkeypatch.chdir(tmp_path)
    scope: dict[str, Any] = {"af": af}
    exec(compile(block, "docs/stores.md", "exec"), scope)
    try:
        assert isinstance(scope["agent"].store, af.SqliteStore)
        assert scope["agent"].store.path == Path("runs.db")
        assert (tmp_path / "runs.db").is_file()
        assert scope["fast"].store.durability == "normal"
        assert isinstance(scope["scratch"].store, af.MemoryStore)
        run_id = scope["fast"].run_sync("hi").run_id
        assert run_id in verified_runs.run_ids
    finally:
        for name in ("agent", "fast", "scratch"):
            scope[name].close()


def test_a_vault_that_is_the_url_stores_file_is_refused_before_anything_is_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    policy = af.RedactionPolicy(keys=["ssn"])
    for vault in ("y.db", "sqlite:///y.db", str(tmp_path / "y.db")):
        with pytest.raises(af.UsageError, match="is the log file itself"):
            af.Agent(
                provider=af.MockProvider(["x"]),
                model="m",
                store="sqlite:///y.db",
                disclosures=vault,
                redact=policy,
            )
    assert list(tmp_path.iterdir()) == []


def test_a_vault_url_opens_its_kind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, verified_runs: VerifiedRuns
) -> None:
    monkeypatch.chdir(tmp_path)
    policy = af.RedactionPolicy(keys=["ssn"])
    with af.Agent(
        provider=af.MockProvider(["x"]),
        model="m",
        store="memory:",
        disclosures="memory:",
        redact=policy,
    ) as agent:
        assert isinstance(agent.vault, MemoryVault)
        agent.run_sync("hi")
    with af.Agent(
        provider=af.MockProvider(["x"]), model="m", disclosures="sqlite:///v.db", redact=policy
    ) as agent:
        assert isinstance(agent.vault, DisclosureVault)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["v.db"]  # no file named memory:


def test_the_audit_functions_read_a_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with af.Agent(provider=af.MockProvider(["x"]), model="m", store="runs.db") as agent:
        run_id = agent.run_sync("hi").run_id
    served = af.served_at("sqlite:///runs.db", run_id, 0)
    assert served == af.served_at("runs.db", run_id, 0)
    with pytest.raises(af.UsageError, match="holds no runs"):
        af.served_at("memory:", run_id, 0)


def test_a_path_that_starts_with_two_slashes_opens_read_only(tmp_path: Path) -> None:
    # found by the URL work: file://tmp/... read "tmp" as a URI authority
    store = af.SqliteStore(tmp_path / "x.db")
    store.close()
    doubled = "/" + str(tmp_path / "x.db")
    reader = af.SqliteStore(doubled, readonly=True)
    try:
        assert reader.runs() == []
    finally:
        reader.close()
