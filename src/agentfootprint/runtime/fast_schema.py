"""A fast yes for tool arguments that are certainly valid, before ``jsonschema`` is asked.

Validating every tool call's arguments with ``jsonschema`` walks its keyword machinery
(tens of microseconds for a four-keyword schema); most calls are valid. :func:`compile_check`
turns a schema that uses only a small, common subset of JSON Schema 2020-12 into one Python
predicate. The predicate is *sound in one direction only*: it returns True only for an
instance ``jsonschema`` finds no error in, and False whenever it is not sure (a float where an
integer is asked, an ``enum`` of containers). False means "ask ``jsonschema``", which then
says what is wrong, as before. A schema with any keyword outside the subset compiles to None:
it is always validated by ``jsonschema``.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["compile_check"]

Check = Callable[[Any], bool]

#: keywords that never make an instance invalid (annotations)
_ANNOTATIONS = frozenset(
    {"title", "description", "default", "examples", "$comment", "deprecated", "readOnly",
     "writeOnly"}
)  # fmt: skip
_DIALECT = "https://json-schema.org/draft/2020-12/schema"
_SCALARS = (str, int, float, bool, type(None))


def _is_integer(value: Any) -> bool:
    return type(value) is int  # a float that is integral is an integer too: jsonschema decides


def _is_number(value: Any) -> bool:
    return type(value) in (int, float)


_TYPES: dict[str, Check] = {
    "object": lambda v: type(v) is dict,
    "array": lambda v: type(v) is list,
    "string": lambda v: type(v) is str,
    "integer": _is_integer,
    "number": _is_number,
    "boolean": lambda v: type(v) is bool,
    "null": lambda v: v is None,
}


def compile_check(schema: Any) -> Check | None:
    """The predicate of ``schema`` (a tool's ``input_schema``), or None when it uses anything
    outside the subset: ``type``, ``properties``, ``required``, ``additionalProperties``,
    ``items``, ``minItems``/``maxItems``, ``minLength``/``maxLength``, ``minimum``/``maximum``
    and the exclusive bounds, ``enum``/``const`` of scalars, annotations, and ``$schema``
    naming draft 2020-12."""
    if isinstance(schema, Mapping) and "$schema" in schema:
        if schema["$schema"] != _DIALECT:
            return None
        schema = {k: v for k, v in schema.items() if k != "$schema"}
    return _compile(schema)


def _compile(schema: Any) -> Check | None:
    if schema is True:
        return lambda value: True
    if schema is False:
        return lambda value: False
    if not isinstance(schema, Mapping):
        return None
    checks: list[Check] = []
    for keyword, argument in schema.items():
        if keyword in _ANNOTATIONS:
            continue
        check = _keyword(keyword, argument, schema)
        if check is None:
            return None
        checks.append(check)
    if not checks:
        return lambda value: True
    if len(checks) == 1:
        return checks[0]
    return lambda value: all(check(value) for check in checks)


def _keyword(keyword: str, argument: Any, schema: Mapping[str, Any]) -> Check | None:
    if keyword == "type":
        names = [argument] if isinstance(argument, str) else argument
        if not isinstance(names, list) or not names or any(n not in _TYPES for n in names):
            return None
        tests = [_TYPES[n] for n in names]
        return tests[0] if len(tests) == 1 else (lambda v: any(t(v) for t in tests))
    if keyword == "properties":
        return _properties(argument)
    if keyword == "required":
        if not isinstance(argument, list) or not all(isinstance(k, str) for k in argument):
            return None
        names = tuple(argument)
        return lambda v: not isinstance(v, dict) or all(k in v for k in names)
    if keyword == "additionalProperties":
        return _additional(argument, schema.get("properties", {}))
    if keyword == "items":
        item = _compile(argument)
        if item is None:
            return None
        return lambda v: not isinstance(v, list) or all(item(x) for x in v)
    if keyword in ("minItems", "maxItems", "minLength", "maxLength"):
        return _length(keyword, argument)
    if keyword in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        return _bound(keyword, argument)
    if keyword in ("enum", "const"):
        allowed = argument if keyword == "enum" else [argument]
        if not isinstance(allowed, list) or not all(type(a) in _SCALARS for a in allowed):
            return None
        pairs = [(type(a), a) for a in allowed]
        return lambda v: any(type(v) is kind and v == a for kind, a in pairs)
    return None


def _properties(argument: Any) -> Check | None:
    if not isinstance(argument, Mapping):
        return None
    compiled: list[tuple[str, Check]] = []
    for name, sub in argument.items():
        check = _compile(sub)
        if not isinstance(name, str) or check is None:
            return None
        compiled.append((name, check))

    def properties(value: Any) -> bool:
        if not isinstance(value, dict):
            return True
        return all(name not in value or check(value[name]) for name, check in compiled)

    return properties


def _additional(argument: Any, properties: Any) -> Check | None:
    if not isinstance(properties, Mapping):
        return None
    known = frozenset(properties)
    if argument is False:
        return lambda v: not isinstance(v, dict) or known.issuperset(v)
    extra = _compile(argument)
    if extra is None:
        return None
    return lambda v: not isinstance(v, dict) or all(extra(v[k]) for k in v if k not in known)


def _length(keyword: str, argument: Any) -> Check | None:
    if type(argument) is not int or argument < 0:
        return None
    kind: type[Any] = list if keyword.endswith("Items") else str
    least = keyword.startswith("min")

    def length(value: Any) -> bool:
        if not isinstance(value, kind):
            return True
        return len(value) >= argument if least else len(value) <= argument

    return length


def _bound(keyword: str, argument: Any) -> Check | None:
    if type(argument) not in (int, float):
        return None
    tests: dict[str, Check] = {
        "minimum": lambda v: v >= argument,
        "maximum": lambda v: v <= argument,
        "exclusiveMinimum": lambda v: v > argument,
        "exclusiveMaximum": lambda v: v < argument,
    }
    test = tests[keyword]

    def bounded(v: Any) -> bool:
        # not applicable only to what jsonschema takes for no number (a bool, a non-number);
        # any other number (a subclass of float, a Decimal) is tested, as jsonschema tests
        # it, and one that cannot be ordered is left to jsonschema
        if isinstance(v, bool) or not isinstance(v, numbers.Number):
            return True
        return isinstance(v, numbers.Real) and test(v)

    return bounded
