// The plotted series: a numeric field of a topic over time, in a ring of
// SERIES_POINTS points. Live, a series grows from the messages received; in
// a recording it is the field over the whole recording, asked of the server
// (a0py.fetchSeries) and answered at once (a0py.series). A field is a path
// ("pose.theta", "v[2]") into a message's JSON value.

import { updateSubscriptions } from "./channels.js";
import { valueOf } from "./content.js";
import { isOpen, send } from "./socket.js";
import { SERIES_POINTS, state } from "./state.js";
import { nsToMs } from "./ui.js";

// ---- numeric fields ----

const MAX_PATHS = 200;
const MAX_DEPTH = 8;
const ARRAY_ITEMS = 16;  // of an array, the first items offered

// "a.b[2].c" as ["a", "b", 2, "c"].
export function parsePath(path) {
  const parts = [];
  for (const m of path.matchAll(/([^.[\]]+)|\[(\d+)\]/g)) parts.push(m[2] !== undefined ? Number(m[2]) : m[1]);
  return parts;
}

// The number at path (parsed) in value (booleans as 0 and 1), or undefined.
export function numberAt(value, path) {
  let v = value;
  for (const k of path) { if (v === null || typeof v !== "object") return undefined; v = v[k]; }
  if (typeof v === "number" && Number.isFinite(v)) return v;
  if (typeof v === "boolean") return v ? 1 : 0;
  return undefined;
}

// The paths of value's numbers and booleans, appended to out.
export function numericPaths(value, prefix, out, depth) {
  if (out.length >= MAX_PATHS || depth > MAX_DEPTH) return out;
  if (typeof value === "number" || typeof value === "boolean") { if (prefix) out.push(prefix); }
  else if (Array.isArray(value)) value.slice(0, ARRAY_ITEMS).forEach((v, i) => numericPaths(v, `${prefix}[${i}]`, out, depth + 1));
  else if (value && typeof value === "object") for (const [k, v] of Object.entries(value)) numericPaths(v, prefix ? `${prefix}.${k}` : k, out, depth + 1);
  return out;
}

// The numeric fields a JSON schema names (objects' properties, not array items).
export function schemaPaths(schema, prefix, out, depth) {
  if (!schema || typeof schema !== "object" || out.length >= MAX_PATHS || depth > MAX_DEPTH) return out;
  const t = schema.type;
  if ((t === "number" || t === "integer" || t === "boolean") && prefix) out.push(prefix);
  else if (t === "object" && schema.properties && typeof schema.properties === "object") {
    for (const [k, v] of Object.entries(schema.properties)) schemaPaths(v, prefix ? `${prefix}.${k}` : k, out, depth + 1);
  }
  return out;
}

// ---- series ----

const COLORS = ["#2563eb", "#dc2626", "#16a34a", "#d97706", "#7c3aed", "#0891b2", "#db2777", "#4b5563"];

function changed() {
  updateSubscriptions();
  requestSeries();
  state.dirty.plot = state.dirty.legend = true;
}

// Plots field `path` ("pose.theta") of `topic`; nothing if it is plotted already.
export function addSeries(topic, path) {
  if (state.series.some((s) => s.topic === topic && s.path.join() === parsePath(path).join())) return;
  const s = { topic, name: path, path: parsePath(path), color: COLORS[state.series.length % COLORS.length],
              t: new Float64Array(SERIES_POINTS), v: new Float64Array(SERIES_POINTS), n: 0, head: 0, total: 0,
              whole: state.recording, loading: false, loaded: false };
  state.series.push(s);
  if (!s.whole) for (const msg of state.messages.get(topic) || []) plotPoint(s, msg);
  changed();
}

export function removeSeries(s) {
  state.series = state.series.filter((x) => x !== s);
  changed();
}

export function pushPoint(s, t, v) {
  const i = (s.head + s.n) % SERIES_POINTS;
  s.t[i] = t; s.v[i] = v; s.total++;
  if (s.n < SERIES_POINTS) s.n++; else s.head = (s.head + 1) % SERIES_POINTS;
}

// Adds msg's number at the series' path, if it has one; whether it had.
function plotPoint(s, msg) {
  const v = numberAt(valueOf(msg), s.path);
  if (v === undefined) return false;
  pushPoint(s, msg.logMs, v);
  return true;
}

// Adds a received message to every series of its topic that grows from messages.
export function plotMessage(msg) {
  let plotted = false;
  for (const s of state.series) {
    if (s.topic === msg.ch.topic && !s.whole && plotPoint(s, msg)) plotted = true;
  }
  if (plotted) state.dirty.plot = true;
}

// Forgets the points of every series built from messages (after a seek).
export function restartSeries() {
  for (const s of state.series) if (!s.whole) { s.n = 0; s.head = 0; }
}

// Asks the server for every whole-recording series not yet loaded (again after a reconnection).
export function requestSeries() {
  for (const s of state.series) {
    if (!s.whole || s.loaded || s.loading) continue;
    const ch = state.byTopic.get(s.topic);
    if (!ch || !isOpen()) continue;
    const id = state.nextRequest++;
    state.seriesRequests.set(id, s);
    s.loading = true;
    send({ op: "a0py.fetchSeries", requestId: id, channelId: ch.id, path: s.name, maxPoints: SERIES_POINTS });
  }
}

// The server's answer to a0py.fetchSeries.
export function onSeries(msg) {
  const s = state.seriesRequests.get(msg.requestId);
  if (!s) return;
  state.seriesRequests.delete(msg.requestId);
  s.loading = false;
  if (!state.series.includes(s) || !Array.isArray(msg.t) || !Array.isArray(msg.v)) return;
  const startMs = nsToMs(BigInt(msg.startNs));
  s.n = 0; s.head = 0; s.total = 0;
  const n = Math.min(msg.t.length, msg.v.length, SERIES_POINTS);
  for (let i = 0; i < n; i++) pushPoint(s, startMs + msg.t[i] / 1e6, msg.v[i]);
  s.loaded = true;
  state.dirty.plot = true;
}
