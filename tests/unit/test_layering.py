"""Dependency direction: the verifier (and the CLI's verify) never import the runtime."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import agentfootprint as af

BLOCK_CORE = textwrap.dedent(
    """
    import importlib.abc, sys

    class NoCore(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "agentfootprint.core" or name.startswith("agentfootprint.core."):
                raise ImportError(f"{name} is blocked: the verifier must not need the runtime")
            return None

    sys.meta_path.insert(0, NoCore())
    """
)


def _recorded_db(tmp_path: Path) -> tuple[Path, str]:
    db = tmp_path / "runs.db"
    tool = af.define_tool(name="echo", description="echo", execute=lambda a: a)
    provider = af.MockProvider([af.reply(tool_calls=[af.tool_call("echo", {"x": 1})]), "done"])
    agent = af.Agent(provider=provider, model="m", tools=[tool], store=db)
    first = agent.run_sync("hi")
    agent.config.provider.position = 0  # type: ignore[attr-defined]
    second = agent.run_sync("again", continue_from=first)
    agent.store.close()
    return db, second.run_id


def run_blocked(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", BLOCK_CORE + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_verifier_runs_where_core_cannot_be_imported(tmp_path: Path) -> None:
    db, run_id = _recorded_db(tmp_path)
    done = run_blocked(f"""
        from agentfootprint.store.sqlite import SqliteStore
        from agentfootprint.verify.verifier import Verifier
        try:
            import agentfootprint.core
        except ImportError:
            pass
        else:
            raise SystemExit("core was importable: the test proves nothing")
        result = Verifier(SqliteStore({str(db)!r})).verify({run_id!r})
        print(result.outcome.value, result.receipts, len(result.ancestors))
        assert "agentfootprint.core" not in sys.modules
    """)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["VALID_UNSIGNED", "2", "1"]


def test_cli_verify_runs_where_core_cannot_be_imported(tmp_path: Path) -> None:
    db, _ = _recorded_db(tmp_path)
    done = run_blocked(f"""
        import sys
        from agentfootprint.cli import main
        sys.argv = ["agentfootprint", "verify", {str(db)!r}]
        main()
    """)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("VALID_UNSIGNED") == 2


def test_bundle_verifies_with_the_verify_subpackage_alone(tmp_path: Path) -> None:
    db, run_id = _recorded_db(tmp_path)
    store = af.SqliteStore(db)
    bundle = tmp_path / "runs.afp"
    af.export_runs(store, [run_id], bundle)
    store.close()
    done = run_blocked(f"""
        import importlib.abc

        class NoStore(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.startswith("agentfootprint.store") or name == "agentfootprint.cli":
                    raise ImportError(f"{{name}} is blocked: only agentfootprint.verify")
                return None

        sys.meta_path.insert(0, NoStore())
        from agentfootprint.verify.bundle import BundleSource
        from agentfootprint.verify.verifier import Verifier
        source = BundleSource({str(bundle)!r})
        verifier = Verifier(source)
        outcomes = [verifier.verify(run.run_id).outcome.value for run in source.runs()]
        print(" ".join(outcomes))
        loaded = sorted(m for m in sys.modules if m.startswith("agentfootprint."))
        # the seal layer (envelopes, statements, public keys) is part of what verifies
        assert all(m.startswith(("agentfootprint.verify", "agentfootprint.seal"))
                   or m == "agentfootprint.errors" for m in loaded), loaded
    """)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["VALID_UNSIGNED", "VALID_UNSIGNED"]


# -- the dependency direction, read from the source ---------------------------------------------

PACKAGE = Path(af.__file__).resolve().parent


def _imports(path: Path) -> set[str]:
    """Every ``agentfootprint`` module a source file imports, at any place in it (functions
    included: an import deferred to call time still makes the layer depend on it)."""
    import ast

    found: set[str] = set()
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the file's package
                base = list(parts[: len(parts) - node.level])
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            found.add(module)
    return {name for name in found if name.split(".")[0] == "agentfootprint"}


#: (the modules a rule covers, the layers they may not import)
RULES = [
    ("verify", ("store", "core", "features", "providers", "audit", "testing", "cli", "demo")),
    ("seal", ("store", "core", "features", "providers", "audit", "testing", "cli", "demo")),
    ("store", ("core", "features", "providers", "audit", "testing", "cli", "demo")),
    ("audit/read.py", ("core", "features", "providers", "cli", "testing", "demo")),
    ("audit/diff.py", ("core", "features", "providers", "cli", "testing", "demo")),
    ("core", ("audit", "providers", "cli", "testing", "demo")),
    ("features", ("audit", "providers", "cli", "testing", "demo")),
    ("providers", ("audit", "features", "cli", "testing", "demo")),
]


@pytest.mark.parametrize(("covered", "forbidden"), RULES, ids=[rule[0] for rule in RULES])
def test_each_layer_imports_only_what_lies_below_it(
    covered: str, forbidden: tuple[str, ...]
) -> None:
    target = PACKAGE / covered
    files = [target] if target.suffix == ".py" else sorted(target.rglob("*.py"))
    assert files, covered
    wrong = {
        f"{path.relative_to(PACKAGE)} imports {name}"
        for path in files
        for name in _imports(path)
        if any(
            name == f"agentfootprint.{layer}" or name.startswith(f"agentfootprint.{layer}.")
            for layer in forbidden
        )
    }
    assert not wrong, sorted(wrong)


def test_verify_imports_nothing_of_the_package_but_itself_the_seals_and_the_errors() -> None:
    # seals (envelopes, statements, public keys) are checked by the verifier; the seal layer
    # imports nothing but verify and the errors (the rule above keeps it so)
    allowed = ("agentfootprint.verify", "agentfootprint.seal", "agentfootprint.errors")
    wrong = {
        f"{path.relative_to(PACKAGE)} imports {name}"
        for path in sorted((PACKAGE / "verify").rglob("*.py"))
        for name in _imports(path)
        if not any(name == a or name.startswith(f"{a}.") for a in allowed)
    }
    assert not wrong, sorted(wrong)
