"""Hand-built logs whose runs minted artifacts, as docs/artifacts.md specifies them: the
``agentfootprint.artifacts.minted`` event in the tool-calls commit and the claim ticket as the
history's tool message, written row by row through ``RunWriter`` (so they chain and verify),
and the artifact's bytes put in a real store under the run's conversation.

``tamper`` lets a test write a log whose ticket disagrees with its minted event and which
still verifies on its own (the rows re-chained by the writer): the cross-check's case.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agentfootprint.logformat.canonical import canon
from agentfootprint.logformat.hashing import hexdigest
from agentfootprint.store.artifacts import ArtifactHead, ArtifactStore, mint_ref
from agentfootprint.store.writer import RunWriter
from agentfootprint.testing.store_contract import open_body

__all__ = ["MINTED", "Placed", "placed_run", "ticket_text"]

MINTED = "agentfootprint.artifacts.minted"
CREATED_AT = 1_700_000_000_000


@dataclass(frozen=True)
class Placed:
    """One artifact a hand-built run minted: what the log says of it, and its bytes."""

    run_id: str
    scope: str
    ref: str
    digest: str
    content: bytes
    tool_call_id: str
    seq: int  #: the minted event's seq


def ticket_text(members: dict[str, Any]) -> str:
    """The claim ticket: canonical JSON text (docs/artifacts.md, "The claim ticket")."""
    return canon(members).decode("utf-8")


def placed_run(
    log: Any,
    artifacts: ArtifactStore | None,
    run_id: str,
    contents: list[bytes],
    *,
    expires_at: int | None = None,
    tamper: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    closed: bool = True,
    broken: bool = False,
) -> list[Placed]:
    """Write a closed run into ``log`` in which tool ``export`` returned each of ``contents``
    and each was placed (a minted event, a ticket in the history), and put the bytes in
    ``artifacts`` (when given) under the run's conversation, ``run_id``. ``tamper`` rewrites
    each ticket's members before it is written to the history (never the event). Not
    ``closed``: the run is UNSEALED; ``broken``: its commit marker miscounts its writes, so
    the run is INVALID (structure)."""
    history: list[dict[str, Any]] = [{"role": "user", "content": "export the orders"}]
    events: list[tuple[str, dict[str, Any]]] = []
    placed: list[Placed] = []
    calls = [{"id": f"call_{i}", "name": "export", "arguments": "{}"} for i in range(len(contents))]
    history.append({"role": "assistant", "content": None, "tool_calls": calls})
    for index, content in enumerate(contents):
        call_id = f"call_{index}"
        ref = mint_ref()
        digest = hexdigest("artifact", content)
        head = ArtifactHead(
            scope=run_id,
            ref=ref,
            kind="tool-result",
            media_type="text/plain; charset=utf-8",
            size=len(content),
            digest=digest,
            created_at=CREATED_AT,
            expires_at=expires_at,
        )
        if artifacts is not None:
            artifacts.put(head, content)
        payload: dict[str, Any] = {
            "iteration": 1,
            "tool": "export",
            "tool_call_id": call_id,
            "ref": ref,
            "kind": head.kind,
            "media_type": head.media_type,
            "bytes": head.size,
            "digest": digest,
        }
        ticket: dict[str, Any] = {
            "bytes": head.size,
            "digest": digest,
            "kind": head.kind,
            "media_type": head.media_type,
            "placed": True,
            "reason": f"export returned {len(content)} characters, more than 256: stored as "
            f"{ref}; present it, or pass the ref to a tool that wants it",
            "ref": ref,
        }
        if expires_at is not None:
            payload["expires_at"] = ticket["expires_at"] = expires_at
        if tamper is not None:
            ticket = tamper(ticket)
        history.append(
            {
                "role": "tool",
                "tool_call_id": call_id,
                "name": "export",
                "content": ticket_text(ticket),
            }
        )
        events.append(("event", {"name": MINTED, "payload": payload}))
        placed.append(Placed(run_id, run_id, ref, digest, content, call_id, seq=1 + index))
    writer = RunWriter(log, run_id)
    writer.append([("run.open", open_body(run_id))])
    writer.append(
        [
            *events,
            ("write", {"commit": 0, "path": "history", "verb": "set", "value": history}),
            (
                "commit",
                {
                    "commit": 0,
                    "stage": "tool-calls",
                    "stage_run": "tool-calls#1",
                    "writes": 2 if broken else 1,
                },
            ),
        ]
    )
    if closed:
        writer.append(
            [("run.close", {"outcome": "answered", "commits": 1, "receipts": 0, "calls": 0})]
        )
    return placed
