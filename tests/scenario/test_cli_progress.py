"""The progress bar of the long commands (verify, export, import, copy, replay): drawn on
stderr when it is a terminal, never when it is a pipe, and stdout the same bytes either way.

Each command runs twice in a child process with ``AGENTFOOTPRINT_PROGRESS_DELAY=0`` (so no
test waits or depends on timing): once with stderr on a pseudo-terminal (stdout a pipe),
once with both on pipes. Then the helper itself with a clock the test moves.
"""

from __future__ import annotations

import io
import os
import shutil
import struct
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from agentfootprint.cli._progress import DELAY_VARIABLE, Progress, progress, progress_delay

# a pseudo-terminal is POSIX's
fcntl = pytest.importorskip("fcntl")
pty = pytest.importorskip("pty")
termios = pytest.importorskip("termios")

VECTORS = Path(__file__).resolve().parents[1] / "vectors"
GOLDEN = Path(__file__).resolve().parents[1] / "data" / "golden" / "demo.db"
CLI = [sys.executable, "-m", "agentfootprint.cli"]
#: a replay agent whose replay run has a fixed id and clock: its stdout is the same each time
FACTORY = textwrap.dedent(
    """
    import agentfootprint as af
    from agentfootprint.agent.demo import build_demo_agent


    def fixed():
        ports = af.Ports(run_ids=lambda: "replayed-run", clock=lambda: 1700000000000)
        return build_demo_agent(None, ports=ports)
    """
)


def _drain(fd: int, into: bytearray) -> None:
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # EIO: every writer closed the terminal
            return
        if not chunk:
            return
        into.extend(chunk)


def _run(args: list[str], cwd: Path, *, terminal: bool) -> tuple[int, bytes, bytes]:
    """Exit code, stdout, and what stderr got (the terminal's bytes, or the pipe's)."""
    env = {**os.environ, DELAY_VARIABLE: "0"}
    if not terminal:
        done = subprocess.run(
            [*CLI, *args], cwd=cwd, env=env, capture_output=True, stdin=subprocess.DEVNULL,
            timeout=300,
        )  # fmt: skip
        return done.returncode, done.stdout, done.stderr
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    shown = bytearray()
    reader = threading.Thread(target=_drain, args=(master, shown), daemon=True)
    try:
        with subprocess.Popen(
            [*CLI, *args],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=slave,
        ) as child:
            os.close(slave)
            slave = -1
            reader.start()
            assert child.stdout is not None
            out = child.stdout.read()
            code = child.wait(timeout=300)
        reader.join(timeout=300)
    finally:
        if slave >= 0:
            os.close(slave)
        os.close(master)
    return code, out, bytes(shown)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    shutil.copyfile(VECTORS / "valid.db", tmp_path / "valid.db")  # three runs, one continued
    shutil.copyfile(GOLDEN, tmp_path / "demo.db")
    (tmp_path / "fixed_replay.py").write_text(FACTORY)
    return tmp_path


def _last_run(db: Path) -> str:
    import agentfootprint as af

    with af.SqliteStore(db, readonly=True) as store:
        return str(list(store.run_ids())[-1])


#: command -> (its arguments, what it leaves to remove before it runs again, the count the
#: bar ends at)
COMMANDS = {
    "verify": (["verify", "valid.db"], [], b"3/3 runs"),
    "export": (
        ["export", "valid.db", "--run", "LAST", "--out", "out.afp"],
        ["out.afp"],
        b"1/1 runs",
    ),
    "import": (["import", "in.afp", "new.db"], ["new.db"], b"3/3 steps"),
    "copy": (["copy", "valid.db", "copy.db"], ["copy.db"], b"9/9 steps"),
    "replay": (
        ["replay", "demo.db", "DEMO_LAST", "--agent", "fixed_replay:fixed"],
        [],
        b"2/2 calls",
    ),
    "report": (["report", "valid.db", "--out", "report.html"], ["report.html"], b"3/3 runs"),
}


@pytest.mark.parametrize("name", list(COMMANDS))
def test_the_bar_is_on_a_terminal_only_and_stdout_is_the_same(folder: Path, name: str) -> None:
    args, leftovers, count = COMMANDS[name]
    args = [
        _last_run(folder / "valid.db")
        if a == "LAST"
        else _last_run(folder / "demo.db")
        if a == "DEMO_LAST"
        else a
        for a in args
    ]
    if name == "import":  # a bundle to import: one run
        done = subprocess.run(
            [*CLI, "export", "valid.db", "--run", _last_run(folder / "valid.db"), "--out",
             "in.afp"],
            cwd=folder, capture_output=True, timeout=300,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
    outputs = []
    for terminal in (True, False):
        for leftover in leftovers:
            (folder / leftover).unlink(missing_ok=True)
        code, out, err = _run(args, folder, terminal=terminal)
        assert code == 0, (out, err)
        outputs.append(out)
        if terminal:
            assert b"\r" + name.encode() + b"  " in err, err  # the bar, drawn
            assert count in err, err
            assert err.endswith(b"\r"), err  # and erased: the terminal keeps the results
        else:
            assert err == b"", err  # a pipe gets nothing
    assert outputs[0] == outputs[1] and outputs[0]


def test_verify_json_is_the_same_under_a_bar(folder: Path) -> None:
    shown = _run(["verify", "valid.db", "--json"], folder, terminal=True)
    piped = _run(["verify", "valid.db", "--json"], folder, terminal=False)
    assert shown[0] == piped[0] == 0 and shown[1] == piped[1]
    assert b"3/3 runs" in shown[2] and piped[2] == b""


# -- the helper, with a clock the test moves --------------------------------------------------


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_nothing_is_drawn_before_the_delay_then_the_bar_is() -> None:
    screen, clock = Terminal(), Clock()
    bar = Progress(screen, total=4, desc="verify", unit="runs", delay=1.0, clock=clock)
    bar()
    clock.now += 0.5
    bar()
    assert screen.getvalue() == ""  # half a second: nothing
    clock.now += 0.6
    bar()
    drawn = screen.getvalue()
    assert drawn.startswith("\rverify  [") and "3/4 runs" in drawn and "left" in drawn
    bar.close()
    assert screen.getvalue().endswith("\r") and len(screen.getvalue()) > len(drawn)


def test_no_terminal_no_bar(monkeypatch: pytest.MonkeyPatch) -> None:
    pipe, clock = io.StringIO(), Clock()
    bar = Progress(pipe, total=2, desc="copy", unit="steps", delay=0.0, clock=clock)
    assert not bar.enabled
    bar.at(1, 2)
    bar()
    bar.close()
    assert pipe.getvalue() == ""
    never = Progress(Terminal(), total=2, desc="copy", unit="steps", delay=float("inf"))
    assert not never.enabled


def test_the_line_fits_the_terminal_and_says_counts_and_rate() -> None:
    clock = Clock()
    bar = Progress(Terminal(), total=None, desc="export", unit="runs", delay=0, clock=clock)
    bar.at(5)
    clock.now += 2
    assert bar.line(clock(), 80) == "export  5 runs  2.5 runs/s  0:02"
    bar.at(5, 10)
    line = bar.line(clock(), 80)
    assert "5/10 runs" in line and "2.5 runs/s" in line and "0:02 left" in line
    bar_text = line.split("[", 1)[1].split("]", 1)[0]
    assert bar_text.count("#") == len(bar_text) // 2 and set(bar_text) == {"#", "-"}
    assert len(bar.line(clock(), 30)) == 29  # never the last column: it would wrap
    assert "[" not in bar.line(clock(), 40)  # too narrow for a bar: the counts alone
    parts = bar.after(10)
    parts(3, 99)
    assert (bar.done, bar.total) == (13, 10)


@pytest.mark.parametrize(
    ("value", "delay"),
    [("", 1.0), ("0", 0.0), ("2.5", 2.5), ("inf", float("inf")), ("soon", 1.0), ("-1", 1.0)],
)
def test_the_delay_variable(monkeypatch: pytest.MonkeyPatch, value: str, delay: float) -> None:
    monkeypatch.setenv(DELAY_VARIABLE, value)
    assert progress_delay() == delay


def test_a_line_on_the_same_terminal_is_printed_above_the_bar(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """stdout and stderr on one terminal: the bar is erased before the line and drawn again
    below it, so the line never starts after the bar's text."""
    screen, out, clock = Terminal(), Terminal(), Clock()
    monkeypatch.setattr(sys, "stdout", out)
    bar = Progress(screen, total=2, desc="verify", unit="runs", delay=0, clock=clock)
    bar.at(1)
    before = screen.getvalue()
    bar.echo("VALID           run r: ...")
    assert out.getvalue() == "VALID           run r: ...\n"
    after = screen.getvalue()[len(before) :]
    erased, drawn = [part for part in after.split("\r") if part]
    assert erased.strip() == "" and drawn.startswith("verify  [") and "1/2 runs" in drawn


def test_the_bar_is_erased_when_the_work_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    screen = Terminal()
    monkeypatch.setattr(sys, "stderr", screen)
    monkeypatch.setenv(DELAY_VARIABLE, "0")
    with pytest.raises(RuntimeError), progress(3, desc="verify") as bar:
        bar(3)  # the last unit: drawn whenever it comes
        raise RuntimeError("stopped")
    drawn = screen.getvalue()
    assert "3/3 runs" in drawn and drawn.endswith("\r")
    assert drawn.rsplit("\r", 2)[1].strip() == ""  # the last write is spaces: the line erased


def test_the_library_counts_reach_their_totals(folder: Path) -> None:
    """What the bars are fed: each ``on_progress`` call counts up, and the last one is the
    whole of the work (verify_all: runs; export: runs asked for; import: two steps a run;
    copy: three)."""
    import agentfootprint as af
    from agentfootprint.exchange.transfer import copy_runs, export_runs, import_bundle

    def counted() -> tuple[list[tuple[int, int]], Callable[[int, int], None]]:
        seen: list[tuple[int, int]] = []
        return seen, lambda done, total: seen.append((done, total))

    def finished(seen: list[tuple[int, int]], total: int) -> None:
        assert seen and seen[-1] == (total, total), seen
        assert [d for d, _ in seen] == sorted(d for d, _ in seen), seen

    with af.SqliteStore(folder / "valid.db", readonly=True) as store:
        seen, tick = counted()
        list(af.Verifier(store).verify_all(on_progress=tick))
        finished(seen, 3)
        seen, tick = counted()
        runs = [str(r) for r in store.run_ids()]
        export_runs(store, runs, folder / "all.afp", on_progress=tick)
        finished(seen, 3)
        seen, tick = counted()
        with af.SqliteStore(folder / "copy.db") as target:
            copy_runs(store, target, on_progress=tick)
        finished(seen, 9)
    seen, tick = counted()
    with af.BundleSource(folder / "all.afp") as bundle, af.SqliteStore(folder / "in.db") as into:
        import_bundle(bundle, into, on_progress=tick)
    finished(seen, 6)
