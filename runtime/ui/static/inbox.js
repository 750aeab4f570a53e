// The inbox page: the project's inbox messages, and ack / done / failed for each.
import {busy, el, fill, post, said} from "./common.js";

const body = document.querySelector("#messages tbody");
const status = document.getElementById("f-status");
const outcome = document.getElementById("outcome");
const MARKS = ["acked", "done", "failed"];

async function load() {
  const query = status.value ? `?status=${encodeURIComponent(status.value)}` : "";
  const response = await fetch(`/api/inbox${query}`);
  const messages = await response.json();
  if (!response.ok) { said(outcome, {outcome: "error", detail: messages.error}); return; }
  fill(body, ...messages.map((m) => el("tr", {dataset: {message: m.id, status: m.status}},
    el("td", {class: "mono"}, m.id), el("td", {}, m.type), el("td", {}, m.from),
    el("td", {}, el("span", {class: "badge", dataset: {status: m.status}}, m.status)),
    el("td", {}, m.correlation_id || ""), el("td", {}, m.body || ""),
    el("td", {}, ...MARKS.map((mark) => el("button", {
      type: "button", "aria-label": `mark ${m.id} ${mark}`,
      onclick: async (event) => {
        said(outcome, await busy(event.currentTarget, () => post(`/inbox/${encodeURIComponent(m.id)}`, {status: mark})));
        load();
      }}, mark))))));
  if (!messages.length) fill(body, el("tr", {}, el("td", {colspan: 7, class: "muted"}, "no messages")));
}

status.addEventListener("input", load);
document.getElementById("reload").addEventListener("click", load);
load();
