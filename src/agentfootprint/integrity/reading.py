"""One conversation's history as the checks read it, kept across its runs.

The claim seam indexes every tool result of the conversation (:class:`EvidenceIndex`) and
the write seam needs the results a lookup may be grounded by (:class:`Produced`); both grow
with the history, which only grows. A :class:`Reading` reads what was appended since it last
read, while the history still holds the very messages it read (a later version of the same
shared list, or the same objects one by one); else it reads again from the start, so a fork
or a history read back from the log gets a reading of its own. It is a cache (an agent's,
never evidence): what it gives equals a reading from scratch.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, MutableMapping
from typing import Any

from agentfootprint.integrity.empty_lookup import Produced
from agentfootprint.integrity.evidence import EvidenceIndex
from agentfootprint.integrity.rail import ToolCall
from agentfootprint.integrity.unsupported import Folds
from agentfootprint.logformat.shared_lists import SharedList

__all__ = ["READINGS", "Reading", "kept_evidence", "kept_folds", "kept_grounds", "result_of"]

#: the agent cache the features that read a conversation share (``shared_cache``)
READINGS = "integrity.readings"
#: the conversations whose reading one cache keeps
KEPT_CONVERSATIONS = 8
_LOCK = threading.Lock()


def result_of(message: Mapping[str, Any], index: int) -> ToolCall:
    """A tool message of the history as the checks read a result (its arguments are not
    needed by a ground)."""
    content = message.get("content")
    return ToolCall(
        tool=str(message.get("name")),
        tool_call_id=str(message.get("tool_call_id")),
        arguments=None,
        content=content if isinstance(content, str) else None,
        is_error=message.get("is_error") is True,
        turn=0,
        history_index=index,
    )


class Reading:
    """The evidence index and the lookups' grounds of one conversation's history, each
    brought up to the messages read when first asked for (a run that arms one check pays
    for that one)."""

    def __init__(self, folds: Folds | None = None) -> None:
        #: the texts its frames folded (by identity: valid on any branch, so a fork keeps them)
        self.folds = folds if folds is not None else Folds()
        self._evidence = EvidenceIndex()
        self._produced = Produced()
        self._indexed = 0  #: the messages the evidence index holds
        self._grounded = 0  #: the messages the grounds were taken from
        self.messages: list[Any] = []
        self.seen: Any = None  #: the history version read last

    def read(self, history: Any) -> Reading:
        """This reading brought up to ``history``, or a new one when ``history`` does not
        hold the messages this one read (a fork: this one is left as it is, for a turn of
        the other branch that still holds it)."""
        known = len(self.messages)
        grown = (  # a later version of the list read last: its prefix is those very items
            isinstance(history, SharedList)
            and isinstance(self.seen, SharedList)
            and len(self.seen) == known
            and history.extends(self.seen)
        )
        if not grown and (
            len(history) < known
            or any(history[i] is not self.messages[i] for i in range(known - 1, -1, -1))
        ):
            return Reading(self.folds).read(history)
        self.messages.extend(history[known:])
        self.seen = history
        return self

    @property
    def evidence(self) -> EvidenceIndex:
        """Every tool result read so far, indexed (the claim seam)."""
        if self._indexed < len(self.messages):
            self._evidence.add(self.messages[self._indexed :], self._indexed)
            self._indexed = len(self.messages)
        return self._evidence

    @property
    def produced(self) -> Produced:
        """Every tool result read so far, as a lookup's grounds (the write seam)."""
        for i in range(self._grounded, len(self.messages)):
            message = self.messages[i]
            if (type(message) is dict or isinstance(message, Mapping)) and message.get(
                "role"
            ) == "tool":
                self._produced.add(result_of(message, i))
        self._grounded = len(self.messages)
        return self._produced


def kept_evidence(
    kept: MutableMapping[str, Reading], conversation: str, history: Any
) -> EvidenceIndex:
    """The evidence index of ``history`` from ``conversation``'s reading in ``kept``."""
    with _LOCK:
        return _kept(kept, conversation, history).evidence


def kept_grounds(kept: MutableMapping[str, Reading], conversation: str, history: Any) -> Produced:
    """The lookups' grounds in ``history`` from ``conversation``'s reading in ``kept``."""
    with _LOCK:
        return _kept(kept, conversation, history).produced


def kept_folds(kept: MutableMapping[str, Reading], conversation: str) -> Folds:
    """The texts ``conversation``'s frames folded, kept across its runs (the choice seam's:
    a continuation is served its history, its system pieces and its tools' schemas again)."""
    with _LOCK:
        found = kept.get(conversation)
        return (found if found is not None else _keep(kept, conversation, Reading())).folds


def _kept(kept: MutableMapping[str, Reading], conversation: str, history: Any) -> Reading:
    """``conversation``'s reading in ``kept`` (an agent cache), brought up to ``history``
    (under the lock: an agent may run turns of its conversations in several threads, and a
    reading grows in place)."""
    found = kept.pop(conversation, None) or Reading()
    return _keep(kept, conversation, found.read(history))


def _keep(kept: MutableMapping[str, Reading], conversation: str, reading: Reading) -> Reading:
    """``reading`` kept as ``conversation``'s, the newest; the newest
    :data:`KEPT_CONVERSATIONS` are kept."""
    kept.pop(conversation, None)
    kept[conversation] = reading  # the newest last
    while len(kept) > KEPT_CONVERSATIONS:
        kept.pop(next(iter(kept)))
    return reading
