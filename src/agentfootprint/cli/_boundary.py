"""The one error boundary every command runs inside, and the exit codes it maps to.

A project error becomes one ``Error: ...`` line on stderr and its documented exit code;
anything unexpected is an "internal error" line with exit 2, never a traceback (set
``AGENTFOOTPRINT_DEBUG=1`` to get the traceback instead). A click usage error (a missing
argument, an unknown option, a bad value) is one such line too, exit 2, not click's usage
block. Commands that report verdicts print a :class:`VerificationError` as an ``INVALID``
line on stdout, as their own verdict lines are; a command asked for ``--json`` prints every
failure as one JSON object on stdout instead (docs/log-format.md section 9.6).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any, NoReturn, TypeVar

import click
import orjson

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
    "JSON_ERRORS",
    "VERDICT_WIDTH",
    "BoundaryGroup",
    "fail",
    "invalid_line",
    "json_errors",
    "one_line",
    "verdict_word",
    "verification_message",
]

EXIT_OK, EXIT_INVALID, EXIT_USAGE, EXIT_UNSEALED = 0, 1, 2, 3
EXIT_DIFFERENT = 1  # replay diverged / diff found a difference (the same code as INVALID)
EXIT_INTERRUPTED = 130  # Ctrl-C: never 1, which means INVALID

DEBUG_VARIABLE = "AGENTFOOTPRINT_DEBUG"

#: the width of a verdict line's first column (VALID, UNSEALED, INVALID, CONSISTENT,
#: PROVEN): the one it has always had, so scripts that cut the columns keep working
VERDICT_WIDTH = 15

#: commands whose output is verdict lines: a VerificationError is one more of them
VERDICT_COMMANDS = frozenset({"verify", "demo", "diff", "replay"})

#: ``ctx.meta`` key: True when the command prints its failures as one JSON object
JSON_ERRORS = "agentfootprint.json_errors"
#: commands whose ``--json`` covers failures too (before their options are parsed, a
#: ``--json`` among the arguments decides)
_JSON_COMMANDS = frozenset({"verify", "show"})
_ARGS = "agentfootprint.args"
#: click 8.2+: a group given no arguments prints its help (exit 2), which stays
_HELP_ERRORS: tuple[type[Exception], ...] = tuple(
    error
    for error in (getattr(click.exceptions, "NoArgsIsHelpError", None),)
    if isinstance(error, type)
)


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


def verdict_word(word: str) -> str:
    """A verdict line's first column: ``word`` padded to :data:`VERDICT_WIDTH`, so every
    verdict line of a command puts what it is about in one column."""
    return f"{word:<{VERDICT_WIDTH}}"


def invalid_line(exc: VerificationError) -> str:
    """The verdict line of a failed verification, aligned with the other verdict lines."""
    return f"{verdict_word('INVALID')} {verification_message(exc)}"


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    """Print ``Error: message`` on stderr and exit with ``code``."""
    click.echo(f"Error: {one_line(message)}", err=True)
    raise click.exceptions.Exit(code)


def json_errors(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
    """Callback of an eager ``--json`` flag: the command's failures, from then on, are
    printed as one JSON object (:class:`BoundaryGroup`)."""
    ctx.meta[JSON_ERRORS] = bool(value)
    return value


FC = TypeVar("FC", bound=Callable[..., Any])


def json_flag(help: str) -> Callable[[FC], FC]:
    """A command's ``--json`` flag (``json_out``): eager, so that the command's failures,
    usage errors included, are JSON too (:func:`json_errors`)."""
    return click.option(
        "--json", "json_out", is_flag=True, is_eager=True, callback=json_errors, help=help
    )


def _wants_json(ctx: click.Context) -> bool:
    chosen = ctx.meta.get(JSON_ERRORS)
    if chosen is not None:
        return bool(chosen)
    if ctx.invoked_subcommand not in _JSON_COMMANDS:
        return False
    args: Sequence[str] = ctx.meta.get(_ARGS, ())
    given = list(args)[: list(args).index("--")] if "--" in args else args
    return "--json" in given  # the options did not parse: as the user asked


def _usage_message(exc: click.ClickException) -> str:
    """A click error as one line, with where to find the usage instead of click's block."""
    message = exc.format_message()
    where = getattr(exc, "ctx", None)
    if isinstance(where, click.Context):
        message = f"{message.rstrip('.')} (see '{where.command_path} --help')"
    return message


def _fail_in(
    ctx: click.Context,
    message: str,
    code: int,
    *,
    error_code: str = "usage",
    verification: VerificationError | None = None,
) -> NoReturn:
    """End the command with ``code``: one ``Error:`` line on stderr (an ``INVALID`` line
    on stdout for a verdict command's VerificationError); under ``--json``, one JSON object
    on stdout as well (section 9.6), and no ``INVALID`` line."""
    if _wants_json(ctx):
        found = {
            "code": verification.code if verification is not None else error_code,
            "run_id": (verification.run_id or None) if verification is not None else None,
            "seq": verification.seq if verification is not None else None,
            "reason": str(verification) if verification is not None else one_line(message),
        }
        document = {"runs": [], "exit": code, "error": found}
        click.echo(orjson.dumps(document, option=orjson.OPT_INDENT_2).decode())
        if verification is not None and ctx.invoked_subcommand in VERDICT_COMMANDS:
            raise click.exceptions.Exit(code)
    elif verification is not None and ctx.invoked_subcommand in VERDICT_COMMANDS:
        click.echo(invalid_line(verification))
        raise click.exceptions.Exit(code)
    fail(message, code)


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
    """A click group whose subcommands run inside the error boundary, listed in ``--help``
    by what they are for (``sections``: title -> command names, after a ``start`` line),
    each with its first sentence whole (click's own listing cuts it to one line)."""

    #: the --help sections, in order: (title, command names); set by the program
    sections: tuple[tuple[str, tuple[str, ...]], ...] = ()
    #: the line above them, saying where to begin
    start: str = ""

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        if not self.sections:
            super().format_commands(ctx, formatter)
            return
        if self.start:
            with formatter.section("Start here"):
                formatter.write_text(self.start)
        listed: set[str] = set()
        for title, names in self.sections:
            rows = []
            for name in names:
                command = self.get_command(ctx, name)
                if command is None or command.hidden:
                    continue
                listed.add(name)
                rows.append((name, first_sentence(command)))
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)
        rest = [n for n in self.list_commands(ctx) if n not in listed]
        if rest:  # a command no section names is still listed
            with formatter.section("Other commands"):
                formatter.write_dl(
                    [(n, first_sentence(c)) for n in rest if (c := self.get_command(ctx, n))]
                )

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except _HELP_ERRORS:
            raise
        except click.ClickException as exc:  # the group's own options: one line, exit 2
            fail(_usage_message(exc), EXIT_USAGE)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        ctx.meta[_ARGS] = list(args)  # what --json failures fall back on (_wants_json)
        return super().resolve_command(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.exceptions.Exit:
            raise  # the commands' own exits pass through
        except _HELP_ERRORS:
            raise
        except click.ClickException as exc:
            _fail_in(ctx, _usage_message(exc), EXIT_USAGE)
        except (KeyboardInterrupt, click.exceptions.Abort):
            _fail_in(ctx, "interrupted", EXIT_INTERRUPTED, error_code="interrupted")
        except VerificationError as exc:
            if ctx.invoked_subcommand in VERDICT_COMMANDS:
                _fail_in(ctx, verification_message(exc), EXIT_INVALID, verification=exc)
            _fail_in(
                ctx,
                f"the log does not verify: {verification_message(exc)}",
                EXIT_INVALID,
                verification=exc,
            )
        except ReplayDivergence as exc:
            _fail_in(ctx, _error_message(exc), EXIT_DIFFERENT, error_code="diverged")
        except AgentFootprintError as exc:
            _fail_in(ctx, _error_message(exc), EXIT_USAGE)
        except OSError as exc:
            _fail_in(ctx, _os_message(exc), EXIT_USAGE)
        except Exception as exc:
            if os.environ.get(DEBUG_VARIABLE) == "1":
                raise
            _fail_in(
                ctx,
                f"internal error: {type(exc).__name__}: {exc} (please report it, with "
                f"{DEBUG_VARIABLE}=1 set for the traceback)",
                EXIT_USAGE,
                error_code="internal",
            )


def first_sentence(command: click.Command) -> str:
    """A command's first sentence, whole: what ``--help`` lists it with."""
    if command.short_help:
        return command.short_help
    text = " ".join((command.help or "").split("\n\n")[0].split())
    end = text.find(". ")
    return text if end < 0 else text[: end + 1]
