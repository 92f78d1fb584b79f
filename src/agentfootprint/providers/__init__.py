"""Real model providers: ``openai(...)`` (Chat Completions, so also Ollama, vLLM, llama.cpp,
LM Studio through ``base_url``) and ``anthropic(...)`` (Messages).

Each adapter uses its vendor's official SDK, an optional extra
(``pip install "agentfootprint[openai]"``), imported only when a factory is called:
importing this package imports no SDK.

The factories share their names with the modules that implement them
(``agentfootprint.providers.openai`` is both). Importing a submodule normally rebinds the
package attribute to the module; this package keeps the factory there instead, so
``providers.openai(...)`` always calls the factory. Import the module's contents with
``from agentfootprint.providers.openai import OpenAIChat``. The factories themselves are
defined in :mod:`agentfootprint.providers.factories`, where their full names are their own
(a type checker reading the package back from its cache took them for the modules).
"""

from __future__ import annotations

import sys
import types
from typing import Any

from agentfootprint.providers.factories import anthropic, openai, rebuilt

__all__ = ["anthropic", "openai", "rebuilt"]

_FACTORIES = frozenset(__all__)


class _Package(types.ModuleType):
    """Keeps the factories bound when the import system binds their namesake modules."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _FACTORIES and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
