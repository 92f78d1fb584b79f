"""What a tool declares for the integrity checks, and its one committed form.

``arguments_from`` names the tools whose results ground this tool's arguments (the
unsupported-argument and empty-lookup checks read it); ``result_columns`` what its rows
contain (``check_column_types``); ``period`` the argument that sets the period its results
cover (``results_layer``). None of it is served to the model, so a run that arms a check
commits the declarations once as the state key ``tool_contracts`` (``{tool: contract}``):
every check is then a pure function of the log. :func:`contract_of` checks a declaration
when the tool is defined; :func:`read_contracts` reads the committed form back, refusing
nothing (a malformed entry judges as no contract: a crafted log cannot make a check raise).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agentfootprint.errors import UsageError

__all__ = [
    "COLUMN_TYPES",
    "Column",
    "Contract",
    "committed",
    "contract_of",
    "read_contracts",
]

#: the types a declared column may take (open: an unlisted column is never judged)
COLUMN_TYPES = ("number", "string", "boolean", "date")
#: the bounds of a declaration: far past real use, small enough to commit
MAX_SOURCES = 64
MAX_COLUMNS = 256
_NAME_MAX = 128


@dataclass(frozen=True, kw_only=True, slots=True)
class Column:
    """One declared column: its type and whether null is allowed."""

    type: str
    nullable: bool = False

    def json(self) -> Any:
        return {"nullable": True, "type": self.type} if self.nullable else self.type


@dataclass(frozen=True, kw_only=True, slots=True)
class Contract:
    """A tool's declarations for the checks (never served)."""

    tool: str
    arguments_from: tuple[str, ...] = ()
    result_columns: tuple[tuple[str, Column], ...] = ()
    period: str | None = None

    @property
    def columns(self) -> dict[str, Column]:
        return dict(self.result_columns)

    def json(self) -> dict[str, Any]:
        """The committed form (members present only when declared)."""
        out: dict[str, Any] = {}
        if self.arguments_from:
            out["arguments_from"] = list(self.arguments_from)
        if self.result_columns:
            out["result_columns"] = {name: c.json() for name, c in self.result_columns}
        if self.period is not None:
            out["period"] = self.period
        return out


def _refuse(tool: str, message: str) -> UsageError:
    return UsageError(f"tool {tool!r}: {message}", option="tools")


def committed(contracts: Mapping[str, Contract]) -> dict[str, Any]:
    """``tool_contracts`` as committed: each tool's declarations, by tool name, sorted."""
    return {name: c.json() for name, c in sorted(contracts.items())}


def contract_of(
    tool: str,
    schema: Mapping[str, Any],
    *,
    arguments_from: Sequence[str] | None = None,
    result_columns: Mapping[str, Any] | None = None,
    period: str | None = None,
) -> Contract | None:
    """The declarations checked at definition (None: the tool declares none of them)."""
    if arguments_from is None and result_columns is None and period is None:
        return None
    sources: tuple[str, ...] = ()
    if arguments_from is not None:
        if isinstance(arguments_from, str | bytes) or not isinstance(arguments_from, Sequence):
            raise _refuse(
                tool,
                "arguments_from must be a list of tool names (the tools whose results ground "
                f"this tool's arguments), got {arguments_from!r}",
            )
        if not arguments_from or len(arguments_from) > MAX_SOURCES:
            raise _refuse(tool, f"arguments_from must name 1 to {MAX_SOURCES} tools")
        for source in arguments_from:
            if not isinstance(source, str) or not 0 < len(source) <= _NAME_MAX:
                raise _refuse(tool, f"arguments_from names {source!r}, which is not a tool name")
        if len(set(arguments_from)) != len(arguments_from):
            raise _refuse(tool, "arguments_from names a tool twice")
        sources = tuple(arguments_from)
    columns: tuple[tuple[str, Column], ...] = ()
    if result_columns is not None:
        columns = _columns(tool, result_columns)
    if period is not None:
        properties = schema.get("properties")
        if (
            not isinstance(period, str)
            or not isinstance(properties, Mapping)
            or (period not in properties)
        ):
            raise _refuse(
                tool,
                f"period must name a property of its input schema (the argument that sets "
                f"the period its results cover), got {period!r}",
            )
    return Contract(tool=tool, arguments_from=sources, result_columns=columns, period=period)


def _columns(tool: str, declared: Any) -> tuple[tuple[str, Column], ...]:
    if not isinstance(declared, Mapping) or not declared or len(declared) > MAX_COLUMNS:
        raise _refuse(
            tool,
            f"result_columns must map 1 to {MAX_COLUMNS} column names to a type "
            f"{COLUMN_TYPES!r} or {{'type': ..., 'nullable': True}}, got {declared!r}",
        )
    out: list[tuple[str, Column]] = []
    for name, spec in declared.items():
        if not isinstance(name, str) or not 0 < len(name) <= _NAME_MAX:
            raise _refuse(tool, f"result_columns names {name!r}, which is not a column name")
        column = _column(spec)
        if column is None:
            raise _refuse(
                tool,
                f"result_columns[{name!r}] must be one of {COLUMN_TYPES!r} or "
                f"{{'type': one of them, 'nullable': True or False}}, got {spec!r}",
            )
        out.append((name, column))
    return tuple(sorted(out))


def _column(spec: Any) -> Column | None:
    if isinstance(spec, str):
        return Column(type=spec) if spec in COLUMN_TYPES else None
    if isinstance(spec, Mapping) and set(spec) <= {"type", "nullable"}:
        kind, nullable = spec.get("type"), spec.get("nullable", False)
        if kind in COLUMN_TYPES and isinstance(nullable, bool):
            return Column(type=kind, nullable=nullable)
    return None


def read_contracts(value: Any) -> dict[str, Contract]:
    """The committed ``tool_contracts`` read back; an entry that is not a well-formed
    declaration is left out (it judges as a tool that declared nothing)."""
    out: dict[str, Contract] = {}
    if not isinstance(value, Mapping):
        return out
    for tool, entry in value.items():
        if not isinstance(tool, str) or not isinstance(entry, Mapping):
            continue
        sources = entry.get("arguments_from", [])
        if not isinstance(sources, list) or not all(isinstance(s, str) for s in sources):
            continue
        declared = entry.get("result_columns", {})
        if not isinstance(declared, Mapping):
            continue
        columns = [(n, _column(spec)) for n, spec in declared.items()]
        if any(not isinstance(n, str) or c is None for n, c in columns):
            continue
        period = entry.get("period")
        if period is not None and not isinstance(period, str):
            continue
        out[tool] = Contract(
            tool=tool,
            arguments_from=tuple(sources),
            result_columns=tuple(sorted((n, c) for n, c in columns if c is not None)),
            period=period,
        )
    return out
