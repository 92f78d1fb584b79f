"""Ruled arguments (``define_tool(ask_or_assume=...)``): what the inputs layer does when a
model's call leaves an argument out, declared by the tool's author and checked when the tool
is defined.

``{"window": {"assume": "24h"}}``: the default is filled in (and said so on the result);
``{"period": {"ask": "Which period?", "choices": ["7d", "30d"]}}``: the person is asked,
once for the whole batch, by a pause. The served schema no longer lists a ruled argument as
required and says its rule in the argument's description, so the model knows it may leave it
out.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jsonschema

from agentfootprint.errors import CanonicalFormError, UsageError
from agentfootprint.logformat.canonical import canon
from agentfootprint.runtime.scope import to_json_value

__all__ = ["ArgumentRule", "ruled_schema"]


@dataclass(frozen=True, kw_only=True, slots=True)
class ArgumentRule:
    """The rule of one argument: ``assume`` a default (``has_assume``), or ``ask`` the person
    (with ``choices``, when given)."""

    argument: str
    has_assume: bool = False
    assume: Any = None
    ask: str | None = None
    choices: tuple[Any, ...] | None = None
    #: the argument's own JSON Schema (what an answer is checked against)
    schema: Mapping[str, Any] | None = None

    def field_schema(self) -> dict[str, Any]:
        """The schema of the field a pause asks for: the argument's, the question as its
        description, the choices as its ``enum``."""
        field = dict(copy.deepcopy(self.schema or {}))
        field["description"] = self.ask or ""
        if self.choices is not None:
            field["enum"] = list(self.choices)
        return field


def ruled_schema(
    tool: str, schema: Mapping[str, Any], ask_or_assume: Any
) -> tuple[tuple[ArgumentRule, ...], dict[str, Any]]:
    """The rules ``ask_or_assume`` declares, checked against ``schema`` (a tool's input
    schema), and the schema the model is served: each ruled argument out of ``required``, its
    rule said in its description. A :class:`UsageError` names what is wrong."""

    def refused(why: str) -> UsageError:
        return UsageError(f"tool {tool!r}: ask_or_assume: {why}", option="tools")

    if not isinstance(ask_or_assume, Mapping) or not ask_or_assume:
        raise refused("must be a non-empty dict of argument name -> rule")
    properties = schema.get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    served = copy.deepcopy(dict(schema))
    served_properties = dict(served.get("properties") or {})
    rules = []
    for argument, rule in ask_or_assume.items():
        if not isinstance(argument, str) or argument not in properties:
            raise refused(f"{argument!r} is not a property of the tool's input_schema")
        own = properties[argument]
        if (
            not isinstance(rule, Mapping)
            or not set(rule)
            or not set(rule)
            <= {
                "assume",
                "ask",
                "choices",
            }
        ):
            raise refused(
                f"the rule of {argument!r} must be {{'assume': value}} or {{'ask': "
                f"'question', 'choices': [...]}}, got {rule!r}"
            )
        if ("assume" in rule) == ("ask" in rule):
            raise refused(f"the rule of {argument!r} gives exactly one of 'assume' and 'ask'")
        check = _checker(refused, argument, own)
        if "assume" in rule:
            if "choices" in rule:
                raise refused(f"'choices' goes with 'ask', not 'assume' ({argument!r})")
            value = _json(refused, argument, rule["assume"])
            check(value, "its default")
            made = ArgumentRule(argument=argument, has_assume=True, assume=value, schema=own)
            said = f"If omitted, {_shown(value)} is assumed."
        else:
            question = rule["ask"]
            if not isinstance(question, str) or not question.strip():
                raise refused(f"'ask' of {argument!r} must be a non-empty question")
            choices = None
            if "choices" in rule:
                listed = _json(refused, argument, rule["choices"])
                if not isinstance(listed, list) or not listed:
                    raise refused(f"'choices' of {argument!r} must be a non-empty list")
                for choice in listed:
                    check(choice, "a choice")
                choices = tuple(listed)
            made = ArgumentRule(argument=argument, ask=question, choices=choices, schema=own)
            said = "If omitted, the user is asked."
        rules.append(made)
        described = dict(own) if isinstance(own, Mapping) else {}
        text = described.get("description")
        described["description"] = f"{text} {said}" if isinstance(text, str) and text else said
        served_properties[argument] = described
    served["properties"] = served_properties
    required = served.get("required")
    if isinstance(required, list):
        ruled = {r.argument for r in rules}
        served["required"] = [name for name in required if name not in ruled]
        if not served["required"]:
            del served["required"]
    return tuple(rules), served


def _json(refused: Any, argument: str, value: Any) -> Any:
    try:
        return to_json_value(value, ("ask_or_assume", argument))
    except CanonicalFormError as exc:
        raise refused(f"the rule of {argument!r} is not JSON ({exc})") from exc


def _checker(refused: Any, argument: str, own: Any) -> Any:
    """``check(value, what)``: refuses a value the argument's own schema does not accept."""
    try:
        validator = jsonschema.Draft202012Validator(own if isinstance(own, Mapping) else {})
    except jsonschema.exceptions.SchemaError as exc:  # pragma: no cover - the tool's was checked
        raise refused(f"{argument!r} has no valid schema ({exc})") from exc

    def check(value: Any, what: str) -> None:
        error = jsonschema.exceptions.best_match(validator.iter_errors(value))
        if error is not None:
            raise refused(f"{what} for {argument!r} does not fit its schema ({error.message})")

    return check


def _shown(value: Any) -> str:
    return canon(value).decode("utf-8")
