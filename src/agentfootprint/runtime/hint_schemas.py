"""Type hints as JSON Schema (2020-12), and JSON arguments as the typed values they name.

``@af.tool`` (runtime/function_tools.py) maps each parameter's hint with :class:`HintMapper`.
The standard library's types are mapped here, by hand: ``str``, ``int``, ``float``,
``bool``, ``None``, ``Any``, ``Optional``/``Union``, ``Literal``, ``Enum``, ``list``/
``Sequence``, ``tuple``, ``set``/``frozenset``, ``dict``/``Mapping`` with ``str`` keys,
dataclasses, ``TypedDict``, ``NewType``, and ``Annotated[X, "a description"]``. A pydantic
model (or pydantic dataclass, or an ``Annotated`` carrying pydantic / annotated-types
constraints) is mapped and validated by pydantic itself (``TypeAdapter``), only when pydantic
is installed: it is no dependency of the package.

Why a hand-written mapper and not pydantic for everything: the schema is served to the model
and hashed into every receipt, so it must be the same bytes on every machine and stay so.
This mapper's output depends on the hints alone (declaration order, class names), and tests
pin it; pydantic's output for the same hint may change with pydantic's version (titles,
``anyOf`` layouts), which would show as a ``tools`` divergence in every replay after an
upgrade. Where the user chose pydantic, that is pydantic's contract, and a changed schema is
evidence of what the model was served.

The schema is inline wherever it can be: a dataclass or model is spelt out where it is used,
so each property's schema stands alone (``ask_or_assume`` checks a rule against it, a pause
asks with it). Only a recursive type keeps a ``$defs`` entry, under its class name.
Each mapped hint also gives a converter from the validated JSON value to the typed value:
dataclasses built recursively, enums by value, tuples and sets built, pydantic through
``validate_python``. A value the hint cannot take raises :class:`ToolArgumentError` naming
its JSON path and types, never the value.
"""

from __future__ import annotations

import collections.abc as abc
import dataclasses
import enum
import importlib
import inspect
import sys
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union, get_args, get_origin, get_type_hints

from agentfootprint.errors import CanonicalFormError, UsageError
from agentfootprint.runtime.docstrings import parse_docstring
from agentfootprint.runtime.scope import to_json_value
from agentfootprint.runtime.tools import describe_type

__all__ = ["Convert", "HintMapper", "Mapped", "ToolArgumentError", "json_default"]

#: ``convert(value, path)``: the typed value of a JSON value found at ``path``
Convert = Callable[[Any, str], Any]
_REFS = "#/$defs/"
_SEQUENCES = {list, abc.Sequence, abc.MutableSequence, abc.Collection, abc.Iterable}
_SETS = {set, frozenset, abc.Set, abc.MutableSet}
_MAPPINGS = {dict, abc.Mapping, abc.MutableMapping}
_FIELD_WRAPPERS = {typing.Required, typing.NotRequired}


class ToolArgumentError(ValueError):
    """An argument the function's type hints cannot take. With ``tool_arg_validation=
    "enforce"`` (the default) the schema refuses such a call first and teaches the model; under
    ``"warn"`` or ``"off"`` the call reaches the function and this is its error result."""


@dataclass(frozen=True, slots=True)
class Mapped:
    """A hint's JSON Schema and the converter of a value that fits it."""

    schema: dict[str, Any]
    convert: Convert


def _same(value: Any, path: str) -> Any:
    return value


def _wrong(path: str, expected: str, value: Any) -> ToolArgumentError:
    return ToolArgumentError(f"{path}: expected {expected}, received {describe_type(value)}")


def _scalar_json(value: Any) -> bool:
    """A value an ``enum`` may list: a string, a number, a boolean or null."""
    if isinstance(value, float):
        return value == value and value not in (float("inf"), float("-inf"))
    return value is None or isinstance(value, str | int | bool)


def _same_json(a: Any, b: Any) -> bool:
    """JSON equality: a boolean equals only a boolean, numbers compare as numbers."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    return type(a) is type(b) and a == b


def _enum_schema(values: list[Any]) -> dict[str, Any]:
    schema: dict[str, Any] = {"enum": list(values)}
    kinds = {describe_type(v) for v in values}
    if kinds == {"integer", "number"}:
        kinds = {"number"}
    if len(kinds) == 1:
        schema["type"] = kinds.pop()
    return schema


def _choice(json_values: list[Any], python_values: list[Any], expected: str) -> Convert:
    def convert(value: Any, path: str) -> Any:
        for known, typed in zip(json_values, python_values, strict=True):
            if _same_json(value, known):
                return typed
        raise ToolArgumentError(f"{path}: expected {expected}, received another value")

    return convert


def _str(value: Any, path: str) -> Any:
    if not isinstance(value, str):
        raise _wrong(path, "string", value)
    return value


def _int(value: Any, path: str) -> Any:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise _wrong(path, "integer", value)


def _float(value: Any, path: str) -> Any:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    raise _wrong(path, "number", value)


def _bool(value: Any, path: str) -> Any:
    if not isinstance(value, bool):
        raise _wrong(path, "boolean", value)
    return value


def _null(value: Any, path: str) -> Any:
    if value is not None:
        raise _wrong(path, "null", value)
    return None


_SCALARS: dict[Any, Mapped] = {
    str: Mapped({"type": "string"}, _str),
    int: Mapped({"type": "integer"}, _int),
    float: Mapped({"type": "number"}, _float),
    bool: Mapped({"type": "boolean"}, _bool),
    type(None): Mapped({"type": "null"}, _null),
}


def _among(hint: Any, group: Any) -> bool:
    try:
        return hint in group
    except TypeError:  # an unhashable hint is none of them
        return False


def _shown(hint: Any) -> str:
    if isinstance(hint, type):
        return hint.__qualname__
    return repr(hint).replace("typing.", "")


def _unwrapped(hint: Any) -> Any:
    """Through ``NewType`` and ``type X = ...`` aliases to the type they stand for."""
    for _ in range(32):
        if hasattr(hint, "__supertype__"):  # NewType
            hint = hint.__supertype__
        elif type(hint).__name__ == "TypeAliasType" and hasattr(hint, "__value__"):
            hint = hint.__value__
        else:
            return hint
    return hint


def _pydantic_class(hint: Any) -> bool:
    """A pydantic model or pydantic dataclass (pydantic is imported if the user made one)."""
    return (
        "pydantic" in sys.modules
        and isinstance(hint, type)
        and hasattr(hint, "__pydantic_validator__")
    )


def _pydantic_metadata(item: Any) -> bool:
    module = getattr(type(item), "__module__", "") or ""
    return module.split(".")[0] in ("pydantic", "annotated_types", "pydantic_core")


def _class_description(cls: type) -> str:
    """A class's own docstring's first paragraph (a dataclass's generated ``Name(...)`` is no
    description, and neither is a docstring it inherits)."""
    doc = cls.__dict__.get("__doc__")
    if not isinstance(doc, str) or doc.startswith(f"{cls.__name__}("):
        return ""
    return parse_docstring(doc).description


def _plain(value: Any) -> Any:
    """A default as JSON data: enums by value, dataclasses as objects, tuples as lists."""
    if isinstance(value, enum.Enum):
        return _plain(value.value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = dataclasses.fields(value)
        return {f.name: _plain(getattr(value, f.name)) for f in fields if f.init}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if hasattr(value, "model_dump") and _pydantic_class(type(value)):
        return value.model_dump(mode="json")
    if isinstance(value, set | frozenset):
        raise TypeError("a set has no order")
    return value


def json_default(value: Any) -> tuple[bool, Any]:
    """``(True, json)`` when a default can be said in the schema, else ``(False, None)``."""
    try:
        return True, to_json_value(_plain(value))
    except (CanonicalFormError, TypeError, ValueError):
        return False, None


def _refs_in(node: Any, found: set[str]) -> set[str]:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(_REFS):
            found.add(ref[len(_REFS) :])
        for value in node.values():
            _refs_in(value, found)
    elif isinstance(node, list):
        for value in node:
            _refs_in(value, found)
    return found


class HintMapper:
    """Maps the hints of one tool; :meth:`finish` makes the schema of its arguments.

    Object types are defined under internal keys while mapping (``py:module.qualname`` for a
    dataclass or ``TypedDict``, ``pd:Name`` for pydantic's definitions) so a recursive type
    can refer to itself; :meth:`finish` spells out every definition that is not part of a
    cycle and names the rest by class name."""

    def __init__(self, owner: str) -> None:
        self.owner = owner
        self._defs: dict[str, dict[str, Any]] = {}
        self._converters: dict[str, Convert] = {}
        self._keys: dict[type, str] = {}
        self._short: dict[str, str] = {}

    def refused(self, where: str, why: str) -> UsageError:
        return UsageError(f"{self.owner}: {where}: {why}", option="tools")

    # -- mapping ---------------------------------------------------------------------------

    def map(self, hint: Any, where: str) -> Mapped:
        """The schema and converter of ``hint``; refused (:class:`UsageError` naming
        ``where``) when the hint has no JSON form here."""
        hint = _unwrapped(hint)
        origin, args = get_origin(hint), get_args(hint)
        if origin is Annotated:
            return self._annotated(args[0], args[1:], where)
        if hint is Any:
            return Mapped({}, _same)
        if hint is None:
            hint = type(None)
        scalar = _SCALARS.get(hint) if _among(hint, _SCALARS) else None
        if scalar is not None:
            return Mapped(dict(scalar.schema), scalar.convert)
        if origin is Literal:
            return self._literal(args, where)
        if origin in (Union, types.UnionType):
            return self._union(args, where)
        if origin is tuple or hint is tuple:
            return self._tuple(args, hint is tuple, where)
        container = origin if origin is not None else hint
        if _among(container, _SEQUENCES):
            return self._sequence(args, where)
        if _among(container, _SETS):
            return self._set(container, args, where)
        if _among(container, _MAPPINGS):
            return self._mapping(args, where)
        if isinstance(hint, type):
            if _pydantic_class(hint):
                return self._pydantic(hint, where)
            if issubclass(hint, enum.Enum):
                return self._enum(hint, where)
            if typing.is_typeddict(hint):
                return self._object(hint, where, typed_dict=True)
            if dataclasses.is_dataclass(hint):
                return self._object(hint, where, typed_dict=False)
        raise self.refused(
            where,
            f"its type {_shown(hint)} has no JSON Schema form: use str, int, float, bool, None, "
            "a Literal, an Enum, a list, tuple, set or dict[str, ...] of those, a dataclass, a "
            "TypedDict or a pydantic model (a date or a path: take a str and parse it)",
        )

    def _annotated(self, base: Any, metadata: tuple[Any, ...], where: str) -> Mapped:
        texts = [m for m in metadata if isinstance(m, str)]
        others = [m for m in metadata if not isinstance(m, str)]
        if others:
            unknown = [m for m in others if not _pydantic_metadata(m)]
            if unknown:
                raise self.refused(
                    where,
                    f"Annotated metadata {unknown[0]!r} is not understood (a str is the "
                    "argument's description; pydantic.Field(...) and annotated-types "
                    "constraints are applied by pydantic)",
                )
            mapped = self._pydantic(Annotated[(base, *others)], where)
        else:
            mapped = self.map(base, where)
        if not texts:
            return mapped
        return Mapped({**mapped.schema, "description": " ".join(texts)}, mapped.convert)

    def _literal(self, args: tuple[Any, ...], where: str) -> Mapped:
        python_values = list(args)
        json_values: list[Any] = []
        for value in python_values:
            plain = value.value if isinstance(value, enum.Enum) else value
            if not _scalar_json(plain) or isinstance(plain, float):
                raise self.refused(
                    where, f"Literal value {value!r} is not a JSON string, integer, boolean or null"
                )
            if any(_same_json(plain, seen) for seen in json_values):
                raise self.refused(where, f"Literal value {value!r} is listed twice as JSON")
            json_values.append(plain)
        expected = "one of " + ", ".join(repr(v) for v in json_values)
        return Mapped(_enum_schema(json_values), _choice(json_values, python_values, expected))

    def _enum(self, cls: type[enum.Enum], where: str) -> Mapped:
        members = list(cls)
        if not members:
            raise self.refused(where, f"the Enum {cls.__qualname__} has no members")
        json_values: list[Any] = []
        for member in members:
            if not _scalar_json(member.value):
                raise self.refused(
                    where,
                    f"{cls.__qualname__}.{member.name} has the value {member.value!r}: an "
                    "Enum argument's values are JSON strings, numbers, booleans or null",
                )
            if any(_same_json(member.value, seen) for seen in json_values):
                raise self.refused(where, f"two members of {cls.__qualname__} are one JSON value")
            json_values.append(member.value)
        expected = f"a value of {cls.__name__}"
        return Mapped(_enum_schema(json_values), _choice(json_values, members, expected))

    def _union(self, args: tuple[Any, ...], where: str) -> Mapped:
        members = [self.map(arg, where) for arg in args]
        converters = [m.convert for m in members]

        def convert(value: Any, path: str) -> Any:
            for each in converters:
                try:
                    return each(value, path)
                except (ToolArgumentError, ValueError, TypeError):
                    continue
            raise ToolArgumentError(
                f"{path}: fits none of the {len(converters)} types it may take, "
                f"received {describe_type(value)}"
            )

        return Mapped({"anyOf": [m.schema for m in members]}, convert)

    def _items(self, args: tuple[Any, ...], where: str) -> Mapped:
        if len(args) > 1:
            raise self.refused(where, "a collection takes one item type")
        return self.map(args[0], where) if args else Mapped({}, _same)

    def _sequence(self, args: tuple[Any, ...], where: str) -> Mapped:
        item = self._items(args, where)
        schema: dict[str, Any] = {"type": "array"}
        if item.schema:
            schema["items"] = item.schema
        each = item.convert

        def convert(value: Any, path: str) -> Any:
            if not isinstance(value, list):
                raise _wrong(path, "array", value)
            return [each(v, f"{path}[{i}]") for i, v in enumerate(value)]

        return Mapped(schema, convert)

    def _tuple(self, args: tuple[Any, ...], bare: bool, where: str) -> Mapped:
        if bare or (len(args) == 2 and args[1] is Ellipsis):
            items = self._sequence(() if bare else args[:1], where)
            listed = items.convert
            return Mapped(items.schema, lambda value, path: tuple(listed(value, path)))
        members = [self.map(arg, where) for arg in args]
        schema: dict[str, Any] = {
            "type": "array",
            "items": False,
            "minItems": len(members),
            "maxItems": len(members),
        }
        if members:
            schema["prefixItems"] = [m.schema for m in members]
        converters = [m.convert for m in members]

        def convert(value: Any, path: str) -> Any:
            if not isinstance(value, list):
                raise _wrong(path, "array", value)
            if len(value) != len(converters):
                raise ToolArgumentError(
                    f"{path}: expected {len(converters)} items, received {len(value)}"
                )
            pairs = enumerate(zip(converters, value, strict=True))
            return tuple(c(v, f"{path}[{i}]") for i, (c, v) in pairs)

        return Mapped(schema, convert)

    def _set(self, container: Any, args: tuple[Any, ...], where: str) -> Mapped:
        if args and not self._hashable(args[0]):
            raise self.refused(
                where,
                f"a set's items must be hashable once converted, and {_shown(args[0])} is not "
                "(use a list)",
            )
        items = self._sequence(args, where)
        items.schema["uniqueItems"] = True
        listed = items.convert
        build = frozenset if container is frozenset else set

        def convert(value: Any, path: str) -> Any:
            made = listed(value, path)
            try:
                return build(made)
            except TypeError as exc:
                raise ToolArgumentError(f"{path}: an item is not hashable") from exc

        return Mapped(items.schema, convert)

    def _hashable(self, hint: Any) -> bool:
        hint = _unwrapped(hint)
        origin, args = get_origin(hint), get_args(hint)
        if origin is Annotated:
            return self._hashable(args[0])
        if origin in (Union, types.UnionType) or origin is tuple:
            return all(self._hashable(a) for a in args if a is not Ellipsis)
        if (
            origin is Literal
            or _among(hint, _SCALARS)
            or hint is None
            or hint in (tuple, frozenset)
        ):
            return True
        if origin is frozenset:
            return True
        if isinstance(hint, type) and issubclass(hint, enum.Enum):
            return True
        params = getattr(hint, "__dataclass_params__", None)
        return bool(params is not None and params.frozen and dataclasses.is_dataclass(hint))

    def _mapping(self, args: tuple[Any, ...], where: str) -> Mapped:
        if args and _unwrapped(args[0]) is not str:
            raise self.refused(where, "a dict argument's keys are str (JSON object keys)")
        value = self.map(args[1], where) if args else Mapped({}, _same)
        schema: dict[str, Any] = {"type": "object"}
        if value.schema:
            schema["additionalProperties"] = value.schema
        each = value.convert

        def convert(given: Any, path: str) -> Any:
            if not isinstance(given, dict):
                raise _wrong(path, "object", given)
            return {k: each(v, f"{path}.{k}") for k, v in given.items()}

        return Mapped(schema, convert)

    # -- object types ----------------------------------------------------------------------

    def _key(self, cls: type) -> tuple[str, bool]:
        """The internal key of ``cls``, and whether it was new."""
        known = self._keys.get(cls)
        if known is not None:
            return known, False
        key = f"py:{cls.__module__}.{cls.__qualname__}"
        taken = set(self._keys.values())
        n = 1
        while key in taken:  # another class of the same module and name (made in a function)
            n += 1
            key = f"py:{cls.__module__}.{cls.__qualname__}#{n}"
        self._keys[cls] = key
        self._short[key] = cls.__name__
        return key, True

    def _ref(self, key: str) -> Mapped:
        converters = self._converters

        def convert(value: Any, path: str) -> Any:
            return converters[key](value, path)

        return Mapped({"$ref": _REFS + key}, convert)

    def _object(self, cls: type, where: str, *, typed_dict: bool) -> Mapped:
        key, new = self._key(cls)
        if not new:
            return self._ref(key)
        try:
            hints = get_type_hints(cls, include_extras=True)
        except Exception as exc:
            raise self.refused(
                where, f"the type hints of {cls.__qualname__} cannot be resolved ({exc})"
            ) from exc
        if typed_dict:
            names = list(hints)
            required_keys: frozenset[str] = getattr(cls, "__required_keys__", frozenset())
            # the resolved wrapper decides: under postponed annotations Python 3.11 reads
            # ``NotRequired[...]`` as a string and counts the key required
            required = [
                n
                for n in names
                if get_origin(hints[n]) is typing.Required
                or (get_origin(hints[n]) is not typing.NotRequired and n in required_keys)
            ]
            defaults: dict[str, Any] = {}
            texts: dict[str, str] = {}
        else:
            fields = [f for f in dataclasses.fields(cls) if f.init]
            names = [f.name for f in fields]
            init = [p for p in inspect.signature(cls).parameters if p not in names]
            if init:
                raise self.refused(
                    where,
                    f"{cls.__qualname__} takes {init[0]!r}, which is not a field (an "
                    "InitVar): no schema can say it",
                )
            required = [
                f.name
                for f in fields
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
            ]
            defaults = {f.name: f.default for f in fields if f.default is not dataclasses.MISSING}
            texts = {
                f.name: f.metadata["description"]
                for f in fields
                if isinstance(f.metadata.get("description"), str)
            }
        properties: dict[str, Any] = {}
        converters: dict[str, Convert] = {}
        for name in names:
            hint = hints[name]
            while get_origin(hint) in _FIELD_WRAPPERS:
                hint = get_args(hint)[0]
            mapped = self.map(hint, f"{where}, field {cls.__qualname__}.{name}")
            prop = dict(mapped.schema)
            if name in texts and "description" not in prop:
                prop["description"] = texts[name]
            if name in defaults:
                ok, value = json_default(defaults[name])
                if ok:
                    prop["default"] = value
            properties[name] = prop
            converters[name] = mapped.convert
        schema: dict[str, Any] = {
            "type": "object",
            "properties": properties,
            "additionalProperties": False,
        }
        if required:
            schema["required"] = required
        description = _class_description(cls)
        if description:
            schema["description"] = description
        self._defs[key] = schema
        self._converters[key] = _object_converter(cls, converters, required, typed_dict)
        return self._ref(key)

    def _pydantic(self, hint: Any, where: str) -> Mapped:
        try:
            pydantic = importlib.import_module("pydantic")
        except ImportError as exc:  # pragma: no cover - metadata from annotated-types alone
            raise self.refused(where, "its Annotated constraints need pydantic installed") from exc
        try:
            adapter = pydantic.TypeAdapter(hint)
            schema = adapter.json_schema(ref_template=_REFS + "pd:{model}")
        except Exception as exc:
            raise self.refused(where, f"pydantic gives no JSON Schema for it ({exc})") from exc
        for name, body in schema.pop("$defs", {}).items():
            key = f"pd:{name}"
            if key in self._defs and self._defs[key] != body:
                raise self.refused(
                    where,
                    f"two different pydantic types are both named {name!r} in this tool's "
                    "schema: rename one",
                )
            self._defs[key] = body
            self._short[key] = name
        errors = pydantic.ValidationError

        def convert(value: Any, path: str) -> Any:
            try:
                return adapter.validate_python(value)
            except errors as exc:
                issues = [
                    f"{path}{''.join(_step(s) for s in issue['loc'])}: {issue['msg']}"
                    for issue in exc.errors(
                        include_url=False, include_input=False, include_context=False
                    )
                ]
                raise ToolArgumentError("; ".join(issues) or f"{path}: invalid") from None

        return Mapped(schema, convert)

    # -- the finished schema ---------------------------------------------------------------

    def finish(self, schema: dict[str, Any]) -> dict[str, Any]:
        """``schema`` with every definition outside a cycle spelt out where it is used; the
        recursive ones under ``$defs`` by class name (qualified when two share a name)."""
        graph = {key: _refs_in(body, set()) & set(self._defs) for key, body in self._defs.items()}
        cyclic = {key for key in graph if _reaches(graph, key, key)}
        names = self._names(cyclic)
        defs = self._defs

        def rewrite(node: Any) -> Any:
            if isinstance(node, list):
                return [rewrite(v) for v in node]
            if not isinstance(node, dict):
                return node
            ref = node.get("$ref")
            key = ref[len(_REFS) :] if isinstance(ref, str) and ref.startswith(_REFS) else None
            if key is None or key not in defs:
                return {k: rewrite(v) for k, v in node.items()}
            siblings = {k: rewrite(v) for k, v in node.items() if k != "$ref"}
            if key in cyclic:
                return {"$ref": _REFS + names[key], **siblings}
            return {**rewrite(defs[key]), **siblings}

        finished: dict[str, Any] = rewrite(schema)
        if cyclic:
            finished["$defs"] = {names[key]: rewrite(defs[key]) for key in sorted(cyclic)}
        return finished

    def _names(self, cyclic: set[str]) -> dict[str, str]:
        shorts = [self._short[key] for key in cyclic]
        names = {}
        for key in cyclic:
            short = self._short[key]
            names[key] = short if shorts.count(short) == 1 else key.split(":", 1)[1]
        if len(set(names.values())) != len(names):
            raise self.refused("its recursive types", "two of them have one name: rename one")
        return names


def _step(loc: Any) -> str:
    return f"[{loc}]" if isinstance(loc, int) else f".{loc}"


def _reaches(graph: dict[str, set[str]], start: str, goal: str) -> bool:
    seen: set[str] = set()
    stack = list(graph.get(start, ()))
    while stack:
        key = stack.pop()
        if key == goal:
            return True
        if key not in seen:
            seen.add(key)
            stack.extend(graph.get(key, ()))
    return False


def _object_converter(
    cls: type, converters: dict[str, Convert], required: list[str], typed_dict: bool
) -> Convert:
    def convert(value: Any, path: str) -> Any:
        if not isinstance(value, dict):
            raise _wrong(path, "object", value)
        unknown = sorted(k for k in value if k not in converters)
        if unknown:
            raise ToolArgumentError(f"{path}: unexpected member(s) {', '.join(unknown)}")
        missing = [k for k in required if k not in value]
        if missing:
            raise ToolArgumentError(f"{path}: missing member(s) {', '.join(missing)}")
        given = {k: converters[k](v, f"{path}.{k}") for k, v in value.items()}
        return given if typed_dict else cls(**given)

    return convert
