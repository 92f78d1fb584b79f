"""The verifier (and the CLI's verify) run where the runtime cannot even be imported."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import agentfootprint as af

BLOCK_RUNTIME = textwrap.dedent(
    """
    import importlib.abc, sys

    RUNNING = ("agentfootprint.runtime", "agentfootprint.features", "agentfootprint.agent")

    class NoRuntime(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if any(name == m or name.startswith(m + ".") for m in RUNNING):
                raise ImportError(f"{name} is blocked: the verifier must not need the runtime")
            return None

    sys.meta_path.insert(0, NoRuntime())
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
        [sys.executable, "-c", BLOCK_RUNTIME + textwrap.dedent(code)],
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
        import pathlib, agentfootprint
        if not (pathlib.Path(agentfootprint.__file__).parent / "runtime" / "run.py").is_file():
            raise SystemExit("the runtime is not installed: the test proves nothing")
        try:
            import agentfootprint.runtime.run
        except ImportError:
            pass
        else:
            raise SystemExit("the runtime was importable: the test proves nothing")
        result = Verifier(SqliteStore({str(db)!r})).verify({run_id!r})
        print(result.outcome.value, result.receipts, len(result.ancestors))
        assert not [m for m in sys.modules if m.startswith(RUNNING)]
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
    assert done.stdout.count("(not sealed)") == 2


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
        # the layers below verify: the log format, the seals (envelopes, statements, keys,
        # Merkle proofs, notes), safe file reading, the errors and the version
        below = ("agentfootprint.verify", "agentfootprint.seal", "agentfootprint.logformat")
        assert all(m.startswith(below) or m in ("agentfootprint.errors",
                   "agentfootprint.local_files", "agentfootprint.version") for m in loaded), loaded
    """)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["VALID_UNSIGNED", "VALID_UNSIGNED"]


# -- what import-linter cannot see ---------------------------------------------------------------
# The layers are import-linter contracts in pyproject.toml (`lint-imports`, run by .ci/run). It
# reads import statements; the tests above load the verifier with the upper layers blocked, so
# an import made at run time (importlib, a lazy facade) cannot slip past it either.


LINT_IMPORTS = "import sys; from importlinter.cli import lint_imports_command as c; sys.exit(c())"


def test_lint_imports_keeps_every_contract() -> None:
    done = subprocess.run(
        [sys.executable, "-c", LINT_IMPORTS, "--no-cache"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout
