// a0py view: the page. Plain JavaScript, no build step, no network beyond
// the server it came from. It speaks the Foxglove WebSocket protocol
// (subprotocol foxglove.sdk.v1) with ?packets=1, so each message is a whole
// a0py packet (headers and payload; format in docs/pubsub.md), and reads
// rates from the server's stats channel (/a0py/view/stats).
//
// Drawing happens once per animation frame at most, whatever the message
// rate: messages only update state and mark what is dirty.
"use strict";

(function () {
  const SUBPROTOCOLS = ["foxglove.sdk.v1", "foxglove.websocket.v1"];
  const STATS_TOPIC = "/a0py/view/stats";
  const PACKET_MAGIC = 0x4b503041;
  const KEEP_MESSAGES = 50;          // per watched topic
  const KEEP_IMAGES = 2;             // per image topic (a frame can be megabytes)
  const MAX_IMAGE_PIXELS = 64 << 20;
  const SERIES_POINTS = 20000;       // per plotted series
  const LATENCY_SAMPLES = 20000;
  const COLORS = ["#2563eb", "#dc2626", "#16a34a", "#d97706", "#7c3aed", "#0891b2", "#db2777", "#4b5563"];
  const utf8 = new TextDecoder("utf-8");
  const utf8Strict = new TextDecoder("utf-8", { fatal: true });

  const $ = (id) => document.getElementById(id);
  const el = (tag, attrs, ...children) => {
    const e = document.createElement(tag);
    if (attrs) for (const [k, v] of Object.entries(attrs)) {
      if (k === "class") e.className = v; else if (k === "text") e.textContent = v; else e.setAttribute(k, v);
    }
    for (const c of children) e.append(c);
    return e;
  };

  // ---- state ----
  const state = {
    ws: null,
    connected: false,
    serverInfo: null,
    // What packets are called (the server's a0py.packetEncoding and
    // a0py.standardHeaders metadata): the encoding of channels of whole
    // packets, and the standard headers in the order of the standard block.
    packetEncoding: null,
    standardHeaders: [],
    recording: false,
    channels: new Map(),      // id -> channel (as advertised)
    byTopic: new Map(),       // topic -> channel
    stats: {},                // topic -> stats from the server
    statsChannel: null,
    subs: new Map(),          // subscription id -> channel id
    subOf: new Map(),         // channel id -> subscription id
    nextSub: 1,
    selected: null,           // topic name
    messages: new Map(),      // topic -> array of messages (newest last)
    series: [],               // {topic, path, color, t: Float64Array, v: Float64Array, n, head}
    paused: false,
    frozenAt: null,           // ms, the plot's right edge while paused
    clockOffsetMs: null,      // server wall clock - local wall clock
    dropped: 0,
    playback: { status: 1, time: 0, timeNs: null, speed: 1 },  // time in ms and in ns (BigInt)
    dataRange: null,          // [startMs, endMs] of a recording
    dataRangeNs: null,        // the same in ns (BigInt): the clock's text is exact
    seriesRequests: new Map(), // a0py.fetchSeries request id -> series
    nextRequest: 1,
    dirty: { topics: true, messages: true, plot: true, fields: true },
    latency: new Float64Array(LATENCY_SAMPLES), latencyN: 0,
    shown: new Float64Array(LATENCY_SAMPLES), shownN: 0,
    reconnectDelay: 250,
    frames: 0, frameJsMs: 0,  // frames drawn, and the JavaScript time they took
  };

  // ---- connection ----
  function token() {
    const q = new URLSearchParams(location.search);
    const t = q.get("token");
    if (t) { sessionStorage.setItem("a0py-view-token", t); return t; }
    return sessionStorage.getItem("a0py-view-token");
  }

  function connect() {
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    // At most max_hz messages a second per topic (the newest kept): a page
    // draws at 60 frames a second; ?max_hz=0 in the page's URL sends all.
    const page = new URLSearchParams(location.search);
    const q = new URLSearchParams({ packets: "1", max_hz: page.get("max_hz") || "100" });
    const t = token();
    if (t) q.set("token", t);
    const ws = new WebSocket(`${scheme}//${location.host}/?${q}`, SUBPROTOCOLS);
    ws.binaryType = "arraybuffer";
    state.ws = ws;
    setConn("connecting");
    ws.onopen = () => { state.connected = true; state.reconnectDelay = 250; setConn("connected"); };
    ws.onclose = () => {
      state.connected = false;
      if (state.ws !== ws) return;
      setConn("disconnected");
      resetChannels();
      setTimeout(connect, state.reconnectDelay);
      state.reconnectDelay = Math.min(state.reconnectDelay * 2, 5000);
    };
    ws.onerror = () => {
      showStatus("cannot reach the view's server (stopped? or it refused this page: open the URL that " +
                 "`a0py view` printed, with its ?token= if it has one)", 2);
    };
    ws.onmessage = (ev) => {
      if (typeof ev.data === "string") onText(ev.data); else onBinary(ev.data);
    };
  }

  function send(obj) {
    if (state.ws && state.ws.readyState === WebSocket.OPEN) state.ws.send(JSON.stringify(obj));
  }

  function setConn(s) {
    const c = $("conn");
    c.textContent = s;
    c.dataset.state = s;
    c.className = "pill " + (s === "connected" ? "ok" : "bad");
  }

  function showStatus(text, level) {
    const s = $("status");
    s.textContent = text;
    s.title = text;
    s.className = "status" + (level >= 2 ? " error" : "");
  }

  function resetChannels() {
    state.channels.clear(); state.byTopic.clear(); state.subs.clear(); state.subOf.clear();
    state.statsChannel = null;
    for (const s of state.seriesRequests.values()) s.loading = false;  // asked again once advertised
    state.seriesRequests.clear();
    state.dirty.topics = state.dirty.messages = state.dirty.fields = true;
  }

  // ---- protocol: text messages ----
  function onText(text) {
    let msg;
    try { msg = JSON.parse(text); } catch (e) { return; }
    switch (msg.op) {
      case "serverInfo": onServerInfo(msg); break;
      case "advertise":
        for (const ch of msg.channels || []) addChannel(ch);
        updateSubscriptions(); requestSeries();
        break;
      case "unadvertise": for (const id of msg.channelIds || []) removeChannel(id); break;
      case "status": onStatus(msg); break;
      case "a0py.series": onSeries(msg); break;
      default: break;
    }
  }

  function onServerInfo(msg) {
    state.serverInfo = msg;
    const meta = msg.metadata || {};
    state.packetEncoding = meta["a0py.packetEncoding"] || null;
    state.standardHeaders = (meta["a0py.standardHeaders"] || "").split(",").filter((h) => h);
    const caps = msg.capabilities || [];
    state.recording = caps.includes("playbackControl");
    $("source").textContent = state.recording ? "recording" : "live";
    $("player").hidden = !state.recording;
    // One Play button: a recording's is the player's; the bar's Pause freezes a live page.
    $("pause").hidden = state.recording;
    if (msg.dataStartTime && msg.dataEndTime) {
      state.dataRangeNs = [tsNs(msg.dataStartTime), tsNs(msg.dataEndTime)];
      state.dataRange = state.dataRangeNs.map(nsToMs);
    }
    const win = $("window");
    let all = win.querySelector('option[value="all"]');
    if (state.recording && !all) {
      all = el("option", { value: "all" }, "whole recording");
      win.append(all);
      win.value = "all";
    } else if (!state.recording && all) {
      all.remove();
    }
    updatePlayer();
  }

  function tsNs(t) { return BigInt(t.sec) * 1000000000n + BigInt(t.nsec); }

  function onStatus(msg) {
    if (msg.id === "a0py.dropped") {
      const m = /\((\d+) in all\)/.exec(msg.message);
      if (m) setDropped(Number(m[1]));
    }
    showStatus(msg.message, msg.level);
  }

  function setDropped(n) {
    state.dropped = Math.max(state.dropped, n);
    const d = $("dropped");
    d.hidden = state.dropped === 0;
    d.textContent = `dropped ${state.dropped}`;
    d.title = "messages the server dropped for this page because it read them too slowly";
  }

  function addChannel(ch) {
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

  function removeChannel(id) {
    const ch = state.channels.get(id);
    if (!ch) return;
    state.channels.delete(id);
    if (state.byTopic.get(ch.topic) === ch) state.byTopic.delete(ch.topic);
    const sub = state.subOf.get(id);
    if (sub !== undefined) { state.subOf.delete(id); state.subs.delete(sub); }
    state.dirty.topics = state.dirty.messages = true;
  }

  // Subscribed: the stats channel, the selected topic, and every plotted topic.
  function updateSubscriptions() {
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

  // ---- protocol: binary messages ----
  function onBinary(buf) {
    const dv = new DataView(buf);
    if (dv.byteLength < 1) return;
    const op = dv.getUint8(0);
    if (op === 1 && dv.byteLength >= 13) {
      const sub = dv.getUint32(1, true);
      const logNs = dv.getBigUint64(5, true);
      const chId = state.subs.get(sub);
      const ch = chId === undefined ? null : state.channels.get(chId);
      if (ch) onMessage(ch, logNs, buf, 13);
    } else if (op === 2 && dv.byteLength >= 9) {
      setPlaybackTime(dv.getBigUint64(1, true));
      state.dirty.plot = true; updateClock();
    } else if (op === 5 && dv.byteLength >= 19) {
      state.playback.status = dv.getUint8(1);
      setPlaybackTime(dv.getBigUint64(2, true));
      state.playback.speed = dv.getFloat32(10, true);
      const didSeek = dv.getUint8(14) !== 0;
      if (didSeek) {
        for (const list of state.messages.values()) list.length = 0;
        // A series of the whole recording stays; one built from messages starts again.
        for (const s of state.series) if (!s.whole) { s.n = 0; s.head = 0; }
        state.dirty.messages = state.dirty.plot = true;
      }
      updatePlayer();
    }
  }

  function nsToMs(ns) { return Number(ns / 1000n) / 1000; }
  function setPlaybackTime(ns) { state.playback.timeNs = ns; state.playback.time = nsToMs(ns); }
  function nowMs() { return performance.timeOrigin + performance.now(); }

  function onMessage(ch, logNs, buf, offset) {
    const recvMs = nowMs();
    if (ch === state.statsChannel) {
      let s;
      try { s = JSON.parse(utf8.decode(new Uint8Array(buf, offset))); } catch (e) { return; }
      state.stats = s.topics || {};
      if (typeof s.time === "number") {
        const off = s.time / 1e6 - recvMs;
        state.clockOffsetMs = state.clockOffsetMs === null ? off : Math.max(state.clockOffsetMs, off);
      }
      if (typeof s.dropped === "number" && s.dropped > state.dropped) setDropped(s.dropped);
      state.dirty.topics = true;
      return;
    }
    const logMs = nsToMs(logNs);
    const msg = { logNs, logMs, recvMs, buf, offset, ch, pkt: null, value: undefined };
    if (!state.recording && ch.topic === state.selected) {
      recordSample(state.latency, "latencyN", recvMs - logMs);
    }
    let list = state.messages.get(ch.topic);
    if (!list) { list = []; state.messages.set(ch.topic, list); }
    list.push(msg);
    const keep = ch.a0pyImage ? KEEP_IMAGES : KEEP_MESSAGES;
    if (list.length > keep) list.splice(0, list.length - keep);
    if (ch.topic === state.selected) state.dirty.messages = true;
    let plotted = false;
    for (const s of state.series) {
      if (s.topic !== ch.topic || s.whole) continue;
      const v = numberAt(valueOf(msg), s.path);
      if (v !== undefined) { pushPoint(s, logMs, v); plotted = true; }
    }
    if (plotted) state.dirty.plot = true;
  }

  function recordSample(arr, key, v) {
    arr[state[key] % arr.length] = v;
    state[key]++;
  }

  // ---- a0py packets ----
  function uuid(bytes) {
    const h = Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
    return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
  }

  // Decodes the a0py packet at buf[offset:] (format: docs/pubsub.md); every
  // offset is checked against the packet's size before it is followed.
  function decodePacket(buf, offset) {
    const size = buf.byteLength - offset;
    const dv = new DataView(buf, offset, size);
    if (size < 96 || dv.getUint32(0, true) !== PACKET_MAGIC) throw new Error("not an a0py packet");
    const flags = dv.getUint16(6, true);
    const n = dv.getUint32(24, true);
    const payloadOff = Number(dv.getBigUint64(32, true));
    const payloadSize = Number(dv.getBigUint64(40, true));
    if (payloadOff < 96 + 16 * n || payloadOff + payloadSize !== size) throw new Error("corrupt a0py packet");
    const headers = [];
    if (flags & 1) {
      // The standard block, in the order of the server's standardHeaders.
      const [mono, wall, writerId, writerSeq, transportSeq] = state.standardHeaders;
      headers.push([mono, dv.getBigUint64(48, true).toString()]);
      headers.push([wall, dv.getBigUint64(56, true).toString()]);
      headers.push([writerId, uuid(new Uint8Array(buf, offset + 64, 16))]);
      headers.push([writerSeq, dv.getBigUint64(80, true).toString()]);
      headers.push([transportSeq, dv.getBigUint64(88, true).toString()]);
    }
    const str = (off, len) => {
      if (off < 96 + 16 * n || off + len > payloadOff) throw new Error("corrupt a0py packet header");
      return utf8.decode(new Uint8Array(buf, offset + off, len));
    };
    for (let i = 0; i < n; i++) {
      const e = 96 + 16 * i;
      headers.push([str(dv.getUint32(e, true), dv.getUint32(e + 4, true)),
                    str(dv.getUint32(e + 8, true), dv.getUint32(e + 12, true))]);
    }
    return { id: uuid(new Uint8Array(buf, offset + 8, 16)), headers,
             payload: new Uint8Array(buf, offset + payloadOff, payloadSize) };
  }

  function packetOf(msg) {
    if (msg.pkt === null) {
      if (isPacketChannel(msg.ch)) {
        try { msg.pkt = decodePacket(msg.buf, msg.offset); }
        catch (e) { msg.pkt = { id: "", headers: [], payload: new Uint8Array(msg.buf, msg.offset), error: String(e) }; }
      } else {
        msg.pkt = { id: "", headers: [], payload: new Uint8Array(msg.buf, msg.offset) };
      }
    }
    return msg.pkt;
  }

  function isPacketChannel(ch) { return state.packetEncoding !== null && ch.encoding === state.packetEncoding; }

  // The encoding of the payloads as the page gets them: "json" for a typed
  // channel the server renders (a0pyRendered names the channel's own encoding).
  function payloadEncoding(ch) {
    if (isPacketChannel(ch)) return ch.payloadEncoding;
    return ch.a0pyRendered ? "json" : ch.encoding;
  }

  // The payload bytes, without decoding the headers (packetOf decodes them).
  function payloadOf(msg) {
    if (msg.pkt !== null) return msg.pkt.payload;
    if (!isPacketChannel(msg.ch)) return new Uint8Array(msg.buf, msg.offset);
    const size = msg.buf.byteLength - msg.offset;
    if (size < 96) return packetOf(msg).payload;
    const dv = new DataView(msg.buf, msg.offset, 48);
    const off = Number(dv.getBigUint64(32, true)), n = Number(dv.getBigUint64(40, true));
    if (dv.getUint32(0, true) !== PACKET_MAGIC || off < 96 || off + n !== size) return packetOf(msg).payload;
    return new Uint8Array(msg.buf, msg.offset + off, n);
  }

  // The payload as a JS value when it is JSON, or an image's fields
  // (undefined otherwise); parsed once.
  function valueOf(msg) {
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

  // ---- images (foxglove.RawImage, foxglove.CompressedImage, in protobuf) ----
  // The fields of one protobuf message: field number -> values in order
  // (varints and fixed32 as numbers, fixed64 as BigInt, length-delimited as
  // bytes). Every length is checked against the message; throws if it is not one.
  function protobufFields(bytes) {
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

  // The image in a message of an image channel: {width, height, encoding,
  // step, format, frame_id, timestamp, data} or {error}; read once.
  function imageOf(msg) {
    if (msg.image) return msg.image;
    const nums = IMAGE_FIELDS[msg.ch.a0pyImage];
    let img;
    try {
      const f = protobufFields(payloadOf(msg));
      const last = (k) => { const l = f.get(nums[k]); return l ? l[l.length - 1] : undefined; };
      const text = (k) => { const v = last(k); return v instanceof Uint8Array ? utf8.decode(v) : ""; };
      const num = (k) => { const v = last(k); return typeof v === "number" ? v : 0; };
      img = { frame_id: text("frame_id") };
      const ts = last("timestamp");
      if (ts instanceof Uint8Array) {
        const t = protobufFields(ts);
        img.timestamp = { sec: (t.get(1) || [0]).pop(), nsec: (t.get(2) || [0]).pop() };
      }
      if (msg.ch.a0pyImage === "raw") {
        Object.assign(img, { width: num("width"), height: num("height"), encoding: text("encoding"), step: num("step") });
      } else {
        img.format = text("format");
      }
      const data = last("data");
      img.data = data instanceof Uint8Array ? data : new Uint8Array(0);
    } catch (e) {
      img = { error: `not a ${msg.ch.schemaName} message: ${e.message}` };
    }
    msg.image = img;
    return img;
  }

  // Channels of each raw encoding: bytes a pixel, offsets of r, g, b, a (-1: opaque).
  const RAW_ENCODINGS = {
    rgb8: [3, 0, 1, 2, -1], bgr8: [3, 2, 1, 0, -1], rgba8: [4, 0, 1, 2, 3], bgra8: [4, 2, 1, 0, 3],
    mono8: [1, 0, 0, 0, -1], "8UC1": [1, 0, 0, 0, -1], "8UC3": [3, 2, 1, 0, -1], "8UC4": [4, 2, 1, 0, 3],
    mono16: [2, 1, 1, 1, -1], "16UC1": [2, 1, 1, 1, -1],  // the high byte of each little-endian sample
  };

  // Draws msg's image on canvas; returns an error text or "".
  function drawImage(canvas, msg) {
    const img = imageOf(msg);
    if (img.error) return img.error;
    if (msg.ch.a0pyImage === "compressed") {
      const gen = (state.imageGen = (state.imageGen || 0) + 1);
      createImageBitmap(new Blob([img.data], { type: `image/${img.format || "jpeg"}` })).then((bitmap) => {
        if (gen !== state.imageGen) return;  // a newer frame is being drawn
        canvas.width = bitmap.width; canvas.height = bitmap.height;
        canvas.getContext("2d").drawImage(bitmap, 0, 0);
        canvas.dataset.drawn = String(gen);
      }, (e) => { canvas.dataset.error = `${img.format} image does not decode: ${e}`; });
      return "";
    }
    const { width: w, height: h, step, data } = img;
    const enc = RAW_ENCODINGS[img.encoding];
    if (!enc) return `encoding ${JSON.stringify(img.encoding)} is not drawn here (${Object.keys(RAW_ENCODINGS).join(", ")} are)`;
    const [bpp, r, g, b, a] = enc;
    if (!w || !h || w * h > MAX_IMAGE_PIXELS) return `${w}×${h}: not an image this page draws`;
    if (step < w * bpp || data.length < step * (h - 1) + w * bpp) {
      return `${w}×${h} ${img.encoding} with step ${step} needs ${step * (h - 1) + w * bpp} bytes, has ${data.length}`;
    }
    if (canvas.width !== w || canvas.height !== h) { canvas.width = w; canvas.height = h; }
    const ctx = canvas.getContext("2d");
    const out = ctx.createImageData(w, h);
    const px = out.data;
    for (let y = 0; y < h; y++) {
      let s = y * step, d = y * w * 4;
      for (let x = 0; x < w; x++, s += bpp, d += 4) {
        px[d] = data[s + r]; px[d + 1] = data[s + g]; px[d + 2] = data[s + b]; px[d + 3] = a < 0 ? 255 : data[s + a];
      }
    }
    ctx.putImageData(out, 0, 0);
    state.imageGen = (state.imageGen || 0) + 1;
    canvas.dataset.drawn = String(state.imageGen);
    return "";
  }

  // ---- numeric fields ----
  function parsePath(path) {
    const parts = [];
    for (const m of path.matchAll(/([^.[\]]+)|\[(\d+)\]/g)) parts.push(m[2] !== undefined ? Number(m[2]) : m[1]);
    return parts;
  }

  function numberAt(value, path) {
    let v = value;
    for (const k of path) { if (v === null || typeof v !== "object") return undefined; v = v[k]; }
    if (typeof v === "number" && Number.isFinite(v)) return v;
    if (typeof v === "boolean") return v ? 1 : 0;
    return undefined;
  }

  function numericPaths(value, prefix, out, depth) {
    if (out.length >= 200 || depth > 8) return out;
    if (typeof value === "number" || typeof value === "boolean") { if (prefix) out.push(prefix); }
    else if (Array.isArray(value)) value.slice(0, 16).forEach((v, i) => numericPaths(v, `${prefix}[${i}]`, out, depth + 1));
    else if (value && typeof value === "object") for (const [k, v] of Object.entries(value)) numericPaths(v, prefix ? `${prefix}.${k}` : k, out, depth + 1);
    return out;
  }

  // The numeric fields a JSON schema names (objects' properties, not array items).
  function schemaPaths(schema, prefix, out, depth) {
    if (!schema || typeof schema !== "object" || out.length >= 200 || depth > 8) return out;
    const t = schema.type;
    if ((t === "number" || t === "integer" || t === "boolean") && prefix) out.push(prefix);
    else if (t === "object" && schema.properties && typeof schema.properties === "object") {
      for (const [k, v] of Object.entries(schema.properties)) schemaPaths(v, prefix ? `${prefix}.${k}` : k, out, depth + 1);
    }
    return out;
  }

  // ---- plot series ----
  function addSeries(topic, path) {
    if (state.series.some((s) => s.topic === topic && s.path.join() === parsePath(path).join())) return;
    // A recording's series is the field over the whole recording, asked of the
    // server (a0py.fetchSeries); a live one grows from the messages received.
    const s = { topic, name: path, path: parsePath(path), color: COLORS[state.series.length % COLORS.length],
                t: new Float64Array(SERIES_POINTS), v: new Float64Array(SERIES_POINTS), n: 0, head: 0, total: 0,
                whole: state.recording, loading: false, loaded: false };
    state.series.push(s);
    if (!s.whole) {
      for (const msg of state.messages.get(topic) || []) {
        const v = numberAt(valueOf(msg), s.path);
        if (v !== undefined) pushPoint(s, msg.logMs, v);
      }
    }
    updateSubscriptions();
    requestSeries();
    renderLegend();
    state.dirty.plot = true;
  }

  // Asks the server for every whole-recording series not yet loaded (again after a reconnection).
  function requestSeries() {
    for (const s of state.series) {
      if (!s.whole || s.loaded || s.loading) continue;
      const ch = state.byTopic.get(s.topic);
      if (!ch || !state.ws || state.ws.readyState !== WebSocket.OPEN) continue;
      const id = state.nextRequest++;
      state.seriesRequests.set(id, s);
      s.loading = true;
      send({ op: "a0py.fetchSeries", requestId: id, channelId: ch.id, path: s.name, maxPoints: SERIES_POINTS });
    }
  }

  function onSeries(msg) {
    const s = state.seriesRequests.get(msg.requestId);
    if (!s) return;
    state.seriesRequests.delete(msg.requestId);
    s.loading = false;
    if (!state.series.includes(s) || !Array.isArray(msg.t) || !Array.isArray(msg.v)) return;
    const startMs = nsToMs(BigInt(msg.startNs));
    s.n = 0; s.head = 0; s.total = 0;
    const n = Math.min(msg.t.length, msg.v.length, SERIES_POINTS);
    for (let i = 0; i < n; i++) pushPoint(s, startMs + msg.t[i] / 1e6, msg.v[i]);
    s.loaded = true;
    state.dirty.plot = true;
  }

  function removeSeries(s) {
    state.series = state.series.filter((x) => x !== s);
    updateSubscriptions();
    renderLegend();
    state.dirty.plot = true;
  }

  function pushPoint(s, t, v) {
    const i = (s.head + s.n) % SERIES_POINTS;
    s.t[i] = t; s.v[i] = v; s.total++;
    if (s.n < SERIES_POINTS) s.n++; else s.head = (s.head + 1) % SERIES_POINTS;
  }

  function renderLegend() {
    const lg = $("legend");
    lg.replaceChildren(...state.series.map((s) => {
      const rm = el("button", { type: "button", title: "remove", "aria-label": `remove ${s.topic} ${s.name}` }, "×");
      rm.onclick = () => removeSeries(s);
      const swatch = el("span", { class: "swatch" });
      swatch.style.background = s.color;  // CSSOM, not a style attribute: allowed by the page's CSP
      return el("span", { class: "series" }, swatch, `${s.topic}: ${s.name}`, rm);
    }));
  }

  // ---- rendering ----
  function fmtRate(r) { return r >= 100 ? r.toFixed(0) : r >= 10 ? r.toFixed(1) : r.toFixed(2); }
  function fmtBandwidth(b) {
    if (b >= 1 << 30) return (b / (1 << 30)).toFixed(1) + " GiB/s";
    if (b >= 1 << 20) return (b / (1 << 20)).toFixed(1) + " MiB/s";
    if (b >= 1 << 10) return (b / (1 << 10)).toFixed(1) + " KiB/s";
    return b.toFixed(0) + " B/s";
  }

  function renderTopics() {
    const body = $("topics").tBodies[0];
    const filter = $("filter").value.trim().toLowerCase();
    const names = new Set([...state.byTopic.keys(), ...Object.keys(state.stats)]);
    names.delete(STATS_TOPIC);
    const sorted = [...names].filter((n) => !filter || n.toLowerCase().includes(filter)).sort();
    $("no-topics").hidden = names.size > 0;
    const rows = new Map([...body.rows].map((r) => [r.dataset.topic, r]));
    const frag = [];
    for (const name of sorted) {
      let row = rows.get(name);
      if (!row) {
        row = el("tr", { class: "topic", "data-topic": name, tabindex: "0" },
                 el("td", { class: "name", title: name }, name), el("td", { class: "rate" }),
                 el("td", { class: "bw" }), el("td", { class: "missed" }));
        row.onclick = () => select(name);
        row.onkeydown = (e) => { if (e.key === "Enter") select(name); };
      }
      const st = state.stats[name];
      const ch = state.byTopic.get(name);
      row.cells[1].textContent = st ? fmtRate(st.rate) : "–";
      row.cells[2].textContent = st ? fmtBandwidth(st.bandwidth) : "–";
      row.cells[3].textContent = st ? String(st.missed) : "–";
      row.cells[3].classList.toggle("some", !!(st && st.missed));
      row.dataset.rate = st ? String(st.rate) : "0";
      row.classList.toggle("selected", name === state.selected);
      row.classList.toggle("idle", !ch);
      // log and cfg arenas are channels T:log and T:cfg (see docs/view.md)
      row.dataset.protocol = (ch && ch.a0pyProtocol) || (st && st.protocol) || "pubsub";
      row.title = ch ? `${name} — ${describe(ch)}` : `${name} — nothing published yet`;
      frag.push(row);
    }
    body.replaceChildren(...frag);
  }

  function describe(ch) {
    if (ch.a0pyProtocol === "log") return "log messages (the topic's log arena)";
    if (ch.a0pyProtocol === "cfg") return `configuration, ${payloadEncoding(ch)} (each version as it is written)`;
    const enc = ch.a0pyRendered || (ch.a0pyImage ? ch.encoding === state.packetEncoding ? ch.payloadEncoding : ch.encoding
                                                  : payloadEncoding(ch));
    let text = ch.schemaEncoding && ch.schemaName ? `${ch.schemaName} (${enc})` : enc;
    if (ch.a0pyRendered) text += ", shown field by field";
    if (ch.a0pyImage) text += ` · image: at most ${ch.a0pyMaxHz} frames a second reach this page (newer frames replace older ones, the rest are dropped)`;
    return text;
  }

  function select(name) {
    state.selected = name;
    state.latencyN = 0; state.shownN = 0;
    $("topic-name").textContent = name;
    updateSubscriptions();
    state.dirty.topics = state.dirty.messages = state.dirty.fields = true;
  }

  function fmtTime(ms) {
    const d = new Date(ms);
    return d.toLocaleTimeString([], { hour12: false }) + "." + String(Math.floor(ms % 1000)).padStart(3, "0");
  }

  function hexDump(bytes, limit) {
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

  // JSON pretty-printed, numbers clickable (adds them to the plot).
  function jsonNodes(value, path, indent, out) {
    const pad = "  ".repeat(indent);
    if (typeof value === "number" || typeof value === "boolean") {
      const s = el("span", { class: "num", title: `plot ${path || "value"}`, "data-path": path }, JSON.stringify(value));
      out.push(s);
    } else if (Array.isArray(value)) {
      if (!value.length) { out.push("[]"); return; }
      out.push("[\n");
      value.forEach((v, i) => { out.push(pad + "  "); jsonNodes(v, `${path}[${i}]`, indent + 1, out); out.push(i + 1 < value.length ? ",\n" : "\n"); });
      out.push(pad + "]");
    } else if (value && typeof value === "object") {
      const keys = Object.keys(value);
      if (!keys.length) { out.push("{}"); return; }
      out.push("{\n");
      keys.forEach((k, i) => {
        out.push(`${pad}  ${JSON.stringify(k)}: `);
        jsonNodes(value[k], path ? `${path}.${k}` : k, indent + 1, out);
        out.push(i + 1 < keys.length ? ",\n" : "\n");
      });
      out.push(pad + "}");
    } else {
      out.push(JSON.stringify(value));
    }
  }

  function payloadNode(msg, mode) {
    const p = packetOf(msg).payload;
    const pre = el("pre", { class: "payload" });
    let m = mode;
    if (m === "auto") {
      if (valueOf(msg) !== undefined) m = "json";
      else {
        try { const t = utf8Strict.decode(p); m = /[\x00-\x08\x0e-\x1f]/.test(t) ? "hex" : "text"; }
        catch (e) { m = "hex"; }
      }
    }
    pre.dataset.mode = m;
    if (m === "json") {
      const v = valueOf(msg);
      if (v === undefined) { pre.textContent = "(not JSON) " + utf8.decode(p.subarray(0, 4096)); return pre; }
      const nodes = [];
      jsonNodes(v, "", 0, nodes);
      pre.append(...nodes);
    } else if (m === "text") {
      pre.textContent = utf8.decode(p.subarray(0, 65536)) + (p.length > 65536 ? `\n… ${p.length - 65536} more bytes` : "");
    } else {
      pre.textContent = hexDump(p, 4096);
    }
    return pre;
  }

  function renderMessages() {
    const box = $("messages");
    const name = state.selected;
    const ch = name && state.byTopic.get(name);
    if (!name) { box.replaceChildren(el("p", { class: "hint" }, "Click a topic to see its latest messages.")); return; }
    $("topic-info").textContent = ch ? `${describe(ch)} · channel ${ch.id}` : "nothing published yet";
    const list = state.messages.get(name) || [];
    const keep = Number($("keep").value);
    const mode = $("render-mode").value;
    const shown = list.slice(-keep).reverse();
    if (!shown.length) { box.replaceChildren(el("p", { class: "hint" }, "Waiting for a message…")); return; }
    const isLog = ch && ch.a0pyProtocol === "log";
    const head = [];
    if (ch && ch.a0pyImage) {
      // The newest frame, drawn on one canvas kept across renders.
      if (!state.imageCanvas) state.imageCanvas = el("canvas", { id: "image", "aria-label": "The newest image of the topic" });
      const c = state.imageCanvas;
      if (c.dataset.msgOf !== name || state.imageMsg !== shown[0]) {
        state.imageMsg = shown[0];
        c.dataset.msgOf = name;
        c.dataset.error = drawImage(c, shown[0]);
      }
      head.push(el("div", { class: "image" }, c, c.dataset.error ? el("p", { class: "hint", text: c.dataset.error }) : ""));
    }
    const nodes = shown.map((msg) => {
      const pkt = packetOf(msg);
      if (isLog) return logNode(msg, pkt);
      const transportSeq = state.standardHeaders[4];
      const seq = (pkt.headers.find(([k]) => k === transportSeq) || [])[1];
      const meta = el("div", { class: "meta" },
        el("span", { class: "time", text: fmtTime(msg.logMs) }),
        el("span", { text: seq !== undefined ? `seq ${seq}` : "" }),
        el("span", { text: `${pkt.payload.length} bytes` }));
      const rows = pkt.headers.map(([k, v]) => el("tr", null, el("td", { text: k }), el("td", { text: v })));
      const det = el("details", null, el("summary", null, `headers (${pkt.headers.length})${pkt.id ? " · id " + pkt.id : ""}`),
                     el("table", { class: "headers" }, ...rows));
      return el("div", { class: "msg", "data-seq": seq || "" }, meta, det, payloadNode(msg, mode));
    });
    box.replaceChildren(...head, ...nodes);
    if (!state.recording && shown.length) recordSample(state.shown, "shownN", nowMs() - shown[0].logMs);
  }

  // A log message: one line of time, level and text; its headers folded below.
  function logNode(msg, pkt) {
    const level = (pkt.headers.find(([k]) => k === "a0_log_level") || [])[1] || "INFO";
    const logger = (pkt.headers.find(([k]) => k === "logger") || [])[1];
    const text = utf8.decode(pkt.payload.subarray(0, 65536));
    const rows = pkt.headers.map(([k, v]) => el("tr", null, el("td", { text: k }), el("td", { text: v })));
    return el("div", { class: "msg log", "data-level": level },
      el("div", { class: "logline" },
        el("span", { class: "time", text: fmtTime(msg.logMs) }),
        el("span", { class: "level", text: level }),
        logger ? el("span", { class: "logger", text: logger }) : "",
        el("span", { class: "text", text })),
      el("details", null, el("summary", null, `headers (${pkt.headers.length})`), el("table", { class: "headers" }, ...rows)));
  }

  function renderFields() {
    const sel = $("field");
    const name = state.selected;
    const list = (name && state.messages.get(name)) || [];
    let paths = [];
    if (list.length) { const v = valueOf(list[list.length - 1]); if (v !== undefined) paths = numericPaths(v, "", [], 0); }
    // No message yet (a recording's channel that starts later): the fields its schema names.
    const ch = name && state.byTopic.get(name);
    if (!paths.length && ch && ch.schemaObj) paths = schemaPaths(ch.schemaObj, "", [], 0);
    const cur = sel.value;
    sel.replaceChildren(el("option", { value: "" }, paths.length ? "numeric field…" : "no numeric field"),
                        ...paths.map((p) => el("option", { value: p }, p)));
    if (paths.includes(cur)) sel.value = cur;
    state.fieldsFor = name;
    state.fieldsCount = paths.length;
  }

  // ---- the plot (canvas, drawn by hand) ----
  function plotRightEdge() {
    if (state.recording) return state.playback.time || (state.dataRange ? state.dataRange[0] : nowMs());
    if (state.paused && state.frozenAt !== null) return state.frozenAt;
    return nowMs() + (state.clockOffsetMs || 0);
  }

  function drawPlot() {
    const c = $("plot");
    const dpr = window.devicePixelRatio || 1;
    const w = Math.max(200, Math.floor(c.clientWidth * dpr)), h = Math.max(100, Math.floor(c.clientHeight * dpr));
    if (c.width !== w || c.height !== h) { c.width = w; c.height = h; }
    const g = c.getContext("2d");
    if (!state.colors || state.colorsAt < nowMs() - 2000) {
      const css = getComputedStyle(document.documentElement);
      state.colors = [css.getPropertyValue("--muted").trim() || "#666", css.getPropertyValue("--line").trim() || "#ddd"];
      state.colorsAt = nowMs();
    }
    const [fg, line] = state.colors;
    g.clearRect(0, 0, w, h);
    const padL = 60 * dpr, padR = 10 * dpr, padT = 10 * dpr, padB = 22 * dpr;
    const pw = w - padL - padR, ph = h - padT - padB;
    const whole = state.recording && state.dataRange && $("window").value === "all";
    const t1 = whole ? state.dataRange[1] : plotRightEdge();
    const span = whole ? Math.max(1, state.dataRange[1] - state.dataRange[0]) : Number($("window").value) * 1000;
    const t0 = t1 - span;
    let lo = Infinity, hi = -Infinity;
    for (const s of state.series) for (let k = 0; k < s.n; k++) {
      const i = (s.head + k) % SERIES_POINTS;
      if (s.t[i] < t0 || s.t[i] > t1) continue;
      if (s.v[i] < lo) lo = s.v[i]; if (s.v[i] > hi) hi = s.v[i];
    }
    if (!Number.isFinite(lo)) { lo = 0; hi = 1; }
    if (hi === lo) { hi += 0.5; lo -= 0.5; }
    const m = (hi - lo) * 0.05; lo -= m; hi += m;
    const X = (t) => padL + ((t - t0) / span) * pw, Y = (v) => padT + (1 - (v - lo) / (hi - lo)) * ph;
    g.font = `${11 * dpr}px sans-serif`; g.fillStyle = fg; g.strokeStyle = line; g.lineWidth = 1;
    g.textAlign = "right"; g.textBaseline = "middle";
    for (let k = 0; k <= 4; k++) {
      let v = lo + ((hi - lo) * k) / 4;
      if (Math.abs(v) < (hi - lo) * 1e-3) v = 0;
      const y = Y(v);
      g.beginPath(); g.moveTo(padL, y); g.lineTo(padL + pw, y); g.stroke();
      g.fillText(Math.abs(v) >= 1e4 || (Math.abs(v) < 1e-2 && v !== 0) ? v.toExponential(2) : v.toFixed(2), padL - 4 * dpr, y);
    }
    g.textAlign = "center"; g.textBaseline = "top";
    const step = span / 5;
    for (let k = 0; k <= 5; k++) {
      const x = padL + (k * pw) / 5;
      g.beginPath(); g.moveTo(x, padT); g.lineTo(x, padT + ph); g.stroke();
      // A recording's axis counts seconds from its start (as the clock does); live, back from now.
      const label = state.recording && state.dataRange ? `${((t0 + k * step - state.dataRange[0]) / 1000).toFixed(1)} s`
        : k === 5 ? "now" : `-${((span - k * step) / 1000).toFixed(1)}s`;
      g.fillText(label, x, padT + ph + 4 * dpr);
    }
    if (state.recording && state.playback.time >= t0 && state.playback.time <= t1) {
      const x = X(state.playback.time);  // the playback time
      g.save(); g.strokeStyle = fg; g.setLineDash([4 * dpr, 4 * dpr]);
      g.beginPath(); g.moveTo(x, padT); g.lineTo(x, padT + ph); g.stroke(); g.restore();
    }
    g.save();
    g.beginPath(); g.rect(padL, padT, pw, ph); g.clip();
    g.lineWidth = 1.5 * dpr;
    // One column of pixels gets at most its first, lowest, highest and last
    // point: the drawing costs the canvas's width, not the message rate.
    for (const s of state.series) {
      g.strokeStyle = s.color; g.beginPath();
      let started = false, col = -1, cmin = 0, cmax = 0, clast = 0;
      const flush = () => {
        if (col < 0) return;
        g.lineTo(col, Y(cmin)); g.lineTo(col, Y(cmax)); g.lineTo(col, Y(clast));
      };
      for (let k = 0; k < s.n; k++) {
        const i = (s.head + k) % SERIES_POINTS;
        if (s.t[i] < t0 - span * 0.01) continue;
        if (s.t[i] > t1 + span * 0.01) break;
        const x = Math.round(X(s.t[i])), v = s.v[i];
        if (!started) { g.moveTo(x, Y(v)); started = true; col = x; cmin = cmax = clast = v; continue; }
        if (x !== col) { flush(); col = x; cmin = cmax = v; }
        if (v < cmin) cmin = v; if (v > cmax) cmax = v;
        clast = v;
      }
      flush();
      g.stroke();
    }
    g.restore();
    if (!state.series.length) {
      g.fillStyle = fg; g.textAlign = "center"; g.textBaseline = "middle";
      g.fillText("Pick a numeric field (or click a number in a message) to plot it", padL + pw / 2, padT + ph / 2);
    }
    c.dataset.points = String(state.series.reduce((a, s) => a + s.n, 0));
  }

  // ---- recording controls ----
  // command 0 play, 1 pause; seekNs (BigInt) to seek too.
  function playbackControl(command, seekNs) {
    if (!state.ws || state.ws.readyState !== WebSocket.OPEN) return;
    const rid = new TextEncoder().encode(`page-${state.nextRequest++}`);
    const b = new ArrayBuffer(1 + 1 + 4 + 1 + 8 + 4 + rid.length);
    const dv = new DataView(b);
    dv.setUint8(0, 3); dv.setUint8(1, command);
    dv.setFloat32(2, Number($("speed").value), true);
    dv.setUint8(6, seekNs === undefined ? 0 : 1);
    dv.setBigUint64(7, seekNs === undefined ? 0n : seekNs, true);
    dv.setUint32(15, rid.length, true);
    new Uint8Array(b, 19).set(rid);
    state.ws.send(b);
  }

  const STATUS_NAMES = ["playing", "paused", "buffering", "ended"];

  function updatePlayer() {
    const play = $("play");
    play.textContent = state.playback.status === 0 ? "Pause" : "Play";
    play.dataset.status = STATUS_NAMES[state.playback.status] || "";
    play.title = state.playback.status === 3 ? "Play again from the start" : "";
    if (!state.recording) $("pause").textContent = state.paused ? "Resume" : "Pause";
    updateClock();
  }

  // The clock in ns (BigInt): a float of ms would read -0.000 s at the start.
  function updateClock() {
    if (!state.recording || !state.dataRangeNs) return;
    const [a, b] = state.dataRangeNs;
    let t = state.playback.timeNs === null ? a : state.playback.timeNs;
    if (t < a) t = a; else if (t > b) t = b;
    const span = b - a;
    $("clock").textContent = `${fmtTime(nsToMs(t))}  (${(Number(t - a) / 1e9).toFixed(3)} s of ${(Number(span) / 1e9).toFixed(3)} s)`;
    if (!state.sliding) $("slider").value = String(span > 0n ? Number(((t - a) * 1000n) / span) : 0);
  }

  function seekToFraction(f) {
    if (!state.dataRangeNs) return;
    const [a, b] = state.dataRangeNs;
    const at = a + BigInt(Math.round(Number(b - a) * Math.min(1, Math.max(0, f))));
    playbackControl(state.playback.status === 0 ? 0 : 1, at);
  }

  // The player's one button: pause while playing, else play (from the start once ended:
  // the server keeps an ended playback ended until a seek).
  function playOrPause() {
    const st = state.playback.status;
    if (st === 0) playbackControl(1);
    else if (st === 3 && state.dataRangeNs) playbackControl(0, state.dataRangeNs[0]);
    else playbackControl(0);
  }

  function togglePause() {
    if (state.recording) { playOrPause(); return; }
    state.paused = !state.paused;
    state.frozenAt = state.paused ? nowMs() + (state.clockOffsetMs || 0) : null;
    updatePlayer();
    state.dirty.messages = state.dirty.plot = true;
  }

  // ---- frame loop ----
  function frame() {
    const began = performance.now();
    if (state.dirty.topics) { state.dirty.topics = false; renderTopics(); }
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

  function init() {
    $("pause").onclick = togglePause;
    $("play").onclick = playOrPause;
    $("speed").onchange = () => playbackControl(state.playback.status === 0 ? 0 : 1);
    const slider = $("slider");
    slider.oninput = () => { state.sliding = true; };
    slider.onchange = () => { state.sliding = false; seekToFraction(Number(slider.value) / 1000); };
    $("filter").oninput = () => { state.dirty.topics = true; };
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
    connect();
    requestAnimationFrame(frame);
  }

  // For tests and bench/view.py: read-only looks at what the page holds.
  window.a0pyView = {
    state,
    select,
    imageCanvas: () => state.imageCanvas || null,
    addSeries,
    seekToFraction,
    latencies: () => Array.from(state.latency.subarray(0, Math.min(state.latencyN, LATENCY_SAMPLES))),
    shownLatencies: () => Array.from(state.shown.subarray(0, Math.min(state.shownN, LATENCY_SAMPLES))),
  };

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init); else init();
})();
