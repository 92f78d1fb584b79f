"""The package version, and how to add an extra to this install, at the bottom of the layers
so any layer may record the one or say the other."""

from __future__ import annotations

import functools

__all__ = ["__version__", "command_for", "install_command", "source_of"]

__version__ = "0.1.0"


def install_command(extra: str) -> str:
    """The ``pip install`` line that adds ``extra`` to *this* install: from the folder an
    editable or local install came from (a clone), else the published package."""
    return command_for(extra, _local_source())


def command_for(extra: str, source: tuple[str, bool] | None) -> str:
    """The line for an install from ``source`` (:func:`source_of`; None: an index)."""
    if source is None:
        return f'pip install "agentfootprint[{extra}]"'
    editable = "-e " if source[1] else ""
    return f'pip install {editable}"{source[0]}[{extra}]"'


@functools.cache
def _local_source() -> tuple[str, bool] | None:
    """The folder this package was installed from, and whether editable; None for an
    install from an index. The import waits for the question: every command imports this
    module."""
    from importlib import metadata

    try:
        text = metadata.distribution("agentfootprint").read_text("direct_url.json")
    except (metadata.PackageNotFoundError, OSError):
        return None
    return source_of(text)


def source_of(direct_url: str | None) -> tuple[str, bool] | None:
    """The local folder and editable flag a PEP 610 ``direct_url.json`` names (None: not a
    local folder, or nothing readable)."""
    import json
    from urllib.parse import unquote, urlparse

    try:
        found = json.loads(direct_url) if direct_url else None
    except ValueError:
        return None
    if not isinstance(found, dict) or not isinstance(found.get("dir_info"), dict):
        return None
    url = urlparse(str(found.get("url", "")))
    if url.scheme != "file" or not url.path:
        return None
    return unquote(url.path), found["dir_info"].get("editable") is True
