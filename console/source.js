// A source's stored text in a panel, with a cited span highlighted. The API counts offsets in
// characters (Unicode scalar values); JavaScript strings count UTF-16 units, so offsets are
// converted before the text is cut.

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

/** Shows the text of `sourceId` in `panel`, the chars `start`..`end` marked (none when null),
 *  scrolled to and announced. */
export async function showSource(panel, worldId, sourceId, start, end, label) {
  panel.hidden = false;
  const heading = h("h2", { id: "viewer-title", tabindex: "-1" }, `Source text: ${label || sourceId}`);
  fill(panel, heading, h("p", {}, "Loading…"));
  const text = await get(`/v1/worlds/${worldId}/sources/${sourceId}/text`);
  const close = h("button", { type: "button" }, "Close");
  close.addEventListener("click", () => {
    panel.hidden = true;
    fill(panel);
  });
  const pre = h("pre", { class: "source-text", tabindex: "0", "aria-label": `Text of ${label || "the source"}` });
  let mark = null;
  if (start !== null && end !== null) {
    const a = utf16Index(text, start);
    const b = utf16Index(text, end);
    mark = h("mark", { id: "cited-span" }, text.slice(a, b));
    fill(pre, text.slice(0, a), mark, text.slice(b));
  } else {
    fill(pre, text);
  }
  fill(panel,
    h("div", { class: "viewer-head" }, heading, close),
    h("p", { class: "hint" },
      mark ? `Characters ${num(start)}–${num(end)} of ${num([...text].length)} are highlighted.`
        : `${num([...text].length)} characters.`),
    pre);
  heading.focus({ preventScroll: true });
  (mark || panel).scrollIntoView({ block: "center", behavior: "smooth" });
}
