// Small DOM helpers: every element is built with createElement and text nodes, never from
// HTML strings, so nothing the API returns can become markup.

/** `h("button", {class: "x", onclick: fn}, "text", child)`: an element with attributes,
 *  event handlers (`on…` keys) and children (strings become text; null and false are skipped). */
export function h(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") {
      el.addEventListener(key.slice(2), value);
    } else if (key === "value" && "value" in el) {
      el.value = value;
    } else if (key === "checked" || key === "disabled" || key === "hidden") {
      el[key] = Boolean(value);
    } else {
      el.setAttribute(key, value === true ? "" : String(value));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** Replaces an element's children. */
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

/** A number with thousands separators. */
export function num(n) {
  return typeof n === "number" ? n.toLocaleString("en") : "–";
}

/** A figure from 0 to 1 as a percentage (or a dash). */
export function pct(x) {
  return typeof x === "number" ? `${(x * 100).toFixed(1)} %` : "–";
}

/** A date-time, short and local. */
export function when(iso) {
  if (!iso) return "–";
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : d.toLocaleString();
}

/** A modal confirmation (a native `<dialog>`: focus stays inside, Escape cancels). Resolves
 *  true when the user confirms. */
export function confirmDialog(title, text, action) {
  return new Promise((resolve) => {
    const yes = h("button", { type: "submit", value: "yes", class: "danger" }, action);
    const dialog = h("dialog", { "aria-labelledby": "confirm-title", class: "confirm" },
      h("form", { method: "dialog" },
        h("h2", { id: "confirm-title" }, title),
        h("p", {}, text),
        h("div", { class: "row" },
          yes,
          h("button", { type: "submit", value: "no", autofocus: true }, "Cancel"))));
    dialog.addEventListener("close", () => {
      resolve(dialog.returnValue === "yes");
      dialog.remove();
    });
    document.body.append(dialog);
    dialog.showModal();
  });
}

/** A labelled form field: `<div><label for=id>text</label><control id=id></div>`. */
export function field(label, control, hint) {
  const id = control.id || `f-${Math.random().toString(36).slice(2, 9)}`;
  control.id = id;
  const note = hint ? h("span", { class: "hint", id: `${id}-hint` }, hint) : null;
  if (note) control.setAttribute("aria-describedby", note.id);
  return h("div", { class: "field" }, h("label", { for: id }, label), control, note);
}
