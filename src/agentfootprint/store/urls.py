"""Stores and vaults named by a URL (``sqlite:///runs.db``, ``memory:``) or a file path.

Every caller that opens a store from what a user typed (``Agent(store=...)``, the CLI's
``DB`` arguments, :func:`agentfootprint.exchange.transfer.open_log`) goes through this module,
so a new backend (a ``postgresql://`` store, issue 15) is added here, not at each caller.

The rule that decides what a string is (docs/stores.md, "Opening a store from a URL"):

* only a ``str`` can be a URL; an ``os.PathLike`` (a ``Path``) is always a file path;
* a string is a URL when it starts with a scheme (``^[A-Za-z][A-Za-z0-9+.-]*:``) of two or
  more characters that is one this module knows (``sqlite``, ``memory``, ``postgresql``,
  ``postgres``, also with a ``+driver`` suffix), or that is followed by ``//``
  (``mysql://...``); anything else (``runs.db``, ``C:\\x\\runs.db``, ``C:/x``, ``a:b.db``)
  is a file path, as before URLs were accepted;
* a URL is accepted as ``sqlite:///PATH`` (SQLAlchemy's meaning: ``sqlite:///runs.db``
  is the relative path ``runs.db``, ``sqlite:////abs/runs.db`` the absolute ``/abs/runs.db``;
  the path is percent-decoded; one query parameter, ``durability=full|normal``), exactly
  ``memory:``, or ``postgresql://USER@HOST:PORT/DBNAME`` (libpq's URL, any libpq parameter,
  plus ``durability=full|normal``: :mod:`agentfootprint.store.postgres_url`). Every other URL
  is refused with a :class:`UsageError` that names the option and the forms known; a URL's
  password is never echoed.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Literal
from urllib.parse import parse_qsl, unquote

from agentfootprint.errors import FileError, UsageError
from agentfootprint.store.base import EventStore, agreed_durability
from agentfootprint.store.memory import MemoryStore
from agentfootprint.store.memory_vault import MemoryVault
from agentfootprint.store.postgres_url import PostgresLocation, PostgresURLError, parse_postgres_url
from agentfootprint.store.sqlite import DURABILITY, SqliteStore
from agentfootprint.store.vault import DisclosureVault
from agentfootprint.store.vault_base import Vault

__all__ = [
    "KNOWN_FORMS",
    "StoreLocation",
    "database_of",
    "is_store_url",
    "open_store_url",
    "open_vault_url",
    "parse_store_url",
    "refusal",
    "store_file",
]

#: what the messages list as accepted
KNOWN_FORMS = (
    "sqlite:///PATH (relative; sqlite:////PATH absolute), postgresql://USER@HOST:PORT/DBNAME, "
    "memory:, or a file path"
)

_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):")
_POSTGRES = frozenset({"postgresql", "postgres"})
_KNOWN = frozenset({"sqlite", "memory"}) | _POSTGRES
_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")
_PARAMETERS = ("durability",)


@dataclass(frozen=True, slots=True)
class StoreLocation:
    """Where a store lives, parsed from a URL or a path (nothing opened yet)."""

    #: ``"sqlite"``: one SQLite file; ``"memory"``: a new, empty in-memory store;
    #: ``"postgresql"``: a PostgreSQL database
    kind: Literal["sqlite", "memory", "postgresql"]
    #: the file (``kind == "sqlite"``), percent-decoded, as the OS takes it; None otherwise
    path: str | None
    #: the URL's ``durability=`` (``"full"`` or ``"normal"``); None when it says none
    durability: str | None = None
    #: the database (``kind == "postgresql"``)
    postgres: PostgresLocation | None = None

    def __str__(self) -> str:
        return self.shown()

    def shown(self) -> str:
        """How messages name it (a PostgreSQL URL without its password)."""
        if self.postgres is not None:
            return self.postgres.shown
        return self.path if self.path is not None else "memory:"


class _Refused(Exception):
    """Why a value is not a store location (the caller adds the option's name)."""


def is_store_url(value: object) -> bool:
    """Whether ``value`` is written as a URL (then it is parsed as one, or refused) rather
    than a file path: see the module's rule."""
    if not isinstance(value, str):
        return False
    match = _SCHEME.match(value)
    if match is None or len(match.group(1)) == 1:  # no scheme, or a drive letter (C:\x)
        return False
    scheme = match.group(1).lower()
    return scheme.split("+", 1)[0] in _KNOWN or value.startswith("//", match.end())


def parse_store_url(value: object, *, option: str = "store") -> StoreLocation:
    """The location ``value`` names (a store URL, or a file path as it is); anything else is
    a :class:`UsageError` naming ``option``, saying what is refused and which forms are
    known."""
    try:
        return _parse(value)
    except _Refused as exc:
        raise UsageError(f"option {option!r}: {exc}", option=option) from None


def refusal(value: object) -> str | None:
    """Why ``value`` is not a store location (without the option's name), or None: for
    callers that report errors their own way (the CLI's parameter types)."""
    try:
        _parse(value)
    except _Refused as exc:
        return str(exc)
    return None


def store_file(value: object) -> str | None:
    """The file a path or ``sqlite:`` URL names (for comparing it with another file, e.g. a
    vault that must not be the log); None for ``memory:`` and for what is not a location."""
    try:
        return _parse(value).path
    except _Refused:
        return None


def _parse(value: object) -> StoreLocation:
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
        if not isinstance(value, str):
            raise _Refused(f"expected a file path as text, got the bytes {value!r}")
        if not value:
            raise _Refused(f"expected {KNOWN_FORMS}; got an empty path")
        return StoreLocation("sqlite", value)  # a Path is never a URL
    if not isinstance(value, str):
        raise _Refused(f"expected {KNOWN_FORMS}; got {type(value).__name__}")
    if not value:
        raise _Refused(f"expected {KNOWN_FORMS}; got ''")
    if not is_store_url(value):
        return StoreLocation("sqlite", value)
    match = _SCHEME.match(value)
    assert match is not None
    scheme, rest = match.group(1).lower(), value[match.end() :]
    if scheme.split("+", 1)[0] in _POSTGRES:
        try:
            found = parse_postgres_url(value)
        except PostgresURLError as exc:
            raise _Refused(f"{exc} (known: {KNOWN_FORMS})") from None
        return StoreLocation("postgresql", None, found.durability, found)
    if scheme == "memory":
        if rest:
            raise _Refused(
                "the in-memory store is written exactly 'memory:' (no path, host or query)"
            )
        return StoreLocation("memory", None)
    if scheme != "sqlite":
        raise _Refused(f"unknown store URL scheme {scheme!r}; known: {KNOWN_FORMS}")
    return _sqlite(value, rest)


def _sqlite(value: str, rest: str) -> StoreLocation:
    """``rest`` is what follows ``sqlite:``: ``//`` + an empty authority + ``/PATH``."""
    if not rest.startswith("//"):
        raise _Refused(
            f"{value!r}: a sqlite URL is sqlite:///PATH (three slashes: relative PATH; four: "
            "absolute); write a file path without 'sqlite:' otherwise"
        )
    authority, slash, tail = rest[2:].partition("/")
    if "@" in authority:
        raise _Refused("a sqlite URL takes no user or password (it names a local file)")
    if authority:
        raise _Refused(
            "a sqlite URL takes no host or port (it names a local file): write "
            "sqlite:///PATH (relative) or sqlite:////ABSOLUTE/PATH"
        )
    if "#" in tail:
        raise _Refused(f"{value!r}: a sqlite URL takes no fragment (write '#' as %23)")
    encoded, _, query = tail.partition("?")
    if not slash or not encoded:
        raise _Refused(f"{value!r}: the URL names no file (sqlite:///PATH)")
    if _BAD_ESCAPE.search(encoded):
        raise _Refused(f"{value!r}: '%' starts a percent-escape in a URL (write '%' as %25)")
    try:
        path = unquote(encoded, errors="strict")
    except UnicodeDecodeError:
        raise _Refused(f"{value!r}: the path's percent-escapes are not UTF-8") from None
    if "\x00" in path:
        raise _Refused(f"{value!r}: the path holds a NUL character")
    return StoreLocation("sqlite", path, _durability(value, query))


def _durability(value: str, query: str) -> str | None:
    if not query:
        return None
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=True)
    except ValueError:
        raise _Refused(f"{value!r}: the query is not name=value pairs joined by '&'") from None
    found: dict[str, str] = {}
    for name, given in pairs:
        if name not in _PARAMETERS:
            raise _Refused(
                f"{value!r}: unknown query parameter {name!r}; a sqlite URL takes "
                "durability=full|normal only"
            )
        if name in found:
            raise _Refused(f"{value!r}: {name} is given twice")
        if given not in DURABILITY:
            raise _Refused(f"{value!r}: durability must be 'full' or 'normal', not {given!r}")
        found[name] = given
    return found.get("durability")


def open_store_url(
    value: object,
    *,
    option: str = "store",
    durability: str | None = None,
    readonly: bool = False,
) -> EventStore:
    """Open the store ``value`` names (a URL, a path, or a parsed :class:`StoreLocation`).

    ``durability`` (for writing) must agree with the URL's own ``durability=`` when both
    are given; neither: ``"full"``. ``readonly=True`` opens a file without creating,
    migrating or changing it, and refuses ``memory:`` (a new in-memory store holds nothing
    to read). The caller owns the store and closes it.
    """
    location = value if isinstance(value, StoreLocation) else parse_store_url(value, option=option)
    agreed_durability(durability, None)  # the option's own value, before anything opens
    if location.kind == "postgresql":
        from agentfootprint.store.postgres import PostgresStore

        assert location.postgres is not None
        return PostgresStore(location.postgres, readonly=readonly, durability=durability)
    if location.kind == "memory":
        if readonly:
            raise UsageError(
                f"option {option!r}: memory: is a new, empty in-memory store: there is "
                "nothing in it to read; name a database file (a path or sqlite:///PATH)",
                option=option,
            )
        if durability is not None:
            raise UsageError(
                "option 'durability' applies to a store opened from a file; the in-memory "
                "store keeps nothing across a crash",
                option="durability",
            )
        return MemoryStore()
    assert location.path is not None
    if readonly:
        return SqliteStore(location.path, readonly=True)
    chosen = agreed_durability(durability, location.durability)
    return SqliteStore(location.path, durability=chosen or "full")


def open_vault_url(value: object, *, option: str = "disclosures", readonly: bool = False) -> Vault:
    """Open the vault ``value`` names: a path or ``sqlite:`` URL is a
    :class:`DisclosureVault` file (its ``durability=`` does not apply: a vault has its own
    journal); ``memory:`` a new :class:`MemoryVault` (refused with ``readonly``: it holds
    nothing to read)."""
    location = value if isinstance(value, StoreLocation) else parse_store_url(value, option=option)
    if location.kind == "memory":
        if readonly:
            raise UsageError(
                f"option {option!r}: memory: is a new, empty in-memory vault: there is "
                "nothing in it to read; name a vault file (a path or sqlite:///PATH)",
                option=option,
            )
        return MemoryVault()
    if location.kind == "postgresql":
        from agentfootprint.store.postgres_vault import PostgresVault

        assert location.postgres is not None
        try:
            return PostgresVault(location.postgres, readonly=readonly)
        except FileError as exc:  # the key file: named by the option it came through
            raise type(exc)(f"option {option!r}: {exc}", path=exc.path, option=option) from exc
        except UsageError as exc:
            raise UsageError(f"option {option!r}: {exc}", option=option) from exc
    assert location.path is not None
    return DisclosureVault(location.path, readonly=readonly)


def database_of(value: object) -> tuple[str, str, str] | None:
    """``(host, port, dbname)`` of the PostgreSQL database ``value`` names (a URL, a parsed
    location, or a store or vault opened on one); None for anything else: for telling a
    vault that would be the log's own database."""
    location: object = getattr(value, "location", value)
    if isinstance(location, StoreLocation):
        location = location.postgres
    elif isinstance(location, str) and is_store_url(location):
        try:
            location = _parse(location).postgres
        except _Refused:
            return None
    return location.identity() if isinstance(location, PostgresLocation) else None
