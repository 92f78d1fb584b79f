"""Running a child process that file permissions bind, even when the tests run as root.

Root ignores permission bits through ``CAP_DAC_OVERRIDE`` (and ``CAP_DAC_READ_SEARCH``), so a
test of a read-only folder or an unreadable file proves nothing as root unless the process it
checks runs without them. :func:`unprivileged` prefixes a command with ``setpriv`` dropping
both, and skips the test (with the reason) where that cannot be done.
"""

from __future__ import annotations

import os
import shutil

import pytest

__all__ = ["DROP_DAC", "unprivileged"]

#: ``setpriv`` arguments that drop the capabilities root ignores permissions with
DROP_DAC = (
    "--inh-caps=-dac_override,-dac_read_search",
    "--bounding-set=-dac_override,-dac_read_search",
)


def unprivileged(command: list[str]) -> list[str]:
    """``command`` as it must be run for file permissions to apply to it (unchanged when not
    root; under ``setpriv`` without the DAC capabilities as root; skipped without setpriv)."""
    if os.geteuid() != 0:
        return command
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: cannot drop CAP_DAC_OVERRIDE")
    return [setpriv, *DROP_DAC, "--", *command]
