// The console's shell: the token form, messages, and a hash router that renders one page at a
// time into <main>. A page is `render(main, params, ui)`; it may return a function that stops
// what it started (event streams) when the user leaves it.

import { can, describe, setToken, token, whoami } from "./api.js";
import { fill, h } from "./dom.js";
import * as worlds from "./worlds.js";
import * as world from "./world.js";
import * as playground from "./playground.js";
import * as operations from "./operations.js";

const main = document.getElementById("main");
const alertBox = document.getElementById("alert");
const statusBox = document.getElementById("status");
const tokenInput = document.getElementById("token");
const scopeNote = document.getElementById("scope-note");

/** What pages use to talk to the user. */
const ui = {
  /** Shows an error (the API's message) until the next page or success. */
  fail(err) {
    fill(alertBox, h("p", { class: "error" }, describe(err)));
  },
  clearError() {
    fill(alertBox);
  },
  /** A short, polite announcement. */
  say(text) {
    saidAt = Date.now();
    fill(statusBox, h("p", {}, text));
  },
};

const routes = [
  [/^#?\/?$/, worlds],
  [/^#\/operations$/, operations],
  [/^#\/worlds\/([0-9a-f-]{36})$/, world],
  [/^#\/worlds\/([0-9a-f-]{36})\/playground$/, playground],
];

let stop = null;
let saidAt = 0;

async function route() {
  if (stop) stop();
  stop = null;
  ui.clearError();
  // An announcement outlives the page change it announces ("World created."), not the next.
  if (Date.now() - saidAt > 2000) fill(statusBox);
  if (!token()) {
    fill(main,
      h("section", { class: "card" },
        h("h1", {}, "Welcome"),
        h("p", {}, "Paste a bearer token in the field at the top to use the console. ",
          "It stays in this browser tab only and goes with every API call; what the token may not do, ",
          "the API refuses, and the console shows its message.")));
    tokenInput.focus();
    return;
  }
  try {
    showScopes(await whoami());
  } catch (err) {
    // A token without `read` (metrics only) may do nothing here: say so, as the API does.
    fill(scopeNote);
    fill(main);
    ui.fail(err);
    return;
  }
  const hash = location.hash || "#/";
  for (const [pattern, page] of routes) {
    const match = hash.match(pattern);
    if (match) {
      fill(main);
      try {
        stop = (await page.render(main, match.slice(1), ui)) || null;
      } catch (err) {
        ui.fail(err);
      }
      return;
    }
  }
  fill(main, h("section", { class: "card" }, h("h1", {}, "Not found"),
    h("p", {}, "No console page has this address. ", h("a", { href: "#/" }, "Back to the worlds"))));
}

/** One line on what the token may not do, when it may not do everything. */
function showScopes(me) {
  const worlds = me.worlds
    ? ` It reaches ${me.worlds.length === 1 ? "one world" : `${me.worlds.length} worlds`} only.` : "";
  let text = "";
  if (!can("ingest")) {
    text = `Read-only token (${me.name}): uploading, deleting, job controls and administration are hidden.`;
  } else if (!can("admin")) {
    text = `Ingest token (${me.name}): creating, renaming and deleting worlds, deciding held re-ingests and the operations page's actions are hidden.`;
  } else if (worlds) {
    text = `Token ${me.name}:`;
  }
  fill(scopeNote, text ? h("p", { class: "scope-note" }, text, worlds) : null);
}

function showTokenState() {
  tokenInput.value = token();
  document.body.classList.toggle("has-token", Boolean(token()));
}

document.getElementById("token-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  const value = tokenInput.value.trim();
  if (!value) {
    ui.fail(new Error("Paste a token first."));
    return;
  }
  setToken(value);
  try {
    // Who am I tells whether the token is accepted, and what it may do.
    await whoami();
    ui.clearError();
    ui.say("Token accepted.");
  } catch (err) {
    if (err.status === 401) setToken("");
    showTokenState();
    fill(scopeNote);
    ui.fail(err);
    return;
  }
  showTokenState();
  await route();
  ui.say("Token accepted.");
});

document.getElementById("forget").addEventListener("click", () => {
  setToken("");
  showTokenState();
  fill(scopeNote);
  route();
  ui.say("Token forgotten.");
});

window.addEventListener("hashchange", () => {
  route().then(() => main.focus({ preventScroll: true }));
});
showTokenState();
route();
