"""The domain map (issue 31): what serving an ontology of 200 terms costs per model call.

The suite's conversation (``common.Conversation``, 4 tool-call iterations per turn) recorded
into a ``MemoryStore`` without ``ontology`` and with a 200-term map (each term with a meaning,
a unit, two aliases, a source read by the conversation's tool, one relation to the next
term), with ``ontology_ask`` at its default. Variants alternate in every round; the figure is
the fastest round's ms per model call, side by side, with the map piece's size. The piece is
constant for a run: it is built and committed once per run and hashed on each receipt.

Usage::

    python bench/ontology.py            # N = 200, 5 rounds
    python bench/ontology.py --quick    # N = 40, 3 rounds
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import Conversation, environment, print_environment, run_agent_conversation

import agentfootprint as af
from agentfootprint.features.ontology import ontology_text

logging.disable(logging.WARNING)

TERMS = 200


def big_map(tool: str, terms: int = TERMS) -> af.Ontology:
    """A map of ``terms`` terms, each read by ``tool`` from one source."""
    nodes = {
        f"term{i:03d}": {
            "meaning": f"the measure number {i} of the domain, as the warehouse defines it",
            "unit": "USD",
            "aliases": [f"t{i}", f"measure {i}"],
            "sources": [{"source": "warehouse", "via": tool, "coverage": "2020-"}],
        }
        for i in range(terms)
    }
    relations = [
        {"from": f"term{i:03d}", "relation": "feeds", "to": f"term{i + 1:03d}"}
        for i in range(terms - 1)
    ]
    return af.define_ontology(
        {
            "name": "bench",
            "version": "1",
            "sources": {"warehouse": "the warehouse"},
            "nodes": nodes,
            "relations": relations,
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    n, rounds = (40, 3) if args.quick else (200, 5)
    conv = Conversation(n)
    ontology = big_map(conv.tool().name)
    variants: dict[str, dict[str, Any]] = {"without": {}, "with 200 terms": {"ontology": ontology}}
    best: dict[str, float] = {}
    for _ in range(rounds):
        for name, options in variants.items():
            run = run_agent_conversation(conv, af.MemoryStore(), **options)
            per_call = run.seconds * 1000 / run.calls
            best[name] = min(best.get(name, per_call), per_call)
    print_environment(environment())
    print(f"# N = {n} iterations, best of {rounds} rounds, MemoryStore")
    print(f"# map piece: {len(ontology_text(ontology).encode()):,} bytes")
    base = best["without"]
    for name, ms in best.items():
        print(f"{name:>16}: {ms:7.3f} ms per call  ({ms / base:5.2f}x)")


if __name__ == "__main__":
    main()
