// interlock ui: what every page uses. Text from sessions, specs and agents is untrusted:
// it only ever reaches the page as textContent (el() below), never as HTML.

const CSRF = document.querySelector('meta[name="csrf-token"]').content;

/** An element: el("td", {class: "x", title: t}, "text", child, ...). Strings are text. */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "dataset") Object.assign(node.dataset, value);
    else if (key.startsWith("on") && typeof value === "function") node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  append(node, children);
  return node;
}

function append(node, children) {
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** Replace the children of ``node`` by ``children``. */
export function fill(node, ...children) {
  node.replaceChildren();
  append(node, children);
  return node;
}

/** The JSON a page was rendered with (a <script type="application/json">). */
export function initial(id) {
  return JSON.parse(document.getElementById(id).textContent);
}

/** POST ``body`` as JSON with this server's CSRF token; the answer's JSON. */
export async function post(url, body) {
  const response = await fetch(url, {
    method: "POST", credentials: "same-origin",
    headers: {"content-type": "application/json", "x-csrf-token": CSRF},
    body: JSON.stringify(body),
  });
  let data;
  try { data = await response.json(); } catch { data = {}; }
  if (!data.outcome) data = {outcome: "error", detail: data.error || `${response.status} ${response.statusText}`};
  return data;
}

/** Say what an action did in ``node`` (a role=status region). */
export function said(node, result) {
  node.dataset.outcome = result.outcome;
  fill(node, `${result.outcome}: ${result.detail || ""}`);
}

/** Run ``action`` with ``button`` disabled meanwhile. */
export async function busy(button, action) {
  if (button) button.disabled = true;
  try { return await action(); } finally { if (button) button.disabled = false; }
}

export function time(seconds) {
  if (seconds === null || seconds === undefined) return "";
  const d = new Date(seconds * 1000);
  const pad = (n, w = 2) => String(n).padStart(w, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

export function clock(seconds) {
  const d = new Date(seconds * 1000);
  const pad = (n, w = 2) => String(n).padStart(w, "0");
  return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
}

export function ago(seconds) {
  if (!seconds) return "";
  const s = Math.max(0, Date.now() / 1000 - seconds);
  if (s < 60) return `${Math.round(s)} s ago`;
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  if (s < 86400) return `${Math.round(s / 3600)} h ago`;
  return `${Math.round(s / 86400)} d ago`;
}

export function money(cost) {
  return cost === null || cost === undefined ? "" : `$${Number(cost).toFixed(4)}`;
}

/** A live stream of server-sent events: ``handlers`` by event name. */
export function listen(url, handlers) {
  const source = new EventSource(url);
  for (const [name, handler] of Object.entries(handlers)) {
    source.addEventListener(name, (event) => handler(JSON.parse(event.data)));
  }
  return source;
}

/**
 * A question of the question protocol (select, multi, text, confirm) as a fieldset;
 * ``value()`` reads the answer back (a key, a list of keys, text).
 */
export function questionField(question, prefix) {
  const name = `${prefix}-${question.id}`;
  const box = el("fieldset", {class: "question", dataset: {question: question.id}});
  box.append(el("legend", {}, question.prompt));
  if (question.note) box.append(el("p", {class: "muted"}, question.note));
  let value;
  if (question.kind === "text") {
    const area = el("textarea", {name, required: true, "aria-label": question.prompt});
    box.append(area);
    value = () => area.value;
  } else {
    const multi = question.kind === "multi";
    const options = question.kind === "confirm"
      ? [{key: "yes", label: "Yes"}, {key: "no", label: "No"}] : question.options;
    for (const option of options) {
      const input = el("input", {type: multi ? "checkbox" : "radio", name, value: option.key});
      if (question.default === option.key) input.checked = true;
      box.append(el("label", {class: "choice"}, input, `${option.key}: ${option.label}`));
    }
    for (const back of question.back || []) {
      if (back === "<") {
        const input = el("input", {type: multi ? "checkbox" : "radio", name, value: "<"});
        box.append(el("label", {class: "choice"}, input, "< Back"));
      }
    }
    value = () => {
      const picked = [...box.querySelectorAll("input:checked")].map((i) => i.value);
      if (picked.includes("<")) return "<";
      return multi ? picked : (picked[0] || "");
    };
  }
  return {node: box, value};
}
