"""What the findings ledger costs: record time and log bytes per iteration, findings on
against off.

On this suite's conversation (``common.Conversation``: 4 tool-call iterations per turn, each
turn continuing the previous one), three variants alternating in every round:

* ``off``: no ``findings`` (the rows of a run before the option existed);
* ``armed, silent``: ``findings=True``, the model declares nothing (the served schemas carry
  the reserved argument, the system pieces its instruction; no row, no piece);
* ``declaring``: ``findings=True`` and every call declares ``_findings``: a basis and a
  proposition, and the standing of the previous result (alternately a fact with one
  assertion and noise), so rows are filed on every call, the piece is served from the second
  call on and every other result is collapsed on the wire.

Figures: ms per tool-call iteration recorded into a ``MemoryStore`` (the fastest of the
rounds), and bytes per iteration of an SQLite log.

Usage::

    python bench/findings.py            # N = 800, 3 rounds
    python bench/findings.py --quick    # N = 200, 2 rounds
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (
    TOOL_NAME,
    Conversation,
    call_id,
    db_bytes,
    environment,
    final_text,
    print_environment,
    remove_db,
    run_agent_conversation,
    tool_args,
)

import agentfootprint as af

logging.disable(logging.WARNING)


@dataclass(frozen=True)
class Declaring(Conversation):
    """The conversation whose every call declares ``_findings``."""

    def replies(self) -> list[af.LLMResponse | str]:
        out: list[af.LLMResponse | str] = []
        for turn, iterations in enumerate(self.turns):
            for i in iterations:
                findings: dict[str, Any] = {"basis": "direct", "proposition": f"doc {i} answers"}
                if i > 0:
                    standing: dict[str, Any] = {"toolCallId": call_id(i - 1)}
                    if i % 2:
                        standing["standing"] = "fact"
                        standing["assertions"] = [
                            {"subject": {"kind": "doc", "id": str(i - 1)}, "predicate": "rank",
                             "value": i - 1}
                        ]  # fmt: skip
                    else:
                        standing["standing"] = "noise"
                    findings["previous"] = [standing]
                arguments = {**tool_args(i), "_findings": findings}
                call = af.tool_call(TOOL_NAME, arguments, id=call_id(i))
                out.append(af.reply("", tool_calls=[call]))
            out.append(final_text(turn))
        return out


VARIANTS: dict[str, tuple[bool, dict[str, Any]]] = {
    "off": (False, {}),
    "armed, silent": (False, {"findings": True}),
    "declaring": (True, {"findings": True}),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="N = 200, 2 rounds")
    parser.add_argument("--n", type=int, default=800)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    n, rounds = (200, 2) if args.quick else (args.n, args.rounds)
    print_environment(environment())
    plain, declaring = Conversation(n), Declaring(n)
    best: dict[str, float] = {}
    size: dict[str, int] = {}
    for _ in range(rounds):
        for name, (declares, options) in VARIANTS.items():
            conv = declaring if declares else plain
            ran = run_agent_conversation(conv, af.MemoryStore(), **options)
            ms = ran.seconds * 1000 / ran.iterations
            best[name] = min(best.get(name, ms), ms)
    for name, (declares, options) in VARIANTS.items():
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "findings.db"
            ran = run_agent_conversation(declaring if declares else plain, str(path), **options)
            size[name] = db_bytes(path) // ran.iterations
            remove_db(path)
    base, base_size = best["off"], size["off"]
    print(f"\nN={n}: ms per iteration into memory (fastest of {rounds}); SQLite bytes/iteration")
    for name, ms in best.items():
        print(
            f"  {name:<14} {ms:7.3f} ms  x{ms / base:5.3f}   {size[name]:>7} bytes  "
            f"x{size[name] / base_size:5.2f}"
        )


if __name__ == "__main__":
    main()
