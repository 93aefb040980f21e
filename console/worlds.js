// Page 1, the worlds: a table with their counts, a form to create one (provider and model
// from GET /v1/models), rename in place, delete after a confirmation.

import { can, del, get, patch, post } from "./api.js";
import { confirmDialog, field, fill, h, num } from "./dom.js";

export async function render(main, _params, ui) {
  const list = h("div", { class: "table-wrap" }, h("p", {}, "Loading worlds…"));
  const createCard = h("section", { class: "card", "aria-labelledby": "create-title" });
  fill(main,
    h("h1", {}, "Worlds"),
    h("section", { class: "card", "aria-labelledby": "list-title" },
      h("h2", { id: "list-title" }, "All worlds"), list),
    can("admin") ? createCard : null);
  if (can("admin")) renderCreate(createCard, ui);
  await refresh(list, ui);
}

async function refresh(list, ui) {
  let worlds;
  try {
    worlds = await loadAll();
  } catch (err) {
    fill(list, h("p", {}, "The worlds could not be listed."));
    ui.fail(err);
    return;
  }
  if (!worlds.length) {
    fill(list, h("p", {}, can("admin") ? "No worlds yet: create one below." : "No worlds yet."));
    return;
  }
  const rows = worlds.map((w) => worldRow(w, list, ui));
  fill(list,
    h("table", {},
      h("caption", { class: "sr-only" }, "Worlds with their counts"),
      h("thead", {}, h("tr", {},
        ["Name", "Model", "Sources", "Chunks", "Embedded", "Pending", "Failed", "Actions"]
          .map((c) => h("th", { scope: "col" }, c)))),
      h("tbody", {}, rows)));
}

async function loadAll() {
  const worlds = [];
  let offset = 0;
  for (;;) {
    const page = await get(`/v1/worlds?limit=1000&offset=${offset}`);
    worlds.push(...page.worlds);
    if (page.next_offset == null) return worlds;
    offset = page.next_offset;
  }
}

function worldRow(w, list, ui) {
  const nameCell = h("td", {}, nameLink(w));
  const rename = h("button", { type: "button", "aria-label": `Rename ${w.name}` }, "Rename");
  const remove = h("button", { type: "button", class: "danger", "aria-label": `Delete ${w.name}` }, "Delete");
  rename.addEventListener("click", () => renameForm(w, nameCell, ui));
  remove.addEventListener("click", async () => {
    const ok = await confirmDialog(`Delete the world “${w.name}”?`,
      `Its ${num(w.stats.sources)} sources, ${num(w.stats.chunks)} chunks, jobs and vectors are deleted too. This cannot be undone.`,
      "Delete world");
    if (!ok) return;
    try {
      await del(`/v1/worlds/${w.id}`);
      ui.clearError();
      ui.say(`World “${w.name}” deleted.`);
      await refresh(list, ui);
    } catch (err) {
      ui.fail(err);
    }
  });
  const s = w.stats;
  return h("tr", {},
    nameCell,
    h("td", {}, `${w.embedding.provider} / ${w.embedding.model}`, w.hybrid ? h("span", { class: "tag" }, "hybrid") : null),
    h("td", { class: "n" }, num(s.sources)),
    h("td", { class: "n" }, num(s.chunks)),
    h("td", { class: "n" }, num(s.embedded)),
    h("td", { class: "n" }, num(s.pending)),
    h("td", { class: "n" }, num(s.failed)),
    h("td", { class: "actions" }, can("admin") ? [rename, remove] : "–"));
}

function nameLink(w) {
  return h("a", { href: `#/worlds/${w.id}` }, w.name);
}

function renameForm(w, cell, ui) {
  const input = h("input", { type: "text", value: w.name, required: true, maxlength: 200 });
  const form = h("form", { class: "inline" },
    h("label", { class: "sr-only", for: `rename-${w.id}` }, `New name for ${w.name}`),
    input,
    h("button", { type: "submit" }, "Save"),
    h("button", { type: "button", onclick: () => fill(cell, nameLink(w)) }, "Cancel"));
  input.id = `rename-${w.id}`;
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    try {
      const updated = await patch(`/v1/worlds/${w.id}`, { name: input.value });
      Object.assign(w, updated);
      fill(cell, nameLink(w));
      ui.clearError();
      ui.say(`Renamed to “${w.name}”.`);
    } catch (err) {
      ui.fail(err);
      input.focus();
    }
  });
  form.addEventListener("keydown", (e) => {
    if (e.key === "Escape") fill(cell, nameLink(w));
  });
  fill(cell, form);
  input.focus();
  input.select();
}

async function renderCreate(card, ui) {
  const name = h("input", { type: "text", name: "name", required: true, maxlength: 200, autocomplete: "off" });
  const model = h("select", { name: "model", required: true }, h("option", { value: "" }, "Loading models…"));
  const dimensions = h("input", { type: "number", name: "dimensions", min: 1, inputmode: "numeric" });
  const maxTokens = h("input", { type: "number", name: "max_tokens", min: 16, inputmode: "numeric" });
  const overlap = h("input", { type: "number", name: "overlap_tokens", min: 0, inputmode: "numeric" });
  const hybrid = h("input", { type: "checkbox", name: "hybrid" });
  const submit = h("button", { type: "submit", class: "primary" }, "Create world");
  const form = h("form", { class: "grid" },
    field("Name", name),
    field("Embedding model", model, "provider / model, from GET /v1/models"),
    field("Dimensions", dimensions, "empty: the model's default"),
    field("Chunk size (tokens)", maxTokens, "empty: the default"),
    field("Chunk overlap (tokens)", overlap, "empty: the default"),
    h("div", { class: "field check" }, hybrid, h("label", { for: "create-hybrid" }, "Hybrid (dense + BM25 keywords)")),
    h("div", { class: "row" }, submit));
  hybrid.id = "create-hybrid";
  fill(card, h("h2", { id: "create-title" }, "Create a world"), form);

  let models = [];
  try {
    models = (await get("/v1/models")).models;
    fill(model, models.map((m, i) => h("option", { value: String(i) },
      `${m.provider} / ${m.model} (${m.default_dimensions} dims, chunks ≤ ${m.max_chunk_tokens} tokens)`)));
  } catch (err) {
    fill(model, h("option", { value: "" }, "models unavailable"));
    ui.fail(err);
  }
  model.addEventListener("change", () => {
    const m = models[Number(model.value)];
    if (m) dimensions.placeholder = String(m.default_dimensions);
  });
  model.dispatchEvent(new Event("change"));

  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const m = models[Number(model.value)];
    if (!m) return;
    const body = { name: name.value, embedding: { provider: m.provider, model: m.model }, hybrid: hybrid.checked };
    if (dimensions.value) body.embedding.dimensions = Number(dimensions.value);
    const chunking = {};
    if (maxTokens.value) chunking.max_tokens = Number(maxTokens.value);
    if (overlap.value) chunking.overlap_tokens = Number(overlap.value);
    if (Object.keys(chunking).length) body.chunking = chunking;
    submit.disabled = true;
    try {
      const world = await post("/v1/worlds", body);
      ui.clearError();
      location.hash = `#/worlds/${world.id}`;
      ui.say(`World “${world.name}” created.`);
    } catch (err) {
      ui.fail(err);
    } finally {
      submit.disabled = false;
    }
  });
}
