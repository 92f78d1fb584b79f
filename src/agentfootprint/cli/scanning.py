"""``scan``: where given literals (a rotated token, a password, an address) sit in a log, a
bundle or a vault, in every form an encoder gives them."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from agentfootprint.audit.scan import (
    ScanReport,
    scan_files,
    scan_rows,
    scan_vault,
    sqlite_files,
)
from agentfootprint.cli._boundary import EXIT_INVALID, one_line
from agentfootprint.cli._common import (
    DB,
    INPUT_FILE,
    Database,
    echo_json,
    open_vault_argument,
    read_input,
)
from agentfootprint.errors import NotALogError, NotAVaultError, UsageError
from agentfootprint.exchange.transfer import open_log
from agentfootprint.logformat.literal_forms import MIN_LITERAL_BYTES, LiteralMatcher
from agentfootprint.verify.bundle import is_bundle

__all__ = ["scan_command"]

#: the most a literals file may be
MAX_LITERALS_BYTES = 1 << 20


def read_literals(path: Path) -> tuple[list[str], list[int]]:
    """The literals of a ``--literals`` file (one per line, stripped of the whitespace
    around it; blank lines skipped) and the line each is on. Messages never quote one."""
    data = read_input(path, "--literals", "literals file", MAX_LITERALS_BYTES)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(
            f"--literals: {one_line(path)} is not UTF-8 text (byte {exc.start})",
            option="literals",
        ) from None
    literals, lines = [], []
    for number, line in enumerate(text.removeprefix("\ufeff").splitlines(), start=1):
        literal = line.strip()
        if not literal:
            continue
        if len(literal.encode("utf-8", "surrogatepass")) < MIN_LITERAL_BYTES:
            raise UsageError(
                f"--literals: line {number} is shorter than {MIN_LITERAL_BYTES} bytes: a "
                "literal that short would be found in ordinary text",
                option="literals",
            )
        literals.append(literal)
        lines.append(number)
    if not literals:
        raise UsageError(
            f"--literals: {one_line(path)} holds no literal (one per line)", option="literals"
        )
    return literals, lines


@contextlib.contextmanager
def _opened(target: Database) -> Iterator[tuple[str, Any]]:
    """``("log" | "vault", what)``: the target opened for reading only."""
    if not isinstance(target, Path):
        postgres = target.postgres
        if postgres is not None and postgres.key_file is not None:
            with contextlib.closing(open_vault_argument(target, readonly=True)) as vault:
                yield "vault", vault
            return
    try:
        source = open_log(target, option="target")
    except NotALogError as not_a_log:
        if not isinstance(target, Path):
            raise
        try:
            vault = open_vault_argument(target, readonly=True)
        except NotAVaultError:
            raise not_a_log from None
        with contextlib.closing(vault):
            yield "vault", vault
        return
    with contextlib.closing(source):
        yield "log", source


@click.command("scan")
@click.argument("target", metavar="DB|BUNDLE|VAULT", type=DB)
@click.option(
    "--literals",
    "literals_file",
    type=INPUT_FILE,
    required=True,
    help="The literals to look for, one per line (UTF-8; the whitespace around each is "
    f"dropped; at least {MIN_LITERAL_BYTES} bytes each).",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
def scan_command(target: Database, literals_file: Path, as_json: bool) -> None:
    """Find given literals anywhere in DB, BUNDLE or VAULT, in every form an encoder
    gives them: "prove the rotated token is nowhere in our evidence".

    Every row's body is searched (a database's, or a bundle's event lines), every
    disclosure a vault holds (its value and key), and the file's own bytes (an SQLite
    file with its -wal, a bundle): text left in a free page or a WAL frame is found
    too. Each literal is looked for raw, JSON-escaped (canonical, \\uXXXX, \\/,
    Go's HTML-safe, escaped twice), in base64 and base64url (at any alignment),
    percent-encoded (and with +, and lowercase) and in hex. Not found: a value
    compressed, encrypted or hashed, base64 split across lines, a value split across
    rows or tokens, a paraphrase (docs/redaction.md).

    The output names each literal by its line in --literals, never by its text.
    DB, BUNDLE or VAULT is opened read-only and never changed. A PostgreSQL vault is read through
    its master key: postgresql://...?key_file=PATH.

    \b
    Exit codes:
      0  no literal found anywhere
      1  a literal was found: every row, disclosure and file offset is listed
      2  usage or I/O: the file or --literals missing or unreadable, a file that
         is neither a log, a bundle nor a vault, a literal shorter than 6 bytes
    """
    literals, lines = read_literals(literals_file)
    matcher = LiteralMatcher(literals)
    report = ScanReport(literals=len(literals), forms=matcher.forms)
    with _opened(target) as (kind, opened):
        if kind == "vault":
            scan_vault(opened, matcher, report)
        else:
            scan_rows(opened, matcher, report)
    if isinstance(target, Path):
        files = [target] if is_bundle(target) else sqlite_files(target)
        scan_files(files, matcher, report)
    if as_json:
        document = report.to_json()
        document["target"] = _shown(target)
        document["lines"] = lines  # the line of --literals each literal index is on
        for kind in ("rows", "disclosures", "bytes"):
            for hit in document[kind]:
                hit["line"] = lines[hit["literal"]]
        echo_json(document)
    else:
        _print(report, target, lines)
    if report.found:
        raise click.exceptions.Exit(EXIT_INVALID)


def _shown(target: Database) -> str:
    return one_line(target) if isinstance(target, Path) else target.shown()


def _print(report: ScanReport, target: Database, lines: list[int]) -> None:
    read = []
    if report.runs or not report.disclosures:
        read.append(f"{report.runs} runs ({report.rows} rows)")
    if report.disclosures:
        read.append(f"{report.disclosures} disclosures")
    if report.files:
        read.append(f"{len(report.files)} files ({report.bytes} bytes)")
    click.echo(
        f"scanned {_shown(target)}: {', '.join(read)}, for {report.literals} literals "
        f"({report.forms} encoded forms)"
    )
    for index in report.literals_found():
        click.echo(f"literal on line {lines[index]}:")
        for row in report.row_hits:
            if row.literal == index:
                where = f" {one_line(row.path)}" if row.path is not None else ""
                click.echo(
                    f"  run {one_line(row.run_id)} seq {row.seq} {row.type}{where}: {row.form}"
                )
        for entry in report.disclosure_hits:
            if entry.literal == index:
                click.echo(
                    f"  disclosure {entry.commitment} (key {one_line(entry.key)}): {entry.form}"
                )
        for hit in report.byte_hits:
            if hit.literal == index:
                times = "" if hit.count == 1 else f" ({hit.count} times)"
                click.echo(f"  {one_line(hit.file)} byte {hit.offset}: {hit.form}{times}")
    found = len(report.literals_found())
    click.echo(f"{found} of {report.literals} literals found" if found else "no literal found")
