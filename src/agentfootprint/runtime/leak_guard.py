"""The writer's guard against secrets: what a run was handed to keep out of its record (the
credentials it vended) never reaches a state value, an event, an error record or a listener.

Everything a run records passes the guard first: each value written to state (the scope
checks the JSON it copies the value through anyway), each event before it is recorded or
delivered, each error record. The check is one regular-expression pass over those bytes
looking for every form of every secret (raw, JSON-escaped, base64 at three alignments,
URL-encoded, hex: :mod:`agentfootprint.logformat.literal_forms`, the forms ``agentfootprint
scan`` searches). A value that holds one has each occurrence replaced by :data:`WITHHELD`
before it is recorded *and* before the run goes on with it, so the state the model is served
from is the state the log holds: the verifier rebuilds the same requests. A run that vended
nothing pays nothing.

What it cannot see: a secret transformed (hashed, compressed, encrypted, reversed, split
across values, or across the chunks of a streamed reply), or in an encoding the forms do not
list (docs/redaction.md, "What a literal search cannot see").
"""

from __future__ import annotations

import functools
from typing import Any, Final

import orjson

from agentfootprint.logformat.literal_forms import MIN_LITERAL_BYTES, LiteralMatcher
from agentfootprint.logformat.shared_lists import SharedList, as_list

__all__ = ["WITHHELD", "LeakGuard"]

#: what stands in a recorded value where a secret was
WITHHELD: Final = "[credential withheld]"

_ROUNDS: Final = 4
_PLACEHOLDER: Final = WITHHELD.encode()
#: what stands for a whole text the rounds could not clear: shorter than any secret
_SHORT: Final = "[…]".encode()

#: switched on only by :func:`agentfootprint.testing.leaks.guard_switched_off`, so that a
#: test can show its sweep finds what the guard keeps out (never set it otherwise)
SWITCHED_OFF_FOR_TESTS = False


@functools.lru_cache(maxsize=16)
def _matcher(secrets: tuple[str, ...]) -> LiteralMatcher:
    """The matcher of these secrets, built once for the runs that vend the same ones (each
    turn of a conversation asks the service again; building the forms and the pattern is
    most of what the guard costs a short run). The secrets are held no longer than the
    credential service itself holds them: the last 16 sets."""
    return LiteralMatcher(list(secrets))


class LeakGuard:
    """The secrets of one run, and the check every recorded value passes."""

    __slots__ = ("_matcher", "_placeholder", "_secrets", "hits")

    def __init__(self) -> None:
        self._secrets: list[str] = []
        self._matcher: LiteralMatcher | None = None
        self._placeholder = _PLACEHOLDER
        #: where the guard withheld something since the last :meth:`take_hits`
        self.hits: list[str] = []

    @property
    def active(self) -> bool:
        """Some secret is kept out (else every check is skipped)."""
        return self._matcher is not None

    def withhold(self, secret: str) -> None:
        """Keep ``secret`` out of everything the run records from now on. A secret shorter
        than ``MIN_LITERAL_BYTES`` is refused (its forms would match ordinary text)."""
        if len(secret.encode("utf-8", "surrogatepass")) < MIN_LITERAL_BYTES:
            raise ValueError(
                f"a secret shorter than {MIN_LITERAL_BYTES} bytes cannot be kept out of the log"
            )
        if SWITCHED_OFF_FOR_TESTS or secret in self._secrets:
            return
        self._secrets.append(secret)
        self._matcher = _matcher(tuple(self._secrets))
        # a secret the placeholder itself would spell is withheld by a shorter one
        self._placeholder = _SHORT if self._matcher.find(_PLACEHOLDER) else _PLACEHOLDER

    def holds(self, encoded: bytes) -> bool:
        """``encoded`` (JSON bytes of a value) holds a secret in some form."""
        return self._matcher is not None and bool(self._matcher.find(encoded))

    def checked(self, value: Any, where: str, *, note: bool = True) -> Any:
        """``value`` as it may be recorded: itself, or a copy with every secret withheld
        (noting ``where``, unless ``note`` is False: a copy for listeners only)."""
        if self._matcher is None:
            return value
        if not self.holds(orjson.dumps(value, default=as_list)):
            return value
        return self.masked(value, where, note=note)

    def masked(self, value: Any, where: str, *, note: bool = True) -> Any:
        """A copy of ``value`` (JSON) with every form of every secret replaced by
        :data:`WITHHELD`, in strings and in keys; ``where`` is noted as a hit."""
        if note:
            self.hits.append(where)
        return self._mask(value)

    def _mask(self, value: Any) -> Any:
        kind = type(value)
        if kind is str:
            return self._mask_text(value)
        if kind is dict:
            return {self._mask_text(k): self._mask(v) for k, v in value.items()}
        if kind is list or kind is SharedList:  # (a state list held as versions)
            return [self._mask(v) for v in value]
        return value

    def _mask_text(self, text: str) -> str:
        """``text`` with every occurrence withheld; again while what is left still holds a
        form (the text around a cut can close on a new one), and wholly after a few rounds."""
        matcher = self._matcher
        assert matcher is not None
        data = text.encode("utf-8", "surrogatepass")
        for _ in range(_ROUNDS):
            spans = sorted((start, end) for start, end, _ in matcher.offsets(data))
            if not spans:
                return data.decode("utf-8", "replace")
            out, at = bytearray(), 0
            for start, end in spans:
                if end <= at:
                    continue  # inside a span already withheld
                out += data[at : max(start, at)] + (self._placeholder if start >= at else b"")
                at = end
            out += data[at:]
            data = bytes(out)
        return self._placeholder.decode()

    def take_hits(self) -> list[str]:
        """Where the guard withheld something since the last call (and forget them)."""
        hits, self.hits = self.hits, []
        return hits
