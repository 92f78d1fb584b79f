"""What the fake vendor servers share: the request record and the quiet threaded server."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from typing import Any

__all__ = ["QuietServer", "Received"]


@dataclass(frozen=True, slots=True)
class Received:
    """One request as a fake server received it: ``body`` is the exact bytes; header names
    are lowercased."""

    method: str
    path: str
    headers: Mapping[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def streaming(self) -> bool:
        """The request asked for a stream (``"stream": true`` in its JSON body)."""
        try:
            return self.json().get("stream") is True
        except (ValueError, AttributeError):
            return False


class QuietServer(ThreadingHTTPServer):
    """Quiet about clients that went away (a timeout, a cancelled call): that is scripted."""

    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)
