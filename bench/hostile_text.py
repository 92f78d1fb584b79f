"""The JSON-text rule on hostile input: linear in the size of the text.

The inputs of ``tests/unit/test_json_text_rule.py``'s ``HOSTILE`` table, each built at size
``n`` and ``2n`` and read with ``read_json_text`` alternately (``--reps`` times each, the
best kept). Printed per input: both times and their ratio, which is about 2 for a linear
reader and about 4 for a quadratic one. The test checks each input's answer; the time is
measured here, never asserted by a test.

    python bench/hostile_text.py [--n 1000000] [--reps 5]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

from agentfootprint.logformat.commitments import read_json_text

BUILDERS: dict[str, Callable[[int], str]] = {
    "deep": lambda n: "[" * n + "1" + "]" * n,
    "openers": lambda n: "[" * n,
    "brackets in a string": lambda n: '["' + "[" * n + '"]',
    "escaped quotes": lambda n: '["' + '\\"' * (n // 2) + '"]',
    "backslashes": lambda n: '["' + "\\\\" * (n // 2) + '"]',
    "long number": lambda n: "[" + "7" * n + "]",
    "long fraction": lambda n: "[0." + "7" * n + "]",
    "many duplicates": lambda n: "{" + ",".join(['"a":1'] * (n // 10)) + "}",
    "surrogate escapes": lambda n: json.dumps(["\U0001f600" * (n // 7)]),
    "mixed nesting": lambda n: "[{" * (n // 4),
}


def best_of(text: str, reps: int) -> float:
    best = float("inf")
    for _ in range(reps):
        started = time.perf_counter()
        read_json_text(text)
        best = min(best, time.perf_counter() - started)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="the smaller size")
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    print(f"{'input':<22} {'n (ms)':>9} {'2n (ms)':>9} {'2n/n':>6}")
    for name, build in BUILDERS.items():
        small, large = build(args.n), build(2 * args.n)
        times = {"small": float("inf"), "large": float("inf")}
        for _ in range(args.reps):  # alternate, so drift hits both sizes alike
            times["small"] = min(times["small"], best_of(small, 1))
            times["large"] = min(times["large"], best_of(large, 1))
        ratio = times["large"] / times["small"]
        print(f"{name:<22} {times['small'] * 1e3:9.1f} {times['large'] * 1e3:9.1f} {ratio:6.2f}")


if __name__ == "__main__":
    main()
