"""Options are checked at construction: each bad input is a UsageError naming the option."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

import agentfootprint as af
from agentfootprint.features import registry
from agentfootprint.features.seed_options import SEED_OPTIONS, python_name
from agentfootprint.features.turn import call_params


def _tool(name: str = "t") -> af.Tool:
    return af.define_tool(name=name, description="d", execute=lambda a: "ok")


def make(**options: Any) -> af.Agent:
    base: dict[str, Any] = {"provider": af.MockProvider(["hi"]), "model": "m"}
    base.update(options)
    return af.Agent(**base)


def refused(option: str, **options: Any) -> af.UsageError:
    with pytest.raises(af.UsageError) as caught:
        make(**options)
    assert caught.value.option == option
    assert option in str(caught.value)
    return caught.value


def test_defaults() -> None:
    config = make().config
    assert (config.name, config.id, config.max_iterations) == ("Agent", "agent", 10)
    assert (config.react_mode, config.tool_arg_validation) == ("dynamic", "enforce")
    assert (config.commit_values, config.record_receipt) == ("delta", True)
    assert call_params(config.options) == {}
    assert call_params(make(temperature=0.3, max_tokens=9).config.options) == {
        "temperature": 0.3,
        "max_tokens": 9,
    }


def test_unknown_option_suggests_the_close_name() -> None:
    error = refused("max_iteration", max_iteration=3)
    assert "did you mean 'max_iterations'" in str(error)


def test_every_seed_option_is_implemented() -> None:
    """The seed is whole: every one of its options is declared by a feature (none is
    refused as planned any more)."""
    assert {python_name(seed) for seed in SEED_OPTIONS} <= set(registry.option_specs())


@pytest.mark.parametrize("value", [0, 51, -1, 10**6])
def test_max_iterations_outside_1_to_50(value: int) -> None:
    error = refused("max_iterations", max_iterations=value)
    assert "between 1 and 50" in str(error)


@pytest.mark.parametrize("value", ["10", 2.5, True, None])
def test_max_iterations_wrong_type(value: Any) -> None:
    refused("max_iterations", max_iterations=value)


def test_max_iterations_bounds_accepted() -> None:
    assert make(max_iterations=1).config.max_iterations == 1
    assert make(max_iterations=50).config.max_iterations == 50


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("temperature", -0.1),
        ("temperature", float("nan")),
        ("temperature", "hot"),
        ("temperature", True),
        ("max_tokens", 0),
        ("max_tokens", 1.5),
        ("max_tokens", "9"),
        ("react_mode", "loop"),
        ("tool_arg_validation", "strict"),
        ("commit_values", "diff"),
        ("record_receipt", "yes"),
        ("name", ""),
        ("name", 3),
        ("id", "has space"),
        ("id", ""),
        ("model", ""),
        ("model", None),
        ("system", 5),
        ("system", ["ok", 3]),
        ("tools", "not-a-list"),
        ("tools", [lambda a: a]),
        ("store", 42),
    ],
)
def test_wrong_types_and_values(option: str, value: Any) -> None:
    refused(option, **{option: value})


def test_provider_must_have_complete() -> None:
    refused("provider", provider=object())
    refused("provider", provider=None)


def test_an_unknown_react_mode_is_refused_naming_the_three() -> None:
    error = refused("react_mode", react_mode="grouped")
    assert "'dynamic', 'dynamic-grouped', 'classic'" in str(error)


def test_duplicate_tool_names() -> None:
    error = refused("tools", tools=[_tool("same"), _tool("same")])
    assert "'same'" in str(error)


@pytest.mark.parametrize("name", ["", "has space", "x" * 65, "dot.name", "ünï", 7])
def test_invalid_tool_names(name: Any) -> None:
    with pytest.raises(af.UsageError) as caught:
        af.define_tool(name=name, description="d", execute=lambda a: a)
    assert caught.value.option == "tools"


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "string"},
        {"properties": {}},
        {"type": "array", "items": {}},
        {"type": "object", "properties": {"a": {"type": "no-such-type"}}},
        {"type": "object", "minimum": float("nan")},
    ],
)
def test_schema_must_be_an_object_schema(schema: dict[str, Any]) -> None:
    with pytest.raises(af.UsageError) as caught:
        af.define_tool(name="t", description="d", execute=lambda a: a, input_schema=schema)
    assert caught.value.option == "tools"
    assert "'t'" in str(caught.value)


def test_tool_needs_description_and_callable() -> None:
    with pytest.raises(af.UsageError):
        af.define_tool(name="t", description=" ", execute=lambda a: a)
    with pytest.raises(af.UsageError):
        af.define_tool(name="t", description="d", execute="nope")  # type: ignore[arg-type]


def test_mock_provider_misuse() -> None:
    with pytest.raises(af.UsageError):
        af.MockProvider()
    with pytest.raises(af.UsageError):
        af.MockProvider(["a"], respond=lambda r: "b")
    with pytest.raises(af.UsageError):
        af.MockProvider([3])  # type: ignore[list-item]


def test_store_choices(tmp_path: Any) -> None:
    assert isinstance(make().store, af.MemoryStore)
    assert isinstance(make(store=tmp_path / "a.db").store, af.SqliteStore)
    assert isinstance(make(store=str(tmp_path / "b.db")).store, af.SqliteStore)
    own = af.MemoryStore()
    assert make(store=own).store is own


# -- the vault is never the log (issue 8, class 9) ---------------------------------------------


def _redacting(**options: Any) -> af.Agent:
    return make(redact=af.conversation_redaction(), **options)


def _same_file_spellings(tmp_path: Path) -> list[tuple[str, Any, Any]]:
    log = tmp_path / "runs.db"
    (tmp_path / "sub").mkdir()
    link = tmp_path / "link.db"
    link.symlink_to(log)
    hard = tmp_path / "hard.db"
    af.SqliteStore(log).close()
    os.link(log, hard)
    return [
        ("the same path", log, log),
        ("the same path as str and Path", str(log), log),
        ("another spelling", log, tmp_path / "sub" / ".." / "runs.db"),
        ("a symlink", log, link),
        ("a hard link", log, hard),
    ]


@pytest.mark.parametrize("index", range(5))
def test_disclosures_that_are_the_log_are_refused(tmp_path: Path, index: int) -> None:
    label, store, disclosures = _same_file_spellings(tmp_path)[index]
    before = (tmp_path / "runs.db").read_bytes()
    with pytest.raises(af.UsageError) as caught:
        _redacting(store=store, disclosures=disclosures)
    assert caught.value.option == "disclosures", label
    assert "log" in str(caught.value)
    assert (tmp_path / "runs.db").read_bytes() == before  # nothing was added to the log


def test_disclosures_naming_a_new_file_twice_are_refused(tmp_path: Path) -> None:
    """Neither file exists yet: the same path is still one file (nothing is created)."""
    with pytest.raises(af.UsageError) as caught:
        _redacting(store=tmp_path / "new.db", disclosures=str(tmp_path / "new.db"))
    assert caught.value.option == "disclosures"
    assert list(tmp_path.iterdir()) == []


def test_disclosures_equal_to_an_open_store_are_refused(tmp_path: Path) -> None:
    store = af.SqliteStore(tmp_path / "runs.db")
    try:
        with pytest.raises(af.UsageError) as caught:
            _redacting(store=store, disclosures=tmp_path / "runs.db")
        assert caught.value.option == "disclosures"
    finally:
        store.close()


def test_disclosures_that_are_another_log_are_refused(tmp_path: Path) -> None:
    other = tmp_path / "other.db"
    with af.Agent(provider=af.MockProvider(["x"]), model="m", store=other) as agent:
        agent.run_sync("go")
    before = other.read_bytes()
    with pytest.raises(af.NotAVaultError) as caught:
        _redacting(store=tmp_path / "runs.db", disclosures=other)
    assert caught.value.option == "disclosures" and "disclosures" in str(caught.value)
    assert other.read_bytes() == before
    assert not (tmp_path / "runs.db").exists()  # refused before the log was created


def test_a_vault_as_the_store_is_refused(tmp_path: Path) -> None:
    vault = tmp_path / "vault.db"
    af.DisclosureVault(vault).close()
    with pytest.raises(af.NotALogError) as caught:
        make(store=vault)
    assert caught.value.option == "store" and "store" in str(caught.value)


def test_a_vault_of_its_own_is_accepted(tmp_path: Path) -> None:
    with _redacting(store=tmp_path / "runs.db", disclosures=tmp_path / "vault.db") as agent:
        result = agent.run_sync("hi")
    assert result.answer == "hi"
    with _redacting(store=tmp_path / "runs.db", disclosures=tmp_path / "vault.db") as again:
        assert again.run_sync("more", continue_from=result.run_id).answer == "hi"


@pytest.mark.parametrize("option", ["store", "disclosures"])
def test_file_options_name_the_missing_folder(tmp_path: Path, option: str) -> None:
    missing = tmp_path / "no-such-folder" / "x.db"
    with pytest.raises(af.FileError) as caught:
        _redacting(**{option: missing})
    assert caught.value.option == option and option in str(caught.value)
    assert caught.value.path == str(missing)


@pytest.mark.parametrize("option", ["store", "disclosures"])
def test_file_options_refuse_a_folder(tmp_path: Path, option: str) -> None:
    with pytest.raises(af.FileError) as caught:
        _redacting(**{option: tmp_path})
    assert caught.value.option == option


def test_a_failed_store_closes_the_vault_it_opened(tmp_path: Path) -> None:
    (tmp_path / "not-a-log.db").write_bytes(b"plain text, not SQLite")
    with pytest.raises(af.NotALogError):
        _redacting(store=tmp_path / "not-a-log.db", disclosures=tmp_path / "vault.db")
    # the vault was closed: it can be removed and opened again at once
    af.DisclosureVault(tmp_path / "vault.db").close()


@pytest.mark.parametrize("value", ["", b"x.db"])
def test_a_store_path_must_be_a_non_empty_str(value: Any) -> None:
    refused("store", store=value)


def test_a_read_only_store_is_refused(tmp_path: Path) -> None:
    af.SqliteStore(tmp_path / "runs.db").close()
    with af.SqliteStore(tmp_path / "runs.db", readonly=True) as store:
        error = refused("store", store=store)
    assert "read-only" in str(error)


@pytest.mark.parametrize("model", ['{"n": 1e400}', "[1, 2]", ' {"ssn": "x"}', "[" * 300])
def test_a_model_name_that_is_json_text_is_refused(model: str) -> None:
    # a redaction policy would rewrite it (walkable) or commit it whole (opaque), and the
    # recorded model would then no longer be the one served
    with pytest.raises(af.UsageError, match="option 'model'") as info:
        af.Agent(provider=af.MockProvider(["x"]), model=model)
    assert info.value.option == "model"


@pytest.mark.parametrize("model", ["[local] llama", "{not json", "gpt-4o"])
def test_model_names_that_only_look_like_json_are_kept(model: str) -> None:
    af.Agent(provider=af.MockProvider(["x"]), model=model)
