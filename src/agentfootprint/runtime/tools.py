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
* a result too large to record (the results of one reply's tool calls share one
  log body, bounded by ``verify.limits.MAX_BODY_BYTES`` less
  ``MAX_ENVELOPE_BYTES`` for the record around them): refused the same way, the
  error result naming its size and the limit.
"""

from __future__ import annotations

import copy
import inspect
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import jsonschema
import orjson
from jsonschema.exceptions import SchemaError

from agentfootprint.errors import CanonicalFormError, ReservedKeyError, UsageError
from agentfootprint.integrity.contracts import Contract, contract_of
from agentfootprint.logformat import limits
from agentfootprint.logformat.canonical import canon, check_ijson
from agentfootprint.runtime.argument_rules import ArgumentRule, ruled_schema
from agentfootprint.runtime.artifacts import ArtifactsView
from agentfootprint.runtime.credentials import Credential, CredentialNeed, credential_need
from agentfootprint.runtime.scope import to_json_value
from agentfootprint.runtime.tool_threads import DEFAULT_GRACE_S, call_user_code
from agentfootprint.store.redaction import refuse_reserved_key

__all__ = [
    "TOOL_NAME",
    "ResultRoom",
    "Tool",
    "ToolContext",
    "ToolOutcome",
    "ToolTime",
    "define_tool",
    "describe_type",
    "json_text_size",
    "schema_issues",
    "validate_arguments",
]

TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
ToolFn = Callable[..., Any]


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolTime:
    """The run's clock as a tool sees it (the ``time`` option): the zone (None: unknown),
    the turn's now and this call's dispatch instant, in unix milliseconds, as recorded."""

    zone: str | None
    now: int
    dispatched_at: int


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolContext:
    """What a tool's ``execute`` receives beside its arguments."""

    run_id: str
    conversation_id: str
    tool_call_id: str
    iteration: int
    tool: str
    #: where :meth:`on_teardown` registers (the run's teardowns; None: a context made
    #: outside a run, which takes none)
    teardown_sink: Callable[[Callable[[], Any]], None] | None = field(
        default=None, repr=False, compare=False
    )
    #: the credential the tool declared it needs (``define_tool(needs=...)``), issued by
    #: the agent's ``credentials`` service for this call; None for a tool that needs none
    credential: Credential | None = field(default=None, repr=False, compare=False)
    #: the run's clock (the ``time`` option); None without it
    time: ToolTime | None = None
    #: the agent's artifact store bound to this conversation (the ``artifacts`` option);
    #: without one, every use is refused naming the option (``available`` is False)
    artifacts: ArtifactsView = field(default_factory=ArtifactsView, repr=False, compare=False)

    def on_teardown(self, fn: Callable[[], Any]) -> None:
        """Register ``fn()`` (sync, or returning an awaitable) to clean up what this call
        opened. It runs once the run ends (answered, stopped early, failed or cancelled),
        each cleanup bounded by ``tool_teardown_timeout_ms``; the last registered runs first.
        Its outcome is recorded (``agentfootprint.tools.session_closed`` or
        ``session_close_failed``). A sync cleanup past its budget is abandoned in its worker
        thread and never holds interpreter exit."""
        if not callable(fn):
            raise UsageError(
                f"tool {self.tool!r}: on_teardown() takes a function of no arguments, got {fn!r}",
                option="tools",
            )
        if self.teardown_sink is None:
            raise UsageError(
                f"tool {self.tool!r}: this context belongs to no run, so nothing would run the "
                "teardown",
                option="tools",
            )
        self.teardown_sink(fn)


@dataclass(frozen=True, kw_only=True, slots=True)
class Tool:
    """A tool the model may call. Build it with :func:`define_tool`."""

    name: str
    description: str
    input_schema: Mapping[str, Any]
    execute: ToolFn
    takes_context: bool = False
    validator: Any = field(default=None, repr=False, compare=False)
    #: the credential it needs before it runs (None: none)
    needs: CredentialNeed | None = None
    #: its ruled arguments (``ask_or_assume``): what the inputs layer does when one is left out
    rules: tuple[ArgumentRule, ...] = ()
    #: its ref arguments (``wants``): argument name and the artifact kind it takes ("*": any),
    #: resolved at dispatch into an :class:`~agentfootprint.runtime.artifacts.Artifact`
    wants: tuple[tuple[str, str], ...] = ()
    #: the kind its results take when placed in the artifact store (None: ``tool-result``)
    result_kind: str | None = None
    #: what it declares for the integrity checks (``arguments_from``, ``result_columns``,
    #: ``period``; docs/integrity.md): never served, committed as ``tool_contracts``
    contract: Contract | None = None

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
    needs: Mapping[str, Any] | None = None,
    ask_or_assume: Mapping[str, Mapping[str, Any]] | None = None,
    wants: Mapping[str, str] | None = None,
    result_kind: str | None = None,
    arguments_from: Sequence[str] | None = None,
    result_columns: Mapping[str, Any] | None = None,
    period: str | None = None,
) -> Tool:
    """Define a tool. ``execute(args)`` or ``execute(args, ctx)``, sync or async.

    ``ask_or_assume={"window": {"assume": "24h"}, "period": {"ask": "Which period?",
    "choices": ["7d", "30d"]}}``: what happens when a call leaves a ruled argument out (the
    inputs layer, docs/pauses.md): the default is filled in, or the person is asked. Each rule
    names a property of ``input_schema`` and its values fit that property's schema; the model
    is served the schema with the ruled arguments optional and their rules said.

    ``needs={"credential": "github", "scopes": [...], "mode": "machine" | "user"}``: the
    tool runs with ``ctx.credential``, resolved by the agent's ``credentials`` service after
    the permission check (an agent without one refuses the tool at construction).

    ``wants={"orders": "table"}``: the argument ``orders`` takes an artifact's ref (from a
    claim ticket, docs/artifacts.md) of that kind (``"*"``: any); the tool receives the
    resolved :class:`~agentfootprint.runtime.artifacts.Artifact` in the ref's place.
    ``result_kind``: the kind this tool's results take when placed. Both need an agent with
    ``artifacts``.

    For the integrity checks (docs/integrity.md; never served): ``arguments_from=["list_hosts"]``
    names the tools whose results ground this tool's arguments; ``result_columns={"lun":
    "number", "host": {"type": "string", "nullable": True}}`` what its rows contain (types
    ``number``, ``string``, ``boolean``, ``date``; an unlisted column is never judged);
    ``period="window"`` the argument that sets the period its results cover.

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
    if input_schema is not None and not isinstance(input_schema, Mapping):
        raise UsageError(
            f"tool {name!r}: input_schema must be a JSON Schema object (a dict such as "
            f"{{'type': 'object', 'properties': {{...}}}}), got {type(input_schema).__name__}",
            option="tools",
        )
    try:  # a detached copy of JSON types: the caller's later edits reach neither check
        schema = (
            to_json_value(input_schema, ("input_schema",))
            if input_schema is not None
            else {"type": "object", "properties": {}}
        )
    except CanonicalFormError as exc:
        raise UsageError(
            f"tool {name!r}: input_schema is not a valid JSON Schema: {exc}", option="tools"
        ) from exc
    if schema.get("type") != "object":
        raise UsageError(
            f"tool {name!r}: input_schema must be a JSON Schema whose type is 'object' "
            f"(tool arguments are an object), got {input_schema!r}",
            option="tools",
        )
    try:
        validator_cls = jsonschema.validators.validator_for(schema, jsonschema.Draft202012Validator)
        validator_cls.check_schema(schema)
    except (CanonicalFormError, SchemaError) as exc:
        raise UsageError(
            f"tool {name!r}: input_schema is not a valid JSON Schema: {exc}", option="tools"
        ) from exc
    rules: tuple[ArgumentRule, ...] = ()
    if ask_or_assume is not None:
        rules, schema = ruled_schema(name, schema, ask_or_assume)
    return Tool(
        name=name,
        description=description,
        input_schema=schema,
        execute=execute,
        takes_context=_takes_context(execute),
        validator=validator_cls(schema),
        needs=None if needs is None else credential_need(name, needs),
        rules=rules,
        wants=_wants(name, schema, wants),
        result_kind=None if result_kind is None else _kind(name, "result_kind", result_kind),
        contract=contract_of(
            name,
            schema,
            arguments_from=arguments_from,
            result_columns=result_columns,
            period=period,
        ),
    )


#: an artifact kind: what ``wants`` and ``result_kind`` name
ARTIFACT_KIND = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")


def _kind(tool: str, where: str, kind: Any) -> str:
    if not isinstance(kind, str) or not ARTIFACT_KIND.fullmatch(kind):
        raise UsageError(
            f"tool {tool!r}: {where} must be an artifact kind (1-64 characters from a-z, 0-9, "
            f"'.', '_' and '-', starting with a letter or digit), got {kind!r}",
            option="tools",
        )
    return kind


def _wants(tool: str, schema: Mapping[str, Any], wants: Any) -> tuple[tuple[str, str], ...]:
    """``wants`` checked: each a property of the schema that may be a string (a ref)."""
    if wants is None:
        return ()
    if not isinstance(wants, Mapping) or not wants:
        raise UsageError(
            f"tool {tool!r}: wants must be a non-empty mapping of argument name to artifact "
            f"kind, e.g. {{'orders': 'table'}}, got {wants!r}",
            option="tools",
        )
    properties = schema.get("properties")
    pairs = []
    for argument, kind in wants.items():
        spec = properties.get(argument) if isinstance(properties, Mapping) else None
        if not isinstance(spec, Mapping):
            raise UsageError(
                f"tool {tool!r}: wants names {argument!r}, which is not a property of its "
                "input_schema",
                option="tools",
            )
        if spec.get("type", "string") not in ("string", ["string"]):
            raise UsageError(
                f"tool {tool!r}: wants names {argument!r}, whose schema type is not 'string' "
                "(a ref is a string such as 'art_...')",
                option="tools",
            )
        pairs.append((argument, "*" if kind == "*" else _kind(tool, "wants", kind)))
    return tuple(pairs)


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
    return schema_issues(tool.validator, arguments)


def schema_issues(validator: Any, instance: Any, noun: str = "argument") -> list[dict[str, Any]]:
    """Check ``instance`` with a jsonschema ``validator``: one issue per error, naming its
    path, keyword, expectation and the received JSON type (``noun`` names what a missing or
    unexpected member is: an ``argument`` of a tool, a ``member`` of an answer). Values are
    never quoted (an argument or an answer may be sensitive): only their JSON types."""
    issues = []
    for error in sorted(validator.iter_errors(instance), key=lambda e: list(e.path)):
        path = "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.path)
        expected = error.validator_value if error.validator in ("type", "enum") else None
        issue: dict[str, Any] = {
            "path": path,
            "keyword": str(error.validator),
            "received": describe_type(error.instance),
        }
        if error.validator == "required":
            missing = [k for k in error.validator_value if k not in (error.instance or {})]
            issue["message"] = f"missing required {noun}(s): {', '.join(missing)}"
        elif error.validator == "additionalProperties":
            issue["message"] = f"unexpected {noun}(s) not in the schema"
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
    #: the canonical JSON ``content`` is the text of (a JSON result): its size as a JSON
    #: string follows from it without encoding ``content`` again
    canonical: bytes | None = field(default=None, repr=False, compare=False)


def result_text(tool_name: str, value: Any) -> ToolOutcome:
    """Apply the result rule (see the module docstring); the size is checked by
    :class:`ResultRoom`, with the canonical bytes computed here."""
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
        encoded = canon(value)
    except CanonicalFormError as exc:
        return _refused(tool_name, exc)
    return ToolOutcome(content=encoded.decode("utf-8"), canonical=encoded)


def json_text_size(text: str, canonical: bytes | None = None) -> int:
    """Bytes ``text`` takes as a JSON string in a canonical body, quotes included.

    ``canonical``: the canonical JSON that ``text`` is the text of; it holds no raw control
    characters, so only its quotes and backslashes gain an escape (no encoding pass).
    """
    if canonical is not None:
        return len(canonical) + 2 + canonical.count(b'"') + canonical.count(b"\\")
    try:
        return len(orjson.dumps(text))  # JCS escapes the same characters, to the same length
    except orjson.JSONEncodeError:  # a lone surrogate (refused before it is recorded)
        return _size_bound(text, None)


def _size_bound(text: str, canonical: bytes | None) -> int:
    """An upper bound of :func:`json_text_size` computed without reading the text: a code
    point takes at most 6 bytes in a JSON string (``\\u001f``), a canonical byte at most 2."""
    return 2 * len(canonical) + 2 if canonical is not None else 6 * len(text) + 2


class ResultRoom:
    """What the tool results of one reply may still take in the body that records them.

    They are recorded together (one ``history`` write), so they share one budget: the body
    limit (``verify.limits``, read when the room is made) less the room for the record
    around them. Sizes are bounds until a result would not fit under them; then they are
    made exact, so small results cost no encoding pass and none is refused wrongly.
    """

    def __init__(self) -> None:
        self.limit = limits.MAX_BODY_BYTES - limits.MAX_ENVELOPE_BYTES
        self.used = 0
        self._bounded: list[tuple[int, str, bytes | None]] = []

    def admit(self, tool_name: str, outcome: ToolOutcome) -> ToolOutcome:
        """``outcome`` when it fits (charged), else the error result that says why."""
        size = self._charge(outcome.content, outcome.canonical)
        if size is None:
            return outcome
        earlier = (
            f", and this reply's earlier tool results already take {self.used} bytes"
            if self.used
            else ""
        )
        refused = ToolOutcome(
            content=f"Error: tool '{tool_name}' returned a result too large to record: "
            f"{size} bytes as JSON text, over the {self.limit} bytes the tool results of one "
            f"reply may take in the log{earlier} (the body limit MAX_BODY_BYTES less "
            "MAX_ENVELOPE_BYTES, agentfootprint.logformat.limits). Return less: a page, a "
            "summary, or where to find the data.",
            is_error=True,
        )
        # charged even past the limit: a refusal is small, the envelope's room takes it
        self.used += json_text_size(refused.content)
        return refused

    def _charge(self, text: str, canonical: bytes | None) -> int | None:
        """None when ``text`` fits (and is charged), else its exact size."""
        bound = _size_bound(text, canonical)
        if self.used + bound <= self.limit:
            self.used += bound
            self._bounded.append((bound, text, canonical))
            return None
        for charged, earlier, encoded in self._bounded:  # exact sizes before refusing
            self.used += json_text_size(earlier, encoded) - charged
        self._bounded.clear()
        size = json_text_size(text, canonical)
        if self.used + size <= self.limit:
            self.used += size
            return None
        return size


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


async def call_tool(
    tool: Tool, arguments: Any, ctx: ToolContext, *, grace: float = DEFAULT_GRACE_S
) -> Any:
    """Run ``execute``: coroutine functions awaited, sync ones in a worker thread (which
    interpreter exit waits for at most ``grace`` seconds once the run was cancelled)."""
    args = (arguments, ctx) if tool.takes_context else (arguments,)
    return await call_user_code(tool.execute, *args, grace=grace)
