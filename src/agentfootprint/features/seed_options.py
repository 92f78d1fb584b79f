"""The seed's ``AgentOptions`` names: the reference of what this library implements.

A seed option no feature declares is *planned*: refused by name at construction and listed
as planned in ``docs/options.md``. This list is the seed's, not ours: it changes only when
the seed does.
"""

from __future__ import annotations

import re

__all__ = ["SEED_OPTIONS", "python_name"]

SEED_OPTIONS: tuple[str, ...] = (
    "answerLayer",
    "argumentAskContext",
    "artifacts",
    "cacheStrategy",
    "caching",
    "checkColumnTypes",
    "commitValues",
    "contextBudget",
    "costBudget",
    "credentials",
    "externalGrounds",
    "findings",
    "groupTranslator",
    "id",
    "inputsLayer",
    "integrityPosture",
    "keepLastToolResults",
    "keepLedgerFacts",
    "maxIterations",
    "maxTokens",
    "maxToolResultChars",
    "model",
    "name",
    "noticeEmptyLookups",
    "noticePriorTurnEvidence",
    "observerDelivery",
    "observerDeliveryOptions",
    "onAuthorizationRequired",
    "ontology",
    "ontologyAsk",
    "permissionChecker",
    "pricingTable",
    "provider",
    "reactMode",
    "readTracking",
    "recordReceipt",
    "recordSystemPrompt",
    "redact",
    "repeatedCallNudge",
    "resultsLayer",
    "structureRecorders",
    "temperature",
    "time",
    "toolArgValidation",
    "toolChoice",
    "toolTeardownTimeoutMs",
    "wrapUpAtMaxIterations",
    "writeProvenance",
)


def python_name(seed: str) -> str:
    """The snake_case of a seed name: ``maxToolResultChars`` -> ``max_tool_result_chars``."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", seed).lower()
