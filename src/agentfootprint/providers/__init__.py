"""Real model providers: ``openai(...)`` (Chat Completions, so also Ollama, vLLM, llama.cpp,
LM Studio through ``base_url``) and ``anthropic(...)`` (Messages).

Each adapter uses its vendor's official SDK, an optional extra
(``pip install "agentfootprint[openai]"``), imported only when a factory is called:
importing this package imports no SDK.

The factories share their names with the modules that implement them
(``agentfootprint.providers.openai`` is both). Importing a submodule normally rebinds the
package attribute to the module; this package keeps the factory there instead, so
``providers.openai(...)`` always calls the factory. Import the module's contents with
``from agentfootprint.providers.openai import OpenAIChat``.
"""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from agentfootprint.errors import UsageError
from agentfootprint.version import install_command

if TYPE_CHECKING:
    from agentfootprint.providers.openai import OpenAIChat

__all__ = ["anthropic", "openai", "rebuilt"]

_FACTORIES = frozenset(__all__)


def openai(**options: Any) -> OpenAIChat:
    """A provider speaking OpenAI's Chat Completions API (or any OpenAI-compatible server's,
    through ``base_url``); its options are those of
    :func:`agentfootprint.providers.openai.openai`."""
    result: OpenAIChat = _module("openai").openai(**options)
    return result


def anthropic(**options: Any) -> Any:
    """A provider speaking Anthropic's Messages API; see
    :func:`agentfootprint.providers.anthropic.anthropic`."""
    return _module("anthropic").anthropic(**options)


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


class _Package(types.ModuleType):
    """Keeps the factories bound when the import system binds their namesake modules."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _FACTORIES and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
