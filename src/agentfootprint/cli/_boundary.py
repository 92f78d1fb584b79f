"""The one error boundary every command runs inside, and the exit codes it maps to.

A project error becomes one ``Error: ...`` line on stderr and its documented exit code;
anything unexpected is an "internal error" line with exit 2, never a traceback (set
``AGENTFOOTPRINT_DEBUG=1`` to get the traceback instead). Commands that report verdicts
print a :class:`VerificationError` as an ``INVALID`` line on stdout, as their own
verdict lines are.
"""

from __future__ import annotations

import os
from typing import Any, NoReturn

import click

from agentfootprint.errors import (
    AgentFootprintError,
    FileError,
    ReplayDivergence,
    VerificationError,
)

__all__ = [
    "DEBUG_VARIABLE",
    "EXIT_DIFFERENT",
    "EXIT_INTERRUPTED",
    "EXIT_INVALID",
    "EXIT_OK",
    "EXIT_UNSEALED",
    "EXIT_USAGE",
    "BoundaryGroup",
    "fail",
    "invalid_line",
    "one_line",
    "verification_message",
]

EXIT_OK, EXIT_INVALID, EXIT_USAGE, EXIT_UNSEALED = 0, 1, 2, 3
EXIT_DIFFERENT = 1  # replay diverged / diff found a difference (the same code as INVALID)
EXIT_INTERRUPTED = 130  # Ctrl-C: never 1, which means INVALID

DEBUG_VARIABLE = "AGENTFOOTPRINT_DEBUG"

#: commands whose output is verdict lines: a VerificationError is one more of them
VERDICT_COMMANDS = frozenset({"verify", "demo", "diff", "replay"})


def one_line(text: object) -> str:
    """``text`` on one line with control characters escaped: a message may quote bytes
    from a hostile file (a run id holding a newline or a terminal escape)."""
    out = []
    for char in str(text).strip():
        if char == "\n":
            out.append(" | ")
        elif char == "\t" or char.isprintable() or char == " ":
            out.append(char)
        else:
            out.append(char.encode("unicode_escape").decode("ascii"))
    return "".join(out)


def verification_message(exc: VerificationError) -> str:
    """Where and why, one line, with the failure code (docs/log-format.md, section 9) in
    brackets unless it is the generic ``invalid``."""
    code = f" [{one_line(exc.code)}]" if exc.code and exc.code != "invalid" else ""
    return one_line(exc) + code


def invalid_line(exc: VerificationError) -> str:
    """The verdict line of a failed verification (the width of ``VALID_UNSIGNED`` lines)."""
    return f"{'INVALID':<15} {verification_message(exc)}"


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    """Print ``Error: message`` on stderr and exit with ``code``."""
    click.echo(f"Error: {one_line(message)}", err=True)
    raise click.exceptions.Exit(code)


def _os_message(exc: OSError) -> str:
    reason = exc.strerror or type(exc).__name__
    if exc.filename is None:
        return f"{reason} ({one_line(exc)})"
    where = os.fsdecode(exc.filename)
    if exc.filename2 is not None:
        where += f" -> {os.fsdecode(exc.filename2)}"
    return f"{where}: {reason}"


def _error_message(exc: AgentFootprintError) -> str:
    message = str(exc)
    if isinstance(exc, ReplayDivergence) and exc.diff:
        message = message.removesuffix("\n" + exc.diff)
    path = getattr(exc, "path", None) if isinstance(exc, FileError) else None
    if path and os.fspath(path) not in message:
        message = f"{os.fspath(path)}: {message}"
    return message


class BoundaryGroup(click.Group):
    """A click group whose subcommands run inside the error boundary."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise  # usage errors (exit 2) and the commands' own exits pass through
        except KeyboardInterrupt:
            click.echo("Error: interrupted", err=True)
            raise click.exceptions.Exit(EXIT_INTERRUPTED) from None
        except VerificationError as exc:
            if ctx.invoked_subcommand in VERDICT_COMMANDS:
                click.echo(invalid_line(exc))
                raise click.exceptions.Exit(EXIT_INVALID) from None
            fail(f"the log does not verify: {verification_message(exc)}", EXIT_INVALID)
        except ReplayDivergence as exc:
            fail(_error_message(exc), EXIT_DIFFERENT)
        except AgentFootprintError as exc:
            fail(_error_message(exc), EXIT_USAGE)
        except OSError as exc:
            fail(_os_message(exc), EXIT_USAGE)
        except Exception as exc:
            if os.environ.get(DEBUG_VARIABLE) == "1":
                raise
            fail(
                f"internal error: {type(exc).__name__}: {exc} (please report it, with "
                f"{DEBUG_VARIABLE}=1 set for the traceback)",
                EXIT_USAGE,
            )
