/* agentfootprint report verifier, part 3 of 3 (after verifier.js and verifier_patterns.js):
 * bundle framing (section 13.1, 13.2), one run (sections 5-9), seals (section 9.2 step 4,
 * docs/seals.md), inclusion proofs (section 13.4, docs/merkle.md) and whole-file verdicts
 * (section 9.5). Defines AFVerify.verifyBundle(bytes, {keys}).
 */
"use strict";
(function (G) {
  const AF = G.AFVerify;
  const {
    MAX_SAFE_INT, MAX_BODY_BYTES, MAX_BUNDLE_LINE_BYTES, MAX_LINE_DEPTH, Failure, undecided,
    ENC, DEC, hex, unhex, concat, bytesEqual, isHex, b64encode, b64decodeCanonical, B64, B64URL,
    sha256, H, JFloat, keysOf, newObj, setMember, isObj, isInt, isStr, hasOwn, JSONError,
    parseJSON, hasLoneSurrogate, canon, parseBody, refuseKeys, edVerify, checkPolicy,
    isCommitment, commitmentPositions, commitmentDigests, Redaction, classify,
  } = AF._;

  const FORMAT_V1 = "agentfootprint/log/v1", FORMAT_V2 = "agentfootprint/log/v2";
  const FORMAT_V3 = "agentfootprint/log/v3", FORMAT_V4 = "agentfootprint/log/v4";
  const FORMAT_V5 = "agentfootprint/log/v5", FORMAT_V6 = "agentfootprint/log/v6";
  const LOG_FORMATS = [FORMAT_V1, FORMAT_V2, FORMAT_V3, FORMAT_V4, FORMAT_V5, FORMAT_V6];
  const MARKED = [FORMAT_V2, FORMAT_V3, FORMAT_V4, FORMAT_V5, FORMAT_V6]; // 5.6: call markers
  const WRITE_AHEAD = [FORMAT_V3, FORMAT_V4, FORMAT_V5, FORMAT_V6]; // section 6: receipts ahead
  const SEALED = [FORMAT_V4, FORMAT_V5, FORMAT_V6]; // 5.8: run.open.seal and run.seal
  const PAUSES = [FORMAT_V5, FORMAT_V6]; // 5.9: the paused outcome, resumes and abandons
  const READS = [FORMAT_V6]; // 5.10: reads on every write
  const PENDING_REQUIRED = ["request_id", "kind", "tool_call_id", "tool", "question"];
  const PENDING_OPTIONAL = { fields: "object", context: "object", service: "string" };
  const TYPES = ["run.open", "write", "receipt", "event", "commit", "run.close", "run.seal"];
  const PHASE = { receipt: 1, event: 2, write: 3 };
  const KINDS = [
    ["system", "system_pieces", "piece/system"],
    ["messages", "history", "piece/message"],
    ["tools", "tool_schemas", "piece/tool"],
  ];
  const KNOWN_BUNDLE_VERSION = 2;
  const PREFIX = ENC.encode('{"agentfootprint_bundle":');
  const VALID = "VALID_UNSIGNED", UNSEALED = "UNSEALED", SIGNED = "VALID";
  const MAX_CHECKPOINT_BYTES = 262144, MAX_PROOF_HASHES = 54;
  const MATCH_BUDGET = 200e6;
  const WORK_BUDGET = 1e9; // about 2,800 iterations of one conversation

  const structure = (seq, why) => new Failure("structure", seq, why);
  // strings by Unicode code point (JS compares UTF-16 code units: U+FFFF < U+1F600 here)
  const codePointCompare = (a, b) => {
    const x = Array.from(a), y = Array.from(b);
    for (let k = 0; k < Math.min(x.length, y.length); k++) {
      const d = x[k].codePointAt(0) - y[k].codePointAt(0);
      if (d !== 0) return d;
    }
    return x.length - y.length;
  };
  const jtype = (x) => (x === null ? "null" : Array.isArray(x) ? "array" : x instanceof JFloat ? "number" : typeof x === "object" ? "object" : typeof x);
  // UTF-8 length of a JS string (a lone surrogate counts 3, as Python's surrogatepass)
  const utf8len = (s) => {
    let n = 0;
    for (let k = 0; k < s.length; k++) {
      const c = s.charCodeAt(k);
      if (c < 0x80) n += 1;
      else if (c < 0x800) n += 2;
      else if (c >= 0xd800 && c <= 0xdbff && k + 1 < s.length && (s.charCodeAt(k + 1) & 0xfc00) === 0xdc00) { n += 4; k++; }
      else n += 3;
    }
    return n;
  };

  // --- shapes (section 13.1) -------------------------------------------------------------
  function exact(obj, members) {
    if (!isObj(obj)) return false;
    const ks = keysOf(obj);
    const want = Object.keys(members);
    if (ks.length !== want.length) return false;
    for (const k of want) if (!(k in obj) || !members[k](obj[k])) return false;
    return true;
  }
  const orNull = (ok) => (x) => x === null || ok(x);
  const nonneg = (x) => isInt(x) && x >= 0;
  const isBool = (x) => typeof x === "boolean";
  const MANIFEST = {
    agentfootprint_bundle: (x) => x === 1,
    format: (x) => x === FORMAT_V1, canon: (x) => x === "RFC8785", hash: (x) => x === "SHA-256",
    library: isStr, runs: Array.isArray, policies: isObj,
    counts: (x) => exact(x, { runs: nonneg, events: nonneg }),
  };
  const ENTRY = {
    run_id: isStr, conversation_id: orNull(isStr), parent_run_id: orNull(isStr),
    opened_at: isInt, events: (x) => isInt(x) && x >= 1, last_type: isStr, head: isHex,
    policy_digest: orNull(isStr), requested: isBool,
  };
  const EVENT_LINE = { run: isStr, seq: isInt, type: isStr, ts: isInt, body: isStr, event_hash: isHex, chain_hash: isHex };
  const TRAILER = { end: (x) => x === true, events: isInt, sha256: isHex };
  const MANIFEST_V2 = Object.assign({}, MANIFEST, {
    agentfootprint_bundle: (x) => x === 2,
    checkpoint: (x) => isStr(x) && utf8len(x) <= MAX_CHECKPOINT_BYTES,
  });
  const INCLUSION = {
    leaf: nonneg,
    proof: (x) => Array.isArray(x) && x.length <= MAX_PROOF_HASHES && x.every(isHex),
  };
  const ENTRY_V2 = Object.assign({}, ENTRY, { inclusion: orNull((x) => exact(x, INCLUSION)) });
  const SHAPES = { 1: [MANIFEST, ENTRY], 2: [MANIFEST_V2, ENTRY_V2] };

  // A line as section 13.1 says, or null. A line nested beyond MAX_LINE_DEPTH: undecided.
  function readLine(bytes, shape) {
    let text;
    try { text = DEC.decode(bytes); } catch (e) { return null; }
    let got;
    try {
      got = parseJSON(text, "bundle", MAX_LINE_DEPTH);
    } catch (e) {
      if (e instanceof JSONError) {
        if (e.deep) throw undecided(null, `a bundle line nested over ${MAX_LINE_DEPTH} levels`);
        return null;
      }
      throw e;
    }
    if (got.dup || got.lone || !isObj(got.value)) return null;
    return shape === null || exact(got.value, shape) ? got.value : null;
  }

  function startsWith(bytes, prefix) {
    if (bytes.length < prefix.length) return false;
    for (let k = 0; k < prefix.length; k++) if (bytes[k] !== prefix[k]) return false;
    return true;
  }

  // Section 9.3: the parent a run's first row names, or null.
  function parentNamed(row) {
    if (row.type !== "run.open" || !isStr(row.body)) return null;
    let v;
    try { v = parseJSON(row.body, "value", MAX_LINE_DEPTH).value; } catch (e) { return null; }
    const parent = isObj(v) ? v.parent : undefined;
    return isObj(parent) && isStr(parent.run_id) ? parent.run_id : null;
  }

  // --- the bundle (section 13.2): framing, else Failure(bundle) --------------------------
  async function frame(data) {
    const bad = (why) => new Failure("bundle", null, why);
    // section 4 "What a file is" (as the command line reads a path): anything but a bundle
    // is not a log (usage), except a database, which this page does not read
    if (!startsWith(data, PREFIX)) {
      if (startsWith(data, ENC.encode("SQLite format 3\0"))) {
        throw undecided(null, "an SQLite database, not an export bundle (this page reads bundles only)");
      }
      throw new Failure("usage", null, data.length ? "not an export bundle or a database, so not a log" : "an empty file, not a log");
    }
    {
      // every version begins with the prefix (13.1); a newer one is not judged
      let k = PREFIX.length, neg = false;
      if (data[k] === 45) { neg = true; k++; }
      const s = k;
      while (k < data.length && data[k] >= 48 && data[k] <= 57) k++;
      const digits = String.fromCharCode(...data.subarray(s, Math.min(k, s + 40)));
      const next = data[k];
      const okDigits = digits.length > 0 && (digits === "0" || digits[0] !== "0");
      const followed = !(next === 46 || next === 101 || next === 69 || (next >= 48 && next <= 57));
      if (okDigits && followed && !neg && k - s <= 16) {
        const version = Number(digits);
        if (version > KNOWN_BUNDLE_VERSION && version <= MAX_SAFE_INT) {
          throw new Failure("usage", null, `bundle version ${version}, newer than ${KNOWN_BUNDLE_VERSION}`);
        }
      }
    }
    const starts = [0];
    for (let k = 0; k < data.length; k++) if (data[k] === 10) starts.push(k + 1);
    // lines: data[starts[j] .. starts[j+1]-1) (without their \n); the last piece follows
    // the last \n
    const nl = starts.length; // number of pieces of data.split("\n")
    for (let j = 0; j < nl; j++) {
      const end = j + 1 < nl ? starts[j + 1] - 1 : data.length;
      if (end - starts[j] > MAX_BUNDLE_LINE_BYTES) throw bad(`a line longer than ${MAX_BUNDLE_LINE_BYTES} bytes`);
    }
    if (data[data.length - 1] !== 10 || nl < 3) {
      throw bad("the file does not end with a newline after a manifest and a trailer");
    }
    const nlines = nl - 1;
    const line = (j) => data.subarray(starts[j], starts[j + 1] - 1);
    const trailer = readLine(line(nlines - 1), TRAILER);
    if (trailer === null) throw bad("the last line is not a trailer");
    if (hex(await sha256(data.subarray(0, starts[nlines - 1]))) !== trailer.sha256) {
      throw bad("the SHA-256 of the bytes before the trailer differs from its sha256");
    }
    const manifest = readLine(line(0), null);
    const version = manifest === null ? undefined : manifest.agentfootprint_bundle;
    if (!(isInt(version) && (version === 1 || version === 2))) {
      throw bad("the manifest is not a JSON object of bundle version 1 or 2");
    }
    const [shape, entryShape] = SHAPES[version];
    const vprefix = concat(PREFIX, ENC.encode(String(version)));
    if (!exact(manifest, shape) || !startsWith(line(0), vprefix)) {
      throw bad(`the manifest is not as in 13.1 for version ${version}`);
    }
    if (!manifest.runs.every((e) => exact(e, entryShape))) {
      throw bad(`a run entry lacks, adds or mistypes a member (version ${version})`);
    }
    const listed = manifest.runs.map((e) => e.run_id);
    if (new Set(listed).size !== listed.length || manifest.counts.runs !== listed.length) {
      throw bad("a run listed twice, or counts.runs is not the number of entries");
    }
    const runs = new Map(); // run id -> rows
    const parentsOfStarted = new Set();
    let current = null;
    for (let j = 1; j < nlines - 1; j++) {
      const ev = readLine(line(j), EVENT_LINE);
      if (ev === null) throw bad("an event line that is not as in 13.1");
      const run = ev.run;
      if (current === null || run !== current) {
        if (runs.has(run)) throw bad(`the lines of run ${run} are not contiguous`);
        if (runs.size >= listed.length || listed[runs.size] !== run) {
          throw bad(`run ${run} is not the next run the manifest lists`);
        }
        if (parentsOfStarted.has(run)) throw bad(`run ${run} comes after a run it is the parent of`);
        parentsOfStarted.add(parentNamed({ type: ev.type, body: ev.body }));
        runs.set(run, []);
        current = run;
      }
      runs.get(run).push({ run, seq: ev.seq, type: ev.type, ts: ev.ts, body: ev.body, e: ev.event_hash, c: ev.chain_hash });
    }
    for (const entry of manifest.runs) {
      const got = runs.get(entry.run_id);
      if (!got || got.length !== entry.events || got[got.length - 1].c !== entry.head) {
        throw bad(`run ${entry.run_id}: no lines, or another count or head`);
      }
    }
    if (!(nlines - 2 === trailer.events && trailer.events === manifest.counts.events)) {
      throw bad("the number of event lines differs from the trailer's or counts.events");
    }
    const out = { runs, entries: manifest.runs, version, checkpoint: null, inclusion: new Map() };
    if (version === 2) {
      out.checkpoint = manifest.checkpoint;
      for (const e of out.entries) out.inclusion.set(e.run_id, e.inclusion);
    }
    return out;
  }

  // --- state and the fold (section 7) ----------------------------------------------------
  function applyWrite(state, path, verb, value) {
    const old = hasOwn(state, path) ? state[path] : undefined;
    if (verb === "set") setMember(state, path, value);
    else if (verb === "append" && Array.isArray(old) && Array.isArray(value)) setMember(state, path, old.concat(value));
    else if (verb === "merge" && isObj(old) && isObj(value)) {
      const merged = newObj();
      for (const k of keysOf(old)) setMember(merged, k, old[k]);
      for (const k of keysOf(value)) setMember(merged, k, value[k]);
      setMember(state, path, merged);
    } else if (verb === "delete" && hasOwn(state, path)) deleteMember(state, path);
    else return `${JSON.stringify(verb)} of ${JSON.stringify(path)} cannot be applied to ${old === undefined ? "nothing" : jtype(old)}`;
    return null;
  }
  function deleteMember(o, k) {
    delete o[k];
    if (o[AF._.KEYS]) o[AF._.KEYS] = o[AF._.KEYS].filter((x) => x !== k);
  }
  function copyObj(o) {
    const out = newObj();
    for (const k of keysOf(o)) setMember(out, k, o[k]);
    return out;
  }

  // --- requests (section 8) ------------------------------------------------------------
  function projectionVersion(opened) {
    if (!("projection" in opened)) {
      if (opened.format === FORMAT_V1) return 1;
      throw structure(0, "format v2 requires a projection member");
    }
    const p = opened.projection;
    if (!isObj(p) || !isInt(p.version) || ![1, 2, 3, 4].includes(p.version)) {
      throw structure(0, "projection names no known projection");
    }
    return p.version;
  }
  // projection v2's served_messages; v4's served_system has its rules, with "system"
  // slices of system_pieces and "piece" segments
  function servedMessages(history, segments, sliced = "history", single = "message") {
    if (!Array.isArray(segments)) return null;
    let out = [];
    let lastEnd = 0;
    for (const seg of segments) {
      if (!isObj(seg) || keysOf(seg).length !== 1) return null;
      if (hasOwn(seg, single)) {
        if (!isObj(seg[single])) return null;
        out.push(seg[single]);
        continue;
      }
      if (!hasOwn(seg, sliced)) return null;
      const bounds = seg[sliced];
      if (!Array.isArray(bounds) || bounds.length !== 2) return null;
      let [start, end] = bounds;
      if (end === null) end = history.length;
      if (!isInt(start) || !isInt(end) || !(0 <= start && start <= end && end <= history.length)) return null;
      if (start < lastEnd) return null;
      out = out.concat(history.slice(start, end));
      lastEnd = end;
    }
    return out;
  }
  function servedTools(schemas, names) {
    if (!Array.isArray(names) || !names.every(isStr) || new Set(names).size < names.length) return null;
    if (!schemas.every((t) => isObj(t) && isStr(t.name))) return null;
    const byName = new Map();
    for (const t of schemas) byName.set(t.name, t);
    if (byName.size < schemas.length || names.some((n) => !byName.has(n))) return null;
    return names.map((n) => byName.get(n));
  }
  function servedSystem(pieces, segments) {
    return servedMessages(pieces, segments, "system", "piece");
  }
  // projection v4's served_results: each named tool result of the served messages with its
  // content replaced (a new object), each named exactly once, or null
  function servedResults(messages, replacements) {
    if (!Array.isArray(replacements)) return null;
    const texts = new Map();
    for (const r of replacements) {
      if (!isObj(r)) return null;
      const ks = keysOf(r);
      if (ks.length !== 2 || !hasOwn(r, "tool_call_id") || !hasOwn(r, "content")) return null;
      if (!isStr(r.tool_call_id) || !isStr(r.content) || texts.has(r.tool_call_id)) return null;
      texts.set(r.tool_call_id, r.content);
    }
    const found = new Map();
    const out = messages.map((m) => {
      if (!isObj(m) || !hasOwn(m, "role") || m.role !== "tool" || !hasOwn(m, "tool_call_id")) return m;
      const id = m.tool_call_id;
      if (!isStr(id) || !texts.has(id)) return m;
      found.set(id, (found.get(id) || 0) + 1);
      const copy = newObj();
      for (const k of keysOf(m)) setMember(copy, k, m[k]);
      setMember(copy, "content", texts.get(id));
      return copy;
    });
    for (const id of texts.keys()) if (found.get(id) !== 1) return null;
    return out;
  }
  function cacheMarkers(markers, served) {
    if (!isObj(markers)) return false;
    const ks = keysOf(markers);
    if (ks.length !== 3 || !["system", "tools", "messages"].every((k) => k in markers)) return false;
    let total = 0;
    for (const kind of ks) {
      const idx = markers[kind];
      if (!Array.isArray(idx) || !idx.every(isInt)) return false;
      for (let k = 1; k < idx.length; k++) if (idx[k] <= idx[k - 1]) return false;
      if (idx.some((i) => !(0 <= i && i < served[kind].length))) return false;
      total += idx.length;
    }
    return total <= 4;
  }

  // Piece digests, each computed once per (tag, piece): by identity for objects, by
  // canonical text for the rest (the served pieces of a run are the same objects call after
  // call, so a long conversation hashes each message once).
  class PieceHasher {
    constructor() {
      this.byObj = new Map();
      this.byText = new Map();
      this.last = new Map(); // served array -> its digests, per tag (arrays are never mutated)
    }
    // the memoised digest, or undefined (then digest() computes it)
    known(tag, piece) {
      if (piece !== null && typeof piece === "object") {
        const per = this.byObj.get(piece);
        return per ? per[tag] : undefined;
      }
      return undefined;
    }
    async digest(tag, piece) {
      const memo = piece !== null && typeof piece === "object" ? this.byObj : null;
      let per = memo ? memo.get(piece) : undefined;
      if (per && per[tag]) return per[tag];
      const text = canon(piece);
      const key = tag + "\0" + text;
      let d = this.byText.get(key);
      if (d === undefined) {
        d = hex(await H(tag, text));
        if (!memo) this.byText.set(key, d);
      }
      if (memo) {
        if (!per) { per = {}; memo.set(piece, per); }
        per[tag] = d;
      }
      return d;
    }
  }

  const EMPTY = Object.freeze([]); // one empty list, so that unchanged requests are seen as such
  // Projection v1 to v4 (section 8): model, params, the served pieces and their digests.
  async function buildRequest(state, seq, version, hasher, spend) {
    if (!hasOwn(state, "model")) throw new Failure("receipt", seq, "no model in state");
    const model = state.model, params = hasOwn(state, "params") ? state.params : newObj();
    if (!isStr(model) || !isObj(params)) {
      throw new Failure("receipt", seq, "state key model is not a string or params not an object");
    }
    const served = {};
    for (const [kind, key] of KINDS) {
      const pieces = hasOwn(state, key) ? state[key] : EMPTY;
      if (!Array.isArray(pieces)) throw new Failure("receipt", seq, `state key ${key} is ${jtype(pieces)}, not array`);
      served[kind] = pieces;
    }
    const edits = [];
    if (version >= 2) edits.push(["messages", "served_messages", servedMessages], ["tools", "served_tools", servedTools]);
    // v4, in this order after v2's: results on the messages served_messages chose, then system
    if (version === 4) edits.push(["messages", "served_results", servedResults], ["system", "served_system", servedSystem]);
    for (const [kind, key, edit] of edits) {
      if (hasOwn(state, key)) {
        const edited = edit(served[kind], state[key]);
        if (edited === null) throw new Failure("receipt", seq, `state key ${key} does not apply`);
        served[kind] = edited;
      }
    }
    let markers = null;
    if (version >= 3) { // checked against the lists as served, after every edit
      markers = hasOwn(state, "cache_markers") ? state.cache_markers : { system: [], tools: [], messages: [] };
      if (!cacheMarkers(markers, served)) throw new Failure("receipt", seq, "state key cache_markers does not apply");
    }
    const digests = {};
    for (const [kind, , tag] of KINDS) {
      const pieces = served[kind];
      if (!pieces.length) { digests[kind] = EMPTY; continue; }
      const memo = hasher.last.get(tag);
      if (memo && memo[0] === pieces) { digests[kind] = memo[1]; continue; } // unchanged since
      spend(pieces.length + 1);
      const list = new Array(pieces.length);
      try {
        for (let k = 0; k < pieces.length; k++) {
          const d = hasher.known(tag, pieces[k]);
          list[k] = d !== undefined ? d : await hasher.digest(tag, pieces[k]);
        }
      } catch (e) {
        if (e instanceof JSONError) throw new Failure("receipt", seq, `a served piece is not I-JSON: ${e.message}`);
        throw e;
      }
      hasher.last.set(tag, [pieces, list]);
      digests[kind] = list;
    }
    return { model, params, served, digests, markers };
  }

  function eventEnvelope(run, seq, type, ts, body) {
    return '{"body":' + body + ',"run":' + canon(run) + ',"seq":' + canon(seq) + ',"ts":' + canon(ts) + ',"type":' + canon(type) + "}";
  }

  // Section 9.2 step 2.1, in its order.
  function rowProblem(row, runId, expect) {
    if (!isInt(row.seq)) return `seq ${row.seq} is not an integer`;
    if (row.run !== runId || !isStr(row.run)) return "the row belongs to another run";
    if (row.seq !== expect) return `seq ${row.seq}: a row is ${row.seq > expect ? "missing" : "repeated"}`;
    if (!isStr(row.type) || !TYPES.includes(row.type)) return `unknown type ${JSON.stringify(row.type)}`;
    if (!isInt(row.ts) || Math.abs(row.ts) > MAX_SAFE_INT) return `ts ${row.ts} is not an integer within +-(2^53 - 1)`;
    if (!isStr(row.body) || (row.body.length > MAX_BODY_BYTES / 3 && utf8len(row.body) > MAX_BODY_BYTES)) {
      return "body is not a byte string of at most MAX_BODY_BYTES";
    }
    return null;
  }

  const digestList = (x) => exact(x, { keep: isInt, add: (a) => Array.isArray(a) && a.every(isHex) });
  const RECEIPT = { call: isInt, commit: isInt, model: isStr, params: isObj, request: isHex, system: digestList, messages: digestList, tools: digestList };
  const MARKER = { commit: isInt, writes: isInt, stage: isStr, stage_run: isStr };
  const PARENT = { run_id: isStr, events: isInt, head: isHex };
  // Shape before meaning: every listed member present and of its type (others ignored).
  const has = (body, shape) => Object.keys(shape).every((k) => k in body && shape[k](body[k]));

  // Section 5.9: the paused close's question.
  function pausedClose(pending, written, seq) {
    const allowed = new Set(PENDING_REQUIRED.concat(Object.keys(PENDING_OPTIONAL)));
    if (!isObj(pending) || !keysOf(pending).every((k) => allowed.has(k))) {
      throw structure(seq, "pending is not an object of section 5.9's members");
    }
    if (!PENDING_REQUIRED.every((k) => isStr(pending[k]))) {
      throw structure(seq, "a required member of pending is missing or not a string");
    }
    for (const [name, kind] of Object.entries(PENDING_OPTIONAL)) {
      if (name in pending && !(kind === "object" ? isObj(pending[name]) : isStr(pending[name]))) {
        throw structure(seq, `pending's ${name} is of the wrong type`);
      }
    }
    if (!pending.request_id || !["consent", "input"].includes(pending.kind)) {
      throw structure(seq, "pending's request_id is empty or its kind unknown");
    }
    const fields = "fields" in pending ? pending.fields : newObj();
    if (!keysOf(fields).every((k) => isObj(fields[k]))) throw structure(seq, "a field of pending is not an object");
    if (written === undefined || canon(written) !== canon(pending)) {
      throw structure(seq, "pending differs from the state's");
    }
  }

  // Section 5.9: a resume's commit 0 is the stage resume, setting resume_answer.
  function resumeAnswer(marker, writes, asked, seq) {
    if (marker.stage !== "resume") throw structure(seq, "a resume's first commit is not the stage resume");
    const mine = writes.filter((w) => w.path === "resume_answer");
    if (!mine.length || mine.some((w) => w.verb !== "set")) {
      throw structure(seq, "a resume's first commit does not set resume_answer (set only)");
    }
    const answer = mine[mine.length - 1].value;
    if (isCommitment(answer)) return;
    if (!isObj(answer)) throw structure(seq, "resume_answer is not an object");
    const fields = isObj(asked) ? asked.fields : undefined;
    if (isObj(fields) && !keysOf(answer).every((k) => k in fields)) {
      throw structure(seq, "resume_answer answers a field that was not asked");
    }
  }

  // --- seals (section 9.2 step 4; docs/seals.md sections 2, 3) ---------------------------
  function b64Of(text) {
    // padded, canonical, one alphabet: [bytes, the alphabets its characters show]
    if (!isStr(text) || text.length % 4) return null;
    const shows = new Set();
    if (/[+/]/.test(text)) shows.add("standard");
    if (/[-_]/.test(text)) shows.add("url");
    if (shows.size > 1) return null;
    const raw = b64decodeCanonical(text, shows.has("url") ? B64URL : B64);
    return raw === null ? null : [raw, shows];
  }

  function envelopeOf(text) {
    if (text.startsWith("\ufeff") || utf8len(text) > 1 << 20) return "the seal starts with a byte order mark or is over 1 MiB";
    let env;
    try { env = parseJSON(text, "strict", 1000).value; } catch (e) {
      if (e instanceof JSONError) return "the seal is not JSON (or names a member twice)";
      throw e;
    }
    if (!(isObj(env) && ["payload", "payloadType", "signatures"].every((k) => k in env))) return "the seal is not a DSSE envelope";
    if (keysOf(env).length !== 3) return "the envelope has a member DSSE does not define";
    if (!isStr(env.payloadType)) return "the payload type is not a string";
    const sigs = env.signatures;
    if (!Array.isArray(sigs) || !sigs.length || !sigs.every(isObj)) return "the envelope's signatures are not a non-empty list of objects";
    const payload = b64Of(env.payload);
    if (payload === null) return "the payload is not canonical padded base64";
    const shows = new Set(payload[1]);
    const signatures = [];
    for (const sig of sigs) {
      if (!keysOf(sig).every((k) => k === "keyid" || k === "sig") || !("sig" in sig)) return "a signature is not {keyid?, sig}";
      const keyid = "keyid" in sig ? sig.keyid : "";
      const decoded = b64Of(sig.sig);
      if (!isStr(keyid) || decoded === null || !decoded[0].length) return "a signature's keyid is not a string, or its sig not canonical base64";
      for (const s of decoded[1]) shows.add(s);
      signatures.push([keyid, decoded[0]]);
    }
    if (shows.size > 1) return "the envelope mixes the standard and URL-safe base64 alphabets";
    return { env, payload: payload[0], signatures };
  }

  function sealProblem(parsed, signer, R, head, facts) {
    const { env, payload, signatures } = parsed;
    if (env.payloadType !== "application/vnd.in-toto+json") return "the payload type is not in-toto";
    let text, statement;
    try {
      text = DEC.decode(payload);
      statement = parseJSON(text, "strict", 1000).value;
    } catch (e) {
      return "the payload is not JSON";
    }
    let again;
    try { again = canon(statement); } catch (e) { return "the statement is not canonical"; }
    if (hasLoneSurrogate(again) || again !== text) return "the statement is not canonical";
    const expected = {
      _type: "https://in-toto.io/Statement/v1",
      subject: [{ name: `run:${R}`, digest: { sha256: head } }],
      predicateType: "https://agentfootprint.dev/seal/v1",
      predicate: facts,
    };
    if (again !== canon(expected)) return "the statement does not attest this run's facts";
    if (!signatures.some(([k]) => k === signer)) return "no signature carries the keyid run.open names";
    return null;
  }

  // [why it fails or null, the key ids of pinned keys that signed]
  async function sealSigned(parsed, keys) {
    if (!keys.length) return [null, []];
    const { env, payload, signatures } = parsed;
    const kind = ENC.encode(env.payloadType);
    const message = concat(ENC.encode(`DSSEv1 ${kind.length} `), kind, ENC.encode(` ${payload.length} `), payload);
    const pinned = new Map();
    for (const k of keys) pinned.set(hex(await sha256(k)), k);
    const signed = [];
    for (const [keyid, sig] of signatures) {
      if (keyid) {
        if (!pinned.has(keyid)) continue;
        if (!(await edVerify(pinned.get(keyid), sig, message))) {
          return [`the signature of pinned key ${keyid} does not verify`, []];
        }
        if (!signed.includes(keyid)) signed.push(keyid);
      } else {
        for (const [kid, key] of pinned) {
          if (await edVerify(key, sig, message)) {
            if (!signed.includes(kid)) signed.push(kid);
            break;
          }
        }
      }
    }
    return [null, signed];
  }

  // --- checkpoints and inclusion proofs (section 13.4; docs/merkle.md 2, 3, 5) -------------
  const MAX_NOTE_BYTES = 256 * 1024, MAX_NOTE_SIGNATURES = 100;
  // Python's str.isspace(), for names and origin.strip()
  const SPACE = /[\t\n\v\f\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]/;
  const noteName = (name) => name.length > 0 && !name.includes("+") && !SPACE.test(name);
  function pyStrip(s) {
    let a = 0, b = s.length;
    while (a < b && SPACE.test(s[a])) a++;
    while (b > a && SPACE.test(s[b - 1])) b--;
    return s.slice(a, b);
  }

  async function openCheckpoint(noteText, keys) {
    const bad = (why) => new Failure("note/malformed", null, `checkpoint: ${why}`);
    const note = ENC.encode(noteText);
    if (note.length > MAX_NOTE_BYTES) throw bad(`longer than ${MAX_NOTE_BYTES} bytes`);
    const whole = noteText;
    for (let k = 0; k < whole.length; k++) {
      const c = whole.charCodeAt(k);
      if (c < 32 && c !== 10) throw bad("a control character other than newline");
    }
    const split = whole.lastIndexOf("\n\n");
    if (split < 0) throw bad("no blank line before the signatures");
    const text = whole.slice(0, split + 1), block = whole.slice(split + 2);
    if (!block || !block.endsWith("\n")) throw bad("no signature line, or a signature block not ending in a newline");
    const lines = block.slice(0, -1).split("\n");
    if (lines.length > MAX_NOTE_SIGNATURES) throw bad(`more than ${MAX_NOTE_SIGNATURES} signature lines`);
    const signatures = [];
    for (const line of lines) {
      const rest = line.startsWith("\u2014 ") ? line.slice(2) : line;
      const sp = rest.indexOf(" ");
      const name = sp < 0 ? rest : rest.slice(0, sp), blob = sp < 0 ? "" : rest.slice(sp + 1);
      const raw = b64decodeCanonical(blob);
      if (!line.startsWith("\u2014 ") || sp < 0 || !noteName(name)) throw bad("a signature line that is not '\u2014 name base64'");
      if (raw === null || raw.length < 5) throw bad("a signature that is not canonical base64 of at least 5 bytes");
      signatures.push([name, raw]);
    }
    const body = text.slice(0, -1).split("\n");
    if (body.length < 3) throw bad("fewer than 3 lines of text");
    const [origin, size, rootLine] = body, extensions = body.slice(3);
    if (!origin || origin !== pyStrip(origin)) throw bad("an empty origin, or one with surrounding spaces");
    if (!/^(?:0|[1-9][0-9]*)$/.test(size) || Number(size) > MAX_SAFE_INT) throw bad("the size is not canonical decimal up to 2^53 - 1");
    const root = b64decodeCanonical(rootLine);
    if (root === null || root.length !== 32) throw bad("the root is not canonical base64 of 32 bytes");
    if (!extensions.every((x) => x.length > 0)) throw bad("an empty extension line");
    return { origin, size: Number(size), root, signed_by: await signedBy(origin, text, signatures, keys) };
  }

  async function signedBy(origin, text, signatures, keys) {
    const pinned = new Map();
    for (const key of keys) {
      const kid = hex((await sha256(concat(ENC.encode(origin), new Uint8Array([10, 1]), key))).subarray(0, 4));
      if (pinned.has(kid) && !bytesEqual(pinned.get(kid), key)) {
        throw new Failure("usage", null, "two pinned keys with the same name and key ID");
      }
      if (!pinned.has(kid)) pinned.set(kid, key);
    }
    const signed = [];
    const message = ENC.encode(text);
    for (const [name, raw] of signatures) {
      const key = name === origin ? pinned.get(hex(raw.subarray(0, 4))) : undefined;
      if (key === undefined) continue; // another key's line: ignored
      if (raw.length !== 68 || !(await edVerify(key, raw.subarray(4), message))) {
        throw new Failure("note/signature", null, "checkpoint: a pinned key's signature does not verify");
      }
      const kidHex = hex(await sha256(key));
      if (!signed.includes(kidHex)) signed.push(kidHex);
    }
    return signed;
  }

  async function node(a, b) {
    return sha256(concat(new Uint8Array([1]), a, b));
  }
  async function leafHash(runId, res) {
    const data = concat(ENC.encode("afp/v1/runleaf\0"), ENC.encode(canon({
      v: 1, run: runId, events: res.events, head: res.head, seal: hex(await sha256(ENC.encode(res.seal))),
    })));
    return sha256(concat(new Uint8Array([0]), data));
  }
  // docs/merkle.md section 3: the checks before hashing, then RFC 9162 2.1.3.2 (BigInt:
  // indexes reach 2^53 - 1, beyond JS's 32-bit bit operations).
  async function inclusionHolds(leaf, index, size, proof, root) {
    if (!(isInt(index) && isInt(size) && 0 <= index && index < size && size <= MAX_SAFE_INT)) return false;
    if (leaf.length !== 32 || root.length !== 32 || proof.some((p) => p.length !== 32)) return false;
    let fn = BigInt(index), sn = BigInt(size - 1);
    const x = fn ^ sn;
    const inner = x === 0n ? 0 : x.toString(2).length;
    const ones = (fn >> BigInt(inner)).toString(2).split("").filter((c) => c === "1").length;
    if (proof.length !== inner + ones) return false;
    let r = leaf;
    for (const p of proof) {
      if (sn === 0n) return false;
      if (fn & 1n || fn === sn) {
        r = await node(p, r);
        while (fn !== 0n && !(fn & 1n)) { fn >>= 1n; sn >>= 1n; }
      } else r = await node(r, p);
      fn >>= 1n; sn >>= 1n;
    }
    return sn === 0n && bytesEqual(r, root);
  }

  class InclusionJudge {
    constructor(source) { this.source = source; this.reliedOn = false; this.opened = null; }
    async open(keys) {
      try {
        this.opened = await openCheckpoint(this.source.checkpoint, keys);
      } catch (f) {
        if (!(f instanceof Failure) || f.code === "usage") throw f;
        this.opened = f;
      }
    }
    async judge(run, res) {
      const claim = this.source.inclusion.get(run);
      if (!res.sealed) {
        if (claim !== null) throw new Failure("inclusion", null, "a run without a seal has an inclusion proof");
        return null;
      }
      if (claim === null) throw new Failure("inclusion", null, "a sealed run without an inclusion proof");
      this.reliedOn = true;
      const cp = this.opened;
      if (cp instanceof Failure) throw new Failure(cp.code, null, cp.reason);
      const proof = claim.proof.map(unhex);
      if (!(await inclusionHolds(await leafHash(run, res), claim.leaf, cp.size, proof, cp.root))) {
        throw new Failure("merkle/inclusion", null, `the proof of leaf ${claim.leaf} in a tree of ${cp.size} does not lead to the checkpoint's root`);
      }
      return { leaf: claim.leaf, size: cp.size, origin: cp.origin, root: hex(cp.root), signed_by: cp.signed_by };
    }
  }

  // --- one run: sections 7, 8, 9.2, 9.3 ---------------------------------------------------
  class Verifier {
    constructor(source, keys) {
      this.source = source;
      this.keys = keys;
      this.cache = new Map(); // run -> result or Failure
      this.views = new Map(); // run -> RunView
      this.answered = new Map(); // paused run -> [request, Set of runs continuing it]
      this.inclusions = source.checkpoint !== null ? new InclusionJudge(source) : null;
      this.hasher = new PieceHasher();
      this.confirmed = new WeakMap(); // a run's digest list -> the rebuilt list it equals
      this.lastRequest = null;
      this.parentOf = new Map(); // run -> the parent its run.open names (9.3), read once
      // pattern matching work for the whole file (NFA state visits): a crafted bundle cannot
      // make the page run for long; a match it cannot finish within it is undecided
      this.budget = { steps: MATCH_BUDGET };
      // other work a crafted bundle could make grow faster than its size (request digests
      // over long digest lists, inherited commitments), in bytes hashed or compared
      this.work = WORK_BUDGET;
    }

    spend(seq, units, what) {
      this.work -= units;
      if (this.work < 0) throw undecided(seq, `${what} exceed this page's work budget`);
    }

    rows(run, limit) {
      const rows = this.source.runs.get(run) || [];
      return limit === undefined ? rows : rows.slice(0, limit);
    }

    async verify(run) {
      if (!this.cache.has(run)) {
        let got;
        try {
          got = await this.verifyRun(run);
          if (this.inclusions !== null) got.inclusion = await this.inclusions.judge(run, got);
        } catch (f) {
          if (!(f instanceof Failure)) throw f;
          got = f;
        }
        this.cache.set(run, got);
        const view = this.views.get(run);
        if (view) {
          if (got instanceof Failure) Object.assign(view, { code: got.code, seq: got.seq, reason: got.reason });
          else Object.assign(view, { code: got.outcome, seq: null, reason: inclusionText(got.inclusion), inclusion: got.inclusion });
        }
      }
      const got = this.cache.get(run);
      if (got instanceof Failure) throw got;
      return got;
    }

    // Section 9.3 items 3 and 4: ancestry, at seq 0.
    async ancestry(runId, parent, conversation, answers) {
      const bad = (why) => new Failure("ancestry", 0, why);
      const chain = [runId], inChain = new Set(chain);
      let name = parent.run_id;
      while (name !== null) {
        if (inChain.has(name)) throw bad(`the chain of parents comes back to ${name} (a cycle)`);
        const first = this.rows(name, 1);
        if (!first.length) break;
        chain.push(name);
        inChain.add(name);
        if (!this.parentOf.has(name)) this.parentOf.set(name, parentNamed(first[0]));
        name = this.parentOf.get(name);
      }
      for (const ancestor of chain.slice(1).reverse()) {
        try { await this.verify(ancestor); } catch (f) { if (!(f instanceof Failure)) throw f; }
      }
      if (chain.length === 1) throw bad(`the parent ${parent.run_id} is not in the log`);
      let p;
      try {
        p = await this.verify(parent.run_id);
      } catch (f) {
        if (!(f instanceof Failure)) throw f;
        if (f.code === "undecided") throw undecided(0, `its parent ${parent.run_id} is undecided`);
        throw bad(`the parent fails verification: ${f.message}`);
      }
      if (p.conversation_id !== conversation) throw bad("the parent belongs to another conversation");
      if (p.events !== parent.events || p.head !== parent.head) {
        throw bad("the parent's event count or head differs from the recorded ones");
      }
      if (p.close === null || !["answered", "stopped_early", "paused"].includes(p.close.outcome)) {
        throw bad("the parent did not close as answered, stopped_early or paused");
      }
      if (p.close.outcome === "paused") {
        const request = p.close.pending.request_id;
        if (answers === null || answers[1] !== request) {
          throw bad(`a paused parent continued without resuming or abandoning ${request}`);
        }
        if (!this.answered.has(parent.run_id)) this.answered.set(parent.run_id, [request, new Set()]);
        this.answered.get(parent.run_id)[1].add(runId);
      } else if (answers !== null) {
        throw bad(`run.open ${answers[0]} a pause, but the parent did not pause`);
      }
      return p;
    }

    // Section 9.2 for run R.
    async verifyRun(R) {
      const view = {
        run_id: R, parent_run_id: null, conversation_id: null, opened_at: null,
        code: null, seq: null, reason: "", events: [], calls: [], state: null, seal: null, inclusion: null,
      };
      this.views.set(R, view);
      if (!isStr(R)) throw new Failure("rows", null, "run id is not UTF-8 text");
      const rows = this.rows(R);
      if (!rows.length) throw new Failure("rows", null, "no events");
      let head = new Uint8Array(32);
      let state = newObj();
      view.state = state;
      let initial = newObj();
      let lists = { system: [], messages: [], tools: [] };
      let commit = 0, receipts = 0, phase = 0;
      let pending = [];
      let inBatch = false, closed = false, recordReceipt = false;
      let fmt = FORMAT_V1, version = 1, markedCalls = 0, resumes = false;
      const redaction = new Redaction();
      let conversation = null, parentId = null, close = null, openedAt = 0;
      let signer = null, envelope = null, sealSeq = null;
      let closeHead = "", closeEvents = 0, policyDigest = null;
      const wires = [];
      // Event hashes depend on no earlier row: a window of them is computed ahead, in
      // parallel (WebCrypto is asynchronous); they are still judged one row at a time.
      const eventHashes = new Map();
      const ahead = (from) => {
        for (let k = from; k < Math.min(rows.length, from + 256); k++) {
          const r = rows[k];
          if (!eventHashes.has(k) && isStr(r.body) && isInt(r.seq) && isInt(r.ts) && isStr(r.type)) {
            eventHashes.set(k, H("event", ENC.encode(eventEnvelope(R, r.seq, r.type, r.ts, r.body))));
          }
        }
      };
      for (let expect = 0; expect < rows.length; expect++) {
        if (expect % 256 === 0) ahead(expect);
        eventHashes.delete(expect - 1);
        const row = rows[expect];
        const why = rowProblem(row, R, expect);
        if (why) throw new Failure("rows", expect, why);
        const { seq, type, ts, body: raw } = row;
        const entry = { seq, type, ts, body: null, hash: row.e, computed: null, chain: row.c };
        view.events.push(entry);
        const body = parseBody(raw, seq);
        entry.body = body;
        if (!isObj(body)) throw structure(seq, "the body is not an object");
        const e = hex(await eventHashes.get(expect));
        entry.computed = e;
        if (e !== row.e) throw new Failure("hash", seq, "the event hash differs");
        head = await H("chain", concat(head, unhex(e)));
        if (hex(head) !== row.c) throw new Failure("chain", seq, "the chain hash differs");
        let scanned = null, inPlace = null;
        if (seq === 0) {
          if (type !== "run.open") throw structure(0, "the first event is not run.open");
          fmt = body.format;
          if (!LOG_FORMATS.includes(fmt)) throw structure(0, `unknown format ${JSON.stringify(fmt)}`);
          if (body.run_id !== R) throw structure(0, "run.open's run_id is not the row's");
          conversation = body.conversation_id;
          if (!isStr(conversation) || !conversation) throw structure(0, "conversation_id is not a non-empty string");
          view.conversation_id = conversation;
          const parent = "parent" in body ? body.parent : null;
          if (parent !== null && !(isObj(parent) && has(parent, PARENT))) {
            throw structure(0, "parent is not null or an object {run_id, events, head}");
          }
          version = projectionVersion(body);
          const given = ["resumes", "abandons"].filter((k) => k in body);
          let answers = null;
          if (given.length) {
            const value = body[given[0]];
            if (!PAUSES.includes(fmt) || given.length > 1 || parent === null) {
              throw structure(0, "resumes/abandons outside v5 and v6, both, or no parent");
            }
            if (!isStr(value) || !value) throw structure(0, `${given[0]} is not a non-empty string`);
            answers = [given[0], value];
          }
          resumes = answers !== null && answers[0] === "resumes";
          const options = body.options;
          recordReceipt = isObj(options) && options.record_receipt === true;
          if (parent !== null) {
            view.parent_run_id = parent.run_id;
            const p = await this.ancestry(R, parent, conversation, answers);
            state = copyObj(p.state);
            view.state = state;
            lists = { system: p.lists.system, messages: p.lists.messages, tools: p.lists.tools }; // never mutated
            initial = copyObj(p.state);
            const initialState = copyObj(p.state); // state itself is folded on below
            redaction.inheritedOf = (at) => commitmentDigests(initialState, (n) => this.spend(at, n * 64, "the commitments a continuation inherits"));
            parentId = parent.run_id;
          }
          redaction.policy = await checkPolicy(body.policy, body.policy_digest, this.budget);
          policyDigest = "policy_digest" in body ? body.policy_digest : null;
          if ("seal" in body) {
            const seal = body.seal;
            if (!SEALED.includes(fmt) || !exact(seal, { key_id: isHex })) {
              throw structure(0, "a seal member outside v4, or not {key_id: hex}");
            }
            signer = seal.key_id;
            view.seal = { key_id: signer, signed_by: [], checked: false };
          }
          openedAt = ts;
          view.opened_at = ts;
          continue;
        }
        if (envelope !== null) throw structure(seq, "an event after run.seal");
        if (type === "run.seal") {
          if (!SEALED.includes(fmt) || !closed || signer === null) {
            throw structure(seq, "run.seal outside v4, before run.close or unnamed");
          }
          if (!exact(body, { dsse: isStr })) throw structure(seq, "run.seal body is not exactly {dsse: string}");
          envelope = body.dsse;
          sealSeq = seq;
          continue;
        }
        if (closed) throw structure(seq, "an event after run.close");
        if (type === "run.open") throw structure(seq, "a second run.open");
        if (type in PHASE) {
          if (PHASE[type] < phase) throw structure(seq, `${type} out of batch order`);
          phase = PHASE[type];
          inBatch = true;
        }
        if (type === "write") {
          const verb = body.verb;
          if (!has(body, { commit: isInt, path: isStr, verb: isStr })) {
            throw structure(seq, "write: commit, path or verb missing or mistyped");
          }
          const members = verb !== "delete" ? ["commit", "path", "verb", "value"] : ["commit", "path", "verb"];
          let reads = null;
          if (READS.includes(fmt)) { // 5.10: strings in strictly ascending code point order
            reads = body.reads;
            if (!Array.isArray(reads) || !reads.every(isStr)) throw structure(seq, "write: reads missing or not an array of strings");
            for (let k = 1; k < reads.length; k++) {
              if (codePointCompare(reads[k - 1], reads[k]) >= 0) throw structure(seq, "write: reads not in strictly ascending order");
            }
            members.push("reads");
          }
          const ks = keysOf(body);
          if (ks.length !== members.length || !members.every((k) => k in body)) {
            throw structure(seq, "write: members are not exactly commit/path/verb/value");
          }
          if (body.commit !== commit) throw structure(seq, `a write of commit ${body.commit}, not ${commit}`);
          if (!body.path) throw structure(seq, "a write with an empty path");
          const path = body.path;
          pending.push({ seq, path, verb, value: body.value, reads });
          if (verb === "set") {
            const o = newObj();
            setMember(o, path, body.value);
            scanned = o;
            if (hasOwn(state, path)) {
              const old = state[path];
              inPlace = () => { const w = newObj(); setMember(w, path, old); return commitmentPositions(w, ""); };
            }
          } else if (verb === "append" || verb === "merge") {
            scanned = body.value;
          }
        } else if (type === "receipt") {
          if (!has(body, RECEIPT)) throw structure(seq, "receipt: a member missing or of the wrong shape");
          if (MARKED.includes(fmt) && !recordReceipt) throw structure(seq, "a receipt while receipts are off (format v2, v3)");
          await this.receipt(view, body, seq, state, lists, commit, receipts, version);
          receipts++;
        } else if (type === "event") {
          if (!has(body, { name: isStr, payload: isObj })) throw structure(seq, "event: name or payload missing or mistyped");
          scanned = body.payload;
          if (body.name === "agentfootprint.wire.exchange") wires.push(body.payload);
        } else if (type === "commit") {
          const v2call = MARKED.includes(fmt) && "call" in body;
          if (!has(body, MARKER) || (v2call && !isInt(body.call))) throw structure(seq, "commit: a member missing or mistyped");
          if (body.commit !== commit || body.writes !== pending.length) {
            throw structure(seq, `marker ${body.commit}/${body.writes}: expected commit ${commit} with ${pending.length} writes`);
          }
          if (v2call) {
            if (recordReceipt) throw structure(seq, "a call marker while receipts are on");
            if (body.call !== markedCalls) throw structure(seq, `call ${body.call}, expected ${markedCalls}`);
            markedCalls++;
          }
          if (resumes && commit === 0) resumeAnswer(body, pending, hasOwn(state, "pending") ? state.pending : undefined, seq);
          if (READS.includes(fmt)) { // 5.10: each key read existed at the commit, or it makes it
            const written = new Set(pending.map((w) => w.path));
            for (const w of pending) {
              for (const key of w.reads) {
                if (!hasOwn(state, key) && !written.has(key)) throw structure(w.seq, `a write reads ${JSON.stringify(key)}, absent at its commit`);
              }
            }
          }
          for (const w of pending) {
            const problem = applyWrite(state, w.path, w.verb, w.value);
            if (problem) throw new Failure("fold", w.seq, problem);
          }
          pending = [];
          commit++;
          inBatch = false;
          phase = 0;
          if ("error" in body) { scanned = newObj(); setMember(scanned, "error", body.error); }
        } else if (type === "run.close") {
          if (inBatch) throw structure(seq, "run.close inside a commit batch");
          const shape = { outcome: isStr, commits: isInt, receipts: isInt };
          const callsRead = recordReceipt || MARKED.includes(fmt);
          if (callsRead) shape.calls = isInt;
          if (!has(body, shape)) throw structure(seq, "run.close: a member missing or mistyped");
          const outcomes = ["answered", "stopped_early", "failed"];
          if (!(outcomes.includes(body.outcome) || body.outcome === "paused") || (body.outcome === "paused" && !PAUSES.includes(fmt))) {
            throw structure(seq, `unknown outcome ${JSON.stringify(body.outcome)}`);
          }
          if (PAUSES.includes(fmt) && (body.outcome === "paused") !== ("pending" in body)) {
            throw structure(seq, "pending without a pause, or a pause without pending");
          }
          if (body.outcome === "paused") pausedClose(body.pending, hasOwn(state, "pending") ? state.pending : undefined, seq);
          if ("pending" in body && hasOwn(state, "pending")) {
            const old = state.pending;
            inPlace = () => { const w = newObj(); setMember(w, "pending", old); return commitmentPositions(w, ""); };
          }
          if (body.commits !== commit || body.receipts !== receipts) throw structure(seq, "run.close's counts differ from the log");
          if (recordReceipt && body.calls !== receipts) throw new Failure("receipt", seq, "run.close's calls differ from the receipts");
          if (callsRead && !recordReceipt && body.calls !== markedCalls) throw structure(seq, "run.close's calls differ from the call markers");
          closed = true;
          close = body;
          closeHead = hex(head);
          closeEvents = seq + 1;
          const rest = ["outcome", "commits", "receipts", "calls"];
          scanned = newObj();
          for (const k of keysOf(body)) if (!rest.includes(k)) setMember(scanned, k, body[k]);
        }
        if (scanned !== null) redaction.scan(scanned, seq, inPlace);
      }
      // section 6: a v3+ log may end after the receipts written ahead of a call
      if (inBatch && !(WRITE_AHEAD.includes(fmt) && phase === PHASE.receipt)) {
        throw new Failure("truncated", rows.length, `the log ends inside commit ${commit}`);
      }
      let signed = [];
      if (closed && signer !== null) { // section 9.2 step 4: the seal
        if (envelope === null) throw new Failure("seal", closeEvents - 1, "a sealed run closed without run.seal");
        const facts = {
          run_id: R, events: closeEvents, policy_digest: policyDigest, receipts, outcome: close.outcome,
          final_answer_digest: hasOwn(state, "final_answer") ? hex(await H("seal/answer", canon(state.final_answer))) : null,
        };
        if (wires.length) facts.wire_list_digest = hex(await H("seal/wires", canon(wires)));
        const parsed = envelopeOf(envelope);
        if (typeof parsed === "string") throw new Failure("seal", sealSeq, parsed);
        let why = sealProblem(parsed, signer, R, closeHead, facts);
        if (why) throw new Failure("seal", sealSeq, why);
        view.seal.checked = true;
        try {
          [why, signed] = await sealSigned(parsed, this.keys);
        } catch (f) {
          if (f instanceof Failure && f.code === "undecided") throw new Failure("undecided", sealSeq, f.reason);
          throw f;
        }
        if (why) throw new Failure("seal", sealSeq, why);
        view.seal.signed_by = signed;
      }
      const outcome = closed ? (signed.length ? SIGNED : VALID) : UNSEALED;
      return {
        outcome, events: rows.length, head: hex(head), conversation_id: conversation, close, state, lists,
        parent_run_id: parentId, opened_at: openedAt, sealed: envelope !== null,
        seal: envelope !== null ? envelope : "", inclusion: null, initial, redaction,
      };
    }

    async receipt(view, body, seq, state, lists, commit, receipts, version) {
      const bad = (why) => new Failure("receipt", seq, why);
      const call = {
        seq, call: body.call, commit: body.commit, model: body.model, params: body.params,
        served: null, digests: null, recorded: { system: [], messages: [], tools: [] },
        request: { recorded: body.request, computed: null }, ok: false,
      };
      Object.defineProperty(call, "pieces", { enumerable: true, get: () => piecesOf(call) });
      view.calls.push(call);
      if (body.call !== receipts) throw bad(`call ${body.call}, expected ${receipts}`);
      if (body.commit !== commit) throw bad(`the receipt names commit ${body.commit}, not ${commit}`);
      const built = await buildRequest(state, seq, version, this.hasher, (n) => this.spend(seq, n * 8, "the request digests of this run"));
      call.served = built.served;
      call.digests = built.digests;
      for (const [kind] of KINDS) {
        const { keep, add } = body[kind];
        if (!(0 <= keep && keep <= lists[kind].length)) throw bad(`${kind}: keep ${keep} out of range`);
        // lists are never mutated: an unchanged list is shared, not copied
        const expanded = keep === lists[kind].length && !add.length ? lists[kind] : lists[kind].slice(0, keep).concat(add);
        call.recorded[kind] = expanded;
        const rebuilt = built.digests[kind];
        if (this.confirmed.get(expanded) !== rebuilt) { // else: found equal at an earlier call
          this.spend(seq, expanded.length * 8, "the request digests of this run");
          const n = Math.min(expanded.length, rebuilt.length);
          for (let k = 0; k < n; k++) {
            if (expanded[k] !== rebuilt[k]) throw bad(`${kind}[${k}]: the digest differs from the rebuilt piece`);
          }
          if (expanded.length !== rebuilt.length) throw bad(`${kind}: ${expanded.length} digests for ${rebuilt.length} pieces`);
          this.confirmed.set(expanded, rebuilt);
        }
        lists[kind] = expanded;
      }
      if (canon(body.model) !== canon(built.model) || canon(body.params) !== canon(built.params)) {
        throw bad("model or params differ from the projected ones");
      }
      // canon(doc) written out (its members in JCS order): the digest lists are hex strings,
      // and a long conversation's lists are long
      const list = (l) => (l.length ? '["' + l.join('","') + '"]' : "[]");
      const rest = canon(built.model) + "\0" + canon(built.params) + "\0" + (built.markers !== null ? canon(built.markers) : "") + "\0" + version;
      const last = this.lastRequest;
      const { system, messages, tools } = built.digests;
      if (last && last.system === system && last.messages === messages && last.tools === tools && last.rest === rest) {
        call.request.computed = last.digest; // the same request as the call before
      } else {
        const doc = '{"messages":' + list(messages) + ',"model":' + canon(built.model) +
          ',"params":' + canon(built.params) +
          (built.markers !== null ? ',"prompt_cache":' + canon(built.markers) : "") +
          ',"system":' + list(system) + ',"tools":' + list(tools) +
          ',"v":' + (version >= 3 ? 2 : 1) + "}";
        this.spend(seq, doc.length, "the request digests of this run");
        call.request.computed = hex(await H("request", doc));
        this.lastRequest = { system, messages, tools, rest, digest: call.request.computed };
      }
      if (body.request !== call.request.computed) throw bad("the request digest differs from the rebuilt request");
      call.ok = true;
    }
  }

  // RunView.calls[i].pieces, built when the page asks (a long run's calls share the pieces)
  function piecesOf(call) {
    const out = { system: [], messages: [], tools: [] };
    if (!call.served) return out;
    for (const [kind] of KINDS) {
      const served = call.served[kind], digests = call.digests[kind], recorded = call.recorded[kind];
      for (let k = 0; k < served.length; k++) {
        out[kind].push({ value: served[k], digest: digests[k], recorded: k < recorded.length ? recorded[k] : null });
      }
    }
    return out;
  }

  function inclusionText(inc) {
    if (!inc) return "";
    const where = `leaf ${inc.leaf} of ${inc.size} in checkpoint ${inc.origin}`;
    return inc.signed_by.length ? `${where}, signed by pinned key ${inc.signed_by.join(", ")}` : `${where}, signed by no pinned key`;
  }

  // Section 9.5 step 3 for a bundle: the manifest's entries against the runs.
  function indexFindings(source, results) {
    const out = [];
    const listed = new Set();
    for (const e of source.entries) {
      const rid = e.run_id;
      const twice = listed.has(rid);
      listed.add(rid);
      const res = results.get(rid);
      if (twice) out.push({ run: rid, code: "index", seq: null, reason: "a run listed twice in the index" });
      else if (res === undefined) out.push({ run: rid, code: "index", seq: null, reason: "an index row of a run with no events" });
      else if (!(res instanceof Failure)) {
        const pairs = [["conversation_id", e.conversation_id, res.conversation_id], ["parent_run_id", e.parent_run_id, res.parent_run_id], ["opened_at", e.opened_at, res.opened_at]];
        const differ = pairs.filter(([, a, b]) => jtype(a) !== jtype(b) || a !== b).map(([k]) => k);
        if (differ.length) out.push({ run: rid, code: "index", seq: 0, reason: `the index row differs: ${differ.join(", ")}` });
      }
    }
    for (const run of results.keys()) {
      if (!listed.has(run)) out.push({ run, code: "index", seq: null, reason: "a run with no index row" });
    }
    return out;
  }

  // Section 9.5 step 5: a paused run whose question more than one run continues.
  function pauseFindings(verifier) {
    const out = [];
    for (const [paused, [request, answering]] of verifier.answered) {
      const runs = [...answering].filter((run) => {
        const r = verifier.cache.get(run);
        return !(r && !(r instanceof Failure) && r.close === null);
      });
      // an undecided run may have been UNSEALED (not counted): count it only when it matters
      const open = runs.filter((run) => { const r = verifier.cache.get(run); return r instanceof Failure && r.code === "undecided"; });
      if (runs.length - open.length > 1) out.push({ run: paused, code: "pause", seq: null, reason: `request ${request} answered ${runs.length} times` });
      else if (runs.length > 1) out.push({ run: paused, code: "undecided", seq: null, reason: `whether request ${request} was answered more than once depends on undecided runs: verify with the command line` });
    }
    return out;
  }

  // --- whole-file verification (section 9.5) -----------------------------------------------
  async function verifyBundle(bytes, options) {
    const data = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes);
    const keysIn = (options && options.keys) || [];
    const started = Date.now();
    let source;
    try {
      source = await frame(data);
    } catch (f) {
      if (!(f instanceof Failure)) throw f;
      return { verdicts: [{ run: null, code: f.code, seq: null, reason: f.reason }], runs: {}, version: null, ms: Date.now() - started };
    }
    let keys;
    try {
      keys = refuseKeys(keysIn);
    } catch (f) {
      return { verdicts: [{ run: null, code: f.code, seq: null, reason: f.reason }], runs: {}, version: source.version, ms: Date.now() - started };
    }
    const verifier = new Verifier(source, keys);
    const verdicts = [];
    try {
      if (verifier.inclusions !== null) await verifier.inclusions.open(keys);
      for (const run of source.runs.keys()) {
        try {
          const r = await verifier.verify(run);
          verdicts.push({ run, code: r.outcome, seq: null, reason: inclusionText(r.inclusion) });
        } catch (f) {
          if (!(f instanceof Failure)) throw f;
          verdicts.push({ run, code: f.code, seq: f.seq, reason: f.reason });
        }
      }
      const results = new Map();
      for (const run of source.runs.keys()) results.set(run, verifier.cache.get(run));
      verdicts.push(...indexFindings(source, results), ...pauseFindings(verifier));
      const judge = verifier.inclusions;
      if (judge !== null && judge.opened instanceof Failure && !judge.reliedOn) {
        // an undecided run might have relied on it (13.4): then it is not reported here
        const maybe = [...results.values()].some((r) => r instanceof Failure && r.code === "undecided");
        if (maybe) verdicts.push({ run: "", code: "undecided", seq: null, reason: `the checkpoint fails (${judge.opened.code}) and an undecided run may rely on it: verify with the command line` });
        else verdicts.push({ run: "", code: judge.opened.code, seq: null, reason: judge.opened.reason });
      }
    } catch (f) {
      if (!(f instanceof Failure)) throw f;
      return { verdicts: [{ run: null, code: f.code, seq: null, reason: f.reason }], runs: {}, version: source.version, ms: Date.now() - started };
    }
    const runs = Object.create(null); // run ids are data ("__proto__" included)
    for (const run of source.runs.keys()) runs[run] = verifier.views.get(run);
    return {
      verdicts, runs, version: source.version, checkpoint: source.checkpoint,
      checkpoint_opened: verifier.inclusions && !(verifier.inclusions.opened instanceof Failure) ? verifier.inclusions.opened : null,
      budget: { match_steps_left: verifier.budget.steps, work_left: verifier.work },
      ms: Date.now() - started,
    };
  }

  AF.verifyBundle = verifyBundle;
  Object.assign(AF._, { frame, Verifier, openCheckpoint, inclusionHolds, leafHash, envelopeOf });
})(globalThis);
