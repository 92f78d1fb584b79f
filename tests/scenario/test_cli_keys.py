"""`agentfootprint keys generate|show`: a 0600 key file that is never overwritten, the public
key and key id printed, never the private key; every bad input one line and exit 2."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from agentfootprint.cli import EXIT_OK, EXIT_USAGE, main
from agentfootprint.seal import load_public_key, load_signer


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def _lines(output: str) -> dict[str, str]:
    return {
        line.split(":", 1)[0]: line.split(":", 1)[1].strip()
        for line in output.splitlines()
        if ":" in line
    }


def test_generate_then_show(tmp_path: Path, runner: CliRunner) -> None:
    key = tmp_path / "seal.key"
    made = runner.invoke(main, ["keys", "generate", str(key)])
    assert made.exit_code == EXIT_OK, made.output
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    printed = _lines(made.output)
    signer = load_signer(key)
    assert printed["public key"] == signer.public.text
    assert printed["key id"] == signer.key_id
    shown = runner.invoke(main, ["keys", "show", str(key)])
    assert shown.exit_code == EXIT_OK, shown.output
    assert _lines(shown.output)["public key"] == signer.public.text
    pem = runner.invoke(main, ["keys", "show", str(key), "--pem"])
    assert "-----BEGIN PUBLIC KEY-----" in pem.output
    assert load_public_key(pem.output.split("\n", 2)[2].encode()) == signer.public


def test_show_public_forms(tmp_path: Path, runner: CliRunner) -> None:
    key = tmp_path / "seal.key"
    runner.invoke(main, ["keys", "generate", str(key)])
    public = load_signer(key).public
    (tmp_path / "seal.pub").write_bytes(public.pem)
    for given in (public.text, str(tmp_path / "seal.pub")):
        shown = runner.invoke(main, ["keys", "show", given])
        assert shown.exit_code == EXIT_OK, shown.output
        assert _lines(shown.output) == {"public key": public.text, "key id": public.key_id}


def test_refuses_to_overwrite(tmp_path: Path, runner: CliRunner) -> None:
    key = tmp_path / "seal.key"
    key.write_text("precious")
    refused = runner.invoke(main, ["keys", "generate", str(key)])
    assert refused.exit_code == EXIT_USAGE
    assert "already exists: refusing to overwrite" in refused.output
    assert key.read_text() == "precious"


def test_passphrase_from_the_environment(tmp_path: Path, runner: CliRunner) -> None:
    key = tmp_path / "seal.key"
    env = {"SEAL_PASS": "Qv8-only-in-env"}
    made = runner.invoke(
        main, ["keys", "generate", str(key), "--passphrase-env", "SEAL_PASS"], env=env
    )
    assert made.exit_code == EXIT_OK and "encrypted)" in made.output
    assert key.read_bytes().startswith(b"-----BEGIN ENCRYPTED PRIVATE KEY-----")
    shown = runner.invoke(
        main, ["keys", "show", str(key), "--passphrase-env", "SEAL_PASS"], env=env
    )
    assert shown.exit_code == EXIT_OK
    assert _lines(shown.output)["key id"] == _lines(made.output)["key id"]
    missing = runner.invoke(main, ["keys", "show", str(key)])
    assert missing.exit_code == EXIT_USAGE and "is encrypted" in missing.output
    wrong = runner.invoke(
        main, ["keys", "show", str(key), "--passphrase-env", "SEAL_PASS"], env={"SEAL_PASS": "no"}
    )
    assert wrong.exit_code == EXIT_USAGE and "passphrase does not decrypt" in wrong.output
    unset = runner.invoke(main, ["keys", "show", str(key), "--passphrase-env", "NOT_SET_ANYWHERE"])
    assert unset.exit_code == EXIT_USAGE and "NOT_SET_ANYWHERE is not set" in unset.output
    for result in (made, shown, missing, wrong, unset):
        assert "Qv8-only-in-env" not in result.output


def test_private_key_never_printed(tmp_path: Path, runner: CliRunner) -> None:
    """A planted key: no output of either command, success or failure, holds its PEM body."""
    key = tmp_path / "seal.key"
    made = runner.invoke(main, ["keys", "generate", str(key)])
    body = b"".join(key.read_bytes().splitlines()[1:-1]).decode()
    outputs = [made.output]
    for args in (
        ["keys", "show", str(key)],
        ["keys", "show", str(key), "--pem"],
        ["keys", "show", str(key), "--passphrase-env", "HOME"],
        ["keys", "generate", str(key)],
    ):
        outputs.append(runner.invoke(main, args).output)
    cut = tmp_path / "cut.key"
    cut.write_bytes(key.read_bytes()[:-20])
    outputs.append(runner.invoke(main, ["keys", "show", str(cut)]).output)
    for output in outputs:
        assert body not in output and body[:24] not in output and body[-24:] not in output


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b"", "not a public key"),
        (b"garbage", "not a public key"),
        (b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n", "could not be decoded"),
        (b"-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n", "could not be decoded"),
        (b"ed25519:AAAA\n", "base64 of 32 bytes"),
        (b"\x00\xff" * 40, "not a public key"),
    ],
)
def test_bad_files_exit_2_in_one_line(
    tmp_path: Path, runner: CliRunner, content: bytes, words: str
) -> None:
    path = tmp_path / "bad"
    path.write_bytes(content)
    result = runner.invoke(main, ["keys", "show", str(path)])
    assert result.exit_code == EXIT_USAGE, result.output
    assert words in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_other_key_type_and_missing_paths(tmp_path: Path, runner: CliRunner) -> None:
    other = tmp_path / "ec.pem"
    other.write_bytes(
        ec.generate_private_key(ec.SECP256R1()).private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    result = runner.invoke(main, ["keys", "show", str(other)])
    assert result.exit_code == EXIT_USAGE and "EC private key: seals are Ed25519" in result.output
    for args, words in (
        (["keys", "show", str(tmp_path / "none")], "no such public key file"),
        (["keys", "show", str(tmp_path)], "is a folder"),
        (["keys", "generate", str(tmp_path / "no" / "k")], "does not exist"),
        (["keys", "show", "ed25519:!!"], "base64 of 32 bytes"),
        (["keys", "generate", str(tmp_path / "k"), "--passphrase-env", "NOT_SET_X"], "not set"),
    ):
        result = runner.invoke(main, args)
        assert result.exit_code == EXIT_USAGE, (args, result.output)
        assert words in result.output and "Traceback" not in result.output
    assert not (tmp_path / "k").exists()
    assert runner.invoke(main, ["keys"]).exit_code in (EXIT_OK, EXIT_USAGE)
    assert runner.invoke(main, ["keys", "nope"]).exit_code == EXIT_USAGE


def test_generate_when_the_folder_refuses(
    tmp_path: Path, runner: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_open = os.open

    def refusing_open(path: Any, flags: int, mode: int = 0o777) -> int:
        if str(path).startswith(str(tmp_path)):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, flags, mode)

    monkeypatch.setattr(os, "open", refusing_open)
    result = runner.invoke(main, ["keys", "generate", str(tmp_path / "k")])
    assert result.exit_code == EXIT_USAGE, result.output
    assert "cannot create the key file (Permission denied)" in result.output
    assert list(tmp_path.iterdir()) == []


def test_show_warns_about_a_readable_private_key(tmp_path: Path, runner: CliRunner) -> None:
    key = tmp_path / "seal.key"
    runner.invoke(main, ["keys", "generate", str(key)])
    quiet = runner.invoke(main, ["keys", "show", str(key)])
    assert "warning" not in quiet.output
    key.chmod(0o644)
    loud = runner.invoke(main, ["keys", "show", str(key)])
    assert loud.exit_code == EXIT_OK
    assert "can be read by other users (mode 0644): chmod 600" in loud.output
