// crossbuild's web page: start builds, refresh the runs list, and render a run's story from its event stream
// (server-sent events; the browser resends the last event id when it reconnects, and the server goes on from it).
"use strict";

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") node.className = v;
    else if (k.startsWith("data-")) node.setAttribute(k, v);
    else node[k] = v;
  }
  for (const c of children) if (c !== null && c !== undefined) node.append(c);
  return node;
}

async function postJSON(url, body) {
  const r = await fetch(url, {method: "POST", headers: {"Content-Type": "application/json"},
                              body: JSON.stringify(body || {})});
  let data = {};
  try { data = await r.json(); } catch (e) { data = {error: `the server answered ${r.status}`}; }
  return {ok: r.ok, status: r.status, data};
}

// ---- the runs list ------------------------------------------------------------------------------------------

function startForm() {
  const form = document.getElementById("start-form");
  if (!form) return;
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const error = document.getElementById("start-error");
    error.hidden = true;
    const body = {source: form.source.value, target: form.target.value, model: form.model.value};
    const r = await postJSON("/api/builds", body);
    if (r.ok) { window.location = r.data.url; return; }
    error.textContent = r.data.error || `refused (${r.status})`;
    error.hidden = false;
  });
}

function runRow(r) {
  const cost = r.cost_usd ? `$${r.cost_usd.toFixed(4)}` : "";
  return el("tr", {"data-run": r.id},
    el("td", {}, el("a", {href: `/runs/${r.id}`, textContent: r.id})), el("td", {textContent: r.source}),
    el("td", {textContent: r.target}), el("td", {textContent: r.model}),
    el("td", {class: `status ${r.status}`, textContent: r.status}), el("td", {textContent: r.steps}),
    el("td", {textContent: r.tool_calls}), el("td", {textContent: `${(r.wall_s || 0).toFixed(1)}s`}),
    el("td", {textContent: cost}));
}

function refreshRuns() {
  const table = document.getElementById("runs");
  if (!table) return;
  const query = table.dataset.query ? `?${table.dataset.query}` : "";
  setInterval(async () => {
    const r = await fetch(`/api/runs${query}`);
    if (!r.ok) return;
    const rows = await r.json();
    const body = table.tBodies[0];
    body.replaceChildren(...(rows.length ? rows.map(runRow)
      : [el("tr", {class: "empty"}, el("td", {colSpan: 9, textContent: "No runs recorded yet."}))]));
  }, 3000);
}

// ---- one run ----------------------------------------------------------------------------------------------

class RunPage {
  constructor(section) {
    this.runId = section.dataset.run;
    this.timeline = document.getElementById("timeline");
    this.status = document.getElementById("status");
    this.steps = new Map();
    this.calls = new Map();
    const cancel = document.getElementById("cancel");
    if (cancel) cancel.addEventListener("click", () => this.cancel(cancel));
  }

  watch() {
    this.source = new EventSource(`/runs/${this.runId}/events`);
    const on = (kind, fn) => this.source.addEventListener(kind, (m) => fn.call(this, JSON.parse(m.data)));
    on("preparing", (d) => this.note(null, `preparing the workspace from ${d.source}…`));
    on("model_text", (d) => this.step(d.step).append(el("p", {class: "model-text", textContent: d.text})));
    on("tool_call", this.toolCall);
    on("tool_result", this.toolResult);
    on("verify", (d) => this.step(d.step).append(el("p", {class: `verify ${d.ok ? "ok" : "bad"}`,
      textContent: `verify ${d.output_dir || ""}: ${d.ok ? `VERIFIED (${d.proof || "?"})` : "not verified"}` +
                   (d.reasons.length ? ` — ${d.reasons.join("; ")}` : "")})));
    on("note", (d) => this.note(d.step, d.message));
    on("progress", (d) => this.activity(d.message));
    on("finished", this.finished);
    on("failed_to_start", (d) => { this.setStatus("error"); this.note(null, `the build could not start: ${d.message}`);
                                   this.source.close(); });
    on("missing", (d) => { this.note(null, d.message); this.source.close(); });
    this.source.addEventListener("end", () => this.source.close());
  }

  activity(text) {  // what the running call is doing now: replaced, never kept in the story
    const shown = document.getElementById("activity");
    shown.textContent = text || "";
    shown.hidden = !text;
  }

  setStatus(status) {
    this.status.textContent = status;
    this.status.className = `status ${status}`;
  }

  step(n) {
    if (!this.steps.has(n)) {
      const li = el("li", {class: "step", "data-step": n}, el("h3", {textContent: `step ${n}`}));
      this.timeline.append(li);
      this.steps.set(n, li);
    }
    return this.steps.get(n);
  }

  note(step, text) {
    const p = el("p", {class: "note", textContent: text});
    (step === null || step === undefined ? this.timeline : this.step(step)).append(p);
  }

  toolCall(d) {
    let shown = d.arguments || "";
    try { const a = JSON.parse(d.arguments); shown = a.command || a.path || a.name || a.query || shown; } catch (e) {}
    const state = el("span", {class: "state running", textContent: "running…"});
    const call = el("details", {class: "call", "data-call": d.id},
      el("summary", {}, el("span", {class: "tool", textContent: d.name}), " ",
         el("code", {class: "shown", textContent: String(shown).slice(0, 240)}), " ", state),
      el("pre", {class: "arguments", textContent: d.arguments}));
    this.step(d.step).append(call);
    this.calls.set(`${d.step}/${d.id}`, {call, state});
    if (this.status.textContent === "preparing") this.setStatus("running");
  }

  toolResult(d) {
    let entry = this.calls.get(`${d.step}/${d.id}`);
    if (!entry) {  // a call the page did not see issued (a reconnect that started after it)
      this.toolCall({step: d.step, id: d.id, name: d.name, arguments: d.arguments});
      entry = this.calls.get(`${d.step}/${d.id}`);
    }
    const {call, state} = entry;
    call.classList.add(d.ok ? "ok" : "failed");
    state.className = `state ${d.ok ? "ok" : "failed"}`;
    state.textContent = (d.ok ? "✓" : `✗ ${d.error_type || ""}`) +
      (d.duration_s ? ` ${d.duration_s.toFixed(1)}s` : "");
    call.append(el("pre", {class: "result", textContent: d.message + (d.truncated ? "\n[…]" : "")}));
    if (d.hint) call.append(el("p", {class: "hint", textContent: `hint: ${d.hint}`}));
    for (const k of d.kb || []) {
      call.append(el("div", {class: "kb", "data-entry": k.id},
        el("strong", {textContent: `knowledge: ${k.id}`}), ` — ${k.title}`,
        k.cause ? el("p", {textContent: `cause: ${k.cause}`}) : null,
        k.fix ? el("p", {textContent: `fix: ${k.fix}`}) : null));
      call.open = true;
    }
    if (d.log) call.append(this.logViewer(d.row, d.log));
  }

  logViewer(row, path) {
    const pre = el("pre", {class: "log", hidden: true});
    const more = el("button", {class: "more", hidden: true, textContent: "more"});
    const open = el("button", {class: "open-log", textContent: `full log (${path})`});
    let offset = 0;
    const load = async () => {
      const r = await fetch(`/runs/${this.runId}/log/${row}?offset=${offset}`);
      const page = await r.json();
      if (!r.ok) { pre.textContent += page.error; pre.hidden = false; return; }
      pre.textContent += page.text;
      pre.hidden = false;
      offset = page.next_offset;
      more.hidden = offset === null;
    };
    open.addEventListener("click", () => { open.disabled = true; load(); });
    more.addEventListener("click", load);
    return el("div", {class: "log-viewer"}, open, pre, more);
  }

  finished(d) {
    this.activity(null);
    this.setStatus(d.status);
    const cancel = document.getElementById("cancel");
    if (cancel) cancel.remove();
    const outcome = document.getElementById("outcome");
    outcome.textContent = `${d.status.toUpperCase()} (${d.stop_reason}) after ${d.steps} steps, ${d.tool_calls} ` +
      `tool calls, ${(d.wall_s || 0).toFixed(1)}s — ${d.message || ""}`;
    outcome.hidden = false;
    if (d.verify) this.verdict(d.verify);
  }

  verdict(v) {
    const body = document.getElementById("verdict-body");
    const rows = (v.artifacts || []).filter((a) => !a.member_of).slice(0, 200).map((a) => el("tr", {},
      el("td", {textContent: a.path}), el("td", {textContent: a.kind}), el("td", {textContent: a.format}),
      el("td", {textContent: a.machine}), el("td", {textContent: [a.linkage, a.interpreter].filter(Boolean).join(", ")}),
      el("td", {class: a.ok ? "ok" : "bad", textContent: a.ok ? "yes" : `NO ${(a.problems || []).join("; ")}`})));
    const head = (...names) => el("thead", {}, el("tr", {}, ...names.map((n) => el("th", {textContent: n}))));
    body.replaceChildren(
      el("p", {class: `verify ${v.ok ? "ok" : "bad"}`, textContent: v.ok ? `VERIFIED for ${v.target}`
        : `NOT VERIFIED for ${v.target}: ${(v.reasons || []).join("; ")}`}),
      v.ok ? el("p", {id: "proof", textContent: proofPhrase(v)}) : null,
      el("table", {id: "artifacts"}, head("artifact", "kind", "format", "machine", "details", "ok"),
         el("tbody", {}, ...rows)),
      v.rebuild ? el("p", {textContent: `clean rebuild: ${v.rebuild.ok ? "passed" : v.rebuild.error}`}) : null,
      (v.smoke_runs || []).length ? el("table", {id: "smoke-runs"}, head(v.harness ? `test (run by ${v.harness})` : "program", "exit", "time", "output (tail)"),
        el("tbody", {}, ...v.smoke_runs.map((s) => el("tr", {class: s.passed ? "ok" : ""},
          el("td", {textContent: s.path}), el("td", {textContent: s.skipped ? `skipped: ${s.skipped}` :
            s.passed ? "passed" : `${s.triage || "failed"}: ${s.why || s.exit_code}`}),
          el("td", {textContent: `${(s.duration_s || 0).toFixed(2)}s`}),
          el("td", {}, el("pre", {textContent: (s.output_tail || "").slice(-300)})))))) : null,
      (v.probe_runs || []).length ? el("table", {id: "probe-runs"}, head("product", "kind", "probe", "time"),
        el("tbody", {}, ...v.probe_runs.map((p) => el("tr", {class: p.passed ? "ok" : ""},
          el("td", {textContent: p.path}), el("td", {textContent: p.kind}),
          el("td", {textContent: p.skipped ? `skipped: ${p.skipped}` :
            p.passed ? `passed: ${p.checked}` : `FAILED: ${p.checked}: ${p.why}`}),
          el("td", {textContent: `${(p.duration_s || 0).toFixed(2)}s`}))))) : null);
    document.getElementById("verdict").hidden = false;
  }

  async cancel(button) {
    button.disabled = true;
    const r = await postJSON(`/api/builds/${this.runId}/cancel`);
    if (r.ok) this.setStatus("cancelling");
    else { this.note(null, r.data.error || `cancel refused (${r.status})`); button.disabled = false; }
  }
}

startForm();
refreshRuns();
const runSection = document.getElementById("run");
if (runSection) new RunPage(runSection).watch();

// What ran on the target (proof/levels.py's phrase): "tested (3 of 3 test programs passed ...)" or "built: why".
function proofPhrase(v) {
  const c = v.proof_counts || {};
  if (v.proof === "tested") {
    return `proof: tested (${c.passed} of ${c.ran} test programs passed on the target` +
      (c.not_counted ? `, ${c.not_counted} not counted)` : ")");
  }
  if (v.proof === "exercised") {
    return `proof: exercised (${c.probes_passed} of ${c.probes_run} products ran on the target: executables ` +
      `started, libraries loaded or linked whole; not tested: ${v.proof_why})`;
  }
  return v.proof ? `proof: ${v.proof}: ${v.proof_why}` : "proof: not recorded (a run from before proof levels)";
}
