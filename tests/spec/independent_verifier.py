"""An independent verifier of the agentfootprint log formats v1 to v6 (and request
projections v1 to v4, export bundles of versions 1, 2 and 3), written from
``docs/log-format.md`` and ``docs/merkle.md`` alone (it imports nothing of ``agentfootprint``).

:func:`verify_file` (section 9.5) gives the verdicts ``(run_id, outcome_or_code, seq)`` of a
database or an export bundle: an outcome is ``"VALID"``, ``"VALID_UNSIGNED"`` or
``"UNSEALED"``, a failure is a code of section 9.4; ``"index"`` findings follow the runs; a
bundle whose framing is wrong gives the one verdict ``(None, "bundle", None)``. A file that
is not a log, or is newer than this reader knows, gives ``(None, "usage", None)``, a missing
or unreadable path ``(None, "file", None)``: neither is a verification verdict (section 4).
:func:`explain_file` adds a reason to each verdict. Section numbers in comments are the page's.
A database is read in any of SQLite storage schemas 1, 2 and 4 (section 4; schema 4's records
are decoded in ``independent_schema4.py``, written from the same page).

Keys: ``keys`` (raw 32-byte Ed25519 public keys) pin the signers of seals and checkpoints: a
sealed run whose seal verifies under a pinned key is ``"VALID"`` (section 9.2 step 4.4), a
version 2 bundle's checkpoint is opened under them (section 13.4). A run's proven inclusion
is in :func:`inclusions` and in the reason :func:`explain_file` gives a verified run. A key
that proves nothing (seals.md section 1: not a canonical encoding of a point, or of small
order) is refused wherever it is given: ``(None, "usage", None)``, or ``"usage"``.
:func:`verify_runs` verifies named runs only (section 9.6 ``--run``).
:func:`artifact_verdicts` judges a version 3 bundle's artifacts (section 13.5, in
``independent_artifacts.py``, written from the same page).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import itertools
import json
import os
import re
import sqlite3
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import independent_artifacts as artifacts
import independent_schema4 as schema4
import re2
import regex
import rfc8785

MAX_SAFE_INT = 2**53 - 1
MAX_DEPTH, ENVELOPE_DEPTH = 250, 5
MAX_BODY_BYTES = 64 * 1024 * 1024
MAX_ENVELOPE_BYTES = 64 * 1024
MAX_BUNDLE_LINE_BYTES = 2 * MAX_BODY_BYTES + MAX_ENVELOPE_BYTES
FORMAT_V1, FORMAT_V2 = "agentfootprint/log/v1", "agentfootprint/log/v2"
FORMAT_V3, FORMAT_V4 = "agentfootprint/log/v3", "agentfootprint/log/v4"
FORMAT_V5, FORMAT_V6 = "agentfootprint/log/v5", "agentfootprint/log/v6"
LOG_FORMATS = (FORMAT_V1, FORMAT_V2, FORMAT_V3, FORMAT_V4, FORMAT_V5, FORMAT_V6)
MARKED = (FORMAT_V2, FORMAT_V3, FORMAT_V4, FORMAT_V5, FORMAT_V6)  # 5.6: call markers
WRITE_AHEAD = (FORMAT_V3, FORMAT_V4, FORMAT_V5, FORMAT_V6)  # section 6: receipts ahead
SEALED = (FORMAT_V4, FORMAT_V5, FORMAT_V6)  # section 5.8: run.open.seal and run.seal
PAUSES = (FORMAT_V5, FORMAT_V6)  # section 5.9: the paused outcome, resumes and abandons
READS = (FORMAT_V6,)  # section 5.10: reads on every write
#: section 5.9: pending's members (required, then optional) and what a resume writes first
PENDING_REQUIRED = ("request_id", "kind", "tool_call_id", "tool", "question")
PENDING_OPTIONAL = {"fields": dict, "context": dict, "service": str}
MANIFEST_FORMAT = FORMAT_V1  # section 13.1: fixed in bundle version 1, whatever the runs record
TYPES = ("run.open", "write", "receipt", "event", "commit", "run.close", "run.seal")
PHASE = {"receipt": 1, "event": 2, "write": 3}
KINDS = (
    ("system", "system_pieces", "piece/system"),
    ("messages", "history", "piece/message"),
    ("tools", "tool_schemas", "piece/tool"),
)
KNOWN_SCHEMA_VERSION, KNOWN_BUNDLE_VERSION = 4, 3  # 4: one row per append (section 4); 3: 13.5
SQLITE_MAGIC = b"SQLite format 3\x00"
BUNDLE_PREFIX = b'{"agentfootprint_bundle":'
BUNDLE_VERSION = re.compile(rb'\{"agentfootprint_bundle":(-?(?:0|[1-9][0-9]*))(?![0-9.eE])')
HEX64 = re.compile(r"[0-9a-f]{64}")
SURROGATE = re.compile("[\ud800-\udfff]")
BRACKET = re.compile(r"[\[\]{}]")
JSON_WS = " \t\n\r"
V1_BUDGET_S, V1_PER_KEY_S, V1_MAX_KEY = 1.0, 50e-6, 256
VALID, UNSEALED, SIGNED = "VALID_UNSIGNED", "UNSEALED", "VALID"


class Failure(Exception):
    """INVALID: one failure code (section 9.4), the seq (or None) and a reason. Also what is
    not a verdict: code "usage" (not a log, or newer than this reader) and "file"."""

    def __init__(self, code: str, seq: int | None, reason: str) -> None:
        super().__init__(f"[{code}] seq {seq}: {reason}")
        self.code, self.seq, self.reason = code, seq, reason


def usage(why: str) -> Failure:
    return Failure("usage", None, why)


# --- pinned keys (docs/seals.md section 1, "Keys that prove nothing") ---------------------

ED_P = 2**255 - 19
ED_D = -121665 * pow(121666, -1, ED_P) % ED_P


def _ed_add(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    """RFC 8032 section 5.1.4: point addition in extended coordinates (X, Y, Z, T)."""
    x1, y1, z1, t1 = a
    x2, y2, z2, t2 = b
    aa, bb = (y1 - x1) * (y2 - x2) % ED_P, (y1 + x1) * (y2 + x2) % ED_P
    cc, dd = t1 * 2 * ED_D * t2 % ED_P, z1 * 2 * z2 % ED_P
    e, f, g, h = bb - aa, dd - cc, dd + cc, bb + aa
    return e * f % ED_P, g * h % ED_P, f * g % ED_P, e * h % ED_P


def pinned_key_problem(key: Any) -> str | None:
    """Why ``key`` cannot be pinned (seals.md section 1), or None: 32 bytes that RFC 8032
    section 5.1.3 decodes as a point whose multiple by 8 is not the identity."""
    if not isinstance(key, bytes) or len(key) != 32:
        return "not 32 bytes"
    y = int.from_bytes(key, "little") & ((1 << 255) - 1)
    sign = key[31] >> 7
    if y >= ED_P:
        return "y is not below p: not canonical"
    u, v = (y * y - 1) % ED_P, (ED_D * y * y + 1) % ED_P
    x = u * pow(v, 3, ED_P) * pow(u * pow(v, 7, ED_P), (ED_P - 5) // 8, ED_P) % ED_P
    if v * x * x % ED_P == (-u) % ED_P:
        x = x * pow(2, (ED_P - 1) // 4, ED_P) % ED_P
    if v * x * x % ED_P != u:
        return "no point has this y"
    if x == 0 and sign:
        return "x is 0 with the sign bit set: not canonical"
    if x % 2 != sign:
        x = ED_P - x
    point = (x, y, 1, x * y % ED_P)
    for _ in range(3):
        point = _ed_add(point, point)
    px, py, pz, _ = point
    if px % ED_P == 0 and (py - pz) % ED_P == 0:
        return "of small order: it verifies forged signatures"
    return None


def refuse_keys(keys: Iterable[bytes]) -> tuple[bytes, ...]:
    """The pinned keys, each checked; a usage failure names the first that proves nothing."""
    out = tuple(bytes(k) for k in keys)
    for key in out:
        why = pinned_key_problem(key)
        if why is not None:
            raise usage(f"the pinned key ed25519:{base64.b64encode(key).decode()} is {why}")
    return out


class BudgetSpent(Exception):
    """The version 1 matching budget of the run is used up (appendix C.2)."""


# --- canonical form and hashing (sections 2, 3) ------------------------------------------


def H(tag: str, data: bytes) -> bytes:
    return hashlib.sha256(b"afp/v1/" + tag.encode("ascii") + b"\x00" + data).digest()


def canon(value: Any) -> bytes:
    return rfc8785.dumps(value)


def is_int(x: Any) -> bool:
    return type(x) is int  # int excludes booleans; integral doubles beyond 2^53 stay doubles


def is_hex(x: Any) -> bool:
    return isinstance(x, str) and HEX64.fullmatch(x) is not None


def is_str(x: Any) -> bool:
    return isinstance(x, str)


def is_obj(x: Any) -> bool:
    return isinstance(x, dict)


def is_arr(x: Any) -> bool:
    return isinstance(x, list)


def decoder(flags: set[str], *, bundle: bool = False) -> json.JSONDecoder:
    """RFC 8259 JSON; numbers as the nearest double, as an integer when that double is integral
    and safe (sections 2, 12.2 step 6). Duplicate names and infinite numbers go to ``flags``.
    ``bundle``: section 13.1 numbers instead, where an integer is a token without fraction or
    exponent within the safe range (an ``int``) and every other number is a ``float``."""

    def number(token: str) -> int | float:
        d = float(token)
        if d in (float("inf"), float("-inf")):
            flags.add("a number whose nearest double is infinite")
            return 0
        return int(d) if d.is_integer() and abs(d) <= MAX_SAFE_INT else d

    def integer(token: str) -> int | float:
        if len(token.lstrip("-")) <= 16 and abs(int(token)) <= MAX_SAFE_INT:
            return int(token)
        return float(token)

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = dict(items)
        if len(obj) != len(items):
            flags.add("a member name twice")
        return obj

    def constant(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    return json.JSONDecoder(
        object_pairs_hook=pairs,
        parse_float=float if bundle else number,
        parse_int=integer if bundle else number,
        parse_constant=constant,
    )


def bracket_depth(s: str) -> int:
    """Section 12.2 step 3: the nesting of brackets outside string literals, linear time."""
    t = s.replace("\\\\", "").replace('\\"', "")
    count = best = 0
    for piece in t.split('"')[::2]:
        for m in BRACKET.finditer(piece):
            count += 1 if m.group() in "[{" else -1
            best = max(best, count)
    return best


def depth_and_surrogates(value: Any) -> tuple[int, bool]:
    """Depth as section 2 defines it (the root 0, a member or element d + 1) and whether a
    string or member name holds a lone surrogate."""
    best, lone = 0, False
    stack = [(value, 0)]
    while stack:
        v, d = stack.pop()
        best = max(best, d)
        if isinstance(v, dict):
            lone = lone or any(SURROGATE.search(k) for k in v)
            stack.extend((item, d + 1) for item in v.values())
        elif isinstance(v, list):
            stack.extend((item, d + 1) for item in v)
        elif isinstance(v, str):
            lone = lone or SURROGATE.search(v) is not None
    return best, lone


def parse_body(b: bytes, seq: int) -> Any:
    """The canonical check of section 2 (depth limit 255), else Failure(canonical)."""

    def bad(why: str) -> Failure:
        return Failure("canonical", seq, why)

    limit = MAX_DEPTH + ENVELOPE_DEPTH
    try:
        text = b.decode("utf-8")
    except UnicodeDecodeError:
        raise bad("body is not UTF-8") from None
    if bracket_depth(text) > limit + 1:  # deeper than the limit, however it fails to parse
        raise bad(f"body nested deeper than {limit}")
    flags: set[str] = set()
    try:
        value = decoder(flags).decode(text)
    except (ValueError, RecursionError) as e:
        raise bad(f"body is not JSON: {e}") from None
    depth, lone = depth_and_surrogates(value)
    if flags or lone or depth > limit:
        raise bad(f"body is not I-JSON ({sorted(flags)}, lone surrogate {lone}, depth {depth})")
    try:
        again = canon(value)
    except Exception as e:
        raise bad(f"body is not I-JSON: {e}") from None
    if again != b:
        raise bad("body differs from its canonical form")
    return value


# --- the JSON-text rule (section 12.2) ---------------------------------------------------

TEXT, OPAQUE, WALKABLE = "text", "opaque", "walkable"


def classify(s: str) -> tuple[str, Any]:
    t = s.lstrip(JSON_WS)
    if not t or t[0] not in "{[" or SURROGATE.search(s):
        return TEXT, None  # steps 1, 2
    if bracket_depth(s) > MAX_DEPTH:
        return OPAQUE, None  # step 3
    flags: set[str] = set()
    try:
        v = decoder(flags).decode(s)  # JSON whitespace is allowed around the value
    except (ValueError, RecursionError):
        return TEXT, None  # step 4
    if flags or depth_and_surrogates(v)[1]:
        return OPAQUE, None  # step 5
    return WALKABLE, v


# --- policies (sections 12.1, 12.2) ------------------------------------------------------


@dataclass
class Matcher:
    version: int
    keys: set[str]
    patterns: list[Any]
    cache: dict[str, bool] = field(default_factory=dict)
    budget: float = V1_BUDGET_S
    spent: bool = False

    def matches(self, key: str) -> bool:
        if key in self.keys:
            return True
        if key not in self.cache:
            if self.version in (2, 3):  # unanchored RE2 search in the UTF-8 key, no length limit
                self.cache[key] = any(p.search(key) for p in self.patterns)
            elif len(key) > V1_MAX_KEY:  # longer keys match exact keys only
                return False
            else:
                self.cache[key] = self._v1(key)
        return self.cache[key]

    def _v1(self, key: str) -> bool:
        """Python-re semantics (the regex module in VERSION0 mode) under the run's budget."""
        if self.spent:
            raise BudgetSpent
        self.budget += V1_PER_KEY_S
        for p in self.patterns:
            start = time.process_time()
            try:
                found = p.search(key, timeout=max(self.budget, 1e-6))
            except TimeoutError:
                found, self.budget = None, 0.0
            self.budget -= time.process_time() - start
            if self.budget <= 0:
                self.spent = True
                raise BudgetSpent
            if found is not None:
                return True
        return False


def check_policy(policy: Any, digest: Any) -> Matcher | None:
    """Section 12.1: None for no policy, else a matcher; Failure(policy) at seq 0."""
    if policy is None and digest is None:
        return None

    def bad(why: str) -> Failure:
        return Failure("policy", 0, why)

    if policy is None or digest is None:
        raise bad("one of policy and policy_digest is null and the other is not")
    if not is_obj(policy) or set(policy) != {"v", "keys", "patterns"}:
        raise bad("the policy is not an object with exactly v, keys and patterns")
    v, keys, patterns = policy["v"], policy["keys"], policy["patterns"]
    if not is_int(v) or v not in (1, 2, 3):
        raise bad(f"unknown policy version {v!r}")
    for items in (keys, patterns):
        if not isinstance(items, list) or not all(is_str(x) and x for x in items):
            raise bad("keys or patterns is not an array of non-empty strings")
    compiled = []
    for p in patterns:
        try:
            if v in (2, 3):  # section 12.1: version 3 reads patterns as version 2 does
                compiled.append(re2.compile(p))
            else:
                re.compile(p)
                compiled.append(regex.compile(p, regex.VERSION0))
        except Exception as e:
            raise bad(f"pattern {p!r} does not compile: {e}") from None
    if keys != sorted(set(keys)):
        raise bad("keys are not sorted by code point and unique (not in normal form)")
    if digest != H("policy", canon(policy)).hex():
        raise bad("policy_digest differs from the digest of the policy")
    return Matcher(v, set(keys), compiled)


# --- the redaction checks (section 12.5) -------------------------------------------------


def is_commitment(v: Any) -> bool:
    return is_obj(v) and len(v) == 1 and is_hex(v.get("$commit"))


def commitment_positions(value: Any) -> dict[tuple[Any, ...], str]:
    """Every commitment in ``value`` by its position: member names, array indexes, and None
    for a step into walkable JSON text."""
    found: dict[tuple[Any, ...], str] = {}
    stack: list[tuple[Any, tuple[Any, ...]]] = [(value, ())]
    while stack:
        v, pos = stack.pop()
        if isinstance(v, dict):
            if is_commitment(v):
                found[pos] = v["$commit"]
            elif "$commit" not in v:
                stack.extend((item, (*pos, k)) for k, item in v.items())
        elif isinstance(v, list):
            stack.extend((item, (*pos, i)) for i, item in enumerate(v))
        elif isinstance(v, str) and (parsed := classify(v))[0] == WALKABLE:
            stack.append((parsed[1], (*pos, None)))
    return found


@dataclass
class Redaction:
    """What the checks of one run remember: its policy and the commitments it wrote."""

    policy: Matcher | None = None
    seen: set[str] = field(default_factory=set)
    inherited: set[str] = field(default_factory=set)
    #: section 12.5 step 1: digest -> (seq, the key it sits under), at its first sighting
    sightings: dict[str, tuple[int, str | None]] = field(default_factory=dict)
    #: every scanned value: (seq, its name, the value), for the echo check (section 12.8)
    scans: list[tuple[int, str | None, Any]] = field(default_factory=list)

    def scan(
        self, value: Any, seq: int, in_place: dict[tuple[Any, ...], str], name: str | None = None
    ) -> None:
        """Walk one scanned value (``name``: an append's or merge's path); report commitment,
        then policy-budget, reuse, leak."""
        malformed = reuse = budget = False
        leak = ""
        self.scans.append((seq, name, value))
        stack: list[tuple[Any, tuple[Any, ...], bool, str | None]] = [(value, (), False, name)]
        while stack:
            v, pos, reported, under = stack.pop()  # reported: inside a value already reported
            if isinstance(v, dict):
                if "$commit" in v:
                    if not is_commitment(v):
                        malformed = True
                        continue
                    d = v["$commit"]
                    if d in self.seen and d not in self.inherited and in_place.get(pos) != d:
                        reuse = True
                    self.seen.add(d)
                    self.sightings.setdefault(d, (seq, under))
                    continue
                for name, item in v.items():
                    hit = False
                    if self.policy is not None and not reported and not budget:
                        try:
                            hit = self.policy.matches(name)
                        except BudgetSpent:
                            budget = True
                    leaked = hit and not is_commitment(item)
                    if leaked:
                        leak = leak or f"member {name!r} at {list(pos)} holds no commitment"
                    stack.append((item, (*pos, name), reported or leaked, name))
            elif isinstance(v, list):
                stack.extend((item, (*pos, i), reported, under) for i, item in enumerate(v))
            elif isinstance(v, str):
                kind, parsed = classify(v)
                if kind == WALKABLE:
                    stack.append((parsed, (*pos, None), reported, under))
                elif kind == OPAQUE and self.policy is not None and not reported:
                    leak = leak or f"JSON text the boundary commits whole at {list(pos)}"
        if malformed:
            raise Failure("commitment", seq, "an object with $commit that is not a commitment")
        if budget:
            raise Failure("policy-budget", seq, "matching version 1 patterns used up the budget")
        if reuse:
            raise Failure("commitment-reuse", seq, "a commitment written a second time")
        if leak:
            raise Failure("leak", seq, leak)


# --- sources: a database (section 4) and an export bundle (section 13) --------------------

Row = tuple[Any, Any, Any, Any, Any, Any, Any]  # run_id, seq, type, ts, body, e, c
COLUMNS = ("run_id", "seq", "type", "ts", "body", "event_hash", "chain_hash")


def typed(kind: bytes, v: Any) -> Any:
    """A column as SQLite stores it, uncoerced: TEXT as str (text that is not UTF-8 as the
    tuple ``("not UTF-8", bytes)``), BLOB as bytes, INTEGER, REAL and NULL as they are."""
    if kind == b"text":
        try:
            return v.decode("utf-8")
        except UnicodeDecodeError:
            return ("not UTF-8", v)
    return bytes(v) if kind == b"blob" else v


def select_typed(columns: tuple[str, ...]) -> str:
    return ", ".join(f"typeof({c}), {c}" for c in columns)


def open_readonly(path: Path) -> sqlite3.Connection:
    """Section 4: ``immutable=1`` when no -wal or -journal is beside the file, else mode=ro."""
    beside = any(Path(f"{path}{s}").exists() for s in ("-wal", "-journal"))
    conn = sqlite3.connect(path.resolve().as_uri() + ("?mode=ro" if beside else "?immutable=1"),
                           uri=True)  # fmt: skip
    conn.text_factory = bytes  # typeof() says what each value is; decode TEXT ourselves
    return conn


RUNS_COLUMNS = {"run_id", "conversation_id", "parent_run_id", "opened_at"}
LOG_TABLES = {"schema_version": {"version"}, "events": set(COLUMNS), "runs": RUNS_COLUMNS}
ROWS_COLUMNS = ("pos", "type", "ts", "body", "head", "stage", "commit_no", "stage_k")
LOG_TABLES_2 = {  # schema 2 (section 4, "Schema version 2")
    "schema_version": {"version"},
    "rows": set(ROWS_COLUMNS),
    "run_keys": {"run_key", "run_id"},
    "runs": RUNS_COLUMNS,
}
LOG_TABLES_4 = {  # schema 4 (section 4, "Schema version 4")
    "schema_version": {"version"},
    "appends": {"pos", "count", "ts", "head", "data"},
    "run_keys": {"run_key", "run_id"},
    "names": {"id", "text"},
    "opens": {"id", "prefix", "middle", "suffix"},
    "runs": RUNS_COLUMNS,
}
LAYOUTS = {1: LOG_TABLES, 2: LOG_TABLES_2, 4: LOG_TABLES_4}
KEYED = {2: "rows", 4: "appends"}  # the table whose pos >> 32 keys the runs of a layout
MAX_SQLITE_INT = 2**63 - 1
TYPE_CODES = {i + 1: t for i, t in enumerate(TYPES)}  # 1 run.open ... 6 run.close, 7 run.seal
SEQ_BITS = 32
VAULT_COLUMNS = {"commitment", "run_id", "key", "salt", "value"}


class DbSource:
    """An agentfootprint log opened for reading only; usage for any other kind of file."""

    def __init__(self, path: Path) -> None:
        self.conn = open_readonly(path)
        self._lookups: schema4.Lookups | None = None
        try:
            self.check_kind()
        except BaseException:
            self.conn.close()
            raise

    def columns(self, table: str) -> set[str]:
        rows = self.conn.execute("SELECT name FROM pragma_table_info(?)", (table,))
        return {str(typed(b"text", name)).lower() for (name,) in rows}

    def check_kind(self) -> None:
        q = "SELECT name FROM sqlite_master WHERE type = 'table'"
        names = [typed(b"text", name) for (name,) in self.conn.execute(q)]
        tables = {n.lower() for n in names if is_str(n) and not n.startswith("sqlite_")}

        def has(want: dict[str, set[str]]) -> bool:
            return all(t in tables and c <= self.columns(t) for t, c in want.items())

        layouts = {n for n, want in LAYOUTS.items() if has(want)}
        if not layouts:
            if "disclosures" in tables and self.columns("disclosures") >= VAULT_COLUMNS:
                raise usage("a disclosure vault, not a log")
            what = "of another application" if tables else "with no tables"
            raise usage(f"an SQLite database {what}, not a log")
        versions = self.conn.execute("SELECT typeof(version), version FROM schema_version")
        versions = versions.fetchall()
        if any(k != b"integer" for k, _ in versions) or max([v for _, v in versions] or [0]) < 1:
            raise usage("schema_version does not hold migration numbers: not a log")
        top = max(v for _, v in versions)
        if top > KNOWN_SCHEMA_VERSION:
            raise usage(f"schema version {top}, newer than {KNOWN_SCHEMA_VERSION}")
        held = {v for _, v in versions}  # 3 adds the seal log only, to any layout
        self.layout = 4 if 4 in held else 2 if 2 in held else 1
        if self.layout not in layouts:
            raise usage(f"schema version {top} without the tables of schema {self.layout}")

    def close(self) -> None:
        self.conn.close()

    def run_keys(self) -> list[Any]:
        if self.layout in KEYED:
            return [name for name, _ in self.keyed_runs()]
        q = "SELECT typeof(run_id), run_id FROM events GROUP BY run_id ORDER BY MIN(rowid)"
        return [typed(k, v) for k, v in self.conn.execute(q)]

    def keyed_runs(self) -> list[tuple[Any, int]]:
        """Schemas 2 and 4: ``(run id, run_key)`` of each run found from ``rows`` (schema
        4: ``appends``), in the order of section 4; a key with no ``run_keys`` row names a run
        whose id is not text (the orphan rule of schema 2)."""
        table = KEYED[self.layout]
        q = (f"SELECT k, (SELECT typeof(run_id) FROM run_keys WHERE run_key = k), "
             f"(SELECT run_id FROM run_keys WHERE run_key = k) FROM "
             f"(SELECT pos >> {SEQ_BITS} AS k, MIN(pos) AS f FROM {table} "
             f"GROUP BY pos >> {SEQ_BITS}) ORDER BY f")  # fmt: skip
        return [(("no run_keys row", k) if kind is None else typed(kind, v), k)
                for k, kind, v in self.conn.execute(q).fetchall()]  # fmt: skip

    def rows_v2(self, run: Any) -> list[Row]:
        """Schema 2: a run's rows rebuilt as section 4 says, in ``pos`` order."""
        keys = [k for name, k in self.keyed_runs() if name == run]
        if not keys:
            return []
        base = keys[0] << SEQ_BITS
        q = (f"SELECT {select_typed(ROWS_COLUMNS)} FROM rows WHERE pos BETWEEN ? AND ? "
             "ORDER BY pos")  # fmt: skip
        stored = [tuple(typed(r[i], r[i + 1]) for i in range(0, 16, 2))
                  for r in self.conn.execute(q, (base, base + 2**SEQ_BITS - 1))]  # fmt: skip
        out: list[Row] = []
        previous: Any = bytes(32)  # c_{-1}
        ts: Any = None  # a NULL ts on a run's first row, or right after a head, stays NULL
        for i, (pos, code, stored_ts, body, head, stage, number, k) in enumerate(stored):
            seq = pos - base
            type_ = TYPE_CODES.get(code) if is_int(code) else ("not a type code", code)
            ts = ts if stored_ts is None else stored_ts
            if stage is not None or number is not None or k is not None:  # commit columns
                ok = body is None and code == 5  # only an empty marker, stored compactly
                ok = ok and is_str(stage) and is_int(number) and is_int(k)
                ok = ok and 0 <= number <= MAX_SAFE_INT and 0 <= k <= MAX_SAFE_INT
                body = (canon({"commit": number, "stage": stage, "stage_run": f"{stage}#{k}",
                               "writes": 0}) if ok else None)  # fmt: skip
            e: Any = None
            if (is_str(run) and is_str(type_) and is_int(ts) and abs(ts) <= MAX_SAFE_INT
                    and isinstance(body, bytes)):  # fmt: skip
                e = event_hash(run, seq, type_, ts, body)
            c: Any = head
            if head is None:
                ok = isinstance(previous, bytes) and len(previous) == 32 and e is not None
                c = H("chain", previous + e) if ok and i < len(stored) - 1 else None
            out.append((run, seq, type_, ts, body, e, c))
            previous = c
            if head is not None:
                ts = None  # a head ends a batch
        return out

    def rows_v4(self, run: Any, limit: int) -> list[Row]:
        """Schema 4: a run's rows rebuilt from its ``appends`` rows, in ``pos`` order (section
        4, "Reading"), up to ``limit`` rows (all when negative) or the first that does not
        decode (verification stops there)."""
        keys = [k for name, k in self.keyed_runs() if name == run]
        if not keys or not is_str(run):
            return []
        base = keys[0] << SEQ_BITS
        q = (f"SELECT {select_typed(('pos', 'count', 'ts', 'head', 'data'))} FROM appends "
             "WHERE pos BETWEEN ? AND ? ORDER BY pos")  # fmt: skip
        out: list[Row] = []
        previous = bytes(32)  # c_{-1}
        for r in self.conn.execute(q, (base, base + 2**SEQ_BITS - 1)):
            pos, count, ts, head, data = (typed(r[i], r[i + 1]) for i in range(0, 10, 2))
            decoded, why = schema4.decode_append(run, pos - base, count, ts, head, data,
                                                 self.lookups)  # fmt: skip
            for i, (seq, type_, at, body) in enumerate(decoded):
                if body is None:  # a NULL body: the verifier fails it (rows), and stops
                    out.append((run, seq, ("not decoded", why), at, None, None, None))
                    return out[: None if limit < 0 else limit]
                e: Any = None
                if is_int(at) and abs(at) <= MAX_SAFE_INT:
                    e = event_hash(run, seq, type_, at, body)
                c: Any = head if i == count - 1 else None
                if c is None and e is not None:
                    c = H("chain", previous + e)
                out.append((run, seq, type_, at, body, e, c))
                previous = c if isinstance(c, bytes) else b""
                if 0 <= limit <= len(out):
                    return out[:limit]
        return out

    @property
    def lookups(self) -> schema4.Lookups:
        """Schema 4: what records name (``names``, ``opens``, ``run_keys``), each read once."""
        if self._lookups is None:
            found: dict[tuple[str, int], Any] = {}

            def one(table: str, key_column: str, columns: tuple[str, ...], key: int) -> Any:
                if key > MAX_SQLITE_INT:  # a uvarint no SQLite integer holds names no row
                    return None
                if (table, key) not in found:
                    q = f"SELECT {select_typed(columns)} FROM {table} WHERE {key_column} = ?"
                    found[table, key] = self.conn.execute(q, (key,)).fetchone()
                return found[table, key]

            def name(key: int) -> str | None:
                got = one("names", "id", ("text",), key)
                return None if got is None else schema4.text_within(*got, schema4.MAX_NAME_BYTES)

            def template(key: int) -> tuple[bytes, bytes, bytes] | None:
                got = one("opens", "id", ("prefix", "middle", "suffix"), key)
                if got is None or any(got[i] != b"blob" for i in (0, 2, 4)):
                    return None
                parts = (bytes(got[1]), bytes(got[3]), bytes(got[5]))
                return parts if sum(map(len, parts)) <= schema4.MAX_TEMPLATE_BYTES else None

            def parent(key: int) -> str | None:
                got = one("run_keys", "run_key", ("run_id",), key)
                return None if got is None else schema4.text_within(*got, schema4.MAX_PARENT_BYTES)

            self._lookups = schema4.Lookups(name, template, parent)
        return self._lookups

    def rows(self, run: Any, limit: int = -1) -> list[Row]:
        """A run's rows ordered by seq, as stored (schemas 2 and 4: as rebuilt)."""
        if self.layout == 4:
            return self.rows_v4(run, limit)
        if self.layout == 2:
            return self.rows_v2(run)[: None if limit < 0 else limit]
        if not isinstance(run, str | bytes | int | float):
            return []
        q = f"SELECT {select_typed(COLUMNS)} FROM events WHERE run_id = ? ORDER BY seq, rowid"
        cur = self.conn.execute(q + " LIMIT ?", (run, limit))
        return [tuple(typed(r[i], r[i + 1]) for i in range(0, 14, 2)) for r in cur]

    def index(self) -> list[tuple[Any, ...]]:
        cols = ("run_id", "conversation_id", "parent_run_id", "opened_at")
        cur = self.conn.execute(f"SELECT {select_typed(cols)} FROM runs ORDER BY rowid")
        return [tuple(typed(r[i], r[i + 1]) for i in range(0, 8, 2)) for r in cur]

    def seal_log(self) -> list[tuple[Any, Any]]:
        """Section 4.1: ``(leaf, run_id)`` in leaf order; none without the table."""
        q = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'seal_log'"
        if self.conn.execute(q).fetchone() is None:
            return []
        cur = self.conn.execute(
            f"SELECT {select_typed(('leaf', 'run_id'))} FROM seal_log ORDER BY leaf"
        )
        return [(typed(r[0], r[1]), typed(r[2], r[3])) for r in cur]


def exact(obj: Any, members: dict[str, Any]) -> bool:
    """``obj`` is an object with exactly these members, each of its type."""
    return is_obj(obj) and set(obj) == set(members) and all(ok(obj[k]) for k, ok in members.items())


def or_null(ok: Any) -> Any:
    return lambda x: x is None or ok(x)


def nonneg(x: Any) -> bool:
    return is_int(x) and x >= 0


MANIFEST = {"agentfootprint_bundle": lambda x: x == 1 and is_int(x),  # version 1
            "format": lambda x: x == MANIFEST_FORMAT, "canon": lambda x: x == "RFC8785",
            "hash": lambda x: x == "SHA-256", "library": is_str,
            "runs": lambda x: isinstance(x, list), "policies": is_obj,
            "counts": lambda x: exact(x, {"runs": nonneg, "events": nonneg})}  # fmt: skip
ENTRY = {"run_id": is_str, "conversation_id": or_null(is_str), "parent_run_id": or_null(is_str),
         "opened_at": is_int, "events": lambda x: is_int(x) and x >= 1, "last_type": is_str,
         "head": is_hex, "policy_digest": or_null(is_str),
         "requested": lambda x: isinstance(x, bool)}  # fmt: skip
EVENT_LINE = {"run": is_str, "seq": is_int, "type": is_str, "ts": is_int, "body": is_str,
              "event_hash": is_hex, "chain_hash": is_hex}  # fmt: skip
TRAILER = {"end": lambda x: x is True, "events": is_int, "sha256": is_hex}
MAX_CHECKPOINT_BYTES = 262_144  # section 13.1: the manifest's checkpoint, in UTF-8 bytes
MAX_PROOF_HASHES = 54
MANIFEST_V2 = MANIFEST | {
    "agentfootprint_bundle": lambda x: x == 2 and is_int(x),
    "checkpoint": lambda x: is_str(x) and len(x.encode("utf-8")) <= MAX_CHECKPOINT_BYTES,
}
INCLUSION = {
    "leaf": nonneg,  # a bundle integer: at most 2^53 - 1
    "proof": lambda x: isinstance(x, list) and len(x) <= MAX_PROOF_HASHES and all(map(is_hex, x)),
}
ENTRY_V2 = ENTRY | {"inclusion": or_null(lambda x: exact(x, INCLUSION))}
MANIFEST_V3 = MANIFEST | {  # section 13.5: artifacts, and a checkpoint or not (then as in v2)
    "agentfootprint_bundle": lambda x: x == 3 and is_int(x),
    "artifacts": is_arr,
}
MANIFEST_V3C = MANIFEST_V3 | {"checkpoint": MANIFEST_V2["checkpoint"]}
SHAPES = {1: (MANIFEST, ENTRY), 2: (MANIFEST_V2, ENTRY_V2), 3: (MANIFEST_V3, ENTRY)}  # 13.1


def read_line(line: bytes, shape: dict[str, Any] | None) -> dict[str, Any] | None:
    """A line as section 13.1 says (one JSON text, no member name twice, no lone surrogate,
    an object with exactly the members of ``shape``; any object when it is None), or None."""
    flags: set[str] = set()
    try:
        value = decoder(flags, bundle=True).decode(line.decode("utf-8"))
    except (ValueError, RecursionError):
        return None
    if flags or depth_and_surrogates(value)[1] or not is_obj(value):
        return None
    return value if shape is None or exact(value, shape) else None


class BundleSource:
    """An export bundle whose framing checks passed (section 13.2), else Failure(bundle)."""

    def __init__(self, path: Path) -> None:
        self.runs: dict[str, list[Row]] = {}
        self.entries: list[dict[str, Any]] = []
        self.version = 1
        self.checkpoint: str | None = None  # version 2: the manifest's note (section 13.4)
        self.inclusion: dict[str, Any] = {}  # version 2: each run entry's inclusion
        self.artifacts: list[dict[str, Any]] | None = None  # version 3: the entries (13.5)
        self.artifact_digests: dict[int, str] = {}  # H("artifact", bytes) of each ok entry
        self.frame(path.read_bytes())

    def frame(self, data: bytes) -> None:
        def bad(why: str) -> Failure:
            return Failure("bundle", None, why)

        if not data.startswith(BUNDLE_PREFIX):
            raise bad("not an export bundle")
        version = BUNDLE_VERSION.match(data)  # every version begins with the prefix (13.1)
        if version and KNOWN_BUNDLE_VERSION < int(version[1]) <= MAX_SAFE_INT:
            raise usage(f"bundle version {int(version[1])}, newer than {KNOWN_BUNDLE_VERSION}")
        lines = data.split(b"\n")
        if any(len(line) > MAX_BUNDLE_LINE_BYTES for line in lines):
            raise bad(f"a line longer than {MAX_BUNDLE_LINE_BYTES} bytes")
        if not data.endswith(b"\n") or len(lines) < 3:
            raise bad("the file does not end with a newline after a manifest and a trailer")
        lines = lines[:-1]
        trailer = read_line(lines[-1], TRAILER)
        if trailer is None:
            raise bad("the last line is not a trailer")
        if hashlib.sha256(data[: len(data) - len(lines[-1]) - 1]).hexdigest() != trailer["sha256"]:
            raise bad("the SHA-256 of the bytes before the trailer differs from its sha256")
        manifest = read_line(lines[0], None)
        version = None if manifest is None else manifest.get("agentfootprint_bundle")
        if not (is_int(version) and version in SHAPES):  # the version before the rest (6.1)
            raise bad("the manifest is not a JSON object of bundle version 1, 2 or 3")
        shape, entry_shape = SHAPES[version]
        if version == 3 and "checkpoint" in manifest:  # 13.5: then checkpoint and inclusion
            shape, entry_shape = MANIFEST_V3C, ENTRY_V2
        if not exact(manifest, shape) or not lines[0].startswith(
            b"%s%d" % (BUNDLE_PREFIX, version)
        ):
            raise bad(f"the manifest is not as in 13.1 for version {version} (or does not "
                      f'begin {{"agentfootprint_bundle":{version})')  # fmt: skip
        if not all(exact(e, entry_shape) for e in manifest["runs"]):
            raise bad(f"a run entry lacks, adds or mistypes a member (version {version})")
        listed = [e["run_id"] for e in manifest["runs"]]
        if len(set(listed)) != len(listed) or manifest["counts"]["runs"] != len(listed):
            raise bad("a run listed twice, or counts.runs is not the number of entries")
        chunks = None
        if version == 3:
            problem = artifacts.entries_problem(manifest["artifacts"], set(listed))
            if problem is not None:
                raise bad(problem)
            chunks = artifacts.ArtifactLines(manifest["artifacts"])
        parents_of_started: set[str] = set()
        event_lines = 0
        for line in lines[1:-1]:
            if chunks is not None:  # 13.5: the first artifact line ends the event lines
                value = read_line(line, None)
                if self.artifacts is not None or artifacts.is_artifact_line(value):
                    self.artifacts = manifest["artifacts"]
                    problem = chunks.line(value)
                    if problem is not None:
                        raise bad(problem)
                    continue
            event_lines += 1
            ev = read_line(line, EVENT_LINE)
            if ev is None:
                raise bad("an event line that is not as in 13.1")
            run = ev["run"]
            body = ev["body"].encode("utf-8")
            if not self.runs or run != next(reversed(self.runs)):  # the line starts a run
                if run in self.runs:
                    raise bad(f"the lines of run {run} are not contiguous")
                if len(self.runs) >= len(listed) or listed[len(self.runs)] != run:
                    raise bad(f"run {run} is not the next run the manifest lists")
                if run in parents_of_started:
                    raise bad(f"run {run} comes after a run it is the parent of")
                parents_of_started.add(parent_named((run, 0, ev["type"], 0, body, b"", b"")))
                self.runs[run] = []
            e, c = bytes.fromhex(ev["event_hash"]), bytes.fromhex(ev["chain_hash"])
            self.runs[run].append((run, ev["seq"], ev["type"], ev["ts"], body, e, c))
        for entry in manifest["runs"]:
            got = self.runs.get(entry["run_id"])
            if not got or len(got) != entry["events"] or got[-1][6].hex() != entry["head"]:
                raise bad(f"run {entry['run_id']}: no lines, or another count or head")
        if chunks is not None and (short := chunks.end()) is not None:
            raise bad(short)
        if not event_lines == trailer["events"] == manifest["counts"]["events"]:
            raise bad("the number of event lines differs from the trailer's or counts.events")
        self.entries = manifest["runs"]
        self.version = version
        if chunks is not None:
            self.artifacts = manifest["artifacts"]
            self.artifact_digests = chunks.digests()
        if "checkpoint" in manifest:
            self.checkpoint = manifest["checkpoint"]
            self.inclusion = {e["run_id"]: e["inclusion"] for e in self.entries}

    def close(self) -> None:
        pass

    def run_keys(self) -> list[Any]:
        return list(self.runs)

    def rows(self, run: Any, limit: int = -1) -> list[Row]:
        """A run's event lines in file order (section 13.2)."""
        rows = self.runs.get(run, []) if is_str(run) else []
        return rows if limit < 0 else rows[:limit]

    def index(self) -> list[tuple[Any, ...]]:
        keys = ("run_id", "conversation_id", "parent_run_id", "opened_at")
        return [tuple(e[k] for k in keys) for e in self.entries]


def parent_named(first: Row) -> Any:
    """Section 9.3: the parent a run's first row names, or None."""
    if first[2] != "run.open" or not isinstance(first[4], bytes):
        return None
    try:
        value = decoder(set()).decode(first[4].decode("utf-8"))
    except (ValueError, RecursionError):
        return None
    parent = value.get("parent") if is_obj(value) else None
    return parent["run_id"] if is_obj(parent) and is_str(parent.get("run_id")) else None


# --- one run: sections 7, 8, 9.2, 9.3 ----------------------------------------------------


@dataclass
class RunResult:
    outcome: str
    events: int
    head: bytes
    conversation_id: str
    close: dict[str, Any] | None
    state: dict[str, Any]
    lists: dict[str, list[str]]
    parent_run_id: str | None
    opened_at: int
    sealed: bool = False
    seal: bytes = b""  # the run.seal envelope's bytes (its UTF-8 text)
    #: a version 2 bundle's proven inclusion (section 13.4): leaf, size, origin, root (hex)
    #: and signed_by (the key ids of the pinned keys that signed the checkpoint; empty:
    #: unproven); None for a run without a seal and outside version 2 bundles
    inclusion: dict[str, Any] | None = None
    #: its redaction checks: the policy, the commitments met and every scanned value
    redaction: Any = None
    initial: dict[str, Any] = field(default_factory=dict)  # its parent's final state


def apply_write(state: dict[str, Any], path: str, verb: Any, value: Any) -> str | None:
    """Section 7: apply one write (never mutating a value in place), or say why not."""
    old = state.get(path)
    if verb == "set":
        state[path] = value
    elif verb == "append" and isinstance(old, list) and isinstance(value, list):
        state[path] = old + value
    elif verb == "merge" and is_obj(old) and is_obj(value):
        state[path] = {**old, **value}
    elif verb == "delete" and path in state:
        del state[path]
    else:
        return f"{verb!r} of {path!r} cannot be applied to {type(old).__name__}"
    return None


def projection_version(opened: dict[str, Any]) -> int:
    """Section 5.2: the projection a run.open names, or Failure(structure) at seq 0."""
    if "projection" not in opened:
        if opened.get("format") == FORMAT_V1:
            return 1  # format v1: absent means projection 1
        raise structure(0, "format v2 requires a projection member")
    p = opened["projection"]
    if not is_obj(p) or not is_int(p.get("version")) or p["version"] not in (1, 2, 3, 4):
        raise structure(0, f"projection {p!r} names no known projection")
    return int(p["version"])


def served_messages(
    history: list[Any], segments: Any, sliced: str = "history", single: str = "message"
) -> list[Any] | None:
    """Projection v2's segments (section 8), or None when they do not apply; projection v4's
    ``served_system`` has the same rules with ``system`` slices and ``piece`` segments."""
    if not isinstance(segments, list):
        return None
    out: list[Any] = []
    last_end = 0
    for seg in segments:
        if not is_obj(seg) or len(seg) != 1:
            return None
        if single in seg:
            if not is_obj(seg[single]):
                return None
            out.append(seg[single])
            continue
        if sliced not in seg:
            return None
        bounds = seg[sliced]
        if not isinstance(bounds, list) or len(bounds) != 2:
            return None
        start, end = bounds
        if end is None:
            end = len(history)
        if not is_int(start) or not is_int(end) or not 0 <= start <= end <= len(history):
            return None
        if start < last_end:
            return None
        out += history[start:end]
        last_end = end
    return out


def served_tools(schemas: list[Any], names: Any) -> list[Any] | None:
    """Projection v2's tool subset by name (section 8), or None when it does not apply."""
    if not isinstance(names, list) or not all(map(is_str, names)) or len(set(names)) < len(names):
        return None
    if not all(is_obj(t) and is_str(t.get("name")) for t in schemas):
        return None
    by_name = {t["name"]: t for t in schemas}
    if len(by_name) < len(schemas) or any(n not in by_name for n in names):
        return None
    return [by_name[n] for n in names]


def served_system(pieces: list[Any], segments: Any) -> list[Any] | None:
    """Projection v4's ``served_system`` (section 8), or None when it does not apply."""
    return served_messages(pieces, segments, "system", "piece")


def served_results(messages: list[Any], replacements: Any) -> list[Any] | None:
    """Projection v4's ``served_results`` (section 8): each named tool result of the served
    messages with its content replaced, or None when they do not apply."""
    if not isinstance(replacements, list):
        return None
    texts: dict[str, str] = {}
    for r in replacements:
        if not is_obj(r) or set(r) != {"tool_call_id", "content"}:
            return None
        if not is_str(r["tool_call_id"]) or not is_str(r["content"]) or r["tool_call_id"] in texts:
            return None
        texts[r["tool_call_id"]] = r["content"]
    out, found = [], []
    for m in messages:
        call = m.get("tool_call_id") if is_obj(m) and m.get("role") == "tool" else None
        if is_str(call) and call in texts:
            found.append(m["tool_call_id"])
            m = {**m, "content": texts[m["tool_call_id"]]}
        out.append(m)
    if sorted(found) != sorted(texts):  # each named exactly once
        return None
    return out


def cache_markers(markers: Any, served: dict[str, list[Any]]) -> bool:
    """Projection v3's markers (section 8) apply to the served lists."""
    if not is_obj(markers) or set(markers) != {"system", "tools", "messages"}:
        return False
    total = 0
    for kind, indices in markers.items():
        if not isinstance(indices, list) or not all(map(is_int, indices)):
            return False
        if any(b <= a for a, b in itertools.pairwise(indices)):
            return False
        if any(not 0 <= i < len(served[kind]) for i in indices):
            return False
        total += len(indices)
    return total <= 4


def build_request(
    state: dict[str, Any], seq: int, version: int = 1
) -> tuple[Any, Any, dict[str, list[str]]]:
    """Projection v1 to v4 (section 8): model, params and the piece digests (under v3 and v4
    also ``"prompt_cache"``: the markers, a value, not digests), or Failure(receipt)."""
    if "model" not in state:
        raise Failure("receipt", seq, "no model in state")
    model, params = state["model"], state.get("params", {})
    if not is_str(model) or not is_obj(params):
        raise Failure("receipt", seq, "state key model is not a string or params not an object")
    served = {}
    for kind, key, _ in KINDS:
        pieces = state.get(key, [])
        if not isinstance(pieces, list):
            raise Failure("receipt", seq, f"state key {key} is {type(pieces).__name__}, not array")
        served[kind] = pieces
    edits: list[tuple[str, str, Any]] = []
    if version in (2, 3, 4):
        edits += [("messages", "served_messages", served_messages),
                  ("tools", "served_tools", served_tools)]  # fmt: skip
    if version == 4:  # in this order, after v2's: results on the messages served_messages chose
        edits += [("messages", "served_results", served_results),
                  ("system", "served_system", served_system)]  # fmt: skip
    for kind, key, edit in edits:
        if key in state:
            edited = edit(served[kind], state[key])
            if edited is None:
                raise Failure("receipt", seq, f"state key {key} does not apply")
            served[kind] = edited
    markers = None
    if version in (3, 4):  # checked against the lists as served, after every edit
        markers = state.get("cache_markers", {"system": [], "tools": [], "messages": []})
        if not cache_markers(markers, served):
            raise Failure("receipt", seq, "state key cache_markers does not apply")
    digests: dict[str, Any] = {}
    for kind, _, tag in KINDS:
        try:
            digests[kind] = [H(tag, canon(p)).hex() for p in served[kind]]
        except Exception as e:
            raise Failure("receipt", seq, f"a served piece is not I-JSON: {e}") from None
    if markers is not None:
        digests["prompt_cache"] = markers
    return model, params, digests


def event_hash(run_id: str, seq: int, type_: str, ts: int, body: bytes) -> bytes:
    return H("event", b'{"body":' + body + b',"run":' + canon(run_id) + b',"seq":' + canon(seq)
             + b',"ts":' + canon(ts) + b',"type":' + canon(type_) + b"}")  # fmt: skip


def row_problem(row: Row, run_id: str, expect: int) -> str | None:
    """Section 9.2 step 2.1, in its order."""
    rid, seq, type_, ts, body, e, c = row
    if not is_int(seq):
        return f"seq {seq!r} is not an integer"
    if rid != run_id or not is_str(rid):
        return "the row belongs to another run"
    if seq != expect:
        return f"seq {seq}: a row is {'missing' if seq > expect else 'repeated'}"
    if isinstance(type_, tuple) and type_[:1] == ("not decoded",):  # schema 4 (section 4)
        return f"read as a NULL body: {type_[1]}"
    if not is_str(type_) or type_ not in TYPES:
        return f"unknown type {type_!r}"
    if not is_int(ts) or abs(ts) > MAX_SAFE_INT:
        return f"ts {ts!r} is not an integer within +-(2^53 - 1)"
    if not isinstance(body, bytes) or len(body) > MAX_BODY_BYTES:
        return "body is not a byte string of at most MAX_BODY_BYTES"
    if not all(isinstance(h, bytes) and len(h) == 32 for h in (e, c)):
        return "event_hash or chain_hash is not 32 bytes"
    return None


def digest_list(x: Any) -> bool:
    return exact(x, {"keep": is_int, "add": lambda a: isinstance(a, list) and all(map(is_hex, a))})


RECEIPT = {"call": is_int, "commit": is_int, "model": is_str, "params": is_obj, "request": is_hex,
           "system": digest_list, "messages": digest_list, "tools": digest_list}  # fmt: skip
MARKER = {"commit": is_int, "writes": is_int, "stage": is_str, "stage_run": is_str}
PARENT = {"run_id": is_str, "events": is_int, "head": is_hex}


def has(body: dict[str, Any], shape: dict[str, Any]) -> bool:
    """Shape before meaning: every listed member present and of its type (others ignored)."""
    return all(k in body and ok(body[k]) for k, ok in shape.items())


def paused_close(pending: Any, written: Any, seq: int) -> None:
    """Section 5.9 (and 9.2, run.close): the paused close's question, exactly its members,
    the one the run's last commit wrote."""
    if not is_obj(pending) or not set(pending) <= {*PENDING_REQUIRED, *PENDING_OPTIONAL}:
        raise structure(seq, "pending is not an object of section 5.9's members")
    if not all(is_str(pending.get(name)) for name in PENDING_REQUIRED):
        raise structure(seq, "a required member of pending is missing or not a string")
    for name, kind in PENDING_OPTIONAL.items():
        if name in pending and type(pending[name]) is not kind:
            raise structure(seq, f"pending's {name} is of the wrong type")
    if not pending["request_id"] or pending["kind"] not in ("consent", "input"):
        raise structure(seq, "pending's request_id is empty or its kind unknown")
    if not all(is_obj(spec) for spec in pending.get("fields", {}).values()):
        raise structure(seq, "a field of pending is not an object")
    if written is None or canon(written) != canon(pending):
        raise structure(seq, "pending differs from the state's")


def resume_answer(marker: dict[str, Any], writes: list[Any], asked: Any, seq: int) -> None:
    """Section 5.9: a resume's commit 0 is the stage resume, setting resume_answer (only
    with set) to an object (or a commitment) within the fields asked."""
    if marker["stage"] != "resume":
        raise structure(seq, "a resume's first commit is not the stage resume")
    mine = [(verb, value) for _, path, verb, value in writes if path == "resume_answer"]
    if not mine or any(verb != "set" for verb, _ in mine):
        raise structure(seq, "a resume's first commit does not set resume_answer (set only)")
    answer = mine[-1][1]
    if is_commitment(answer):
        return
    if not is_obj(answer):
        raise structure(seq, "resume_answer is not an object")
    fields = asked.get("fields") if is_obj(asked) else None
    if is_obj(fields) and not set(answer) <= set(fields):
        raise structure(seq, "resume_answer answers a field that was not asked")


def pause_findings(verifier: Any) -> list[Any]:
    """Section 9.5 step 5: a paused run whose question more than one run continues, not
    counting runs that verified UNSEALED (they never closed)."""
    out = []
    for paused, (request, answering) in verifier.answered.items():
        runs = [
            run
            for run in answering
            if not (
                isinstance(verifier.cache.get(run), RunResult) and verifier.cache[run].close is None
            )
        ]
        if len(runs) > 1:
            out.append(((paused, "pause", None), f"request {request} answered {len(runs)} times"))
    return out


def structure(seq: int, why: str) -> Failure:
    return Failure("structure", seq, why)


class Verifier:
    """Verifies the runs of one source, each once (results and failures are cached)."""

    def __init__(self, source: DbSource | BundleSource, keys: Iterable[bytes] = ()) -> None:
        self.source = source
        self.cache: dict[Any, RunResult | Failure] = {}
        self.keys = refuse_keys(keys)  # usage: a key that proves nothing
        #: section 9.5 step 5: paused run -> (its request, the runs continuing it)
        self.answered: dict[Any, tuple[str, dict[Any, None]]] = {}
        #: section 9.2 step 5: the seal log, read once before any run's rows (None: no log)
        self.seal_log = source.seal_log() if isinstance(source, DbSource) else None
        version_2 = isinstance(source, BundleSource) and source.checkpoint is not None
        self.inclusions = InclusionJudge(source, self.keys) if version_2 else None

    def verify(self, run: Any) -> RunResult:
        if run not in self.cache:
            try:
                result = self.verify_run(run)
                if self.inclusions is not None:  # section 13.4, once the run verified
                    result.inclusion = self.inclusions.judge(run, result)
                self.cache[run] = result
            except Failure as f:
                self.cache[run] = f
        got = self.cache[run]
        if isinstance(got, Failure):
            raise got
        return got

    def ancestry(
        self,
        run_id: str,
        parent: dict[str, Any],
        conversation: str,
        answers: tuple[str, str] | None = None,
    ) -> RunResult:
        """Section 9.3 items 3 and 4 (steps 1-4 below them): ancestry, at seq 0."""

        def bad(why: str) -> Failure:
            return Failure("ancestry", 0, why)

        chain, name = [run_id], parent["run_id"]
        while name is not None:
            if name in chain:
                raise bad(f"the chain of parents comes back to {name} (a cycle)")
            first = self.source.rows(name, 1)
            if not first:
                break
            chain.append(name)
            name = parent_named(first[0])
        for ancestor in reversed(chain[1:]):  # oldest first, so no deep recursion
            with contextlib.suppress(Failure):
                self.verify(ancestor)
        if len(chain) == 1:
            raise bad(f"the parent {parent['run_id']} is not in the log")
        try:
            p = self.verify(parent["run_id"])
        except Failure as f:
            raise bad(f"the parent fails verification: {f}") from None
        if p.conversation_id != conversation:
            raise bad("the parent belongs to another conversation")
        if p.events != parent["events"] or p.head.hex() != parent["head"]:
            raise bad("the parent's event count or head differs from the recorded ones")
        if p.close is None or p.close["outcome"] not in ("answered", "stopped_early", "paused"):
            raise bad("the parent did not close as answered, stopped_early or paused")
        if p.close["outcome"] == "paused":  # section 5.9: its answer, or its abandonment
            request = p.close["pending"]["request_id"]
            if answers is None or answers[1] != request:
                raise bad(f"a paused parent continued without resuming or abandoning {request}")
            self.answered.setdefault(parent["run_id"], (request, {}))[1][run_id] = None
        elif answers is not None:
            raise bad(f"run.open {answers[0]} a pause, but the parent did not pause")
        return p

    def verify_run(self, R: Any) -> RunResult:
        """Section 9.2 for run ``R``."""
        if not is_str(R):
            raise Failure("rows", None, f"run id {R!r} is not UTF-8 text")
        rows = self.source.rows(R)
        if not rows:
            raise Failure("rows", None, "no events")
        head, state = bytes(32), {}
        initial: dict[str, Any] = {}  # section 12.8: the run's initial state
        lists: dict[str, list[str]] = {"system": [], "messages": [], "tools": []}
        commit = receipts = phase = 0
        pending: list[tuple[int, str, Any, Any]] = []
        pending_reads: list[tuple[int, list[str]]] = []  # section 5.10 (format v6)
        in_batch = closed = record_receipt = False
        fmt, version, marked_calls = FORMAT_V1, 1, 0
        resumes = False  # section 5.9: run.open resumes its paused parent
        redaction = Redaction()
        conversation = parent_id = close = None
        opened_at = 0
        signer = envelope = None  # section 5.8
        close_head, close_events, policy_digest = b"", 0, None
        wires: list[Any] = []
        for expect, row in enumerate(rows):
            why = row_problem(row, R, expect)
            if why:
                raise Failure("rows", expect, why)
            _, seq, type_, ts, raw, e, c = row
            body = parse_body(raw, seq)
            if not is_obj(body):
                raise structure(seq, "the body is not an object")
            if event_hash(R, seq, type_, ts, raw) != e:
                raise Failure("hash", seq, "the event hash differs")
            head = H("chain", head + e)
            if head != c:
                raise Failure("chain", seq, "the chain hash differs")
            scanned, in_place, scanned_name = None, {}, None
            if seq == 0:  # step 5, in the order of section 9.3
                if type_ != "run.open":
                    raise structure(0, "the first event is not run.open")
                fmt = body.get("format")
                if fmt not in LOG_FORMATS:
                    raise structure(0, f"unknown format {fmt!r}")
                if body.get("run_id") != R:
                    raise structure(0, "run.open's run_id is not the row's")
                conversation = body.get("conversation_id")
                if not is_str(conversation) or not conversation:
                    raise structure(0, "conversation_id is not a non-empty string")
                parent = body.get("parent")
                if parent is not None and not (is_obj(parent) and has(parent, PARENT)):
                    raise structure(0, "parent is not null or an object {run_id, events, head}")
                version = projection_version(body)
                given = [name for name in ("resumes", "abandons") if name in body]
                answers = None
                if given:  # section 5.9, format v5 only
                    value = body[given[0]]
                    if fmt not in PAUSES or len(given) > 1 or parent is None:
                        raise structure(0, "resumes/abandons outside v5 and v6, both, or no parent")
                    if not is_str(value) or not value:
                        raise structure(0, f"{given[0]} is not a non-empty string")
                    answers = (given[0], value)
                resumes = answers is not None and answers[0] == "resumes"
                options = body.get("options")
                record_receipt = is_obj(options) and options.get("record_receipt") is True
                if parent is not None:
                    p = self.ancestry(R, parent, conversation, answers)
                    state, lists = dict(p.state), {k: list(v) for k, v in p.lists.items()}
                    initial = dict(p.state)
                    redaction.inherited = set(commitment_positions(state).values())
                    parent_id = parent["run_id"]
                redaction.policy = check_policy(body.get("policy"), body.get("policy_digest"))
                policy_digest = body.get("policy_digest")
                if "seal" in body:
                    seal = body["seal"]
                    if fmt not in SEALED or not (exact(seal, {"key_id": is_hex})):
                        raise structure(0, "a seal member outside v4, or not {key_id: hex}")
                    signer = seal["key_id"]
                opened_at = ts
                continue
            if envelope is not None:
                raise structure(seq, "an event after run.seal")
            if type_ == "run.seal":
                if fmt not in SEALED or not closed or signer is None:
                    raise structure(seq, "run.seal outside v4, before run.close or unnamed")
                if not exact(body, {"dsse": is_str}):
                    raise structure(seq, "run.seal body is not exactly {dsse: string}")
                envelope, seal_seq = body["dsse"], seq
                continue
            if closed:
                raise structure(seq, "an event after run.close")
            if type_ == "run.open":
                raise structure(seq, "a second run.open")
            if type_ in PHASE:
                if PHASE[type_] < phase:
                    raise structure(seq, f"{type_} out of batch order")
                phase, in_batch = PHASE[type_], True
            if type_ == "write":
                verb = body.get("verb")
                members = {"commit", "path", "verb"} | ({"value"} if verb != "delete" else set())
                if not has(body, {"commit": is_int, "path": is_str, "verb": is_str}):
                    raise structure(seq, "write: commit, path or verb missing or mistyped")
                if fmt in READS:  # section 5.10: strictly ascending code points, strings
                    reads = body.get("reads")
                    if not is_arr(reads) or not all(is_str(k) for k in reads):
                        raise structure(seq, "write: reads missing or not an array of strings")
                    if any(a >= b for a, b in itertools.pairwise(reads)):
                        raise structure(seq, "write: reads not in strictly ascending order")
                    members.add("reads")
                    pending_reads.append((seq, reads))
                if set(body) != members:
                    raise structure(seq, "write: members are not exactly commit/path/verb/value")
                if body["commit"] != commit:
                    raise structure(seq, f"a write of commit {body['commit']}, not {commit}")
                if not body["path"]:
                    raise structure(seq, "a write with an empty path")
                path = body["path"]
                pending.append((seq, path, verb, body.get("value")))
                if verb == "set":
                    scanned = {path: body["value"]}
                    if path in state:
                        in_place = commitment_positions({path: state[path]})
                elif verb in ("append", "merge"):
                    scanned, scanned_name = body["value"], path
            elif type_ == "receipt":
                if not has(body, RECEIPT):
                    raise structure(seq, "receipt: a member missing or of the wrong shape")
                if fmt in MARKED and not record_receipt:
                    raise structure(seq, "a receipt while receipts are off (format v2, v3)")
                self.receipt(body, seq, state, lists, commit, receipts, version)
                receipts += 1
            elif type_ == "event":
                if not has(body, {"name": is_str, "payload": is_obj}):
                    raise structure(seq, "event: name or payload missing or mistyped")
                scanned = body["payload"]
                if body["name"] == "agentfootprint.wire.exchange":
                    wires.append(body["payload"])
            elif type_ == "commit":
                v2_call = fmt in MARKED and "call" in body
                if not has(body, MARKER) or (v2_call and not is_int(body["call"])):
                    raise structure(seq, "commit: a member missing or mistyped")
                if body["commit"] != commit or body["writes"] != len(pending):
                    raise structure(seq, f"marker {body['commit']}/{body['writes']}: expected "
                                         f"commit {commit} with {len(pending)} writes")  # fmt: skip
                if v2_call:  # section 5.6
                    if record_receipt:
                        raise structure(seq, "a call marker while receipts are on")
                    if body["call"] != marked_calls:
                        raise structure(seq, f"call {body['call']}, expected {marked_calls}")
                    marked_calls += 1
                if resumes and commit == 0:  # section 5.9: the answer, first
                    resume_answer(body, pending, state.get("pending"), seq)
                written = {path for _, path, _, _ in pending}
                for wseq, reads in pending_reads:  # section 5.10: each key existed, or is made
                    for key in reads:
                        if key not in state and key not in written:
                            raise structure(wseq, f"write reads {key!r}, absent at its commit")
                pending_reads = []
                for wseq, path, verb, value in pending:
                    problem = apply_write(state, path, verb, value)
                    if problem:
                        raise Failure("fold", wseq, problem)
                pending, commit, in_batch, phase = [], commit + 1, False, 0
                if "error" in body:
                    scanned = {"error": body["error"]}
            elif type_ == "run.close":
                if in_batch:
                    raise structure(seq, "run.close inside a commit batch")
                shape = {"outcome": is_str, "commits": is_int, "receipts": is_int}
                calls_read = record_receipt or fmt in MARKED
                if not has(body, shape | ({"calls": is_int} if calls_read else {})):
                    raise structure(seq, "run.close: a member missing or mistyped")
                outcomes = ("answered", "stopped_early", "failed")
                if body["outcome"] not in (*outcomes, "paused") or (
                    body["outcome"] == "paused" and fmt not in PAUSES
                ):
                    raise structure(seq, f"unknown outcome {body['outcome']!r}")
                if fmt in PAUSES and (body["outcome"] == "paused") != ("pending" in body):
                    raise structure(seq, "pending without a pause, or a pause without pending")
                if body["outcome"] == "paused":
                    paused_close(body["pending"], state.get("pending"), seq)
                if "pending" in body and "pending" in state:  # 12.5 step 1: repeated, in place
                    in_place = commitment_positions({"pending": state["pending"]})
                if body["commits"] != commit or body["receipts"] != receipts:
                    raise structure(seq, "run.close's counts differ from the log")
                if record_receipt and body["calls"] != receipts:
                    raise Failure("receipt", seq, "run.close's calls differ from the receipts")
                if calls_read and not record_receipt and body["calls"] != marked_calls:
                    raise structure(seq, "run.close's calls differ from the call markers")
                closed, close = True, body
                close_head, close_events = head, seq + 1
                rest = ("outcome", "commits", "receipts", "calls")  # pending: scanned too
                scanned = {k: v for k, v in body.items() if k not in rest}
            if scanned is not None:
                redaction.scan(scanned, seq, in_place, scanned_name)
        # section 6: a v3 log may end after the receipts written ahead of a call (a crash
        # during it), with nothing else of their commit
        if in_batch and not (fmt in WRITE_AHEAD and phase == PHASE["receipt"]):
            raise Failure("truncated", len(rows), f"the log ends inside commit {commit}")
        signed = False
        if closed and signer is not None:  # section 9.2 step 4: the seal
            if envelope is None:
                raise Failure("seal", close_events - 1, "a sealed run closed without run.seal")
            facts = {
                "run_id": R,
                "events": close_events,
                "policy_digest": policy_digest,
                "receipts": receipts,
                "outcome": close["outcome"],
                "final_answer_digest": (
                    H("seal/answer", canon(state["final_answer"])).hex()
                    if "final_answer" in state
                    else None
                ),
            }
            if wires:
                facts["wire_list_digest"] = H("seal/wires", canon(wires)).hex()
            parsed = envelope_of(envelope)
            if isinstance(parsed, str):
                raise Failure("seal", seal_seq, parsed)
            why = seal_problem(parsed, signer, R, close_head.hex(), facts)
            if why:
                raise Failure("seal", seal_seq, why)
            why, signed = seal_signed(parsed, self.keys)
            if why:
                raise Failure("seal", seal_seq, why)
        if self.seal_log is not None:  # section 9.2 step 5: the seal log's word on the run
            listed = any(is_str(rid) and rid == R for _, rid in self.seal_log)
            if listed and envelope is None:
                raise Failure("seal-log", None, "the seal log lists the run, which has no seal")
            if not listed and envelope is not None:
                again = self.source.seal_log()  # it may have been sealed after the first read
                if not any(is_str(rid) and rid == R for _, rid in again):
                    raise Failure("seal-log", None, "a sealed run the seal log does not list")
        outcome = (SIGNED if signed else VALID) if closed else UNSEALED
        return RunResult(outcome, len(rows), head, conversation, close,
                         state, lists, parent_id, opened_at, envelope is not None,
                         envelope.encode() if envelope is not None else b"",
                         redaction=redaction, initial=initial)  # fmt: skip

    @staticmethod
    def receipt(body: dict[str, Any], seq: int, state: dict[str, Any],
                lists: dict[str, list[str]], commit: int, receipts: int,
                version: int) -> None:  # fmt: skip
        def bad(why: str) -> Failure:
            return Failure("receipt", seq, why)

        if body["call"] != receipts:
            raise bad(f"call {body['call']}, expected {receipts}")
        if body["commit"] != commit:
            raise bad(f"the receipt names commit {body['commit']}, not {commit}")
        model, params, rebuilt = build_request(state, seq, version)
        for kind, _, _ in KINDS:
            keep, add = body[kind]["keep"], body[kind]["add"]
            if not 0 <= keep <= len(lists[kind]):
                raise bad(f"{kind}: keep {keep} out of range")
            expanded = lists[kind][:keep] + add
            for i, (got, want) in enumerate(zip(expanded, rebuilt[kind], strict=False)):
                if got != want:
                    raise bad(f"{kind}[{i}]: the digest differs from the rebuilt piece")
            if len(expanded) != len(rebuilt[kind]):
                raise bad(f"{kind}: {len(expanded)} digests for {len(rebuilt[kind])} pieces")
            lists[kind] = expanded
        if canon(body["model"]) != canon(model) or canon(body["params"]) != canon(params):
            raise bad("model or params differ from the projected ones")
        doc = {"v": 2 if version in (3, 4) else 1, "model": model, "params": params, **rebuilt}
        if body["request"] != H("request", canon(doc)).hex():
            raise bad("the request digest differs from the rebuilt request")


B64_ALPHABETS = {"standard": re.compile(r"[A-Za-z0-9+/]*={0,2}"),
                 "url": re.compile(r"[A-Za-z0-9_-]*={0,2}")}  # fmt: skip


def b64_of(text: Any) -> tuple[bytes, set[str]] | None:
    """seals.md section 3's base64: padded, canonical (no bits set after the data), in one
    alphabet; the bytes and the alphabets its characters show (none for text that could be
    either). None for anything else."""
    if not isinstance(text, str) or len(text) % 4:
        return None
    shows = {"standard"} if any(c in "+/" for c in text) else set()
    shows |= {"url"} if any(c in "-_" for c in text) else set()
    if len(shows) > 1:
        return None
    url = shows == {"url"}
    if not B64_ALPHABETS["url" if url else "standard"].fullmatch(text):
        return None
    raw = base64.urlsafe_b64decode(text) if url else base64.b64decode(text, validate=True)
    again = base64.urlsafe_b64encode(raw) if url else base64.b64encode(raw)
    return (raw, shows) if again.decode("ascii") == text else None


def strict_json(text: str) -> Any:
    """JSON with no member name twice (ValueError otherwise)."""

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        if len({k for k, _ in items}) != len(items):
            raise ValueError("a member name twice")
        return dict(items)

    return json.loads(text, object_pairs_hook=pairs)


#: a parsed seal: the envelope, its payload bytes and each signature's (keyid, sig bytes)
Envelope = tuple[dict[str, Any], bytes, list[tuple[str, bytes]]]


def envelope_of(text: str) -> Envelope | str:
    """seals.md section 3's parsing profile: the envelope, its payload bytes and each
    signature's ``(keyid, sig bytes)`` (an absent keyid is empty), or why it is malformed."""
    if text.startswith("\ufeff") or len(text.encode("utf-8", "surrogatepass")) > 2**20:
        return "the seal starts with a byte order mark or is over 1 MiB"
    try:
        env = strict_json(text)
    except ValueError:
        return "the seal is not JSON (or names a member twice)"
    if not (is_obj(env) and {"payload", "payloadType", "signatures"} <= set(env)):
        return "the seal is not a DSSE envelope"
    if set(env) != {"payload", "payloadType", "signatures"}:
        return "the envelope has a member DSSE does not define"
    if not isinstance(env["payloadType"], str):
        return "the payload type is not a string"
    sigs = env["signatures"]
    if not isinstance(sigs, list) or not sigs or not all(is_obj(s) for s in sigs):
        return "the envelope's signatures are not a non-empty list of objects"
    payload = b64_of(env["payload"])
    if payload is None:
        return "the payload is not canonical padded base64"
    shows, signatures = set(payload[1]), []
    for sig in sigs:
        if not set(sig) <= {"keyid", "sig"} or "sig" not in sig:
            return "a signature is not {keyid?, sig}"
        keyid = sig.get("keyid", "")
        decoded = b64_of(sig["sig"])
        if not isinstance(keyid, str) or decoded is None or not decoded[0]:
            return "a signature's keyid is not a string, or its sig not canonical base64"
        shows |= decoded[1]
        signatures.append((keyid, decoded[0]))
    if len(shows) > 1:
        return "the envelope mixes the standard and URL-safe base64 alphabets"
    return env, payload[0], signatures


def seal_problem(
    parsed: Envelope, signer: str, R: str, head: str, facts: dict[str, Any]
) -> str | None:
    """Section 9.2 step 4.3 (seals.md sections 2 and 3): the envelope (:func:`envelope_of`'s,
    read once per run) holds a canonical in-toto statement of exactly the run's facts, and a
    signature carries the keyid run.open names. The signatures are :func:`seal_signed`'s."""
    env, payload, signatures = parsed
    if env["payloadType"] != "application/vnd.in-toto+json":
        return "the payload type is not in-toto"
    try:
        statement = strict_json(payload.decode("utf-8"))
    except ValueError:
        return "the payload is not JSON"
    if canon(statement) != payload:
        return "the statement is not canonical"
    subject = [{"name": f"run:{R}", "digest": {"sha256": head}}]
    expected = {
        "_type": "https://in-toto.io/Statement/v1",
        "subject": subject,
        "predicateType": "https://agentfootprint.dev/seal/v1",
        "predicate": facts,
    }
    if statement != expected or canon(statement) != canon(expected):
        return "the statement does not attest this run's facts"
    if not any(keyid == signer for keyid, _ in signatures):
        return "no signature carries the keyid run.open names"
    return None


def seal_signed(parsed: Envelope, keys: tuple[bytes, ...]) -> tuple[str | None, bool]:
    """Section 9.2 step 4.4 (seals.md section 3, verification), on an envelope
    :func:`seal_problem` passed: ``(why it fails, False)``, or ``(None, whether a pinned key
    signed)``. A signature whose keyid names a pinned key must verify; one with no keyid is tried
    against every pinned key; one naming another key is skipped."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    if not keys:
        return None, False
    env, payload, signatures = parsed
    kind = env["payloadType"].encode("utf-8")
    message = b"DSSEv1 %d %b %d %b" % (len(kind), kind, len(payload), payload)
    pinned = {hashlib.sha256(k).hexdigest(): k for k in keys}

    def verifies(key: bytes, sig: bytes) -> bool:
        try:
            Ed25519PublicKey.from_public_bytes(key).verify(sig, message)
        except (InvalidSignature, ValueError):
            return False
        return True

    signed = False
    for keyid, sig in signatures:
        if keyid:
            if keyid not in pinned:
                continue
            if not verifies(pinned[keyid], sig):
                return f"the signature of pinned key {keyid} does not verify", False
            signed = True
        elif any(verifies(key, sig) for key in pinned.values()):
            signed = True
    return None, signed


# --- whole-file verification (section 9.5) -----------------------------------------------

Verdict = tuple[Any, str, int | None]


def open_source(path: str | os.PathLike[str]) -> DbSource | BundleSource:
    """Section 4 "What a file is"; a bundle is recognised by its prefix (section 13.1)."""
    p = Path(path)
    try:
        with p.open("rb") as f:
            head = f.read(len(BUNDLE_PREFIX))
    except OSError as e:
        raise Failure("file", None, f"{p}: missing, a folder or unreadable ({e})") from None
    if not head and not any(Path(f"{p}{s}").exists() for s in ("-wal", "-journal")):
        raise usage("an empty file, not a log")
    if head.startswith(BUNDLE_PREFIX):
        return BundleSource(p)
    if head and not head.startswith(SQLITE_MAGIC):
        raise usage("not an SQLite database, so not a log")
    try:
        return DbSource(p)
    except sqlite3.OperationalError as e:  # e.g. a -wal without its -shm on read-only media
        raise Failure("file", None, f"cannot be opened for reading ({e}): copy the log with "
                      "the files beside it to writable storage") from None  # fmt: skip
    except sqlite3.DatabaseError as e:
        raise usage(f"SQLite refuses to parse it ({e}), so not a log") from None


def index_findings(source: Any, results: dict[Any, RunResult | Failure]) -> list[Any]:
    """Section 9.5 step 3: one index finding per disagreement (the first, per row)."""
    out: list[tuple[Verdict, str]] = []
    listed: list[Any] = []
    for rid, conversation, parent_run_id, opened_at in source.index():
        twice = rid in listed
        listed.append(rid)
        res = results.get(rid)
        if not is_str(rid):
            out.append(((repr(rid), "index", None), "an index run id that is not UTF-8 text"))
        elif twice:
            out.append(((rid, "index", None), "a run listed twice in the index"))
        elif res is None:
            out.append(((rid, "index", None), "an index row of a run with no events"))
        elif isinstance(res, RunResult):  # a run that failed is checked for presence only
            pairs = {"conversation_id": (conversation, res.conversation_id),
                     "parent_run_id": (parent_run_id, res.parent_run_id),
                     "opened_at": (opened_at, res.opened_at)}  # fmt: skip
            differ = [k for k, (a, b) in pairs.items() if type(a) is not type(b) or a != b]
            if differ:
                out.append(((rid, "index", 0), f"the index row differs: {', '.join(differ)}"))
    out += [
        ((run, "index", None), "a run with no index row") for run in results if run not in listed
    ]
    return out


def seal_log_findings(source: Any, results: dict[Any, RunResult | Failure]) -> list[Any]:
    """Section 9.5 step 4: the seal log's own rows, in leaf order (a database's only: a
    bundle has no seal log, section 13.4 judges its proofs instead). Each run was judged
    against the log by its own verdict (section 9.2 step 5)."""
    if not isinstance(source, DbSource):
        return []
    out: list[tuple[Verdict, str]] = []
    placed: set[Any] = set()  # run ids named by an earlier row whose leaf was its position
    for index, (leaf, rid) in enumerate(source.seal_log()):
        shown_id = rid if is_str(rid) else repr(rid)
        if not is_int(leaf) or leaf != index:
            out.append(((rid, "seal-log", None), f"seal log row {index} is numbered {leaf!r}"))
        elif not is_str(rid) or rid in placed:
            out.append(((shown_id, "seal-log", None), "a run id not text, or named before"))
        else:
            placed.add(rid)
            if rid not in results:
                out.append(((rid, "seal-log", None), "a leaf of a run with no events"))
    return out


def _verified_file(
    path: str | os.PathLike[str], keys: Iterable[bytes]
) -> tuple[list[tuple[Verdict, str]], dict[Any, RunResult | Failure]]:
    """Section 9.5 on the file: its verdicts with their reasons, and each run's result."""
    try:
        source = open_source(path)
    except Failure as e:
        return [((None, e.code, None), e.reason)], {}
    try:
        verifier = Verifier(source, keys)
        runs = source.run_keys()
        out: list[tuple[Verdict, str]] = []
        for run in runs:
            try:
                result = verifier.verify(run)
                out.append(((run, result.outcome, None), inclusion_text(result.inclusion)))
            except Failure as f:
                out.append(((run, f.code, f.seq), f.reason))
        results = {run: verifier.cache[run] for run in runs}
        out += index_findings(source, results) + seal_log_findings(source, results)
        out += pause_findings(verifier)
        judge = verifier.inclusions
        if judge is not None and isinstance(judge.opened, Failure) and not judge.relied_on:
            # section 13.4: a checkpoint no run relies on, that cannot be opened: once
            out.append((("", judge.opened.code, None), judge.opened.reason))
        return out, results
    except Failure as e:  # usage: two pinned keys a note cannot tell apart
        return [((None, e.code, None), e.reason)], {}
    except sqlite3.DatabaseError as e:
        return [((None, "file", None), f"the database cannot be read: {e}")], {}
    finally:
        source.close()


def explain_file(
    path: str | os.PathLike[str], keys: Iterable[bytes] = ()
) -> list[tuple[Verdict, str]]:
    """The verdicts of :func:`verify_file`, each with its reason (a verified run of a version
    2 bundle: its inclusion, section 9.6)."""
    return _verified_file(path, keys)[0]


def verify_file(path: str | os.PathLike[str], keys: Iterable[bytes] = ()) -> list[Verdict]:
    """Section 9.5's verdicts; ``keys`` pin the checkpoint signers (section 13.4)."""
    return [verdict for verdict, _ in explain_file(path, keys)]


def verify_runs(
    path: str | os.PathLike[str], run_ids: Iterable[str], keys: Iterable[bytes] = ()
) -> list[Verdict]:
    """Section 9.6 ``--run``: the verdict of each named run (its ancestors verified first,
    section 9.3, and not reported); a run with no events is a usage verdict (exit 2)."""
    try:
        source = open_source(path)
    except Failure as e:
        return [(None, e.code, None)]
    try:
        verifier = Verifier(source, keys)
        out: list[Verdict] = []
        for run in run_ids:
            if not source.rows(run, 1):
                out.append((run, "usage", None))
                continue
            try:
                out.append((run, verifier.verify(run).outcome, None))
            except Failure as f:
                out.append((run, f.code, f.seq))
        return out
    except Failure as e:  # a pinned key that proves nothing
        return [(None, e.code, None)]
    finally:
        source.close()


def inclusions(
    path: str | os.PathLike[str], keys: Iterable[bytes] = ()
) -> dict[Any, dict[str, Any] | None]:
    """Each verified run's proven inclusion (section 13.4, as :attr:`RunResult.inclusion`);
    None for a run without a seal and for every run of a database or a version 1 bundle."""
    results = _verified_file(path, keys)[1]
    return {run: r.inclusion for run, r in results.items() if isinstance(r, RunResult)}


def artifact_verdicts(
    path: str | os.PathLike[str], keys: Iterable[bytes] = ()
) -> list[tuple[Any, int, Any, str]] | str:
    """Section 13.5 "Verifying artifacts": ``(run, seq, ref, status)`` for each minted event
    of each run of a version 3 bundle that verified, in the order of the event lines; none
    for a version 1 or 2 bundle. A file whose framing fails (or that is no bundle) gives its
    code instead."""
    try:
        source = open_source(path)
    except Failure as e:
        return e.code
    if not isinstance(source, BundleSource):
        return "usage"
    results = _verified_file(path, keys)[1]
    if source.artifacts is None:
        return []
    out: list[tuple[Any, int, Any, str]] = []
    for run in source.run_keys():
        result = results.get(run)
        if not isinstance(result, RunResult):
            continue  # an INVALID run gives no artifact verdict
        for row in source.rows(run):
            if row[2] != "event":
                continue
            minted, payload = artifacts.minted_payload(decoder(set()).decode(row[4].decode()))
            if minted:
                ref = payload.get("ref") if is_obj(payload) else None
                status = artifacts.verdict(
                    payload,
                    result.conversation_id,
                    result.state.get("history"),
                    source.artifacts,
                    source.artifact_digests,
                )
                out.append((run, row[1], ref, status))
    return out


def inclusion_text(inclusion: dict[str, Any] | None) -> str:
    """Section 9.6: a verified run's line names its leaf, the tree, and who signed it."""
    if inclusion is None:
        return ""
    where = f"leaf {inclusion['leaf']} of {inclusion['size']} in checkpoint {inclusion['origin']}"
    keys = ", ".join(inclusion["signed_by"])
    return f"{where}, signed by pinned key {keys}" if keys else f"{where}, signed by no pinned key"


def failure_codes(verdicts: list[Verdict]) -> set[str]:
    return {code for _, code, _ in verdicts if code not in (VALID, UNSEALED, SIGNED)}


# --- checkpoints (section 9.7; docs/merkle.md sections 1, 2 and 5) -------------------------


def _node(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def leaf_hash(run_id: str, res: RunResult) -> bytes:
    """docs/merkle.md section 2: a sealed run's leaf, from its verified rows."""
    data = b"afp/v1/runleaf\x00" + canon(
        {"v": 1, "run": run_id, "events": res.events, "head": res.head.hex(),
         "seal": hashlib.sha256(res.seal).hexdigest()}
    )  # fmt: skip
    return hashlib.sha256(b"\x00" + data).digest()


def _mth(leaves: list[bytes]) -> bytes:
    """RFC 6962 section 2.1."""
    if not leaves:
        return hashlib.sha256(b"").digest()
    if len(leaves) == 1:
        return leaves[0]
    k = 1 << ((len(leaves) - 1).bit_length() - 1)  # the largest power of two below n
    return hashlib.sha256(b"\x01" + _mth(leaves[:k]) + _mth(leaves[k:])).digest()


def check_checkpoint(path: str | os.PathLike[str], note: bytes, public_key: bytes) -> str:
    """``"CONSISTENT"`` or the failure code of checking ``note`` (signed by the Ed25519 key
    ``public_key``, raw 32 bytes) against the database at ``path``."""
    opened = _note_verdict(note, public_key)
    if isinstance(opened, str):
        return opened
    _, size, root = opened
    source = open_source(path)
    try:
        verifier = Verifier(source)
        runs = source.run_keys()
        results = {}
        for run in runs:
            with contextlib.suppress(Failure):
                verifier.verify(run)
            results[run] = verifier.cache[run]
        if seal_log_findings(source, results):
            return "seal-log"
        leaves = []
        for _, rid in source.seal_log():
            res = results[rid]
            if not isinstance(res, RunResult):
                return res.code
            leaves.append(leaf_hash(rid, res))
    finally:
        source.close()
    if len(leaves) < size or _mth(leaves[:size]) != root:
        return "checkpoint"
    return "CONSISTENT"


def check_consistency_file(old: bytes, new: bytes, proof: bytes, public_key: bytes) -> str:
    """``"CONSISTENT"`` or the failure code of two checkpoint notes and a consistency proof
    file (section 9.7), with no database: RFC 9162 section 2.1.4.2 from the page."""
    verdicts = [_note_verdict(note, public_key) for note in (old, new)]
    for verdict in verdicts:
        if isinstance(verdict, str):
            return verdict
    (o_origin, o_size, o_root), (n_origin, n_size, n_root) = verdicts  # type: ignore[misc]
    if n_origin != o_origin:
        return "note/origin"
    lines = proof.decode("ascii", "replace").split("\n")
    if lines[-1] != "" or lines[0] != "agentfootprint consistency proof v1" or len(lines) < 4:
        return "merkle/consistency"
    sizes, hashes = lines[1:3], lines[3:-1]
    if any(not s.isdigit() or s != str(int(s)) for s in sizes):
        return "merkle/consistency"
    if [int(s) for s in sizes] != [o_size, n_size] or len(hashes) > 128:
        return "merkle/consistency"
    try:
        path = [base64.b64decode(h, validate=True) for h in hashes]
    except ValueError:
        return "merkle/consistency"
    if any(
        len(p) != 32 or base64.b64encode(p).decode() != h for p, h in zip(path, hashes, strict=True)
    ):
        return "merkle/consistency"
    if o_size == 0:
        return "CONSISTENT"
    if o_size > n_size or (o_size == n_size and (path or o_root != n_root)):
        return "merkle/consistency"
    if o_size == n_size:
        return "CONSISTENT"

    def node(a: bytes, b: bytes) -> bytes:
        return hashlib.sha256(b"\x01" + a + b).digest()

    if o_size & (o_size - 1) == 0:
        path = [o_root, *path]
    if not path:
        return "merkle/consistency"
    fn, sn = o_size - 1, n_size - 1
    while fn & 1:
        fn, sn = fn >> 1, sn >> 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            return "merkle/consistency"
        if fn & 1 or fn == sn:
            fr, sr = node(c, fr), node(c, sr)
            while fn and not fn & 1:
                fn, sn = fn >> 1, sn >> 1
        else:
            sr = node(sr, c)
        fn, sn = fn >> 1, sn >> 1
    return "CONSISTENT" if sn == 0 and fr == o_root and sr == n_root else "merkle/consistency"


def _note_verdict(note: bytes, public_key: bytes) -> str | tuple[str, int, bytes]:
    """A note's origin, size and root when it verifies under ``public_key`` (named by its
    origin), else its failure code (docs/merkle.md section 5)."""
    try:
        opened = open_checkpoint(note, [public_key])
    except Failure as f:
        return f.code
    return (opened.origin, opened.size, opened.root) if opened.signed_by else "note/unverified"


# --- inclusion proofs of a version 2 bundle (section 13.4; docs/merkle.md 3 and 5) ---------

MAX_NOTE_BYTES, MAX_NOTE_SIGNATURES = 256 * 1024, 100
DECIMAL = re.compile(r"0|[1-9][0-9]*", re.ASCII)


@dataclass
class Checkpoint:
    """An opened checkpoint note: its tree, and the pinned keys (key ids) that signed it."""

    origin: str
    size: int
    root: bytes
    signed_by: tuple[str, ...]


def _canonical_b64(text: str) -> bytes | None:
    """Standard padded base64 (RFC 4648 section 4) in its one spelling, else None."""
    try:
        raw = base64.b64decode(text, validate=True)
    except ValueError:
        return None
    return raw if base64.b64encode(raw).decode("ascii") == text else None


def _note_name(name: str) -> bool:
    return bool(name) and "+" not in name and not any(ch.isspace() for ch in name)


def open_checkpoint(note: bytes, keys: Iterable[bytes]) -> Checkpoint:
    """docs/merkle.md section 5: parse the note strictly (``note/malformed``), then verify
    each signature line of a pinned key named by the origin (``note/signature``). A note no
    pinned key signed opens with an empty ``signed_by``: unproven, not a failure (13.4)."""

    def bad(why: str) -> Failure:
        return Failure("note/malformed", None, f"checkpoint: {why}")

    keys = refuse_keys(keys)  # seals.md section 1: one key would do
    if len(note) > MAX_NOTE_BYTES:
        raise bad(f"longer than {MAX_NOTE_BYTES} bytes")
    try:
        whole = note.decode("utf-8")
    except UnicodeDecodeError:
        raise bad("not UTF-8") from None
    if any(ch < " " and ch != "\n" for ch in whole):  # ASCII controls, as Go's note does
        raise bad("a control character other than newline")
    split = whole.rfind("\n\n")
    if split < 0:
        raise bad("no blank line before the signatures")
    text, block = whole[: split + 1], whole[split + 2 :]
    if not block or not block.endswith("\n"):
        raise bad("no signature line, or a signature block not ending in a newline")
    lines = block[:-1].split("\n")
    if len(lines) > MAX_NOTE_SIGNATURES:
        raise bad(f"more than {MAX_NOTE_SIGNATURES} signature lines")
    signatures: list[tuple[str, bytes]] = []
    for line in lines:
        name, space, blob = line.removeprefix("\u2014 ").partition(" ")
        raw = _canonical_b64(blob)
        if not line.startswith("\u2014 ") or not space or not _note_name(name):
            raise bad(f"a signature line that is not '\u2014 name base64': {line!r}")
        if raw is None or len(raw) < 5:
            raise bad("a signature that is not canonical base64 of at least 5 bytes")
        signatures.append((name, raw))
    body = text[:-1].split("\n")
    if len(body) < 3:
        raise bad("fewer than 3 lines of text")
    origin, size, root_line, extensions = body[0], body[1], body[2], body[3:]
    if not origin or origin != origin.strip():
        raise bad("an empty origin, or one with surrounding spaces")
    if not DECIMAL.fullmatch(size) or int(size) > MAX_SAFE_INT:
        raise bad(f"the size {size!r} is not canonical decimal up to 2^53 - 1")
    root = _canonical_b64(root_line)
    if root is None or len(root) != 32:
        raise bad("the root is not canonical base64 of 32 bytes")
    if not all(extensions):
        raise bad("an empty extension line")
    return Checkpoint(origin, int(size), root, _signed_by(origin, text, signatures, keys))


def _signed_by(
    origin: str, text: str, signatures: list[tuple[str, bytes]], keys: Iterable[bytes]
) -> tuple[str, ...]:
    """The key ids (seals.md: SHA-256 of the raw key) of the pinned keys whose signature
    lines verify; a line of a pinned key (its name the origin, its key ID the key's) that
    does not verify rejects the note, repeated lines included."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    pinned: dict[bytes, bytes] = {}
    for key in keys:
        kid = hashlib.sha256(origin.encode() + b"\n\x01" + key).digest()[:4]
        if pinned.setdefault(kid, key) != key:
            raise usage("two pinned keys with the same name and key ID")
    signed: list[str] = []
    for name, raw in signatures:
        key = pinned.get(raw[:4]) if name == origin else None
        if key is None:
            continue  # another key's line: ignored (rotation, witnesses)
        try:
            if len(raw) != 68:
                raise InvalidSignature
            Ed25519PublicKey.from_public_bytes(key).verify(raw[4:], text.encode("utf-8"))
        except InvalidSignature:
            raise Failure("note/signature", None, "checkpoint: a pinned key's signature "
                          "does not verify") from None  # fmt: skip
        kid_hex = hashlib.sha256(key).hexdigest()
        if kid_hex not in signed:
            signed.append(kid_hex)
    return tuple(signed)


def inclusion_holds(leaf: bytes, index: Any, size: Any, proof: list[bytes], root: bytes) -> bool:
    """docs/merkle.md section 3: the checks before hashing, then RFC 9162 2.1.3.2."""
    if not (is_int(index) and is_int(size) and 0 <= index < size <= MAX_SAFE_INT):
        return False
    if len(leaf) != 32 or len(root) != 32 or any(len(p) != 32 for p in proof):
        return False
    inner = (index ^ (size - 1)).bit_length()
    if len(proof) != inner + bin(index >> inner).count("1"):
        return False
    fn, sn, r = index, size - 1, leaf
    for p in proof:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            r = _node(p, r)
            while fn != 0 and not fn & 1:
                fn, sn = fn >> 1, sn >> 1
        else:
            r = _node(r, p)
        fn, sn = fn >> 1, sn >> 1
    return sn == 0 and r == root


class InclusionJudge:
    """Section 13.4 for the runs of one version 2 bundle: the checkpoint is opened once
    (step 1); each run that verified is judged (steps 2 and 3)."""

    def __init__(self, source: BundleSource, keys: Iterable[bytes]) -> None:
        keys = refuse_keys(keys)
        self.source = source
        self.relied_on = False  # a sealed run came to use the checkpoint (step 3)
        self.opened: Checkpoint | Failure
        try:
            self.opened = open_checkpoint(str(source.checkpoint).encode("utf-8"), list(keys))
        except Failure as f:
            if f.code == "usage":
                raise
            self.opened = f

    def judge(self, run: str, res: RunResult) -> dict[str, Any] | None:
        claim = self.source.inclusion.get(run)
        if not res.sealed:  # step 2: UNSEALED, or closed without run.seal
            if claim is not None:
                raise Failure("inclusion", None, "a run without a seal has an inclusion proof")
            return None
        if claim is None:  # step 3
            raise Failure("inclusion", None, "a sealed run without an inclusion proof")
        self.relied_on = True
        cp = self.opened
        if isinstance(cp, Failure):
            raise Failure(cp.code, None, cp.reason)
        proof = [bytes.fromhex(h) for h in claim["proof"]]
        if not inclusion_holds(leaf_hash(run, res), claim["leaf"], cp.size, proof, cp.root):
            raise Failure("merkle/inclusion", None, f"the proof of leaf {claim['leaf']} in a "
                          f"tree of {cp.size} does not lead to the checkpoint's root")  # fmt: skip
        return {"leaf": claim["leaf"], "size": cp.size, "origin": cp.origin,
                "root": cp.root.hex(), "signed_by": cp.signed_by}  # fmt: skip


def check_bundle_checkpoint(path: str | os.PathLike[str], note: bytes, public_key: bytes) -> str:
    """``"CONSISTENT"`` or the failure code of checking that the bundle at ``path`` carries
    the tree of ``note``, a checkpoint kept elsewhere signed by ``public_key`` (section 13.4,
    "Against a checkpoint kept elsewhere"): the note opens under the key named by its origin,
    and the bundle's checkpoint has its origin, size and root (a version 1 bundle has none).
    The runs themselves are judged by :func:`verify_file`."""
    try:
        kept = open_checkpoint(note, [public_key])
        if not kept.signed_by:
            return "note/unverified"
        source = open_source(path)
    except Failure as f:
        return f.code
    try:
        if not isinstance(source, BundleSource):
            raise usage("not a bundle: check a database with check_checkpoint")
        if source.checkpoint is None:
            return "checkpoint"  # version 1: no checkpoint, no proofs
        carried = open_checkpoint(source.checkpoint.encode("utf-8"), ())
    except Failure as f:
        return f.code
    finally:
        source.close()
    same = (carried.origin, carried.size, carried.root) == (kept.origin, kept.size, kept.root)
    return "CONSISTENT" if same else "checkpoint"


# --- disclosures (section 12.6) and echoes (section 12.8) ----------------------------------

CONVERSATION = {"content", "arguments", "user_message", "final_answer", "message", "answer",
                "result"}  # fmt: skip
ECHO_MIN = 8


def literals(value: Any) -> set[str]:
    """Section 12.8: strings of >= 8 code points and number texts of >= 8 characters, at any
    depth of objects and arrays (not member names, not inside JSON text)."""
    found: set[str] = set()
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, bool) or v is None:
            continue
        if isinstance(v, str):
            if len(v) >= ECHO_MIN:
                found.add(v)
        elif isinstance(v, int | float):
            text = canon(v).decode()
            if len(text) >= ECHO_MIN:
                found.add(text)
        elif isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return found


def conversation_strings(value: Any, name: str | None) -> list[str]:
    """Section 12.8: the text (JSON-text rule) under a conversation member on its path."""
    out = []
    stack = [(value, name is not None and name in CONVERSATION)]
    while stack:
        v, inside = stack.pop()
        if isinstance(v, dict):
            if "$commit" in v:
                continue
            stack.extend((item, inside or k in CONVERSATION) for k, item in v.items())
        elif isinstance(v, list):
            stack.extend((item, inside) for item in v)
        elif isinstance(v, str):
            kind, parsed = classify(v)
            if kind == WALKABLE:
                stack.append((parsed, inside))
            elif kind == TEXT and inside:
                out.append(v)
    return out


def prove_disclosures(
    path: str | os.PathLike[str], disclosures: list[dict[str, Any]]
) -> tuple[str, Any, int | None] | None:
    """Sections 12.6 and 12.8 on a file whose runs all verified: None when every disclosure
    is proven and no proven value is quoted in clear, else ``(code, run, seq)`` of the first
    failure (a disclosure failure, then the first echo leak)."""
    source = open_source(path)
    try:
        verifier = Verifier(source)
        first: dict[str, tuple[Any, int, str | None]] = {}
        results: dict[Any, RunResult] = {}
        for run in source.run_keys():
            try:
                result = verifier.verify(run)
            except Failure:
                continue
            results[run] = result
            for digest, (seq, under) in result.redaction.sightings.items():
                first.setdefault(digest, (run, seq, under))
        proven = []
        for d in disclosures:
            seen = first.get(d["commitment"])
            opens = H("commit", canon([d["salt"], d["key"], d["value"]])).hex() == d["commitment"]
            if not opens or seen is None:
                return ("disclosure", seen[0] if seen else "-", seen[1] if seen else None)
            if seen[2] != d["key"]:
                return ("disclosure", seen[0], seen[1])
            proven.append((seen[0], seen[1], d["value"]))
        leaks = []
        for run, at, value in proven:
            result = results[run]
            if result.redaction.policy is None or result.redaction.policy.version != 3:
                continue
            for lit in literals(value):
                if any(lit in t for t in conversation_strings(result.initial, None)):
                    continue
                if any(
                    lit in t
                    for seq, name, scanned in result.redaction.scans
                    if seq <= at
                    for t in conversation_strings(scanned, name)
                ):
                    continue
                for seq, name, scanned in result.redaction.scans:
                    if seq > at and any(lit in t for t in conversation_strings(scanned, name)):
                        leaks.append((run, seq))
                        break
        if leaks:
            order = {run: i for i, run in enumerate(dict.fromkeys(r for r, _, _ in proven))}
            run, seq = min(leaks, key=lambda x: (order[x[0]], x[1]))
            return ("leak", run, seq)
        return None
    finally:
        source.close()
