// The service call panel: the RPC servers the view found, advertised as
// services (with their request and reply schemas when the server declared
// them); a request typed in (JSON, prefilled from the request's schema) is
// sent as a service call and its reply, or the failure, shown. Behind `a0py
// view --allow-call GLOB`; the panel says what is allowed.

import { allows, why } from "./access.js";
import { sendBinary, serviceCallRequest } from "./socket.js";
import { state } from "./state.js";
import { $, el, hexDump, nowMs, utf8Strict } from "./ui.js";

let shownFor = null;  // the service whose request template is in the box

export function onAdvertiseServices(msg) {
  for (const s of msg.services || []) state.services.set(s.id, s);
  state.dirty.services = true;
}

export function onUnadvertiseServices(msg) {
  for (const id of msg.serviceIds || []) state.services.delete(id);
  state.dirty.services = true;
}

export function resetServices() {
  state.services.clear();
  state.calls.clear();
  state.dirty.services = true;
}

function selected() {
  const id = Number($("svc-select").value);
  return state.services.get(id) || null;
}

// A request that fits the service's JSON Schema: each property a zero value of its type.
function template(service) {
  const req = service.request;
  if (!req || req.schemaEncoding !== "jsonschema") return "{}";
  let schema;
  try { schema = JSON.parse(req.schema); } catch (e) { return "{}"; }
  const zero = { number: 0, integer: 0, boolean: false, string: "", array: [], object: {} };
  const msg = {};
  for (const [k, s] of Object.entries(schema.properties || {})) msg[k] = s && s.type in zero ? zero[s.type] : null;
  return JSON.stringify(msg, null, 2);
}

export function callService() {
  const service = selected();
  if (!service) return;
  const callId = state.nextCall++;
  const encoding = service.request ? service.request.encoding : "json";
  state.calls.set(callId, { serviceId: service.id, sentMs: nowMs() });
  state.callResult = { pending: true, serviceId: service.id, text: `calling ${service.name}…` };
  sendBinary(serviceCallRequest(service.id, callId, encoding, new TextEncoder().encode($("svc-request").value)));
  state.dirty.services = true;
}

// A reply's bytes for people: JSON pretty-printed, text, else a hex dump.
function show(bytes) {
  try {
    const t = utf8Strict.decode(bytes);
    try { return JSON.stringify(JSON.parse(t), null, 2); } catch (e) { return t; }
  } catch (e) { return hexDump(bytes, 4096); }
}

export function onServiceResponse(m, buf) {
  const call = state.calls.get(m.callId);
  if (!call) return;
  state.calls.delete(m.callId);
  state.callResult = { ok: true, serviceId: m.serviceId, ms: nowMs() - call.sentMs,
                       text: show(new Uint8Array(buf, m.dataOffset)), encoding: m.encoding };
  state.dirty.services = true;
}

export function onServiceFailure(msg) {
  const call = state.calls.get(msg.callId);
  if (!call) return;
  state.calls.delete(msg.callId);
  state.callResult = { ok: false, serviceId: msg.serviceId, ms: nowMs() - call.sentMs, text: msg.message };
  state.dirty.services = true;
}

export function renderServices() {
  const select = $("svc-select");
  const keep = select.value;
  const services = [...state.services.values()].sort((a, b) => a.name.localeCompare(b.name));
  select.replaceChildren(...services.map((s) => el("option", { value: String(s.id) }, `${s.name} (${s.type})`)));
  if (services.some((s) => String(s.id) === keep)) select.value = keep;
  const service = selected();
  $("svc-empty").hidden = services.length > 0;
  if (service && service.id !== shownFor) {
    shownFor = service.id;
    $("svc-request").value = template(service);
  }
  const ok = !!service && allows("call", service.name);
  $("svc-call").disabled = !ok || !state.connected;
  const note = $("svc-why");
  note.textContent = !service ? why("call") : ok ? describe(service) : why("call", service.name);
  note.classList.toggle("refused", !!service && !ok);
  const r = state.callResult;
  const out = $("svc-result");
  out.dataset.state = !r ? "" : r.pending ? "pending" : r.ok ? "ok" : "failed";
  out.textContent = !r ? "" : r.pending ? r.text
    : `${r.ok ? "reply" : "failed"} in ${r.ms.toFixed(1)} ms${r.encoding ? ` (${r.encoding})` : ""}\n${r.text}`;
}

function describe(service) {
  if (!service.request && !service.response) return `${service.name}: raw bytes (the server declared no schemas)`;
  const part = (what, s) => (s ? `${what} ${s.schemaName} (${s.encoding})` : "");
  return `${service.name}: ${[part("request", service.request), part("reply", service.response)].filter((x) => x).join(", ")}`;
}
