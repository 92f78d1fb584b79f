"""The contract test case every disclosure vault backend passes (store/vault_base.py).

Subclass :class:`VaultContract` in a ``Test*`` class, implement ``make_vault(tmp_path)`` and
``holds(vault, secret)`` (whether the backend's storage still contains the bytes), and set
``persistent`` (with ``reopen``) for a backend whose entries outlive the object; pytest then
runs every contract test against it (``tests/unit/test_vault_contract.py`` does so for the
SQLite and the memory vault).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentfootprint.errors import CanonicalFormError, StoreError, UsageError
from agentfootprint.logformat.canonical import canon
from agentfootprint.logformat.commitments import COMMIT_KEY, Disclosure, commitment_digest
from agentfootprint.store.vault_base import Vault

__all__ = ["VaultContract", "committed", "disclosure"]


def disclosure(value: Any, key: str = "ssn", salt_byte: int = 0) -> Disclosure:
    salt = f"{salt_byte:02x}" * 16
    return Disclosure(
        commitment=commitment_digest(salt, key, value), salt=salt, key=key, value=value
    )


def committed(d: Disclosure) -> dict[str, str]:
    return {COMMIT_KEY: d.commitment}


class VaultContract:
    """Behaviour every :class:`Vault` backend must show."""

    #: entries outlive the object: ``reopen`` opens the same vault again
    persistent = False

    def make_vault(self, tmp_path: Path) -> Vault:
        raise NotImplementedError

    def reopen(self, vault: Vault, tmp_path: Path) -> Vault:
        raise NotImplementedError

    def holds(self, vault: Vault, secret: bytes) -> bool:
        """Whether what the backend keeps (its file, its objects) still contains ``secret``."""
        raise NotImplementedError

    @pytest.fixture
    def vault(self, tmp_path: Path) -> Iterator[Vault]:
        vault = self.make_vault(tmp_path)
        yield vault
        vault.close()

    # -- put and get -------------------------------------------------------------------
    def test_is_a_vault(self, vault: Vault) -> None:
        assert isinstance(vault, Vault)

    def test_put_then_get_round_trip(self, vault: Vault) -> None:
        values: list[Any] = [
            "123-45-6789",
            7,
            -2.5,
            True,
            None,
            ["a", {"b": [1, 2]}],
            {"name": "Zoë", "tags": [], "nested": {"deep": {"x": "\u2028"}}},
        ]
        kept = [disclosure(v, salt_byte=i) for i, v in enumerate(values)]
        vault.put("r1", kept)
        for d in kept:
            assert vault.get(d.commitment) == d
            assert vault.get(d.commitment).opens()  # type: ignore[union-attr]
        assert vault.get("0" * 64) is None

    def test_get_returns_a_fresh_value_each_time(self, vault: Vault) -> None:
        d = disclosure({"list": [1, 2]})
        vault.put("r1", [d])
        first = vault.get(d.commitment)
        assert first is not None
        first.value["list"].append(3)
        assert vault.get(d.commitment) == d

    def test_commitments_in_the_order_kept_and_by_run(self, vault: Vault) -> None:
        a, b, c = (disclosure(v, salt_byte=i) for i, v in enumerate("abc"))
        vault.put("r1", [b])
        vault.put("r2", [c])
        vault.put("r1", [a])
        assert vault.commitments() == [b.commitment, c.commitment, a.commitment]
        assert vault.commitments("r1") == [b.commitment, a.commitment]
        assert vault.commitments("r2") == [c.commitment]
        assert vault.commitments("unknown") == []

    def test_an_empty_put_keeps_nothing(self, vault: Vault) -> None:
        vault.put("r1", [])
        assert vault.commitments() == []

    # -- atomic put --------------------------------------------------------------------
    def test_a_batch_with_a_value_that_cannot_be_encoded_keeps_nothing(self, vault: Vault) -> None:
        good = disclosure("fine")
        bad = Disclosure(commitment="1" * 64, salt="00", key="k", value={1, 2})
        with pytest.raises(CanonicalFormError):
            vault.put("r1", [good, bad])
        assert vault.commitments() == [] and vault.get(good.commitment) is None

    def test_a_batch_with_a_disclosure_that_cannot_be_stored_keeps_nothing(
        self, vault: Vault
    ) -> None:
        earlier = disclosure("earlier", salt_byte=9)
        vault.put("r0", [earlier])
        good = disclosure("fine")
        bad = Disclosure(commitment="2" * 64, salt="00", key={"not": "text"}, value="v")  # type: ignore[arg-type]
        with pytest.raises(StoreError):
            vault.put("r1", [good, bad])
        assert vault.commitments() == [earlier.commitment]
        assert vault.get(good.commitment) is None
        vault.put("r1", [good])  # the vault is still usable
        assert vault.commitments("r1") == [good.commitment]

    # -- a commitment kept twice -------------------------------------------------------
    def test_a_kept_commitment_is_never_replaced(self, vault: Vault) -> None:
        first = disclosure("original")
        vault.put("r1", [first])
        again = Disclosure(commitment=first.commitment, salt="ff", key="other", value="forged")
        vault.put("r2", [again, disclosure("new", salt_byte=3)])  # no error: ignored
        assert vault.get(first.commitment) == first
        assert vault.commitments("r1") == [first.commitment]
        assert vault.commitments("r2") == [disclosure("new", salt_byte=3).commitment]
        vault.put("r1", [first])  # the same disclosure again: idempotent
        assert vault.commitments() == [first.commitment, disclosure("new", salt_byte=3).commitment]

    def test_a_commitment_twice_in_one_batch_keeps_the_first(self, vault: Vault) -> None:
        first = disclosure("one")
        twin = Disclosure(commitment=first.commitment, salt="ee", key="k", value="two")
        vault.put("r1", [first, twin])
        assert vault.commitments() == [first.commitment]
        assert vault.get(first.commitment) == first

    # -- erase -------------------------------------------------------------------------
    def test_erase_by_commitment(self, vault: Vault) -> None:
        a, b = disclosure("a"), disclosure("b")
        vault.put("r1", [a, b])
        assert vault.erase(commitments=[a.commitment]) == 1
        assert vault.get(a.commitment) is None and vault.get(b.commitment) == b
        assert vault.commitments() == [b.commitment]
        with pytest.raises(UsageError, match="never kept, or erased"):
            vault.disclose([a.commitment])

    def test_the_order_kept_survives_erasures(self, vault: Vault) -> None:
        a, b, c, d, e = (disclosure(v, salt_byte=i) for i, v in enumerate("abcde"))
        for one in (a, b, c, d):
            vault.put("r1", [one])
        assert vault.erase(commitments=[b.commitment]) == 1
        vault.put("r2", [e, b])  # an erased commitment kept again comes last
        order = [a.commitment, c.commitment, d.commitment, e.commitment, b.commitment]
        assert vault.commitments() == order
        assert vault.commitments("r2") == [e.commitment, b.commitment]

    def test_erase_by_run(self, vault: Vault) -> None:
        a, b, c = (disclosure(v, salt_byte=i) for i, v in enumerate("abc"))
        vault.put("r1", [a, b])
        vault.put("r2", [c])
        assert vault.erase(run_id="r1") == 2
        assert vault.commitments() == [c.commitment]
        assert vault.commitments("r1") == []
        assert vault.erase(run_id="r1") == 0  # already gone

    def test_erase_counts_each_entry_once(self, vault: Vault) -> None:
        a, b, c = (disclosure(v, salt_byte=i) for i, v in enumerate("abc"))
        vault.put("r1", [a, b])
        vault.put("r2", [c])
        erased = vault.erase(commitments=[a.commitment, a.commitment, c.commitment], run_id="r1")
        assert erased == 3 and vault.commitments() == []

    def test_erase_of_unknown_entries_erases_nothing(self, vault: Vault) -> None:
        a = disclosure("a")
        vault.put("r1", [a])
        assert vault.erase(commitments=["9" * 64]) == 0
        assert vault.erase(run_id="no-such-run") == 0
        assert vault.commitments() == [a.commitment] and vault.get(a.commitment) == a

    def test_erase_of_nothing_named_is_a_usage_error(self, vault: Vault) -> None:
        vault.put("r1", [disclosure("a")])
        with pytest.raises(UsageError, match="erase what"):
            vault.erase()
        with pytest.raises(UsageError):
            vault.erase(commitments=[])
        assert len(vault.commitments()) == 1

    def test_an_erased_value_is_gone_from_the_backend(self, vault: Vault) -> None:
        secret = "s3cret-needle-4f0c1a"
        kept = disclosure(secret)
        other = disclosure("still-here-9b7e")
        vault.put("r1", [kept])
        vault.put("r2", [other])
        needle = secret.encode()
        assert self.holds(vault, needle), "the probe finds nothing: it proves nothing"
        assert vault.erase(run_id="r1") == 1
        assert not self.holds(vault, needle)
        assert self.holds(vault, b"still-here-9b7e")

    # -- derived operations ------------------------------------------------------------
    def test_disclose_in_order_or_refuse(self, vault: Vault) -> None:
        a, b = disclosure("a"), disclosure("b")
        vault.put("r1", [a, b])
        assert vault.disclose([b.commitment, a.commitment]) == [b, a]
        assert vault.disclose([]) == []
        with pytest.raises(UsageError, match="no disclosure for commitment " + "3" * 64):
            vault.disclose([a.commitment, "3" * 64])

    def test_reveal_opens_what_it_holds_and_leaves_the_rest(self, vault: Vault) -> None:
        kept, erased, unknown = disclosure("Ada"), disclosure("Bob"), disclosure("Cy")
        vault.put("r1", [kept, erased])
        vault.erase(commitments=[erased.commitment])
        recorded = {
            "who": committed(kept),
            "gone": [committed(erased), committed(unknown)],
            "text": canon({"inner": committed(kept)}).decode(),
            "plain": {"n": 1},
        }
        memo: dict[int, tuple[Any, Any]] = {}
        opened = vault.reveal(recorded, memo)
        assert opened == {
            "who": "Ada",
            "gone": [committed(erased), committed(unknown)],
            "text": '{"inner":"Ada"}',
            "plain": {"n": 1},
        }
        assert opened["gone"] is recorded["gone"] and opened["plain"] is recorded["plain"]
        assert memo[id(opened)][0] is opened and memo[id(opened)][1] is recorded
        # the containers that changed, children first (the one inside the JSON text too)
        assert [pair[1] for pair in memo.values()] == [{"inner": committed(kept)}, recorded]

    def test_a_disclosure_that_does_not_open_its_commitment_is_not_revealed(
        self, vault: Vault
    ) -> None:
        forged = Disclosure(commitment="4" * 64, salt="00", key="k", value="forged")
        vault.put("r1", [forged])
        assert vault.get(forged.commitment) == forged  # kept as given ...
        assert vault.reveal(committed(forged)) == committed(forged)  # ... but opens nothing

    # -- persistence, threads, closing -------------------------------------------------
    def test_entries_survive_a_reopen(self, tmp_path: Path) -> None:
        if not self.persistent:
            pytest.skip("this backend keeps nothing beyond the object")
        vault = self.make_vault(tmp_path)
        a, b = disclosure("a"), disclosure("b")
        vault.put("r1", [a, b])
        vault.erase(commitments=[b.commitment])
        vault.close()
        again = self.reopen(vault, tmp_path)
        try:
            assert again.commitments() == [a.commitment] and again.get(a.commitment) == a
            assert again.get(b.commitment) is None
        finally:
            again.close()

    def test_concurrent_puts_from_threads(self, vault: Vault) -> None:
        threads, per_thread = 8, 25
        shared = disclosure("everyone", salt_byte=0xAA)
        barrier = threading.Barrier(threads)
        failures: list[BaseException] = []

        def work(index: int) -> None:
            try:
                barrier.wait()
                for j in range(per_thread):
                    own = disclosure(f"t{index}-{j}", key=f"k{index}")
                    vault.put(f"run{index}", [own, shared])
            except BaseException as exc:  # pragma: no cover - reported below
                failures.append(exc)

        workers = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        assert failures == []
        assert len(vault.commitments()) == threads * per_thread + 1
        assert vault.commitments().count(shared.commitment) == 1
        for index in range(threads):
            mine = vault.commitments(f"run{index}")
            expected = [disclosure(f"t{index}-{j}", key=f"k{index}").commitment for j in range(25)]
            assert [c for c in mine if c != shared.commitment] == expected
        assert vault.get(shared.commitment) == shared

    def test_a_closed_vault_refuses_every_use(self, tmp_path: Path) -> None:
        vault = self.make_vault(tmp_path)
        a = disclosure("a")
        vault.put("r1", [a])
        vault.close()
        vault.close()  # twice is harmless
        for use in (
            lambda: vault.get(a.commitment),
            lambda: vault.put("r1", [disclosure("b")]),
            lambda: vault.commitments(),
            lambda: vault.erase(run_id="r1"),
            lambda: vault.disclose([a.commitment]),
            lambda: vault.reveal(committed(a)),
        ):
            with pytest.raises(StoreError):
                use()

    def test_the_context_manager_closes(self, tmp_path: Path) -> None:
        with self.make_vault(tmp_path) as vault:
            vault.put("r1", [disclosure("a")])
        with pytest.raises(StoreError):
            vault.commitments()
