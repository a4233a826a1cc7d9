// The server's channels as the page knows them (advertise, unadvertise) and
// the page's subscriptions to them: the stats channel, the selected topic,
// and every plotted topic.

import { send } from "./socket.js";
import { STATS_TOPIC, state } from "./state.js";

export function addChannel(ch) {
  state.channels.set(ch.id, ch);
  if (ch.topic === STATS_TOPIC) { state.statsChannel = ch; return; }
  state.byTopic.set(ch.topic, ch);
  let schema = null;
  if (ch.schema && (ch.schemaEncoding === "jsonschema" || ch.encoding === "json")) {
    try { schema = JSON.parse(ch.schema); } catch (e) { schema = null; }
  }
  ch.schemaObj = schema;
  state.dirty.topics = state.dirty.fields = true;
}

export function removeChannel(id) {
  const ch = state.channels.get(id);
  if (!ch) return;
  state.channels.delete(id);
  if (state.byTopic.get(ch.topic) === ch) state.byTopic.delete(ch.topic);
  const sub = state.subOf.get(id);
  if (sub !== undefined) { state.subOf.delete(id); state.subs.delete(sub); }
  state.dirty.topics = state.dirty.messages = true;
}

// Forgets every channel and subscription (the connection was lost: the
// server advertises them again).
export function resetChannels() {
  state.channels.clear(); state.byTopic.clear(); state.subs.clear(); state.subOf.clear();
  state.statsChannel = null;
  for (const s of state.seriesRequests.values()) s.loading = false;  // asked again once advertised
  state.seriesRequests.clear();
  state.dirty.topics = state.dirty.messages = state.dirty.fields = true;
}

// Subscribes to what the page shows and unsubscribes from the rest.
export function updateSubscriptions() {
  const want = new Set();
  if (state.statsChannel) want.add(state.statsChannel.id);
  const sel = state.selected && state.byTopic.get(state.selected);
  if (sel) want.add(sel.id);
  for (const s of state.series) { const ch = state.byTopic.get(s.topic); if (ch) want.add(ch.id); }
  const subscribe = [], unsubscribe = [];
  for (const id of want) if (!state.subOf.has(id)) {
    const sub = state.nextSub++;
    state.subOf.set(id, sub); state.subs.set(sub, id);
    subscribe.push({ id: sub, channelId: id });
  }
  for (const [id, sub] of [...state.subOf]) if (!want.has(id)) {
    state.subOf.delete(id); state.subs.delete(sub);
    unsubscribe.push(sub);
  }
  if (subscribe.length) send({ op: "subscribe", subscriptions: subscribe });
  if (unsubscribe.length) send({ op: "unsubscribe", subscriptionIds: unsubscribe });
}

// The channel of a subscription, or null.
export function channelOfSubscription(sub) {
  const id = state.subs.get(sub);
  return id === undefined ? null : state.channels.get(id) || null;
}

// Whether the channel's messages are whole a0py packets.
export function isPacketChannel(ch) { return state.packetEncoding !== null && ch.encoding === state.packetEncoding; }

// The encoding of the payloads as the page gets them: "json" for a typed
// channel the server renders (a0pyRendered names the channel's own encoding).
export function payloadEncoding(ch) {
  if (isPacketChannel(ch)) return ch.payloadEncoding;
  return ch.a0pyRendered ? "json" : ch.encoding;
}

// What the channel carries, in words.
export function describe(ch) {
  if (ch.a0pyProtocol === "log") return "log messages (the topic's log arena)";
  if (ch.a0pyProtocol === "cfg") return `configuration, ${payloadEncoding(ch)} (each version as it is written)`;
  const enc = ch.a0pyRendered || (ch.a0pyImage ? isPacketChannel(ch) ? ch.payloadEncoding : ch.encoding
                                                : payloadEncoding(ch));
  let text = ch.schemaEncoding && ch.schemaName ? `${ch.schemaName} (${enc})` : enc;
  if (ch.a0pyRendered) text += ", shown field by field";
  if (ch.a0pyImage) text += ` · image: at most ${ch.a0pyMaxHz} frames a second reach this page (newer frames replace older ones, the rest are dropped)`;
  return text;
}
