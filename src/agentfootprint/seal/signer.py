"""Signers and public keys for seals: Ed25519 through ``cryptography``.

A :class:`Signer` is anything with a ``key_id``, a raw 32-byte ``public_key`` and
``sign(data) -> bytes`` (64-byte Ed25519 signatures): the seam for KMS, HSM or ssh-agent
signers. :class:`Ed25519Signer` holds a private key in memory; key files are PKCS8 PEM,
optionally encrypted with a passphrase, created with mode 0600 and never overwritten.

A public key has three forms (docs/seals.md, "Keys"): the raw 32 bytes, PEM
SubjectPublicKeyInfo, and the text form ``ed25519:`` + standard padded base64 of the raw
bytes. Its key id is the lowercase hex SHA-256 of the raw bytes. Nothing here ever puts
private key bytes in a message, a ``repr`` or an output.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import errno
import hashlib
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, cast, runtime_checkable

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import dsa, ec, ed448, ed25519, rsa, x448, x25519

from agentfootprint.errors import (
    KeyFileError,
    UnsupportedKeyError,
    UsageError,
    WrongPassphraseError,
)
from agentfootprint.local_files import open_regular
from agentfootprint.seal.ed25519_keys import key_problem

__all__ = [
    "PUBLIC_KEY_PREFIX",
    "Ed25519Signer",
    "PublicKey",
    "Signer",
    "checked_signer",
    "generate_key_file",
    "key_id_of",
    "load_public_key",
    "load_signer",
    "refused_key",
]

#: the text form of a public key starts with this
PUBLIC_KEY_PREFIX = "ed25519:"
#: a key file larger than this is not a key file
MAX_KEY_FILE_BYTES = 64 * 1024
_PKCS8 = b"-----BEGIN PRIVATE KEY-----"
_PKCS8_ENCRYPTED = b"-----BEGIN ENCRYPTED PRIVATE KEY-----"
_SPKI = b"-----BEGIN PUBLIC KEY-----"
_NOT_PKCS8 = (
    b"-----BEGIN OPENSSH PRIVATE KEY-----",
    b"-----BEGIN RSA PRIVATE KEY-----",
    b"-----BEGIN EC PRIVATE KEY-----",
    b"-----BEGIN DSA PRIVATE KEY-----",
)


def refused_key(raw: bytes) -> str | None:
    """Why the raw 32 bytes cannot be pinned as a public key, naming the key in its text form
    (docs/seals.md section 1: a non-canonical encoding or a point of small order would let
    forged signatures verify); None when they can."""
    problem = key_problem(raw)
    if problem is None:
        return None
    shown = PUBLIC_KEY_PREFIX + base64.b64encode(raw).decode("ascii")
    return f"ed25519 public key {shown} {problem}; pin the signer's real key"


def key_id_of(raw_public_key: bytes) -> str:
    """The key id of a raw 32-byte Ed25519 public key: lowercase hex SHA-256 of those bytes."""
    return hashlib.sha256(raw_public_key).hexdigest()


def checked_signer(signer: object) -> Signer:
    """``signer`` checked as a :class:`Signer` before any run relies on it: a ``key_id`` that
    is the SHA-256 of its 32-byte ``public_key`` and a callable ``sign`` (a remote signer's
    first signature is checked against that key when the first run closes)."""
    public = getattr(signer, "public_key", None)
    key_id = getattr(signer, "key_id", None)
    if not callable(getattr(signer, "sign", None)):
        raise UsageError(
            f"option 'signer': {type(signer).__name__} has no sign(data) method: pass an "
            "agentfootprint.seal.Ed25519Signer (load_signer(path)) or a KMS/HSM signer with "
            "key_id, public_key and sign(data)",
            option="signer",
        )
    if type(public) is not bytes or len(public) != 32:
        raise UsageError(
            "option 'signer': its public_key must be the 32 raw bytes of an Ed25519 key",
            option="signer",
        )
    refused = refused_key(public)
    if refused is not None:
        raise UsageError(f"option 'signer': its public_key: {refused}", option="signer")
    if key_id != key_id_of(public):
        raise UsageError(
            "option 'signer': its key_id is not the SHA-256 hex of its public_key",
            option="signer",
        )
    return cast(Signer, signer)


@runtime_checkable
class Signer(Protocol):
    """What seals are signed with: a file key (:class:`Ed25519Signer`), or a KMS/HSM key
    behind the same three members. ``sign`` returns a 64-byte Ed25519 signature of
    ``data`` that verifies under ``public_key``."""

    @property
    def key_id(self) -> str: ...

    @property
    def public_key(self) -> bytes: ...

    def sign(self, data: bytes) -> bytes: ...


@dataclass(frozen=True)
class PublicKey:
    """An Ed25519 public key a verifier trusts (pinned by the caller, never taken from the
    evidence). ``raw`` is the 32-byte encoding."""

    raw: bytes

    def __post_init__(self) -> None:
        if type(self.raw) is not bytes or len(self.raw) != 32:
            raise KeyFileError("an Ed25519 public key is exactly 32 bytes")
        refused = refused_key(self.raw)
        if refused is not None:
            raise KeyFileError(refused)
        try:
            ed25519.Ed25519PublicKey.from_public_bytes(self.raw)
        except ValueError:
            raise KeyFileError("not a valid Ed25519 public key") from None

    @property
    def key_id(self) -> str:
        return key_id_of(self.raw)

    @property
    def text(self) -> str:
        """``ed25519:<base64>``, the short form printed by ``agentfootprint keys``."""
        return PUBLIC_KEY_PREFIX + base64.b64encode(self.raw).decode("ascii")

    @property
    def pem(self) -> bytes:
        """PEM SubjectPublicKeyInfo (``-----BEGIN PUBLIC KEY-----``)."""
        return ed25519.Ed25519PublicKey.from_public_bytes(self.raw).public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )

    def verify(self, signature: bytes, data: bytes) -> bool:
        """Whether ``signature`` is a valid Ed25519 signature of ``data`` (RFC 8032, with the
        checks of OpenSSL: S below the group order, 64 bytes exactly)."""
        if type(signature) is not bytes or len(signature) != 64:
            return False
        try:
            ed25519.Ed25519PublicKey.from_public_bytes(self.raw).verify(signature, data)
        except InvalidSignature:
            return False
        return True

    @classmethod
    def from_text(cls, text: str) -> PublicKey:
        """Parse the text form ``ed25519:<base64 of 32 bytes>`` (standard alphabet, padded,
        exactly as :attr:`text` writes it)."""
        if not isinstance(text, str) or not text.startswith(PUBLIC_KEY_PREFIX):
            raise KeyFileError(
                f"a public key in text form starts with {PUBLIC_KEY_PREFIX!r} "
                "(as `agentfootprint keys show` prints it)"
            )
        body = text[len(PUBLIC_KEY_PREFIX) :]
        try:
            raw = base64.b64decode(body.encode("ascii"), validate=True)
        except (binascii.Error, UnicodeEncodeError, ValueError):
            raw = b""
        if len(raw) != 32 or base64.b64encode(raw).decode("ascii") != body:
            raise KeyFileError(
                f"the public key after {PUBLIC_KEY_PREFIX!r} must be the standard, padded "
                "base64 of 32 bytes (44 characters)"
            )
        return cls(raw)

    def __repr__(self) -> str:
        return f"PublicKey({self.text!r})"


class Ed25519Signer:
    """A :class:`Signer` over an Ed25519 private key held in memory. Its ``repr`` shows the
    public key only."""

    __slots__ = ("_key", "_public")

    def __init__(self, private_key: ed25519.Ed25519PrivateKey) -> None:
        if not isinstance(private_key, ed25519.Ed25519PrivateKey):
            raise UnsupportedKeyError(
                f"Ed25519Signer takes an Ed25519 private key, got {type(private_key).__name__}"
            )
        self._key = private_key
        self._public = PublicKey(
            private_key.public_key().public_bytes(
                serialization.Encoding.Raw, serialization.PublicFormat.Raw
            )
        )

    @classmethod
    def generate(cls) -> Ed25519Signer:
        """A new random key (held in memory only)."""
        return cls(ed25519.Ed25519PrivateKey.generate())

    @classmethod
    def from_seed(cls, seed: bytes) -> Ed25519Signer:
        """The key whose 32-byte RFC 8032 private key (seed) is ``seed``."""
        if type(seed) is not bytes or len(seed) != 32:
            raise UsageError("an Ed25519 seed is exactly 32 bytes", option="seed")
        return cls(ed25519.Ed25519PrivateKey.from_private_bytes(seed))

    @property
    def key_id(self) -> str:
        return self._public.key_id

    @property
    def public_key(self) -> bytes:
        return self._public.raw

    @property
    def public(self) -> PublicKey:
        return self._public

    def sign(self, data: bytes) -> bytes:
        return self._key.sign(data)

    def private_pem(self, passphrase: bytes | str | None = None) -> bytes:
        """The private key as PKCS8 PEM, encrypted when a passphrase is given."""
        encryption: serialization.KeySerializationEncryption
        if passphrase is None:
            encryption = serialization.NoEncryption()
        else:
            encryption = serialization.BestAvailableEncryption(_passphrase_bytes(passphrase))
        return self._key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
        )

    def __repr__(self) -> str:
        return f"Ed25519Signer(public={self._public.text!r}, key_id={self.key_id!r})"


def _passphrase_bytes(passphrase: bytes | str) -> bytes:
    if isinstance(passphrase, str):
        passphrase = passphrase.encode("utf-8")
    if not isinstance(passphrase, bytes) or not passphrase:
        raise UsageError(
            "a passphrase must be a non-empty str or bytes (or None for an unencrypted key)",
            option="passphrase",
        )
    return passphrase


def _read_key_file(path: Path) -> bytes:
    if path.is_dir():
        raise KeyFileError(f"{path} is a folder: name the key file", path=str(path))
    try:
        with open_regular(path, error=KeyFileError) as handle:  # no FIFO, no device
            data = handle.read(MAX_KEY_FILE_BYTES + 1)
    except FileNotFoundError:
        raise KeyFileError(f"{path}: no such key file", path=str(path)) from None
    except OSError as exc:
        raise KeyFileError(
            f"{path}: cannot read the key file ({exc.strerror or type(exc).__name__})",
            path=str(path),
        ) from None
    if len(data) > MAX_KEY_FILE_BYTES:
        raise KeyFileError(
            f"{path} is larger than {MAX_KEY_FILE_BYTES} bytes: not a key file", path=str(path)
        )
    return data


def _private_from_pem(
    data: bytes, passphrase: bytes | str | None, where: str, path: str | None
) -> Ed25519Signer:
    stripped = data.lstrip()
    if stripped.startswith(_NOT_PKCS8):
        raise KeyFileError(
            f"{where} is a private key, but not in PKCS8 PEM: convert it (openssl pkcs8 "
            "-topk8) or create one with `agentfootprint keys generate`",
            path=path,
        )
    encrypted = stripped.startswith(_PKCS8_ENCRYPTED)
    if not encrypted and not stripped.startswith(_PKCS8):
        raise KeyFileError(
            f"{where} is not a PKCS8 PEM private key (it should start with "
            "'-----BEGIN PRIVATE KEY-----' or '-----BEGIN ENCRYPTED PRIVATE KEY-----'); "
            "create one with `agentfootprint keys generate`",
            path=path,
        )
    if encrypted and passphrase is None:
        raise WrongPassphraseError(
            f"{where} is encrypted: give its passphrase (passphrase=..., or --passphrase-env "
            "VAR on the command line)",
            path=path,
        )
    if not encrypted and passphrase is not None:
        raise WrongPassphraseError(
            f"{where} is not encrypted, but a passphrase was given: give none",
            path=path,
        )
    password = None if passphrase is None else _passphrase_bytes(passphrase)
    try:
        key = serialization.load_pem_private_key(stripped, password=password)
    except UnsupportedAlgorithm:
        raise UnsupportedKeyError(
            f"{where} holds a private key of a type this library cannot read: seals are "
            "Ed25519; create a key with `agentfootprint keys generate`",
            path=path,
        ) from None
    except (ValueError, TypeError):
        if encrypted:
            raise WrongPassphraseError(
                f"{where}: the passphrase does not decrypt this key (a wrong passphrase, or "
                "a damaged file)",
                path=path,
            ) from None
        raise KeyFileError(
            f"{where}: the PKCS8 PEM could not be decoded (a damaged or truncated file)",
            path=path,
        ) from None
    if not isinstance(key, ed25519.Ed25519PrivateKey):
        raise UnsupportedKeyError(
            f"{where} holds a {_key_kind(key)} private key: seals are Ed25519; create a key "
            "with `agentfootprint keys generate`",
            path=path,
        )
    return Ed25519Signer(key)


def _key_kind(key: object) -> str:
    kinds: tuple[tuple[str, tuple[type, ...]], ...] = (
        ("RSA", (rsa.RSAPrivateKey, rsa.RSAPublicKey)),
        ("EC", (ec.EllipticCurvePrivateKey, ec.EllipticCurvePublicKey)),
        ("DSA", (dsa.DSAPrivateKey, dsa.DSAPublicKey)),
        ("Ed448", (ed448.Ed448PrivateKey, ed448.Ed448PublicKey)),
        ("X25519", (x25519.X25519PrivateKey, x25519.X25519PublicKey)),
        ("X448", (x448.X448PrivateKey, x448.X448PublicKey)),
    )
    for name, classes in kinds:
        if isinstance(key, classes):
            return name
    return type(key).__name__


def load_signer(
    path: str | os.PathLike[str], passphrase: bytes | str | None = None
) -> Ed25519Signer:
    """The signer in a PKCS8 PEM key file (``-----BEGIN [ENCRYPTED] PRIVATE KEY-----``).

    Raises :class:`WrongPassphraseError` (encrypted without a passphrase, a wrong one, or
    one given for an unencrypted key), :class:`UnsupportedKeyError` (not Ed25519) or
    :class:`KeyFileError` (missing, unreadable, not PKCS8 PEM, damaged)."""
    where = Path(path)
    data = _read_key_file(where)
    return _private_from_pem(data, passphrase, str(where), str(where))


def load_public_key(source: str | bytes | os.PathLike[str] | PublicKey) -> PublicKey:
    """A public key from its text form (``ed25519:...``), its raw 32 bytes, or a file holding
    PEM SubjectPublicKeyInfo, the text form (one line) or the raw 32 bytes.

    A private key file is refused: give a verifier only the public key
    (``agentfootprint keys show KEYFILE`` prints it)."""
    if isinstance(source, PublicKey):
        return source
    if isinstance(source, bytes):
        if len(source) == 32:
            return PublicKey(source)
        return _public_from_bytes(source, "the public key given", None)
    if isinstance(source, str) and source.startswith(PUBLIC_KEY_PREFIX):
        return PublicKey.from_text(source.strip())
    if not isinstance(source, str | os.PathLike):
        raise UsageError(
            "a public key is its text form (ed25519:...), its raw 32 bytes or a file path, "
            f"got {type(source).__name__}"
        )
    path = Path(source)
    if not path.exists():
        raise KeyFileError(
            f"{path}: no such public key file (a public key given as text starts with "
            f"{PUBLIC_KEY_PREFIX!r})",
            path=str(path),
        )
    data = _read_key_file(path)
    return _public_from_bytes(data, str(path), str(path))


def _public_named(raw: bytes, where: str, path: str | None) -> PublicKey:
    try:
        return PublicKey(raw)
    except KeyFileError as exc:
        raise KeyFileError(f"{where}: {exc}", path=path) from None


def _public_from_bytes(data: bytes, where: str, path: str | None) -> PublicKey:
    stripped = data.strip()
    if stripped.startswith((_PKCS8, _PKCS8_ENCRYPTED, *_NOT_PKCS8)):
        raise KeyFileError(
            f"{where} is a private key: give a verifier its public key only "
            "(`agentfootprint keys show` prints it)",
            path=path,
        )
    if stripped.startswith(_SPKI):
        try:
            key = serialization.load_pem_public_key(stripped)
        except (ValueError, UnsupportedAlgorithm):
            raise KeyFileError(
                f"{where}: the PEM public key could not be decoded (damaged or truncated)",
                path=path,
            ) from None
        if not isinstance(key, ed25519.Ed25519PublicKey):
            raise UnsupportedKeyError(
                f"{where} holds a {_key_kind(key)} public key: seals are Ed25519", path=path
            )
        raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        return _public_named(raw, where, path)
    if stripped.startswith(PUBLIC_KEY_PREFIX.encode("ascii")):
        try:
            text = stripped.decode("ascii")
        except UnicodeDecodeError:
            text = ""
        try:
            return PublicKey.from_text(text)
        except KeyFileError as exc:
            raise KeyFileError(f"{where}: {exc}", path=path) from None
    if len(data) == 32:
        return _public_named(data, where, path)
    raise KeyFileError(
        f"{where} is not a public key: expected PEM ('-----BEGIN PUBLIC KEY-----'), the text "
        f"form ({PUBLIC_KEY_PREFIX}...) or the raw 32 bytes",
        path=path,
    )


def generate_key_file(
    path: str | os.PathLike[str], passphrase: bytes | str | None = None
) -> Ed25519Signer:
    """Create a new Ed25519 key and write it to ``path`` as PKCS8 PEM (encrypted when a
    passphrase is given), mode 0600.

    The file appears whole or not at all: the PEM is written to a new temporary file beside
    it (created ``O_EXCL``, 0600), flushed, then linked to ``path``, which fails if ``path``
    exists (an existing file is never overwritten, even by a racing writer). Returns the
    signer."""
    target = Path(path)
    if passphrase is not None:
        _passphrase_bytes(passphrase)
    folder = target.parent if str(target.parent) else Path(".")
    if os.path.lexists(target):
        raise KeyFileError(
            f"{target} already exists: refusing to overwrite a key file; choose another name",
            path=str(target),
        )
    if not folder.is_dir():
        raise KeyFileError(f"{target}: the folder {folder} does not exist", path=str(target))
    signer = Ed25519Signer.generate()
    data = signer.private_pem(passphrase)
    tmp = folder / f".{target.name}.{secrets.token_hex(8)}.partial"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(tmp, flags, 0o600)
    except OSError as exc:
        raise KeyFileError(
            f"{target}: cannot create the key file ({exc.strerror or type(exc).__name__})",
            path=str(target),
        ) from None
    try:
        try:
            os.fchmod(fd, 0o600)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        _link_no_overwrite(tmp, target)
    except FileExistsError:
        raise KeyFileError(
            f"{target} already exists: refusing to overwrite a key file; choose another name",
            path=str(target),
        ) from None
    except OSError as exc:
        raise KeyFileError(
            f"{target}: cannot write the key file ({exc.strerror or type(exc).__name__})",
            path=str(target),
        ) from None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    return signer


def _link_no_overwrite(tmp: Path, target: Path) -> None:
    """Give the complete file ``tmp`` the name ``target``, failing if ``target`` exists."""
    try:
        os.link(tmp, target)
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EXDEV):
            raise
        # no hard links here (some filesystems): create the target O_EXCL and copy into it,
        # removing it again if anything fails
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            try:
                os.fchmod(fd, 0o600)
                data = tmp.read_bytes()
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            finally:
                os.close(fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(target)
            raise
