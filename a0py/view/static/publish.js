// The publish panel: a JSON message, typed in or filled in through a form
// built from the topic's JSON Schema (a typed topic's), published to a topic
// through the server (the protocol's client publish: the page advertises a
// channel for the topic once, then sends each message on it). Behind `a0py
// view --allow-publish GLOB`; the panel says what is allowed.

import { allows, why } from "./access.js";
import { clientMessageData, send, sendBinary } from "./socket.js";
import { state } from "./state.js";
import { $, el } from "./ui.js";

let formFor = null;  // the topic whose form is shown

// The topic's channel when it has a JSON Schema of an object (a typed JSON topic), else null.
function typedChannel(topic) {
  const ch = state.byTopic.get(topic);
  return ch && ch.schemaEncoding === "jsonschema" && ch.schemaObj && ch.schemaObj.properties ? ch : null;
}

// A value of a JSON Schema's type: what a new message's field starts as.
function zero(schema) {
  switch (schema && schema.type) {
    case "number": case "integer": return 0;
    case "boolean": return false;
    case "string": return "";
    case "array": return [];
    case "object": return Object.fromEntries(Object.entries(schema.properties || {}).map(([k, s]) => [k, zero(s)]));
    default: return null;
  }
}

function currentValue() {
  try { return JSON.parse($("pub-json").value); } catch (e) { return null; }
}

// One input a property: editing it rewrites the JSON below.
function fieldInput(name, schema, value) {
  const type = schema && schema.type;
  const input = type === "boolean" ? el("input", { type: "checkbox" })
    : el("input", { type: type === "number" || type === "integer" ? "number" : "text", step: "any" });
  if (type === "boolean") input.checked = !!value;
  else input.value = type === "number" || type === "integer" || type === "string" ? String(value ?? "")
    : JSON.stringify(value ?? null);
  input.dataset.field = name;
  input.oninput = input.onchange = () => {
    const msg = currentValue() || {};
    if (type === "boolean") msg[name] = input.checked;
    else if (type === "number" || type === "integer") msg[name] = Number(input.value);
    else if (type === "string") msg[name] = input.value;
    else { try { msg[name] = JSON.parse(input.value); } catch (e) { return; } }
    $("pub-json").value = JSON.stringify(msg, null, 2);
  };
  return el("label", { class: "field" }, el("span", { class: "mono" }, name), input);
}

function renderForm(topic) {
  formFor = topic;
  const ch = typedChannel(topic);
  const form = $("pub-form");
  if (!ch) { form.replaceChildren(); return; }
  const msg = zero(ch.schemaObj);
  if (!$("pub-json").value.trim() || currentValue() === null) $("pub-json").value = JSON.stringify(msg, null, 2);
  const now = currentValue() || msg;
  form.replaceChildren(...Object.entries(ch.schemaObj.properties).map(([k, s]) => fieldInput(k, s, now[k])));
}

export function renderPublish() {
  const topic = $("pub-topic").value.trim();
  if (topic !== formFor) renderForm(topic);
  const ok = topic !== "" && allows("publish", topic);
  $("pub-send").disabled = !ok || !state.connected;
  const ch = typedChannel(topic);
  const what = ch ? `${topic} is typed: ${ch.schemaName} (JSON Schema); the server checks each message against it`
    : "a JSON object";
  const note = $("pub-why");
  note.textContent = !topic ? why("publish") : ok ? what : why("publish", topic);
  note.classList.toggle("refused", topic !== "" && !ok);
  $("pub-count").textContent = state.published ? `${state.published} sent from this page` : "";
}

// Publishes the JSON of the box to the topic (its channel advertised first, once).
export function publish() {
  const topic = $("pub-topic").value.trim();
  const value = currentValue();
  if (!topic || value === null || typeof value !== "object" || Array.isArray(value)) {
    $("pub-why").textContent = "the message must be a JSON object";
    $("pub-why").classList.add("refused");
    return;
  }
  let channel = state.clientChannels.get(topic);
  if (!channel) {
    const ch = typedChannel(topic);
    channel = { id: state.nextClientChannel++ };
    state.clientChannels.set(topic, channel);
    const ad = { id: channel.id, topic, encoding: "json", schemaName: ch ? ch.schemaName : "" };
    if (ch) { ad.schemaEncoding = "jsonschema"; ad.schema = ch.schema; }
    send({ op: "advertise", channels: [ad] });
  }
  sendBinary(clientMessageData(channel.id, new TextEncoder().encode(JSON.stringify(value))));
  state.published++;
  state.dirty.publish = true;
}

// The connection was lost: the server forgot the page's channels.
export function resetPublish() { state.clientChannels.clear(); }
