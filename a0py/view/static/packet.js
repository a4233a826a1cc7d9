// The a0py packet codec: reads a packet in place in an ArrayBuffer (format:
// docs/pubsub.md). Every size and offset comes from the layout the server
// sends in its serverInfo metadata (a0py.packetLayout: a0py._core.PACKET_LAYOUT,
// read from csrc/a0_packet.h when a0py was built), so this file holds no
// number of the format: a change of the C header reaches the page unedited.
// Every offset read from a packet is checked against its size before it is
// followed.

import { utf8, uuid } from "./ui.js";

// The layout's entries this codec reads (a layout without one is refused).
const LAYOUT_KEYS = [
  "magic", "flag_has_std", "index_off", "entry_size", "id_size", "magic_off", "flags_off", "id_off",
  "header_count_off", "payload_off_off", "payload_size_off", "entry_key_off", "entry_key_len",
  "entry_val_off", "entry_val_len",
];
// The standard block's fields, in the order of the server's standardHeaders.
const STANDARD_FIELDS = ["time_mono_off", "time_wall_off", "writer_id_off", "writer_seq_off", "transport_seq_off"];

// A codec for packets of `layout` (an object of numbers, the server's
// a0py.packetLayout) whose standard headers are named `standardHeaders`.
// Throws an Error naming what is missing when the layout lacks an entry.
export function packetCodec(layout, standardHeaders) {
  const missing = [...LAYOUT_KEYS, ...STANDARD_FIELDS].filter((k) => !Number.isInteger(layout && layout[k]));
  if (missing.length) throw new Error(`the server's packet layout lacks ${missing.join(", ")}`);
  const L = layout;
  const indexEnd = (n) => L.index_off + L.entry_size * n;

  // The fixed header's fields, or null when buf[offset:] is not a packet
  // whose payload ends it.
  function fixed(buf, offset) {
    const size = buf.byteLength - offset;
    if (size < L.index_off) return null;
    const dv = new DataView(buf, offset, size);
    if (dv.getUint32(L.magic_off, true) !== L.magic) return null;
    return {
      dv, size,
      flags: dv.getUint16(L.flags_off, true),
      count: dv.getUint32(L.header_count_off, true),
      payloadOff: Number(dv.getBigUint64(L.payload_off_off, true)),
      payloadSize: Number(dv.getBigUint64(L.payload_size_off, true)),
    };
  }

  function standardHeaderPairs(buf, offset, dv) {
    return STANDARD_FIELDS.map((field, i) => {
      const at = L[field];
      const value = field === "writer_id_off" ? uuid(new Uint8Array(buf, offset + at, L.id_size))
        : dv.getBigUint64(at, true).toString();
      return [standardHeaders[i], value];
    });
  }

  // {id, headers: [[key, value]...], payload: Uint8Array} of the packet at
  // buf[offset:]; throws an Error when it is not a packet or is corrupt.
  function decode(buf, offset) {
    const f = fixed(buf, offset);
    if (f === null) throw new Error("not an a0py packet");
    const { dv, count, payloadOff, payloadSize } = f;
    if (payloadOff < indexEnd(count) || payloadOff + payloadSize !== f.size) throw new Error("corrupt a0py packet");
    const headers = f.flags & L.flag_has_std ? standardHeaderPairs(buf, offset, dv) : [];
    const str = (off, len) => {
      if (off < indexEnd(count) || off + len > payloadOff) throw new Error("corrupt a0py packet header");
      return utf8.decode(new Uint8Array(buf, offset + off, len));
    };
    for (let i = 0; i < count; i++) {
      const e = indexEnd(i);
      headers.push([str(dv.getUint32(e + L.entry_key_off, true), dv.getUint32(e + L.entry_key_len, true)),
                    str(dv.getUint32(e + L.entry_val_off, true), dv.getUint32(e + L.entry_val_len, true))]);
    }
    return { id: uuid(new Uint8Array(buf, offset + L.id_off, L.id_size)), headers,
             payload: new Uint8Array(buf, offset + payloadOff, payloadSize) };
  }

  // The payload of the packet at buf[offset:] without decoding its headers,
  // or null when it is not a well-formed packet (decode then says why).
  function payload(buf, offset) {
    const f = fixed(buf, offset);
    if (f === null || f.payloadOff < L.index_off || f.payloadOff + f.payloadSize !== f.size) return null;
    return new Uint8Array(buf, offset + f.payloadOff, f.payloadSize);
  }

  // The standard headers' names by field ("transport_seq": "a0_transport_seq").
  const names = Object.fromEntries(STANDARD_FIELDS.map((f, i) => [f.replace(/_off$/, ""), standardHeaders[i]]));
  return { decode, payload, names };
}
