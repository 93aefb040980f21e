// Page 3, the retrieval playground: a query with its settings (mode, fusion, top_k, expand,
// the context's token budget, one source, explain), the ranked results (with each hit's dense
// and BM25 standing when explained) with their scores, the context text as a
// model would get it with its citations, and timings. A citation opens its source's text with
// the cited characters highlighted.

import { describe, get, post } from "./api.js";
import { field, fill, h, num } from "./dom.js";
import { showSource } from "./source.js";

export async function render(main, [worldId], ui) {
  const world = await get(`/v1/worlds/${worldId}`);
  const query = h("textarea", { name: "query", rows: 3, required: true });
  const mode = select("mode", [["auto", "auto (by the query)"], ["dense", "dense"], ["hybrid", "hybrid"], ["full", "full (whole corpus)"]]);
  const fusion = select("fusion", [["auto", "auto"], ["rrf", "rrf (reciprocal rank)"], ["dbsf", "dbsf (score distribution)"]]);
  const topK = h("input", { type: "number", name: "top_k", min: 0, max: 1000, value: 8, inputmode: "numeric" });
  const expand = select("expand", [["", "server default (parent)"], ["parent", "parent (each hit's section)"],
    ["neighbors", "neighbors"], ["none", "none (the hits alone)"]]);
  const budget = h("input", { type: "number", name: "max_context_tokens", min: 1, inputmode: "numeric" });
  const minScore = h("input", { type: "number", name: "min_score", min: 0, max: 1, step: "0.01", inputmode: "decimal" });
  const source = h("select", { name: "source" }, h("option", { value: "" }, "every source"));
  const explain = h("input", { type: "checkbox", name: "explain", id: "explain" });
  const submit = h("button", { type: "submit", class: "primary" }, "Retrieve");
  const form = h("form", { class: "grid playground-form" },
    h("div", { class: "field wide" }, h("label", { for: "query" }, "Question"), query),
    field("Mode", mode),
    field("Fusion (hybrid)", fusion),
    field("Results (top_k)", topK),
    field("Expand", expand),
    field("Context budget (tokens)", budget, "empty: the server's default"),
    field("Minimum score", minScore, "0 to 1; empty: none"),
    field("Source", source, "search one source only"),
    h("div", { class: "field check" }, explain,
      h("label", { for: "explain" }, "Explain (each hit's dense and BM25 standing)")),
    h("div", { class: "row wide" }, submit));
  query.id = "query";
  const answer = h("div", { class: "answer", "aria-live": "polite" });
  const viewer = h("section", { class: "card viewer", "aria-labelledby": "viewer-title", hidden: true });

  fill(main,
    h("p", { class: "crumbs" }, h("a", { href: "#/" }, "Worlds"), " › ",
      h("a", { href: `#/worlds/${worldId}` }, world.name), " › Playground"),
    h("h1", {}, `Retrieval playground: ${world.name}`),
    h("section", { class: "card", "aria-labelledby": "ask-title" }, h("h2", { id: "ask-title" }, "Ask"), form),
    h("div", { class: "split" }, answer, viewer));
  query.focus();
  get(`/v1/worlds/${worldId}/sources?limit=1000`).then((r) => {
    source.append(...r.sources.map((x) => h("option", { value: x.id }, `${x.book_number}. ${x.filename}`)));
  }).catch((err) => ui.fail(err));

  query.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) form.requestSubmit();
  });
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const body = { query: query.value, mode: mode.value };
    // Fusion concerns the modes that may fuse two rankings.
    if (mode.value === "hybrid" || mode.value === "auto") body.fusion = { method: fusion.value };
    if (topK.value !== "") body.top_k = Number(topK.value);
    if (expand.value) body.expand = expand.value;
    if (budget.value) body.max_context_tokens = Number(budget.value);
    if (minScore.value) body.min_score = Number(minScore.value);
    if (source.value) body.filter = { source_ids: [source.value] };
    if (explain.checked) body.explain = true;
    submit.disabled = true;
    fill(answer, h("p", {}, "Retrieving…"));
    try {
      const result = await post(`/v1/worlds/${worldId}/retrieve`, body);
      ui.clearError();
      showAnswer(result);
    } catch (err) {
      fill(answer, h("p", { class: "error" }, describe(err)));
      ui.fail(err);
    } finally {
      submit.disabled = false;
    }
  });

  function open(sourceId, start, end, label) {
    showSource(viewer, worldId, sourceId, start, end, label).catch((err) => ui.fail(err));
  }

  function showAnswer(r) {
    const names = new Map(r.results.map((x) => [x.source_id, x.source_filename]));
    const t = r.timing;
    const results = r.results.map((x, i) => {
      const cite = h("button", { type: "button", class: "link",
        "aria-label": `Open result ${i + 1} in ${x.source_filename}, characters ${x.char_start} to ${x.char_end}` },
      `${x.source_filename}, chars ${num(x.char_start)}–${num(x.char_end)}`);
      cite.addEventListener("click", () => open(x.source_id, x.char_start, x.char_end, x.source_filename));
      return h("li", { class: "result" },
        h("div", { class: "result-head" },
          h("span", { class: "score", title: "score" }, `score ${x.score.toFixed(3)}`),
          x.rerank_score != null ? h("span", { class: "score" }, `rerank ${x.rerank_score.toFixed(3)}`) : null,
          h("span", {}, `book ${x.book_number}, chunk ${x.chunk_number}`),
          x.page != null ? h("span", {}, `page ${x.page}`) : null,
          cite),
        x.explain ? standing(x.explain) : null,
        h("p", { class: "chunk-text" }, x.chunk_text));
    });
    const citations = r.context.citations.map((c) => {
      const name = names.get(c.source_id) || `book ${c.book_number}`;
      const b = h("button", { type: "button", class: "link citation",
        "aria-label": `Citation ${c.n}: open ${name} at characters ${c.char_start} to ${c.char_end}` },
      `[${c.n}] ${name}, chunk ${c.chunk_number}, chars ${num(c.char_start)}–${num(c.char_end)}`);
      b.addEventListener("click", () => open(c.source_id, c.char_start, c.char_end, name));
      return h("li", {}, b);
    });
    fill(answer,
      h("section", { class: "card", "aria-labelledby": "results-title" },
        h("h2", { id: "results-title" }, `Results (${r.results.length})`),
        h("p", { class: "timing" },
          `${r.mode_used || "no search"}`, r.fusion_used ? ` (${r.fusion_used.method})` : "",
          ` · quality ${r.quality.level} · total ${t.total_ms.toFixed(1)} ms: embed ${t.embed_ms.toFixed(1)}, `,
          `search ${t.search_ms.toFixed(1)}, verify ${t.verify_ms.toFixed(1)}, rerank ${t.rerank_ms.toFixed(1)}`),
        r.warnings.length ? h("ul", { class: "warnings" },
          r.warnings.map((w) => h("li", {}, `${w.message} (${w.code})`))) : null,
        results.length ? h("ol", { class: "results" }, results) : h("p", {}, "No results.")),
      h("section", { class: "card", "aria-labelledby": "context-title" },
        h("h2", { id: "context-title" }, "Context"),
        h("pre", { class: "context-text", tabindex: "0", "aria-label": "Context text" }, r.context.text || "(empty)"),
        h("h3", {}, "Citations"),
        citations.length ? h("ul", { class: "citations" }, citations) : h("p", {}, "None.")));
  }
}

/** A hit's standing in the dense and BM25 rankings, and its fused score. */
function standing(e) {
  const rank = (name, s) => (s ? `${name} #${s.rank} (${s.score.toFixed(3)})` : `${name}: not found`);
  return h("p", { class: "explain" },
    rank("dense", e.dense), " · ", rank("BM25", e.sparse),
    e.fused_score != null ? ` · fused ${e.fused_score.toFixed(3)}` : "");
}

function select(name, options) {
  return h("select", { name }, options.map(([value, text]) => h("option", { value }, text)));
}
