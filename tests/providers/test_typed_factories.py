"""``af.openai(...)`` and ``af.anthropic(...)`` take typed keyword parameters, like ``Agent``:
an editor completes them and mypy refuses a misspelt one. The facade's parameters are the
implementing factories' exactly, and docs/providers.md lists exactly those."""

from __future__ import annotations

import inspect
import re
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal, get_type_hints

import anthropic as anthropic_sdk
import openai as openai_sdk
import pytest

import agentfootprint as af
from agentfootprint import providers
from agentfootprint.providers.anthropic import AnthropicMessages
from agentfootprint.providers.openai import OpenAIChat
from mypy_snippets import mypy_errors

ROOT = Path(__file__).resolve().parents[2]
#: what the TYPE_CHECKING imports of the modules bind (resolved here, the SDKs installed)
NAMES = {
    "AsyncOpenAI": openai_sdk.AsyncOpenAI,
    "AsyncAnthropic": anthropic_sdk.AsyncAnthropic,
    "openai_sdk": openai_sdk,
    "sdk": anthropic_sdk,
    "OpenAIChat": OpenAIChat,
    "AnthropicMessages": AnthropicMessages,
    "Literal": Literal,
    "Mapping": Mapping,
}
FACTORIES = [
    (providers.openai, sys.modules["agentfootprint.providers.openai"].openai, OpenAIChat),
    (
        providers.anthropic,
        sys.modules["agentfootprint.providers.anthropic"].anthropic,
        AnthropicMessages,
    ),
]


def hints(function: Callable[..., Any]) -> dict[str, Any]:
    return get_type_hints(function, localns=NAMES)


def documented(vendor: str) -> list[str]:
    """The option column of the factory's table in docs/providers.md."""
    text = (ROOT / "docs" / "providers.md").read_text(encoding="utf-8")
    section = text.split(f"## `af.{vendor}(...)`", 1)[1].split("\n## ", 1)[0]
    table = section.split("| option | default | meaning |", 1)[1].split("\n\n", 1)[0]
    return re.findall(r"^\| `(\w+)` \|", table, flags=re.MULTILINE)


@pytest.mark.parametrize(("facade", "factory", "made"), FACTORIES)
def test_the_facade_takes_the_factorys_parameters_exactly_typed(
    facade: Callable[..., Any], factory: Callable[..., Any], made: type
) -> None:
    ours, theirs = inspect.signature(facade), inspect.signature(factory)
    assert [(p.name, p.kind, p.default) for p in ours.parameters.values()] == [
        (p.name, p.kind, p.default) for p in theirs.parameters.values()
    ]
    assert all(p.kind is p.KEYWORD_ONLY for p in ours.parameters.values())  # no **options
    facade_hints, factory_hints = hints(facade), hints(factory)
    assert facade_hints == factory_hints
    assert facade_hints["return"] is made
    assert not [n for n, h in facade_hints.items() if h is Any], facade_hints


@pytest.mark.parametrize("vendor", ["openai", "anthropic"])
def test_the_documented_options_are_the_typed_ones(vendor: str) -> None:
    facade = getattr(providers, vendor)
    assert documented(vendor) == list(inspect.signature(facade).parameters)


def test_the_classes_take_every_option_of_their_factory() -> None:
    for facade, _, made in FACTORIES:
        accepted = inspect.signature(made).parameters
        assert set(inspect.signature(facade).parameters) <= set(accepted), made


@pytest.mark.parametrize("vendor", ["openai", "anthropic"])
def test_the_facade_passes_every_option_on_under_its_name(
    vendor: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    received: dict[str, Any] = {}

    def factory(**options: Any) -> str:
        received.update(options)
        return "made"

    monkeypatch.setattr(sys.modules[f"agentfootprint.providers.{vendor}"], vendor, factory)
    facade = getattr(af, vendor)
    values = {name: f"value of {name}" for name in inspect.signature(facade).parameters}
    assert facade(**values) == "made"
    assert received == values


_SNIPPET = """\
import openai

import agentfootprint as af


def build() -> None:
    af.openai(base_ur="http://localhost:11434/v1")
    af.anthropic(strem=True)
    af.openai(client=openai.OpenAI(api_key="k"))
    af.anthropic(timeout="60")
    af.openai(max_tokens_field="tokens")
    af.anthropic(api_key="k").no_such_member
    af.openai(client=openai.AsyncAzureOpenAI(api_key="k", api_version="v", azure_endpoint="x"))
    af.anthropic(api_key="k", stream=True, default_max_tokens=512).describe()
"""


@pytest.mark.slow
def test_mypy_refuses_a_misspelt_option_and_a_wrong_type(tmp_path: Path) -> None:
    status, by_line, out = mypy_errors(tmp_path / "provider_options_snippet.py", _SNIPPET)
    assert status == 1, out
    assert sorted(by_line) == [7, 8, 9, 10, 11, 12], out
    assert 'Unexpected keyword argument "base_ur"' in by_line[7]
    assert 'did you mean "base_url"' in by_line[7]
    assert 'Unexpected keyword argument "strem"' in by_line[8]
    assert '"client"' in by_line[9] and '"AsyncOpenAI | None"' in by_line[9]
    assert '"timeout"' in by_line[10] and '"float | None"' in by_line[10]
    assert '"max_tokens_field"' in by_line[11]
    assert '"AnthropicMessages" has no attribute "no_such_member"' in by_line[12]
