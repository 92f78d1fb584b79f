"""agentfootprint: an LLM-agent runtime whose every run is evidence.

Every stage write is an append-only event; every LLM call gets a receipt of
SHA-256 digests; :func:`verify_run` rebuilds each served request from the log
and proves it matches its receipt.
"""

__version__ = "0.1.0"

from agentfootprint.core.agent import Agent, RunResult, StoppedEarly, open_store
from agentfootprint.core.events import (
    AgentEvent,
    ArgsInvalid,
    IterationEnd,
    IterationStart,
    LLMEnd,
    LLMStart,
    ToolEnd,
    ToolStart,
    TurnEnd,
    TurnStart,
)
from agentfootprint.core.providers.base import LLMResponse, Provider, ToolCall, Usage
from agentfootprint.core.providers.mock import MockProvider, reply, tool_call
from agentfootprint.core.tools import Tool, ToolContext, define_tool
from agentfootprint.errors import (
    AgentFootprintError,
    CanonicalFormError,
    ContinuationError,
    ProviderCallError,
    RunError,
    ScriptExhaustedError,
    StoreError,
    UsageError,
    VerificationError,
)
from agentfootprint.replay.read import commit_value_at, receipt_at, served_at, state_at
from agentfootprint.store.memory import MemoryStore
from agentfootprint.store.sqlite import SqliteStore
from agentfootprint.verify.request import build_request
from agentfootprint.verify.verifier import Outcome, RunVerification, Verifier, verify_run

__all__ = [
    "Agent",
    "AgentEvent",
    "AgentFootprintError",
    "ArgsInvalid",
    "CanonicalFormError",
    "ContinuationError",
    "IterationEnd",
    "IterationStart",
    "LLMEnd",
    "LLMResponse",
    "LLMStart",
    "MemoryStore",
    "MockProvider",
    "Outcome",
    "Provider",
    "ProviderCallError",
    "RunError",
    "RunResult",
    "RunVerification",
    "ScriptExhaustedError",
    "SqliteStore",
    "StoppedEarly",
    "StoreError",
    "Tool",
    "ToolCall",
    "ToolContext",
    "ToolEnd",
    "ToolStart",
    "TurnEnd",
    "TurnStart",
    "Usage",
    "UsageError",
    "VerificationError",
    "Verifier",
    "__version__",
    "build_request",
    "commit_value_at",
    "define_tool",
    "open_store",
    "receipt_at",
    "reply",
    "served_at",
    "state_at",
    "tool_call",
    "verify_run",
]
