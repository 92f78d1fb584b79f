"""``caching`` and ``cache_strategy``: where the prompt-cache markers go, decided by a stage.

The strategy is the provider's declared ``prompt_caching`` (a class attribute) unless
``cache_strategy`` overrides it: ``"breakpoints"`` (the anthropic adapter: mark the last
system piece, the last tool and the last message of each request), ``"automatic"`` (the
openai adapter: the vendor caches long prefixes by itself, nothing is marked) or ``"none"``
(a provider that declares nothing, the mock included). An object with a
``markers(served) -> dict | None`` method is a strategy of your own. ``caching="off"``
marks nothing whatever the strategy.

Only a strategy that places markers (breakpoints, or your own) makes the feature take
part: then a stage ``cache-markers`` (before ``call-llm``) writes the markers to state
(``cache_markers``) and the run is served under projection 3, whose ``prompt_cache`` member
carries them, so they are served, receipted, verified and replayed like everything else.
Otherwise nothing changes: no stage, no row, the projection the run had.

A strategy object is a decision-maker outside committed state: what it answers is
recorded (the stage writes it), so the log shows where every marker was. A replay runs the
stage again with the strategy the replaying agent is given: the same strategy reproduces
the recorded markers; another one diverges at the write it changes.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from typing import Any, Final, Protocol, runtime_checkable

from agentfootprint.errors import UsageError
from agentfootprint.features import tool_teardown
from agentfootprint.features.base import (
    MISSING,
    Feature,
    Options,
    OptionSpec,
    StageSpec,
    StateKey,
    refuse,
)
from agentfootprint.logformat.projection import (
    CACHE_MARKERS_MAX,
    ProjectionError,
    build_request,
    cache_markers,
)
from agentfootprint.runtime.events import detached
from agentfootprint.runtime.provider import Request
from agentfootprint.runtime.run import StageContext
from agentfootprint.runtime.tool_threads import call_user_code

__all__ = ["FEATURE", "STRATEGIES", "CacheStrategy", "breakpoints"]

#: the named strategies (a provider's ``prompt_caching`` names one of them)
STRATEGIES: Final = ("breakpoints", "automatic", "none")
#: strategies that place no marker: the feature then takes no part
_MARKLESS: Final = ("automatic", "none")
_KEY: Final = "cache_markers"
_LISTS: Final = ("system", "tools", "messages")


@runtime_checkable
class CacheStrategy(Protocol):
    """A strategy of your own: given the request about to be served (without markers),
    return ``{"system": [...], "tools": [...], "messages": [...]}``, increasing indices
    into its lists (a member left out marks nothing there; at most 4 markers in all), or
    None to mark nothing. It should be a function of the request: a replay asks it again.
    It runs in a worker thread, never on the event loop."""

    def markers(self, served: Request) -> Mapping[str, Sequence[int]] | None: ...


def _caching(value: Any, given: Mapping[str, Any]) -> str | None:
    if value is MISSING:
        return None
    if isinstance(value, str) and value == "off":
        return "off"
    raise refuse(
        "caching",
        f'must be "off" to mark nothing (omit it: the cache strategy decides), got {value!r}',
    )


def _cache_strategy(value: Any, given: Mapping[str, Any]) -> Any:
    if value is MISSING:
        declared = getattr(given.get("provider"), "prompt_caching", None)
        if declared is None:
            return "none"
        if isinstance(declared, str) and declared in STRATEGIES:
            return declared
        raise refuse(
            "cache_strategy",
            f"the provider declares prompt_caching={declared!r}, which is none of "
            f"{', '.join(map(repr, STRATEGIES))}; pass cache_strategy= explicitly",
        )
    if isinstance(value, str):
        if value in STRATEGIES:
            return value
        close = difflib.get_close_matches(value, STRATEGIES, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise refuse(
            "cache_strategy",
            f"unknown strategy {value!r}{hint}: use one of {', '.join(map(repr, STRATEGIES))} "
            "or an object with a markers(served) method",
        )
    if not isinstance(value, type) and callable(getattr(value, "markers", None)):
        return value
    raise refuse(
        "cache_strategy",
        f"must be one of {', '.join(map(repr, STRATEGIES))} or an object (an instance) with a "
        f"markers(served) -> dict | None method, got {value!r}",
    )


def _active(options: Mapping[str, Any]) -> bool:
    strategy = options.get("cache_strategy", "none")
    return options.get("caching") != "off" and not (
        isinstance(strategy, str) and strategy in _MARKLESS
    )


def breakpoints(served: Mapping[str, Any]) -> dict[str, list[int]] | None:
    """The breakpoints strategy: the last system piece, the last tool and the last message
    served (None when the request has none of them)."""
    markers = {name: [len(served[name]) - 1] if served[name] else [] for name in _LISTS}
    return markers if any(markers.values()) else None


def _normalized(answer: Any, strategy: Any, served: Mapping[str, Any]) -> dict[str, Any] | None:
    """A strategy object's answer as ``cache_markers`` (every list present), checked against
    the request it was asked about; UsageError naming ``cache_strategy`` when it is wrong."""

    def wrong(reason: str) -> UsageError:
        return refuse(
            "cache_strategy",
            f"{type(strategy).__name__}.markers(...) {reason}; it must return None or "
            '{"system": [...], "tools": [...], "messages": [...]}, increasing indices into '
            f"the served lists, at most {CACHE_MARKERS_MAX} markers in all",
        )

    if answer is None:
        return None
    if not isinstance(answer, Mapping):
        raise wrong(f"returned {type(answer).__name__}, not a mapping")
    unknown = sorted(str(k) for k in answer if k not in _LISTS)
    if unknown:
        raise wrong(f"returned the unknown member {unknown[0]!r}")
    markers: dict[str, Any] = {}
    for name in _LISTS:
        indices = answer.get(name, [])
        markers[name] = list(indices) if isinstance(indices, list | tuple) else indices
    try:
        cache_markers(markers, served)
    except ProjectionError as exc:
        raise wrong(f"returned markers that do not apply ({exc})") from None
    return markers if any(markers.values()) else None


async def mark(ctx: StageContext) -> None:
    """Decide the markers of the request about to be served and write them to state (or
    delete them when nothing is to be marked)."""
    s = ctx.scope
    committed = s.committed
    unmarked = {k: v for k, v in committed.items() if k != _KEY} if _KEY in committed else committed
    try:
        served = build_request(unmarked, version=ctx.projection)
    except ProjectionError:
        return  # nothing can be served: call-llm says why
    served.pop("prompt_cache", None)
    strategy = ctx.config.options["cache_strategy"]
    if strategy == "breakpoints":
        markers = breakpoints(served)
    else:
        # the user's code, off the loop (a run cancelled while it decides stops at once), on
        # a copy of the request: the served pieces are committed state, never the user's
        answer = await call_user_code(
            strategy.markers,
            Request.from_served(detached(served)),
            grace=tool_teardown.exit_grace(ctx.config.options),
        )
        markers = _normalized(answer, strategy, served)
    if markers is None:
        if _KEY in committed:
            s.delete(_KEY)
    else:
        s.set(_KEY, markers)  # unchanged markers write no row


FEATURE: Feature[Options] = Feature(
    name="caching",
    summary="prompt-cache markers, decided by a stage and served by projection 3",
    order=45,
    options=(
        OptionSpec(
            name="caching",
            seed="caching",
            check=_caching,
            summary='"off": mark nothing',
        ),
        OptionSpec(
            name="cache_strategy",
            seed="cacheStrategy",
            check=_cache_strategy,
            summary="where the prompt-cache markers go (default: the provider's declared one)",
        ),
    ),
    stages=(
        StageSpec(
            name="cache-markers",
            fn=mark,
            phase="iteration",
            order=45,
            description="decide the prompt-cache markers of the request about to be served",
        ),
    ),
    state_keys=(StateKey(name=_KEY, structure=True, summary="request.prompt_cache"),),
    projection=3,
    active=_active,
)
