// The plot panel: the series drawn on a canvas by hand, their legend, and the
// picker of the selected topic's numeric fields.

import { valueOf } from "./content.js";
import { numericPaths, schemaPaths, removeSeries } from "./series.js";
import { SERIES_POINTS, state } from "./state.js";
import { $, el, nowMs } from "./ui.js";

// The time (ms) at the plot's right edge: the playback time, the moment the
// page was paused, or now on the server's clock.
function plotRightEdge() {
  if (state.recording) return state.playback.time || (state.dataRange ? state.dataRange[0] : nowMs());
  if (state.paused && state.frozenAt !== null) return state.frozenAt;
  return nowMs() + (state.clockOffsetMs || 0);
}

let themeColors = null, themeColorsAt = 0;

// The page's colours for text and grid lines (read again every 2 s: a theme may change).
function colors() {
  if (!themeColors || themeColorsAt < nowMs() - 2000) {
    const css = getComputedStyle(document.documentElement);
    themeColors = [css.getPropertyValue("--muted").trim() || "#666", css.getPropertyValue("--line").trim() || "#ddd"];
    themeColorsAt = nowMs();
  }
  return themeColors;
}

// The view of the plot: canvas size, plot area, time window [t0, t1] and value range [lo, hi].
function frameOf(c) {
  const dpr = window.devicePixelRatio || 1;
  const w = Math.max(200, Math.floor(c.clientWidth * dpr)), h = Math.max(100, Math.floor(c.clientHeight * dpr));
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
  return { dpr, w, h, padL, padT, pw, ph, t0, t1, span, lo, hi,
           X: (t) => padL + ((t - t0) / span) * pw, Y: (v) => padT + (1 - (v - lo) / (hi - lo)) * ph };
}

function drawGrid(g, f, fg, line) {
  const { dpr, padL, padT, pw, ph, t0, span, lo, hi, Y } = f;
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
}

// The playback time, a dashed vertical line.
function drawPlaybackTime(g, f, fg) {
  if (!state.recording || state.playback.time < f.t0 || state.playback.time > f.t1) return;
  const x = f.X(state.playback.time);
  g.save(); g.strokeStyle = fg; g.setLineDash([4 * f.dpr, 4 * f.dpr]);
  g.beginPath(); g.moveTo(x, f.padT); g.lineTo(x, f.padT + f.ph); g.stroke(); g.restore();
}

// One column of pixels gets at most its first, lowest, highest and last
// point: the drawing costs the canvas's width, not the message rate.
function drawSeries(g, f, s) {
  const { t0, t1, span, X, Y } = f;
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

export function drawPlot() {
  const c = $("plot");
  const f = frameOf(c);
  if (c.width !== f.w || c.height !== f.h) { c.width = f.w; c.height = f.h; }
  const g = c.getContext("2d");
  const [fg, line] = colors();
  g.clearRect(0, 0, f.w, f.h);
  drawGrid(g, f, fg, line);
  drawPlaybackTime(g, f, fg);
  g.save();
  g.beginPath(); g.rect(f.padL, f.padT, f.pw, f.ph); g.clip();
  g.lineWidth = 1.5 * f.dpr;
  for (const s of state.series) drawSeries(g, f, s);
  g.restore();
  if (!state.series.length) {
    g.fillStyle = fg; g.textAlign = "center"; g.textBaseline = "middle";
    g.fillText("Pick a numeric field (or click a number in a message) to plot it", f.padL + f.pw / 2, f.padT + f.ph / 2);
  }
  c.dataset.points = String(state.series.reduce((a, s) => a + s.n, 0));
}

export function renderLegend() {
  $("legend").replaceChildren(...state.series.map((s) => {
    const rm = el("button", { type: "button", title: "remove", "aria-label": `remove ${s.topic} ${s.name}` }, "×");
    rm.onclick = () => removeSeries(s);
    const swatch = el("span", { class: "swatch" });
    swatch.style.background = s.color;  // CSSOM, not a style attribute: allowed by the page's CSP
    return el("span", { class: "series" }, swatch, `${s.topic}: ${s.name}`, rm);
  }));
}

// The field picker: the numeric fields of the selected topic's newest message,
// or (no message yet, as a recording's channel that starts later) those its schema names.
export function renderFields() {
  const sel = $("field");
  const name = state.selected;
  const list = (name && state.messages.get(name)) || [];
  let paths = [];
  if (list.length) { const v = valueOf(list[list.length - 1]); if (v !== undefined) paths = numericPaths(v, "", [], 0); }
  const ch = name && state.byTopic.get(name);
  if (!paths.length && ch && ch.schemaObj) paths = schemaPaths(ch.schemaObj, "", [], 0);
  const cur = sel.value;
  sel.replaceChildren(el("option", { value: "" }, paths.length ? "numeric field…" : "no numeric field"),
                      ...paths.map((p) => el("option", { value: p }, p)));
  if (paths.includes(cur)) sel.value = cur;
  state.fieldsFor = name;
  state.fieldsCount = paths.length;
}
