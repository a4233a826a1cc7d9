// a0py view: the page's entry point. Plain JavaScript modules served as they
// are (no build step, no network beyond the server the page came from). It
// speaks the Foxglove WebSocket protocol (subprotocol foxglove.sdk.v1) with
// ?packets=1, so each message is a whole a0py packet (headers and payload;
// format in docs/pubsub.md, decoded by packet.js with the layout the server
// sends), and reads rates from the server's stats channel (/a0py/view/stats).
//
// This module handles what the server sends (each message changes the state
// and marks what is dirty), runs the frame loop (drawing happens once per
// animation frame at most, whatever the message rate) and wires the page's
// controls. The modules, bottom up (each imports only those above it):
//   state.js, ui.js                    the shared state; DOM and text helpers
//   socket.js                          the socket and the protocol's binary messages
//   packet.js, protobuf.js             the a0py packet codec; a protobuf (image) reader
//   channels.js, content.js            channels and subscriptions; what a message holds
//   series.js                          numeric fields and the plotted series
//   topics.js, image.js, messages.js,  the panels: the topic list, an image, the messages,
//   plot.js, player.js                 the plot, the player of a recording,
//   access.js, publish.js, params.js,  what the page may change (the view's --allow-* flags);
//   services.js, graph.js              the publish box, parameters, service calls, the graph
// A new kind of panel is a module of its own, rendered from the frame loop
// when its part of state.dirty is set; a new server message, a case in onText
// or onBinary.

import { readAllowed } from "./access.js";
import { addChannel, channelOfSubscription, removeChannel, resetChannels, updateSubscriptions } from "./channels.js";
import { onGraphUpdate, renderGraph, resetGraph, watchGraph } from "./graph.js";
import { imageCanvas } from "./image.js";
import { renderMessages } from "./messages.js";
import { packetCodec } from "./packet.js";
import { onParameterValues, renderParams, requestParameters, resetParameters } from "./params.js";
import { applySpeed, playOrPause, seekToFraction, setPlaybackTime, showSource, togglePause, updateClock,
         updatePlayer } from "./player.js";
import { drawPlot, renderFields, renderLegend } from "./plot.js";
import { publish, renderPublish, resetPublish } from "./publish.js";
import { addSeries, onSeries, plotMessage, requestSeries, restartSeries } from "./series.js";
import { callService, onAdvertiseServices, onServiceFailure, onServiceResponse, onUnadvertiseServices, renderServices,
         resetServices } from "./services.js";
import { connect, parseBinary } from "./socket.js";
import { KEEP_IMAGES, KEEP_MESSAGES, LATENCY_SAMPLES, recordSample, state } from "./state.js";
import { renderTopics, select } from "./topics.js";
import { $, nowMs, nsToMs, tsNs, utf8 } from "./ui.js";

// ---- the bar at the top: the connection, the last status, the dropped count ----

function setConn(s) {
  const c = $("conn");
  c.textContent = s;
  c.dataset.state = s;
  c.className = "pill " + (s === "connected" ? "ok" : "bad");
}

// A status message (level 2 and above: an error).
function showStatus(text, level) {
  const s = $("status");
  s.textContent = text;
  s.title = text;
  s.className = "status" + (level >= 2 ? " error" : "");
}

// The dropped count, which only grows (the server's status messages and its
// stats channel both tell it).
function setDropped(n) {
  state.dropped = Math.max(state.dropped, n);
  const d = $("dropped");
  d.hidden = state.dropped === 0;
  d.textContent = `dropped ${state.dropped}`;
  d.title = "messages the server dropped for this page because it read them too slowly";
}

// ---- what the server sends ----

function onServerInfo(msg) {
  state.serverInfo = msg;
  const meta = msg.metadata || {};
  state.packetEncoding = meta["a0py.packetEncoding"] || null;
  state.standardHeaders = (meta["a0py.standardHeaders"] || "").split(",").filter((h) => h);
  try {
    state.codec = packetCodec(JSON.parse(meta["a0py.packetLayout"] || "null"), state.standardHeaders);
  } catch (e) {
    state.codec = null;
    showStatus(`this page cannot read the server's packets: ${e.message}`, 2);
  }
  state.recording = (msg.capabilities || []).includes("playbackControl");
  readAllowed(meta);
  state.dirty.publish = state.dirty.params = state.dirty.services = true;
  if (msg.dataStartTime && msg.dataEndTime) {
    state.dataRangeNs = [tsNs(msg.dataStartTime), tsNs(msg.dataEndTime)];
    state.dataRange = state.dataRangeNs.map(nsToMs);
  }
  showSource();
}

function onStatus(msg) {
  if (msg.id === "a0py.dropped") {
    const m = /\((\d+) in all\)/.exec(msg.message);
    if (m) setDropped(Number(m[1]));
  }
  showStatus(msg.message, msg.level);
}

function onText(text) {
  let msg;
  try { msg = JSON.parse(text); } catch (e) { return; }
  switch (msg.op) {
    case "serverInfo": onServerInfo(msg); break;
    case "advertise":
      for (const ch of msg.channels || []) addChannel(ch);
      updateSubscriptions(); requestSeries();
      if ((msg.channels || []).some((ch) => ch.a0pyProtocol === "cfg")) requestParameters();
      state.dirty.publish = true;
      break;
    case "unadvertise": for (const id of msg.channelIds || []) removeChannel(id); break;
    case "status": onStatus(msg); break;
    case "a0py.series": onSeries(msg); break;
    case "parameterValues": onParameterValues(msg); break;
    case "advertiseServices": onAdvertiseServices(msg); break;
    case "unadvertiseServices": onUnadvertiseServices(msg); break;
    case "serviceCallFailure": onServiceFailure(msg); break;
    case "connectionGraphUpdate": onGraphUpdate(msg); break;
    default: break;
  }
}

function onStats(buf, offset, recvMs) {
  let s;
  try { s = JSON.parse(utf8.decode(new Uint8Array(buf, offset))); } catch (e) { return; }
  state.stats = s.topics || {};
  if (typeof s.time === "number") {
    const off = s.time / 1e6 - recvMs;
    state.clockOffsetMs = state.clockOffsetMs === null ? off : Math.max(state.clockOffsetMs, off);
  }
  if (typeof s.dropped === "number" && s.dropped > state.dropped) setDropped(s.dropped);
  state.droppedByTopic = s.droppedByTopic || {};
  state.dirty.topics = true;
}

function onMessage(ch, logNs, buf, offset) {
  const recvMs = nowMs();
  if (ch === state.statsChannel) { onStats(buf, offset, recvMs); return; }
  const logMs = nsToMs(logNs);
  const msg = { logNs, logMs, recvMs, buf, offset, ch, pkt: null, value: undefined };
  if (!state.recording && ch.topic === state.selected) recordSample(state.latency, "latencyN", recvMs - logMs);
  let list = state.messages.get(ch.topic);
  if (!list) { list = []; state.messages.set(ch.topic, list); }
  list.push(msg);
  const keep = ch.a0pyImage ? KEEP_IMAGES : KEEP_MESSAGES;
  if (list.length > keep) list.splice(0, list.length - keep);
  if (ch.topic === state.selected) state.dirty.messages = true;
  plotMessage(msg);
}

function onPlaybackState(m) {
  state.playback.status = m.status;
  setPlaybackTime(m.timeNs);
  state.playback.speed = m.speed;
  if (m.didSeek) {
    for (const list of state.messages.values()) list.length = 0;
    // A series of the whole recording stays; one built from messages starts again.
    restartSeries();
    state.dirty.messages = state.dirty.plot = true;
  }
  updatePlayer();
}

function onBinary(buf) {
  const m = parseBinary(buf);
  if (m === null) return;
  if (m.op === "messageData") {
    const ch = channelOfSubscription(m.subscriptionId);
    if (ch) onMessage(ch, m.logNs, buf, m.dataOffset);
  } else if (m.op === "time") {
    setPlaybackTime(m.timeNs);
    state.dirty.plot = true; updateClock();
  } else if (m.op === "playbackState") {
    onPlaybackState(m);
  } else if (m.op === "serviceCallResponse") {
    onServiceResponse(m, buf);
  }
}

function onConnectionState(s) {
  state.connected = s === "connected";
  setConn(s);
  if (s === "disconnected") {
    resetChannels(); resetPublish(); resetParameters(); resetServices(); resetGraph();
  }
  if (s === "connected" && state.tab === "graph") watchGraph(true);
  state.dirty.publish = state.dirty.services = true;
}

function onConnectionError() {
  showStatus("cannot reach the view's server (stopped? or it refused this page: open the URL that " +
             "`a0py view` printed, with its ?token= if it has one)", 2);
}

// ---- the frame loop ----

function frame() {
  const began = performance.now();
  if (state.dirty.topics) { state.dirty.topics = false; renderTopics(); }
  if (state.dirty.legend) { state.dirty.legend = false; renderLegend(); }
  if (state.tab === "publish" && state.dirty.publish) { state.dirty.publish = false; renderPublish(); }
  if (state.tab === "params" && state.dirty.params) { state.dirty.params = false; renderParams(); }
  if (state.tab === "services" && state.dirty.services) { state.dirty.services = false; renderServices(); }
  if (state.tab === "graph" && state.dirty.graph) { state.dirty.graph = false; renderGraph(); }
  if (!state.paused) {
    // Held while the pointer is over the messages, so they can be read and clicked.
    if (state.dirty.messages && !state.hoverMessages) { state.dirty.messages = false; renderMessages(); }
    const list = state.selected && state.messages.get(state.selected);
    if (state.dirty.fields || (state.fieldsCount === 0 && list && list.length) || state.fieldsFor !== state.selected) {
      state.dirty.fields = false; renderFields();
    }
    if (state.series.length || state.dirty.plot) { state.dirty.plot = false; drawPlot(); }
  }
  state.frameJsMs += performance.now() - began;
  state.frames++;
  requestAnimationFrame(frame);
}

// Shows one panel on the right (the messages and plot, or a control panel).
function showTab(tab) {
  state.tab = tab;
  for (const b of document.querySelectorAll("#tabs button")) b.setAttribute("aria-selected", String(b.dataset.tab === tab));
  for (const p of document.querySelectorAll(".pane")) p.hidden = p.dataset.pane !== tab;
  if (tab === "publish" && !$("pub-topic").value && state.selected && !state.selected.includes(":")) {
    $("pub-topic").value = state.selected;
  }
  if (tab === "params") requestParameters();
  watchGraph(tab === "graph");
  state.dirty[tab] = true;
}

function init() {
  $("pause").onclick = togglePause;
  $("play").onclick = playOrPause;
  $("speed").onchange = applySpeed;
  const slider = $("slider");
  slider.oninput = () => { state.sliding = true; };
  slider.onchange = () => { state.sliding = false; seekToFraction(Number(slider.value) / 1000); };
  $("filter").oninput = () => { state.dirty.topics = true; };
  for (const b of document.querySelectorAll("#tabs button")) b.onclick = () => showTab(b.dataset.tab);
  $("pub-topic").oninput = () => { state.dirty.publish = true; };
  $("pub-send").onclick = publish;
  $("svc-select").onchange = () => { state.dirty.services = true; };
  $("svc-call").onclick = callService;
  // The parameters change by themselves (updates); a full read now and then finds new ones.
  setInterval(() => { if (state.tab === "params" && state.connected) requestParameters(); }, 2000);
  $("render-mode").onchange = $("keep").onchange = () => { state.dirty.messages = true; };
  $("window").onchange = () => { state.dirty.plot = true; };
  $("add-field").onclick = () => { const f = $("field").value; if (f && state.selected) addSeries(state.selected, f); };
  $("messages").onmouseenter = () => { state.hoverMessages = true; };
  $("messages").onmouseleave = () => { state.hoverMessages = false; };
  $("messages").onclick = (e) => {
    const t = e.target.closest(".num");
    if (t && state.selected) addSeries(state.selected, t.dataset.path || "");
  };
  renderMessages();
  connect({ onState: onConnectionState, onError: onConnectionError, onText, onBinary });
  requestAnimationFrame(frame);
}

// For tests and bench/view.py: read-only looks at what the page holds.
window.a0pyView = {
  state,
  select,
  showTab,
  imageCanvas,
  addSeries,
  seekToFraction,
  latencies: () => Array.from(state.latency.subarray(0, Math.min(state.latencyN, LATENCY_SAMPLES))),
  shownLatencies: () => Array.from(state.shown.subarray(0, Math.min(state.shownN, LATENCY_SAMPLES))),
};

// A module runs after the document is parsed (as a deferred script does).
init();
