// A minimal protobuf reader for the image messages the page draws
// (foxglove.RawImage, foxglove.CompressedImage): no schema, just the fields.

import { utf8 } from "./ui.js";

// The fields of one protobuf message: field number -> values in order
// (varints and fixed32 as numbers, fixed64 as BigInt, length-delimited as
// bytes). Every length is checked against the message; throws an Error
// saying what is wrong if it is not one.
export function protobufFields(bytes) {
  const out = new Map();
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const n = bytes.length;
  let i = 0;
  const varint = () => {
    let r = 0, scale = 1;
    for (let k = 0; k < 10; k++) {
      if (i >= n) throw new Error("truncated varint");
      const b = bytes[i++];
      r += (b & 0x7f) * scale;
      if (b < 0x80) return r;
      scale *= 128;
    }
    throw new Error("varint longer than 10 bytes");
  };
  while (i < n) {
    const key = varint();
    const num = Math.floor(key / 8), wire = key % 8;
    let v;
    if (wire === 0) v = varint();
    else if (wire === 1) { if (i + 8 > n) throw new Error("truncated fixed64"); v = dv.getBigUint64(i, true); i += 8; }
    else if (wire === 2) {
      const len = varint();
      if (i + len > n) throw new Error(`field ${num}: ${len} bytes, ${n - i} left`);
      v = bytes.subarray(i, i + len); i += len;
    } else if (wire === 5) { if (i + 4 > n) throw new Error("truncated fixed32"); v = dv.getUint32(i, true); i += 4; }
    else throw new Error(`wire type ${wire} (field ${num}) is not one of an image message`);
    if (!out.has(num)) out.set(num, []);
    out.get(num).push(v);
  }
  return out;
}

// Field numbers of foxglove.RawImage and foxglove.CompressedImage.
const IMAGE_FIELDS = {
  raw: { timestamp: 1, frame_id: 7, width: 2, height: 3, encoding: 4, step: 5, data: 6 },
  compressed: { timestamp: 1, frame_id: 4, data: 2, format: 3 },
};

// The image in `bytes`, a foxglove.RawImage (kind "raw") or
// foxglove.CompressedImage ("compressed"): {frame_id, timestamp, data, and
// width, height, encoding, step (raw) or format (compressed)}. Throws an
// Error (protobufFields') when the bytes are not a protobuf message.
export function imageFields(bytes, kind) {
  const nums = IMAGE_FIELDS[kind];
  const f = protobufFields(bytes);
  const last = (k) => { const l = f.get(nums[k]); return l ? l[l.length - 1] : undefined; };
  const text = (k) => { const v = last(k); return v instanceof Uint8Array ? utf8.decode(v) : ""; };
  const num = (k) => { const v = last(k); return typeof v === "number" ? v : 0; };
  const img = { frame_id: text("frame_id") };
  const ts = last("timestamp");
  if (ts instanceof Uint8Array) {
    const t = protobufFields(ts);
    img.timestamp = { sec: (t.get(1) || [0]).pop(), nsec: (t.get(2) || [0]).pop() };
  }
  if (kind === "raw") {
    Object.assign(img, { width: num("width"), height: num("height"), encoding: text("encoding"), step: num("step") });
  } else {
    img.format = text("format");
  }
  const data = last("data");
  img.data = data instanceof Uint8Array ? data : new Uint8Array(0);
  return img;
}
