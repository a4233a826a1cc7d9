// The image panel: the newest frame of an image channel (foxglove.RawImage,
// foxglove.CompressedImage) drawn on one canvas kept across renders.

import { imageOf } from "./content.js";
import { el } from "./ui.js";

const MAX_IMAGE_PIXELS = 64 << 20;

// Channels of each raw encoding: bytes a pixel, offsets of r, g, b, a (-1: opaque).
const RAW_ENCODINGS = {
  rgb8: [3, 0, 1, 2, -1], bgr8: [3, 2, 1, 0, -1], rgba8: [4, 0, 1, 2, 3], bgra8: [4, 2, 1, 0, 3],
  mono8: [1, 0, 0, 0, -1], "8UC1": [1, 0, 0, 0, -1], "8UC3": [3, 2, 1, 0, -1], "8UC4": [4, 2, 1, 0, 3],
  mono16: [2, 1, 1, 1, -1], "16UC1": [2, 1, 1, 1, -1],  // the high byte of each little-endian sample
};

let panelCanvas = null; // the one canvas, kept across renders
let shownMsg = null;    // the message drawn on it
let generation = 0;     // counts the frames drawn (or being drawn)

// The canvas (null before the first image).
export function imageCanvas() { return panelCanvas; }

// A compressed image, decoded by the browser; drawn unless a newer one was asked for since.
function drawCompressed(canvas, img) {
  const gen = ++generation;
  createImageBitmap(new Blob([img.data], { type: `image/${img.format || "jpeg"}` })).then((bitmap) => {
    if (gen !== generation) return;  // a newer frame is being drawn
    canvas.width = bitmap.width; canvas.height = bitmap.height;
    canvas.getContext("2d").drawImage(bitmap, 0, 0);
    canvas.dataset.drawn = String(gen);
  }, (e) => { canvas.dataset.error = `${img.format} image does not decode: ${e}`; });
  return "";
}

// A raw image, pixel by pixel; returns an error text or "".
function drawRaw(canvas, img) {
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
  canvas.dataset.drawn = String(++generation);  // a count tests wait on
  return "";
}

// Draws msg's image on canvas; returns an error text or "".
function drawImage(canvas, msg) {
  const img = imageOf(msg);
  if (img.error) return img.error;
  return msg.ch.a0pyImage === "compressed" ? drawCompressed(canvas, img) : drawRaw(canvas, img);
}

// The panel for topic `name` showing `newest` (a message): the canvas, and the error under it if any.
export function imagePanel(name, newest) {
  if (!panelCanvas) panelCanvas = el("canvas", { id: "image", "aria-label": "The newest image of the topic" });
  const c = panelCanvas;
  if (c.dataset.msgOf !== name || shownMsg !== newest) {
    shownMsg = newest;
    c.dataset.msgOf = name;
    c.dataset.error = drawImage(c, newest);
  }
  return el("div", { class: "image" }, c, c.dataset.error ? el("p", { class: "hint", text: c.dataset.error }) : "");
}
