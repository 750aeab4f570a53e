// A session's page: the statechart lit as the session steps, the timeline, what it waits
// for, its Ralph status, invocations and files, and the actions. Kept current by
// /events/s/ID (an "entry" per journal entry, then "session" with the whole state).
import {
  ago, busy, clock, el, fill, initial, listen, money, post, questionField, said, time,
} from "./common.js";

let data = initial("session-data");
const id = data.info.id;
const base = `/s/${encodeURIComponent(id)}`;
const outcome = document.getElementById("outcome");

// -- the statechart --------------------------------------------------------------------

const svg = document.querySelector("#chart svg");
const states = new Map();
const edges = [];
if (svg) {
  for (const g of svg.querySelectorAll("[data-state]")) states.set(g.dataset.state, g);
  edges.push(...svg.querySelectorAll("g.edge[data-to]"));
}
const visited = new Set();
const figure = document.getElementById("chart");

// Big charts (the Ralph orchestrator) are drawn near their own size and scrolled; the
// active state is kept in view as it moves.
function zoomTo(factor) {
  const width = svg.viewBox.baseVal.width;
  svg.style.width = `${Math.round(width * factor)}px`;
  svg.dataset.zoom = String(factor);
}
function fit() { return figure.clientWidth / svg.viewBox.baseVal.width; }
if (svg && svg.viewBox.baseVal && svg.viewBox.baseVal.width) {
  zoomTo(Math.min(1.3, Math.max(fit(), 0.8)));
  for (const button of document.querySelectorAll("button[data-zoom]")) {
    button.addEventListener("click", () => {
      const now = Number(svg.dataset.zoom);
      const next = {in: now * 1.25, out: now / 1.25, fit: fit()}[button.dataset.zoom];
      zoomTo(Math.min(4, Math.max(0.1, next)));
      keepInView();
    });
  }
}

function keepInView() {
  const leaf = [...states.values()].find((g) => g.dataset.kind === "state" && g.dataset.active === "true");
  if (!leaf || !figure) return;
  const box = leaf.getBoundingClientRect(), view = figure.getBoundingClientRect();
  if (box.left < view.left || box.right > view.right || box.top < view.top || box.bottom > view.bottom) {
    figure.scrollBy({left: box.left + box.width / 2 - (view.left + view.width / 2),
                     top: box.top + box.height / 2 - (view.top + view.height / 2)});
  }
}

function light(active) {
  const on = new Set(active);
  let moved = false;
  for (const [state, g] of states) {
    const lit = on.has(state);
    if ((g.dataset.active === "true") !== lit) {
      g.dataset.active = String(lit);
      g.setAttribute("aria-label", lit ? `${state}, active` : state);
      moved = true;
    }
  }
  if (moved) keepInView();
}

/** Light the path an entry took: the states entered, the transitions that did it. */
function walk(entry) {
  if (!entry.after.length) return;
  const before = new Set(entry.before), after = new Set(entry.after);
  const exited = new Set([...before].filter((s) => !after.has(s)));
  const entered = [...after].filter((s) => !before.has(s));
  for (const state of entry.after) {
    if (!visited.has(state)) {
      visited.add(state);
      const g = states.get(state);
      if (g) g.dataset.visited = "true";
    }
  }
  if (entered.length && before.size) {
    const into = edges.filter((e) => entered.includes(e.dataset.to));
    const out = into.filter((e) => exited.has(e.dataset.from));
    for (const e of (out.length ? out : into.filter((e) => before.has(e.dataset.from)))) {
      e.dataset.taken = "true";
    }
  }
  light(entry.after);
}

// -- the timeline ----------------------------------------------------------------------

const timeline = document.querySelector("#timeline tbody");
const MAX_ROWS = 2000;
const seen = new Set();

function entryRow(entry) {
  return el("tr", {dataset: {seq: entry.seq, kind: entry.kind}},
    el("td", {}, String(entry.seq)),
    el("td", {title: time(entry.at)}, clock(entry.at)),
    el("td", {}, entry.kind),
    el("td", {}, entry.event || ""),
    el("td", {}, entry.after.length ? entry.after.join(", ") : ""),
    el("td", {class: "data"}, [entry.data, entry.note].filter(Boolean).join(" · ")));
}

function onEntry(entry) {
  walk(entry);
  timeline.prepend(entryRow(entry));
  while (timeline.rows.length > MAX_ROWS) timeline.deleteRow(-1);
  document.body.dataset.seq = String(entry.seq);
  document.dispatchEvent(new CustomEvent("interlock:step", {detail: {seq: entry.seq, at: entry.at}}));
}

// -- what it is, now -------------------------------------------------------------------

function facts(node, pairs) {
  fill(node, ...pairs.filter(([, v]) => v !== null && v !== undefined && v !== "")
    .flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
}

function renderNow() {
  const info = data.info;
  const status = document.getElementById("status");
  const shown = data.ralph && data.ralph.status === "paused" ? "paused" : info.status;
  status.dataset.status = shown;
  status.textContent = shown;
  const timers = info.timers.map((t) => `${t.event} in ${t.state}: ${time(t.deadline)}`);
  facts(document.getElementById("now"), [
    ["active", info.active.join(", ")],
    ["waiting for", data.listening.join(", ") || "nothing (no event leads out)"],
    ["timers", timers.join("; ")],
    ["queued events", info.queued ? String(info.queued) : ""],
    ["runner", info.runner ? `pid ${info.runner.pid} on ${info.runner.host}` : ""],
    ["failure", info.failure],
    ["last step", `#${info.seq}, ${ago(info.updated_at)}`],
    ["started", time(info.created_at)],
    ["cost", money(costOf())],
  ]);
  const listening = document.getElementById("listening");
  if (listening) fill(listening, ...data.listening.map((e) => el("option", {}, e)));
}

function costOf() {
  if (data.ralph) return data.ralph.spend && data.ralph.spend.cost_usd;
  const costs = data.invocations.map((i) => i.usage && i.usage.costUsd).filter((c) => c != null);
  return costs.length ? costs.reduce((a, b) => a + b, 0) : null;
}

// -- Ralph -----------------------------------------------------------------------------

function renderRalph() {
  const r = data.ralph;
  if (!r || !document.getElementById("ralph")) return;
  const agent = r.agent ? `${r.agent.role}${r.agent.task ? ` on ${r.agent.task}` : ""}`
    + (r.agent.attempt > 1 ? ` (try ${r.agent.attempt})` : "") : "";
  const spend = r.spend || {};
  facts(document.getElementById("ralph-facts"), [
    ["state", r.state], ["status", r.status],
    ["iteration", `${r.iteration}${r.max_iterations ? ` of ${r.max_iterations}` : ""}`],
    ["batch", r.batch ? `${r.batch} of ${r.batches}` : ""],
    ["running agent", agent],
    ["running Executors", (r.workers || []).map((w) =>
      `${w.task} (${Math.round(w.elapsed)} s)`).join(", ")],
    ["merge queue", (r.merge_queue || []).length
      ? `${r.merge_queue.join(" ")} into ${r.integration || "the integration branch"}` : ""],
    ["worktrees", (r.worktrees || []).map((w) => `${w.task}: ${w.state}`
      + (w.conflicts && w.conflicts.length ? ` (${w.conflicts.join(", ")})` : "")).join(", ")],
    ["take the work", r.integration ? `git merge ${r.integration}` : ""],
    ["agent's last lines", r.agent && r.agent.last_lines && r.agent.last_lines.length
      ? el("pre", {}, r.agent.last_lines.join("\n")) : ""],
    ["spend", [spend.input_tokens != null ? `${spend.input_tokens} tokens in` : "",
               spend.output_tokens != null ? `${spend.output_tokens} out` : "",
               money(spend.cost_usd)].filter(Boolean).join(", ")],
    ["elapsed", r.elapsed != null ? `${Math.round(r.elapsed)} s` : ""],
    ["waiting for", r.waiting_for], ["paused for", r.paused_for],
    ["stopped", r.stop ? `${r.stop.reason}${r.stop.detail ? `: ${r.stop.detail}` : ""}` : ""],
  ]);
  fill(document.querySelector("#tasks tbody"), ...r.tasks.map((t) => el("tr",
    {dataset: {task: t.id, marker: t.marker}},
    el("td", {}, t.id), el("td", {class: "mono"}, `[${t.marker}]`), el("td", {}, t.title),
    el("td", {}, t.note || ""))));
  renderIterations();
  renderSignals(r);
  renderSubagents();
  renderKnowledge(r);
  renderQuestions(r);
  renderCorrections(r);
}

const ITERATION_FILES = ["progress.md", "plan.yaml", "questions.md", "corrections.md"];
function renderIterations() {
  const byIteration = new Map();
  for (const f of data.files) {
    const found = f.folder === "ralph" && /^iterations\/(\d+)\/([^/]+)$/.exec(f.path);
    if (found && ITERATION_FILES.includes(found[2])) {
      const n = Number(found[1]);
      if (!byIteration.has(n)) byIteration.set(n, []);
      byIteration.get(n).push(f);
    }
  }
  const rows = [...byIteration.entries()].sort((a, b) => a[0] - b[0]).map(([n, files]) =>
    el("li", {}, `iteration ${n}: `, ...files.sort((a, b) => ITERATION_FILES.indexOf(a.path.split("/")[2])
      - ITERATION_FILES.indexOf(b.path.split("/")[2])).flatMap((f, i) =>
      [i ? ", " : "", el("a", {href: fileUrl(f)}, f.path.split("/")[2])])));
  fill(document.getElementById("iterations"), ...(rows.length ? rows : [el("li", {class: "muted"}, "none yet")]));
}

function renderSignals(r) {
  const handled = r.signals.map((s) => el("li", {}, `${s.type} (${s.target})`
    + `${s.message ? `: ${s.message}` : ""} — ${s.action || "handled"}${s.at ? ` at ${s.at}` : ""}`));
  const waiting = r.pending_signals.map((name) => el("li", {class: "muted"}, `waiting: ${name}`));
  fill(document.getElementById("signals"), ...handled, ...waiting);
  if (!handled.length && !waiting.length) fill(document.getElementById("signals"), el("li", {class: "muted"}, "none yet"));
}

function renderSubagents() {
  const children = data.invocations.filter((i) => i.kind === "machine" && i.session === id);
  fill(document.getElementById("subagents"), ...children.map((c) => el("li", {},
    el("a", {href: `/s/${encodeURIComponent(c.child)}`}, c.child), ` ${c.state} — `,
    el("span", {class: `pill ${c.outcome || "running"}`}, c.outcome || "running"),
    c.event ? ` ${c.event}` : "")));
}

function renderKnowledge(r) {
  const prefix = `iterations/${r.iteration}/knowledge/`;
  const notes = data.files.filter((f) => f.folder === "ralph" && f.path.startsWith(prefix));
  fill(document.getElementById("knowledge"), ...(notes.length ? notes.map((f) => el("li", {},
    el("a", {href: fileUrl(f)}, f.path.slice(prefix.length)))) : [el("li", {class: "muted"}, "none staged")]));
}

let questionsShown = "";
function renderQuestions(r) {
  const box = document.getElementById("questions");
  const key = JSON.stringify(r.questions || []);
  if (key === questionsShown) return;
  questionsShown = key;
  if (!r.questions || !r.questions.length) { fill(box); return; }
  const fields = r.questions.map((q) => questionField(q, "q"));
  const submit = el("button", {type: "submit"}, "Answer and go on");
  const form = el("form", {class: "questions-form", "aria-label": "the Questioner's questions"},
    el("h3", {}, "The Questioner asks"), ...fields.map((f) => f.node), submit);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const answers = Object.fromEntries(r.questions.map((q, n) => [q.id, fields[n].value()]));
    said(outcome, await busy(submit, () => post(`${base}/answers`, {answers})));
  });
  fill(box, form);
}

let reviewing = null;
let reviewEnd = null;  // how the last review ended, kept in view
function renderCorrections(r) {
  const box = document.getElementById("corrections");
  if (reviewing) return;
  const ended = reviewEnd ? el("p", {class: "review-end"}, reviewEnd) : "";
  if (!r.to_correct || !r.to_correct.length) { fill(box, ended); return; }
  fill(box, ended, el("p", {}, "Rejected tasks whose correction you can give: ",
    ...r.to_correct.map((task) => el("button", {type: "button", dataset: {review: task},
      onclick: (e) => startReview(task, e.currentTarget)}, `Review ${task}`))));
}

async function startReview(task, button) {
  const result = await busy(button, () => post(`${base}/review`, {task}));
  said(outcome, result);
  if (result.state) showReview(result.state);
}

function showReview(state) {
  const box = document.getElementById("corrections");
  reviewing = state.review;
  const parts = [el("h3", {}, `Review of ${state.task}`)];
  if (state.output) parts.push(el("details", {}, el("summary", {}, `the output of ${state.output.node}`),
                                   el("pre", {}, state.output.text)));
  if (state.question) {
    const field = questionField(state.question, "r");
    const submit = el("button", {type: "submit"}, "Answer");
    const stop = el("button", {type: "button", class: "danger"}, "Stop the review");
    const form = el("form", {class: "review-form", "aria-label": `review of ${state.task}`},
                    ...parts, field.node, submit, " ", stop);
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const next = await busy(submit, () => post(`/reviews/${state.review}`,
                                                  {id: state.question.id, answer: field.value()}));
      said(outcome, next);
      if (next.state) showReview(next.state);
    });
    stop.addEventListener("click", async () => {
      const next = await busy(stop, () => post(`/reviews/${state.review}`, {abort: true}));
      said(outcome, next);
      if (next.state) showReview(next.state);
    });
    fill(box, form);
    field.node.querySelector("input, textarea")?.focus();
    return;
  }
  reviewing = null;
  const end = state.outcome ? `the review ended: ${state.outcome.resolution}`
    + (state.outcome.staged ? "; a correction is staged for the task's next Executor" : "")
    : `the review ended: ${state.error || "no outcome"}`;
  const marked = state.result && state.result.corrected ? "; the session was told it is corrected" : "";
  reviewEnd = end + marked;
  renderCorrections(data.ralph);
}

// -- invocations and files -------------------------------------------------------------

function renderInvocations() {
  const box = document.getElementById("invocations");
  const open = new Set([...box.querySelectorAll("details[open]")].map((d) => d.dataset.invocation));
  const depthOf = (session) => session === id ? 0 : session.split(".").length - id.split(".").length;
  fill(box, ...data.invocations.map((inv) => {
    const cost = inv.usage && inv.usage.costUsd != null ? money(inv.usage.costUsd) : "";
    const details = el("details", {class: "invocation", dataset: {invocation: inv.id, depth: depthOf(inv.session)}},
      el("summary", {},
        el("strong", {}, inv.state), el("span", {}, `${inv.invoke} (${inv.kind})`),
        el("span", {class: `pill ${inv.outcome || "running"}`}, inv.outcome || "running"),
        inv.reason ? el("span", {class: "muted"}, inv.reason) : "",
        el("span", {class: "muted"}, clock(inv.started_at)),
        cost ? el("span", {}, cost) : "",
        inv.session !== id ? el("span", {class: "muted"}, inv.session) : ""));
    details.addEventListener("toggle", () => { if (details.open) loadInvocation(details, inv); });
    if (open.has(inv.id)) { details.open = true; }
    return details;
  }));
  if (!data.invocations.length) fill(box, el("p", {class: "muted"}, "none"));
}

async function loadInvocation(details, inv) {
  const response = await fetch(`/api/s/${encodeURIComponent(inv.session)}/invocations/${encodeURIComponent(inv.id)}`);
  const full = await response.json();
  const body = el("div", {class: "invocation-body"});
  const block = (title, text) => text ? [el("h4", {}, title), el("pre", {}, text)] : [];
  const json = (v) => v === null || v === undefined ? "" : JSON.stringify(v, null, 2);
  if (full.child) body.append(el("p", {}, "child session ", el("a", {href: `/s/${encodeURIComponent(full.child)}`}, full.child)));
  body.append(...block("Prompt", full.prompt), ...block("Answer", json(full.answer)),
              ...block("Output", full.output), ...block("Error", full.error),
              ...block("Usage", json(full.usage)));
  for (const [n, call] of (full.calls || []).entries()) {
    body.append(el("h4", {}, `Call ${n + 1}${call.attempt ? ` (try ${call.attempt})` : ""}`),
                ...block("Prompt", call.prompt), ...block("Answer", call.text),
                ...block("Error", call.error), ...block("Usage", json(call.usage)));
  }
  details.querySelector(".invocation-body")?.remove();
  details.append(body);
}

function fileUrl(f) {
  return `${base}/files/${f.folder}/${f.path.split("/").map(encodeURIComponent).join("/")}`;
}

function renderFiles() {
  const groups = {ralph: "the Ralph folder (.ralph-sessions)", session: "the session folder (.interlock/sessions)"};
  const box = document.getElementById("files");
  const parts = [];
  for (const [folder, title] of Object.entries(groups)) {
    const files = data.files.filter((f) => f.folder === folder);
    if (!files.length) continue;
    parts.push(el("h3", {}, title), el("ul", {class: "plain files"}, ...files.map((f) => el("li", {},
      el("a", {href: fileUrl(f)}, f.path), el("span", {class: "muted"}, ` ${f.size} bytes, ${ago(f.modified)}`)))));
  }
  fill(box, ...(parts.length ? parts : [el("p", {class: "muted"}, "none")]));
}

function renderAll() {
  renderNow();
  renderRalph();
  renderInvocations();
  renderFiles();
  light(data.info.active);
}

// -- acting ----------------------------------------------------------------------------

function formBody(form) {
  return Object.fromEntries(new FormData(form).entries());
}

async function act(path, body, button) {
  const result = await busy(button, () => post(`${base}/${path}`, body));
  said(outcome, result);
  return result;
}

document.getElementById("signal-form").addEventListener("submit", (event) => {
  event.preventDefault();
  act("signal", formBody(event.target), event.submitter);
});
document.getElementById("send-form")?.addEventListener("submit", (event) => {
  event.preventDefault();
  act("send", formBody(event.target), event.submitter);
});
document.getElementById("cancel-form").addEventListener("submit", (event) => {
  event.preventDefault();
  if (confirm(`Cancel session ${id}? Its agents are stopped; it cannot go on.`)) {
    act("cancel", formBody(event.target), event.submitter);
  }
});
for (const button of document.querySelectorAll("button[data-signal]")) {
  button.addEventListener("click", () => {
    const message = document.querySelector("#signal-form input[name=message]").value;
    act("signal", {type: button.dataset.signal, message}, button);
  });
}
for (const button of document.querySelectorAll("button[data-action=resume]")) {
  button.addEventListener("click", () => {
    const message = document.querySelector("#signal-form input[name=message]").value;
    act("resume", message ? {message} : {}, button);
  });
}

// -- live ------------------------------------------------------------------------------

renderAll();
keepInView();
const stream = listen(`/events/s/${encodeURIComponent(id)}`, {
  entry(entry) {  // a reconnected stream sends the journal again: each entry once
    const key = `${entry.seq} ${entry.kind} ${entry.event} ${entry.at}`;
    if (!seen.has(key)) { seen.add(key); onEntry(entry); }
  },
  session(next) { data = next; renderAll(); },
  end() { stream.close(); document.body.dataset.ended = "true"; },
});
