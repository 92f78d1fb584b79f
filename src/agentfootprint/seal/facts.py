"""What a seal attests, computed the same way by the writer and by the verifier.

The writer seals a run from its live facts (the chain head after ``run.close``, the event
count, the recorded final answer, the recorded wire exchanges); the verifier recomputes the
same facts from the rows and requires the sealed statement to equal them. Both sides go
through the functions here, so the two cannot drift apart. docs/seals.md section 2 and
docs/log-format.md section 5.8 are the normative text.

- ``final_answer_digest`` = ``H("seal/answer", canon(answer))``, where ``answer`` is the
  ``final_answer`` key of the run's final state *as the log records it* (a redacted answer is
  its commitment object): None when the final state has no ``final_answer``.
- ``wire_list_digest`` = ``H("seal/wires", canon([payload, ...]))`` over the payloads of the
  run's ``agentfootprint.wire.exchange`` events, in log order, as recorded: absent (None)
  when the run recorded none.

The ``run.seal`` row's body is ``{"dsse": <the envelope's JSON text>}``: the envelope's exact
bytes are the string's UTF-8, so its digest (the Merkle leaf's ``seal``) is well defined.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from agentfootprint.logformat.canonical import canon
from agentfootprint.logformat.hashing import hexdigest

__all__ = [
    "SEAL_ROW",
    "WIRE_EVENT",
    "final_answer_digest",
    "seal_body",
    "seal_envelope_bytes",
    "wire_list_digest",
]

#: the row type of a seal (log format v4)
SEAL_ROW: Final = "run.seal"
#: the event whose payloads the wire list digest covers
WIRE_EVENT: Final = "agentfootprint.wire.exchange"
_ANSWER_KEY: Final = "final_answer"


def final_answer_digest(recorded_state: Mapping[str, Any]) -> str | None:
    """The digest of the final answer as recorded, or None when the run has none."""
    if _ANSWER_KEY not in recorded_state:
        return None
    return hexdigest("seal/answer", canon(recorded_state[_ANSWER_KEY]))


def wire_list_digest(payloads: Sequence[Any]) -> str | None:
    """The digest of the run's recorded wire exchange payloads, or None with none."""
    if not payloads:
        return None
    return hexdigest("seal/wires", canon(list(payloads)))


def seal_body(envelope: bytes) -> dict[str, str]:
    """The ``run.seal`` body holding ``envelope`` (compact ASCII JSON, as written)."""
    return {"dsse": envelope.decode("ascii")}


def seal_envelope_bytes(body: Any) -> bytes | None:
    """The envelope bytes of a ``run.seal`` body, or None when the body is not exactly
    ``{"dsse": <string>}`` (the verifier names that as malformed)."""
    if type(body) is not dict or set(body) != {"dsse"} or type(body["dsse"]) is not str:
        return None
    try:
        return body["dsse"].encode("utf-8")
    except UnicodeEncodeError:
        return None
