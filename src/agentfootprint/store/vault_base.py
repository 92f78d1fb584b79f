"""The vault contract: what every disclosure vault guarantees, whatever holds it.

A vault keeps, per commitment, the disclosure ``[salt, key, value]`` that opens it. The log
never holds those values; the vault does, and erasing an entry makes its value
unrecoverable while the log (which only ever held the commitment) keeps verifying.

:class:`Vault` names exactly what the runtime and the CLI call: :meth:`~Vault.put` (the run
writer, one commit's disclosures), :meth:`~Vault.get` (replay, ``inspect served --wire``),
:meth:`~Vault.commitments` (``disclose --run``), :meth:`~Vault.erase` (``erase``) and
:meth:`~Vault.close`. :meth:`~Vault.reveal` (continuations, replay) and
:meth:`~Vault.disclose` (``disclose``) are built on :meth:`~Vault.get` here, once, so every
backend opens values the same way. Backends:
:class:`~agentfootprint.store.vault.DisclosureVault` (an SQLite file, secure delete) and
:class:`~agentfootprint.store.memory_vault.MemoryVault` (process memory). The contract test
case every backend runs is ``tests/unit/test_vault_contract.py``.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Self

from agentfootprint.errors import UsageError
from agentfootprint.logformat.canonical import canon
from agentfootprint.logformat.commitments import (
    COMMIT_KEY,
    Disclosure,
    is_commitment,
    parse_json_container,
)

__all__ = ["Vault"]


class Vault(abc.ABC):
    """Disclosures by commitment. Safe to share between threads.

    Errors: a backend translates its driver's errors in one place into this library's
    (:class:`~agentfootprint.errors.StoreError` and its subclasses, or
    :class:`~agentfootprint.errors.FileError` for a file it cannot use); any use after
    :meth:`close` is refused with a :class:`~agentfootprint.errors.StoreError`.
    """

    @abc.abstractmethod
    def put(self, run_id: str, disclosures: Sequence[Disclosure]) -> None:
        """Keep the disclosures of one commit of ``run_id``, atomically: all are kept, or
        (on any error) none.

        A commitment the vault already holds is kept as it is (the first disclosure and its
        run id win; the later one is ignored, without error): a commitment is a digest of
        its ``[salt, key, value]``, so a second disclosure for it opens the same value. A
        vault that cannot be written (opened read-only) refuses with :class:`StoreError`.
        """

    @abc.abstractmethod
    def get(self, commitment: str) -> Disclosure | None:
        """The disclosure kept for ``commitment`` (a fresh value each call), or None when it
        was never kept or has been erased."""

    @abc.abstractmethod
    def commitments(self, run_id: str | None = None) -> list[str]:
        """The commitments held (of ``run_id`` only, when given), in the order they were
        first kept; an unknown run has none."""

    @abc.abstractmethod
    def erase(self, *, commitments: Iterable[str] = (), run_id: str | None = None) -> int:
        """Erase the named commitments and every disclosure of ``run_id``, atomically;
        returns how many entries were erased (each counted once; unknown ones count 0).

        After it returns, an erased value is unrecoverable through this vault and from
        what the backend holds (the SQLite vault overwrites the bytes and vacuums the
        file; the memory vault drops its references). Naming nothing is a
        :class:`UsageError`; a vault that cannot be written refuses with
        :class:`StoreError`.
        """

    @abc.abstractmethod
    def close(self) -> None:
        """Release the backend's resources; closing twice is harmless."""

    def disclose(self, commitments: Iterable[str]) -> list[Disclosure]:
        """The disclosures for these commitments, in order; a missing one is a
        :class:`UsageError` (what ``agentfootprint disclose`` reports)."""
        out = []
        for commitment in commitments:
            found = self.get(commitment)
            if found is None:
                raise UsageError(
                    f"the vault holds no disclosure for commitment {commitment} "
                    "(never kept, or erased)"
                )
            out.append(found)
        return out

    def reveal(
        self,
        value: Any,
        memo: dict[int, tuple[Any, Any]] | None = None,
        opened: list[Any] | None = None,
    ) -> Any:
        """``value`` with every commitment this vault can open replaced by its value (JSON
        text inside strings too). Erased or unknown commitments stay in place. ``memo``
        collects, for each container that changed, ``id(opened) -> (opened, recorded)``:
        recording the opened container again then keeps its commitments. ``opened`` collects
        each value opened (what a continued run is served open: echo redaction's literals).

        Walked with a stack, however deep the value (commitments are looked up depth first,
        members in order; ``memo`` is filled children first)."""
        stack: list[_Opening] = []
        result = self._reveal_step(value, stack, opened)
        while stack:
            frame = stack[-1]
            if result is not _PENDING:  # what frame.child opened to
                frame.take(result)
            child = next(frame.children, _PENDING)
            if child is _PENDING:
                stack.pop()
                result = frame.finish(memo)
            else:
                frame.key, frame.child = child
                result = self._reveal_step(frame.child, stack, opened)
        return result

    def _reveal_step(self, value: Any, stack: list[_Opening], opened: list[Any] | None) -> Any:
        """What ``value`` opens to, or ``_PENDING`` with its frame pushed (a container, or
        a string holding walkable JSON text)."""
        if is_commitment(value):
            found = self.get(value[COMMIT_KEY])
            if found is None or not found.opens():
                return value
            if opened is not None:
                opened.append(found.value)
            return found.value
        kind = type(value)
        if kind is dict:
            stack.append(_Opening(value, {}, iter(value.items())))
        elif kind is list:
            stack.append(_Opening(value, [], enumerate(value)))
        elif kind is str:
            inner = parse_json_container(value)
            if inner is None:
                return value
            stack.append(_Opening(value, None, iter(((None, inner),))))
        else:
            return value
        return _PENDING

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_PENDING: Any = object()


def _unchanged(opened: Any, value: Any) -> bool:
    """``opened == value`` for what :meth:`Vault.reveal` made of ``value``, without a deep
    comparison: a container is only replaced by one that differs from it."""
    if opened is value:
        return True
    kind = type(value)
    if kind is list or (kind is dict and not is_commitment(value)):
        return False
    return bool(opened == value)  # a commitment or a string: a shallow comparison


class _Opening:
    """A container (or a string holding JSON text) :meth:`Vault.reveal` is in."""

    __slots__ = ("changed", "child", "children", "key", "opened", "value")

    def __init__(self, value: Any, opened: Any, children: Iterator[tuple[Any, Any]]) -> None:
        self.value = value
        self.opened = opened  # the dict or list being built; for a string, the opened text
        self.children = children
        self.key: Any = None
        self.child: Any = None
        self.changed = False

    def take(self, result: Any) -> None:
        kind = type(self.value)
        if kind is dict:
            self.opened[self.key] = result
        elif kind is list:
            self.opened.append(result)
        else:
            self.opened = result
        if not self.changed and not _unchanged(result, self.child):
            self.changed = True

    def finish(self, memo: dict[int, tuple[Any, Any]] | None) -> Any:
        if not self.changed:
            return self.value
        if type(self.value) is str:
            return canon(self.opened).decode("utf-8")
        if memo is not None:
            memo[id(self.opened)] = (self.opened, self.value)
        return self.opened
