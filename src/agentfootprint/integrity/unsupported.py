"""The unsupported-argument check: a call chose a value nothing the run served (choice seam).

A tool that declares ``arguments_from`` says its arguments come from other tools' results, so
each string its calls carry should be something the model was served. The frame a reply was
chosen from is the served request of that model call (:func:`frame_of`): the system pieces,
the user messages and the tool results are ground; the model's own earlier answers are not
(a value re-read out of its prose is the defect this check exists for), and only decide which
of upstream's two messages a finding gets. Values a tool's served schema lists in an ``enum``
were served by the schema. An app may vouch for values the run never served through its
external grounds provider (:func:`read_entries`); each excusal is returned as a ``used``
record, so the record says which source stood between the value and a finding.

Upstream's rules (``src/integrity/unsupported-argument/check.ts``), exactly: only string
leaves, trimmed, of four characters or more; case-insensitive substring of ANY served string.
Upstream states no ceiling sentence for this check; :data:`CEILING` is ours, in its voice,
appended to each message after upstream's template.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final

from agentfootprint.integrity.contracts import Contract
from agentfootprint.integrity.rail import (
    NOT_APPLICABLE,
    Finding,
    Judgement,
    ToolCall,
    clip,
    string_leaves,
)
from agentfootprint.logformat.canonical import has_lone_surrogate
from agentfootprint.logformat.shared_lists import SharedList

__all__ = [
    "CEILING",
    "CHECK",
    "MAX_ENTRIES",
    "MAX_ENTRY_CHARS",
    "MAX_FOLDS",
    "SEAM",
    "Folds",
    "Frame",
    "canary",
    "fold",
    "frame_of",
    "judge_arguments",
    "read_entries",
]

CHECK: Final = "unsupported-argument"
SEAM: Final = "choice"
#: ours, not upstream's (upstream states this limit only in its README's prose)
CEILING: Final = (
    "This catches fabrication and self-reference, never misattribution — a value served "
    "anywhere in the frame passes, even when the model took it from the wrong place."
)
#: below this, substring matching is noise in both directions (upstream's MIN_CHECKED_LENGTH)
MIN_CHECKED_LENGTH: Final = 4
#: the deepest a tool's schema is walked for ``enum`` declarations (upstream's)
MAX_SCHEMA_DEPTH: Final = 8
#: the most external entries one answer contributes, and the longest value or source each
#: may carry: far past a selection a person makes, small enough to record
MAX_ENTRIES: Final = 1000
MAX_ENTRY_CHARS: Final = 4096
#: the most texts (and schemas) one :class:`Folds` keeps before it starts again
MAX_FOLDS: Final = 100_000


class Folds:
    """The folded text of served pieces and messages, by identity: a conversation's history
    is served again at every call, and each text is folded once (the cache holds the
    objects, so an id is never reused while it is kept). A text is kept by the string
    itself (a request rebuilds its system pieces at every call around the same strings),
    any other content by the piece or message that holds it. Kept for a conversation across
    its runs (:func:`~agentfootprint.integrity.reading.kept_folds`), emptied when it holds
    :data:`MAX_FOLDS` texts (served texts that no history keeps, a system piece made anew at
    every call, cannot grow it without end)."""

    def __init__(self) -> None:
        self._texts: dict[int, tuple[Any, str]] = {}
        self._enums: dict[int, tuple[Any, frozenset[str]]] = {}

    def text(self, holder: Any, content: Any) -> str:
        key = content if type(content) is str else holder
        kept = self._texts.get(id(key))
        if kept is not None and kept[0] is key:
            return kept[1]
        folded = fold(_text(content))
        if len(self._texts) >= MAX_FOLDS:
            self._texts = {}
        self._texts[id(key)] = (key, folded)
        return folded

    def enums(self, schema: Any) -> frozenset[str]:
        kept = self._enums.get(id(schema))
        if kept is not None and kept[0] is schema:
            return kept[1]
        values = _enum_values(schema)
        if len(self._enums) >= MAX_FOLDS:
            self._enums = {}
        self._enums[id(schema)] = (schema, values)
        return values


class Frame:
    """What the model chose one reply's calls from (:func:`frame_of`): the strings the run
    served (``grounded``: system pieces, user messages, tool results), its own earlier answers
    (``assistant``: never ground) and the ``enum`` values of each served tool's schema, all
    case-folded (:func:`fold`). Read lazily, newest message first: a value found in a recent
    result costs what was read to find it, not the whole conversation."""

    __slots__ = ("_assistant", "_folds", "_grounded", "_messages", "_system", "_tools")

    def __init__(self, served: Mapping[str, Any] | None = None, folds: Folds | None = None):
        served = served if type(served) is dict or isinstance(served, Mapping) else {}
        self._folds = folds if folds is not None else Folds()
        self._system = _items(served.get("system"))
        self._messages = _items(served.get("messages"))
        self._tools = _items(served.get("tools"))
        self._grounded: tuple[str, ...] | None = None
        self._assistant: tuple[str, ...] | None = None

    def _served(self, assistant: bool) -> Iterator[str]:
        """The folded strings of one side: system pieces first, then messages newest first
        (the ground), or the assistant messages newest first."""
        if not assistant:
            yield from self._pieces()
        yield from self._said(assistant)

    def _pieces(self) -> Iterator[str]:
        """The system pieces' folded texts, in order."""
        for piece in self._system:
            if type(piece) is dict or isinstance(piece, Mapping):
                yield self._folds.text(piece, piece.get("text"))
            elif isinstance(piece, str):
                yield fold(piece)

    def _side(self, assistant: bool) -> Iterator[Mapping[str, Any]]:
        """The messages of one side, newest first: the model's own (``assistant``) or every
        other."""
        for message in reversed(self._messages):
            if (type(message) is dict or isinstance(message, Mapping)) and (
                message.get("role") == "assistant"
            ) is assistant:
                yield message

    def _said(self, assistant: bool) -> Iterator[str]:
        """The folded texts of one side's messages, newest first."""
        text = self._folds.text
        for message in self._side(assistant):
            yield text(message, message.get("content"))

    @property
    def grounded(self) -> tuple[str, ...]:
        """Every served string, in the request's order."""
        if self._grounded is None:
            ground = list(self._served(False))
            system = sum(1 for p in self._system if isinstance(p, Mapping | str))
            self._grounded = (*ground[:system], *reversed(ground[system:]))
        return self._grounded

    @property
    def assistant(self) -> tuple[str, ...]:
        """The model's own earlier answers, in the request's order."""
        if self._assistant is None:
            self._assistant = tuple(reversed(list(self._served(True))))
        return self._assistant

    def enums(self, tool: str) -> frozenset[str]:
        """The values ``tool``'s served schema lists in an ``enum``, anywhere (folded;
        empty for a tool not served)."""
        values: frozenset[str] = frozenset()
        for served in self._tools:
            if (type(served) is dict or isinstance(served, Mapping)) and served.get("name") == tool:
                values |= self._folds.enums(served.get("input_schema"))
        return values

    def serves(self, needle: str) -> bool:
        """Whether a served string contains ``needle`` (folded): the messages first, newest
        first (a value is mostly taken from the latest result), then the system pieces.

        A folded needle found in a message's text as served is in its folded text too (case
        folding maps each character on its own, and leaves folded text as it is), so such a
        message is not folded to find it; a text that does not hold it as served is looked in
        folded, and a needle that is not folded only there."""
        raw = fold(needle) == needle
        text = self._folds.text
        for message in self._side(False):
            content = message.get("content")
            if raw and type(content) is str and needle in content:
                return True
            if needle in text(message, content):
                return True
        return any(needle in folded for folded in self._pieces())

    def wrote(self, needle: str) -> bool:
        """Whether one of the model's earlier answers contains ``needle`` (folded)."""
        return any(needle in text for text in self._served(True))


def fold(text: str) -> str:
    """``text`` as the check compares it, case-insensitively: case-folded (upstream lowers;
    ``str.lower`` is not the same for a value alone and inside a text, a final sigma, so a
    served value could file a finding; ``casefold`` is, and agrees with it on ASCII)."""
    return text.casefold()


def _items(value: Any) -> Sequence[Any]:
    """A served list (a plain list, or the history held as versions) as a sequence."""
    if type(value) is list or type(value) is SharedList:  # the request's own (the common case)
        return value
    if isinstance(value, Sequence) and not isinstance(value, str | bytes | bytearray):
        return value
    return ()


def _text(content: Any) -> str:
    """The text a served content gives: a string as it is, a list of parts their text
    (``{"text": ...}`` parts and strings; another part as its JSON), any other JSON value as
    its JSON text (a value inside it was served too); nothing for none."""
    if isinstance(content, str):
        return content
    if content is None:
        return ""
    if isinstance(content, list | tuple):
        parts: list[str] = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, Mapping) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            else:
                parts.append(_json_text(part))
        return "\n".join(parts)
    return _json_text(content)


def _json_text(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        return ""


def _enum_values(schema: Any) -> frozenset[str]:
    """Every string an ``enum`` array declares anywhere in ``schema``, folded (upstream's
    ``declaredEnumValuesOf``: flat, walked to depth 8)."""
    values: set[str] = set()

    def walk(node: Any, depth: int) -> None:
        if depth > MAX_SCHEMA_DEPTH or type(node) is str:  # a string holds no enum
            return
        if isinstance(node, list | tuple):
            for item in node:
                walk(item, depth + 1)
        elif isinstance(node, Mapping):
            declared = node.get("enum")
            if isinstance(declared, list | tuple):
                values.update(fold(v) for v in declared if isinstance(v, str))
            for member in node.values():
                walk(member, depth + 1)

    walk(schema, 0)
    return frozenset(values)


def frame_of(served: Mapping[str, Any], folds: Folds | None = None) -> Frame:
    """The frame of one served request (``build_request``'s dict: ``system`` pieces,
    ``messages``, ``tools``); anything malformed in it grounds nothing, never raises.
    ``folds``: the folded texts kept from the run's earlier calls."""
    return Frame(served, folds)


def read_entries(answer: Any) -> tuple[dict[str, str], ...]:
    """An external grounds provider's answer as the check reads it: the ``{"value",
    "source"}`` entries whose value and source are non-empty strings after trimming (kept as
    given), at most :data:`MAX_ENTRIES`, each at most :data:`MAX_ENTRY_CHARS` long and text
    the log can hold (no lone surrogate: the entries are recorded); anything else grounds
    nothing (garbage gives ``()``, never an error)."""
    if not isinstance(answer, list | tuple):
        return ()
    out: list[dict[str, str]] = []
    for entry in answer:
        if len(out) >= MAX_ENTRIES:
            break
        if not isinstance(entry, Mapping):
            continue
        value, source = entry.get("value"), entry.get("source")
        if (
            isinstance(value, str)
            and isinstance(source, str)
            and value.strip()
            and source.strip()
            and len(value) <= MAX_ENTRY_CHARS
            and len(source) <= MAX_ENTRY_CHARS
            and not has_lone_surrogate(value)
            and not has_lone_surrogate(source)
        ):
            out.append({"value": value, "source": source})
    return tuple(out)


def _message(tool: str, path: str, quoted: str, refetch: str, self_reference: bool) -> str:
    if self_reference:
        said = (
            f"'{tool}' was called with {path} = \"{quoted}\", and the only place that value "
            "appears in the frame the model chose from is the model\u2019s own earlier answer. "
            "Rendered text is not evidence — a value re-read out of prose can be a fragment of "
            f"something else entirely. To ground it, {refetch}. Nothing here blocked the call."
        )
    else:
        said = (
            f"'{tool}' was called with {path} = \"{quoted}\", and that value appears nowhere in "
            "the frame the model chose from — not in the instructions, not in any message from "
            "the user, not in any tool result. Nothing served it, so nothing in this run can say "
            f"what it refers to. To ground it, {refetch}. Nothing here blocked the call."
        )
    return f"{said} {CEILING}"


def _external(entries: Any) -> list[tuple[str, str]]:
    """The usable entries, folded (read again: a crafted entry grounds nothing)."""
    return [(fold(e["value"]), e["source"]) for e in read_entries(entries)]


def judge_arguments(
    contract: Contract,
    call: ToolCall,
    frame: Frame,
    entries: Sequence[Mapping[str, str]] = (),
) -> tuple[Judgement, list[dict[str, str]]]:
    """One armed call's string arguments against the frame it was chosen from, and the
    ``used`` records of the external entries that excused a value (``{"tool",
    "tool_call_id", "path", "value", "source"}``, the value as the model sent it).

    ``not_applicable`` for a contract that declares no ``arguments_from`` (the check is
    armed by it) and for arguments that are not JSON (nothing to read); otherwise
    ``checked``, with one finding per string leaf nothing grounds."""
    if not contract.arguments_from or call.arguments is None:
        return NOT_APPLICABLE, []
    declared: frozenset[str] | None = None  # the schema's enums: read for a value no text serves
    external: list[tuple[str, str]] | None = None  # read when a value first needs it
    findings: list[Finding] = []
    used: list[dict[str, str]] = []
    for path, leaf in string_leaves(call.arguments):
        value = leaf.strip()
        if len(value) < MIN_CHECKED_LENGTH:
            continue
        needle = fold(value)
        if frame.serves(needle):
            continue
        if declared is None:
            declared = frame.enums(call.tool)
        if needle in declared:
            continue
        if external is None:
            external = _external(entries)
        source = next((s for folded, s in external if needle in folded), None)
        if source is not None:
            used.append(
                {
                    "tool": call.tool,
                    "tool_call_id": call.tool_call_id,
                    "path": path,
                    "value": leaf,
                    "source": source,
                }
            )
            continue
        self_reference = frame.wrote(needle)
        quoted = clip(value)
        refetch = f"call {' or '.join(contract.arguments_from)} again and use a value it returns"
        findings.append(
            Finding(
                check=CHECK,
                kind=CHECK,
                seam=SEAM,
                subjects=(("tool", call.tool),),
                witnesses=(call.tool_call_id,),
                message=_message(call.tool, path, quoted, refetch, self_reference),
                predicate=path,
                facts={
                    "path": path,
                    "value": quoted,
                    "self_reference": self_reference,
                    "served": len(frame.grounded),
                    "assistant": len(frame.assistant),
                },
            )
        )
    return Judgement.found(*findings), used


def canary() -> Judgement:
    """The check run on upstream's synthetic defect: a fabricated id against a frame that
    served no identifiers; its findings marked ``synthetic``."""
    contract = Contract(tool="canary_tool", arguments_from=("canary_ground",))
    call = ToolCall(
        tool="canary_tool",
        tool_call_id="canary",
        arguments={"id": "canary-fabricated-id"},
        content=None,
        is_error=False,
        turn=0,
        history_index=0,
    )
    frame = frame_of(
        {"system": [{"source": "canary", "text": "canary: this frame served no identifiers"}]}
    )
    judgement, _ = judge_arguments(contract, call, frame)
    return Judgement.found(*(dataclasses.replace(f, synthetic=True) for f in judgement.findings))
