// The player of a recording (play or pause, the time slider, the clock, the
// speed) and the live page's Pause, which freezes what the page shows.

import { PLAYBACK_COMMAND, PLAYBACK_STATUS, STATUS_ENDED, STATUS_PLAYING, isOpen, playbackControlRequest,
         sendBinary } from "./socket.js";
import { state } from "./state.js";
import { $, el, fmtTime, nowMs, nsToMs } from "./ui.js";

// Asks the server to play or pause (PLAYBACK_COMMAND), at the chosen speed;
// seekNs (BigInt) to seek too.
function playbackControl(command, seekNs) {
  if (!isOpen()) return;
  sendBinary(playbackControlRequest(command, Number($("speed").value), seekNs, `page-${state.nextRequest++}`));
}

// The command that keeps playing or paused, as it is now.
function currentCommand() {
  return state.playback.status === STATUS_PLAYING ? PLAYBACK_COMMAND.PLAY : PLAYBACK_COMMAND.PAUSE;
}

export function applySpeed() { playbackControl(currentCommand()); }

// Shows the source (live or a recording) the server's serverInfo announced.
export function showSource() {
  $("source").textContent = state.recording ? "recording" : "live";
  $("player").hidden = !state.recording;
  // One Play button: a recording's is the player's; the bar's Pause freezes a live page.
  $("pause").hidden = state.recording;
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

export function updatePlayer() {
  const play = $("play");
  play.textContent = state.playback.status === STATUS_PLAYING ? "Pause" : "Play";
  play.dataset.status = PLAYBACK_STATUS[state.playback.status] || "";
  play.title = state.playback.status === STATUS_ENDED ? "Play again from the start" : "";
  if (!state.recording) $("pause").textContent = state.paused ? "Resume" : "Pause";
  updateClock();
}

export function setPlaybackTime(ns) { state.playback.timeNs = ns; state.playback.time = nsToMs(ns); }

// The clock in ns (BigInt): a float of ms would read -0.000 s at the start.
export function updateClock() {
  if (!state.recording || !state.dataRangeNs) return;
  const [a, b] = state.dataRangeNs;
  let t = state.playback.timeNs === null ? a : state.playback.timeNs;
  if (t < a) t = a; else if (t > b) t = b;
  const span = b - a;
  $("clock").textContent = `${fmtTime(nsToMs(t))}  (${(Number(t - a) / 1e9).toFixed(3)} s of ${(Number(span) / 1e9).toFixed(3)} s)`;
  if (!state.sliding) $("slider").value = String(span > 0n ? Number(((t - a) * 1000n) / span) : 0);
}

// Seeks to fraction f (0 to 1) of the recording, playing on if it played.
export function seekToFraction(f) {
  if (!state.dataRangeNs) return;
  const [a, b] = state.dataRangeNs;
  const at = a + BigInt(Math.round(Number(b - a) * Math.min(1, Math.max(0, f))));
  playbackControl(currentCommand(), at);
}

// The player's one button: pause while playing, else play (from the start once ended:
// the server keeps an ended playback ended until a seek).
export function playOrPause() {
  const st = state.playback.status;
  if (st === STATUS_PLAYING) playbackControl(PLAYBACK_COMMAND.PAUSE);
  else if (st === STATUS_ENDED && state.dataRangeNs) playbackControl(PLAYBACK_COMMAND.PLAY, state.dataRangeNs[0]);
  else playbackControl(PLAYBACK_COMMAND.PLAY);
}

// The bar's Pause: the player's button for a recording; live, freezes the page.
export function togglePause() {
  if (state.recording) { playOrPause(); return; }
  state.paused = !state.paused;
  state.frozenAt = state.paused ? nowMs() + (state.clockOffsetMs || 0) : null;
  updatePlayer();
  state.dirty.messages = state.dirty.plot = true;
}
