// What a received message holds, decoded on demand and once: its packet
// (id, headers, payload), its payload alone, its value (JSON, or an image's
// fields) and its image. A message is {logNs, logMs, recvMs, buf, offset, ch,
// pkt, value}: the payload or packet is buf[offset:].

import { isPacketChannel, payloadEncoding } from "./channels.js";
import { imageFields } from "./protobuf.js";
import { state } from "./state.js";
import { utf8 } from "./ui.js";

function rawPacket(msg, error) {
  const pkt = { id: "", headers: [], payload: new Uint8Array(msg.buf, msg.offset) };
  if (error !== undefined) pkt.error = error;
  return pkt;
}

// The message's packet {id, headers, payload} (a message of a channel that
// is not of packets, or a packet that does not decode: its bytes as the
// payload, with the error).
export function packetOf(msg) {
  if (msg.pkt === null) {
    if (!isPacketChannel(msg.ch)) msg.pkt = rawPacket(msg);
    else if (state.codec === null) msg.pkt = rawPacket(msg, "Error: the server sent no packet layout");
    else {
      try { msg.pkt = state.codec.decode(msg.buf, msg.offset); }
      catch (e) { msg.pkt = rawPacket(msg, String(e)); }
    }
  }
  return msg.pkt;
}

// The payload bytes, without decoding the headers (packetOf decodes them).
export function payloadOf(msg) {
  if (msg.pkt !== null) return msg.pkt.payload;
  if (!isPacketChannel(msg.ch)) return new Uint8Array(msg.buf, msg.offset);
  const p = state.codec === null ? null : state.codec.payload(msg.buf, msg.offset);
  return p === null ? packetOf(msg).payload : p;
}

// The payload as a JS value when it is JSON, or an image's fields
// (undefined otherwise); parsed once.
export function valueOf(msg) {
  if (msg.value === undefined) {
    const p = payloadOf(msg);
    msg.value = null;
    const enc = payloadEncoding(msg.ch);
    if (msg.ch.a0pyImage) {
      const img = imageOf(msg);
      msg.value = Object.fromEntries(Object.entries(img).filter(([k]) => k !== "data"));
      if (img.data) msg.value.data = `<${img.data.length} bytes>`;
    } else if (enc === "json" || (p.length && (p[0] === 0x7b || p[0] === 0x5b))) {
      try { msg.value = JSON.parse(utf8.decode(p)); } catch (e) { msg.value = null; }
    }
  }
  return msg.value === null ? undefined : msg.value;
}

// The image in a message of an image channel: {width, height, encoding,
// step, format, frame_id, timestamp, data} or {error}; read once.
export function imageOf(msg) {
  if (!msg.image) {
    try { msg.image = imageFields(payloadOf(msg), msg.ch.a0pyImage); }
    catch (e) { msg.image = { error: `not a ${msg.ch.schemaName} message: ${e.message}` }; }
  }
  return msg.image;
}
