"""The static type of every option ``Agent(...)`` takes, for editors and mypy.

``Agent.__init__`` takes ``**options: Unpack[AgentOptions]``: an editor lists every option
with its type, and mypy refuses a misspelt name or a value of the wrong type before the
code runs. The run-time checks stay the features' own (:mod:`agentfootprint.features`):
they are the ones that refuse a value, with a :class:`~agentfootprint.errors.UsageError`
naming the option (a bound, a rule spanning two options, a planned seed option).

The keys are exactly the options the features declare (``registry.option_specs()``):
``tests/unit/test_agent_signature.py`` compares the two both ways, so an option added to a
feature and not typed here (or typed here and not declared) fails the suite.

No ``from __future__ import annotations`` here: on Python 3.11 a TypedDict reads
``Required[...]`` only from evaluated annotations (``__required_keys__`` would be empty).
"""

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, Required, TypedDict

from agentfootprint.features.caching import CacheStrategy
from agentfootprint.features.classifiers import ToolClassifier
from agentfootprint.features.group_translator import GroupTranslator
from agentfootprint.features.ontology import Ontology
from agentfootprint.features.permission_checker import PermissionChecker
from agentfootprint.features.structure_recorders import StructureRecorder
from agentfootprint.runtime.config import ArgValidation, ReactMode
from agentfootprint.runtime.credentials import CredentialService
from agentfootprint.runtime.ports import Ports
from agentfootprint.runtime.provider import Provider
from agentfootprint.runtime.tools import Tool
from agentfootprint.store.artifacts import ArtifactStore
from agentfootprint.store.base import EventStore
from agentfootprint.store.redaction import RedactionPolicy
from agentfootprint.store.vault_base import Vault

__all__ = [
    "AgentOptions",
    "AnswerLayerOption",
    "ContextBudget",
    "CostBudget",
    "ModelPrices",
    "ObserverDeliveryOptions",
    "TimeOption",
    "ToolChoice",
    "TopN",
    "Window",
]


class Window(TypedDict, total=False):
    """``window=``: the user turns served, and whether what leaves is summarised."""

    keep_last_turns: Required[int]
    summarize: bool


class TopN(TypedDict):
    """``tool_choice={"serve": {"top": N}}``: the N best-ranked tools."""

    top: int


class ToolChoice(TypedDict, total=False):
    """``tool_choice=``: every key optional."""

    classifier: ToolClassifier | None
    serve: Literal["all"] | TopN
    always_serve: Sequence[str]


class ContextBudget(TypedDict, total=False):
    """``context_budget=``: characters per slot (a slot left out keeps its default)."""

    system_prompt: int
    messages: int
    tools: int


class ModelPrices(TypedDict, total=False):
    """One model's prices in ``pricing_table=``, USD per 1M tokens."""

    input: Required[float]
    output: Required[float]
    cache_read: float
    cache_write: float


class CostBudget(TypedDict, total=False):
    """``cost_budget=`` as a mapping (a bare number is ``{"usd": n}``, warning once)."""

    usd: Required[float]
    on_exceed: Literal["halt", "warn"]


class TimeOption(TypedDict, total=False):
    """``time=`` as a mapping: the zone the agent's turns are in (an IANA name)."""

    zone: str | None


class ArtifactsOption(TypedDict, total=False):
    """``artifacts``' object form (docs/artifacts.md)."""

    store: Required[ArtifactStore]
    #: a tool result longer than this is placed (256 and up; omitted: no placement)
    max_inline_chars: int
    #: each placed artifact's stated expiry, in milliseconds after it was made
    ttl_ms: int


class FindingsOption(TypedDict, total=False):
    """``findings``' object form (docs/findings.md)."""

    serve: Literal["ledger-and-facts", "ledger-only"]
    answer_ask: Literal["none", "quote-facts"]
    #: a second source: an object with ``judge(request: af.JudgeRequest)`` answering a
    #: mapping of standings to probabilities
    judge: Any
    max_context_bytes: int
    keep_ledger_facts: int | Literal[False]


class AnswerLayerOption(TypedDict, total=False):
    """``answer_layer={"standing_line": True}``: the standing line appended to the answer."""

    standing_line: bool


class ObserverDeliveryOptions(TypedDict, total=False):
    """``observer_delivery_options=`` (with ``observer_delivery="deferred"``)."""

    #: events the run's queue holds, 1 to 1,000,000 (default 10,000)
    max_queue: int
    #: what gives when it is full (default ``"drop-oldest"``)
    overflow: Literal["drop-oldest", "sample", "block"]
    #: ``overflow="sample"``: one overflowing event in this many is kept (default 10)
    sample_every: int
    #: a detached copy of each event, or one cut to a bounded size (default ``"clone"``)
    capture: Literal["clone", "summary"]
    #: the longest slice the deliverer takes between two stages, ms (default 2)
    flush_budget_ms: float


class AgentOptions(TypedDict, total=False):
    """Every option of ``Agent(...)`` by its Python name (``docs/options.md``).

    ``provider`` and ``model`` are required; every other option has a default."""

    # turn
    #: the model port: an object with ``name`` and an async ``complete(request)``
    provider: Required[Provider]
    #: served as ``request.model``
    model: Required[str]
    name: str
    #: 1-128 characters of A-Z a-z 0-9 _ . : -
    id: str
    temperature: float | None
    max_tokens: int | None
    # sampling (served in params to a provider whose sampling_settings names them)
    #: nucleus sampling, 0 to 1
    top_p: float | None
    #: where the reply stops: one sequence, or a list of 1 to 16
    stop: str | Sequence[str] | None
    #: the vendor's sampling seed
    seed: int | None
    #: -2 to 2
    presence_penalty: float | None
    #: -2 to 2
    frequency_penalty: float | None
    #: the vendor's extra request fields (JSON), sent as given after the adapter's own
    model_settings: Mapping[str, Any] | None
    # recording
    commit_values: Literal["delta", "full"]
    redact: RedactionPolicy | None
    #: the disclosure vault (a path, a URL or a Vault); needs ``redact``
    disclosures: str | os.PathLike[str] | Vault | None
    #: the log: a path, a store URL or an EventStore (default: in memory)
    store: str | os.PathLike[str] | EventStore | None
    ports: Ports | None
    # the request
    system: str | Sequence[str]
    tools: Sequence[Tool]
    window: Window | None
    #: tools whose latest result the window keeps (0 or False: none)
    keep_last_tool_results: int
    caching: Literal["off"]
    cache_strategy: Literal["breakpoints", "automatic", "none"] | CacheStrategy
    tool_choice: ToolChoice | None
    context_budget: ContextBudget | None
    record_system_prompt: bool
    #: a domain map (``af.define_ontology(spec)``) served as a constant system piece
    ontology: Ontology | None
    #: the instruction piece with the map (default "use-the-map" when a map is given)
    ontology_ask: Literal["use-the-map", "none"] | None
    # the answer
    #: its type: a dataclass, TypedDict or pydantic model (the class), or a JSON Schema
    #: (an object schema); served in params, the answer validated (``RunResult.output``)
    output_type: type[Any] | Mapping[str, Any] | None
    #: answers that do not fit ``output_type`` asked again, 0 to 10 (default 2)
    output_retries: int | None
    # the loop
    record_receipt: bool
    permission_checker: PermissionChecker | None
    max_iterations: int
    react_mode: ReactMode
    wrap_up_at_max_iterations: bool
    tool_arg_validation: ArgValidation
    max_tool_result_chars: int | None
    repeated_call_nudge: bool
    tool_teardown_timeout_ms: int
    #: large tool results kept by digest: a store (``af.FileArtifacts(directory)``,
    #: ``MemoryArtifacts()``, ``SqliteArtifacts(file)``) or ``{"store", "max_inline_chars",
    #: "ttl_ms"}`` (docs/artifacts.md)
    artifacts: ArtifactStore | ArtifactsOption | None
    #: the findings ledger: True or ``{"serve", "answer_ask", "judge", "max_context_bytes",
    #: "keep_ledger_facts"}`` (docs/findings.md)
    findings: bool | FindingsOption | None
    #: fact turns the window holds under the findings ledger (default 4 with a window)
    keep_ledger_facts: int | Literal[False] | None
    # is the answer supported (docs/integrity.md)
    #: how loud the integrity checks are about their own health: "dev" runs their canaries
    #: and fails a run whose armed check is dead (``CheckerDeadError``)
    integrity_posture: Literal["observe", "dev"] | None
    #: rows against the ``result_columns`` a tool declares: findings ("warn") or refused
    check_column_types: Literal["off", "warn", "enforce"] | None
    #: an advisory when a lookup for a value the run produced comes back empty
    notice_empty_lookups: bool | None
    #: an advisory when every value of the answer was served before this turn
    notice_prior_turn_evidence: bool | None
    #: app-verified ``[{"value", "source"}]`` entries that ground tool arguments
    external_grounds: Callable[[], Sequence[Mapping[str, str]]] | None
    #: judge the period each result covers (armed by any tool declaring ``period``; True
    #: arms it alone)
    results_layer: bool | None
    #: the answer's standing folded from the record: True, or ``{"standing_line": bool}``
    answer_layer: bool | AnswerLayerOption | None
    # pauses and credentials
    #: the service tools' ``needs`` are resolved by (``get_credential(request)``)
    credentials: CredentialService | None
    on_authorization_required: Literal["pause", "tell-model"] | None
    #: the run's clock as rows: True (zone unknown) or ``{"zone": "Europe/Paris"}``
    time: bool | TimeOption | None
    #: the inputs layer (armed by any tool with ``ask_or_assume``; True arms it alone)
    inputs_layer: bool | None
    #: the host's own object for the context of the inputs layer's ask
    argument_ask_context: Callable[[], Mapping[str, Any]] | None
    # cost
    #: True: the shipped table; a mapping: model -> prices
    pricing_table: bool | Mapping[str, ModelPrices] | None
    #: USD (warns once), or ``{"usd": x, "on_exceed": "halt" | "warn"}``; needs prices
    cost_budget: float | CostBudget | None
    # observation (never recorded)
    #: when listeners get a run's events: as emitted, or from a queue beside the run
    observer_delivery: Literal["inline", "deferred"] | None
    observer_delivery_options: ObserverDeliveryOptions | None
    #: told the chart's stages, edges and groups once, at construction
    structure_recorders: Sequence[StructureRecorder] | None
    #: ``agent.ui_group()``: the agent's ``GroupMetadata`` through it, kept
    group_translator: GroupTranslator | None
    #: ``RunResult.stage_reads``: what each stage read (never recorded)
    read_tracking: Literal["summary", "full", "off"] | None
    #: each recorded write names the keys its stage read before it (log format v6)
    write_provenance: Literal["off", "reads-prefix"] | None
