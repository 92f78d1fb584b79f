"""The size limits of the log format: one body limit, from which every other bound follows.

``MAX_BODY_BYTES`` bounds the canonical body of any event the writer records
(``store.writer.RunWriter`` refuses a larger one with ``RecordTooLargeError`` before anything
is appended). A bundle line holds one body as a JSON string plus an envelope (member names,
run id, type, seq, ts, both hashes); the writer also refuses an event whose envelope would
exceed ``MAX_ENVELOPE_BYTES`` (in practice: a run id of tens of kilobytes). A canonical body
holds no control character, and JSON string escaping writes every other byte as itself or,
for ``"`` and ``\\``, as two: so a line is at most ``2 * MAX_BODY_BYTES + MAX_ENVELOPE_BYTES``
= ``MAX_BUNDLE_LINE_BYTES``, every run the writer records can be exported, and a reader
never holds more than one bounded line. The bundle reader refuses any longer line (the
manifest and the trailer too) without reading it whole. docs/log-format.md states all three.

The values are read at each use (``limits.MAX_BODY_BYTES``), never copied at import, so one
setting governs the writer, the exporter and the reader.
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
