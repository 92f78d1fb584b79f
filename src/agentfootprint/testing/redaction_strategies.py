"""Hypothesis strategies for redaction tests: runs with secrets planted under policy keys.

A drawn :class:`PlantedRun` is plain data: a user message, the model's replies (text and
tool calls), the outcome of every tool call and, optionally, a provider failure after the
replies. Secrets (``"S3CR3T" + 32 hex digits``: 128 bits hashed from one random seed per run, so
they are distinct and unrelated) are planted

* under policy keys (``ssn``, ``email``, ``account_number`` and keys the pattern
  ``(?i)token`` finds, such as ``api_token``) at random depths of JSON objects, also
  inside strings holding JSON text: in the run input (a JSON-object string), the model's
  tool-call arguments (objects and JSON strings), its text (JSON text), tool results
  (objects and JSON strings), structured tool errors (``ValueError({...})``) and a
  structured provider failure;
* with ``free_text=True`` (for :func:`conversation_redaction`), also in free text: the
  user message, the model's text, tool-call arguments that are not JSON, tool results as
  plain strings, tool error messages and a provider error message;
* with ``rfc8259=True``, JSON text is also spelled the ways RFC 8259 allows and a fast
  parser may not (:data:`CORNER_CASES`): a huge exponent, a 400-digit integer, a
  duplicate member name, a lone-surrogate escape and nesting beyond the walked depth
  (JSON text the boundary commits whole), a wide but finite integer, an underflowing
  exponent, member names spelled with ``\\u`` escapes and two levels of JSON text whose
  inner escapes are themselves escaped (``\\u005c\\u0075``: text it walks).

``served`` lists the secrets the model must have received and ``kept`` those the run's
live result state must hold: redaction never touches either. :func:`build_planted_agent`
turns a spec into a fresh agent; :func:`run_planted` runs it.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from hypothesis import strategies as st

from agentfootprint.agent.agent import Agent, RunResult
from agentfootprint.errors import ProviderCallError
from agentfootprint.runtime.mock_provider import MockProvider, reply, tool_call
from agentfootprint.runtime.provider import LLMResponse
from agentfootprint.runtime.tools import define_tool
from agentfootprint.store.redaction import RedactionPolicy, conversation_redaction

__all__ = [
    "CORNER_CASES",
    "NOISE_KEYS",
    "PATTERN_KEYS",
    "POLICY_KEYS",
    "POLICY_PATTERN",
    "SECRET_KEYS",
    "SECRET_PREFIX",
    "PlantedOutcome",
    "PlantedReply",
    "PlantedRun",
    "ProviderDown",
    "build_planted_agent",
    "corner_text",
    "joined",
    "json_text",
    "key_policy",
    "leaks",
    "planted",
    "planted_runs",
    "run_planted",
    "secrets",
    "text_policy",
]

SECRET_PREFIX = "S3CR3T"
POLICY_KEYS = ("ssn", "email", "account_number")
POLICY_PATTERN = "(?i)token"
#: keys the pattern matches (and no exact key names)
PATTERN_KEYS = ("api_token", "Refresh_TOKEN", "token")
SECRET_KEYS = (*POLICY_KEYS, *PATTERN_KEYS)
#: keys no policy here matches (conversation_redaction's keys included)
NOISE_KEYS = ("data", "items", "meta", "q", "note", "two words", "é", "n")

OutcomeKind = Literal["dict", "json_text", "text", "raise_dict", "raise_text"]


def key_policy() -> RedactionPolicy:
    """The sweep's policy: three exact keys and one pattern."""
    return RedactionPolicy(keys=POLICY_KEYS, patterns=[POLICY_PATTERN])


def text_policy() -> RedactionPolicy:
    """The conversation's text and the sweep's keys."""
    return conversation_redaction() | key_policy()


def secrets() -> st.SearchStrategy[str]:
    """High-entropy secrets: ``S3CR3T`` and 128 random bits in hex."""
    return st.binary(min_size=16, max_size=16).map(lambda b: SECRET_PREFIX + b.hex())


def leaks(secret: str, data: bytes | str) -> bool:
    """Whether ``data`` holds ``secret`` or either half of it.

    Two disjoint halves (19 characters, at least 76 random bits each): a value SQLite
    split across two pages still shows one of them whole.
    """
    raw = secret.encode("utf-8")
    middle = len(raw) // 2
    haystack = data if isinstance(data, bytes) else data.encode("utf-8", "backslashreplace")
    return raw[:middle] in haystack or raw[middle:] in haystack


def _noise() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.integers(min_value=-5, max_value=5),
        st.sampled_from(["x", "plain text", "", "12-34"]),
        st.none(),
        st.booleans(),
    )


def json_text(value: Any, style: int = 0) -> str:
    """``value`` as JSON text, in one of a few spellings (all starting with ``{`` or ``[``)."""
    if style == 1:
        return json.dumps(value, indent=2)
    if style == 2:
        return json.dumps(value, ensure_ascii=False)
    return json.dumps(value, separators=(",", ":"))


#: RFC 8259 spellings of JSON text (:func:`corner_text`); the first five are JSON text the
#: boundary cannot rewrite (it commits it whole), the others it walks
CORNER_CASES = (
    "huge_exponent",
    "long_integer",
    "duplicate_name",
    "lone_surrogate",
    "deep",
    "wide_integer",
    "tiny_exponent",
    "escaped_names",
    "escaped_twice",
)


def _escaped(text: str) -> str:
    """A JSON string literal of ``text`` with every UTF-16 code unit as a ``\\u`` escape."""
    units = text.encode("utf-16-be")
    pairs = range(0, len(units), 2)
    return '"' + "".join(f"\\u{units[i]:02x}{units[i + 1]:02x}" for i in pairs) + '"'


def _escaped_names(value: Any) -> str:
    """``value`` as JSON text whose member names are all written as ``\\u`` escapes."""
    if isinstance(value, dict):
        members = (f"{_escaped(k)}:{_escaped_names(v)}" for k, v in value.items())
        return "{" + ",".join(members) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_escaped_names(v) for v in value) + "]"
    return json.dumps(value)


def _doubly_escaped(text: str) -> str:
    """A JSON string literal of ``text`` with each backslash written ``\\u005c`` and each
    ``u`` written ``\\u0075``: the escapes of the text inside are escaped in turn."""
    spelled = {"\\": "\\u005c", "u": "\\u0075", '"': '\\"'}
    return '"' + "".join(spelled.get(c, c) for c in text) + '"'  # (text: ASCII JSON)


def corner_text(value: dict[str, Any], case: str, depth: int = 300) -> str:
    """The non-empty object ``value`` as JSON text spelled as :data:`CORNER_CASES` ``case``
    says (``depth``: the bracket nesting of ``deep``)."""
    plain = json.dumps(value, separators=(",", ":"))
    rest = plain[1:]  # after the opening brace
    if case == "huge_exponent":
        return '{"num":1e400,' + rest
    if case == "long_integer":
        return '{"num":' + "7" * 400 + "," + rest
    if case == "duplicate_name":
        return '{"num":1,"num":2,' + rest
    if case == "lone_surrogate":
        return '{"num":"\\ud800",' + rest
    if case == "deep":
        return "[" * depth + plain + "]" * depth
    if case == "wide_integer":
        return '{"num":1' + "0" * 300 + "," + rest
    if case == "tiny_exponent":
        return '{"num":1e-400,' + rest
    if case == "escaped_names":
        return _escaped_names(value)
    if case == "escaped_twice":
        return '{"num":' + _doubly_escaped(_escaped_names(value)) + "}"
    raise ValueError(f"unknown corner case {case!r}")


@st.composite
def planted(
    draw: st.DrawFn, secret: str, *, max_depth: int = 3, rfc8259: bool = False
) -> dict[str, Any]:
    """A JSON object holding ``secret`` under a policy key at a random depth.

    The secret is the key's value itself, or inside it (the whole subtree is committed);
    each level around it is an object, an array, or a string holding the level below as
    JSON text (with ``rfc8259``, also spelled as one of :data:`CORNER_CASES`).
    """
    key = draw(st.sampled_from(SECRET_KEYS), label="policy key")
    shape = draw(st.sampled_from(["bare", "list", "object"]))
    value: Any = secret if shape == "bare" else [secret, 1] if shape == "list" else {"v": secret}
    node: dict[str, Any] = {key: value}
    if draw(st.booleans()):
        node[draw(st.sampled_from(NOISE_KEYS))] = draw(_noise())
    wraps = ["object", "list", "json_text"] + (["corner"] if rfc8259 else [])
    for _ in range(draw(st.integers(min_value=0, max_value=max_depth), label="depth")):
        wrap = draw(st.sampled_from(wraps))
        outer = draw(st.sampled_from(NOISE_KEYS))
        if wrap == "object":
            node = {outer: node}
        elif wrap == "list":
            items = [draw(_noise()), draw(_noise())]
            items.insert(draw(st.integers(min_value=0, max_value=2)), node)
            node = {outer: items}
        elif wrap == "json_text":
            node = {outer: json_text(node, draw(st.integers(min_value=0, max_value=2)))}
        else:
            node = {outer: _corner(draw, node)}
    return node


def _corner(draw: st.DrawFn, node: dict[str, Any]) -> str:
    case = draw(st.sampled_from(CORNER_CASES), label="corner case")
    depth = draw(st.sampled_from([251, 300, 1100]), label="deep") if case == "deep" else 0
    return corner_text(node, case, depth)


@dataclass(frozen=True, slots=True)
class PlantedOutcome:
    """One tool call's outcome.

    ``dict``: return ``value`` (an object); ``json_text``: return the string ``value``;
    ``text``: return the plain string ``value``; ``raise_dict``: raise
    ``ValueError(value)`` (one dict argument: recorded as structured details);
    ``raise_text``: raise ``RuntimeError(value)``.
    """

    kind: OutcomeKind
    value: Any


@dataclass(frozen=True, slots=True)
class PlantedReply:
    """A model reply: its text and the arguments of its calls to the ``lookup`` tool."""

    text: str
    calls: tuple[Any, ...] = ()


@dataclass(frozen=True, slots=True)
class PlantedRun:
    """One run with planted secrets (see the module docstring)."""

    message: str
    replies: tuple[PlantedReply, ...]
    outcomes: tuple[PlantedOutcome, ...]
    provider_error: Any = None
    commit_values: Literal["delta", "full"] = "delta"
    react_mode: Literal["dynamic", "classic"] = "dynamic"
    secrets: tuple[str, ...] = ()
    served: tuple[str, ...] = ()
    kept: tuple[str, ...] = ()

    @property
    def fails(self) -> bool:
        """The provider raises after the scripted replies (the run closes as failed)."""
        return self.provider_error is not None

    @property
    def calls(self) -> int:
        return len(self.replies) + (1 if self.fails else 0)


def _broken(arguments: Any) -> bool:
    return isinstance(arguments, str) and arguments.startswith("{not json ")


class ProviderDown(RuntimeError):
    """What the planted provider raises (one argument: a dict, or a message)."""


@st.composite
def planted_runs(
    draw: st.DrawFn,
    *,
    free_text: bool = False,
    provider_failure: bool | None = None,
    max_tool_replies: int = 3,
    namespace: str = "",
    rfc8259: bool = False,
) -> PlantedRun:
    """A run with secrets everywhere the policy reaches (see the module docstring).

    Runs drawn with different ``namespace`` never share a secret (say, a parent and its
    continuation drawn in one example). ``rfc8259``: JSON text spelled as
    :data:`CORNER_CASES` too, except as the tool-call arguments text the runtime parses.
    """
    planted_secrets: list[str] = []
    served: list[str] = []
    kept: list[str] = []
    # one random seed per run, each secret hashed from it: distinct and unrelated
    seed = draw(st.binary(min_size=16, max_size=16), label="secret seed")

    def secret(*, serve: bool, keep: bool) -> str:
        index = len(planted_secrets).to_bytes(2, "big")
        material = seed + namespace.encode("utf-8") + b"\x00" + index
        value = SECRET_PREFIX + hashlib.sha256(material).digest()[:16].hex()
        planted_secrets.append(value)
        if serve:
            served.append(value)
        if keep:
            kept.append(value)
        return value

    def structured(*, serve: bool, keep: bool) -> dict[str, Any]:
        return draw(planted(secret(serve=serve, keep=keep), rfc8259=rfc8259))

    def as_text(value: Any, *, parsed: bool = False) -> str:
        """JSON text; ``parsed``: the runtime parses it (tool-call arguments), so it is
        spelled plainly."""
        if rfc8259 and not parsed and isinstance(value, dict) and draw(st.booleans()):
            return _corner(draw, value)
        return json_text(value, draw(st.integers(min_value=0, max_value=2)))

    # the run input: a JSON-object string (or, for the conversation's policy, free text)
    if free_text and draw(st.booleans()):
        message = f"please check {secret(serve=True, keep=True)} for me"
    else:
        message = as_text(structured(serve=True, keep=True))

    def text(*, serve: bool, keep: bool) -> str:
        choices = ["plain", "json"] + (["free"] if free_text else [])
        kind = draw(st.sampled_from(choices), label="text kind")
        if kind == "plain":
            return draw(st.sampled_from(["", "let me look", "done"]))
        if kind == "json":
            return as_text(structured(serve=serve, keep=keep))
        return f"the value is {secret(serve=serve, keep=keep)}."

    def arguments() -> Any:
        choices = ["object", "json_text"] + (["broken", "plain_object"] if free_text else [])
        kind = draw(st.sampled_from(choices), label="arguments kind")
        if kind == "object":
            return structured(serve=True, keep=True)
        if kind == "json_text":
            return as_text(structured(serve=True, keep=True), parsed=True)
        if kind == "broken":  # not JSON: served to the model as the text it was
            return "{not json " + secret(serve=True, keep=True)
        return {"q": "nothing secret"}

    def outcome() -> PlantedOutcome:
        kinds: list[OutcomeKind] = ["dict", "json_text", "text", "raise_dict"]
        if free_text:
            kinds.append("raise_text")
        kind = draw(st.sampled_from(kinds), label="outcome kind")
        if kind == "dict":
            return PlantedOutcome(kind, structured(serve=True, keep=True))
        if kind == "json_text":
            value: Any = structured(serve=True, keep=True)
            if draw(st.booleans()):
                value = [value]
            return PlantedOutcome(kind, as_text(value))
        if kind == "raise_dict":
            return PlantedOutcome(kind, structured(serve=True, keep=True))
        if kind == "raise_text":
            return PlantedOutcome(kind, f"backend refused {secret(serve=True, keep=True)}")
        if free_text and draw(st.booleans()):
            return PlantedOutcome(kind, f"found {secret(serve=True, keep=True)} in the table")
        return PlantedOutcome(kind, "nothing found")

    replies: list[PlantedReply] = []
    outcomes: list[PlantedOutcome] = []
    for _ in range(draw(st.integers(min_value=0, max_value=max_tool_replies), label="rounds")):
        reply_text = text(serve=True, keep=True)
        calls = tuple(
            arguments() for _ in range(draw(st.integers(min_value=1, max_value=2), label="calls"))
        )
        replies.append(PlantedReply(reply_text, calls))
        # a call whose arguments are not JSON never runs the tool: it has no outcome
        outcomes.extend(outcome() for args in calls if not _broken(args))
    fails = draw(st.booleans()) if provider_failure is None else provider_failure
    provider_error: Any = None
    if fails:
        if free_text and draw(st.booleans()):
            provider_error = f"upstream said {secret(serve=False, keep=False)}"
        else:
            provider_error = structured(serve=False, keep=False)
    else:
        replies.append(PlantedReply(text(serve=False, keep=True)))
    return PlantedRun(
        message=message,
        replies=tuple(replies),
        outcomes=tuple(outcomes),
        provider_error=provider_error,
        commit_values=draw(st.sampled_from(["delta", "full"]), label="commit_values"),
        react_mode=draw(st.sampled_from(["dynamic", "classic"]), label="react_mode"),
        secrets=tuple(planted_secrets),
        served=tuple(served),
        kept=tuple(kept),
    )


def build_planted_agent(
    spec: PlantedRun, *, store: Any, redact: RedactionPolicy, **options: Any
) -> tuple[Agent, MockProvider]:
    """A fresh agent playing ``spec`` (its one tool is ``lookup``) and its provider."""
    outcomes = iter(copy.deepcopy(spec.outcomes))

    def lookup(arguments: Any) -> Any:
        outcome = next(outcomes)
        if outcome.kind == "raise_dict":
            raise ValueError(outcome.value)
        if outcome.kind == "raise_text":
            raise RuntimeError(outcome.value)
        return outcome.value

    tool = define_tool(name="lookup", description="looks things up", execute=lookup)
    script = [
        reply(r.text, tool_calls=[tool_call("lookup", copy.deepcopy(a)) for a in r.calls])
        for r in spec.replies
    ]
    position = iter(range(len(script) + 1))

    def respond(request: Mapping[str, Any]) -> LLMResponse:
        index = next(position)
        if index < len(script):
            return script[index]
        raise ProviderDown(copy.deepcopy(spec.provider_error))

    provider = MockProvider(respond=respond)
    agent = Agent(
        provider=provider,
        model="m",
        system="you are careful",
        tools=[tool],
        store=store,
        redact=redact,
        commit_values=spec.commit_values,
        react_mode=spec.react_mode,
        **options,
    )
    return agent, provider


def run_planted(
    agent: Agent, spec: PlantedRun, *, continue_from: str | RunResult | None = None
) -> tuple[str, RunResult | None]:
    """Run the spec's turn: ``(run id, result)``, the result None when the provider failed."""
    if spec.fails:
        try:
            agent.run_sync(spec.message, continue_from=continue_from)
        except ProviderCallError as exc:
            assert exc.run_id is not None
            return exc.run_id, None
        raise AssertionError("the provider failure did not fail the run")
    result = agent.run_sync(spec.message, continue_from=continue_from)
    return result.run_id, result


def joined(first: PlantedRun, second: PlantedRun) -> PlantedRun:
    """One agent's script for two turns: ``first``'s replies and outcomes, then ``second``'s
    (``first`` must not fail; the options are ``first``'s)."""
    assert not first.fails
    return dataclasses.replace(
        first,
        replies=first.replies + second.replies,
        outcomes=first.outcomes + second.outcomes,
        provider_error=second.provider_error,
        secrets=first.secrets + second.secrets,
    )
