"""A function's docstring read as a tool's description and its arguments' descriptions.

Three common layouts are read: Google (``Args:`` with ``name (type): text`` entries), reST
fields (``:param name: text``, ``:param str name: text``) and NumPy (``Parameters`` over a
row of dashes, ``name : type`` with the text indented below). The description is the first
paragraph, its lines joined by spaces: what a model needs to pick the tool, never the notes
a longer docstring keeps for the code's readers (pass ``description=`` for more). Parsing is
by lines and regular expressions only, so the same docstring gives the same text on every
machine.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field

__all__ = ["Docstring", "parse_docstring"]

#: Google section headers: the description stops at any of them
_GOOGLE_SECTIONS = {
    "args",
    "arguments",
    "attributes",
    "example",
    "examples",
    "keyword args",
    "keyword arguments",
    "methods",
    "note",
    "notes",
    "other parameters",
    "parameters",
    "params",
    "raises",
    "references",
    "return",
    "returns",
    "see also",
    "todo",
    "warning",
    "warnings",
    "warns",
    "yield",
    "yields",
}
#: the Google sections whose entries are arguments
_GOOGLE_ARGS = {
    "args",
    "arguments",
    "keyword args",
    "keyword arguments",
    "other parameters",
    "parameters",
    "params",
}
_GOOGLE_HEADER = re.compile(r"^([A-Za-z][A-Za-z ]*):\s*$")
_GOOGLE_ENTRY = re.compile(r"^(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:(?:\s+(.*))?$")
_REST_FIELD = re.compile(r"^:(\w+)(?:\s+([^:]*?))?:(?:\s+(.*))?$")
_REST_PARAM = {"param", "parameter", "arg", "argument", "key", "keyword"}
_NUMPY_RULE = re.compile(r"^-{3,}\s*$")
_NUMPY_ARGS = {"parameters", "other parameters", "keyword arguments"}
_NUMPY_ENTRY = re.compile(r"^(\*{0,2}\w+)\s*(?::.*)?$")


@dataclass(frozen=True, slots=True)
class Docstring:
    """What a docstring says: the description, and each documented argument's text."""

    description: str = ""
    arguments: dict[str, str] = field(default_factory=dict)


def parse_docstring(doc: str | None) -> Docstring:
    """Read ``doc`` (a raw ``__doc__``; None reads as empty)."""
    if not doc:
        return Docstring()
    lines = inspect.cleandoc(doc).splitlines()
    arguments: dict[str, str] = {}
    arguments.update(_google(lines))
    arguments.update(_rest(lines))
    arguments.update(_numpy(lines))
    return Docstring(description=_description(lines), arguments=arguments)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _starts_section(lines: list[str], i: int) -> bool:
    line = lines[i].strip()
    header = _GOOGLE_HEADER.match(line)
    if header and header.group(1).strip().lower() in _GOOGLE_SECTIONS:
        return True
    if _REST_FIELD.match(line):
        return True
    return i + 1 < len(lines) and bool(line) and bool(_NUMPY_RULE.match(lines[i + 1].strip()))


def _description(lines: list[str]) -> str:
    """The first paragraph, up to a blank line or the first section."""
    taken: list[str] = []
    for i, line in enumerate(lines):
        if not line.strip():
            if taken:
                break
            continue
        if _starts_section(lines, i):
            break
        taken.append(line.strip())
    return " ".join(taken)


def _entries(lines: list[str], start: int, entry: re.Pattern[str], inline: bool) -> dict[str, str]:
    """The entries of a section whose first line is ``lines[start]``: each line at the
    section's own indentation that matches ``entry`` opens one, deeper lines continue it.
    ``inline``: the entry's own line carries text (Google), else only its name (NumPy)."""
    found: dict[str, list[str]] = {}
    base: int | None = None
    current: str | None = None
    for line in lines[start:]:
        if not line.strip():
            continue
        depth = _indent(line)
        if base is None:
            base = depth
        if depth < base:
            break
        matched = entry.match(line.strip()) if depth == base else None
        if matched is not None:
            current = matched.group(1).lstrip("*")
            text = matched.group(2) if inline else None
            found[current] = [text.strip()] if text else []
        elif depth > base and current is not None:
            found[current].append(line.strip())
        else:
            break
    return {name: " ".join(text) for name, text in found.items()}


def _google(lines: list[str]) -> dict[str, str]:
    arguments: dict[str, str] = {}
    for i, line in enumerate(lines):
        header = _GOOGLE_HEADER.match(line.strip())
        if header and header.group(1).strip().lower() in _GOOGLE_ARGS:
            body = _section_body(lines, i + 1, _indent(line))
            arguments.update(_entries(body, 0, _GOOGLE_ENTRY, inline=True))
    return arguments


def _section_body(lines: list[str], start: int, header_indent: int) -> list[str]:
    """The lines under a header: until a non-blank line no deeper than the header."""
    body: list[str] = []
    for line in lines[start:]:
        if line.strip() and _indent(line) <= header_indent:
            break
        body.append(line)
    return body


def _rest(lines: list[str]) -> dict[str, str]:
    arguments: dict[str, str] = {}
    current: str | None = None
    depth = 0
    for line in lines:
        field_line = _REST_FIELD.match(line.strip())
        if field_line is not None:
            current = None
            kind, spec, text = field_line.groups()
            if kind in _REST_PARAM and spec:
                current = spec.split()[-1].lstrip("*")
                depth = _indent(line)
                arguments[current] = (text or "").strip()
        elif current is not None and line.strip() and _indent(line) > depth:
            arguments[current] = f"{arguments[current]} {line.strip()}".strip()
        else:
            current = None
    return arguments


def _numpy(lines: list[str]) -> dict[str, str]:
    arguments: dict[str, str] = {}
    for i in range(len(lines) - 1):
        if lines[i].strip().lower() in _NUMPY_ARGS and _NUMPY_RULE.match(lines[i + 1].strip()):
            body: list[str] = []
            for j in range(i + 2, len(lines)):
                if j + 1 < len(lines) and _NUMPY_RULE.match(lines[j + 1].strip()):
                    break  # the next section's header
                body.append(lines[j])
            arguments.update(_entries(body, 0, _NUMPY_ENTRY, inline=False))
    return arguments
