"""Which 32-byte strings may be pinned as Ed25519 public keys (docs/seals.md section 1).

A verifier trusts whatever key its caller pins, so a key that proves nothing must be refused
when it is read, never accepted and then "verified" against. Two kinds prove nothing:

* an encoding that RFC 8032 section 5.1.3 does not decode: ``y`` not below ``p = 2^255 - 19``,
  a ``y`` with no point on the curve, or ``x = 0`` with the sign bit set (the other spelling
  of a point whose canonical encoding has it clear). Verifiers differ on such encodings;
* a point of small order (its multiple by the cofactor 8 is the identity): under such a key
  ``A``, a signature with ``R`` of small order and ``S = 0`` satisfies ``8SB = 8R + 8kA`` for
  every message, so anyone can "sign" anything. The identity ``(0, 1)``, encoded
  ``01 00 .. 00``, is the best known one.

The check decodes the point and doubles it three times with Python integers (it runs once
per key read). :data:`SMALL_ORDER_ENCODINGS` lists the encodings it refuses for small order,
canonical and not, as the "Taming the many EdDSAs" paper and libsodium's blocklist give them;
the tests hold the arithmetic to that list.
"""

from __future__ import annotations

from typing import Final

__all__ = ["SMALL_ORDER_ENCODINGS", "P", "key_problem"]

#: the field prime
P: Final = 2**255 - 19
#: the curve constant d = -121665 / 121666
_D: Final = (-121665 * pow(121666, P - 2, P)) % P
#: a square root of -1
_SQRT_M1: Final = pow(2, (P - 1) // 4, P)

#: every 32-byte encoding of a point of small order that decodes or nearly does: the eight
#: points in canonical form, then the non-canonical spellings (sign bit set on x = 0, y + p)
SMALL_ORDER_ENCODINGS: Final = tuple(
    bytes.fromhex(h)
    for h in (
        # canonical: the identity, order 2, the two of order 4, the four of order 8
        "0100000000000000000000000000000000000000000000000000000000000000",
        "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
        "0000000000000000000000000000000000000000000000000000000000000000",
        "0000000000000000000000000000000000000000000000000000000000000080",
        "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
        "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc85",
        "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
        "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa",
        # not canonical: x = 0 with the sign bit set (the identity, order 2)
        "0100000000000000000000000000000000000000000000000000000000000080",
        "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
        # not canonical: y + p for y = 0 and y = 1, either sign bit
        "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
        "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
        "eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
        "eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
    )
)


def _decoded(raw: bytes) -> tuple[int, int] | str:
    """RFC 8032 section 5.1.3: the point ``(x, y)``, or why the bytes are no encoding."""
    number = int.from_bytes(raw, "little")
    sign, y = number >> 255, number & ((1 << 255) - 1)
    if y >= P:
        return "is not a canonical encoding (its y is not below 2^255 - 19)"
    u, v = (y * y - 1) % P, (_D * y * y + 1) % P
    x = (u * pow(v, 3, P) * pow(u * pow(v, 7, P), (P - 5) // 8, P)) % P
    if (v * x * x - u) % P != 0:
        x = (x * _SQRT_M1) % P
        if (v * x * x - u) % P != 0:
            return "is not a point of the curve"
    if x == 0 and sign:
        return "is not a canonical encoding (x is 0 and its sign bit is set)"
    return (P - x if x & 1 != sign else x), y


def _double(x: int, y: int) -> tuple[int, int]:
    """2(x, y) on -x^2 + y^2 = 1 + d x^2 y^2 (affine; the formula is complete)."""
    xy = x * y % P
    dxy = _D * xy * xy % P
    return (2 * xy * pow(1 + dxy, P - 2, P)) % P, ((y * y + x * x) * pow(1 - dxy, P - 2, P)) % P


def key_problem(raw: bytes) -> str | None:
    """Why ``raw`` (32 bytes) cannot be pinned as an Ed25519 public key, as the end of a
    sentence about the key ("is of small order: ..."); None when it can."""
    if type(raw) is not bytes or len(raw) != 32:
        return "is not exactly 32 bytes"
    point = _decoded(raw)
    if isinstance(point, str):
        return point
    x, y = point
    for _ in range(3):
        x, y = _double(x, y)
    if (x, y) == (0, 1):
        return "is of small order: it would verify forged signatures"
    return None
