"""The hint matrix of ``@af.tool``'s tests, importable by a second process: plain functions
(decorated by :func:`build`, in either order) over scalars, optionals, literals, enums,
nested and recursive dataclasses, TypedDicts, lists, tuples, sets, dicts, defaults, async,
with and without a context, and pydantic models when pydantic is importable.

Run as a script it prints each tool's canonical schema bytes (hex), one line a tool, built
in the order its first argument gives (``forward`` or ``reversed``).
"""

from __future__ import annotations

import enum
import sys
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, NewType, NotRequired, Optional, TypedDict

import agentfootprint as af
from agentfootprint.logformat.canonical import canon

try:
    import pydantic
except ImportError:  # the matrix without its pydantic rows
    pydantic = None  # type: ignore[assignment]

#: what each function received, by tool name (the tests read it)
RECEIVED: dict[str, Any] = {}

UserId = NewType("UserId", str)


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Priority(enum.IntEnum):
    LOW = 1
    HIGH = 2


@dataclass(frozen=True)
class Point:
    """A point on the plane."""

    x: float
    y: float = 0.0


@dataclass
class Route:
    name: Annotated[str, "The route's name."]
    stops: list[Point]
    color: Color = Color.RED
    note: str | None = field(default=None, metadata={"description": "Anything to add."})


@dataclass
class Folder:
    """A folder and what it holds."""

    name: str
    children: list[Folder] = field(default_factory=list)


class Window(TypedDict):
    """A time window."""

    start: int
    end: NotRequired[int]


def scalars(text: str, count: int, ratio: float, flag: bool) -> dict[str, Any]:
    """Take one of each scalar.

    Args:
        text: Some text.
        count: A whole number.
        ratio: Any number.
        flag: Yes or no.
    """
    RECEIVED["scalars"] = (text, count, ratio, flag)
    return {"ok": True}


def optionals(
    label: Optional[str],  # noqa: UP045 - the spelling under test
    limit: int | None = None,
    mode: Literal["fast", "exact"] = "fast",
    level: Literal[1, 2, 3] = 1,
) -> str:
    """Optional and literal arguments.

    :param label: A label, or null.
    :param limit: At most this many.
    :param mode: How to go.
    """
    RECEIVED["optionals"] = (label, limit, mode, level)
    return "ok"


def enums(color: Color, priority: Priority = Priority.LOW, shade: Color | None = None) -> str:
    """Enum arguments, by value."""
    RECEIVED["enums"] = (color, priority, shade)
    return "ok"


def nested(route: Route, home: Point, extra: list[Route] = []) -> str:  # noqa: B006
    """Nested dataclasses.

    Parameters
    ----------
    route : Route
        The route to draw.
    home : Point
        Where to start.
    """
    RECEIVED["nested"] = (route, home, extra)
    return "ok"


def recursive(root: Folder) -> str:
    """A recursive dataclass."""
    RECEIVED["recursive"] = root
    return "ok"


def containers(
    tags: set[str],
    pair: tuple[int, str],
    many: tuple[float, ...],
    scores: dict[str, int],
    window: Window,
    who: UserId,
    anything: Any = None,
    frozen: frozenset[Point] = frozenset(),
) -> str:
    """Collections, a TypedDict, a NewType and Any."""
    RECEIVED["containers"] = (tags, pair, many, scores, window, who, anything, frozen)
    return "ok"


async def async_plain(n: int) -> int:
    """An async tool without a context."""
    RECEIVED["async_plain"] = n
    return n + 1


async def async_with_ctx(n: int, ctx: af.ToolContext) -> str:
    """An async tool with a context."""
    RECEIVED["async_with_ctx"] = (n, ctx)
    return ctx.tool_call_id


def sync_with_ctx(ctx: af.ToolContext, /, q: str, *, page: int = 1) -> str:
    """A sync tool whose context comes first, positionally."""
    RECEIVED["sync_with_ctx"] = (q, page, ctx)
    return "ok"


FUNCTIONS: list[Any] = [
    scalars,
    optionals,
    enums,
    nested,
    recursive,
    containers,
    async_plain,
    async_with_ctx,
    sync_with_ctx,
]

if pydantic is not None:

    class Item(pydantic.BaseModel):
        """A line of an order."""

        sku: str = pydantic.Field(description="The stock code.")
        quantity: int = pydantic.Field(ge=1)

    class Order(pydantic.BaseModel):
        items: list[Item]
        rush: bool = False

    def models(
        order: Order,
        extra: list[Item],
        count: Annotated[int, "How many.", pydantic.Field(ge=0, le=10)] = 0,
    ) -> str:
        """Pydantic models, mapped by pydantic."""
        RECEIVED["models"] = (order, extra, count)
        return "ok"

    FUNCTIONS.append(models)


def build(order: str = "forward") -> list[af.Tool]:
    functions = FUNCTIONS if order == "forward" else list(reversed(FUNCTIONS))
    return [af.tool(fn) for fn in functions]


if __name__ == "__main__":
    for made in build(sys.argv[1] if len(sys.argv) > 1 else "forward"):
        print(made.name, canon(made.schema).hex())
