// The page's socket to the server it came from, and the Foxglove WebSocket
// protocol as the page speaks it (subprotocol foxglove.sdk.v1; docs/view.md
// has the table). The binary messages' layouts are read and written here and
// nowhere else; all binary integers are little-endian. What a message means
// is view.js's.
//
// To add a message: its opcode and field offsets below, then a case in
// parseBinary (server to client) or a function making its bytes (client to
// server) sent with sendBinary; its handling goes to view.js.

export const SUBPROTOCOLS = ["foxglove.sdk.v1", "foxglove.websocket.v1"];

// Server to client: opcodes, and each message's fields by their offsets.
export const SERVER_OP = { MESSAGE_DATA: 1, TIME: 2, SERVICE_CALL_RESPONSE: 3, PLAYBACK_STATE: 5 };
const MESSAGE_DATA = { subscriptionId: 1, logTime: 5, data: 13 };
// ...then the encoding (encodingLength bytes), then the payload
const SERVICE_CALL_RESPONSE = { serviceId: 1, callId: 5, encodingLength: 9, encoding: 13 };
const TIME = { timestamp: 1, size: 9 };
const PLAYBACK_STATE = { status: 1, currentTime: 2, speed: 10, didSeek: 14, size: 19 };

// Client to server.
export const CLIENT_OP = { MESSAGE_DATA: 1, SERVICE_CALL: 2, PLAYBACK_CONTROL: 3 };
const CLIENT_MESSAGE_DATA = { channelId: 1, data: 5 };
const SERVICE_CALL = { serviceId: 1, callId: 5, encodingLength: 9, encoding: 13 };
const PLAYBACK_CONTROL = { command: 1, speed: 2, hadSeek: 6, seekTime: 7, requestIdLength: 15, requestId: 19 };
export const PLAYBACK_COMMAND = { PLAY: 0, PAUSE: 1 };
// The playback states' names, by their number.
export const PLAYBACK_STATUS = ["playing", "paused", "buffering", "ended"];
export const STATUS_PLAYING = 0;
export const STATUS_ENDED = 3;

// A binary message from the server as an object: {op: "messageData",
// subscriptionId, logNs, dataOffset} (the data is buf[dataOffset:]),
// {op: "time", timeNs}, {op: "playbackState", status, timeNs, speed, didSeek},
// {op: "serviceCallResponse", serviceId, callId, encoding, dataOffset};
// null for any other or a message too short for its opcode. Times are BigInt ns.
export function parseBinary(buf) {
  const dv = new DataView(buf);
  if (dv.byteLength < 1) return null;
  const op = dv.getUint8(0);
  if (op === SERVER_OP.MESSAGE_DATA && dv.byteLength >= MESSAGE_DATA.data) {
    return { op: "messageData", subscriptionId: dv.getUint32(MESSAGE_DATA.subscriptionId, true),
             logNs: dv.getBigUint64(MESSAGE_DATA.logTime, true), dataOffset: MESSAGE_DATA.data };
  }
  if (op === SERVER_OP.TIME && dv.byteLength >= TIME.size) {
    return { op: "time", timeNs: dv.getBigUint64(TIME.timestamp, true) };
  }
  if (op === SERVER_OP.SERVICE_CALL_RESPONSE && dv.byteLength >= SERVICE_CALL_RESPONSE.encoding) {
    const n = dv.getUint32(SERVICE_CALL_RESPONSE.encodingLength, true);
    if (dv.byteLength < SERVICE_CALL_RESPONSE.encoding + n) return null;
    return { op: "serviceCallResponse", serviceId: dv.getUint32(SERVICE_CALL_RESPONSE.serviceId, true),
             callId: dv.getUint32(SERVICE_CALL_RESPONSE.callId, true),
             encoding: new TextDecoder().decode(new Uint8Array(buf, SERVICE_CALL_RESPONSE.encoding, n)),
             dataOffset: SERVICE_CALL_RESPONSE.encoding + n };
  }
  if (op === SERVER_OP.PLAYBACK_STATE && dv.byteLength >= PLAYBACK_STATE.size) {
    return { op: "playbackState", status: dv.getUint8(PLAYBACK_STATE.status),
             timeNs: dv.getBigUint64(PLAYBACK_STATE.currentTime, true),
             speed: dv.getFloat32(PLAYBACK_STATE.speed, true), didSeek: dv.getUint8(PLAYBACK_STATE.didSeek) !== 0 };
  }
  return null;
}

// The bytes of a playback control request: command (PLAYBACK_COMMAND), speed,
// seekNs (BigInt, or undefined for no seek), requestId (a string).
export function playbackControlRequest(command, speed, seekNs, requestId) {
  const rid = new TextEncoder().encode(requestId);
  const b = new ArrayBuffer(PLAYBACK_CONTROL.requestId + rid.length);
  const dv = new DataView(b);
  dv.setUint8(0, CLIENT_OP.PLAYBACK_CONTROL);
  dv.setUint8(PLAYBACK_CONTROL.command, command);
  dv.setFloat32(PLAYBACK_CONTROL.speed, speed, true);
  dv.setUint8(PLAYBACK_CONTROL.hadSeek, seekNs === undefined ? 0 : 1);
  dv.setBigUint64(PLAYBACK_CONTROL.seekTime, seekNs === undefined ? 0n : seekNs, true);
  dv.setUint32(PLAYBACK_CONTROL.requestIdLength, rid.length, true);
  new Uint8Array(b, PLAYBACK_CONTROL.requestId).set(rid);
  return b;
}

// The bytes of a client message on the page's channel channelId (data: a Uint8Array).
export function clientMessageData(channelId, data) {
  const b = new ArrayBuffer(CLIENT_MESSAGE_DATA.data + data.length);
  const dv = new DataView(b);
  dv.setUint8(0, CLIENT_OP.MESSAGE_DATA);
  dv.setUint32(CLIENT_MESSAGE_DATA.channelId, channelId, true);
  new Uint8Array(b, CLIENT_MESSAGE_DATA.data).set(data);
  return b;
}

// The bytes of a service call request (data: a Uint8Array, encoding: a string).
export function serviceCallRequest(serviceId, callId, encoding, data) {
  const enc = new TextEncoder().encode(encoding);
  const b = new ArrayBuffer(SERVICE_CALL.encoding + enc.length + data.length);
  const dv = new DataView(b);
  dv.setUint8(0, CLIENT_OP.SERVICE_CALL);
  dv.setUint32(SERVICE_CALL.serviceId, serviceId, true);
  dv.setUint32(SERVICE_CALL.callId, callId, true);
  dv.setUint32(SERVICE_CALL.encodingLength, enc.length, true);
  new Uint8Array(b, SERVICE_CALL.encoding).set(enc);
  new Uint8Array(b, SERVICE_CALL.encoding + enc.length).set(data);
  return b;
}

// ---- the socket: opened, reopened after a loss (waiting 250 ms, doubling up to 5 s) ----

const TOKEN_KEY = "a0py-view-token";
const FIRST_DELAY_MS = 250;
const MAX_DELAY_MS = 5000;

let socket = null;
let handlers = null;
let reconnectDelay = FIRST_DELAY_MS;

// The access token: from the page's URL (kept for the tab), or kept before.
function token() {
  const t = new URLSearchParams(location.search).get("token");
  if (t) { sessionStorage.setItem(TOKEN_KEY, t); return t; }
  return sessionStorage.getItem(TOKEN_KEY);
}

function open() {
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  // At most max_hz messages a second per topic (the newest kept): a page
  // draws at 60 frames a second; ?max_hz=0 in the page's URL sends all.
  const page = new URLSearchParams(location.search);
  const q = new URLSearchParams({ packets: "1", max_hz: page.get("max_hz") || "100" });
  const t = token();
  if (t) q.set("token", t);
  const ws = new WebSocket(`${scheme}//${location.host}/?${q}`, SUBPROTOCOLS);
  ws.binaryType = "arraybuffer";
  socket = ws;
  handlers.onState("connecting");
  ws.onopen = () => { reconnectDelay = FIRST_DELAY_MS; handlers.onState("connected"); };
  ws.onclose = () => {
    if (socket !== ws) return;
    handlers.onState("disconnected");
    setTimeout(open, reconnectDelay);
    reconnectDelay = Math.min(reconnectDelay * 2, MAX_DELAY_MS);
  };
  ws.onerror = () => handlers.onError();
  ws.onmessage = (ev) => {
    if (typeof ev.data === "string") handlers.onText(ev.data); else handlers.onBinary(ev.data);
  };
}

// Opens the socket. handlers: onState("connecting" | "connected" |
// "disconnected"), onError(), onText(string), onBinary(ArrayBuffer).
export function connect(h) {
  handlers = h;
  open();
}

export function isOpen() { return socket !== null && socket.readyState === WebSocket.OPEN; }

// Sends obj as JSON text; nothing while the socket is not open.
export function send(obj) { if (isOpen()) socket.send(JSON.stringify(obj)); }

// Sends bytes (an ArrayBuffer); nothing while the socket is not open.
export function sendBinary(bytes) { if (isOpen()) socket.send(bytes); }
