/* agentfootprint report verifier, part 2 of 3 (after verifier.js): redaction policies
 * (section 12.1), matching (12.2) and the verifier's redaction checks (12.5).
 *
 * Version 2/3 patterns in the version 2 pattern subset of section 12.1 are translated to a
 * flag-free JS RegExp (the "u" flag only, for code points) with the meaning section 12.1
 * fixes code point by code point: a port of agentfootprint.store.pattern_subset's parser,
 * writing JS instead of Python. Anything outside the subset is not guessed: the run is
 * "undecided" (verify with the command line), as is a version 1 policy with patterns.
 */
"use strict";
(function (G) {
  const AF = G.AFVerify;
  const { Failure, undecided, isObj, isInt, isStr, keysOf, canon, H, hex, classify,
    WALKABLE, OPAQUE } = AF._;

  // --- the version 2 pattern subset (section 12.1) -------------------------------------
  const MAX_PATTERN_LENGTH = 500, MAX_COUNT = 100, MAX_SIZE = 1000, MAX_NESTING = 32;
  const MAX_CP = 0x10ffff;
  const PUNCT = new Set("!\"#$%&'()*+,-./:;<=>?@[\\]^`{|}~".split(""));
  const CONTROL = { t: 0x09, n: 0x0a, r: 0x0d, f: 0x0c, v: 0x0b };
  const WORD = [[0x30, 0x39], [0x41, 0x5a], [0x5f, 0x5f], [0x61, 0x7a]];
  const PERL = { d: [[0x30, 0x39]], s: [[0x09, 0x0a], [0x0c, 0x0d], [0x20, 0x20]], w: WORD };
  const FOLD_EXTRA = { 0x6b: 0x212a, 0x73: 0x017f }; // k, s: RE2's simple case folding
  const W = "[0-9A-Za-z_]";
  const ANCHORS = {
    A: "^", z: "$",
    b: `(?:(?<=${W})(?!${W})|(?<!${W})(?=${W}))`,
    B: `(?:(?<=${W})(?=${W})|(?<!${W})(?!${W}))`,
  };

  class Refused extends Error {}

  function normal(ranges) {
    const out = [];
    for (const [lo, hi] of ranges.slice().sort((a, b) => a[0] - b[0] || a[1] - b[1])) {
      if (out.length && lo <= out[out.length - 1][1] + 1) {
        out[out.length - 1][1] = Math.max(out[out.length - 1][1], hi);
      } else out.push([lo, hi]);
    }
    return out;
  }
  function folded(ranges) {
    const extra = [];
    for (const [lo, hi] of ranges) {
      for (let c = lo; c <= Math.min(hi, 0x7f); c++) {
        const ch = String.fromCharCode(c);
        if (/[A-Za-z]/.test(ch)) {
          const other = ch === ch.toLowerCase() ? ch.toUpperCase() : ch.toLowerCase();
          extra.push([other.charCodeAt(0), other.charCodeAt(0)]);
          const more = FOLD_EXTRA[ch.toLowerCase().charCodeAt(0)];
          if (more !== undefined) extra.push([more, more]);
        }
      }
    }
    return normal(ranges.concat(extra));
  }
  function complement(ranges) {
    const out = [];
    let at = 0;
    for (const [lo, hi] of normal(ranges)) {
      if (lo > at) out.push([at, lo - 1]);
      at = hi + 1;
    }
    if (at <= MAX_CP) out.push([at, MAX_CP]);
    return out;
  }
  const esc = (c) => `\\u{${c.toString(16)}}`;
  function classText(ranges) {
    if (!ranges.length) return "(?!)";
    return "[" + ranges.map(([lo, hi]) => (lo === hi ? esc(lo) : `${esc(lo)}-${esc(hi)}`)).join("") + "]";
  }

  // Recursive descent over the subset's grammar (depth bounded by MAX_NESTING), writing the
  // JS translation; throws Refused for anything outside the subset.
  function translate(pattern) {
    const cps = Array.from(pattern); // code points
    if (!cps.length) throw new Refused("an empty pattern");
    if (cps.length > MAX_PATTERN_LENGTH) throw new Refused("a pattern longer than 500 characters");
    for (const c of cps) {
      const k = c.codePointAt(0);
      if (k >= 0xd800 && k <= 0xdfff) throw new Refused("a lone surrogate");
    }
    let at = 0, fold = false, depth = 0;
    const peek = (a = 0) => (at + a < cps.length ? cps[at + a] : "");
    const startsWith = (s, pos) => cps.slice(pos, pos + s.length).join("") === s;
    if (startsWith("(?i)", 0)) { fold = true; at = 4; }

    function alternation() {
      const branches = [concatenation()];
      while (peek() === "|") { at++; branches.push(concatenation()); }
      if (branches.length === 1) return branches[0];
      const size = branches.reduce((s, b) => s + b.size, 0) + branches.length - 1;
      return { text: "(?:" + branches.map((b) => b.text).join("|") + ")", size, rep: true, nul: branches.some((b) => b.nul), ast: { t: "alt", items: branches.map((b) => b.ast) } };
    }
    function concatenation() {
      const parts = [];
      while (!["", "|", ")"].includes(peek())) parts.push(quantified(atom()));
      if (!parts.length) return { text: "", size: 1, rep: true, nul: true, ast: { t: "cat", items: [] } };
      return { text: parts.map((p) => p.text).join(""), size: parts.reduce((s, p) => s + p.size, 0), rep: true, nul: parts.every((p) => p.nul), ast: { t: "cat", items: parts.map((p) => p.ast) } };
    }
    function quantified(piece) {
      const c = peek();
      let times, text, low = 1, high = null;
      if (c === "*" || c === "+" || c === "?") { at++; times = 1; text = c; low = c === "+" ? 1 : 0; high = c === "?" ? 1 : null; }
      else if (c === "{") {
        const start = at;
        const m = /^\{([0-9]+)(,([0-9]*))?\}/.exec(cps.slice(at, at + 16).join(""));
        if (!m) throw new Refused("a '{' that is not a repetition");
        at += m[0].length;
        low = parseInt(m[1], 10);
        high = m[2] === undefined ? low : m[3] ? parseInt(m[3], 10) : null;
        if (Math.max(low, high || 0) > MAX_COUNT || m[1].length > 3 || (m[3] || "").length > 3) {
          throw new Refused("a repetition count over 100");
        }
        if (high !== null && high < low) throw new Refused("a repetition {n,m} with m < n");
        times = Math.max(high !== null ? high : low + 1, 1);
        text = cps.slice(start, at).join("");
      } else return piece;
      if (!piece.rep) throw new Refused("a repetition of an anchor");
      if (peek() === "?") { at++; text += "?"; }
      if (["*", "+", "?", "{"].includes(peek())) throw new Refused("a possessive or repeated repetition");
      return { text: `(?:${piece.text})${text}`, size: piece.size * times, rep: true, nul: low === 0 || piece.nul, ast: { t: "rep", item: piece.ast, min: low, max: high } };
    }
    function atom() {
      const c = peek();
      if (c === "(") return group();
      if (c === "[") { const r = charClass(); return { text: classText(r), size: 1, rep: true, nul: false, ast: { t: "set", ranges: r } }; }
      at++;
      if (c === ".") return { text: "[^\\n]", size: 1, rep: true, nul: false, ast: { t: "set", ranges: [[0, 9], [11, MAX_CP]] } };
      if (c === "^") return { text: "^", size: 1, rep: false, nul: false, ast: { t: "as", k: "^" } };
      if (c === "$") return { text: "$", size: 1, rep: false, nul: false, ast: { t: "as", k: "$" } };
      if ("*+?{".includes(c)) throw new Refused(`a repetition ${c} with nothing to repeat`);
      if (c === "]" || c === "}") throw new Refused(`an unescaped ${c}`);
      if (c === "\\") {
        const e = peek();
        if (ANCHORS[e] !== undefined) { at++; return { text: ANCHORS[e], size: 1, rep: false, nul: e === "B", ast: { t: "as", k: { A: "^", z: "$", b: "b", B: "B" }[e] } }; }
        if (PERL[e] || PERL[e.toLowerCase()]) { at++; const r = perl(e); return { text: classText(r), size: 1, rep: true, nul: false, ast: { t: "set", ranges: r } }; }
        return literal(escape());
      }
      return literal(c.codePointAt(0));
    }
    function literal(code) {
      if (fold) {
        if (code > 0x7f) throw new Refused("a non-ASCII character under (?i)");
        const f = folded([[code, code]]);
        if (!(f.length === 1 && f[0][0] === code && f[0][1] === code)) return { text: classText(f), size: 1, rep: true, nul: false, ast: { t: "set", ranges: f } };
      }
      return { text: esc(code), size: 1, rep: true, nul: false, ast: { t: "set", ranges: [[code, code]] } };
    }
    function escape() {
      const e = peek();
      if (e === "") throw new Refused("a trailing backslash");
      at++;
      if (PUNCT.has(e)) return e.codePointAt(0);
      if (CONTROL[e] !== undefined) return CONTROL[e];
      if (e === "x") {
        const d = cps.slice(at, at + 2).join("");
        if (/^[0-9a-fA-F]{2}$/.test(d)) { at += 2; return parseInt(d, 16); }
        throw new Refused("an escape \\x not followed by two hex digits");
      }
      throw new Refused(`the escape \\${e}`);
    }
    function perl(e) {
      const base = PERL[e.toLowerCase()].map((r) => r.slice());
      const ranges = fold ? folded(base) : base;
      return e !== e.toLowerCase() ? complement(ranges) : ranges;
    }
    function group() {
      const start = at;
      depth++;
      if (depth > MAX_NESTING) throw new Refused("groups nested more than 32 deep");
      const saved = fold;
      if (startsWith("(?:", start)) at += 3;
      else if (startsWith("(?i:", start)) { at += 4; fold = true; }
      else if (peek(1) === "?") throw new Refused("a group kind outside the subset");
      else at += 1;
      const inner = alternation();
      if (peek() !== ")") throw new Refused("a '(' without its ')'");
      at++;
      fold = saved;
      depth--;
      return { text: `(?:${inner.text})`, size: inner.size, rep: true, nul: inner.nul, ast: inner.ast };
    }
    function charClass() {
      at++;
      const negated = peek() === "^";
      if (negated) at++;
      let ranges = [];
      let first = true;
      for (;;) {
        const c = peek();
        if (c === "") throw new Refused("a '[' without its ']'");
        if (c === "]") {
          if (first) throw new Refused("an empty class or a ']' first in it");
          at++;
          break;
        }
        first = false;
        if (c === "[") throw new Refused("a '[' inside a class");
        if (c === "\\" && (PERL[peek(1)] || PERL[peek(1).toLowerCase()])) {
          const e = peek(1);
          at += 2;
          ranges = ranges.concat(perl(e));
          continue;
        }
        const low = classChar();
        let high = low;
        if (peek() === "-" && !["]", ""].includes(peek(1))) {
          at++;
          high = classChar();
          if (high < low) throw new Refused("a range whose end comes before its start");
        }
        if (fold && high > 0x7f) throw new Refused("a non-ASCII character under (?i)");
        ranges.push([low, high]);
      }
      ranges = fold ? folded(ranges) : normal(ranges);
      return negated ? complement(ranges) : ranges;
    }
    function classChar() {
      const c = peek();
      if (c === "\\") {
        at++;
        if (["b", "B", "A", "z"].includes(peek())) throw new Refused("an anchor inside a class");
        return escape();
      }
      if (c === "[") throw new Refused("a '[' inside a class");
      at++;
      return c.codePointAt(0);
    }
    const body = alternation();
    if (at < cps.length) throw new Refused("an unmatched ')'");
    if (body.size > MAX_SIZE) throw new Refused("a pattern over 1000 items");
    // RE2 searches the key's UTF-8 bytes, trying every byte offset: inside a multi-byte
    // character (both neighbours non-word bytes) \B holds, \b, ^, $ do not, and nothing
    // that consumes a character can start. So a pattern that matches the empty string
    // there ("interior") matches every key with a non-ASCII character. (The Python
    // translation of section 12.1 works on code points and misses this.)
    const c = compile(body.ast);
    return { source: body.text, prog: c.prog, start: c.start, interior: body.nul };
  }

  // A Thompson NFA of the pattern, run over the key's code points by a set-of-states
  // simulation: linear in the key, whatever the pattern (a backtracking engine such as the
  // browser's RegExp can take exponential time on (a|aa)+$, and a bundle chooses both the
  // pattern and the keys). The subset's 1,000-item limit bounds the program.
  // Instructions: [SET, ranges, next] [SPLIT, a, b] [ASSERT, kind, next] [MATCH]
  const SET = 0, SPLIT = 1, ASSERT = 2, MATCH = 3, JUMP = 4;
  function compile(ast) {
    const prog = [];
    const emit = (ins) => { prog.push(ins); return prog.length - 1; };
    // gen(node, next) -> entry index; built back to front so every jump is known
    function gen(node, next) {
      switch (node.t) {
        case "set": return emit([SET, node.ranges, next]);
        case "as": return emit([ASSERT, node.k, next]);
        case "cat": {
          let at = next;
          for (let k = node.items.length - 1; k >= 0; k--) at = gen(node.items[k], at);
          return at;
        }
        case "alt": {
          const entries = node.items.map((it) => gen(it, next));
          let at = entries[entries.length - 1];
          for (let k = entries.length - 2; k >= 0; k--) at = emit([SPLIT, entries[k], at]);
          return at;
        }
        case "rep": {
          let at = next;
          if (node.max === null) {
            // x* : loop = SPLIT(body -> loop, next)
            const loop = emit([SPLIT, -1, next]);
            prog[loop][1] = gen(node.item, loop);
            at = loop;
          } else {
            // x{0,m}: m nested optional copies, each skipping to what follows
            for (let k = node.max - node.min; k > 0; k--) at = emit([SPLIT, gen(node.item, at), next]);
          }
          for (let k = node.min; k > 0; k--) at = gen(node.item, at);
          return at;
        }
      }
      throw new Error("bad pattern node");
    }
    const match = emit([MATCH]);
    const start = gen(ast, match);
    return { prog, start };
  }
  const isWord = (c) => (c >= 48 && c <= 57) || (c >= 65 && c <= 90) || c === 95 || (c >= 97 && c <= 122);
  function inRanges(ranges, c) {
    for (const r of ranges) { if (c < r[0]) return false; if (c <= r[1]) return true; }
    return false;
  }
  // Run the NFA over the key (code points); spends `budget.steps` (state visits) and throws
  // Undecidable when it is used up.
  class Undecidable extends Error {}
  function runProg(p, key, budget) {
    const { prog, start } = p;
    const cps = Array.from(key, (ch) => ch.codePointAt(0));
    const n = cps.length;
    let mark = new Int32Array(prog.length).fill(-1);
    let cur = [], nxt = [];
    // add the epsilon closure of state s at position pos to list; true when MATCH is reached
    function add(list, s0, pos, gen) {
      const stack = [s0];
      while (stack.length) {
        const s = stack.pop();
        if (mark[s] === gen) continue;
        mark[s] = gen;
        if (--budget.steps < 0) throw new Undecidable();
        const ins = prog[s];
        switch (ins[0]) {
          case MATCH: return true;
          case SET: list.push(s); break;
          case SPLIT: stack.push(ins[2], ins[1]); break;
          case ASSERT: {
            const before = pos > 0 ? cps[pos - 1] : -1, after = pos < n ? cps[pos] : -1;
            const k = ins[1];
            const wb = (before >= 0 && isWord(before)) !== (after >= 0 && isWord(after));
            const ok = k === "^" ? pos === 0 : k === "$" ? pos === n : k === "b" ? wb : !wb;
            if (ok) stack.push(ins[2]);
            break;
          }
        }
      }
      return false;
    }
    let gen = 0;
    for (let pos = 0; pos <= n; pos++) {
      // unanchored: a new thread starts at every position (states already here are kept)
      if (add(cur, start, pos, gen)) return true;
      if (pos === n) break;
      const c = cps[pos];
      gen++;
      nxt.length = 0;
      for (const s of cur) {
        const ins = prog[s];
        if (inRanges(ins[1], c) && add(nxt, ins[2], pos + 1, gen)) return true;
      }
      [cur, nxt] = [nxt, cur];
    }
    return false;
  }
  const NON_ASCII = /[^\x00-\x7f]/;
  const search = (p, key, budget) => (p.interior && NON_ASCII.test(key)) || runProg(p, key, budget);

  // --- policies (sections 12.1, 12.2; appendix C) --------------------------------------
  // A matcher of one run. version 1 patterns, and patterns outside the subset, were turned
  // into undecided at seq 0 by checkPolicy, so a matcher only ever uses translated patterns.
  class Matcher {
    constructor(version, keys, patterns, budget) {
      this.budget = budget; // shared by the whole verification: {steps}
      this.version = version;
      this.keys = new Set(keys);
      this.patterns = patterns;
      this.cache = new Map();
    }
    matches(key) {
      if (this.keys.has(key)) return true;
      if (!this.patterns.length) return false;
      let hit = this.cache.get(key);
      if (hit === undefined) {
        hit = this.patterns.some((p) => search(p, key, this.budget));
        this.cache.set(key, hit);
      }
      return hit;
    }
  }

  function sortedUnique(keys) {
    // sorted by code point (not UTF-16 units: section 12.1), without duplicates
    const cmp = (a, b) => {
      const A = Array.from(a, (c) => c.codePointAt(0)), B = Array.from(b, (c) => c.codePointAt(0));
      for (let k = 0; k < Math.min(A.length, B.length); k++) if (A[k] !== B[k]) return A[k] - B[k];
      return A.length - B.length;
    };
    for (let k = 1; k < keys.length; k++) if (cmp(keys[k - 1], keys[k]) >= 0) return false;
    return true;
  }

  // Section 12.1: null for no policy, else a Matcher; Failure(policy) at seq 0, or
  // undecided when only a pattern this page does not read is left to judge.
  async function checkPolicy(policy, digest, budget) {
    const absent = (x) => x === undefined || x === null;
    if (absent(policy) && absent(digest)) return null;
    const bad = (why) => new Failure("policy", 0, why);
    if (absent(policy) || absent(digest)) throw bad("one of policy and policy_digest is null and the other is not");
    const ks = isObj(policy) ? keysOf(policy) : [];
    if (!isObj(policy) || ks.length !== 3 || !["v", "keys", "patterns"].every((k) => k in policy)) {
      throw bad("the policy is not an object with exactly v, keys and patterns");
    }
    const v = policy.v, keys = policy.keys, patterns = policy.patterns;
    if (!isInt(v) || ![1, 2, 3].includes(v)) throw bad(`unknown policy version ${JSON.stringify(v)}`);
    for (const items of [keys, patterns]) {
      if (!Array.isArray(items) || !items.every((x) => isStr(x) && x.length > 0)) {
        throw bad("keys or patterns is not an array of non-empty strings");
      }
    }
    const compiled = [];
    let beyond = null;
    for (const p of patterns) {
      if (v === 1) { beyond = beyond || `version 1 (Python re) pattern ${JSON.stringify(p)}`; continue; }
      try {
        compiled.push(translate(p));
      } catch (e) {
        if (!(e instanceof Refused)) throw e;
        beyond = beyond || `pattern ${JSON.stringify(p)} is outside the version 2 pattern subset (${e.message})`;
      }
    }
    if (!sortedUnique(keys)) throw bad("keys are not sorted by code point and unique (not in normal form)");
    let want;
    try { want = hex(await H("policy", canon(policy))); } catch (e) { throw bad("the policy is not I-JSON"); }
    if (digest !== want) throw bad("policy_digest differs from the digest of the policy");
    // every check but compiling passed: whether RE2 (or Python re) compiles it, and what it
    // matches, is beyond this page
    if (beyond) throw undecided(0, `the run's redaction policy: ${beyond}`);
    return new Matcher(v, keys, compiled, budget);
  }

  // --- the redaction checks (section 12.5) ------------------------------------------------
  const isCommitment = (v) => isObj(v) && keysOf(v).length === 1 && "$commit" in v && AF._.isHex(v.$commit);

  // Every commitment in `value` by position (a string key; null steps into walkable text).
  function commitmentPositions(value, base) {
    const found = new Map();
    const stack = [[value, base]];
    while (stack.length) {
      const [v, pos] = stack.pop();
      if (Array.isArray(v)) {
        for (let k = v.length - 1; k >= 0; k--) stack.push([v[k], pos + "\u0001i" + k]);
      } else if (isObj(v)) {
        if (isCommitment(v)) found.set(pos, v.$commit);
        else if (!("$commit" in v)) {
          const ks = keysOf(v);
          for (let k = ks.length - 1; k >= 0; k--) stack.push([v[ks[k]], pos + "\u0001k" + ks[k]]);
        }
      } else if (typeof v === "string") {
        const [kind, parsed] = classify(v);
        if (kind === WALKABLE) stack.push([parsed, pos + "\u0001t"]);
      }
    }
    return found;
  }

  // The digests of every commitment in `value` (positions not needed): what a continuation
  // inherits (section 12.5). Memoised per object, since a conversation's runs hand down the
  // same pieces run after run.
  const DIGESTS = new WeakMap();
  const NONE = new Set();
  function commitmentDigests(value, spend) {
    const out = new Set();
    const stack = [value];
    while (stack.length) {
      const v = stack.pop();
      if (v === null || typeof v !== "object") {
        if (typeof v === "string") {
          const [kind, parsed] = classify(v);
          if (kind === WALKABLE) stack.push(parsed);
        }
        continue;
      }
      let got = DIGESTS.get(v);
      if (got === undefined) {
        if (Array.isArray(v) || !("$commit" in v)) {
          const items = Array.isArray(v) ? v : keysOf(v).map((k) => v[k]);
          if (items.length > 64) {
            // a big container: memoise its own set (its items are memoised in turn)
            got = new Set();
            for (const item of items) for (const d of commitmentDigests(item, spend)) got.add(d);
          } else {
            for (const item of items) stack.push(item);
            continue;
          }
        } else got = isCommitment(v) ? new Set([v.$commit]) : NONE;
        DIGESTS.set(v, got);
      }
      spend(got.size);
      for (const d of got) out.add(d);
    }
    return out;
  }

  class Redaction {
    constructor() {
      this.policy = null;
      this.seen = new Set();
      // the commitments of the initial state (a continuation's): a thunk, computed the first
      // time a commitment is met twice (most runs never ask)
      this.inheritedOf = null;
      this.inheritedSet = null;
    }
    inherited(d, seq) {
      if (this.inheritedOf === null) return false;
      if (this.inheritedSet === null) this.inheritedSet = this.inheritedOf(seq);
      return this.inheritedSet.has(d);
    }
    // Walk one scanned value in document order; report commitment, then reuse, then leak
    // (section 12.5). inPlace: a thunk giving the positions of the commitments the value
    // repeats in place (computed only when needed).
    scan(value, seq, inPlace) {
      let malformed = false, reuse = false, leak = "", beyond = null;
      let placed = null;
      const stack = [[value, "", false]];
      const found = [];
      while (stack.length) {
        const [v, pos, reported] = stack.pop(); // reported: inside a value already reported
        if (Array.isArray(v)) {
          for (let k = v.length - 1; k >= 0; k--) stack.push([v[k], pos + "\u0001i" + k, reported]);
        } else if (isObj(v)) {
          if ("$commit" in v) {
            if (!isCommitment(v)) { malformed = true; continue; }
            found.push([v.$commit, pos]);
            continue;
          }
          const ks = keysOf(v);
          const items = [];
          for (const name of ks) {
            const item = v[name];
            let hit = false;
            if (this.policy !== null && !reported && !beyond) {
              try {
                hit = this.policy.matches(name);
              } catch (e) {
                if (!(e instanceof Undecidable)) throw e;
                beyond = `matching the policy's patterns used up this page's budget at member ${JSON.stringify(name.slice(0, 80))}`;
              }
            }
            const leaked = hit && !isCommitment(item);
            if (leaked) leak = leak || `member ${JSON.stringify(name)} holds no commitment`;
            items.push([item, pos + "\u0001k" + name, reported || leaked]);
          }
          for (let k = items.length - 1; k >= 0; k--) stack.push(items[k]);
        } else if (typeof v === "string") {
          const [kind, parsed] = classify(v);
          if (kind === WALKABLE) stack.push([parsed, pos + "\u0001t", reported]);
          else if (kind === OPAQUE && this.policy !== null && !reported) {
            leak = leak || "JSON text the boundary commits whole";
          }
        }
      }
      if (malformed) throw new Failure("commitment", seq, "an object with $commit that is not a commitment");
      for (const [d, pos] of found) {
        if (this.seen.has(d) && !this.inherited(d, seq)) {
          if (placed === null) placed = inPlace ? inPlace() : new Map();
          if (placed.get(pos) !== d) reuse = true;
        }
        this.seen.add(d);
      }
      if (reuse) throw new Failure("commitment-reuse", seq, "a commitment written a second time");
      if (leak) throw new Failure("leak", seq, leak);
      if (beyond) throw undecided(seq, beyond); // RE2 is linear and has no such budget
    }
  }

  Object.assign(AF._, { translate, search, runProg, Undecidable, Refused, Matcher, checkPolicy, isCommitment, commitmentPositions, commitmentDigests, Redaction });
})(globalThis);
