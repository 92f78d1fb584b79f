"""agentfootprint: an LLM-agent runtime whose every run is evidence.

Every stage write is an append-only event; every LLM call gets a receipt of
SHA-256 digests; :func:`verify_run` rebuilds each served request from the log
and proves it matches its receipt.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from agentfootprint.version import __version__

# Public names resolve on first use (PEP 562), so importing one layer never drags in the
# others: an auditor's process can import agentfootprint.verify without the runtime.
_LAZY: dict[str, str] = {
    "ReplayDivergence": "agentfootprint.errors",
    "AppendOnlyError": "agentfootprint.errors",
    "FileError": "agentfootprint.errors",
    "NotALogError": "agentfootprint.errors",
    "NotAVaultError": "agentfootprint.errors",
    "NewerVersionError": "agentfootprint.errors",
    "RecordTooLargeError": "agentfootprint.errors",
    "RunNotFoundError": "agentfootprint.errors",
    "StoreBusyError": "agentfootprint.errors",
    "StoreConflictError": "agentfootprint.errors",
    "StoreUnavailableError": "agentfootprint.errors",
    "PostgresStore": "agentfootprint.store.postgres",
    "PostgresVault": "agentfootprint.store.postgres_vault",
    "ReplayResult": "agentfootprint.replayer.replay_run",
    "RunDiff": "agentfootprint.audit.diff",
    "diff_runs": "agentfootprint.audit.diff",
    "replay": "agentfootprint.replayer.replay_run",
    "replay_sync": "agentfootprint.replayer.replay_run",
    "same_recording": "agentfootprint.audit.diff",
    "BundleSource": "agentfootprint.verify.bundle",
    "DisclosureVault": "agentfootprint.store.vault",
    "MemoryVault": "agentfootprint.store.memory_vault",
    "Vault": "agentfootprint.store.vault_base",
    "DescriptionClassifier": "agentfootprint.features.classifiers",
    "Ontology": "agentfootprint.features.ontology",
    "define_ontology": "agentfootprint.features.ontology",
    "ProvenValue": "agentfootprint.verify.verifier",
    "RedactionPolicy": "agentfootprint.store.redaction",
    "ReservedKeyError": "agentfootprint.errors",
    "conversation_redaction": "agentfootprint.store.redaction",
    "export_runs": "agentfootprint.exchange.transfer",
    "import_bundle": "agentfootprint.exchange.transfer",
    "MemoryArtifacts": "agentfootprint.store.artifacts",
    "ArtifactStore": "agentfootprint.store.artifacts",
    "Retention": "agentfootprint.store.artifacts",
    "FileArtifacts": "agentfootprint.store.artifacts_file",
    "SqliteArtifacts": "agentfootprint.store.artifacts_sqlite",
    "Artifact": "agentfootprint.runtime.artifacts",
    "Presented": "agentfootprint.runtime.artifacts",
    "ArtifactConflictError": "agentfootprint.errors",
    "ArtifactNotFoundError": "agentfootprint.errors",
    "NotAnArtifactStoreError": "agentfootprint.errors",
    "ArtifactStoreError": "agentfootprint.errors",
    "JudgeRequest": "agentfootprint.features.findings",
    "absent": "agentfootprint.runtime.envelopes",
    "described": "agentfootprint.runtime.envelopes",
    "period": "agentfootprint.runtime.envelopes",
    "Agent": "agentfootprint.agent.agent",
    "AgentOptions": "agentfootprint.agent.option_types",
    "AgentEvent": "agentfootprint.runtime.events",
    "AgentFootprintError": "agentfootprint.errors",
    "ArgsInvalid": "agentfootprint.runtime.events",
    "CanonicalFormError": "agentfootprint.errors",
    "ContinuationError": "agentfootprint.errors",
    "IterationEnd": "agentfootprint.runtime.events",
    "IterationStart": "agentfootprint.runtime.events",
    "LLMEnd": "agentfootprint.runtime.events",
    "LLMResponse": "agentfootprint.runtime.provider",
    "Message": "agentfootprint.runtime.provider",
    "ModelRequestsBlocked": "agentfootprint.errors",
    "ProviderError": "agentfootprint.errors",
    "Request": "agentfootprint.runtime.provider",
    "Response": "agentfootprint.runtime.provider",
    "SystemPiece": "agentfootprint.runtime.provider",
    "ToolSchema": "agentfootprint.runtime.provider",
    "allow_model_requests": "agentfootprint.runtime.provider_guard",
    "LLMStart": "agentfootprint.runtime.events",
    "LLMToken": "agentfootprint.runtime.events",
    "WireExchange": "agentfootprint.runtime.events",
    "MemoryStore": "agentfootprint.store.memory",
    "MockProvider": "agentfootprint.runtime.mock_provider",
    "Ports": "agentfootprint.runtime.ports",
    "anthropic": "agentfootprint.providers",
    "openai": "agentfootprint.providers",
    "Outcome": "agentfootprint.verify.verifier",
    "Provider": "agentfootprint.runtime.provider",
    "ProviderCallError": "agentfootprint.errors",
    "RunError": "agentfootprint.errors",
    "RunResult": "agentfootprint.agent.results",
    "RunVerification": "agentfootprint.verify.verifier",
    "ScriptExhaustedError": "agentfootprint.errors",
    "SqliteStore": "agentfootprint.store.sqlite",
    "StoppedEarly": "agentfootprint.agent.results",
    "StoreError": "agentfootprint.errors",
    "Tool": "agentfootprint.runtime.tools",
    "ToolCall": "agentfootprint.runtime.provider",
    "ToolContext": "agentfootprint.runtime.tools",
    "ToolEnd": "agentfootprint.runtime.events",
    "ToolStart": "agentfootprint.runtime.events",
    "TurnEnd": "agentfootprint.runtime.events",
    "TurnStart": "agentfootprint.runtime.events",
    "Usage": "agentfootprint.runtime.provider",
    "WireAttempt": "agentfootprint.runtime.provider",
    "WireRecord": "agentfootprint.runtime.provider",
    "UsageError": "agentfootprint.errors",
    "VerificationError": "agentfootprint.errors",
    "Verifier": "agentfootprint.verify.verifier",
    "build_request": "agentfootprint.logformat.request",
    "commit_value_at": "agentfootprint.audit.read",
    "define_tool": "agentfootprint.runtime.tools",
    "tool": "agentfootprint.runtime.function_tools",
    "open_store": "agentfootprint.agent.stores",
    "receipt_at": "agentfootprint.audit.read",
    "reply": "agentfootprint.runtime.mock_provider",
    "served_at": "agentfootprint.audit.read",
    "state_at": "agentfootprint.audit.read",
    "tool_call": "agentfootprint.runtime.mock_provider",
    "verify_run": "agentfootprint.verify.verifier",
    "PolicyHaltError": "agentfootprint.errors",
    "CheckerDeadError": "agentfootprint.errors",
    "OutputValidationError": "agentfootprint.errors",
    "ToolTeardownTimeoutError": "agentfootprint.errors",
    "Decision": "agentfootprint.features.permission_checker",
    "PermissionRequest": "agentfootprint.features.permission_checker",
    "EdgeAdded": "agentfootprint.features.structure_recorders",
    "GroupAdded": "agentfootprint.features.structure_recorders",
    "StageAdded": "agentfootprint.features.structure_recorders",
    "GroupMetadata": "agentfootprint.features.group_translator",
    "ToolCallRecord": "agentfootprint.audit.tool_calls",
    "tool_calls": "agentfootprint.audit.tool_calls",
    "Pending": "agentfootprint.agent.pauses",
    "PauseAnsweredError": "agentfootprint.errors",
    "CredentialConsentRequiredError": "agentfootprint.errors",
    "AuthorizationRequired": "agentfootprint.runtime.credentials",
    "Credential": "agentfootprint.runtime.credentials",
    "CredentialRequest": "agentfootprint.runtime.credentials",
    "Issued": "agentfootprint.runtime.credentials",
    "static_tokens": "agentfootprint.runtime.credentials",
}

if TYPE_CHECKING:
    from agentfootprint.agent.agent import Agent
    from agentfootprint.agent.option_types import AgentOptions
    from agentfootprint.agent.pauses import Pending
    from agentfootprint.agent.results import RunResult, StoppedEarly
    from agentfootprint.agent.stores import open_store
    from agentfootprint.audit.diff import RunDiff, diff_runs, same_recording
    from agentfootprint.audit.read import commit_value_at, receipt_at, served_at, state_at
    from agentfootprint.audit.tool_calls import ToolCallRecord, tool_calls
    from agentfootprint.errors import (
        AgentFootprintError,
        AppendOnlyError,
        ArtifactStoreError,
        CanonicalFormError,
        CheckerDeadError,
        ContinuationError,
        CredentialConsentRequiredError,
        FileError,
        ModelRequestsBlocked,
        NewerVersionError,
        NotALogError,
        NotAnArtifactStoreError,
        NotAVaultError,
        OutputValidationError,
        PauseAnsweredError,
        PolicyHaltError,
        ProviderCallError,
        ProviderError,
        RecordTooLargeError,
        ReplayDivergence,
        ReservedKeyError,
        RunError,
        RunNotFoundError,
        ScriptExhaustedError,
        StoreBusyError,
        StoreConflictError,
        StoreError,
        StoreUnavailableError,
        ToolTeardownTimeoutError,
        UsageError,
        VerificationError,
    )
    from agentfootprint.exchange.transfer import export_runs, import_bundle
    from agentfootprint.features.classifiers import DescriptionClassifier
    from agentfootprint.features.findings import JudgeRequest
    from agentfootprint.features.group_translator import GroupMetadata
    from agentfootprint.features.ontology import Ontology, define_ontology
    from agentfootprint.features.permission_checker import Decision, PermissionRequest
    from agentfootprint.features.structure_recorders import EdgeAdded, GroupAdded, StageAdded
    from agentfootprint.logformat.request import build_request
    from agentfootprint.providers.factories import anthropic, openai
    from agentfootprint.replayer.replay_run import ReplayResult, replay, replay_sync
    from agentfootprint.runtime.artifacts import Artifact, Presented
    from agentfootprint.runtime.credentials import (
        AuthorizationRequired,
        Credential,
        CredentialRequest,
        Issued,
        static_tokens,
    )
    from agentfootprint.runtime.envelopes import absent, described, period
    from agentfootprint.runtime.events import (
        AgentEvent,
        ArgsInvalid,
        IterationEnd,
        IterationStart,
        LLMEnd,
        LLMStart,
        LLMToken,
        ToolEnd,
        ToolStart,
        TurnEnd,
        TurnStart,
        WireExchange,
    )
    from agentfootprint.runtime.function_tools import tool
    from agentfootprint.runtime.mock_provider import MockProvider, reply, tool_call
    from agentfootprint.runtime.ports import Ports
    from agentfootprint.runtime.provider import (
        LLMResponse,
        Message,
        Provider,
        Request,
        Response,
        SystemPiece,
        ToolCall,
        ToolSchema,
        Usage,
        WireAttempt,
        WireRecord,
    )
    from agentfootprint.runtime.provider_guard import allow_model_requests
    from agentfootprint.runtime.tools import Tool, ToolContext, define_tool
    from agentfootprint.store.artifacts import ArtifactStore, MemoryArtifacts, Retention
    from agentfootprint.store.artifacts_file import FileArtifacts
    from agentfootprint.store.artifacts_sqlite import SqliteArtifacts
    from agentfootprint.store.memory import MemoryStore
    from agentfootprint.store.memory_vault import MemoryVault
    from agentfootprint.store.postgres import PostgresStore
    from agentfootprint.store.postgres_vault import PostgresVault
    from agentfootprint.store.redaction import RedactionPolicy, conversation_redaction
    from agentfootprint.store.sqlite import SqliteStore
    from agentfootprint.store.vault import DisclosureVault
    from agentfootprint.store.vault_base import Vault
    from agentfootprint.verify.bundle import BundleSource
    from agentfootprint.verify.verifier import (
        Outcome,
        ProvenValue,
        RunVerification,
        Verifier,
        verify_run,
    )

__all__ = [
    "Agent",
    "AgentEvent",
    "AgentFootprintError",
    "AgentOptions",
    "AppendOnlyError",
    "ArgsInvalid",
    "Artifact",
    "ArtifactConflictError",
    "ArtifactNotFoundError",
    "ArtifactStore",
    "ArtifactStoreError",
    "AuthorizationRequired",
    "BundleSource",
    "CanonicalFormError",
    "CheckerDeadError",
    "ContinuationError",
    "Credential",
    "CredentialConsentRequiredError",
    "CredentialRequest",
    "Decision",
    "DescriptionClassifier",
    "DisclosureVault",
    "EdgeAdded",
    "FileArtifacts",
    "FileError",
    "GroupAdded",
    "GroupMetadata",
    "Issued",
    "IterationEnd",
    "IterationStart",
    "JudgeRequest",
    "LLMEnd",
    "LLMResponse",
    "LLMStart",
    "LLMToken",
    "MemoryArtifacts",
    "MemoryStore",
    "MemoryVault",
    "Message",
    "MockProvider",
    "ModelRequestsBlocked",
    "NewerVersionError",
    "NotALogError",
    "NotAVaultError",
    "NotAnArtifactStoreError",
    "Ontology",
    "Outcome",
    "OutputValidationError",
    "PauseAnsweredError",
    "Pending",
    "PermissionRequest",
    "PolicyHaltError",
    "Ports",
    "PostgresStore",
    "PostgresVault",
    "Presented",
    "ProvenValue",
    "Provider",
    "ProviderCallError",
    "ProviderError",
    "RecordTooLargeError",
    "RedactionPolicy",
    "ReplayDivergence",
    "ReplayResult",
    "Request",
    "ReservedKeyError",
    "Response",
    "Retention",
    "RunDiff",
    "RunError",
    "RunNotFoundError",
    "RunResult",
    "RunVerification",
    "ScriptExhaustedError",
    "SqliteArtifacts",
    "SqliteStore",
    "StageAdded",
    "StoppedEarly",
    "StoreBusyError",
    "StoreConflictError",
    "StoreError",
    "StoreUnavailableError",
    "SystemPiece",
    "Tool",
    "ToolCall",
    "ToolCallRecord",
    "ToolContext",
    "ToolEnd",
    "ToolSchema",
    "ToolStart",
    "ToolTeardownTimeoutError",
    "TurnEnd",
    "TurnStart",
    "Usage",
    "UsageError",
    "Vault",
    "VerificationError",
    "Verifier",
    "WireAttempt",
    "WireExchange",
    "WireRecord",
    "__version__",
    "absent",
    "allow_model_requests",
    "anthropic",
    "build_request",
    "commit_value_at",
    "conversation_redaction",
    "define_ontology",
    "define_tool",
    "described",
    "diff_runs",
    "export_runs",
    "import_bundle",
    "open_store",
    "openai",
    "period",
    "receipt_at",
    "replay",
    "replay_sync",
    "reply",
    "same_recording",
    "served_at",
    "state_at",
    "static_tokens",
    "tool",
    "tool_call",
    "tool_calls",
    "verify_run",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agentfootprint' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
