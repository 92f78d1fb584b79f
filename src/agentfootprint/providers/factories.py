"""The provider factories, ``openai(...)``, ``anthropic(...)`` and ``rebuilt(info)``, which
:mod:`agentfootprint.providers` (and ``agentfootprint``) export.

They live here, not in the package's ``__init__``, so that no type checker mistakes them for
their namesake modules: ``agentfootprint.providers.openai`` names both the factory and the
module implementing it, and mypy, reading the facade back from its cache, resolved the name
to the module (``af.openai`` typed as a module). Here each factory's full name is its own.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from agentfootprint.errors import UsageError
from agentfootprint.version import install_command

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic
    from openai import AsyncOpenAI

    from agentfootprint.providers.anthropic import AnthropicMessages
    from agentfootprint.providers.openai import OpenAIChat

__all__ = ["anthropic", "openai", "rebuilt"]

# The factories' parameters are spelt out (not ``**options``) so that editors complete them
# and mypy or pyright refuse a misspelt one; they are the implementing modules' factories'
# parameters exactly (tests/providers/test_typed_factories.py compares the two).


def openai(
    *,
    api_key: str | None = None,
    base_url: str | None = None,
    timeout: float | None = None,
    max_retries: int = 2,
    max_retry_wait: float = 30.0,
    stream: bool = False,
    organization: str | None = None,
    extra_headers: Mapping[str, str] | None = None,
    max_tokens_field: Literal["max_completion_tokens", "max_tokens"] | None = None,
    client: AsyncOpenAI | None = None,
) -> OpenAIChat:
    """A provider speaking OpenAI's Chat Completions API (or any OpenAI-compatible server's,
    through ``base_url``, or Azure OpenAI's through ``client=AsyncAzureOpenAI(...)``); the
    options are described at :func:`agentfootprint.providers.openai.openai` and in
    docs/providers.md."""
    result: OpenAIChat = _module("openai").openai(
        api_key=api_key,
        base_url=base_url,
        timeout=timeout,
        max_retries=max_retries,
        max_retry_wait=max_retry_wait,
        stream=stream,
        organization=organization,
        extra_headers=extra_headers,
        max_tokens_field=max_tokens_field,
        client=client,
    )
    return result


def anthropic(
    *,
    api_key: str | None = None,
    base_url: str | None = None,
    timeout: float | None = None,
    max_retries: int = 2,
    max_retry_wait: float = 30.0,
    stream: bool = False,
    default_max_tokens: int = 1024,
    extra_headers: Mapping[str, str] | None = None,
    client: AsyncAnthropic | None = None,
) -> AnthropicMessages:
    """A provider speaking Anthropic's Messages API; the options are described at
    :func:`agentfootprint.providers.anthropic.anthropic` and in docs/providers.md."""
    result: AnthropicMessages = _module("anthropic").anthropic(
        api_key=api_key,
        base_url=base_url,
        timeout=timeout,
        max_retries=max_retries,
        max_retry_wait=max_retry_wait,
        stream=stream,
        default_max_tokens=default_max_tokens,
        extra_headers=extra_headers,
        client=client,
    )
    return result


def rebuilt(info: Mapping[str, Any]) -> Any:
    """The adapter a run's ``run.open.provider_info`` names, configured as it recorded, for
    rebuilding wire bytes (``wire_request``) only: it is never sent anything. Raises
    :class:`UsageError` for an adapter this version does not know."""
    adapter = info.get("adapter")
    stream = info.get("stream") == "true"
    if adapter == "openai-chat":
        field = info.get("max_tokens_field")
        return openai(
            base_url="http://127.0.0.1:9/v1",  # never used: the body does not hold the URL
            stream=stream,
            max_tokens_field=field if field in ("max_completion_tokens", "max_tokens") else None,
        )
    if adapter == "anthropic":
        default = info.get("default_max_tokens", "1024")
        return anthropic(
            api_key="rebuilding-wire-bytes-only",
            stream=stream,
            default_max_tokens=int(default) if str(default).isdigit() else 1024,
        )
    raise UsageError(
        f"the run was recorded through adapter {adapter!r}, which this version cannot rebuild "
        "(known: openai-chat, anthropic)",
        option="provider",
    )


def _module(vendor: str) -> Any:
    """The adapter module; its extra not installed (the SDK, httpx2) -> how to install it."""
    try:
        return importlib.import_module(f"agentfootprint.providers.{vendor}")
    except ImportError as exc:
        if exc.name is not None and exc.name.startswith("agentfootprint"):
            raise
        raise UsageError(
            f"the {vendor} provider needs {exc.name or 'its SDK'}: {install_command(vendor)}",
            option="provider",
        ) from exc
