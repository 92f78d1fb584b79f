"""Credentials a tool declares it needs (``define_tool(needs=...)``), and what a credential
service answers.

The ``credentials`` option is a service with ``get_credential(request)`` (sync or async)
answering :class:`Issued` (the tool runs with ``ctx.credential``) or
:class:`AuthorizationRequired` (a person must consent first: the run pauses, or the model is
told, per ``on_authorization_required``), or raising. What it answers is recorded as a
decision without the secret and without the consent URL; a replay answers from the record
and never asks the service. :func:`static_tokens` is the simplest service: fixed tokens by
service name.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from agentfootprint.errors import UsageError

__all__ = [
    "AuthorizationRequired",
    "Credential",
    "CredentialNeed",
    "CredentialRequest",
    "CredentialService",
    "Issued",
    "StaticTokens",
    "credential_need",
    "static_tokens",
]

_SERVICE = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")
_KIND = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


@dataclass(frozen=True, kw_only=True, slots=True)
class CredentialNeed:
    """What a tool declares it needs: a credential for ``service`` (with ``scopes``), on
    behalf of the machine or of the user."""

    service: str
    scopes: tuple[str, ...] = ()
    mode: Literal["machine", "user"] = "machine"

    def describe(self) -> dict[str, Any]:
        """As a decision records it."""
        return {"service": self.service, "scopes": list(self.scopes), "mode": self.mode}


def credential_need(tool: str, needs: Any) -> CredentialNeed:
    """``define_tool(needs=...)`` checked: ``{"credential": service, "scopes": [...],
    "mode": "machine" | "user"}``; a :class:`UsageError` naming the tool otherwise."""
    if not isinstance(needs, Mapping):
        raise UsageError(
            f"tool {tool!r}: needs must be a dict such as {{'credential': 'github'}}, got "
            f"{type(needs).__name__}",
            option="tools",
        )
    unknown = sorted(str(k) for k in needs if k not in ("credential", "scopes", "mode"))
    if unknown:
        raise UsageError(
            f"tool {tool!r}: needs has unknown members {unknown}; it takes 'credential', "
            "'scopes' and 'mode'",
            option="tools",
        )
    service = needs.get("credential")
    if not isinstance(service, str) or not _SERVICE.match(service):
        raise UsageError(
            f"tool {tool!r}: needs['credential'] must name a service in 1-128 characters of "
            f"A-Z a-z 0-9 _ . : -, got {service!r}",
            option="tools",
        )
    scopes = needs.get("scopes", ())
    if (
        isinstance(scopes, str)
        or not isinstance(scopes, Sequence)
        or not all(isinstance(s, str) and s and len(s) <= 256 for s in scopes)
    ):
        raise UsageError(
            f"tool {tool!r}: needs['scopes'] must be a list of non-empty strings, got {scopes!r}",
            option="tools",
        )
    mode = needs.get("mode", "machine")
    if mode not in ("machine", "user"):
        raise UsageError(
            f"tool {tool!r}: needs['mode'] must be 'machine' or 'user', got {mode!r}",
            option="tools",
        )
    return CredentialNeed(service=service, scopes=tuple(scopes), mode=mode)


@dataclass(frozen=True, kw_only=True, slots=True)
class CredentialRequest:
    """What the credential service is asked, for one tool call."""

    service: str
    scopes: tuple[str, ...]
    mode: Literal["machine", "user"]
    tool: str
    tool_call_id: str
    run_id: str
    conversation_id: str


class CredentialService(Protocol):
    """What ``credentials=`` takes: ``get_credential(request)`` (sync or async) answers
    :class:`Issued` or :class:`AuthorizationRequired`, or raises (the call then fails,
    recorded by the exception's class only)."""

    def get_credential(self, request: CredentialRequest) -> Any: ...


@dataclass(frozen=True, kw_only=True, slots=True)
class Issued:
    """The service's answer when the credential is available: ``token`` (the secret, never
    recorded), its ``kind`` (``"bearer"`` by default) and when it expires (unix ms)."""

    token: str = field(repr=False)
    kind: str = "bearer"
    expires_at: int | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class AuthorizationRequired:
    """The service's answer when a person must consent first: where they do it (never
    recorded: it goes to the caller only)."""

    authorization_url: str = field(repr=False)
    session_id: str | None = field(default=None, repr=False)


@dataclass(frozen=True, slots=True)
class Credential:
    """What a tool receives as ``ctx.credential``. Its repr never shows the token."""

    token: str = field(repr=False)
    kind: str
    service: str
    expires_at: int | None = None

    def headers(self) -> dict[str, str]:
        """HTTP headers carrying it (``Authorization: Bearer ...`` for a bearer token)."""
        scheme = "Bearer" if self.kind == "bearer" else self.kind
        return {"Authorization": f"{scheme} {self.token}"}


def issued_credential(service: str, answer: Issued) -> Credential:
    """The credential a tool is handed, from the service's :class:`Issued` (checked)."""
    if not isinstance(answer.token, str) or len(answer.token.encode("utf-8", "replace")) < 6:
        raise TypeError(
            "Issued.token must be a string of at least 6 bytes (a shorter one "
            "cannot be kept out of the log)"
        )
    if not isinstance(answer.kind, str) or not _KIND.match(answer.kind):
        raise TypeError("Issued.kind must be 1-64 characters of A-Z a-z 0-9 _ . -")
    expires = answer.expires_at
    if expires is not None and (
        isinstance(expires, bool) or not isinstance(expires, int) or not 0 <= expires < 2**53
    ):
        raise TypeError("Issued.expires_at must be unix milliseconds (an int) or None")
    return Credential(answer.token, answer.kind, service, expires)


class StaticTokens:
    """A credential service of fixed tokens by service name (tests, scripts, a machine
    token from the environment). A service it has no token for needs a person's consent at
    ``consent_url`` (formatted with ``service``), or fails when none is given."""

    def __init__(self, tokens: Mapping[str, str], *, consent_url: str | None = None) -> None:
        if not isinstance(tokens, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) and v for k, v in tokens.items()
        ):
            raise UsageError(
                "static_tokens() argument 'tokens' must be a dict of service name -> "
                f"non-empty token string, got {type(tokens).__name__}",
                option="tokens",
            )
        if consent_url is not None and (not isinstance(consent_url, str) or not consent_url):
            raise UsageError(
                "static_tokens() argument 'consent_url' must be a URL (a non-empty string, "
                "'{service}' standing for the service) or None",
                option="consent_url",
            )
        self._tokens = dict(tokens)
        self._consent_url = consent_url

    def __repr__(self) -> str:
        return f"StaticTokens(services={sorted(self._tokens)})"

    def grant(self, service: str, token: str) -> None:
        """Give ``service`` a token (as a person's consent would)."""
        self._tokens[service] = token

    def get_credential(self, request: CredentialRequest) -> Issued | AuthorizationRequired:
        token = self._tokens.get(request.service)
        if token is not None:
            return Issued(token=token)
        if self._consent_url is None:
            raise LookupError(f"no token for service {request.service!r}")
        return AuthorizationRequired(
            authorization_url=self._consent_url.format(service=request.service)
        )


def static_tokens(tokens: Mapping[str, str], *, consent_url: str | None = None) -> StaticTokens:
    """A :class:`StaticTokens` credential service."""
    return StaticTokens(tokens, consent_url=consent_url)
