"""The vault contract (agentfootprint.testing.vault_contract) run against every vault this
package ships: the SQLite file vault and the memory vault."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import pytest

from agentfootprint.errors import StoreError
from agentfootprint.logformat.commitments import Disclosure
from agentfootprint.store.memory_vault import MemoryVault
from agentfootprint.store.vault import DisclosureVault
from agentfootprint.store.vault_base import Vault
from agentfootprint.testing.vault_contract import VaultContract, disclosure


class TestDisclosureVault(VaultContract):
    persistent = True

    def make_vault(self, tmp_path: Path) -> Vault:
        return DisclosureVault(tmp_path / "vault.db")

    def reopen(self, vault: Vault, tmp_path: Path) -> Vault:
        return DisclosureVault(tmp_path / "vault.db", create=False)

    def holds(self, vault: Vault, secret: bytes) -> bool:
        assert isinstance(vault, DisclosureVault)
        files = [vault.path, *vault.path.parent.glob(vault.path.name + "-*")]
        return any(secret in path.read_bytes() for path in files)


class TestMemoryVault(VaultContract):
    def make_vault(self, tmp_path: Path) -> Vault:
        return MemoryVault()

    def holds(self, vault: Vault, secret: bytes) -> bool:
        """Whether any object reachable from the vault contains ``secret``."""
        seen: set[int] = set()
        stack: list[Any] = [vault]
        while stack:
            item = stack.pop()
            if id(item) in seen:
                continue
            seen.add(id(item))
            if isinstance(item, bytes | bytearray) and secret in item:
                return True
            if isinstance(item, str) and secret.decode() in item:
                return True
            if isinstance(item, type):
                continue  # classes and modules are shared, not the vault's
            stack.extend(gc.get_referents(item))
        return False

    def test_a_memory_vault_keeps_nothing_after_closing(self) -> None:
        vault = MemoryVault()
        vault.put("r1", [disclosure("closing-needle")])
        assert self.holds(vault, b"closing-needle")
        vault.close()
        assert not self.holds(vault, b"closing-needle")

    def test_strings_are_required_where_the_sqlite_vault_needs_text(self) -> None:
        vault = MemoryVault()
        for bad in (
            Disclosure(commitment=5, salt="00", key="k", value="v"),  # type: ignore[arg-type]
            Disclosure(commitment="5" * 64, salt=b"00", key="k", value="v"),  # type: ignore[arg-type]
        ):
            with pytest.raises(StoreError, match="must be"):
                vault.put("r1", [disclosure("ok"), bad])
        with pytest.raises(StoreError, match="must be"):
            vault.put(7, [disclosure("ok")])  # type: ignore[arg-type]
        assert vault.commitments() == []
