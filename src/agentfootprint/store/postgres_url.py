"""``postgresql://`` URLs: what this library reads out of them, what it hands to libpq.

A URL is libpq's own (``postgresql://user:password@host:port/dbname?param=value``, every
libpq parameter allowed) plus two parameters of this library's, taken out before the rest
reaches libpq: ``durability=full|normal`` (a log's) and ``key_file=PATH`` (a vault's master
key file, :class:`~agentfootprint.store.postgres_vault.PostgresVault`). ``postgres://`` and
SQLAlchemy's ``postgresql+psycopg://`` spellings name the same thing. Nothing here connects: parsing
needs no server and no driver beyond psycopg's conninfo parser. Messages never echo a URL
(it may hold a password): :func:`display` is the URL without it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

from agentfootprint.version import install_command

__all__ = ["PostgresLocation", "PostgresURLError", "display", "parse_postgres_url", "with_database"]

_DURABILITY = ("full", "normal")
#: libpq parameters whose values are never shown
_SECRET_PARAMETERS = frozenset({"password", "sslpassword"})
_SCHEME = re.compile(r"^(postgresql|postgres)(\+[A-Za-z0-9_]+)?://", re.IGNORECASE)


class PostgresURLError(ValueError):
    """Why a ``postgresql://`` URL is refused (the caller names the option)."""


@dataclass(frozen=True, slots=True)
class PostgresLocation:
    """A PostgreSQL database, parsed (nothing connected)."""

    #: the URL libpq takes: ``postgresql://``, without this library's parameters (never
    #: shown: it may hold a password)
    conninfo: str = field(repr=False)
    #: the URL's ``durability=`` (None when it gives none)
    durability: str | None
    #: the URL without its password, for messages
    shown: str
    #: the URL's ``key_file=`` (a vault's master key file; None when it gives none)
    key_file: str | None = None

    def __str__(self) -> str:
        return self.shown

    def identity(self) -> tuple[str, str, str]:
        """``(host, port, dbname)`` as libpq would resolve the defaults it can know without
        connecting: two locations with one identity are one database."""
        from psycopg.conninfo import conninfo_to_dict

        params = conninfo_to_dict(self.conninfo)
        host = str(params.get("host") or params.get("hostaddr") or "localhost")
        port = str(params.get("port") or "5432")
        user = str(params.get("user") or "")
        return host, port, str(params.get("dbname") or user)


def display(url: str) -> str:
    """``url`` with its password (in the authority or the query) replaced by ``***``."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "postgresql://..."
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        if ":" in userinfo:
            userinfo = userinfo.split(":", 1)[0] + ":***"
        netloc = f"{userinfo}@{host}"
    query = "&".join(
        f"{name}=***" if name in _SECRET_PARAMETERS else f"{name}={value}"
        for name, value in parse_qsl(parts.query, keep_blank_values=True)
    )
    return f"{parts.scheme}://{netloc}{parts.path}" + (f"?{query}" if query else "")


def parse_postgres_url(value: str) -> PostgresLocation:
    """The database ``value`` names; :class:`PostgresURLError` says why not."""
    match = _SCHEME.match(value)
    if match is None:
        raise PostgresURLError(
            "a PostgreSQL URL starts postgresql:// (postgresql://USER@HOST:PORT/DBNAME)"
        )
    rest = value[match.end() :]
    parts = urlsplit("postgresql://" + rest)
    if parts.fragment:
        raise PostgresURLError("a PostgreSQL URL takes no fragment ('#...')")
    durability: str | None = None
    key_file: str | None = None
    kept: list[tuple[str, str]] = []
    try:
        pairs = parse_qsl(parts.query, keep_blank_values=True, strict_parsing=bool(parts.query))
    except ValueError:
        raise PostgresURLError("the query is not name=value pairs joined by '&'") from None
    for name, given in pairs:
        if name == "durability":
            if durability is not None:
                raise PostgresURLError("durability is given twice")
            if given not in _DURABILITY:
                raise PostgresURLError(f"durability must be 'full' or 'normal', not {given!r}")
            durability = given
        elif name == "key_file":
            if key_file is not None:
                raise PostgresURLError("key_file is given twice")
            if not given or "\x00" in given:
                raise PostgresURLError("key_file names no file")
            key_file = given
        else:
            kept.append((name, given))
    query = urlencode(kept, quote_via=quote)
    conninfo = f"postgresql://{parts.netloc}{parts.path}" + (f"?{query}" if query else "")
    try:
        from psycopg import ProgrammingError
        from psycopg.conninfo import conninfo_to_dict
    except ImportError:
        raise PostgresURLError(
            f"a PostgreSQL store needs psycopg 3: {install_command('postgresql')}"
        ) from None

    try:
        params = conninfo_to_dict(conninfo)
    except ProgrammingError as exc:  # libpq's own check: an unknown parameter, a bad port
        raise PostgresURLError(f"libpq refuses the URL: {_without_secrets(exc)}") from None
    if not params.get("dbname"):
        raise PostgresURLError(
            "the URL names no database (postgresql://USER@HOST:PORT/DBNAME): name the "
            "database that holds (or will hold) the log"
        )
    return PostgresLocation(
        conninfo=conninfo, durability=durability, shown=display(conninfo), key_file=key_file
    )


def _without_secrets(exc: Exception) -> str:
    """libpq's first line, with what it quotes of the URL (a token may be a password) and
    any ``password=`` value masked."""
    line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    line = re.sub(r'"[^"]*"', '"..."', line)
    return re.sub(r"(password=)\S+", r"\1***", line)


def with_database(url: str, dbname: str) -> str:
    """``url`` naming database ``dbname`` instead (same server, user and parameters)."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + quote(dbname), parts.query, ""))
