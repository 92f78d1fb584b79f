"""Policy version 2 (what the writer records): RE2 patterns, matched in linear time.

A pattern matches a key when RE2 (default options, UTF-8) finds it anywhere in the key, at
any key length. New patterns are asked for a fixed subset that RE2 and Python ``re`` read
alike (``agentfootprint.store.pattern_subset``); a recorded pattern need only compile.
docs/log-format.md sections 12.1 and 12.2.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final

import re2

from agentfootprint.logformat.policy_spec import PatternRules

__all__ = ["RULES", "re2_refusal"]


def _re2_options() -> Any:
    options = re2.Options()
    options.log_errors = False  # RE2 would print a line on stderr for each refused pattern
    return options


_RE2_OPTIONS: Final = _re2_options()


def re2_refusal(pattern: str) -> str | None:
    """Why RE2 (default options, UTF-8) refuses ``pattern``, or None when it compiles."""
    try:
        re2.compile(pattern, _RE2_OPTIONS)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else "refused"
        return reason.decode("utf-8", "replace") if isinstance(reason, bytes) else str(reason)
    except UnicodeEncodeError:
        return "the pattern holds a lone surrogate"
    return None


def _re2_search(patterns: Sequence[str]) -> Callable[[str], bool] | None:
    if not patterns:
        return None
    compiled = [re2.compile(p.encode("utf-8"), _RE2_OPTIONS) for p in patterns]

    def search(key: str) -> bool:
        data = key.encode("utf-8", "surrogatepass")  # (a recorded key never has a surrogate)
        return any(p.search(data) is not None for p in compiled)

    return search


RULES: Final = PatternRules(
    version=2, syntax="RE2 syntax", refusal=re2_refusal, searcher=_re2_search
)
