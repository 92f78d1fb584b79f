"""The size limits of the log format: one body limit, from which every other bound follows.

``MAX_BODY_BYTES`` bounds the canonical body of any event the writer records. A bundle
line holds one body as a JSON string (a canonical body has no raw control characters, so
escaping at most doubles it) plus a fixed-size envelope, so ``MAX_BUNDLE_LINE_BYTES``
follows from it: every run a writer could record can be exported, and a reader never has
to hold more than one bounded line. docs/log-format.md states both.
"""

from __future__ import annotations

from typing import Final

__all__ = ["MAX_BODY_BYTES", "MAX_BUNDLE_LINE_BYTES", "MAX_ENVELOPE_BYTES"]

#: Largest canonical body (bytes) of one event.
MAX_BODY_BYTES: Final = 64 * 1024 * 1024
#: What a bundle line may add around its body (run id, type, seq, ts, hashes, keys).
MAX_ENVELOPE_BYTES: Final = 64 * 1024
#: Largest bundle line (bytes, newline excluded).
MAX_BUNDLE_LINE_BYTES: Final = 2 * MAX_BODY_BYTES + MAX_ENVELOPE_BYTES
