"""C2SP signed notes (https://c2sp.org/signed-note) and tlog checkpoints
(https://c2sp.org/tlog-checkpoint), Ed25519 only.

A signed note is UTF-8 text ending in a newline, a blank line, then one or more lines
``— <key name> <base64(4-byte key ID || signature)>``. An Ed25519 key's ID is
``SHA-256(name || 0x0A || 0x01 || 32-byte public key)[:4]`` and its signature covers the
note text (final newline included, blank line excluded). A checkpoint is a note whose text
is the log's origin, its tree size in decimal, the base64 RFC 6962 root hash and optional
extension lines.

Parsing is strict (what :func:`format_note` and :func:`format_checkpoint` write is the only
spelling accepted) and verification follows signed-note: signature lines whose (name, key
ID) no trusted key has are ignored, a signature by a trusted key that fails to verify
rejects the whole note, and at least one trusted signature must verify. Trusted keys come
from the caller, never from the note. Rejections raise :class:`NoteError`.

The verifier key text form ("vkey") is golang.org/x/mod/sumdb/note's
``<name>+<hex key ID>+<base64(0x01 || public key)>``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from agentfootprint.errors import UsageError, VerificationError
from agentfootprint.logformat.canonical import MAX_SAFE_INT
from agentfootprint.seal.ed25519_keys import key_problem
from agentfootprint.seal.merkle import HASH_SIZE

__all__ = [
    "ALG_ED25519",
    "MAX_NOTE_BYTES",
    "MAX_SIGNATURES",
    "Checkpoint",
    "NoteError",
    "NoteSignature",
    "OpenedNote",
    "Trusted",
    "VerifierKey",
    "ed25519_verify",
    "format_checkpoint",
    "format_note",
    "key_id",
    "keys_named",
    "open_checkpoint",
    "open_note",
    "parse_checkpoint",
    "parse_note",
    "sign_checkpoint",
    "sign_note",
]

ALG_ED25519: Final = 0x01
#: signature lines beyond this many make the note malformed (signed-note: at least 16)
MAX_SIGNATURES: Final = 100
#: a note longer than this is malformed: room for 16 post-quantum signatures of ~5 KB each,
#: which signed-note requires verifiers to accept (100 Ed25519 signature lines take ~12 KB)
MAX_NOTE_BYTES: Final = 256 * 1024
_DASH: Final = "\u2014 "
_MAX_SIZE_DIGITS: Final = len(str(MAX_SAFE_INT))


class NoteError(VerificationError):
    """A signed note or checkpoint was rejected.

    ``code`` is the failure class: ``note/malformed`` (not a well-formed note or
    checkpoint), ``note/signature`` (a trusted key's signature does not verify),
    ``note/unverified`` (no trusted key signed it) or ``note/origin`` (another log's).
    """

    def __init__(self, code: str, reason: str, *, where: str = "signed note") -> None:
        super().__init__("", None, reason, code=code, where=where)


def _malformed(reason: str, where: str = "signed note") -> NoteError:
    return NoteError("note/malformed", reason, where=where)


def _b64decode(text: str) -> bytes | None:
    """Strict standard base64 (RFC 4648 §4): padded, no whitespace, canonical final bits."""
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        return None
    return raw if base64.b64encode(raw).decode("ascii") == text else None


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def _valid_name(name: str) -> bool:
    """Key names: non-empty, no Unicode space, no ``+`` (and, being note text, no controls)."""
    return bool(name) and "+" not in name and not any(ch.isspace() or ord(ch) < 0x20 for ch in name)


def keys_named(name: str, public_keys: Iterable[bytes]) -> list[VerifierKey]:
    """The caller's pinned raw Ed25519 keys under the key name ``name`` (a checkpoint's
    origin). A name no key can have (empty, a space, a ``+``) gives none: the note is then
    signed by no pinned key (``note/unverified``), a verdict on the evidence, never a usage
    error."""
    if not _valid_name(name):
        return []
    return [VerifierKey(name, raw) for raw in public_keys]


def key_id(name: str, public_key: bytes) -> bytes:
    """The 4-byte Ed25519 key ID: SHA-256(name || 0x0A || 0x01 || public key)[:4]."""
    return hashlib.sha256(
        name.encode("utf-8") + b"\n" + bytes([ALG_ED25519]) + public_key
    ).digest()[:4]


def ed25519_verify(public_key: bytes, message: bytes, signature: bytes) -> bool:
    """RFC 8032 Ed25519 verification through ``cryptography`` (OpenSSL): a 32-byte key, a
    64-byte signature with canonical S; False on anything else, never an exception."""
    if len(public_key) != 32 or len(signature) != 64 or key_problem(bytes(public_key)):
        return False  # a key of small order or not canonical verifies forgeries: proves nothing
    try:
        Ed25519PublicKey.from_public_bytes(public_key).verify(signature, message)
    except (InvalidSignature, ValueError):
        return False
    return True


@dataclass(frozen=True, slots=True)
class VerifierKey:
    """A trusted Ed25519 note key: its name and 32-byte raw public key."""

    name: str
    public_key: bytes

    def __post_init__(self) -> None:
        if type(self.name) is not str or not _valid_name(self.name):
            raise UsageError(
                f"a note key name must be non-empty, without spaces or '+', got {self.name!r}"
            )
        if not isinstance(self.public_key, bytes) or len(self.public_key) != 32:
            raise UsageError("an Ed25519 public key is 32 raw bytes")
        problem = key_problem(bytes(self.public_key))
        if problem is not None:
            shown = "ed25519:" + _b64(bytes(self.public_key))
            raise UsageError(
                f"note key {self.name}: ed25519 public key {shown} {problem}; pin the "
                "signer's real key"
            )
        try:
            Ed25519PublicKey.from_public_bytes(self.public_key)
        except ValueError as exc:
            raise UsageError(f"not an Ed25519 public key: {exc}") from None

    @property
    def key_id(self) -> bytes:
        return key_id(self.name, self.public_key)

    @property
    def vkey(self) -> str:
        """``<name>+<hex key ID>+<base64(0x01 || public key)>``."""
        return f"{self.name}+{self.key_id.hex()}+{_b64(bytes([ALG_ED25519]) + self.public_key)}"

    @classmethod
    def from_vkey(cls, text: str) -> VerifierKey:
        """Parse a vkey strictly; raises :class:`UsageError` naming what is wrong."""
        if type(text) is not str:
            raise UsageError(f"a verifier key is a str, got {type(text).__name__}")
        parts = text.split("+")
        if len(parts) != 3:
            raise UsageError("a verifier key is <name>+<key ID>+<key>: three parts joined by '+'")
        name, hex_id, b64key = parts
        if not _valid_name(name):
            raise UsageError(f"verifier key: the name {name!r} is empty or has a space")
        if len(hex_id) != 8 or any(ch not in "0123456789abcdef" for ch in hex_id):
            raise UsageError(f"verifier key: the key ID {hex_id!r} is not 8 lowercase hex digits")
        raw = _b64decode(b64key)
        if raw is None or not raw:
            raise UsageError("verifier key: the key is not canonical standard base64")
        if raw[0] != ALG_ED25519:
            raise UsageError(f"verifier key: algorithm byte 0x{raw[0]:02x} is not Ed25519 (0x01)")
        if len(raw) != 33:
            raise UsageError(f"verifier key: an Ed25519 key is 32 bytes, got {len(raw) - 1}")
        key = cls(name, raw[1:])
        if key.key_id.hex() != hex_id:
            raise UsageError(
                f"verifier key: the key ID {hex_id} does not match the name and key "
                f"({key.key_id.hex()})"
            )
        return key

    @classmethod
    def from_private_key(cls, name: str, private_key: Ed25519PrivateKey) -> VerifierKey:
        raw = private_key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        return cls(name, raw)


@dataclass(frozen=True, slots=True)
class NoteSignature:
    """One signature line: the key name, the 4-byte key ID and the signature bytes."""

    name: str
    key_id: bytes
    signature: bytes

    def line(self) -> str:
        return f"{_DASH}{self.name} {_b64(self.key_id + self.signature)}\n"


@dataclass(frozen=True, slots=True)
class OpenedNote:
    """A note whose signatures were checked: ``verified`` by trusted keys, ``ignored`` by
    keys the caller did not trust (kept only so they can be reported)."""

    text: str
    verified: tuple[VerifierKey, ...]
    ignored: tuple[NoteSignature, ...]


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A tlog-checkpoint body: origin, tree size, RFC 6962 root hash, extension lines."""

    origin: str
    size: int
    root: bytes
    extensions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if type(self.origin) is not str or not _valid_line(self.origin):
            raise UsageError(f"a checkpoint origin must be a non-empty line, got {self.origin!r}")
        if self.origin != self.origin.strip():
            raise UsageError(f"a checkpoint origin has no surrounding spaces: {self.origin!r}")
        if type(self.size) is not int or not 0 <= self.size <= MAX_SAFE_INT:
            raise UsageError(f"a checkpoint size is an int from 0 to 2**53-1, got {self.size!r}")
        if not isinstance(self.root, bytes) or len(self.root) != HASH_SIZE:
            raise UsageError("a checkpoint root hash is 32 bytes")
        for line in self.extensions:
            if type(line) is not str or not _valid_line(line):
                raise UsageError(f"a checkpoint extension is a non-empty line, got {line!r}")

    def text(self) -> str:
        """The note text: one line each, every line ending in a newline."""
        lines = [self.origin, str(self.size), _b64(self.root), *self.extensions]
        return "".join(line + "\n" for line in lines)


def _valid_line(line: str) -> bool:
    return bool(line) and not any(ord(ch) < 0x20 for ch in line)


def _check_text(text: str, where: str) -> str:
    if type(text) is not str:
        raise UsageError(f"{where}: note text is a str, got {type(text).__name__}")
    if not text.endswith("\n"):
        raise UsageError(f"{where}: note text must end in a newline")
    if any(ord(ch) < 0x20 and ch != "\n" for ch in text):
        raise UsageError(f"{where}: note text must not hold control characters")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise UsageError(f"{where}: note text must be encodable as UTF-8") from None
    return text


def format_note(text: str, signatures: Sequence[NoteSignature]) -> bytes:
    """The note's bytes: ``text``, a blank line, one line per signature."""
    _check_text(text, "format_note")
    if not signatures:
        raise UsageError("format_note: a signed note has at least one signature")
    for sig in signatures:
        if not isinstance(sig, NoteSignature) or not _valid_name(sig.name):
            raise UsageError(f"format_note: {sig!r} is not a signature with a valid key name")
        if len(sig.key_id) != 4 or not sig.signature:
            raise UsageError("format_note: a signature has a 4-byte key ID and signature bytes")
    return (text + "\n" + "".join(sig.line() for sig in signatures)).encode("utf-8")


def sign_note(text: str, signers: Sequence[tuple[str, Ed25519PrivateKey]]) -> bytes:
    """Sign ``text`` with each (key name, Ed25519 private key) and return the note's bytes."""
    _check_text(text, "sign_note")
    if not signers:
        raise UsageError("sign_note: give at least one (name, private key) signer")
    message = text.encode("utf-8")
    sigs = []
    for name, private in signers:
        if not isinstance(private, Ed25519PrivateKey):
            raise UsageError("sign_note: each signer is a (name, Ed25519PrivateKey) pair")
        key = VerifierKey.from_private_key(name, private)
        sigs.append(NoteSignature(name, key.key_id, private.sign(message)))
    return format_note(text, sigs)


def format_checkpoint(checkpoint: Checkpoint, signatures: Sequence[NoteSignature]) -> bytes:
    return format_note(checkpoint.text(), signatures)


def sign_checkpoint(checkpoint: Checkpoint, name: str, private_key: Ed25519PrivateKey) -> bytes:
    """The signed checkpoint note (the log's key name SHOULD be the origin)."""
    return sign_note(checkpoint.text(), [(name, private_key)])


def parse_note(data: bytes) -> tuple[str, tuple[NoteSignature, ...]]:
    """Split a note into its text and signature lines, checking only the syntax."""
    if not isinstance(data, bytes):
        raise _malformed(f"a note is bytes, got {type(data).__name__}")
    if len(data) > MAX_NOTE_BYTES:
        raise _malformed(f"the note is {len(data)} bytes, more than {MAX_NOTE_BYTES}")
    try:
        whole = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _malformed(f"byte {exc.start} is not UTF-8") from None
    for i, ch in enumerate(whole):
        if ord(ch) < 0x20 and ch != "\n":
            raise _malformed(f"character {i} is the control character U+{ord(ch):04X}")
    split = whole.rfind("\n\n")
    if split < 0:
        raise _malformed("no blank line separates the text from the signatures")
    text, block = whole[: split + 1], whole[split + 2 :]
    if not block:
        raise _malformed("the note has no signature lines")
    if not block.endswith("\n"):
        raise _malformed("the last signature line does not end in a newline")
    lines = block[:-1].split("\n")
    if len(lines) > MAX_SIGNATURES:
        raise _malformed(f"the note has {len(lines)} signature lines, more than {MAX_SIGNATURES}")
    sigs = []
    for n, line in enumerate(lines, 1):
        if not line.startswith(_DASH):
            raise _malformed(f"signature line {n} does not start with an em dash and a space")
        name, space, b64 = line[len(_DASH) :].partition(" ")
        if not space or not _valid_name(name):
            raise _malformed(f"signature line {n}: the key name {name!r} is not valid")
        raw = _b64decode(b64)
        if raw is None or len(raw) < 5:
            raise _malformed(f"signature line {n}: not canonical base64 of a key ID and signature")
        sigs.append(NoteSignature(name, raw[:4], raw[4:]))
    return text, tuple(sigs)


Trusted = VerifierKey | tuple[str, bytes]


def _trust_map(trusted: Iterable[Trusted]) -> dict[tuple[str, bytes], VerifierKey]:
    if isinstance(trusted, str | bytes | VerifierKey):
        raise UsageError("trusted keys are a list of VerifierKey or (name, public key) pairs")
    keys: dict[tuple[str, bytes], VerifierKey] = {}
    for item in trusted:
        if isinstance(item, tuple) and len(item) == 2:
            key = VerifierKey(*item)
        elif isinstance(item, VerifierKey):
            key = item
        else:
            raise UsageError(
                "trusted keys are VerifierKey values or (name, 32-byte public key) pairs, "
                f"got {type(item).__name__}"
            )
        other = keys.setdefault((key.name, key.key_id), key)
        if other.public_key != key.public_key:
            raise UsageError(f"two trusted keys share the name and key ID of {key.vkey}")
    return keys


def open_note(data: bytes, trusted: Iterable[Trusted]) -> OpenedNote:
    """Parse ``data`` and verify it against the caller's ``trusted`` keys (signed-note):
    :class:`VerifierKey` values or (key name, 32-byte raw Ed25519 public key) pairs."""
    keys = _trust_map(trusted)
    text, sigs = parse_note(data)
    message = text.encode("utf-8")
    verified: list[VerifierKey] = []
    ignored: list[NoteSignature] = []
    for sig in sigs:
        key = keys.get((sig.name, sig.key_id))
        if key is None:
            if sig not in ignored:
                ignored.append(sig)
            continue
        if not ed25519_verify(key.public_key, message, sig.signature):
            raise NoteError(
                "note/signature",
                f"the signature by trusted key {key.name}+{key.key_id.hex()} does not verify",
            )
        if key not in verified:
            verified.append(key)
    if not verified:
        names = ", ".join(f"{s.name}+{s.key_id.hex()}" for s in ignored)
        raise NoteError("note/unverified", f"no trusted key signed this note (signed by {names})")
    return OpenedNote(text, tuple(verified), tuple(ignored))


def parse_checkpoint(text: str) -> Checkpoint:
    """Parse a checkpoint's note text strictly (does not check any signature)."""
    where = "checkpoint"
    if type(text) is not str:
        raise _malformed(f"checkpoint text is a str, got {type(text).__name__}", where)
    if not text.endswith("\n"):
        raise _malformed("the checkpoint text does not end in a newline", where)
    lines = text[:-1].split("\n")
    if len(lines) < 3:
        raise _malformed(f"a checkpoint has at least 3 lines, this one {len(lines)}", where)
    origin, size_line, root_line, *extensions = lines
    if not origin or origin != origin.strip():
        raise _malformed(
            f"line 1, the origin {origin!r}, is empty or has surrounding spaces", where
        )
    if not (
        0 < len(size_line) <= _MAX_SIZE_DIGITS
        and size_line.isascii()
        and size_line.isdigit()
        and (size_line == "0" or not size_line.startswith("0"))
    ):
        raise _malformed(f"line 2, the tree size {size_line!r}, is not a decimal number", where)
    size = int(size_line)
    if size > MAX_SAFE_INT:
        raise _malformed(f"line 2, the tree size {size}, is above 2**53-1", where)
    root = _b64decode(root_line)
    if root is None or len(root) != HASH_SIZE:
        raise _malformed(f"line 3, {root_line!r}, is not the base64 of a 32-byte hash", where)
    for n, line in enumerate(extensions, 4):
        if not line:
            raise _malformed(f"line {n}, an extension line, is empty", where)
    return Checkpoint(origin, size, root, tuple(extensions))


def open_checkpoint(
    data: bytes, trusted: Iterable[Trusted], *, origin: str | None = None
) -> tuple[Checkpoint, OpenedNote]:
    """Verify a signed checkpoint against ``trusted`` keys and parse its body. With
    ``origin``, the checkpoint must be that log's."""
    opened = open_note(data, trusted)
    checkpoint = parse_checkpoint(opened.text)
    if origin is not None and checkpoint.origin != origin:
        raise NoteError(
            "note/origin",
            f"the checkpoint is for log {checkpoint.origin!r}, not {origin!r}",
            where="checkpoint",
        )
    return checkpoint, opened
