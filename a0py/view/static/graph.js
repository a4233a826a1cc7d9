// The graph panel: processes and topics drawn the way rqt_graph draws a ROS
// graph, from the server's connection graph (connectionGraphUpdate: which
// processes publish and subscribe to each topic, which serve its RPC). Three
// columns: the processes that publish, the topics and services, the processes
// that only subscribe; an arrow from a publisher to its topic and from a topic
// to its subscribers, a dashed line from a service to its server. The page
// subscribes to the graph while the panel is shown.

import { send } from "./socket.js";
import { state } from "./state.js";
import { $ } from "./ui.js";

const SVG = "http://www.w3.org/2000/svg";
const ROW = 34;
const COLUMN_X = [150, 470, 790];
const NODE_W = 280;

export function watchGraph(on) {
  if (on === state.graph.watching || state.recording) return;
  state.graph.watching = on;
  send({ op: on ? "subscribeConnectionGraph" : "unsubscribeConnectionGraph" });
}

export function resetGraph() {
  const g = state.graph;
  g.published.clear(); g.subscribed.clear(); g.services.clear();
  g.watching = false;
  state.dirty.graph = true;
}

export function onGraphUpdate(m) {
  const g = state.graph;
  for (const e of m.publishedTopics || []) g.published.set(e.name, e.publisherIds || []);
  for (const e of m.subscribedTopics || []) g.subscribed.set(e.name, e.subscriberIds || []);
  for (const e of m.advertisedServices || []) g.services.set(e.name, e.providerIds || []);
  for (const t of m.removedTopics || []) { g.published.delete(t); g.subscribed.delete(t); }
  for (const s of m.removedServices || []) g.services.delete(s);
  state.dirty.graph = true;
}

function svg(tag, attrs, text) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = text;
  return e;
}

function node(kind, label, x, y, data) {
  const g = svg("g", { class: `node ${kind}`, ...data });
  if (kind === "process") g.append(svg("ellipse", { cx: x, cy: y, rx: NODE_W / 2, ry: 13 }));
  else g.append(svg("rect", { x: x - NODE_W / 2, y: y - 12, width: NODE_W, height: 24, rx: 3 }));
  const t = svg("text", { x, y: y + 4, "text-anchor": "middle" }, label.length > 40 ? label.slice(0, 39) + "…" : label);
  g.append(svg("title", {}, label), t);
  return g;
}

export function renderGraph() {
  const g = state.graph;
  const topics = new Set([...g.published.keys(), ...g.subscribed.keys()].filter(
    (t) => (g.published.get(t) || []).length + (g.subscribed.get(t) || []).length > 0));
  const publishers = new Set(), subscribers = new Set();
  for (const t of topics) {
    for (const p of g.published.get(t) || []) publishers.add(p);
    for (const p of g.subscribed.get(t) || []) subscribers.add(p);
  }
  for (const ids of g.services.values()) for (const p of ids) publishers.add(p);
  const left = [...publishers].sort();
  const right = [...subscribers].filter((p) => !publishers.has(p)).sort();
  const middle = [...[...topics].sort().map((t) => ["topic", t]), ...[...g.services.keys()].sort().map((s) => ["service", s])];
  const pos = new Map();
  const rows = Math.max(left.length, middle.length, right.length, 1);
  const root = $("graph");
  root.setAttribute("viewBox", `0 0 940 ${rows * ROW + 20}`);
  root.setAttribute("height", String(rows * ROW + 20));
  const nodes = [], edges = [];
  left.forEach((p, i) => pos.set(`p:${p}`, [COLUMN_X[0], 22 + i * ROW]));
  right.forEach((p, i) => pos.set(`p:${p}`, [COLUMN_X[2], 22 + i * ROW]));
  middle.forEach(([kind, name], i) => pos.set(`${kind[0]}:${name}`, [COLUMN_X[1], 22 + i * ROW]));
  const arrow = (from, to, cls) => {
    const [x1, y1] = pos.get(from), [x2, y2] = pos.get(to);
    const a = x1 < x2 ? x1 + NODE_W / 2 : x1 - NODE_W / 2, b = x1 < x2 ? x2 - NODE_W / 2 : x2 + NODE_W / 2;
    edges.push(svg("line", { x1: a, y1, x2: b, y2, class: `edge ${cls}`, "marker-end": cls === "serves" ? "" : "url(#arrow)" }));
  };
  for (const t of topics) {
    for (const p of g.published.get(t) || []) arrow(`p:${p}`, `t:${t}`, "publishes");
    for (const p of g.subscribed.get(t) || []) {
      if (publishers.has(p)) arrow(`t:${t}`, `p:${p}`, "subscribes back");
      else arrow(`t:${t}`, `p:${p}`, "subscribes");
    }
  }
  for (const [s, ids] of g.services) for (const p of ids) arrow(`s:${s}`, `p:${p}`, "serves");
  for (const p of [...left, ...right]) {
    const [x, y] = pos.get(`p:${p}`);
    nodes.push(node("process", p, x, y, { "data-process": p }));
  }
  for (const [kind, name] of middle) {
    const [x, y] = pos.get(`${kind[0]}:${name}`);
    nodes.push(node(kind, name, x, y, kind === "topic" ? { "data-topic": name } : { "data-service": name }));
  }
  const defs = svg("defs", {});
  const marker = svg("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 7,
                                 markerHeight: 7, orient: "auto-start-reverse" });
  marker.append(svg("path", { d: "M 0 0 L 10 5 L 0 10 z" }));
  defs.append(marker);
  root.replaceChildren(defs, ...edges, ...nodes);
  $("graph-empty").hidden = nodes.length > 0;
}
