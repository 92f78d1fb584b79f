/* agentfootprint export-bundle verifier for the self-contained report page.
 *
 * Plain script (no modules, no network): defines globalThis.AFVerify. Load order:
 *   1. verifier.js          (this file: JSON, canonical form, hashing, pinned keys)
 *   2. verifier_patterns.js (redaction policies, RE2-subset patterns, section 12.5 scans)
 *   3. verifier_runs.js     (bundle framing, section 9 run checks, seals, inclusion proofs)
 * Written from docs/log-format.md (sections 2, 3, 5-9, 12, 13, appendices A and C),
 * docs/seals.md and docs/merkle.md; it ports tests/spec/independent_verifier.py's bundle
 * path function by function (same failure codes and seqs). Section numbers below are
 * docs/log-format.md's unless said otherwise.
 *
 * What the page does NOT decide. It gives the verdict code "undecided" (reason ending "verify
 * with the command line"), never a green verdict and never a guessed failure, for:
 *   1. a run whose policy (12.1) is version 1 and has a pattern (Python `re` semantics and the
 *      step budget of appendix C.2), once every other check of the policy passed;
 *   2. a run whose version 2/3 policy has a pattern outside the version 2 pattern subset of
 *      12.1 (whether RE2 compiles it, and what RE2 matches), likewise;
 *   3. a run whose pattern matching used up this page's budget (MATCH_BUDGET NFA steps for the
 *      whole file; RE2 is linear and has none), at the seq being scanned, unless a malformed
 *      commitment, a reused one or a leak was found in that body first;
 *   4. a run continuing (9.3) an undecided run (instead of "ancestry");
 *   5. a file-level finding that depends on an undecided run: a pause answered more than once
 *      (9.5 step 5), a checkpoint that failed to open and that an undecided run may rely on
 *      (13.4);
 *   6. a bundle with a line nested deeper than MAX_LINE_DEPTH (Python decides it by its
 *      recursion limit), as the one file-level verdict {run: null, code: "undecided"};
 *   7. an SQLite database (this page reads bundles only): {run: null, code: "undecided"}.
 *   8. with keys pinned, in a browser whose WebCrypto has no Ed25519: each sealed run (at its
 *      run.seal) and a version 2 bundle's checkpoint;
 *   9. a run whose receipts, or whose inherited commitments, need more than WORK_BUDGET units
 *      of work (request digest lists rebuilt call after call: a crafted bundle can make it
 *      quadratic in its size), at the receipt or scanned body where it ran out.
 * It does not do what only the command line does with other inputs: findings only a database
 * can have (its run index rows, its seal log, rows of a stored type no bundle can carry: codes
 * "index", "seal-log", "rows" there) come from the Python side; nor --disclosures (12.6,
 * 12.8), --checkpoint (9.7, 13.4 "kept elsewhere"), --run, --require-*.
 */
"use strict";
(function (G) {
  const AF = (G.AFVerify = G.AFVerify || {});

  // --- constants (sections 2, 4.3, 13.1) -----------------------------------------------
  const MAX_SAFE_INT = 9007199254740991;
  const MAX_DEPTH = 250, ENVELOPE_DEPTH = 5;
  const MAX_BODY_BYTES = 64 * 1024 * 1024;
  const MAX_ENVELOPE_BYTES = 64 * 1024;
  const MAX_BUNDLE_LINE_BYTES = 2 * MAX_BODY_BYTES + MAX_ENVELOPE_BYTES;
  // A bundle line deeper than this is left undecided: Python decides it by its recursion
  // limit (RecursionError: not a line), which is an implementation detail.
  const MAX_LINE_DEPTH = 900;

  class Failure extends Error {
    // INVALID: a code of section 9.4, a seq (or null) and a reason; also "usage", "bundle"
    // and "undecided" (this page's: beyond what it checks).
    constructor(code, seq, reason) {
      super(`[${code}] seq ${seq}: ${reason}`);
      this.code = code; this.seq = seq; this.reason = reason;
    }
  }
  const undecided = (seq, why) =>
    new Failure("undecided", seq, `${why}: not decided by this page; verify with the command line`);

  // --- bytes, hex, base64 ------------------------------------------------------------------
  const ENC = new TextEncoder();
  const DEC = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
  const HEXCH = "0123456789abcdef";
  const HEXTAB = [];
  for (let i = 0; i < 256; i++) HEXTAB.push(HEXCH[i >> 4] + HEXCH[i & 15]);
  function hex(b) {
    let s = "";
    for (let i = 0; i < b.length; i++) s += HEXTAB[b[i]];
    return s;
  }
  function unhex(s) {
    const out = new Uint8Array(s.length >> 1);
    for (let i = 0; i < out.length; i++) out[i] = parseInt(s.substr(2 * i, 2), 16);
    return out;
  }
  function concat(...parts) {
    let n = 0;
    for (const p of parts) n += p.length;
    const out = new Uint8Array(n);
    let at = 0;
    for (const p of parts) { out.set(p, at); at += p.length; }
    return out;
  }
  function bytesEqual(a, b) {
    if (a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
    return true;
  }
  const HEX64 = /^[0-9a-f]{64}$/;
  const isHex = (x) => typeof x === "string" && x.length === 64 && HEX64.test(x);

  const B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const B64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  function b64encode(bytes, alphabet = B64) {
    let s = "";
    for (let i = 0; i < bytes.length; i += 3) {
      const n = (bytes[i] << 16) | ((bytes[i + 1] || 0) << 8) | (bytes[i + 2] || 0);
      s += alphabet[(n >> 18) & 63] + alphabet[(n >> 12) & 63];
      s += i + 1 < bytes.length ? alphabet[(n >> 6) & 63] : "=";
      s += i + 2 < bytes.length ? alphabet[n & 63] : "=";
    }
    return s;
  }
  // Padded base64 in its one spelling (RFC 4648 section 4 or 5), else null.
  function b64decodeCanonical(text, alphabet = B64) {
    if (typeof text !== "string" || text.length % 4) return null;
    const pad = text.endsWith("==") ? 2 : text.endsWith("=") ? 1 : 0;
    const out = new Uint8Array((text.length / 4) * 3 - pad);
    let o = 0;
    for (let i = 0; i < text.length; i += 4) {
      let n = 0;
      for (let j = 0; j < 4; j++) {
        const c = text[i + j];
        let v;
        if (c === "=") {
          if (i + 4 !== text.length || j < 4 - pad) return null;
          v = 0;
        } else {
          v = alphabet.indexOf(c);
          if (v < 0) return null;
        }
        n = (n << 6) | v;
      }
      if (o < out.length) out[o++] = (n >> 16) & 255;
      if (o < out.length) out[o++] = (n >> 8) & 255;
      if (o < out.length) out[o++] = n & 255;
    }
    return b64encode(out, alphabet) === text ? out : null;
  }

  // --- hashing (section 3) -------------------------------------------------------------
  // WebCrypto, looked up when used (a page outside a secure context has none; it says so)
  const subtle = () => G.crypto.subtle;
  async function sha256(bytes) {
    return new Uint8Array(await subtle().digest("SHA-256", bytes));
  }
  const TAGS = new Map();
  function tagPrefix(tag) {
    let p = TAGS.get(tag);
    if (!p) { p = ENC.encode("afp/v1/" + tag + "\0"); TAGS.set(tag, p); }
    return p;
  }
  // H(tag, b) = SHA-256("afp/v1/" || tag || 0x00 || b); b a Uint8Array or a string (UTF-8)
  async function H(tag, data) {
    // a string is encoded with its prefix in one go (no second copy of a long request)
    if (typeof data === "string") return sha256(ENC.encode("afp/v1/" + tag + "\0" + data));
    return sha256(concat(tagPrefix(tag), data));
  }

  // --- JSON (sections 2, 12.2, 13.1) -------------------------------------------------------
  // One linear, non-recursive RFC 8259 parser with the modes the page needs:
  //   "value":  numbers as the nearest double (sections 2, 12.2 step 6); duplicate names and
  //             infinite numbers are flagged (not errors), as the Python decoder's hooks do;
  //   "bundle": section 13.1 numbers: an integer token within +-(2^53-1) is a JS number,
  //             every other number a JFloat (so 1.0 is not an integer seq);
  //   "strict": "value" numbers, a duplicate name is an error (seals.md section 3).
  // Objects are null-prototype (so "__proto__" is data); member order is kept in KEYS
  // because JS reorders integer-like names and the scans walk in document order.
  class JFloat {
    constructor(v) { this.value = v; }
  }
  const KEYS = Symbol("keys");
  const INDEXLIKE = /^(?:0|[1-9][0-9]{0,9})$/;
  function keysOf(o) {
    return o[KEYS] || Object.keys(o);
  }
  function newObj() {
    return Object.create(null);
  }
  function setMember(o, k, v) {
    // keeps first position, last value (Python's dict(items))
    if (!(k in o)) {
      if (o[KEYS]) o[KEYS].push(k);
      else if (INDEXLIKE.test(k) && +k < 4294967295) {
        Object.defineProperty(o, KEYS, { value: Object.keys(o).concat([k]), writable: true });
      }
    }
    o[k] = v;
  }
  const isObj = (x) => x !== null && typeof x === "object" && !Array.isArray(x) && !(x instanceof JFloat);
  const isInt = (x) => typeof x === "number" && Number.isSafeInteger(x);
  const isStr = (x) => typeof x === "string";
  const hasOwn = (o, k) => Object.prototype.hasOwnProperty.call(o, k);

  class JSONError extends Error {}
  const WS = (c) => c === 32 || c === 9 || c === 10 || c === 13;
  const NUM = /-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?/y;

  // Parse `text` (a JS string). Returns {value, dup, inf, lone, depth}; throws JSONError on
  // anything that is not exactly one JSON text (whitespace allowed around it). depth is
  // section 2's (the root 0); maxDepth bounds the work (deeper: JSONError with .deep).
  function parseJSON(text, mode, maxDepth) {
    const bundle = mode === "bundle", strict = mode === "strict";
    const n = text.length;
    let i = 0, dup = false, inf = false, lone = false, depth = 0;
    const fail = (why) => { throw new JSONError(`${why} at ${i}`); };
    const skip = () => { while (i < n && WS(text.charCodeAt(i))) i++; };
    function str() {
      // at the opening quote
      i++;
      let out = "", start = i;
      for (;;) {
        if (i >= n) fail("unterminated string");
        const c = text.charCodeAt(i);
        if (c === 34) { out += text.slice(start, i); i++; break; }
        if (c < 32) fail("control character in string");
        if (c === 92) {
          out += text.slice(start, i);
          const e = text[i + 1];
          i += 2;
          switch (e) {
            case '"': out += '"'; break;
            case "\\": out += "\\"; break;
            case "/": out += "/"; break;
            case "b": out += "\b"; break;
            case "f": out += "\f"; break;
            case "n": out += "\n"; break;
            case "r": out += "\r"; break;
            case "t": out += "\t"; break;
            case "u": {
              const h = text.slice(i, i + 4);
              if (!/^[0-9a-fA-F]{4}$/.test(h)) fail("bad \\u escape");
              out += String.fromCharCode(parseInt(h, 16));
              i += 4;
              break;
            }
            default: fail("bad escape");
          }
          start = i;
          continue;
        }
        i++;
      }
      if (!lone && hasLoneSurrogate(out)) lone = true;
      return out;
    }
    function num() {
      NUM.lastIndex = i;
      const m = NUM.exec(text);
      if (!m || m.index !== i) fail("bad number");
      const tok = m[0];
      i += tok.length;
      const d = Number(tok);
      if (bundle) {
        if (m[1] === undefined && m[2] === undefined && Math.abs(d) <= MAX_SAFE_INT) return d;
        return new JFloat(d);
      }
      if (!Number.isFinite(d)) { inf = true; return 0; }
      return d;
    }
    function lit(word, v) {
      if (text.startsWith(word, i)) { i += word.length; return v; }
      return fail("unexpected character");
    }
    // explicit stack of containers: {c: container, key: pending member name or undefined}
    const stack = [];
    let value, have = false;
    skip();
    for (;;) {
      // read one value at i
      if (i >= n) fail("unexpected end");
      if (stack.length > depth) depth = stack.length; // section 2: the value's depth
      const c = text.charCodeAt(i);
      let v, opened = null;
      if (c === 123) { // {
        i++; opened = newObj();
      } else if (c === 91) { // [
        i++; opened = [];
      } else if (c === 34) v = str();
      else if (c === 45 || (c >= 48 && c <= 57)) v = num();
      else if (c === 116) v = lit("true", true);
      else if (c === 102) v = lit("false", false);
      else if (c === 110) v = lit("null", null);
      else fail("unexpected character");
      if (opened !== null) {
        if (stack.length + 1 > maxDepth) { const e = new JSONError("nested too deep"); e.deep = true; throw e; }
        stack.push({ c: opened, key: undefined });
        skip();
        const close = Array.isArray(opened) ? 93 : 125;
        if (text.charCodeAt(i) === close) {
          i++;
          v = stack.pop().c;
        } else {
          if (!Array.isArray(opened)) {
            if (text.charCodeAt(i) !== 34) fail("expected a member name");
            stack[stack.length - 1].key = str();
            skip();
            if (text.charCodeAt(i) !== 58) fail("expected ':'");
            i++;
            skip();
          }
          continue; // read the first member or element
        }
      }
      // v is complete: attach to the parent, closing containers as they end
      for (;;) {
        if (stack.length === 0) { value = v; have = true; break; }
        const top = stack[stack.length - 1];
        if (Array.isArray(top.c)) top.c.push(v);
        else {
          if (top.key in top.c) {
            if (strict) fail("a member name twice");
            dup = true;
          }
          setMember(top.c, top.key, v);
        }
        skip();
        const d = text.charCodeAt(i);
        if (d === 44) { // ,
          i++;
          skip();
          if (!Array.isArray(top.c)) {
            if (text.charCodeAt(i) !== 34) fail("expected a member name");
            top.key = str();
            skip();
            if (text.charCodeAt(i) !== 58) fail("expected ':'");
            i++;
            skip();
          }
          break; // read the next value
        }
        if (d === (Array.isArray(top.c) ? 93 : 125)) {
          i++;
          v = stack.pop().c;
          continue;
        }
        fail("expected ',' or a closing bracket");
      }
      if (have) break;
    }
    skip();
    if (i !== n) fail("data after the value");
    return { value, dup, inf, lone, depth };
  }

  function hasLoneSurrogate(s) {
    for (let k = 0; k < s.length; k++) {
      const c = s.charCodeAt(k);
      if (c >= 0xd800 && c <= 0xdbff) {
        const d = s.charCodeAt(k + 1);
        if (d >= 0xdc00 && d <= 0xdfff) { k++; continue; }
        return true;
      }
      if (c >= 0xdc00 && c <= 0xdfff) return true;
    }
    return false;
  }

  // Member-name lone surrogates: str() above flags names too (they are parsed by str()).

  // --- canonical form (section 2: RFC 8785) ---------------------------------------------
  // canon(v) as a JS string (its UTF-8 is the canonical bytes). Values come from this
  // parser (I-JSON checked by the caller); a JFloat or a non-finite number is not I-JSON.
  function canon(v) {
    const parts = [];
    canonInto(v, parts, 0);
    return parts.join("");
  }
  function canonInto(v, out, d) {
    if (d > 10000) throw new JSONError("nested too deep to canonicalise");
    if (v === null) out.push("null");
    else if (v === true) out.push("true");
    else if (v === false) out.push("false");
    else if (typeof v === "string") out.push(JSON.stringify(v));
    else if (typeof v === "number") {
      if (!Number.isFinite(v)) throw new JSONError("a number that is not finite");
      out.push(JSON.stringify(v));
    } else if (Array.isArray(v)) {
      out.push("[");
      for (let k = 0; k < v.length; k++) {
        if (k) out.push(",");
        canonInto(v[k], out, d + 1);
      }
      out.push("]");
    } else if (v instanceof JFloat) {
      throw new JSONError("not a canonical value");
    } else {
      const ks = Object.keys(v).sort(); // UTF-16 code unit order
      out.push("{");
      for (let k = 0; k < ks.length; k++) {
        if (k) out.push(",");
        out.push(JSON.stringify(ks[k]), ":");
        canonInto(v[ks[k]], out, d + 1);
      }
      out.push("}");
    }
  }

  // Section 12.2 step 3: bracket depth outside string literals, linear time.
  function bracketDepth(s) {
    const t = s.split("\\\\").join("").split('\\"').join("");
    let count = 0, best = 0, outside = true;
    for (let k = 0; k < t.length; k++) {
      const c = t.charCodeAt(k);
      if (c === 34) { outside = !outside; continue; }
      if (!outside) continue;
      if (c === 91 || c === 123) { count++; if (count > best) best = count; }
      else if (c === 93 || c === 125) count--;
    }
    return best;
  }

  // Section 2's canonical check of a body (a string: its UTF-8 is the stored bytes).
  function parseBody(text, seq) {
    const limit = MAX_DEPTH + ENVELOPE_DEPTH;
    if (bracketDepth(text) > limit + 1) {
      throw new Failure("canonical", seq, `body nested deeper than ${limit}`);
    }
    let got;
    try {
      got = parseJSON(text, "value", limit + 2);
    } catch (e) {
      if (e instanceof JSONError) throw new Failure("canonical", seq, `body is not JSON: ${e.message}`);
      throw e;
    }
    if (got.dup || got.inf || got.lone || got.depth > limit) {
      throw new Failure("canonical", seq, `body is not I-JSON (duplicate name ${got.dup}, ` +
        `infinite number ${got.inf}, lone surrogate ${got.lone}, depth ${got.depth})`);
    }
    let again;
    try {
      again = canon(got.value);
    } catch (e) {
      throw new Failure("canonical", seq, `body is not I-JSON: ${e.message}`);
    }
    if (again !== text) throw new Failure("canonical", seq, "body differs from its canonical form");
    return got.value;
  }

  // --- the JSON-text rule (section 12.2) -----------------------------------------------
  const TEXT = "text", OPAQUE = "opaque", WALKABLE = "walkable";
  const CLASSIFIED = new Map(); // small memo: long strings met again (state values)
  function classify(s) {
    let k = 0;
    while (k < s.length && WS(s.charCodeAt(k))) k++;
    const c = s.charCodeAt(k);
    if (k >= s.length || (c !== 123 && c !== 91)) return [TEXT, null]; // step 1
    if (s.length > 64) {
      const m = CLASSIFIED.get(s);
      if (m) return m;
    }
    const out = classifyJSON(s);
    if (s.length > 64) {
      if (CLASSIFIED.size > 20000) CLASSIFIED.clear();
      CLASSIFIED.set(s, out);
    }
    return out;
  }
  function classifyJSON(s) {
    if (hasLoneSurrogate(s)) return [TEXT, null]; // step 2
    if (bracketDepth(s) > MAX_DEPTH) return [OPAQUE, null]; // step 3
    let got;
    try {
      got = parseJSON(s, "value", MAX_DEPTH + 2);
    } catch (e) {
      if (e instanceof JSONError) return [TEXT, null]; // step 4
      throw e;
    }
    if (got.dup || got.inf || got.lone) return [OPAQUE, null]; // step 5
    return [WALKABLE, got.value]; // step 6
  }

  // --- pinned keys (docs/seals.md section 1, "Keys that prove nothing") -------------------
  const P = (1n << 255n) - 19n;
  function modpow(b, e, m) {
    let r = 1n;
    b %= m;
    if (b < 0n) b += m;
    while (e > 0n) {
      if (e & 1n) r = (r * b) % m;
      b = (b * b) % m;
      e >>= 1n;
    }
    return r;
  }
  const mod = (a) => ((a % P) + P) % P;
  const ED_D = mod(-121665n * modpow(121666n, P - 2n, P));
  // RFC 8032 section 5.1.4: point addition in extended coordinates (X, Y, Z, T)
  function edAdd(a, b) {
    const [x1, y1, z1, t1] = a, [x2, y2, z2, t2] = b;
    const aa = mod((y1 - x1) * (y2 - x2)), bb = mod((y1 + x1) * (y2 + x2));
    const cc = mod(t1 * 2n * ED_D * t2), dd = mod(z1 * 2n * z2);
    const e = bb - aa, f = dd - cc, g = dd + cc, h = bb + aa;
    return [mod(e * f), mod(g * h), mod(f * g), mod(e * h)];
  }
  function pinnedKeyProblem(key) {
    if (!(key instanceof Uint8Array) || key.length !== 32) return "not 32 bytes";
    let y = 0n;
    for (let k = 31; k >= 0; k--) y = (y << 8n) | BigInt(key[k]);
    y &= (1n << 255n) - 1n;
    const sign = BigInt(key[31] >> 7);
    if (y >= P) return "y is not below p: not canonical";
    const u = mod(y * y - 1n), v = mod(ED_D * y * y + 1n);
    let x = mod(u * modpow(v, 3n, P) * modpow(u * modpow(v, 7n, P), (P - 5n) / 8n, P));
    if (mod(v * x * x) === mod(-u)) x = mod(x * modpow(2n, (P - 1n) / 4n, P));
    if (mod(v * x * x) !== u) return "no point has this y";
    if (x === 0n && sign) return "x is 0 with the sign bit set: not canonical";
    if (x % 2n !== sign) x = P - x;
    let pt = [x, y, 1n, mod(x * y)];
    for (let k = 0; k < 3; k++) pt = edAdd(pt, pt);
    if (mod(pt[0]) === 0n && mod(pt[1] - pt[2]) === 0n) return "of small order: it verifies forged signatures";
    return null;
  }
  function refuseKeys(keys) {
    const out = [];
    for (const k of keys || []) {
      const key = k instanceof Uint8Array ? k : new Uint8Array(k);
      const why = pinnedKeyProblem(key);
      if (why !== null) {
        throw new Failure("usage", null, `the pinned key ed25519:${b64encode(key)} is ${why}`);
      }
      out.push(key);
    }
    return out;
  }
  const importedKeys = new Map();
  async function edVerify(key, sig, message) {
    if (sig.length !== 64) return false;
    const id = hex(key);
    let k = importedKeys.get(id);
    if (!k) {
      try {
        k = await subtle().importKey("raw", key, { name: "Ed25519" }, false, ["verify"]);
      } catch (e) {
        // a browser whose WebCrypto has no Ed25519 checks no signature: undecided, never passed
        throw undecided(null, `this browser cannot check Ed25519 signatures (${e && e.name})`);
      }
      importedKeys.set(id, k);
    }
    try {
      return await subtle().verify({ name: "Ed25519" }, k, sig, message);
    } catch (e) {
      return false;
    }
  }

  Object.assign(AF, {
    _: {
      MAX_SAFE_INT, MAX_DEPTH, ENVELOPE_DEPTH, MAX_BODY_BYTES, MAX_BUNDLE_LINE_BYTES,
      MAX_LINE_DEPTH, Failure, undecided, ENC, DEC, hex, unhex, concat, bytesEqual, isHex,
      b64encode, b64decodeCanonical, B64, B64URL, sha256, H, JFloat, KEYS, keysOf, newObj,
      setMember, isObj, isInt, isStr, hasOwn, JSONError, parseJSON, hasLoneSurrogate, canon,
      bracketDepth, parseBody, classify, TEXT, OPAQUE, WALKABLE, pinnedKeyProblem,
      refuseKeys, edVerify,
    },
  });
})(globalThis);
