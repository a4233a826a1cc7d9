// What the page holds: one object, shared by every module. Messages and
// server replies change it and mark what is dirty; the frame loop (view.js)
// draws what is dirty, once per animation frame at most.

export const STATS_TOPIC = "/a0py/view/stats";
export const KEEP_MESSAGES = 50;          // per watched topic
export const KEEP_IMAGES = 2;             // per image topic (a frame can be megabytes)
export const SERIES_POINTS = 20000;       // per plotted series
export const LATENCY_SAMPLES = 20000;

export const state = {
  connected: false,
  serverInfo: null,
  // What packets are called and how they are laid out (the server's
  // a0py.packetEncoding, a0py.standardHeaders and a0py.packetLayout
  // metadata): the encoding of channels of whole packets, the standard
  // headers in the order of the standard block, and the codec built from the
  // layout (packet.js).
  packetEncoding: null,
  standardHeaders: [],
  codec: null,
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
  hoverMessages: false,     // the pointer is over the messages: they hold still
  sliding: false,           // the time slider is being dragged
  fieldsFor: null,          // the topic whose numeric fields the field picker offers
  fieldsCount: 0,           // how many it offers
  frozenAt: null,           // ms, the plot's right edge while paused
  clockOffsetMs: null,      // server wall clock - local wall clock
  dropped: 0,
  playback: { status: 1, time: 0, timeNs: null, speed: 1 },  // time in ms and in ns (BigInt)
  dataRange: null,          // [startMs, endMs] of a recording
  dataRangeNs: null,        // the same in ns (BigInt): the clock's text is exact
  seriesRequests: new Map(), // a0py.fetchSeries request id -> series
  nextRequest: 1,
  // What this page may change, from serverInfo's metadata (a0py.allowPublish,
  // a0py.allowSet, a0py.allowCall): the globs each flag of `a0py view` allows.
  allow: { publish: [], set: [], call: [] },
  droppedByTopic: {},       // topic -> messages the server dropped for this page
  tab: "messages",          // the panel shown on the right
  clientChannels: new Map(), // topic -> {id, schemaName, schema}: what this page advertised to publish
  nextClientChannel: 1,
  published: 0,             // messages this page published
  params: new Map(),        // parameter name -> {value, type} (cfg topics' values)
  paramsSubscribed: new Set(),
  services: new Map(),      // service id -> service (as advertised)
  nextCall: 1,
  calls: new Map(),         // call id -> {serviceId, sentMs}
  callResult: null,         // {ok, text, ms, serviceId}
  graph: { published: new Map(), subscribed: new Map(), services: new Map(), watching: false },
  dirty: { topics: true, messages: true, plot: true, fields: true, legend: true,
           publish: true, params: true, services: true, graph: true },
  latency: new Float64Array(LATENCY_SAMPLES), latencyN: 0,
  shown: new Float64Array(LATENCY_SAMPLES), shownN: 0,
  frames: 0, frameJsMs: 0,  // frames drawn, and the JavaScript time they took
};

// Appends v to the ring arr of samples, whose count is state[key].
export function recordSample(arr, key, v) {
  arr[state[key] % arr.length] = v;
  state[key]++;
}
