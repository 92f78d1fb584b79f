"""``ontology`` and ``ontology_ask``: a declared domain map served as one constant system piece.

A map, not a door: :func:`define_ontology` validates a spec saying what each term means,
which source holds it and which of the agent's tools reads it there, and how terms relate.
Nothing is fetched through it. The agent serves the map on every model call as ONE system
piece ``{"source": "ontology", "text": ...}`` composed from the spec (:func:`ontology_text`),
after the ``system`` pieces (the seed joins it after a recovery piece and before a findings
piece; neither exists here, so it is the last piece but the instruction). The piece lives in
``system_pieces`` like any other, so each receipt covers it and the verifier rebuilds it; a
changed map replays as a ``system`` divergence at call 0. ``ontology_ask="use-the-map"`` (the
default with a map) adds the instruction piece ``{"source": "ontology-instruction", "text":
ONTOLOGY_INSTRUCTION}``; ``"none"`` adds none. Without ``ontology`` nothing changes.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from agentfootprint.errors import UsageError
from agentfootprint.features.base import (
    MISSING,
    Feature,
    HookContext,
    Options,
    OptionSpec,
    loggable,
    refuse,
)
from agentfootprint.logformat.canonical import canon
from agentfootprint.logformat.hashing import hexdigest
from agentfootprint.runtime.events import AgentEvent

OPTION = "ontology"
ASK = "ontology_ask"
ASKS = ("use-the-map", "none")
#: the instruction piece's text (its version is in its first line)
ONTOLOGY_INSTRUCTION = (
    "[ontology instruction v1] The domain map above says what each term means, which source "
    "holds it and which tool reads it there. Use the map's terms and meanings; read a term "
    "through the tool the map names for it; for a term the map lists as held by no source, "
    "say that it is not available here rather than guessing."
)
_TOP = {"name", "version", "nodes", "sources", "relations"}
_NODE = {"meaning", "unit", "aliases", "sources"}
_HELD = {"source", "via", "coverage"}
_RELATION = {"from", "relation", "to"}


@dataclass(frozen=True, slots=True)
class Ontology:
    """A validated, detached domain map (what :func:`define_ontology` returns)."""

    name: str
    version: str
    spec: Mapping[str, Any]  #: the spec, copied and normalised (aliases, sources: [] default)
    fingerprint: str  #: ``H("ontology", canon(spec))`` of that normalised spec, hex
    #: the piece's text, composed once from the spec when it was defined: what every run
    #: serves, whatever is done to ``spec`` afterwards (an agent refuses a map whose spec no
    #: longer has its fingerprint)
    text: str = field(default="", repr=False)

    def vias(self) -> list[str]:
        """The tool names the map's nodes read through, sorted and unique."""
        return sorted(
            {held["via"] for node in self.spec["nodes"].values() for held in node["sources"]}
        )


def _bad(message: str) -> UsageError:
    return refuse(OPTION, f"define_ontology(spec): {message}")


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise _bad(f"{where} must be a non-empty string, got {value!r}")
    return value


def _keys(value: Any, allowed: set[str], where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise _bad(f"{where} must be a mapping, got {type(value).__name__}")
    unknown = sorted(set(value) - allowed)
    if unknown:
        raise _bad(f"{where} has unknown keys {unknown}; allowed: {sorted(allowed)}")
    return value


def define_ontology(spec: Mapping[str, Any]) -> Ontology:
    """Validate ``spec`` (see docs/ontology.md for its shape), detach and fingerprint it.

    Refused (``UsageError(option="ontology")``): unknown keys, a node without a meaning, a
    source a node names but ``sources`` does not declare, a relation between undeclared terms.
    """
    top = _keys(spec, _TOP, "the spec")
    name, version = _text(top.get("name"), "name"), _text(top.get("version"), "version")
    sources = top.get("sources", {})
    if not isinstance(sources, Mapping):
        raise _bad("sources must be a mapping of source name to its description")
    for source, description in sources.items():
        _text(source, "a source name")
        _text(description, f"source {source!r}'s description")
    nodes = top.get("nodes")
    if not isinstance(nodes, Mapping) or not nodes:
        raise _bad("nodes must be a non-empty mapping of term to its node")
    out_nodes: dict[str, Any] = {}
    for term, raw in nodes.items():
        node = _keys(raw, _NODE, f"node {_text(term, 'a term')!r}")
        entry: dict[str, Any] = {"meaning": _text(node.get("meaning"), f"{term!r}'s meaning")}
        if "unit" in node:
            entry["unit"] = _text(node["unit"], f"{term!r}'s unit")
        aliases = node.get("aliases", [])
        if not isinstance(aliases, list):
            raise _bad(f"{term!r}'s aliases must be a list of strings")
        entry["aliases"] = [_text(a, f"an alias of {term!r}") for a in aliases]
        held_list = node.get("sources", [])
        if not isinstance(held_list, list):
            raise _bad(f"{term!r}'s sources must be a list")
        entry["sources"] = []
        for held_raw in held_list:
            held = _keys(held_raw, _HELD, f"a source of {term!r}")
            source = _text(held.get("source"), f"a source of {term!r}")
            if source not in sources:
                raise _bad(f"{term!r} is held by source {source!r}, which sources does not declare")
            item = {"source": source, "via": _text(held.get("via"), f"{term!r}'s via")}
            if "coverage" in held:
                item["coverage"] = _text(held["coverage"], f"{term!r}'s coverage")
            entry["sources"].append(item)
        out_nodes[term] = entry
    relations = top.get("relations", [])
    if not isinstance(relations, list):
        raise _bad("relations must be a list")
    for raw in relations:
        rel = _keys(raw, _RELATION, "a relation")
        for end in ("from", "to"):
            if _text(rel.get(end), f"a relation's {end!r}") not in out_nodes:
                raise _bad(f"a relation names {rel[end]!r}, which is not a node")
        _text(rel.get("relation"), "a relation's 'relation'")
    detached = {
        "name": name,
        "version": version,
        "nodes": out_nodes,
        "sources": dict(sources),
        "relations": copy.deepcopy(list(relations)),
    }
    loggable(OPTION, detached)
    made = Ontology(
        name=name,
        version=version,
        spec=detached,
        fingerprint=hexdigest("ontology", canon(detached)),
    )
    return dataclasses.replace(made, text=ontology_text(made))


def ontology_text(ontology: Ontology) -> str:
    """The piece's text: a deterministic composition of the map (same map, same bytes)."""
    spec = ontology.spec
    lines = [
        f"Domain map {ontology.name!r} version {ontology.version!r}. This is quoted data: it "
        "says what terms mean, where each is held and which tool reads it; it is not an "
        "instruction and nothing is fetched through it.",
        "",
        "Terms:",
    ]
    for term, node in spec["nodes"].items():
        extra = f" (unit: {node['unit']})" if "unit" in node else ""
        aliases = f"; also called {', '.join(node['aliases'])}" if node["aliases"] else ""
        lines.append(f"- {term}{extra}: {node['meaning']}{aliases}")
    if spec["sources"]:
        lines += ["", "Sources:"]
        lines += [f"- {name}: {text}" for name, text in spec["sources"].items()]
    held = [(t, h) for t, node in spec["nodes"].items() for h in node["sources"]]
    if held:
        lines += ["", "Where each term is held and which tool reads it:"]
        for term, h in held:
            coverage = f" (coverage: {h['coverage']})" if "coverage" in h else ""
            lines.append(f"- {term}: in {h['source']}, read by tool {h['via']}{coverage}")
    if spec["relations"]:
        lines += ["", "Relations:"]
        lines += [f"- {r['from']} {r['relation']} {r['to']}" for r in spec["relations"]]
    unheld = [t for t, node in spec["nodes"].items() if not node["sources"]]
    if unheld:
        lines += ["", "Known terms held by no source here: " + ", ".join(unheld)]
    return "\n".join(lines)


def ontology_pieces(options: Mapping[str, Any]) -> list[dict[str, str]]:
    """The system pieces the resolved options add after the ``system`` pieces (none without
    a map)."""
    ontology = options.get(OPTION)
    if not isinstance(ontology, Ontology):
        return []
    pieces = [{"source": "ontology", "text": ontology.text}]
    if options.get(ASK) == "use-the-map":
        pieces.append({"source": "ontology-instruction", "text": ONTOLOGY_INSTRUCTION})
    return pieces


@dataclass(frozen=True, kw_only=True)
class OntologyServed(AgentEvent):
    """The map was served on a model call (identities and counts only; listener-only: the
    receipt already proves the piece was served)."""

    kind: ClassVar[str] = "agentfootprint.ontology.served"
    call: int
    name: str
    version: str
    fingerprint: str
    nodes: int
    sources: int
    relations: int
    instruction: bool


def _ontology(value: Any, given: Mapping[str, Any]) -> Ontology | None:
    if value is MISSING or value is None:
        return None
    if not isinstance(value, Ontology):
        raise refuse(OPTION, f"must be what af.define_ontology(spec) returned, got {value!r}")
    if hexdigest("ontology", canon(value.spec)) != value.fingerprint:
        raise refuse(
            OPTION,
            f"ontology {value.name!r} was changed after define_ontology made it (its spec no "
            "longer has its fingerprint): define the changed map again",
        )
    names = {getattr(tool, "name", None) for tool in given.get("tools") or ()}
    for via in value.vias():
        if via not in names:
            raise refuse(
                OPTION,
                f"ontology {value.name!r} names tool {via!r} as a node's via, and the agent "
                "has no tool of that name: add the tool or correct the map",
            )
    return value


def _ask(value: Any, given: Mapping[str, Any]) -> str | None:
    has_map = given.get(OPTION) is not None
    if value is MISSING or value is None:
        return "use-the-map" if has_map else None
    if not has_map:
        raise refuse(ASK, "is meaningless without ontology=af.define_ontology(...): give both")
    if value not in ASKS:
        raise refuse(ASK, f"must be one of {list(ASKS)}, got {value!r}")
    return str(value)


def _record(value: Any) -> Any:
    if not isinstance(value, Ontology):
        return None
    return {"name": value.name, "version": value.version, "fingerprint": value.fingerprint}


class _Ontology(Feature[Options]):
    def system_pieces(
        self, ctx: HookContext[Options], pieces: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        return pieces + ontology_pieces(ctx.options)

    async def request_served(
        self, ctx: HookContext[Options], served: Mapping[str, Any]
    ) -> Mapping[str, Any]:
        ontology = ctx.options.get(OPTION)
        if isinstance(ontology, Ontology) and ctx.listens(OntologyServed.kind):
            spec = ontology.spec
            await ctx.emit(
                OntologyServed(
                    run_id=ctx.run_id,
                    call=ctx.calls,
                    name=ontology.name,
                    version=ontology.version,
                    fingerprint=ontology.fingerprint,
                    nodes=len(spec["nodes"]),
                    sources=len(spec["sources"]),
                    relations=len(spec["relations"]),
                    instruction=ctx.options.get(ASK) == "use-the-map",
                )
            )
        return {}


FEATURE = _Ontology(
    name="ontology",
    summary="a declared domain map served as a constant system piece",
    order=145,
    options=(
        OptionSpec(
            name=OPTION,
            seed="ontology",
            check=_ontology,
            recorded=True,
            record=_record,
            summary="the domain map served as a system piece",
        ),
        OptionSpec(
            name=ASK,
            seed="ontologyAsk",
            check=_ask,
            recorded=True,
            summary="the instruction piece with the map",
        ),
    ),
    events=(OntologyServed,),
    active=lambda options: options.get(OPTION) is not None,
)
