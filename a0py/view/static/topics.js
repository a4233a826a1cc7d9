// The topic list panel: one row a topic with its rate, bandwidth, missed
// count and the messages the server dropped for this page (from the server's
// stats channel); a click selects the topic.

import { describe, updateSubscriptions } from "./channels.js";
import { STATS_TOPIC, state } from "./state.js";
import { $, el, fmtBandwidth, fmtRate } from "./ui.js";

// Shows `name`'s messages (and subscribes to it).
export function select(name) {
  state.selected = name;
  state.latencyN = 0; state.shownN = 0;
  $("topic-name").textContent = name;
  updateSubscriptions();
  state.dirty.topics = state.dirty.messages = state.dirty.fields = true;
}

function newRow(name) {
  const row = el("tr", { class: "topic", "data-topic": name, tabindex: "0" },
                 el("td", { class: "name", title: name }, name), el("td", { class: "rate" }),
                 el("td", { class: "bw" }), el("td", { class: "missed" }), el("td", { class: "drops" }));
  row.onclick = () => select(name);
  row.onkeydown = (e) => { if (e.key === "Enter") select(name); };
  return row;
}

function updateRow(row, name) {
  const st = state.stats[name];
  const ch = state.byTopic.get(name);
  row.cells[1].textContent = st ? fmtRate(st.rate) : "–";
  row.cells[2].textContent = st ? fmtBandwidth(st.bandwidth) : "–";
  row.cells[3].textContent = st ? String(st.missed) : "–";
  row.cells[3].classList.toggle("some", !!(st && st.missed));
  const drops = state.droppedByTopic[name] || 0;
  row.cells[4].textContent = String(drops);
  row.cells[4].classList.toggle("some", drops > 0);
  row.dataset.drops = String(drops);
  row.dataset.rate = st ? String(st.rate) : "0";
  row.classList.toggle("selected", name === state.selected);
  row.classList.toggle("idle", !ch);
  // log and cfg arenas are channels T:log and T:cfg (see docs/view.md)
  row.dataset.protocol = (ch && ch.a0pyProtocol) || (st && st.protocol) || "pubsub";
  row.title = ch ? `${name} — ${describe(ch)}` : `${name} — nothing published yet`;
}

export function renderTopics() {
  const body = $("topics").tBodies[0];
  const filter = $("filter").value.trim().toLowerCase();
  const names = new Set([...state.byTopic.keys(), ...Object.keys(state.stats)]);
  names.delete(STATS_TOPIC);
  const sorted = [...names].filter((n) => !filter || n.toLowerCase().includes(filter)).sort();
  $("no-topics").hidden = names.size > 0;
  const rows = new Map([...body.rows].map((r) => [r.dataset.topic, r]));
  body.replaceChildren(...sorted.map((name) => {
    const row = rows.get(name) || newRow(name);
    updateRow(row, name);
    return row;
  }));
}
