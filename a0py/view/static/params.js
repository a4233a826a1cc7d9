// The parameters panel: the configuration of every cfg topic the view
// watches, as the server's parameters (CFG_TOPIC.path.to.field, one a value;
// see docs/view.md), grouped by cfg topic and editable. A value is set with
// the protocol's setParameters, behind `a0py view --allow-set GLOB`; the
// server's parameter updates keep the panel current.

import { allows, why } from "./access.js";
import { send } from "./socket.js";
import { state } from "./state.js";
import { $, el } from "./ui.js";

const PAGE_REQUEST = "a0py.page";
const rows = new Map();  // parameter name -> its row

// The cfg topics (their channels are advertised as T:cfg).
function cfgTopics() {
  return [...state.byTopic.values()].filter((ch) => ch.a0pyProtocol === "cfg").map((ch) => ch.topic.slice(0, -4));
}

// The cfg topic a parameter belongs to: the longest whose name, then ".", starts it.
export function cfgTopicOf(name) {
  let best = null;
  for (const t of cfgTopics()) {
    if ((name === t || name.startsWith(t + ".")) && (best === null || t.length > best.length)) best = t;
  }
  return best;
}

// Asks for every parameter (the answer replaces what the panel holds).
export function requestParameters() {
  if (!state.recording) send({ op: "getParameters", parameterNames: [], id: PAGE_REQUEST });
}

export function onParameterValues(msg) {
  if (msg.id === PAGE_REQUEST) state.params.clear();
  for (const p of msg.parameters || []) {
    if ("value" in p) state.params.set(p.name, { value: p.value, type: p.type || null });
    else state.params.delete(p.name);
  }
  const fresh = [...state.params.keys()].filter((n) => !state.paramsSubscribed.has(n));
  if (fresh.length) {
    for (const n of fresh) state.paramsSubscribed.add(n);
    send({ op: "subscribeParameterUpdates", parameterNames: fresh });
  }
  state.dirty.params = true;
}

export function resetParameters() {
  state.params.clear();
  state.paramsSubscribed.clear();
  state.dirty.params = true;
}

// A value as the panel shows it: strings and base64 as they are, the rest as JSON.
function text(p) { return typeof p.value === "string" ? p.value : JSON.stringify(p.value); }

function typeName(p) {
  if (p.type) return p.type;
  if (Array.isArray(p.value)) return "array";
  if (p.value !== null && typeof p.value === "object") return "object";
  return Number.isInteger(p.value) ? "integer" : typeof p.value;
}

// The value to send for what was typed in a parameter's box, by the parameter's type.
function parse(p, typed) {
  const t = typeName(p);
  if (t === "float64" || t === "integer") {
    const v = Number(typed);
    if (typed.trim() === "" || !Number.isFinite(v)) throw new Error(`${JSON.stringify(typed)} is not a number`);
    if (t === "integer" && !Number.isInteger(v)) throw new Error(`${typed} is not an integer`);
    return v;
  }
  if (t === "boolean") {
    if (typed !== "true" && typed !== "false") throw new Error("true or false");
    return typed === "true";
  }
  if (t === "string" || t === "byte_array") return typed;
  return JSON.parse(typed);
}

function setParameter(name) {
  const row = rows.get(name);
  const p = state.params.get(name);
  if (!row || !p) return;
  const input = row.querySelector("input.value");
  let value;
  try { value = parse(p, input.value); } catch (e) {
    row.querySelector(".error").textContent = e.message;
    return;
  }
  row.querySelector(".error").textContent = "";
  const param = { name, value };
  if (p.type) param.type = p.type;
  send({ op: "setParameters", parameters: [param], id: `a0py.set.${name}` });
  input.dataset.edited = "";
}

function newRow(name) {
  const input = el("input", { class: "value", type: "text", "aria-label": `value of ${name}` });
  input.oninput = () => { input.dataset.edited = "1"; };
  input.onkeydown = (e) => { if (e.key === "Enter") setParameter(name); };
  const set = el("button", { class: "set", type: "button" }, "Set");
  set.onclick = () => setParameter(name);
  const row = el("tr", { class: "param", "data-param": name },
                 el("td", { class: "name mono" }), el("td", {}, input), el("td", { class: "type hint" }),
                 el("td", {}, set), el("td", { class: "error" }));
  rows.set(name, row);
  return row;
}

export function renderParams() {
  const body = $("params").tBodies[0];
  const byTopic = new Map();
  for (const name of [...state.params.keys()].sort()) {
    const topic = cfgTopicOf(name) || name.split(".")[0];
    if (!byTopic.has(topic)) byTopic.set(topic, []);
    byTopic.get(topic).push(name);
  }
  const out = [];
  for (const [topic, names] of byTopic) {
    const ok = allows("set", topic);
    out.push(el("tr", { class: "cfg-topic", "data-cfg": topic },
                el("td", { colspan: "5" }, el("span", { class: "mono" }, topic),
                   el("span", { class: "hint" }, ok ? " — editable" : ` — ${why("set", topic)}`))));
    for (const name of names) {
      const p = state.params.get(name);
      const row = rows.get(name) || newRow(name);
      row.cells[0].textContent = name === topic ? "(the whole configuration)" : name.slice(topic.length + 1);
      row.cells[0].title = name;
      const input = row.querySelector("input.value");
      if (document.activeElement !== input && !input.dataset.edited) input.value = text(p);
      input.disabled = !ok;
      input.title = ok ? `${name}: Enter sets it` : why("set", topic);
      row.querySelector("button.set").disabled = !ok;
      row.cells[2].textContent = typeName(p);
      out.push(row);
    }
  }
  for (const name of [...rows.keys()]) if (!state.params.has(name)) rows.delete(name);
  body.replaceChildren(...out);
  $("params-empty").hidden = state.params.size > 0;
  $("params-why").textContent = why("set");
}
