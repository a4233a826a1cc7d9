// Helpers of the page: building its DOM ($ finds an element by id, el makes
// one), and text and times for people. No state.

export const $ = (id) => document.getElementById(id);

export function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (k === "class") e.className = v;
      else if (k === "text") e.textContent = v;
      else e.setAttribute(k, v);
    }
  }
  for (const c of children) e.append(c);
  return e;
}

export const utf8 = new TextDecoder("utf-8");
export const utf8Strict = new TextDecoder("utf-8", { fatal: true });

// Nanoseconds (BigInt) as milliseconds (a float).
export function nsToMs(ns) { return Number(ns / 1000n) / 1000; }

// A protocol timestamp {sec, nsec} as nanoseconds (BigInt).
export function tsNs(t) { return BigInt(t.sec) * 1000000000n + BigInt(t.nsec); }

// The wall clock, ms.
export function nowMs() { return performance.timeOrigin + performance.now(); }

// Bytes as the text form of a UUID (8-4-4-4-12 hex digits).
export function uuid(bytes) {
  const h = Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

export function fmtRate(r) { return r >= 100 ? r.toFixed(0) : r >= 10 ? r.toFixed(1) : r.toFixed(2); }

export function fmtBandwidth(b) {
  if (b >= 1 << 30) return (b / (1 << 30)).toFixed(1) + " GiB/s";
  if (b >= 1 << 20) return (b / (1 << 20)).toFixed(1) + " MiB/s";
  if (b >= 1 << 10) return (b / (1 << 10)).toFixed(1) + " KiB/s";
  return b.toFixed(0) + " B/s";
}

// A time of day with its milliseconds (ms: the wall clock).
export function fmtTime(ms) {
  const d = new Date(ms);
  return d.toLocaleTimeString([], { hour12: false }) + "." + String(Math.floor(ms % 1000)).padStart(3, "0");
}

// The first `limit` bytes as lines of offset, 16 bytes in hex, and their ASCII.
export function hexDump(bytes, limit) {
  const n = Math.min(bytes.length, limit);
  const lines = [];
  for (let i = 0; i < n; i += 16) {
    const row = bytes.subarray(i, Math.min(i + 16, n));
    const hex = Array.from(row, (b) => b.toString(16).padStart(2, "0")).join(" ");
    const txt = Array.from(row, (b) => (b >= 32 && b < 127 ? String.fromCharCode(b) : ".")).join("");
    lines.push(`${i.toString(16).padStart(6, "0")}  ${hex.padEnd(47)}  ${txt}`);
  }
  if (bytes.length > n) lines.push(`… ${bytes.length - n} more bytes`);
  return lines.join("\n");
}
