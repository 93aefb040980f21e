// The world page's evaluation section: the world's test sets and, for the chosen one, its runs
// as a table of their figures (from each run's report) and a small chart of hit@1 and answer
// share over the runs, drawn as SVG with the DOM (no library, no inline style: the CSP has
// none, so colours come from classes in console.css).

import { describe, get } from "./api.js";
import { fill, h, num, pct, when } from "./dom.js";

// The runs read with their reports: the newest this many.
const MAX_RUNS = 20;

/** The section; it loads on its own and stops with `signal`. */
export function evalsCard(worldId, ui, signal) {
  const choose = h("select", { id: "eval-set" });
  const body = h("div", { class: "evals" }, h("p", {}, "Loading test sets…"));
  const card = h("section", { class: "card", "aria-labelledby": "evals-title" },
    h("h2", { id: "evals-title" }, "Evaluation runs"), body);

  async function load() {
    let sets;
    try {
      sets = (await get(`/v1/worlds/${worldId}/evals?limit=1000`, { signal })).evals;
    } catch (err) {
      if (err.name !== "AbortError") fill(body, h("p", { class: "error" }, describe(err)));
      return;
    }
    if (!sets.length) {
      fill(body, h("p", {}, "No test sets yet: create one with POST /v1/worlds/{id}/evals (see the evaluation guide)."));
      return;
    }
    fill(choose, sets.map((s) => h("option", { value: s.eval_id }, `${s.name} (${num(s.item_count)} items)`)));
    const runs = h("div", { class: "runs" });
    fill(body, h("div", { class: "field" }, h("label", { for: "eval-set" }, "Test set"), choose), runs);
    choose.addEventListener("change", () => showRuns(choose.value, runs));
    await showRuns(choose.value, runs);
  }

  async function showRuns(evalId, box) {
    fill(box, h("p", {}, "Loading runs…"));
    let runs;
    try {
      const base = `/v1/worlds/${worldId}/evals/${evalId}/runs`;
      const list = [];
      for (let offset = 0; ;) {
        const page = await get(`${base}?limit=1000&offset=${offset}`, { signal });
        list.push(...page.runs);
        if (page.next_offset == null) break;
        offset = page.next_offset;
      }
      // Oldest first; each run's report is only in its own answer.
      runs = await Promise.all(list.slice(-MAX_RUNS).map((r) => get(`${base}/${r.run_id}`, { signal })));
    } catch (err) {
      if (err.name !== "AbortError") fill(box, h("p", { class: "error" }, describe(err)));
      return;
    }
    if (!runs.length) {
      fill(box, h("p", {}, "No runs of this set yet."));
      return;
    }
    const rows = runs.map(figures);
    fill(box,
      h("div", { class: "table-wrap" }, h("table", {},
        h("caption", { class: "sr-only" }, "Runs of the test set, oldest first"),
        h("thead", {}, h("tr", {}, ["Status", "Created", "Settings", "hit@1", "hit@5", "MRR@10", "Answer share",
          "Fully", "p50 ms"].map((c) => h("th", { scope: "col" }, c)))),
        h("tbody", {}, rows.map((f) => h("tr", { class: "run" },
          h("td", {}, h("span", { class: `status status-${f.status}`, "data-status": f.status }, f.status)),
          h("td", {}, when(f.created)),
          h("td", { class: "n" }, num(f.settings)),
          h("td", { class: "n" }, pct(f.hit1)),
          h("td", { class: "n" }, pct(f.hit5)),
          h("td", { class: "n" }, f.mrr == null ? "–" : f.mrr.toFixed(3)),
          h("td", { class: "n" }, pct(f.share)),
          h("td", { class: "n" }, pct(f.fully)),
          h("td", { class: "n" }, f.p50 == null ? "–" : f.p50.toFixed(1))))))),
      h("p", { class: "hint" }, "Figures of each run's first setting at its first budget."),
      chart(rows.filter((f) => f.status === "completed")));
  }

  load();
  return card;
}

/** One run's row: its first setting's figures at its first budget. */
function figures(run) {
  const s = (run.report && run.report.settings && run.report.settings[0]) || {};
  const b = (s.budgets && s.budgets[0]) || {};
  return {
    status: run.status,
    created: run.created_at,
    settings: run.settings.length,
    hit1: s.hit_at_1,
    hit5: s.hit_at_5,
    mrr: s.mrr_at_10,
    share: b.answer_share,
    fully: b.fully,
    p50: s.latency_p50_ms,
  };
}

const SVG = "http://www.w3.org/2000/svg";

function svg(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  for (const c of children) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return el;
}

/** hit@1 and answer share (0 to 1) over the completed runs, oldest left. */
function chart(rows) {
  if (!rows.length) return null;
  const W = 320;
  const H = 140;
  const pad = { l: 34, r: 10, t: 10, b: 22 };
  const x = (i) => pad.l + (rows.length === 1 ? (W - pad.l - pad.r) / 2 : (i * (W - pad.l - pad.r)) / (rows.length - 1));
  const y = (v) => pad.t + (1 - v) * (H - pad.t - pad.b);
  const series = [["hit1", "hit@1"], ["share", "answer share"]];
  const el = svg("svg", { viewBox: `0 0 ${W} ${H}`, class: "chart", role: "img",
    "aria-label": `hit@1 and answer share over ${rows.length} completed runs` });
  for (const v of [0, 0.5, 1]) {
    el.append(svg("line", { x1: pad.l, x2: W - pad.r, y1: y(v), y2: y(v), class: "grid-line" }),
      svg("text", { x: pad.l - 4, y: y(v) + 4, "text-anchor": "end", class: "axis" }, `${v * 100}%`));
  }
  el.append(svg("text", { x: pad.l, y: H - 6, class: "axis" }, "oldest"),
    svg("text", { x: W - pad.r, y: H - 6, "text-anchor": "end", class: "axis" }, "newest"));
  for (const [key, label] of series) {
    const points = rows.map((r, i) => [i, r[key]]).filter(([, v]) => typeof v === "number");
    if (!points.length) continue;
    el.append(svg("polyline", { points: points.map(([i, v]) => `${x(i)},${y(v)}`).join(" "), class: `line line-${key}` }));
    for (const [i, v] of points) {
      el.append(svg("circle", { cx: x(i), cy: y(v), r: 3, class: `dot line-${key}` }, svg("title", {}, `${label}: ${pct(v)}`)));
    }
  }
  return h("figure", { class: "chart-box" }, el,
    h("figcaption", {}, h("span", { class: "key key-hit1" }, "hit@1"), " ",
      h("span", { class: "key key-share" }, "answer share"), " over the completed runs"));
}
