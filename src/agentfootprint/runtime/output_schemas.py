"""An answer's type as the JSON Schema served for it; an answer checked and made that type.

``Agent(output_type=...)`` takes a dataclass, a ``TypedDict`` or a pydantic model (a class),
or a JSON Schema (a mapping). A class is mapped by :class:`~agentfootprint.runtime.
hint_schemas.HintMapper`, the deterministic mapper behind ``@af.tool`` (pydantic's own schema
for a pydantic model), which also gives the converter from validated JSON to the typed value;
a mapping is taken as given: I-JSON, a valid JSON Schema (2020-12 unless its ``$schema`` names
another draft), no ``$ref`` outside itself (a remote one would be fetched at validation), and
refused at construction otherwise. Either way the root is an object schema (what every
vendor's structured output takes).

What is served is :meth:`OutputSchema.served`: ``{"name", "schema", "strict"}``. ``strict``
says whether the schema is one OpenAI's strict mode takes (:func:`strict_compatible`, the
rules of its Structured Outputs guide: every object closed with ``additionalProperties:
false`` and every property required, no keyword strict mode refuses); a schema it cannot take
is served with ``strict: false`` rather than refused, so the receipt says which was asked.
Either way the answer is validated here against the served schema, so a run never accepts an
answer that does not fit it.
"""

from __future__ import annotations

import dataclasses
import json
import re
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import jsonschema
from jsonschema.exceptions import SchemaError

from agentfootprint.errors import CanonicalFormError, UsageError
from agentfootprint.runtime.hint_schemas import Convert, HintMapper, ToolArgumentError
from agentfootprint.runtime.scope import to_json_value
from agentfootprint.runtime.tools import describe_type, schema_issues
from agentfootprint.store.redaction import refuse_reserved_key

__all__ = [
    "OUTPUT_FRAME_PREFIX",
    "OutputSchema",
    "output_schema",
    "strict_compatible",
    "teaching_message",
]

#: the name OpenAI's ``json_schema.name`` takes (and the name served when none fits)
NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
DEFAULT_NAME = "output"
#: The marker a library-written teaching message opens with: the history re-reads it on
#: every later call, and the marker says it is not the person's (a window starts no turn
#: at it).
OUTPUT_FRAME_PREFIX = "[answer not accepted — "
#: keywords OpenAI's strict mode refuses (its Structured Outputs guide lists them as not
#: supported); ``default`` too
STRICT_REFUSES = frozenset(
    {
        "allOf",
        "oneOf",
        "not",
        "if",
        "then",
        "else",
        "dependentRequired",
        "dependentSchemas",
        "patternProperties",
        "unevaluatedProperties",
        "propertyNames",
        "minProperties",
        "maxProperties",
        "minLength",
        "maxLength",
        "unevaluatedItems",
        "contains",
        "minContains",
        "maxContains",
        "uniqueItems",
        "prefixItems",
        "default",
    }
)
#: the string formats strict mode takes
STRICT_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
)
#: what a subschema strict mode takes must say (a bare ``{}`` or ``true`` is not one)
_TYPED = ("type", "anyOf", "$ref", "enum", "const")


def _refused(message: str) -> UsageError:
    return UsageError(f"option 'output_type': {message}", option="output_type")


@dataclass(frozen=True, slots=True, eq=False)
class OutputSchema:
    """A resolved ``output_type``: what is served for it, and how an answer becomes it."""

    name: str
    schema: dict[str, Any]
    strict: bool
    #: ``dataclass``, ``TypedDict``, ``pydantic`` or ``schema`` (a JSON Schema given as is)
    kind: str
    validator: Any = field(repr=False)
    #: the typed value of a JSON value that fits the schema (None: the JSON itself)
    convert: Convert | None = field(default=None, repr=False)

    def served(self) -> dict[str, Any]:
        """``params.output``: the name, the schema and the strict flag (a fresh copy)."""
        return {"name": self.name, "schema": to_json_value(self.schema), "strict": self.strict}

    def check(self, answer: Any) -> tuple[Any, list[dict[str, Any]]]:
        """``(value, [])`` for an answer that is JSON fitting the schema (the value typed),
        else ``(None, issues)``: each naming a path, a keyword, what was expected and the
        JSON type received, never a value of the answer."""
        if not isinstance(answer, str):
            return None, [_issue("$", "json", describe_type(answer), "the answer is not text")]
        try:
            data = json.loads(answer, parse_constant=_no_constant)
        except ValueError as exc:
            where = (
                f" ({exc.msg} at line {exc.lineno} column {exc.colno})"
                if isinstance(exc, json.JSONDecodeError)
                else ""
            )
            return None, [_issue("$", "json", "text", f"the answer is not JSON{where}")]
        issues = schema_issues(self.validator, data, noun="member")
        if issues:
            return None, issues
        if self.convert is None:
            return data, []
        try:
            return self.convert(data, "$"), []
        except (ToolArgumentError, ValueError, TypeError) as exc:
            return None, [_issue("$", "type", describe_type(data), str(exc))]


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _issue(path: str, keyword: str, received: str, message: str) -> dict[str, Any]:
    return {"path": path, "keyword": keyword, "received": received, "message": message}


def teaching_message(output: OutputSchema, issues: list[dict[str, Any]]) -> str:
    """The message the model reads when its answer was not accepted (a user turn, marked)."""
    lines = [
        OUTPUT_FRAME_PREFIX
        + f"the answer above is not JSON matching the output schema {output.name!r}.] "
        "Answer again with only the JSON, fixing these:"
    ]
    for issue in issues:
        lines.append(f"- {issue['path']}: {issue['message']} (received {issue['received']})")
    return "\n".join(lines)


# -- from what the caller gave ----------------------------------------------------------------


def _pydantic_class(value: Any) -> bool:
    return isinstance(value, type) and hasattr(value, "__pydantic_validator__")


def output_schema(value: Any) -> OutputSchema:
    """The resolved ``output_type``, or a :class:`UsageError` naming the option and saying
    what it takes."""
    if isinstance(value, Mapping):
        return _given_schema(value)
    if isinstance(value, type):
        if _pydantic_class(value):
            return _typed(value, "pydantic")
        if typing.is_typeddict(value):
            return _typed(value, "TypedDict")
        if dataclasses.is_dataclass(value):
            return _typed(value, "dataclass")
    shown = value.__name__ if isinstance(value, type) else type(value).__name__
    raise _refused(
        "takes a dataclass, a TypedDict or a pydantic model (the class), or a JSON Schema (a "
        f"mapping whose type is 'object'); got {shown}"
    )


def _typed(cls: type, kind: str) -> OutputSchema:
    mapper = HintMapper(f"output_type {cls.__qualname__}")
    try:
        mapped = mapper.map(cls, "its schema")
        schema = mapper.finish(mapped.schema)
    except UsageError as exc:
        raise _refused(str(exc)) from None
    if schema.get("type") != "object":
        raise _refused(
            f"{cls.__qualname__} maps to no object schema at the top ({sorted(schema)}): a "
            "recursive type cannot be the answer itself; hold it in a field of a dataclass"
        )
    name = cls.__name__ if NAME.match(cls.__name__) else DEFAULT_NAME
    return _made(name, schema, kind, mapped.convert)


def _given_schema(value: Mapping[str, Any]) -> OutputSchema:
    try:
        schema = to_json_value(value, ("output_type",))
        refuse_reserved_key(schema, "output_type")
    except CanonicalFormError as exc:
        raise _refused(f"the JSON Schema is not I-JSON: {exc}") from None
    if schema.get("type") != "object":
        raise _refused(
            "a JSON Schema given as output_type must have type 'object' at the top (vendors' "
            f"structured output takes an object: wrap other answers in one), got {value!r}"[:300]
        )
    for ref in _refs(schema):
        if not ref.startswith("#"):
            raise _refused(
                f"$ref {ref!r} points outside the schema (it would be fetched when an answer is "
                "validated): put the definition under $defs"
            )
    title = schema.get("title")
    name = title if isinstance(title, str) and NAME.match(title) else DEFAULT_NAME
    return _made(name, schema, "schema", None)


def _made(name: str, schema: dict[str, Any], kind: str, convert: Convert | None) -> OutputSchema:
    try:
        validator_cls = jsonschema.validators.validator_for(schema, jsonschema.Draft202012Validator)
        validator_cls.check_schema(schema)
    except SchemaError as exc:
        raise _refused(f"not a valid JSON Schema: {exc.message}") from None
    try:
        schema = to_json_value(schema, ("output_type",))
    except CanonicalFormError as exc:  # a default pydantic says in a form the log cannot hold
        raise _refused(f"its schema is not I-JSON: {exc}") from None
    return OutputSchema(
        name=name,
        schema=schema,
        strict=strict_compatible(schema),
        kind=kind,
        validator=validator_cls(schema),
        convert=convert,
    )


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str):
            yield ref
        for member in node.values():
            yield from _refs(member)
    elif isinstance(node, list):
        for member in node:
            yield from _refs(member)


# -- strict mode ------------------------------------------------------------------------------


def strict_compatible(schema: Mapping[str, Any]) -> bool:
    """Whether OpenAI's strict mode takes ``schema``: the root an object; every object closed
    (``additionalProperties: false``) with every property required; every subschema typed
    (``type``, ``anyOf``, ``$ref``, ``enum`` or ``const``), a ``$ref`` alone in its schema,
    only the string formats it knows, and none of :data:`STRICT_REFUSES`."""
    if schema.get("type") != "object" or "anyOf" in schema:
        return False
    return all(_strict_node(node) for node in _subschemas(schema))


def _strict_node(node: Any) -> bool:
    if not isinstance(node, dict) or not any(key in node for key in _TYPED):
        return False
    if STRICT_REFUSES & node.keys():
        return False
    if "$ref" in node and len(node) > 1:
        return False
    fmt = node.get("format")
    if fmt is not None and fmt not in STRICT_FORMATS:
        return False
    kinds = node.get("type")
    is_object = kinds == "object" or (isinstance(kinds, list) and "object" in kinds)
    if is_object or "properties" in node:
        properties = node.get("properties", {})
        required = node.get("required", [])
        if node.get("additionalProperties") is not False or not isinstance(properties, dict):
            return False
        if not isinstance(required, list) or set(required) != set(properties):
            return False
    return True


def _subschemas(schema: Mapping[str, Any]) -> Iterator[Any]:
    """``schema`` and every schema under it that strict mode reads (properties, items,
    ``anyOf`` members, ``$defs``)."""
    stack: list[Any] = [schema]
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, dict):
            continue
        for key in ("properties", "$defs", "definitions"):
            members = node.get(key)
            if isinstance(members, dict):
                stack.extend(members.values())
        items = node.get("items")
        if items is not None:
            stack.append(items)
        any_of = node.get("anyOf")
        if isinstance(any_of, list):
            stack.extend(any_of)
