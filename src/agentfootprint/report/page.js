// The report page: shows what verifier.js computed from the embedded bundle, and nothing
// else as checked. A green mark is only ever drawn for a value this page computed itself;
// findings of the command that made the report (a database's index or seal log) are shown
// red, as what they are. Every value from the bundle enters the page as text (textContent),
// never as markup. Sections fill in when first opened: an 800-turn conversation stays fast.
"use strict";
(function () {
  const $ = (tag, attrs, ...children) => {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === "class") node.className = v;
      else if (k === "text") node.textContent = v;
      else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
      else node.setAttribute(k, v === true ? "" : String(v));
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  };
  const short = (hex) => (typeof hex === "string" && hex.length > 16 ? hex.slice(0, 12) + "…" : String(hex));
  const json = (v) => { try { return JSON.stringify(v, null, 2); } catch (e) { return String(v); } };
  // A commitment reads as what it is, wherever it sits in a value shown compactly.
  const hidden = (k, v) => {
    if (!isCommitment(v)) return v;
    const o = opened.get(v.$commit);
    return o && o.ok ? `«opened: ${o.text}»` : `«redacted ${short(v.$commit)}»`;
  };
  const compact = (v, n = 160) => {
    let s; try { s = typeof v === "string" ? v : JSON.stringify(v, hidden); } catch (e) { s = String(v); }
    if (s === undefined) s = String(v);
    return s.length > n ? s.slice(0, n) + "…" : s;
  };
  const when = (ms) => (Number.isSafeInteger(ms) ? new Date(ms).toISOString() : String(ms));
  const mark = (ok) => $("span", { class: ok ? "mark-ok" : "mark-bad", title: ok ? "computed here and equal" : "differs" }, ok ? "✓" : "✗");
  const isCommitment = (v) => v && typeof v === "object" && !Array.isArray(v) && Object.keys(v).length === 1 && typeof v.$commit === "string";
  // A details element whose body is built the first time it opens.
  const lazy = (summary, build, open = false) => {
    const body = $("div");
    const d = $("details", {}, $("summary", {}, summary), body);
    let built = false;
    const fill = () => { if (!built) { built = true; body.append(...[].concat(build())); } };
    d.addEventListener("toggle", () => { if (d.open) fill(); });
    d.fill = fill;  // openAll builds before it opens: printing must not outrun the toggle event
    if (open) { d.open = true; fill(); }
    return d;
  };

  const meta = JSON.parse(document.getElementById("af-meta").textContent);
  const app = document.getElementById("app");
  const banner = document.getElementById("verdict");
  const pinned = [];  // hex of the keys pinned now (the command's, then the reader's)
  const state = { result: null };
  const opened = new Map();  // commitment hex -> {key, text, ok}: disclosures this page hashed
  window.AFReport = { done: false, state: "pending", verdicts: [], error: null };

  function bundleBytes() {
    const text = document.getElementById("af-bundle").textContent.trim();
    const bin = atob(text);
    const out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  }

  // A pinned key as the command line takes it (ed25519:BASE64) or as hex, through the
  // verifier's own hex and base64 (canonical only)
  const X = AFVerify._;
  function keyBytes(text) {
    const t = text.trim();
    const raw = /^[0-9a-f]{64}$/i.test(t) ? X.unhex(t.toLowerCase())
      : t.startsWith("ed25519:") ? X.b64decodeCanonical(t.slice(8)) : null;
    if (!raw || raw.length !== 32) throw new Error("a public key is ed25519:BASE64 (as `agentfootprint keys show` prints it) or 64 hex digits");
    return raw;
  }
  const keyText = (hex) => "ed25519:" + X.b64encode(X.unhex(hex));

  // The page's verdicts: the verifier's, with the command's findings folded in (one that is
  // a run's verdict, its seal log, replaces its pass here; one about its index is beside it).
  function merged(verdicts) {
    const out = verdicts.map((v) => ({ ...v, by: "page" }));
    for (const f of meta.findings || []) {
      const finding = { run: f.run, code: f.code, seq: f.seq, reason: f.reason, by: "command" };
      const i = f.replaces ? out.findIndex((v) => v.run === f.run && v.by === "page" && PASS.has(v.code)) : -1;
      if (i >= 0) out[i] = finding; else out.push(finding);
    }
    return out;
  }
  const PASS = new Set(["VALID", "VALID_UNSIGNED", "UNSEALED"]);

  function words(v, run) {
    if (v.code === "VALID" || v.code === "VALID_UNSIGNED") {
      const seal = run && run.seal;
      if (!seal) return ["ok", "VALID (not sealed)"];
      if (v.code === "VALID") return ["ok", `VALID (sealed by key ${short(seal.key_id)}; key pinned)`];
      return ["ok", `VALID (sealed by key ${short(seal.key_id)}; key not pinned: pin it to check who sealed it)`];
    }
    if (v.code === "UNSEALED") return ["warn", "UNSEALED (never closed: the process stopped before the run ended)"];
    if (v.code === "undecided") return ["warn", "UNDECIDED (this page cannot check it: verify with the command line)"];
    const at = v.seq === null || v.seq === undefined ? "" : ` at seq ${v.seq}`;
    return ["bad", `INVALID (${v.code}${at})`];
  }

  async function verify() {
    banner.className = "verdict pending";
    banner.textContent = "Verifying in this browser…";
    if (!globalThis.crypto || !crypto.subtle) {
      return fail("This browser gives the page no WebCrypto here (not a secure context), so nothing was checked. Open the file directly (file://) or over https.");
    }
    let bytes;
    try { bytes = bundleBytes(); } catch (e) { return fail("The embedded bundle is not base64: " + e.message); }
    const keys = pinned.map((h) => keyBytes(h));
    let result;
    // no run could be carried (the command's findings say why): nothing to verify here
    const started = performance.now();
    if (!bytes.length && (meta.findings || []).length) result = { verdicts: [], runs: {} };
    else try { result = await AFVerify.verifyBundle(bytes, { keys }); } catch (e) {
      return fail("The verifier stopped: " + (e && e.message ? e.message : String(e)));
    }
    state.result = result;
    await openDisclosures();
    window.AFReport.verify_ms = performance.now() - started;  // for bench/report.py
    const verdicts = merged(result.verdicts || []);
    const codes = verdicts.map((v) => v.code);
    const overall = !verdicts.length ? "empty"
      : codes.some((c) => !PASS.has(c) && c !== "undecided") ? "invalid"
        : codes.includes("undecided") ? "undecided"
          : codes.includes("UNSEALED") ? "unsealed" : "valid";
    render(result, verdicts, overall);
    Object.assign(window.AFReport, { done: true, state: overall, verdicts, pinned: [...pinned], runs: result.runs || {} });
    document.body.dataset.state = overall;
  }

  // Section 12.3: a disclosure opens its commitment iff H("commit", canon([salt, key,
  // value])) is the commitment; the page recomputes it and shows only the ones that do.
  async function openDisclosures() {
    opened.clear();
    for (const d of meta.disclosures || []) {
      let ok = false;
      try {
        const value = X.parseJSON(d.value, "value", X.MAX_DEPTH + 2).value;
        ok = X.hex(await X.H("commit", X.canon([d.salt, d.key, value]))) === d.commitment;
      } catch (e) { ok = false; }
      opened.set(d.commitment, { key: d.key, text: d.value, ok });
    }
    window.AFReport.opened = [...opened].map(([commitment, o]) => ({ commitment, key: o.key, value: o.text, ok: o.ok }));
  }

  function fail(message) {
    banner.className = "verdict bad";
    banner.textContent = message;
    Object.assign(window.AFReport, { done: true, state: "error", error: message });
    document.body.dataset.state = "error";
  }

  function render(result, verdicts, overall) {
    const runs = result.runs || {};
    const bad = verdicts.filter((v) => !PASS.has(v.code) && v.code !== "undecided");
    const n = Object.keys(runs).length;
    if (overall === "valid") {
      banner.className = "verdict ok";
      banner.replaceChildren(`Verified in this browser: ${n} run${n === 1 ? "" : "s"}, every event hash, the chain, every request and its receipt${pinned.length ? ", and the seals under the pinned keys" : ""}.`);
    } else if (overall === "invalid") {
      banner.className = "verdict bad";
      const first = bad[0];
      banner.replaceChildren(`INVALID: ${first.code}${first.seq !== null && first.seq !== undefined ? " at seq " + first.seq : ""}${first.run ? " of run " + first.run : ""}`,
        $("span", { class: "detail", text: first.reason + (first.by === "command" ? " (found by the command that made this report, reading the database)" : "") }));
    } else if (overall === "empty") {
      banner.className = "verdict warn";
      banner.textContent = "This report holds no runs.";
    } else {
      banner.className = "verdict warn";
      banner.textContent = overall === "unsealed" ? "Consistent, but a run never closed (UNSEALED)." : "Some runs could not be decided by this page: verify them with the command line.";
    }
    app.replaceChildren(...[controls(), about(), verdictTable(verdicts, runs), disclosuresNote(), findings(), diffView(runs), ...Object.values(runs).map((r) => runView(r, verdicts))].filter(Boolean));
  }

  function controls() {
    const keyInput = $("input", { type: "text", id: "af-key", placeholder: "ed25519:… public key to pin", "aria-label": "public key to pin" });
    const note = $("span", { class: "muted", id: "af-key-note" });
    const pin = () => {
      try { const raw = keyBytes(keyInput.value); const h = X.hex(raw); if (!pinned.includes(h)) pinned.push(h); keyInput.value = ""; verify(); } catch (e) { note.textContent = e.message; }
    };
    const search = $("input", { type: "search", id: "af-search", placeholder: "Search every event", "aria-label": "search" });
    const hits = $("div", { id: "af-hits" });
    search.addEventListener("input", () => searchEvents(search.value, hits));
    return $("div", {},
      $("div", { class: "controls" }, keyInput, $("button", { onclick: pin, id: "af-pin" }, "Pin key and verify again"), note),
      $("div", { class: "controls" }, $("span", {}, pinned.length ? "Pinned: " + pinned.map(keyText).join(", ") : "No key pinned: a seal shows who sealed a run only under a key you pin.")),
      $("div", { class: "controls" }, search,
        $("button", { onclick: () => openAll(true) }, "Open all"), $("button", { onclick: () => openAll(false) }, "Fold all"),
        $("button", { onclick: () => window.print() }, "Print"),
        $("button", { onclick: download, id: "af-download", title: "the bundle this page verified, byte for byte: verify it with `agentfootprint verify` or another verifier" }, "Download the embedded bundle")),
      hits);
  }

  // The embedded bundle as a file, to verify with another verifier (no request: a blob).
  function download() {
    const url = URL.createObjectURL(new Blob([bundleBytes()], { type: "application/octet-stream" }));
    const a = $("a", { href: url, download: (meta.source || "runs").replace(/\.(afp|db)$/, "") + ".afp" });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60000);
  }

  function about() {
    return $("details", { class: "about" }, $("summary", {}, "What this page checked, and what a self-verifying file proves"),
      $("p", {}, "When it opened, this page decoded the bundle embedded in this file and recomputed, with your browser's WebCrypto, every event hash (docs/log-format.md section 5.1), the hash chain, the state after each commit, every request the model was served (rebuilt from the state: section 8) with the digest of each piece, and each receipt. Seals are checked with Ed25519 under the keys pinned above. A ✓ means this page computed the value and found it equal to the one recorded."),
      $("p", {}, "What it proves: the file is consistent with itself: every request shown is exactly what the receipts say the model was served, and nothing was changed after it was hashed. Anyone can write a consistent file, so WHO wrote it is proven only by a seal under a key you trust (pin it). It does not prove that a model's replies were real, that the timestamps are true, or that the log holds every run there was (docs/log-format.md section 10)."),
      $("p", {}, "Not decided here (shown UNDECIDED, never valid): redaction patterns of a version 1 policy, patterns this page cannot read exactly as RE2 does, and work past this page's budget (docs/report.md). Disclosures given to the report are opened here, each hashed against its commitment; whether a quotation of one is left in clear (echo redaction) is checked by the command line only."),
      $("p", { class: "muted" }, `Made by ${meta.library} from the ${meta.source_kind} ${meta.source}; report format ${meta.report}.`));
  }

  function verdictTable(verdicts, runs) {
    return $("div", {}, $("h2", {}, "Verdicts"), $("table", { id: "af-verdicts" },
      $("tr", {}, $("th", {}, "run"), $("th", {}, "verdict"), $("th", {}, "checked by"), $("th", {}, "reason")),
      verdicts.map((v) => {
        const [tone, text] = words(v, runs[v.run]);
        return $("tr", { "data-code": v.code },
          $("td", { class: "mono" }, v.run ? $("a", { href: "#run-" + v.run }, v.run) : "(the file)"),
          $("td", {}, $("span", { class: "chip " + (v.by === "command" && tone === "ok" ? "warn" : tone) }, text)),
          $("td", {}, v.by === "command" ? "the command that made this report" : "this page"),
          $("td", {}, v.reason || ""));
      })));
  }

  function disclosuresNote() {
    if (!opened.size) return null;
    const good = [...opened.values()].filter((o) => o.ok).length;
    const bad = opened.size - good;
    return $("p", { class: bad ? "verdict bad" : "verdict ok", id: "af-disclosures" },
      `${good} of ${opened.size} disclosures open their commitments (hashed here)`,
      bad ? `; ${bad} do not: their values are not shown` : "", ". This file holds the opened values in clear.");
  }

  function findings() {
    const list = meta.findings || [];
    if (!list.length) return null;
    return $("div", {}, $("h2", {}, "Found when the database was read"),
      $("p", { class: "muted" }, "These concern the database file around the runs (its run index, its seal log, rows no bundle can carry). The command that made this report found them with the reference verifier; this page cannot recheck them, and never shows them as passing."),
      $("ul", {}, list.map((f) => $("li", {}, `${f.code}: ${f.reason}`))));
  }

  // -- one run -------------------------------------------------------------------------------
  function runView(run, verdicts) {
    const v = verdicts.find((x) => x.run === run.run_id && !(x.by === "command" && x.code === "index")) || { code: run.code, seq: run.seq, reason: run.reason };
    const [tone, text] = words(v, run);
    const events = run.events || [];
    const close = events.find((e) => e.type === "run.close");
    const open = events.find((e) => e.type === "run.open");
    const head = $("div", {},
      $("h2", {}, "Run ", $("span", { class: "mono" }, run.run_id), " ", $("span", { class: "chip " + tone }, text)),
      $("p", { class: "muted" },
        `${events.length} events checked · opened ${when(run.opened_at)}`,
        close && close.body ? ` · ${close.body.outcome}, ${close.body.calls} model calls, ${close.body.iterations} iterations` : " · not closed",
        run.parent_run_id ? " · continues " : "", run.parent_run_id ? $("a", { href: "#run-" + run.parent_run_id, class: "mono" }, run.parent_run_id) : "",
        open && open.body && open.body.agent ? ` · agent ${compact(open.body.agent.name || open.body.agent.id)}` : ""),
      // the head, for comparison with a checkpoint or `agentfootprint runs` held elsewhere:
      // a file that checks itself proves only that it is consistent with itself
      PASS.has(v.code) && events.length && events[events.length - 1].chain ? $("p", { class: "muted" }, "Head (its last chain hash): ", $("code", { class: "head" }, events[events.length - 1].chain)) : null,
      v.reason && !PASS.has(v.code) ? $("p", { class: "verdict bad" }, v.reason) : null);
    const calls = run.calls || [];
    return $("section", { class: "run", id: "run-" + run.run_id, "data-run": run.run_id },
      head,
      lazy(`Model calls (${calls.length})`, () => calls.map((c) => callView(c, run))),
      lazy("Tool calls", () => toolCalls(run)),
      lazy(`Timeline: stages and commits (${events.length} events)`, () => timeline(run)),
      lazy("Usage and cost", () => usage(run)),
      lazy("Redacted values", () => redacted(run)),
      lazy("Seal and inclusion", () => sealView(run)),
      lazy("Final state", () => $("pre", {}, json(run.state))));
  }

  function callView(c, run) {
    const ok = c.ok && c.request && c.request.recorded === c.request.computed;
    const summary = [`call ${c.call} · seq ${c.seq} · ${compact(c.model, 60)} · request `, $("span", { class: "mono" }, short(c.request && c.request.computed)), " ", mark(ok)];
    return lazy(summary, () => {
      const out = [$("p", {}, "Params: ", $("code", {}, compact(c.params, 400)))];
      for (const kind of ["system", "messages", "tools"]) {
        const pieces = (c.pieces && c.pieces[kind]) || [];
        out.push($("h3", {}, `${kind} (${pieces.length})`), pieceTable(kind, pieces));
      }
      out.push($("p", {}, "Request digest recorded ", $("code", {}, c.request ? c.request.recorded : "?"), ", rebuilt here ", $("code", {}, c.request ? c.request.computed : "?"), " ", mark(ok)));
      const reply = (run.events || []).find((e) => e.type === "write" && e.body && e.body.path === "last_response" && e.body.commit === c.commit);
      out.push($("h3", {}, "Reply"), reply ? replyView(reply.body.value) : $("p", { class: "muted" }, "no reply recorded in this call's commit"));
      return out;
    });
  }

  function pieceTable(kind, pieces) {
    return $("table", {}, $("tr", {}, $("th", {}, "#"), $("th", {}, "piece"), $("th", {}, "digest (rebuilt)"), $("th", {}, "")),
      pieces.map((p, i) => $("tr", { class: "row" }, $("td", { class: "num" }, i), $("td", {}, pieceText(kind, p.value)),
        $("td", { class: "mono", title: p.digest }, short(p.digest)), $("td", {}, mark(p.digest === p.recorded)))));
  }

  function pieceText(kind, v) {
    if (isCommitment(v)) return commitment(v);
    if (kind === "messages" && v && typeof v === "object") {
      return $("div", {}, $("span", { class: "role" }, String(v.role || "?")), " ", textOf(v.content),
        Array.isArray(v.tool_calls) && v.tool_calls.length ? $("div", { class: "muted" }, v.tool_calls.map((t) => `→ ${t.name}(${compact(t.arguments, 200)})`).join("; ")) : null,
        v.tool_call_id ? $("span", { class: "muted" }, ` (result of ${v.tool_call_id})`) : null);
    }
    if (kind === "system" && v && typeof v === "object" && "text" in v) return $("div", {}, textOf(v.text), v.source ? $("span", { class: "muted" }, ` (${v.source})`) : null);
    if (kind === "tools" && v && typeof v === "object") return $("div", {}, $("code", {}, String(v.name)), " ", textOf(v.description), $("details", {}, $("summary", {}, "schema"), $("pre", {}, json(v.input_schema || v.parameters || v))));
    return $("pre", {}, json(v));
  }

  function textOf(v) {
    if (isCommitment(v)) return commitment(v);
    if (typeof v === "string" && v.includes('"$commit"')) {  // JSON text holding commitments
      try { return $("code", {}, compact(JSON.parse(v), 600)); } catch (e) { /* plain text */ }
    }
    if (typeof v === "string") return v.length > 600 ? $("details", {}, $("summary", {}, v.slice(0, 200) + "…"), $("pre", {}, v)) : v;
    if (v === undefined) return "";
    return $("code", {}, compact(v, 600));
  }

  function commitment(v) {
    const o = opened.get(v.$commit);
    return $("span", { class: "commitment", title: "redacted: the log holds only this commitment" }, "redacted ", $("span", { class: "mono" }, short(v.$commit)),
      o && o.ok ? [" opened: ", $("code", {}, o.text), " ", mark(true)] : null,
      o && !o.ok ? [" (the disclosure given for it does not open it) ", mark(false)] : null);
  }

  function replyView(v) {
    if (!v || typeof v !== "object") return $("pre", {}, json(v));
    return $("div", {}, v.content !== undefined ? $("p", {}, textOf(v.content)) : null,
      Array.isArray(v.tool_calls) && v.tool_calls.length ? $("ul", {}, v.tool_calls.map((t) => $("li", {}, $("code", {}, t.name), `(${compact(t.arguments, 300)})`, $("span", { class: "muted" }, ` id ${t.id}`)))) : null,
      $("p", { class: "muted" }, [v.stop_reason ? `stop: ${v.stop_reason}` : "", v.usage ? `usage: ${compact(v.usage)}` : ""].filter(Boolean).join(" · ")));
  }

  // Each tool call the model asked for: its arguments (from the reply), the permission
  // decision recorded for it, its result (the tool message that answers its id), the time
  // between the reply and the result by the rows' own timestamps (a run records no other
  // clock for tools), and every other recorded event naming it.
  function toolCalls(run) {
    const events = run.events || [];
    const asked = [];
    for (const e of events) {
      if (e.type === "write" && e.body && e.body.path === "last_response" && e.body.value && Array.isArray(e.body.value.tool_calls)) {
        for (const t of e.body.value.tool_calls) asked.push({ call: t, seq: e.seq, ts: e.ts });
      }
    }
    if (!asked.length) return $("p", { class: "muted" }, "The model asked for no tool in this run.");
    const results = new Map();
    for (const e of events) {
      if (e.type === "write" && e.body && e.body.path === "history" && Array.isArray(e.body.value)) {
        for (const m of e.body.value) if (m && m.tool_call_id && !results.has(m.tool_call_id)) results.set(m.tool_call_id, { message: m, seq: e.seq, ts: e.ts });
      }
    }
    const related = (id) => events.filter((e) => e.type === "event" && e.body && e.body.payload && e.body.payload.tool_call_id === id);
    const PERMISSION = "agentfootprint.permission.check";
    return $("table", {}, $("tr", {}, $("th", {}, "seq"), $("th", {}, "tool"), $("th", {}, "arguments"), $("th", {}, "permission"), $("th", {}, "result"),
      $("th", { title: "from the reply's row to the result's row, by their recorded timestamps" }, "reply → result"), $("th", { title: "argument validation, teardowns: every other recorded event naming the call" }, "recorded events")),
      asked.map(({ call, seq, ts }) => {
        const r = results.get(call.id);
        const named = related(call.id);
        const check = named.find((e) => e.body.name === PERMISSION);
        const p = check ? check.body.payload : null;
        return $("tr", { class: "row" }, $("td", { class: "num" }, seq), $("td", { class: "nowrap" }, $("code", {}, String(call.name)), $("div", { class: "muted mono" }, String(call.id))),
          $("td", {}, textOf(call.arguments)),
          $("td", {}, p ? [$("strong", {}, String(p.decision)), p.by ? ` by ${compact(p.by, 60)}` : "", p.reason ? $("div", { class: "muted" }, compact(p.reason, 200)) : null] : $("span", { class: "muted" }, "no checker asked")),
          $("td", {}, r ? [textOf(r.message.content), r.message.is_error ? $("div", { class: "mark-bad" }, "an error") : null] : $("span", { class: "muted" }, "no result recorded")),
          $("td", { class: "num" }, r && Number.isSafeInteger(r.ts) && Number.isSafeInteger(ts) ? `${r.ts - ts} ms` : "–"),
          $("td", {}, $("ul", {}, named.filter((e) => e !== check).map((e) => $("li", {}, `seq ${e.seq} ${e.body.name}: `, $("code", {}, compact(e.body.payload, 240)))))));
      }));
  }

  function timeline(run) {
    const rows = [];
    let pending = [];
    for (const e of run.events || []) {
      if (e.type === "commit") {
        const b = e.body || {};
        rows.push($("details", { class: "row" }, $("summary", {}, `commit ${b.commit} · ${b.stage_run || b.stage} `, b.decision ? $("span", { class: "muted" }, `→ ${b.decision} `) : null, $("span", { class: "muted" }, `· ${b.writes} writes · seq ${e.seq} `), mark(e.hash === e.computed)),
          $("ul", {}, pending.map(eventLine))));
        pending = [];
      } else if (e.type === "write" || e.type === "event" || e.type === "receipt") {
        pending.push(e);
      } else {
        rows.push($("div", { class: "row" }, eventLine(e)));
      }
    }
    if (pending.length) rows.push($("div", {}, $("p", { class: "muted" }, "After the last commit:"), $("ul", {}, pending.map(eventLine))));
    return rows;
  }

  function eventLine(e) {
    const b = e.body || {};
    let what;
    if (e.type === "write") what = [`${b.verb} `, $("code", {}, String(b.path)), " = ", textOf(b.value)];
    else if (e.type === "event") what = [$("code", {}, String(b.name)), " ", $("span", { class: "muted" }, compact(b.payload, 300))];
    else if (e.type === "receipt") what = [`receipt of call ${b.call}: request `, $("span", { class: "mono" }, short(b.request))];
    else what = [$("span", { class: "muted" }, compact(b, 300))];
    return $("li", { class: "row", "data-seq": e.seq }, $("span", { class: "muted" }, `seq ${e.seq} ${e.type} · ${when(e.ts)} `), mark(e.hash === e.computed), " ", ...what);
  }

  function usage(run) {
    const s = run.state || {};
    const out = [];
    if (s.usage !== undefined) out.push($("p", {}, "Usage: ", $("code", {}, compact(s.usage, 400))));
    for (const key of Object.keys(s)) if (/cost/i.test(key)) out.push($("p", {}, `${key}: `, $("code", {}, compact(s[key], 400))));
    return out.length ? out : $("p", { class: "muted" }, "No usage recorded in state.");
  }

  function redacted(run) {
    const found = [];
    const walk = (v, path, seq) => {
      if (found.length > 2000) return;
      if (isCommitment(v)) { found.push({ path, seq, digest: v.$commit }); return; }
      if (Array.isArray(v)) v.forEach((x, i) => walk(x, `${path}[${i}]`, seq));
      else if (v && typeof v === "object") for (const [k, x] of Object.entries(v)) walk(x, `${path}.${k}`, seq);
      else if (typeof v === "string" && v.includes("$commit") && /^[\s]*[{[]/.test(v)) {
        try { walk(JSON.parse(v), path + " (JSON text)", seq); } catch (e) { /* not JSON text */ }
      }
    };
    for (const e of run.events || []) if (e.type === "write" || e.type === "event") walk(e.body, `seq ${e.seq}`, e.seq);
    const open = (run.events || []).find((e) => e.type === "run.open");
    const policy = open && open.body ? open.body.policy : undefined;
    return [policy ? $("p", {}, "Redaction policy: ", $("code", {}, compact(policy, 400))) : $("p", { class: "muted" }, "This run records no redaction policy."),
      found.length ? $("table", {}, $("tr", {}, $("th", {}, "where"), $("th", {}, "commitment"), $("th", {}, "opened by a disclosure")), found.map((f) => {
        const o = opened.get(f.digest);
        return $("tr", { class: "row" }, $("td", { class: "mono" }, f.path), $("td", { class: "mono" }, f.digest),
          $("td", {}, !o ? $("span", { class: "muted" }, "no disclosure given") : o.ok ? [$("code", {}, `${o.key} = ${o.text}`), " ", mark(true)] : ["does not open it ", mark(false)]));
      })) : $("p", { class: "muted" }, "No value in this run is redacted.")];
  }

  function sealView(run) {
    const out = [];
    if (!run.seal) out.push($("p", {}, "This run is not sealed (its run.open names no signer)."));
    else {
      const by = run.seal.signed_by || [];
      out.push($("p", {}, "Sealed by key ", $("code", {}, String(run.seal.key_id)), ". ",
        by.length ? $("span", {}, "The seal verifies here under the pinned key ", $("code", {}, by.join(", ")), " ", mark(true)) : $("span", { class: "muted" }, "No pinned key verified it: pin the signer's public key above to prove who sealed this run.")));
    }
    if (run.inclusion) {
      const inc = run.inclusion;
      out.push($("p", {}, `Included as leaf ${inc.leaf} of ${inc.size} in checkpoint ${inc.origin}, root `, $("code", {}, short(inc.root)), " ",
        (inc.signed_by || []).length ? $("span", {}, "signed by pinned key ", $("code", {}, inc.signed_by.join(", ")), " ", mark(true)) : $("span", { class: "muted" }, "(signed by no pinned key: inclusion unproven)")));
    }
    return out;
  }

  // -- two runs ------------------------------------------------------------------------------
  function diffView(runs) {
    if (!meta.diff) return null;
    const [a, b] = meta.diff.map((id) => runs[id]);
    const box = $("div", { id: "af-diff" }, $("h2", {}, "Where the two runs' requests differ"));
    if (!a || !b) return box.appendChild($("p", { class: "verdict bad" }, "A run of the diff did not verify far enough to compare.")), box;
    const ca = a.calls || [], cb = b.calls || [];
    let k = 0;
    while (k < ca.length && k < cb.length && ca[k].request.computed === cb[k].request.computed) k++;
    box.append($("p", {}, `Run A `, $("code", {}, a.run_id), ` and run B `, $("code", {}, b.run_id), k ? `: requests 0 to ${k - 1} are byte-identical (equal digests, rebuilt here).` : ": their first requests already differ."));
    if (k === ca.length && k === cb.length) { box.append($("p", { class: "verdict ok" }, `All ${k} requests are identical.`)); return box; }
    if (k >= ca.length || k >= cb.length) { box.append($("p", { class: "verdict bad" }, `Run ${k >= ca.length ? "A" : "B"} stops after ${k} requests; the other goes on.`)); return box; }
    const x = ca[k], y = cb[k];
    box.append($("p", { class: "verdict bad" }, `Request ${k} differs (A seq ${x.seq}, B seq ${y.seq}).`));
    if (compact(x.model) !== compact(y.model) || compact(x.params, 1e6) !== compact(y.params, 1e6)) {
      box.append($("p", {}, "Model or params: A ", $("code", {}, `${compact(x.model)} ${compact(x.params)}`), " B ", $("code", {}, `${compact(y.model)} ${compact(y.params)}`)));
    }
    for (const kind of ["system", "messages", "tools"]) {
      const pa = x.pieces[kind] || [], pb = y.pieces[kind] || [];
      const n = Math.max(pa.length, pb.length);
      const rows = [];
      for (let i = 0; i < n; i++) {
        const same = pa[i] && pb[i] && pa[i].digest === pb[i].digest;
        rows.push($("tr", {}, $("td", { class: "num" }, i),
          $("td", { class: "diffcell " + (same ? "same" : "differs") }, pa[i] ? pieceText(kind, pa[i].value) : "(none)"),
          $("td", { class: "diffcell " + (same ? "same" : "differs") }, pb[i] ? pieceText(kind, pb[i].value) : "(none)"),
          $("td", { class: "nowrap" }, same ? "same" : "differs")));
      }
      box.append($("h3", {}, `${kind}: ${rows.filter((r) => r.lastChild.textContent === "differs").length} of ${n} differ`),
        $("table", { "data-kind": kind }, $("tr", {}, $("th", {}, "#"), $("th", {}, "A"), $("th", {}, "B"), $("th", {}, "")), rows));
    }
    return box;
  }

  // -- search, fold, print -------------------------------------------------------------------
  function searchEvents(query, hits) {
    const q = query.trim().toLowerCase();
    hits.replaceChildren();
    if (!q || !state.result) return;
    const found = [];
    for (const run of Object.values(state.result.runs || {})) {
      for (const e of run.events || []) {
        if (found.length >= 200) break;
        let text; try { text = JSON.stringify(e.body); } catch (err) { text = ""; }
        if (text && text.toLowerCase().includes(q)) found.push({ run, e, text });
      }
    }
    hits.append($("p", { class: "muted" }, found.length >= 200 ? "The first 200 events that match:" : `${found.length} events match.`),
      $("ul", {}, found.map(({ run, e, text }) => $("li", { class: "row" }, $("a", { href: "#run-" + run.run_id, class: "mono" }, short(run.run_id)), ` seq ${e.seq} ${e.type}: `, $("code", {}, snippet(text, q))))));
  }
  const snippet = (text, q) => { const i = text.toLowerCase().indexOf(q); const s = Math.max(0, i - 60); return (s ? "…" : "") + text.slice(s, i + q.length + 60) + "…"; };

  function openAll(open) {
    for (const d of document.querySelectorAll("section.run > details, .about")) {
      if (open && d.fill) d.fill();
      d.open = open;
    }
  }
  window.addEventListener("beforeprint", () => openAll(true));

  for (const h of meta.keys || []) pinned.push(h);
  verify();
})();
