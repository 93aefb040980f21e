// A source's stored text in a panel, its chunks marked (alternately shaded, each chunk's number
// on hover) and a cited span highlighted on top. The API counts offsets in characters (Unicode
// scalar values); JavaScript strings count UTF-16 units, so offsets are converted before the
// text is cut.

import { get } from "./api.js";
import { fill, h, num } from "./dom.js";

/** The UTF-16 index of the `chars`-th character of `text`. */
export function utf16Index(text, chars) {
  let i = 0;
  for (let n = 0; n < chars && i < text.length; n += 1) {
    const code = text.charCodeAt(i);
    i += code >= 0xd800 && code <= 0xdbff && i + 1 < text.length ? 2 : 1;
  }
  return i;
}

/** Every chunk of a source, reading the API's pages of 1000. */
async function allChunks(worldId, sourceId) {
  const chunks = [];
  for (;;) {
    const page = await get(`/v1/worlds/${worldId}/sources/${sourceId}/chunks?offset=${chunks.length}&limit=1000`);
    chunks.push(...page.chunks);
    if (!page.chunks.length || chunks.length >= page.total) return chunks;
  }
}

/** The text cut at the chunks' bounds and the cited span's: chunk spans hold their text, and the
 *  cited characters are a `<mark>` inside them (one piece per chunk it crosses, the first one
 *  `#cited-span`). `a`..`b` is the cited span in UTF-16 units, or null. */
function markedText(text, chunks, a, b) {
  // Chunk bounds in chars, clamped so that chunks never overlap, then converted in one walk.
  const spans = [];
  let previous = 0;
  for (const c of [...chunks].sort((x, y) => x.char_start - y.char_start)) {
    const start = Math.max(c.char_start, previous);
    const end = Math.max(c.char_end, start);
    spans.push({ chunk: c, start, end });
    previous = end;
  }
  const at = utf16Indices(text, spans.flatMap((s) => [s.start, s.end]));
  let first = true;
  const cut = (from, to) => {
    // `text[from..to]`, with its share of the cited span marked.
    if (a === null || to <= a || from >= b) return [text.slice(from, to)];
    const x = Math.max(from, a);
    const y = Math.min(to, b);
    const mark = h("mark", { id: first ? "cited-span" : null, class: "cited" }, text.slice(x, y));
    first = false;
    return [text.slice(from, x), mark, text.slice(y, to)].filter((p) => p !== "");
  };
  const parts = [];
  let pos = 0;
  spans.forEach((s, i) => {
    const start = at.get(s.start);
    const end = at.get(s.end);
    if (start > pos) parts.push(...cut(pos, start));
    const n = s.chunk.chunk_number;
    parts.push(h("span", {
      class: `chunk ${i % 2 ? "chunk-b" : "chunk-a"}`,
      title: `Chunk ${n}${s.chunk.state === "embedded" ? "" : ` (${s.chunk.state})`}`,
      "data-chunk": n,
    }, cut(start, end)));
    pos = Math.max(pos, end);
  });
  if (pos < text.length) parts.push(...cut(pos, text.length));
  return parts;
}

/** The UTF-16 index of each char offset in `offsets`, as a Map, in one walk of `text`. */
function utf16Indices(text, offsets) {
  const wanted = [...new Set(offsets)].sort((x, y) => x - y);
  const out = new Map();
  let i = 0;
  let n = 0;
  for (const w of wanted) {
    while (n < w && i < text.length) {
      const code = text.charCodeAt(i);
      i += code >= 0xd800 && code <= 0xdbff && i + 1 < text.length ? 2 : 1;
      n += 1;
    }
    out.set(w, i);
  }
  return out;
}

/** Shows the text of `sourceId` in `panel` with its chunks marked, the chars `start`..`end`
 *  highlighted (none when null), scrolled to and announced. */
export async function showSource(panel, worldId, sourceId, start, end, label) {
  panel.hidden = false;
  const heading = h("h2", { id: "viewer-title", tabindex: "-1" }, `Source text: ${label || sourceId}`);
  fill(panel, heading, h("p", {}, "Loading…"));
  const [text, chunks] = await Promise.all([
    get(`/v1/worlds/${worldId}/sources/${sourceId}/text`),
    allChunks(worldId, sourceId),
  ]);
  const close = h("button", { type: "button" }, "Close");
  close.addEventListener("click", () => {
    panel.hidden = true;
    fill(panel);
  });
  const pre = h("pre", { class: "source-text", tabindex: "0", "aria-label": `Text of ${label || "the source"}` });
  const cited = start !== null && end !== null;
  const a = cited ? utf16Index(text, start) : null;
  const b = cited ? utf16Index(text, end) : null;
  fill(pre, markedText(text, chunks, a, b));
  const mark = pre.querySelector("#cited-span");
  const chars = num([...text].length);
  const shading = `${num(chunks.length)} chunks, shaded in turn (hover for each one's number)`;
  fill(panel,
    h("div", { class: "viewer-head" }, heading, close),
    h("p", { class: "hint" },
      mark ? `Characters ${num(start)}–${num(end)} of ${chars} are highlighted; ${shading}.`
        : `${chars} characters; ${shading}.`),
    pre);
  heading.focus({ preventScroll: true });
  (mark || panel).scrollIntoView({ block: "center", behavior: "smooth" });
}
