"""Tools from typed functions: ``@af.tool``.

``@af.tool`` reads a function once, when it is decorated: its name, its docstring's first
paragraph as the description, each argument's description (the docstring's ``Args:``,
``:param x:`` or NumPy ``Parameters``; ``Annotated[X, "text"]`` wins over the docstring),
and the JSON Schema of its arguments from the type hints (runtime/hint_schemas.py: the
standard library's types by a deterministic mapper, pydantic models by pydantic). The result
is an ordinary :class:`~agentfootprint.runtime.tools.Tool` built by ``define_tool``, so its
schema is served, hashed into each receipt and validated (``tool_arg_validation``) like any
other; a changed hint is a changed schema, and a replay says so as a ``tools`` divergence.

At each call the validated JSON arguments become the typed values the hints name (a
dataclass instance, a pydantic model, an Enum member, a tuple, a list of models) and the
function is called with them: an ``async def`` awaited, a sync function in a worker thread,
as ``define_tool``'s tools are. A parameter annotated :class:`ToolContext` (conventionally
``ctx``) receives the call's context and is not in the schema. What the function returns
follows ``define_tool``'s result rule (a ``str`` as is, JSON data as canonical JSON,
anything else refused as the call's error result): return ``dataclasses.asdict(x)`` or
``model.model_dump(mode="json")`` for an object.

Refused when decorated (:class:`UsageError` naming the function and the parameter): a
parameter without a hint, a hint with no JSON form (``object``, a callable, ``bytes``, a
``datetime``, a dict with non-str keys), ``*args`` / ``**kwargs``, a parameter named ``ctx``
not annotated ``ToolContext``, two context parameters, a generator function, a function
without a description, and a docstring documenting a parameter the function does not have.
"""

from __future__ import annotations

import dataclasses
import inspect
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, ParamSpec, Protocol, TypeVar, overload

from agentfootprint.errors import UsageError
from agentfootprint.runtime.artifacts import Artifact
from agentfootprint.runtime.docstrings import parse_docstring
from agentfootprint.runtime.hint_schemas import (
    Convert,
    HintMapper,
    Mapped,
    ToolArgumentError,
    json_default,
)
from agentfootprint.runtime.tools import TOOL_NAME, Tool, ToolContext, define_tool, describe_type

__all__ = ["FunctionTool", "ToolArgumentError", "tool"]

P = ParamSpec("P")
R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)


@dataclass(frozen=True, kw_only=True, slots=True)
class FunctionTool(Tool, Generic[P, R]):
    """A :class:`Tool` made by ``@af.tool``: the agent calls it through ``execute`` (JSON
    arguments in, typed values to the function); calling it directly calls the function, with
    its own signature (what type checkers see too)."""

    #: the decorated function, unchanged
    fn: Callable[P, R] = field(repr=False, compare=False)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.fn(*args, **kwargs)

    @property
    def __signature__(self) -> inspect.Signature:
        """The function's, for ``inspect.signature`` (and what reads it: IDEs, help())."""
        return inspect.signature(self.fn)


class ToolDecorator(Protocol):
    """What ``@af.tool(name=..., ...)`` returns: the decorator of one function."""

    def __call__(self, fn: Callable[P, R_co], /) -> FunctionTool[P, R_co]: ...


@overload
def tool(
    fn: Callable[P, R],
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    needs: Mapping[str, Any] | None = None,
    ask_or_assume: Mapping[str, Mapping[str, Any]] | None = None,
    wants: Mapping[str, str] | None = None,
    result_kind: str | None = None,
    arguments_from: Sequence[str] | None = None,
    result_columns: Mapping[str, Any] | None = None,
    period: str | None = None,
) -> FunctionTool[P, R]: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    needs: Mapping[str, Any] | None = None,
    ask_or_assume: Mapping[str, Mapping[str, Any]] | None = None,
    wants: Mapping[str, str] | None = None,
    result_kind: str | None = None,
    arguments_from: Sequence[str] | None = None,
    result_columns: Mapping[str, Any] | None = None,
    period: str | None = None,
) -> ToolDecorator: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    needs: Mapping[str, Any] | None = None,
    ask_or_assume: Mapping[str, Mapping[str, Any]] | None = None,
    wants: Mapping[str, str] | None = None,
    result_kind: str | None = None,
    arguments_from: Sequence[str] | None = None,
    result_columns: Mapping[str, Any] | None = None,
    period: str | None = None,
) -> Any:
    """Make a tool of a typed function: ``@af.tool``, ``@af.tool(name=..., ...)`` or
    ``af.tool(fn)``.

    ``name`` (default: the function's ``__name__``) and ``description`` (default: the
    docstring's first paragraph) override what the function gives; ``needs`` and
    ``ask_or_assume`` are ``define_tool``'s (a credential the tool needs, what happens when a
    call leaves an argument out). A parameter annotated :class:`Artifact` takes an artifact's
    ref and receives the artifact (``wants``, docs/artifacts.md): of any kind, or of the kind
    ``wants={"param": "kind"}`` names; ``result_kind``, ``arguments_from``,
    ``result_columns`` and ``period`` are ``define_tool``'s. See the module docstring for
    what is refused.
    """

    def decorate(function: Callable[..., Any]) -> FunctionTool[..., Any]:
        return _function_tool(
            function,
            name=name,
            description=description,
            needs=needs,
            ask_or_assume=ask_or_assume,
            wants=wants,
            result_kind=result_kind,
            arguments_from=arguments_from,
            result_columns=result_columns,
            period=period,
        )

    if fn is None:
        return decorate
    return decorate(fn)


@dataclass(frozen=True, slots=True)
class _Param:
    """One parameter of the function, as a call is bound to it."""

    name: str
    positional: bool  #: positional-only
    required: bool
    default: Any
    #: None: the parameter receives the call's ToolContext
    convert: Convert | None


@dataclass(frozen=True, slots=True)
class _Binder:
    """Binds a call's validated JSON arguments to the function's parameters, typed."""

    params: tuple[_Param, ...]

    def bind(self, arguments: Any, ctx: ToolContext) -> tuple[list[Any], dict[str, Any]]:
        if not isinstance(arguments, dict):
            raise ToolArgumentError(
                f"$: expected an object of arguments, received {describe_type(arguments)}"
            )
        known = {p.name for p in self.params if p.convert is not None}
        unknown = sorted(k for k in arguments if k not in known)
        if unknown:
            raise ToolArgumentError(f"$: unexpected argument(s) {', '.join(unknown)}")
        missing = [
            p.name
            for p in self.params
            if p.required and p.convert is not None and p.name not in arguments
        ]
        if missing:
            raise ToolArgumentError(f"$: missing required argument(s) {', '.join(missing)}")
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        for p in self.params:
            if p.convert is None:
                value: Any = ctx
            elif p.name in arguments:
                value = p.convert(arguments[p.name], f"$.{p.name}")
            elif p.positional:  # a later positional argument may follow: its default, said
                value = p.default
            else:
                continue
            if p.positional:
                args.append(value)
            else:
                kwargs[p.name] = value
        return args, kwargs


def _executor(fn: Callable[..., Any], binder: _Binder) -> Callable[..., Any]:
    """``execute(arguments, ctx)`` for ``define_tool``: a coroutine function for an async
    function (awaited on the loop), else a sync one (run in a worker thread)."""
    if inspect.iscoroutinefunction(fn):

        async def execute_async(arguments: Any, ctx: ToolContext) -> Any:
            args, kwargs = binder.bind(arguments, ctx)
            return await fn(*args, **kwargs)

        return execute_async

    def execute(arguments: Any, ctx: ToolContext) -> Any:
        args, kwargs = binder.bind(arguments, ctx)
        return fn(*args, **kwargs)

    return execute


def _is_context(hint: Any) -> bool:
    """``ToolContext``, or ``ToolContext | None``."""
    if hint is ToolContext:
        return True
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(hint) if a is not type(None)]
        return members == [ToolContext]
    return False


_REF_TEXT = "an artifact's ref (art_...), from a claim ticket"


def _artifact(value: Any, path: str) -> Any:
    """A wanted argument arrives resolved (the dispatcher put the artifact in the ref's
    place); anything else never reached the tool through an agent with artifacts."""
    if not isinstance(value, Artifact):
        raise ToolArgumentError(f"{path}: expected an artifact, resolved from its ref")
    return value


def _wanted(
    refs: dict[str, str], wants: Mapping[str, str] | None, refused: Callable[[str], UsageError]
) -> dict[str, str]:
    """The parameters annotated ``Artifact``, of the kinds ``wants`` names (any by default)."""
    if wants is None:
        return refs
    if not isinstance(wants, Mapping):
        raise refused(f"wants must be a mapping of parameter name to artifact kind, got {wants!r}")
    for parameter in wants:
        if parameter not in refs:
            raise refused(
                f"wants names {parameter!r}, which is not a parameter annotated af.Artifact"
            )
    return {**refs, **wants}


def _function_tool(
    fn: Callable[..., Any],
    *,
    name: str | None,
    description: str | None,
    needs: Mapping[str, Any] | None,
    ask_or_assume: Mapping[str, Mapping[str, Any]] | None,
    wants: Mapping[str, str] | None = None,
    result_kind: str | None = None,
    arguments_from: Sequence[str] | None = None,
    result_columns: Mapping[str, Any] | None = None,
    period: str | None = None,
) -> FunctionTool[..., Any]:
    if not callable(fn) or isinstance(fn, type):
        raise UsageError(
            f"tool(fn): fn must be the function to make a tool of, got {type(fn).__name__}",
            option="tools",
        )
    label = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
    owner = f"tool function {label!r}"

    def refused(why: str) -> UsageError:
        return UsageError(f"{owner}: {why}", option="tools")

    if name is not None and not isinstance(name, str):
        raise refused(f"name must be a str, got {type(name).__name__}")
    if description is not None and not isinstance(description, str):
        raise refused(f"description must be a str, got {type(description).__name__}")
    if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
        raise refused("a generator gives no one result: return the result instead")
    tool_name = name if name is not None else getattr(fn, "__name__", "")
    if name is None and not TOOL_NAME.match(tool_name):
        raise refused(
            f"its name {tool_name!r} is not a tool name (1-64 of a-z, A-Z, 0-9, '_', '-'): "
            "pass name="
        )
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise refused(f"its signature cannot be read ({exc})") from exc
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as exc:  # NameError of a string hint, a TypeError of a bad one
        raise refused(
            f"its type hints cannot be resolved ({type(exc).__name__}: {exc}); define the "
            "types they name at module level"
        ) from exc
    doc = parse_docstring(inspect.getdoc(fn))
    undocumented = sorted(set(doc.arguments) - set(signature.parameters))
    if undocumented:
        raise refused(
            f"its docstring describes {undocumented[0]!r}, which is not one of its parameters"
        )
    mapper = HintMapper(owner)
    params: list[_Param] = []
    properties: dict[str, Any] = {}
    required: list[str] = []
    has_context = False
    refs: dict[str, str] = {}
    for p in signature.parameters.values():
        where = f"parameter {p.name!r}"
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise refused(f"{where}: *args and **kwargs have no schema; name each argument")
        hint = hints.get(p.name, inspect.Parameter.empty)
        positional = p.kind is p.POSITIONAL_ONLY
        if _is_context(hint):
            if has_context:
                raise refused(f"{where}: a second ToolContext parameter (one receives it)")
            has_context = True
            params.append(_Param(p.name, positional, True, None, None))
            continue
        if p.name == "ctx":
            raise refused(
                f"{where}: a parameter named ctx receives the call's context: annotate it "
                "af.ToolContext (or rename it, to make it an argument)"
            )
        if hint is inspect.Parameter.empty:
            raise refused(f"{where}: has no type hint, so no schema (annotate it)")
        if hint is Artifact:
            refs[p.name] = "*"
            mapped = Mapped({"type": "string", "description": _REF_TEXT}, _artifact)
        else:
            mapped = mapper.map(hint, where)
        prop = dict(mapped.schema)
        text = doc.arguments.get(p.name)
        if text and "description" not in prop:
            prop["description"] = text
        has_default = p.default is not p.empty
        if has_default:
            said, value = json_default(p.default)
            if said:
                prop["default"] = value
        else:
            required.append(p.name)
        properties[p.name] = prop
        params.append(_Param(p.name, positional, not has_default, p.default, mapped.convert))
    schema: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
    }
    if required:
        schema["required"] = required
    text = description if description is not None else doc.description
    if not text.strip():
        raise refused("it has no description: write a docstring, or pass description=")
    made = define_tool(
        name=tool_name,
        description=text,
        execute=_executor(fn, _Binder(tuple(params))),
        input_schema=mapper.finish(schema),
        needs=needs,
        ask_or_assume=ask_or_assume,
        wants=_wanted(refs, wants, refused) or None,
        result_kind=result_kind,
        arguments_from=arguments_from,
        result_columns=result_columns,
        period=period,
    )
    given = {f.name: getattr(made, f.name) for f in dataclasses.fields(Tool)}
    return FunctionTool(**given, fn=fn)
