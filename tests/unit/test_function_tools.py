"""``@af.tool``: a tool's name, description and JSON Schema from a typed function.

The hint matrix (tests/unit/tool_hint_matrix.py) gives the same canonical schema bytes in
another process (built in reverse order, another hash seed, pydantic blocked for the rows
that need none); each hint maps to a pinned schema; a valid call gives the function typed
values (dataclass instances, Enum members, pydantic models, tuples, sets, the context); an
invalid one is refused by the schema the agent validates with, and by the conversion when it
is not validated; docstrings in three styles give the descriptions; what has no schema is
refused when decorated, naming the function and the parameter; mypy sees the function's
signature through both spellings of the decorator.
"""

from __future__ import annotations

import asyncio
import enum
import inspect
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import InitVar, dataclass
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal, Optional

import pydantic
import pytest
import tool_hint_matrix as matrix
from tool_hint_matrix import Color, Folder, Point, Priority, Route, UserId, Window

import agentfootprint as af
from agentfootprint.logformat.canonical import canon
from agentfootprint.runtime.docstrings import parse_docstring
from agentfootprint.runtime.function_tools import FunctionTool, ToolArgumentError
from agentfootprint.runtime.tools import call_tool, validate_arguments
from mypy_snippets import mypy_errors

HERE = Path(__file__).resolve().parent

#: a valid call of each matrix tool (JSON, as a model sends it)
VALID: dict[str, dict[str, Any]] = {
    "scalars": {"text": "hi", "count": 3, "ratio": 2, "flag": False},
    "optionals": {"label": None, "limit": 5, "mode": "exact", "level": 3},
    "enums": {"color": "green", "priority": 2, "shade": "red"},
    "nested": {
        "route": {"name": "r1", "stops": [{"x": 1, "y": 2.5}, {"x": 0}], "color": "green"},
        "home": {"x": 4},
        "extra": [{"name": "r2", "stops": [], "note": "n"}],
    },
    "recursive": {"root": {"name": "a", "children": [{"name": "b", "children": [{"name": "c"}]}]}},
    "containers": {
        "tags": ["x", "y"],
        "pair": [7, "seven"],
        "many": [1, 2.5],
        "scores": {"ann": 3},
        "window": {"start": 1},
        "who": "u-1",
        "anything": {"free": [1, "form"]},
        "frozen": [{"x": 1}, {"x": 2, "y": 3}],
    },
    "async_plain": {"n": 41},
    "async_with_ctx": {"n": 1},
    "sync_with_ctx": {"q": "find"},
    "models": {
        "order": {"items": [{"sku": "A-1", "quantity": 2}], "rush": True},
        "extra": [{"sku": "B-2", "quantity": 1}],
        "count": 4,
    },
}


def context(tool: str = "t", call: str = "call-1") -> af.ToolContext:
    return af.ToolContext(
        run_id="run", conversation_id="conv", tool_call_id=call, iteration=0, tool=tool
    )


def run(made: af.Tool, arguments: Any) -> Any:
    """The tool called as the agent calls it (sync in a worker thread, async on the loop)."""
    return asyncio.run(call_tool(made, arguments, context(made.name)))


def one(hint: Any, default: Any = inspect.Parameter.empty) -> af.Tool:
    """A tool of one argument ``x`` with ``hint`` (set as an object, not a string)."""

    def probe(x):  # type: ignore[no-untyped-def]
        """A probe."""
        return "ok"

    probe.__annotations__ = {"x": hint}
    if default is not inspect.Parameter.empty:
        probe.__defaults__ = (default,)
    return af.tool(probe)


# -- the schemas -----------------------------------------------------------------------------

POINT = {
    "type": "object",
    "description": "A point on the plane.",
    "properties": {"x": {"type": "number"}, "y": {"type": "number", "default": 0}},
    "required": ["x"],
    "additionalProperties": False,
}
PINNED: list[tuple[Any, dict[str, Any]]] = [
    (str, {"type": "string"}),
    (int, {"type": "integer"}),
    (float, {"type": "number"}),
    (bool, {"type": "boolean"}),
    (None, {"type": "null"}),
    (Optional[int], {"anyOf": [{"type": "integer"}, {"type": "null"}]}),  # noqa: UP045
    (int | str, {"anyOf": [{"type": "integer"}, {"type": "string"}]}),
    (Literal["a", "b"], {"enum": ["a", "b"], "type": "string"}),
    (Literal[1, "a", None], {"enum": [1, "a", None]}),
    (Literal[Color.RED], {"enum": ["red"], "type": "string"}),
    (Color, {"enum": ["red", "green"], "type": "string"}),
    (Priority, {"enum": [1, 2], "type": "integer"}),
    (list[int], {"type": "array", "items": {"type": "integer"}}),
    (list, {"type": "array"}),
    (Sequence[str], {"type": "array", "items": {"type": "string"}}),
    (tuple[int, ...], {"type": "array", "items": {"type": "integer"}}),
    (
        tuple[int, str],
        {
            "type": "array",
            "prefixItems": [{"type": "integer"}, {"type": "string"}],
            "items": False,
            "minItems": 2,
            "maxItems": 2,
        },
    ),
    (set[str], {"type": "array", "items": {"type": "string"}, "uniqueItems": True}),
    (dict[str, float], {"type": "object", "additionalProperties": {"type": "number"}}),
    (dict, {"type": "object"}),
    (Any, {}),
    (UserId, {"type": "string"}),
    (Annotated[int, "How many."], {"type": "integer", "description": "How many."}),
    (Point, POINT),
    (list[Point], {"type": "array", "items": POINT}),
    (
        Window,
        {
            "type": "object",
            "description": "A time window.",
            "properties": {"start": {"type": "integer"}, "end": {"type": "integer"}},
            "required": ["start"],
            "additionalProperties": False,
        },
    ),
]


@pytest.mark.parametrize(("hint", "expected"), PINNED, ids=[repr(h) for h, _ in PINNED])
def test_each_hint_maps_to_its_pinned_schema(hint: Any, expected: dict[str, Any]) -> None:
    made = one(hint)
    assert made.input_schema == {
        "type": "object",
        "properties": {"x": expected},
        "required": ["x"],
        "additionalProperties": False,
    }
    assert canon(made.input_schema) == canon(one(hint).input_schema)


def test_a_default_is_said_and_makes_the_argument_optional() -> None:
    made = one(Color, Color.GREEN)
    assert made.input_schema["properties"]["x"]["default"] == "green"
    assert "required" not in made.input_schema
    unsaid = one(set[str], frozenset({"a"}))  # a set has no order to say: not said
    assert "default" not in unsaid.input_schema["properties"]["x"]
    assert "required" not in unsaid.input_schema


def test_a_recursive_type_keeps_one_definition_under_its_class_name() -> None:
    made = af.tool(matrix.recursive)
    assert made.input_schema["properties"]["root"] == {"$ref": "#/$defs/Folder"}
    folder = made.input_schema["$defs"]["Folder"]
    assert folder["properties"]["children"] == {
        "type": "array",
        "items": {"$ref": "#/$defs/Folder"},
    }
    assert list(made.input_schema["$defs"]) == ["Folder"]


def test_pydantic_models_are_mapped_by_pydantic_and_spelt_out() -> None:
    made = af.tool(matrix.models)
    order = made.input_schema["properties"]["order"]
    own = matrix.Order.model_json_schema()  # pydantic's, with Item under its $defs
    item = own.pop("$defs")["Item"]
    own["properties"]["items"]["items"] = item
    assert order == own
    assert item["title"] == "Item" and item["properties"]["quantity"]["minimum"] == 1
    assert "$defs" not in made.input_schema  # nothing recursive: spelt out where used
    count = made.input_schema["properties"]["count"]
    assert count == {
        "type": "integer",
        "minimum": 0,
        "maximum": 10,
        "default": 0,
        "description": "How many.",
    }


class Tree(pydantic.BaseModel):
    label: str
    branches: list[Tree] = []


@dataclass
class Grove:
    trees: list[Tree]


def test_a_recursive_pydantic_model_keeps_pydantics_definition() -> None:
    @af.tool
    def plant(grove: Grove, tree: Tree) -> str:
        """Plant a tree in a grove."""
        return type(grove.trees[0].branches[0]).__name__ + type(tree).__name__

    assert plant.input_schema["properties"]["tree"] == {"$ref": "#/$defs/Tree"}
    assert list(plant.input_schema["$defs"]) == ["Tree"]
    grove = plant.input_schema["properties"]["grove"]["properties"]["trees"]
    assert grove == {"type": "array", "items": {"$ref": "#/$defs/Tree"}}
    arguments = {
        "grove": {"trees": [{"label": "a", "branches": [{"label": "b"}]}]},
        "tree": {"label": "c"},
    }
    assert validate_arguments(plant, arguments) == []
    assert run(plant, arguments) == "TreeTree"
    bad = {"grove": {"trees": []}, "tree": {"label": "c", "branches": [{"label": 1}]}}
    assert [i["path"] for i in validate_arguments(plant, bad)] == ["$.tree.branches[0].label"]


def test_every_matrix_schema_is_draft_2020_12_and_takes_its_valid_call() -> None:
    tools = matrix.build()
    assert {t.name for t in tools} == set(VALID)
    for made in tools:
        assert isinstance(made, FunctionTool)
        # define_tool checked the schema against the 2020-12 metaschema; the agent's
        # validator (tool_arg_validation) accepts the valid call
        assert validate_arguments(made, VALID[made.name]) == [], made.name


def _schemas_of(output: str) -> dict[str, str]:
    return dict(line.split(" ", 1) for line in output.splitlines() if line)


def test_schemas_are_the_same_bytes_in_another_process() -> None:
    here = {t.name: canon(t.schema).hex() for t in matrix.build()}
    done = subprocess.run(
        [sys.executable, str(HERE / "tool_hint_matrix.py"), "reversed"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "PYTHONHASHSEED": "4242"},
        cwd=HERE,
    )
    assert done.returncode == 0, done.stderr
    there = _schemas_of(done.stdout)
    assert list(there) == [t.name for t in reversed(matrix.build())]
    assert there == here


def test_the_stdlib_rows_need_no_pydantic_and_give_the_same_bytes() -> None:
    here = {t.name: canon(t.schema).hex() for t in matrix.build()}
    code = (
        "import sys; sys.modules['pydantic'] = None\n"
        f"sys.path.insert(0, {str(HERE)!r})\n"
        "import tool_hint_matrix as m\n"
        "from agentfootprint.logformat.canonical import canon\n"
        "assert m.pydantic is None\n"
        "for t in m.build(): print(t.name, canon(t.schema).hex())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    there = _schemas_of(done.stdout)
    assert set(here) - set(there) == {"models"}
    assert there == {name: here[name] for name in there}


# -- typed values ----------------------------------------------------------------------------


def test_each_function_receives_typed_values() -> None:
    tools = {t.name: t for t in matrix.build()}
    matrix.RECEIVED.clear()
    results = {name: run(made, VALID[name]) for name, made in tools.items()}
    got = matrix.RECEIVED
    assert got["scalars"] == ("hi", 3, 2.0, False) and isinstance(got["scalars"][2], float)
    assert got["optionals"] == (None, 5, "exact", 3)
    assert got["enums"] == (Color.GREEN, Priority.HIGH, Color.RED)
    assert type(got["enums"][1]) is Priority
    route, home, extra = got["nested"]
    assert route == Route(name="r1", stops=[Point(1.0, 2.5), Point(0.0)], color=Color.GREEN)
    assert home == Point(4.0) and extra == [Route(name="r2", stops=[], note="n")]
    assert type(route.stops[0]) is Point and route.color is Color.GREEN
    assert got["recursive"] == Folder("a", [Folder("b", [Folder("c")])])
    tags, pair, many, scores, window, who, anything, frozen = got["containers"]
    assert tags == {"x", "y"} and type(tags) is set
    assert pair == (7, "seven") and many == (1.0, 2.5)
    assert scores == {"ann": 3} and window == {"start": 1} and who == "u-1"
    assert anything == {"free": [1, "form"]}
    assert frozen == frozenset({Point(1.0), Point(2.0, 3.0)}) and type(frozen) is frozenset
    assert got["async_plain"] == 41 and results["async_plain"] == 42
    n, ctx = got["async_with_ctx"]
    assert n == 1 and isinstance(ctx, af.ToolContext) and results["async_with_ctx"] == "call-1"
    q, page, ctx = got["sync_with_ctx"]
    assert (q, page) == ("find", 1) and ctx.tool == "sync_with_ctx"
    order, items, count = got["models"]
    assert isinstance(order, matrix.Order) and order.rush is True
    assert all(isinstance(i, matrix.Item) for i in [*order.items, *items]) and count == 4
    assert results["scalars"] == {"ok": True}


def test_sync_functions_run_in_a_worker_thread_and_async_ones_on_the_loop() -> None:
    seen: dict[str, str] = {}

    def where_sync(n: int) -> str:
        """Say where it runs."""
        seen["sync"] = threading.current_thread().name
        return "ok"

    async def where_async(n: int) -> str:
        """Say where it runs."""
        seen["async"] = threading.current_thread().name
        return "ok"

    run(af.tool(where_sync), {"n": 1})
    run(af.tool(where_async), {"n": 1})
    assert seen["sync"].startswith("agentfootprint-tool")
    assert seen["async"] == threading.current_thread().name


def test_the_decorated_tool_is_still_the_function() -> None:
    made = af.tool(matrix.scalars)
    assert made("a", 1, 0.5, True) == {"ok": True}
    assert made.fn is matrix.scalars and made.takes_context
    assert inspect.signature(made) == inspect.signature(matrix.scalars)


# -- invalid arguments -----------------------------------------------------------------------

INVALID: list[tuple[str, dict[str, Any], str]] = [
    ("scalars", {"text": "hi", "count": "3", "ratio": 1, "flag": True}, "$.count"),
    ("scalars", {"text": "hi", "count": 3, "ratio": 1, "flag": 1}, "$.flag"),
    ("scalars", {"text": "hi", "count": 3, "ratio": 1}, "$"),
    ("optionals", {"label": "l", "mode": "slow"}, "$.mode"),
    ("enums", {"color": "blue"}, "$.color"),
    ("nested", {"route": {"name": "r", "stops": [{"y": 1}]}, "home": {"x": 0}}, "$.route"),
    ("nested", {"route": {"name": "r", "stops": []}, "home": {"x": 0, "z": 1}}, "$.home"),
    ("containers", {**VALID["containers"], "pair": [1, 2]}, "$.pair[1]"),
    ("containers", {**VALID["containers"], "tags": ["a", "a"]}, "$.tags"),
    ("async_plain", {"n": 1, "m": 2}, "$"),
    ("models", {"order": {"items": [{"sku": "A", "quantity": 0}]}, "extra": []}, "$.order"),
]


@pytest.mark.parametrize(("name", "arguments", "path"), INVALID)
def test_invalid_arguments_are_refused_by_the_schema_the_agent_validates_with(
    name: str, arguments: dict[str, Any], path: str
) -> None:
    made = {t.name: t for t in matrix.build()}[name]
    issues = validate_arguments(made, arguments)
    assert issues and any(i["path"].startswith(path) for i in issues), issues


SECRET = "hunter2-secret"


@pytest.mark.parametrize(
    ("name", "arguments", "says"),
    [
        ("scalars", {"text": 1, "count": 3, "ratio": 1, "flag": True}, "$.text: expected string"),
        ("enums", {"color": SECRET}, "$.color: expected a value of Color"),
        ("nested", {"route": {"name": SECRET, "stops": [{}]}, "home": {"x": 0}}, "missing"),
        ("async_plain", {"n": 1, "extra": SECRET}, "unexpected argument(s) extra"),
        ("scalars", {"text": SECRET}, "missing required argument(s) count, ratio, flag"),
        ("models", {"order": {"items": [{"sku": SECRET, "quantity": 0}]}, "extra": []}, "$.order"),
    ],
)
def test_unvalidated_arguments_the_hints_cannot_take_raise_without_their_values(
    name: str, arguments: dict[str, Any], says: str
) -> None:
    """Under tool_arg_validation 'warn' or 'off' the call reaches the tool: the conversion
    refuses it (the call's error result), naming the path, never the value."""
    made = {t.name: t for t in matrix.build()}[name]
    matrix.RECEIVED.clear()
    with pytest.raises(ToolArgumentError) as caught:
        run(made, arguments)
    assert says in str(caught.value)
    assert SECRET not in str(caught.value)
    assert matrix.RECEIVED == {}  # the function never ran


# -- descriptions ----------------------------------------------------------------------------


def test_google_rest_and_numpy_docstrings_give_the_descriptions() -> None:
    scalars, optionals, _, nested, *_ = matrix.build()
    assert scalars.description == "Take one of each scalar."
    assert scalars.input_schema["properties"]["count"]["description"] == "A whole number."
    assert optionals.input_schema["properties"]["limit"]["description"] == "At most this many."
    assert "description" not in optionals.input_schema["properties"]["level"]
    assert nested.input_schema["properties"]["route"]["description"] == "The route to draw."
    route = nested.input_schema["properties"]["route"]["properties"]
    assert route["name"]["description"] == "The route's name."  # Annotated
    assert route["note"]["description"] == "Anything to add."  # field metadata


def test_the_description_is_the_first_paragraph_and_continuations_join() -> None:
    doc = parse_docstring(
        """Fetch rows
        from a table.

        Internal notes the model never reads.

        Args:
            table (str): The table,
                by name.
            limit: At most.

        Returns:
            The rows.
        """
    )
    assert doc.description == "Fetch rows from a table."
    assert doc.arguments == {"table": "The table, by name.", "limit": "At most."}
    rest = parse_docstring(":param str table: The table.\n:type table: str\n:returns: rows")
    assert rest.description == "" and rest.arguments == {"table": "The table."}


def test_annotated_text_wins_over_the_docstring_and_overrides_win_over_both() -> None:
    @af.tool(name="renamed", description="Said here.")
    def original(x: Annotated[int, "From the hint."]) -> str:
        """From the docstring.

        Args:
            x: From the docstring too.
        """
        return "ok"

    assert (original.name, original.description) == ("renamed", "Said here.")
    assert original.input_schema["properties"]["x"]["description"] == "From the hint."


def test_needs_and_ask_or_assume_are_define_tools() -> None:
    @af.tool(
        needs={"credential": "github", "scopes": ["repo"]},
        ask_or_assume={"mode": {"assume": "fast"}},
    )
    def fetch(repo: str, mode: Literal["fast", "exact"]) -> str:
        """Fetch a repository."""
        return mode

    assert fetch.needs is not None and fetch.needs.service == "github"
    assert [r.argument for r in fetch.rules] == ["mode"]
    assert fetch.input_schema["required"] == ["repo"]
    assert "If omitted" in fetch.input_schema["properties"]["mode"]["description"]


# -- refusals --------------------------------------------------------------------------------


class Shape(enum.Enum):
    SQUARE = (1, 2)


@dataclass
class WithInitVar:
    a: int
    b: InitVar[int]


def no_hint(x, y: int) -> str:  # type: ignore[no-untyped-def]
    """No hint."""
    return ""


def object_hint(x: object) -> str:
    """An object."""
    return ""


def callable_hint(fn: Callable[[int], int]) -> str:
    """A callable."""
    return ""


def var_positional(*names: str) -> str:
    """Star args."""
    return ""


def var_keyword(**options: str) -> str:
    """Star kwargs."""
    return ""


def ctx_untyped(q: str, ctx) -> str:  # type: ignore[no-untyped-def]
    """A ctx without its hint."""
    return ""


def ctx_wrong(q: str, ctx: dict[str, Any]) -> str:
    """A ctx of the wrong type."""
    return ""


def two_contexts(a: af.ToolContext, b: af.ToolContext) -> str:
    """Two contexts."""
    return ""


def bytes_hint(blob: bytes) -> str:
    """Bytes."""
    return ""


def datetime_hint(when: datetime) -> str:
    """A datetime."""
    return ""


def int_keys(table: dict[int, str]) -> str:
    """Integer keys."""
    return ""


def set_of_dicts(rows: set[Route]) -> str:  # type: ignore[type-var]
    """Unhashable items."""
    return ""


def tuple_enum(shape: Shape) -> str:
    """An enum of tuples."""
    return ""


def init_var(w: WithInitVar) -> str:
    """A dataclass with an InitVar."""
    return ""


def unknown_metadata(x: Annotated[int, 3.5]) -> str:
    """Unknown metadata."""
    return ""


def unresolved(x: NotDefinedAnywhere) -> str:  # type: ignore[name-defined]  # noqa: F821
    """An unresolvable hint."""
    return ""


def undocumented_param(x: int) -> str:
    """Documents a parameter it lacks.

    Args:
        x: Real.
        y: Gone.
    """
    return ""


def no_description(x: int) -> str:
    return ""


def generator(x: int) -> Any:
    """A generator."""
    yield x


REFUSED: list[tuple[Callable[..., Any], str]] = [
    (no_hint, "parameter 'x': has no type hint"),
    (object_hint, "parameter 'x': its type object has no JSON Schema form"),
    (callable_hint, "parameter 'fn': its type"),
    (var_positional, "parameter 'names': *args and **kwargs"),
    (var_keyword, "parameter 'options': *args and **kwargs"),
    (ctx_untyped, "parameter 'ctx': a parameter named ctx receives the call's context"),
    (ctx_wrong, "parameter 'ctx': a parameter named ctx"),
    (two_contexts, "parameter 'b': a second ToolContext parameter"),
    (bytes_hint, "parameter 'blob': its type bytes"),
    (datetime_hint, "parameter 'when': its type datetime"),
    (int_keys, "parameter 'table': a dict argument's keys are str"),
    (set_of_dicts, "parameter 'rows': a set's items must be hashable"),
    (tuple_enum, "Shape.SQUARE has the value (1, 2)"),
    (init_var, "WithInitVar takes 'b', which is not a field"),
    (unknown_metadata, "parameter 'x': Annotated metadata 3.5 is not understood"),
    (unresolved, "its type hints cannot be resolved (NameError"),
    (undocumented_param, "its docstring describes 'y'"),
    (no_description, "it has no description"),
    (generator, "a generator"),
]


@pytest.mark.parametrize(("fn", "says"), REFUSED, ids=[fn.__name__ for fn, _ in REFUSED])
def test_what_has_no_schema_is_refused_when_decorated(fn: Callable[..., Any], says: str) -> None:
    with pytest.raises(af.UsageError) as caught:
        af.tool(fn)
    assert caught.value.option == "tools"
    assert f"tool function {fn.__qualname__!r}" in str(caught.value)
    assert says in str(caught.value)


def test_a_lambda_needs_a_name_and_a_description() -> None:
    with pytest.raises(af.UsageError, match="pass name="):
        af.tool(lambda: "x")
    with pytest.raises(af.UsageError, match="no description"):
        af.tool(lambda: "x", name="const")
    made = af.tool(lambda: "x", name="const", description="A constant.")
    assert made.input_schema == {"type": "object", "properties": {}, "additionalProperties": False}
    assert run(made, {}) == "x"


def test_tool_is_exported_beside_define_tool() -> None:
    from agentfootprint.runtime import function_tools

    assert af.tool is function_tools.tool and "tool" in af.__all__ and "tool" in dir(af)


# -- static types ----------------------------------------------------------------------------

_SNIPPET = """\
import agentfootprint as af


@af.tool
def add(a: int, b: int = 2) -> int:
    \"\"\"Add.\"\"\"
    return a + b


@af.tool(name="mul", description="Multiply.", ask_or_assume={"b": {"assume": 1}})
async def multiply(a: int, b: int, ctx: af.ToolContext) -> int:
    return a * b


tools: list[af.Tool] = [add, multiply, af.tool(lambda: "x", name="c", description="C.")]
total: int = add(1, b=3)
add("x")
af.tool(name=3)
af.tool(needs="github")
wrong: str = add(1)
"""


@pytest.mark.slow
def test_mypy_sees_the_signature_through_both_spellings(tmp_path: Path) -> None:
    status, by_line, out = mypy_errors(tmp_path / "function_tools_snippet.py", _SNIPPET)
    assert status == 1, out
    assert sorted(by_line) == [17, 18, 19, 20], out
    assert 'incompatible type "str"; expected "int"' in by_line[17]
    assert "No overload variant" in by_line[18] and "No overload variant" in by_line[19]
    assert 'expression has type "int", variable has type "str"' in by_line[20]
