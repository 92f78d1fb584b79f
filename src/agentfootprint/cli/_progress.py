"""A progress bar on stderr for the commands that take a while (verify, export, import,
copy, replay, report).

It is drawn only when stderr is a terminal, and only once the work has taken longer than
``AGENTFOOTPRINT_PROGRESS_DELAY`` seconds (default 1; 0 draws at once, ``inf`` never): a
quick command, a pipe, a log file or a test harness sees nothing, and stdout is never
written to (its bytes are the same with or without a bar). The bar is erased when the work
ends, so the terminal keeps only the results.

Written here rather than taken from tqdm: what is needed is one line redrawn with ``\\r``
(counts, rate, time left), and a dependency would add a monitor thread and a
multiprocessing lock to every install of the verifier, auditors' machines included, for
about a hundred lines. The line is redrawn with spaces rather than terminal escapes, so a
console that knows none still shows it right.

The library reports its counts through ``on_progress(done, total)`` callbacks (the
verifier's whole-file loop, the bundle writer, the importer and copier, the replayer);
:meth:`Progress.at` is such a callback.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from typing import TextIO

import click

__all__ = ["DELAY_VARIABLE", "PROGRESS_EPILOG", "Progress", "progress", "progress_delay"]

DELAY_VARIABLE = "AGENTFOOTPRINT_PROGRESS_DELAY"
#: what the --help of a command that draws a bar says of it
PROGRESS_EPILOG = (
    "While it works, a progress bar is drawn on stderr if stderr is a terminal and the work "
    f"takes over a second ({DELAY_VARIABLE}=SECONDS sets the delay; inf: never); stdout is "
    "the same with or without it."
)
#: how long work runs before a bar is drawn, in seconds, when the variable is not set
DEFAULT_DELAY = 1.0
#: the least time between two redraws: a bar that moves faster is only slower to read
_REDRAW_EVERY = 0.1
#: the most columns the bar itself (``[####----]``) takes
_BAR_WIDTH = 30


def progress_delay() -> float:
    """The delay ``AGENTFOOTPRINT_PROGRESS_DELAY`` sets (seconds; a value that is not a
    number of at least 0 is ignored: a typo must not break a command)."""
    text = os.environ.get(DELAY_VARIABLE, "").strip()
    if not text:
        return DEFAULT_DELAY
    try:
        value = float(text)
    except ValueError:
        return DEFAULT_DELAY
    return value if value >= 0 else DEFAULT_DELAY  # NaN compares false: the default


def _is_terminal(stream: TextIO | None) -> bool:
    try:
        return stream is not None and stream.isatty()
    except (ValueError, OSError):  # closed or detached
        return False


def _clock(seconds: float) -> str:
    whole = int(seconds)
    minutes, secs = divmod(whole, 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class Progress:
    """One command's bar: advanced by ``bar(n)`` or set by ``bar.at(done, total)``.

    Without a terminal on stderr every method is a cheap no-op (nothing is measured or
    written), so commands call it unconditionally."""

    def __init__(
        self,
        stream: TextIO | None,
        *,
        total: int | None,
        desc: str,
        unit: str,
        delay: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._stream = stream if _is_terminal(stream) and not math.isinf(delay) else None
        self.total = total
        self.done = 0
        self._desc, self._unit, self._delay, self._clock = desc, unit, delay, clock
        self._start = clock()
        self._drawn_at: float | None = None  # None: not on the screen
        self._width = 0  # the columns the line on the screen takes

    @property
    def enabled(self) -> bool:
        """Whether a bar may be drawn at all (stderr is a terminal)."""
        return self._stream is not None

    def __call__(self, n: int = 1) -> None:
        """``n`` more units done."""
        if self._stream is not None:
            self.done += n
            self._tick()

    def at(self, done: int, total: int | None = None) -> None:
        """``done`` units of ``total`` (None: the total as it was): the form of the
        library's ``on_progress`` callbacks."""
        if self._stream is not None:
            self.done = done
            if total is not None:
                self.total = total
            self._tick()

    def after(self, offset: int) -> Callable[[int, int], None]:
        """An ``on_progress`` callback for one part of the work, whose own count lands
        after ``offset`` units of the bar (its own total is ignored: the bar's stays)."""
        return lambda done, _total: self.at(offset + done)

    def echo(self, line: str) -> None:
        """Print ``line`` on stdout as :func:`click.echo` does, with the bar erased first
        and drawn again below it when both share the terminal."""
        sharing = self._drawn_at is not None and _is_terminal(sys.stdout)
        if sharing:
            self._erase()
        click.echo(line)
        if sharing:
            self._draw(self._clock())

    def close(self) -> None:
        """Erase the bar: the terminal keeps only what the command printed."""
        if self._drawn_at is not None:
            self._erase()
            self._drawn_at = None

    # -- drawing ---------------------------------------------------------------------------

    def _tick(self) -> None:
        now = self._clock()
        if self._drawn_at is None:
            if now - self._start >= self._delay:
                self._draw(now)
        elif now - self._drawn_at >= _REDRAW_EVERY or self.done == self.total:
            self._draw(now)

    def line(self, now: float, columns: int) -> str:
        """The bar's text at ``now``, at most ``columns - 1`` characters (a line that
        filled the last column would wrap, and ``\\r`` would redraw the wrong line)."""
        elapsed = max(now - self._start, 0.0)
        rate = self.done / elapsed if elapsed > 0 else 0.0
        count = f"{self.done}" if self.total is None else f"{self.done}/{self.total}"
        parts = [f"{count} {self._unit}", f"{rate:.1f} {self._unit}/s", _clock(elapsed)]
        if self.total and rate > 0 and self.done < self.total:
            parts[-1] += f", {_clock((self.total - self.done) / rate)} left"
        tail = "  ".join(parts)
        room = columns - 1 - len(self._desc) - len(tail) - 6
        if self.total and room >= 10:
            width = min(room, _BAR_WIDTH)
            filled = min(width, width * self.done // self.total)
            bar = f"[{'#' * filled}{'-' * (width - filled)}]"
            text = f"{self._desc}  {bar}  {tail}"
        else:
            text = f"{self._desc}  {tail}"
        return text[: max(columns - 1, 0)]

    def _draw(self, now: float) -> None:
        assert self._stream is not None
        columns = 0
        with contextlib.suppress(OSError, ValueError):
            columns = os.get_terminal_size(self._stream.fileno()).columns
        if columns <= 0:  # a terminal that does not say its size: COLUMNS, or 80
            columns = shutil.get_terminal_size().columns
        text = self.line(now, columns)
        self._write("\r" + text.ljust(self._width))
        self._width = len(text)
        self._drawn_at = now

    def _erase(self) -> None:
        self._write("\r" + " " * self._width + "\r")
        self._width = 0

    def _write(self, text: str) -> None:
        assert self._stream is not None
        try:
            self._stream.write(text)
            self._stream.flush()
        except (OSError, ValueError):  # the terminal went away: the work goes on
            self._stream = None


@contextlib.contextmanager
def progress(total: int | None = None, *, desc: str, unit: str = "runs") -> Iterator[Progress]:
    """A bar for the work inside the block, erased when it ends (an error included)::

        with progress(len(run_ids), desc="verify", unit="runs") as bar:
            for run_id in run_ids:
                ...
                bar()  # or pass bar.at as a library call's on_progress

    Drawn on stderr only when it is a terminal, after ``AGENTFOOTPRINT_PROGRESS_DELAY``
    seconds."""
    bar = Progress(sys.stderr, total=total, desc=desc, unit=unit, delay=progress_delay())
    try:
        bar.at(0)  # with no delay, drawn at once: 0 of total, before the first unit is done
        yield bar
    finally:
        bar.close()
