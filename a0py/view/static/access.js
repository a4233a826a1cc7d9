// What this page may change, and why not: the globs of `a0py view
// --allow-publish`, `--allow-set` and `--allow-call` (serverInfo's metadata
// a0py.allowPublish, a0py.allowSet, a0py.allowCall, read into state.allow),
// matched as the server matches them (a0py's discovery globs: `*` within one
// segment, `**` across segments, `?`, `[abc]`). The server checks every
// request again; this only lets the page say why a control is off.

import { state } from "./state.js";

export const FLAGS = { publish: "--allow-publish", set: "--allow-set", call: "--allow-call" };
const DOING = { publish: "Publishing", set: "Setting parameters", call: "Calling services" };

const compiled = new Map();

// A topic glob as a RegExp (see above).
function globRegExp(glob) {
  let re = compiled.get(glob);
  if (re) return re;
  const pat = glob.startsWith("/") ? glob.slice(1) : glob;
  let out = "";
  for (let i = 0; i < pat.length;) {
    if (pat.startsWith("**/", i)) { out += "(?:[^/]+/)*"; i += 3; }
    else if (pat.startsWith("**", i)) { out += ".*"; i += 2; }
    else if (pat[i] === "*") { out += "[^/]*"; i += 1; }
    else if (pat[i] === "?") { out += "[^/]"; i += 1; }
    else if (pat[i] === "[" && pat.indexOf("]", i + 2) > 0) {
      const j = pat.indexOf("]", i + 2);
      let body = pat.slice(i + 1, j).replace(/\\/g, "\\\\");
      if (body.startsWith("!")) body = "^" + body.slice(1);
      out += `[${body}]`; i = j + 1;
    } else { out += pat[i].replace(/[.+^${}()|[\]\\]/g, "\\$&"); i += 1; }
  }
  re = new RegExp(`^${out}$`);
  compiled.set(glob, re);
  return re;
}

// Reads the allowed globs from serverInfo's metadata.
export function readAllowed(meta) {
  for (const [power, key] of [["publish", "a0py.allowPublish"], ["set", "a0py.allowSet"], ["call", "a0py.allowCall"]]) {
    try { state.allow[power] = JSON.parse(meta[key] || "[]"); } catch (e) { state.allow[power] = []; }
  }
}

// Whether `power` ("publish", "set", "call") is allowed on `topic`.
export function allows(power, topic) {
  const name = topic.startsWith("/") ? topic.slice(1) : topic;
  return state.allow[power].some((g) => globRegExp(g).test(name));
}

// Why `power` is refused on `topic` (or, without a topic, what the view allows), for people.
export function why(power, topic) {
  const globs = state.allow[power];
  if (state.recording) return `${DOING[power]}: not for a recording (the view plays one back)`;
  if (!globs.length) return `${DOING[power]} is off: the view was started without ${FLAGS[power]} GLOB`;
  const where = `allowed on ${globs.join(" ")} (${FLAGS[power]})`;
  return topic === undefined ? `${DOING[power]}: ${where}` : `${DOING[power]} ${topic}: not allowed, only ${where}`;
}
