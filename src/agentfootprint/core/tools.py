"""Tools: ``define_tool(...)``, their context, argument validation and results.

Tool results become the text of a ``tool`` message. The rule for what a tool
may return (documented in the README):

* ``str``: used as the message text, unchanged;
* JSON values (``dict``, ``list``, ``int``, ``float``, ``bool``, ``None``): the
  message text is their RFC 8785 canonical JSON, so it is the same bytes on
  every run and every version;
* anything else (``datetime``, ``bytes``, ``set``, a custom object, a NaN, an
  integer beyond +-(2**53 - 1)): refused. The call is recorded as that tool's
  error result naming the JSON path and type, and the run goes on, exactly as
  when the tool raises. Convert such values yourself (``dt.isoformat()``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import copy
import functools
import inspect
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import jsonschema
from jsonschema.exceptions import SchemaError

from agentfootprint.errors import CanonicalFormError, ReservedKeyError, UsageError
from agentfootprint.store.redaction import refuse_reserved_key
from agentfootprint.verify.canonical import canon, check_ijson

__all__ = [
    "TOOL_NAME",
    "Tool",
    "ToolContext",
    "ToolOutcome",
    "define_tool",
    "describe_type",
    "validate_arguments",
]

TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
ToolFn = Callable[..., Any]


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolContext:
    """What a tool's ``execute`` receives beside its arguments."""

    run_id: str
    conversation_id: str
    tool_call_id: str
    iteration: int
    tool: str


@dataclass(frozen=True, kw_only=True, slots=True)
class Tool:
    """A tool the model may call. Build it with :func:`define_tool`."""

    name: str
    description: str
    input_schema: Mapping[str, Any]
    execute: ToolFn
    takes_context: bool = False
    validator: Any = field(default=None, repr=False, compare=False)

    @property
    def schema(self) -> dict[str, Any]:
        """The model-visible part: what the ``tools`` slot serves."""
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": dict(self.input_schema),
        }


def define_tool(
    *,
    name: str,
    description: str,
    execute: ToolFn,
    input_schema: Mapping[str, Any] | None = None,
) -> Tool:
    """Define a tool. ``execute(args)`` or ``execute(args, ctx)``, sync or async.

    Refused with :class:`UsageError`: a name outside ``[a-zA-Z0-9_-]{1,64}``, an
    empty description, a schema that is not a JSON Schema object schema
    (``{"type": "object", ...}``), or a non-callable ``execute``.
    """
    if not isinstance(name, str) or not TOOL_NAME.match(name):
        raise UsageError(
            f"tool name {name!r} is invalid: use 1-64 characters from a-z, A-Z, 0-9, '_' and '-'",
            option="tools",
        )
    if not isinstance(description, str) or not description.strip():
        raise UsageError(f"tool {name!r} needs a non-empty description", option="tools")
    if not callable(execute):
        raise UsageError(f"tool {name!r}: execute must be callable", option="tools")
    schema = (
        dict(input_schema)
        if input_schema is not None
        else {
            "type": "object",
            "properties": {},
        }
    )
    if not isinstance(input_schema, Mapping | None) or schema.get("type") != "object":
        raise UsageError(
            f"tool {name!r}: input_schema must be a JSON Schema whose type is 'object' "
            f"(tool arguments are an object), got {input_schema!r}",
            option="tools",
        )
    try:
        check_ijson(schema, ("input_schema",))
        validator_cls = jsonschema.validators.validator_for(schema, jsonschema.Draft202012Validator)
        validator_cls.check_schema(schema)
    except (CanonicalFormError, SchemaError) as exc:
        raise UsageError(
            f"tool {name!r}: input_schema is not a valid JSON Schema: {exc}", option="tools"
        ) from exc
    return Tool(
        name=name,
        description=description,
        input_schema=schema,
        execute=execute,
        takes_context=_takes_context(execute),
        validator=validator_cls(schema),
    )


def _takes_context(fn: ToolFn) -> bool:
    """``execute(args, ctx)``: a second required positional parameter receives the context."""
    try:
        params = [
            p
            for p in inspect.signature(fn).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
    except (TypeError, ValueError):
        return False
    required = [p for p in params if p.default is p.empty]
    return len(required) >= 2 or any(p.name in ("ctx", "context") for p in params[1:])


def describe_type(value: Any) -> str:
    """The JSON type name of a value, as a teaching message names it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def validate_arguments(tool: Tool, arguments: Any) -> list[dict[str, Any]]:
    """Check arguments against the tool's schema; each issue names path, expectation, type.

    Values are never quoted (an argument may be sensitive): only their JSON types.
    """
    issues = []
    for error in sorted(tool.validator.iter_errors(arguments), key=lambda e: list(e.path)):
        path = "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.path)
        expected = error.validator_value if error.validator in ("type", "enum") else None
        issue: dict[str, Any] = {
            "path": path,
            "keyword": str(error.validator),
            "received": describe_type(error.instance),
        }
        if error.validator == "required":
            missing = [k for k in error.validator_value if k not in (error.instance or {})]
            issue["message"] = f"missing required argument(s): {', '.join(missing)}"
        elif error.validator == "additionalProperties":
            issue["message"] = "unexpected argument(s) not in the schema"
        else:
            # a copy: the schema's own object, recorded under a policy key in two issues,
            # would share one commitment (the boundary keeps containers by identity)
            issue["expected"] = copy.deepcopy(
                expected if expected is not None else error.validator_value
            )
            issue["message"] = f"expected {error.validator} {issue['expected']!r}"
        issues.append(issue)
    return issues


def teaching_message(tool: Tool, issues: list[dict[str, Any]]) -> str:
    """The tool result the model reads instead of running the tool (enforce mode)."""
    lines = [
        f"The arguments for tool '{tool.name}' did not match its input schema, "
        "so it was not run. Fix these and call it again:"
    ]
    for issue in issues:
        lines.append(f"- {issue['path']}: {issue['message']} (received {issue['received']})")
    return "\n".join(lines)


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolOutcome:
    """The text the model reads for one call, and whether it is an error."""

    content: str
    is_error: bool = False


def result_text(tool_name: str, value: Any) -> ToolOutcome:
    """Apply the result rule (see the module docstring)."""
    try:
        refuse_reserved_key(value, "result")
    except CanonicalFormError as exc:
        return _refused(tool_name, exc)
    if isinstance(value, str):
        try:
            check_ijson(value)
        except CanonicalFormError as exc:
            return _refused(tool_name, exc)
        return ToolOutcome(content=value)
    try:
        return ToolOutcome(content=canon(value).decode("utf-8"))
    except CanonicalFormError as exc:
        return _refused(tool_name, exc)


def _refused(tool_name: str, exc: CanonicalFormError) -> ToolOutcome:
    if isinstance(exc, ReservedKeyError):
        return ToolOutcome(
            content=f"Error: tool '{tool_name}' returned a value the log cannot record: {exc}.",
            is_error=True,
        )
    return ToolOutcome(
        content=f"Error: tool '{tool_name}' returned a value that is not JSON: {exc}. "
        "Tools return str or JSON values (convert dates with .isoformat(), bytes to text).",
        is_error=True,
    )


_EXECUTOR: concurrent.futures.ThreadPoolExecutor | None = None


def _executor() -> concurrent.futures.ThreadPoolExecutor:
    """One process-wide pool for sync tools (a pool per event loop would start a thread per
    ``run_sync``)."""
    global _EXECUTOR
    if _EXECUTOR is None:
        _EXECUTOR = concurrent.futures.ThreadPoolExecutor(thread_name_prefix="agentfootprint-tool")
    return _EXECUTOR


async def call_tool(tool: Tool, arguments: Any, ctx: ToolContext) -> Any:
    """Run ``execute``: coroutine functions awaited, sync ones in a worker thread."""
    fn = tool.execute
    args = (arguments, ctx) if tool.takes_context else (arguments,)
    if inspect.iscoroutinefunction(fn):
        return await fn(*args)
    call = functools.partial(contextvars.copy_context().run, fn, *args)
    result = await asyncio.get_running_loop().run_in_executor(_executor(), call)
    if inspect.isawaitable(result):
        return await _await(result)
    return result


async def _await(value: Awaitable[Any]) -> Any:
    return await value
