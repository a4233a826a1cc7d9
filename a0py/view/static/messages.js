// The messages panel: the selected topic's latest messages, newest first,
// each with its time, seq, size, headers and payload (JSON with clickable
// numbers, text, or hex); a log as one line a message; an image channel's
// newest frame above them (image.js).

import { describe } from "./channels.js";
import { packetOf, valueOf } from "./content.js";
import { imagePanel } from "./image.js";
import { recordSample, state } from "./state.js";
import { $, el, fmtTime, hexDump, nowMs, utf8, utf8Strict } from "./ui.js";

const TEXT_LIMIT = 65536;  // bytes of a payload shown as text
const HEX_LIMIT = 4096;    // bytes of a payload shown in hex

// JSON pretty-printed, numbers clickable (adds them to the plot).
function jsonNodes(value, path, indent, out) {
  const pad = "  ".repeat(indent);
  if (typeof value === "number" || typeof value === "boolean") {
    out.push(el("span", { class: "num", title: `plot ${path || "value"}`, "data-path": path }, JSON.stringify(value)));
  } else if (Array.isArray(value)) {
    if (!value.length) { out.push("[]"); return; }
    out.push("[\n");
    value.forEach((v, i) => { out.push(pad + "  "); jsonNodes(v, `${path}[${i}]`, indent + 1, out); out.push(i + 1 < value.length ? ",\n" : "\n"); });
    out.push(pad + "]");
  } else if (value && typeof value === "object") {
    const keys = Object.keys(value);
    if (!keys.length) { out.push("{}"); return; }
    out.push("{\n");
    keys.forEach((k, i) => {
      out.push(`${pad}  ${JSON.stringify(k)}: `);
      jsonNodes(value[k], path ? `${path}.${k}` : k, indent + 1, out);
      out.push(i + 1 < keys.length ? ",\n" : "\n");
    });
    out.push(pad + "}");
  } else {
    out.push(JSON.stringify(value));
  }
}

// How "auto" shows a message: JSON if it is, text if it reads as text, else hex.
function autoMode(msg, p) {
  if (valueOf(msg) !== undefined) return "json";
  try { const t = utf8Strict.decode(p); return /[\x00-\x08\x0e-\x1f]/.test(t) ? "hex" : "text"; }
  catch (e) { return "hex"; }
}

function payloadNode(msg, mode) {
  const p = packetOf(msg).payload;
  const pre = el("pre", { class: "payload" });
  const m = mode === "auto" ? autoMode(msg, p) : mode;
  pre.dataset.mode = m;
  if (m === "json") {
    const v = valueOf(msg);
    if (v === undefined) { pre.textContent = "(not JSON) " + utf8.decode(p.subarray(0, HEX_LIMIT)); return pre; }
    const nodes = [];
    jsonNodes(v, "", 0, nodes);
    pre.append(...nodes);
  } else if (m === "text") {
    pre.textContent = utf8.decode(p.subarray(0, TEXT_LIMIT)) + (p.length > TEXT_LIMIT ? `\n… ${p.length - TEXT_LIMIT} more bytes` : "");
  } else {
    pre.textContent = hexDump(p, HEX_LIMIT);
  }
  return pre;
}

function headerValue(pkt, key) { return (pkt.headers.find(([k]) => k === key) || [])[1]; }

function headerTable(pkt) {
  return el("table", { class: "headers" },
            ...pkt.headers.map(([k, v]) => el("tr", null, el("td", { text: k }), el("td", { text: v }))));
}

// A log message: one line of time, level and text; its headers folded below.
function logNode(msg, pkt) {
  const level = headerValue(pkt, "a0_log_level") || "INFO";
  const logger = headerValue(pkt, "logger");
  const text = utf8.decode(pkt.payload.subarray(0, TEXT_LIMIT));
  return el("div", { class: "msg log", "data-level": level },
    el("div", { class: "logline" },
      el("span", { class: "time", text: fmtTime(msg.logMs) }),
      el("span", { class: "level", text: level }),
      logger ? el("span", { class: "logger", text: logger }) : "",
      el("span", { class: "text", text })),
    el("details", null, el("summary", null, `headers (${pkt.headers.length})`), headerTable(pkt)));
}

function messageNode(msg, mode) {
  const pkt = packetOf(msg);
  const seq = state.codec ? headerValue(pkt, state.codec.names.transport_seq) : undefined;
  const meta = el("div", { class: "meta" },
    el("span", { class: "time", text: fmtTime(msg.logMs) }),
    el("span", { text: seq !== undefined ? `seq ${seq}` : "" }),
    el("span", { text: `${pkt.payload.length} bytes` }));
  const det = el("details", null, el("summary", null, `headers (${pkt.headers.length})${pkt.id ? " · id " + pkt.id : ""}`),
                 headerTable(pkt));
  return el("div", { class: "msg", "data-seq": seq || "" }, meta, det, payloadNode(msg, mode));
}

export function renderMessages() {
  const box = $("messages");
  const name = state.selected;
  const ch = name && state.byTopic.get(name);
  if (!name) { box.replaceChildren(el("p", { class: "hint" }, "Click a topic to see its latest messages.")); return; }
  $("topic-info").textContent = ch ? `${describe(ch)} · channel ${ch.id}` : "nothing published yet";
  const list = state.messages.get(name) || [];
  const keep = Number($("keep").value);
  const mode = $("render-mode").value;
  const shown = list.slice(-keep).reverse();
  if (!shown.length) { box.replaceChildren(el("p", { class: "hint" }, "Waiting for a message…")); return; }
  const head = ch && ch.a0pyImage ? [imagePanel(name, shown[0])] : [];
  const isLog = ch && ch.a0pyProtocol === "log";
  const nodes = shown.map((msg) => (isLog ? logNode(msg, packetOf(msg)) : messageNode(msg, mode)));
  box.replaceChildren(...head, ...nodes);
  if (!state.recording) recordSample(state.shown, "shownN", nowMs() - shown[0].logMs);
}
