// The sessions page: every session of the store, children folded under their parent,
// filtered by status, spec and id, kept current by /events/sessions.
import {ago, el, fill, initial, listen, money, time} from "./common.js";

const start = initial("initial");
const rows = new Map(start.rows.map((row) => [row.id, row]));
let version = start.version;
const opened = new Set();
const body = document.querySelector("#sessions tbody");
const filters = {
  status: document.getElementById("f-status"),
  spec: document.getElementById("f-spec"),
  text: document.getElementById("f-text"),
};
const params = new URLSearchParams(location.search);
filters.status.value = params.get("status") || "";
filters.text.value = params.get("q") || "";

let kids = new Map();  // parent id -> its child rows, oldest first (made by render)

function cells(row, depth) {
  const link = el("a", {href: `/s/${encodeURIComponent(row.id)}`}, row.id);
  const first = el("td", {}, link);
  const children = kids.get(row.id) || [];
  if (children.length && depth === 0) {
    const open = opened.has(row.id);
    first.append(el("button", {
      type: "button", class: "fold", "aria-expanded": String(open),
      "aria-label": `${open ? "fold" : "unfold"} the ${children.length} child sessions of ${row.id}`,
      onclick: () => { open ? opened.delete(row.id) : opened.add(row.id); render(); },
    }, `${open ? "▾" : "▸"} ${children.length}`));
  }
  return [
    first,
    el("td", {title: row.spec}, row.machine),
    el("td", {}, el("span", {class: "badge", dataset: {status: row.status}}, row.status)),
    el("td", {}, row.active.join(", ")),
    el("td", {}, time(row.created_at)),
    el("td", {title: time(row.updated_at), dataset: {at: row.updated_at}}, ago(row.updated_at)),
    el("td", {}, money(row.cost)),
  ];
}

function matches(row) {
  const status = filters.status.value, spec = filters.spec.value, text = filters.text.value.trim();
  return (!status || row.status === status) && (!spec || row.machine === spec)
    && (!text || row.id.includes(text));
}

function specs() {
  const names = [...new Set([...rows.values()].map((r) => r.machine))].sort();
  const chosen = filters.spec.value || params.get("spec") || "";
  fill(filters.spec, el("option", {value: ""}, "any"), ...names.map((n) => el("option", {}, n)));
  filters.spec.value = names.includes(chosen) ? chosen : "";
}

let pending = false;
function render() {
  pending = false;
  kids = new Map();
  for (const row of rows.values()) {
    if (row.parent && rows.has(row.parent)) {
      if (!kids.has(row.parent)) kids.set(row.parent, []);
      kids.get(row.parent).push(row);
    }
  }
  for (const list of kids.values()) list.sort((a, b) => a.created_at - b.created_at);
  const top = [...rows.values()].filter((r) => !r.parent || !rows.has(r.parent))
    .sort((a, b) => b.created_at - a.created_at);
  const shown = top.filter(matches);
  const lines = [];
  for (const row of shown) {
    lines.push(el("tr", {dataset: {session: row.id, status: row.status}}, cells(row, 0)));
    if (opened.has(row.id)) {
      const walk = (id, depth) => {
        for (const child of kids.get(id) || []) {
          lines.push(el("tr", {class: "child", dataset: {session: child.id, status: child.status}},
                        cells(child, depth)));
          walk(child.id, depth + 1);
        }
      };
      walk(row.id, 1);
    }
  }
  body.replaceChildren(...lines);
  fill(document.getElementById("count"), `${shown.length} of ${top.length} sessions`
       + (rows.size > top.length ? ` (and ${rows.size - top.length} child sessions)` : ""));
  document.getElementById("empty").hidden = rows.size > 0;
  document.body.dataset.version = String(version);
}

function later() {
  if (!pending) { pending = true; requestAnimationFrame(render); }
}

for (const input of Object.values(filters)) {
  input.addEventListener("input", () => {
    const query = new URLSearchParams();
    if (filters.status.value) query.set("status", filters.status.value);
    if (filters.spec.value) query.set("spec", filters.spec.value);
    if (filters.text.value) query.set("q", filters.text.value);
    history.replaceState(null, "", query.size ? `?${query}` : location.pathname);
    later();
  });
}

specs();
render();
listen(`/events/sessions?version=${version}`, {
  rows(change) {
    if (change.reset) rows.clear();
    for (const row of change.upsert) rows.set(row.id, row);
    for (const id of change.remove) rows.delete(id);
    version = change.version;
    specs();
    later();
  },
});
setInterval(() => {  // "3 s ago" moves on without the server
  for (const cell of body.querySelectorAll("td[data-at]")) {
    cell.textContent = ago(Number(cell.dataset.at));
  }
}, 5000);
