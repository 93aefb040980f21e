// Page 2, one world: its profile and counts, upload (file picker or drag and drop, several
// files at once), its sources (open the text, delete), and its jobs with live progress read
// from each job's event stream (bars, why a job waits, failed chunks; pause, resume, cancel;
// a held re-ingest's gate with promote and discard), and its evaluation runs (evals.js).

import { ApiError, can, del, describe, events, get, post } from "./api.js";
import { confirmDialog, fill, h, num, pct, when } from "./dom.js";
import { evalsCard } from "./evals.js";
import { showSource } from "./source.js";

const LIVE = new Set(["queued", "running", "paused"]);
// A browser opens about six HTTP/1.1 connections per origin and each event stream holds one:
// follow at most this many jobs live and leave the rest for the API calls.
const MAX_STREAMS = 3;

// The embedding rate is read over the progress events of the last ten seconds.
const RATE_WINDOW_MS = 10_000;

const WAIT_REASONS = {
  rate_limited: "every key of the provider is rate limited",
  daily_quota: "every key has used its daily quota",
  no_eligible_key: "no provider key can embed for this world",
  provider_unavailable: "the provider is unavailable",
  vector_store_unavailable: "the vector store is unavailable",
};

export async function render(main, [worldId], ui) {
  const stop = new AbortController();
  const signal = stop.signal;
  const world = await get(`/v1/worlds/${worldId}`, { signal });

  const stats = h("dl", { class: "stats" });
  const sourcesBox = h("div", { class: "table-wrap" }, h("p", {}, "Loading sources…"));
  const jobsList = h("ul", { class: "jobs", "aria-live": "off" });
  const jobsNote = h("p", { class: "hint" });
  const viewer = h("section", { class: "card viewer", "aria-labelledby": "viewer-title", hidden: true });
  const uploads = h("ul", { class: "uploads", "aria-live": "polite" });

  const title = h("h1", {}, world.name);
  fill(main,
    h("p", { class: "crumbs" }, h("a", { href: "#/" }, "Worlds"), " › ", world.name),
    title,
    h("p", { class: "profile" },
      `${world.embedding.provider} / ${world.embedding.model}, ${world.embedding.dimensions} dimensions, `,
      `chunks of ${world.chunking.max_tokens} tokens (overlap ${world.chunking.overlap_tokens})`,
      world.hybrid ? ", hybrid" : "", ". ",
      h("a", { href: `#/worlds/${worldId}/playground`, class: "button primary" }, "Open the retrieval playground")),
    stats,
    can("ingest") ? uploadCard() : null,
    h("section", { class: "card", "aria-labelledby": "jobs-title" },
      h("h2", { id: "jobs-title" }, "Jobs"), jobsNote, jobsList),
    h("section", { class: "card", "aria-labelledby": "sources-title" },
      h("h2", { id: "sources-title" }, "Sources"), sourcesBox),
    viewer,
    evalsCard(worldId, ui, signal));

  function showStats(s) {
    fill(stats, ...[["Sources", s.sources], ["Chunks", s.chunks], ["Embedded", s.embedded],
      ["Pending", s.pending], ["Failed", s.failed]]
      .map(([k, v]) => h("div", {}, h("dt", {}, k), h("dd", {}, num(v)))));
  }
  showStats(world.stats);

  async function refreshWorld() {
    try {
      const w = await get(`/v1/worlds/${worldId}`, { signal });
      showStats(w.stats);
    } catch (err) {
      if (err.name !== "AbortError") ui.fail(err);
    }
  }

  // ---- upload
  function uploadCard() {
    const input = h("input", {
      type: "file", id: "files", multiple: true,
      accept: ".txt,.md,.markdown,.html,.htm,.pdf,text/plain,text/markdown,text/html,application/pdf",
    });
    const zone = h("div", { class: "dropzone" },
      h("label", { for: "files" }, "Upload files (text, Markdown, HTML or PDF)"),
      input,
      h("p", { class: "hint" }, "Choose one or several files, or drop them on this box."));
    input.addEventListener("change", () => {
      upload([...input.files]);
      input.value = "";
    });
    zone.addEventListener("dragover", (e) => {
      e.preventDefault();
      zone.classList.add("over");
    });
    zone.addEventListener("dragleave", () => zone.classList.remove("over"));
    zone.addEventListener("drop", (e) => {
      e.preventDefault();
      zone.classList.remove("over");
      upload([...e.dataTransfer.files]);
    });
    return h("section", { class: "card", "aria-labelledby": "upload-title" },
      h("h2", { id: "upload-title" }, "Add sources"), zone, uploads);
  }

  async function upload(files) {
    for (const file of files) {
      const line = h("li", {}, `${file.name}: uploading…`);
      uploads.prepend(line);
      const form = new FormData();
      form.append("file", file, file.name);
      try {
        const accepted = await post(`/v1/worlds/${worldId}/sources/upload`, form, { signal });
        fill(line, `${file.name}: ${accepted.outcome}`,
          accepted.job ? `, ${accepted.job.kind} job started` : "");
        line.className = "ok";
        if (accepted.job) addJob(accepted.job, true);
      } catch (err) {
        if (err.name === "AbortError") return;
        fill(line, `${file.name}: ${describe(err)}`);
        line.className = "error";
      }
    }
    await Promise.all([refreshSources(), refreshWorld()]);
  }

  // ---- sources
  async function refreshSources() {
    let sources;
    try {
      sources = (await get(`/v1/worlds/${worldId}/sources?limit=1000`, { signal })).sources;
    } catch (err) {
      if (err.name !== "AbortError") ui.fail(err);
      return;
    }
    if (!sources.length) {
      fill(sourcesBox, h("p", {}, "No sources yet."));
      return;
    }
    fill(sourcesBox, h("table", {},
      h("caption", { class: "sr-only" }, "Sources of this world"),
      h("thead", {}, h("tr", {}, ["Book", "File", "Chars", "Chunks", "Embedded", "Pending", "Failed", "Actions"]
        .map((c) => h("th", { scope: "col" }, c)))),
      h("tbody", {}, sources.map(sourceRow))));
  }

  function sourceRow(s) {
    const open = h("button", { type: "button", "aria-label": `Open the text of ${s.filename}` }, "Open text");
    open.addEventListener("click", () =>
      showSource(viewer, worldId, s.id, null, null, s.filename).catch((err) => ui.fail(err)));
    const remove = h("button", { type: "button", class: "danger", "aria-label": `Delete ${s.filename}` }, "Delete");
    remove.addEventListener("click", async () => {
      const ok = await confirmDialog(`Delete “${s.filename}”?`,
        "Its chunks and vectors are deleted; the other sources keep their book numbers.", "Delete source");
      if (!ok) return;
      try {
        await del(`/v1/worlds/${worldId}/sources/${s.id}`);
        ui.say(`Source “${s.filename}” deleted.`);
        await Promise.all([refreshSources(), refreshWorld()]);
      } catch (err) {
        ui.fail(err);
      }
    });
    return h("tr", {},
      h("td", { class: "n" }, s.book_number),
      h("td", {}, s.title ? `${s.title} (${s.filename})` : s.filename),
      h("td", { class: "n" }, num(s.chars)),
      h("td", { class: "n" }, num(s.chunks)),
      h("td", { class: "n" }, num(s.embedded)),
      h("td", { class: "n" }, num(s.pending)),
      h("td", { class: "n" }, num(s.failed)),
      h("td", { class: "actions" }, open, can("ingest") ? remove : null));
  }

  // ---- jobs
  const jobs = new Map(); // id → {job, el, failures: Map, waiting, following}

  async function refreshJobs() {
    let list;
    try {
      list = (await get(`/v1/worlds/${worldId}/jobs?limit=20`, { signal })).jobs;
    } catch (err) {
      if (err.name !== "AbortError") ui.fail(err);
      return;
    }
    if (!list.length && !jobs.size) fill(jobsList, h("li", { class: "empty" }, "No jobs yet."));
    for (const job of list.reverse()) addJob(job, false);
    followMore();
  }

  function addJob(job, follow) {
    jobsList.querySelector(".empty")?.remove();
    let entry = jobs.get(job.id);
    if (!entry) {
      entry = { job, el: h("li", { class: "job" }), failures: new Map(), waiting: null, following: false };
      jobs.set(job.id, entry);
      jobsList.prepend(entry.el);
    }
    entry.job = job;
    for (const e of job.errors || []) entry.failures.set(`${e.book_number}:${e.chunk_number}`, e);
    drawJob(entry);
    if (follow) followMore();
  }

  function followMore() {
    const following = [...jobs.values()].filter((e) => e.following).length;
    const waiting = [...jobs.values()].filter((e) => !e.following && LIVE.has(e.job.status));
    // Newest first: the Map keeps insertion order, oldest first.
    waiting.reverse();
    const free = Math.max(0, MAX_STREAMS - following);
    waiting.slice(0, free).forEach(followJob);
    const left = waiting.length - free;
    jobsNote.textContent = left > 0
      ? `${left} more unfinished jobs update when a followed one ends.` : "";
  }

  async function followJob(entry) {
    entry.following = true;
    const id = entry.job.id;
    let last = "";
    for (let attempt = 0; attempt < 30 && !signal.aborted; attempt += 1) {
      try {
        last = await events(`/v1/jobs/${id}/events`, (ev) => onEvent(entry, ev), { signal, lastEventId: last });
        entry.streamError = null;
      } catch (err) {
        if (err.name === "AbortError") return;
        entry.streamError = describe(err);
        drawJob(entry);
        if (err instanceof ApiError && err.status === 404) break;
      }
      if (!LIVE.has(entry.job.status)) break;
      await sleep(attempt ? 1000 : 200);
    }
    entry.following = false;
    if (signal.aborted) return;
    try {
      entry.job = await get(`/v1/jobs/${id}`, { signal });
      for (const e of entry.job.errors || []) entry.failures.set(`${e.book_number}:${e.chunk_number}`, e);
    } catch (err) {
      if (err.name === "AbortError") return;
    }
    drawJob(entry);
    await Promise.all([refreshSources(), refreshWorld()]);
    followMore();
  }

  function onEvent(entry, ev) {
    const d = ev.data || {};
    switch (ev.event) {
      case "progress":
        if (typeof d.total === "number") {
          entry.job.counts = { ...entry.job.counts, ...d };
          if (entry.waiting && d.embedded > (entry.lastEmbedded ?? -1)) entry.waiting = null;
          entry.lastEmbedded = d.embedded;
          if (typeof d.embedded === "number") {
            const now = performance.now();
            entry.samples = (entry.samples || []).filter((x) => now - x.t <= RATE_WINDOW_MS);
            entry.samples.push({ t: now, embedded: d.embedded });
          }
        }
        break;
      case "warning":
        entry.waiting = d.message || d.code || "a warning";
        break;
      case "error":
        if (typeof d.chunk_number === "number") {
          entry.failures.set(`${d.book_number}:${d.chunk_number}`, d);
        } else {
          entry.waiting = d.message || d.code;
        }
        break;
      case "status":
        if (d.status) entry.job.status = d.status;
        if (d.status !== "running") entry.waiting = null;
        break;
      default:
        break;
    }
    drawJob(entry);
  }

  function drawJob(entry) {
    const { job } = entry;
    const c = job.counts || {};
    const total = c.total || 0;
    const done = (c.embedded || 0) + (c.failed || 0);
    const label = `${job.kind} job ${job.id.slice(0, 8)}`;
    const bar = h("progress", { max: Math.max(total, 1), value: total ? done : 0, "aria-label": `${label} progress` });
    // The rate's box is kept while the job is live, empty when the rate is unknown: no shift.
    const speed = job.status === "running" ? rate(entry) : null;
    const rateBox = LIVE.has(job.status)
      ? h("span", { class: "rate" },
        speed ? `${speed < 10 ? speed.toFixed(1) : num(Math.round(speed))} chunks/s · ${eta((c.pending || 0) / speed)}` : "")
      : null;
    const waits = [];
    if (job.waiting && job.status === "running") {
      const reason = WAIT_REASONS[job.waiting.reason] || job.waiting.reason;
      waits.push(`Waiting: ${reason}${job.waiting.until ? ` until ${when(job.waiting.until)}` : ""}.`);
    }
    if (entry.waiting) waits.push(`Waiting: ${entry.waiting}`);
    const actions = [];
    const act = (verb, text, confirmText) => {
      if (!can("ingest")) return;
      const b = h("button", { type: "button", "aria-label": `${text} ${label}` }, text);
      b.addEventListener("click", async () => {
        if (confirmText && !(await confirmDialog(`${text} this job?`, confirmText, text))) return;
        b.disabled = true;
        try {
          const updated = await post(`/v1/jobs/${job.id}/${verb}`);
          if (updated && updated.id) entry.job = updated;
          ui.say(`${label}: ${verb} done.`);
          drawJob(entry);
          followMore();
        } catch (err) {
          ui.fail(err);
          b.disabled = false;
        }
      });
      actions.push(b);
    };
    if (job.status === "queued" || job.status === "running") act("pause", "Pause");
    if (job.status === "paused") act("resume", "Resume");
    if (LIVE.has(job.status)) act("cancel", "Cancel", "A cancelled job cannot be resumed; its chunks not yet embedded stay pending.");
    if (!LIVE.has(job.status) && job.status !== "held" && (c.failed || 0) > 0) act("retry", "Retry failed chunks");
    if (job.status === "held" && can("admin")) {
      actions.push(
        decide(entry, label, "promote", "Promote", null),
        decide(entry, label, "discard", "Discard",
          "The re-ingest is cancelled and its new run removed; the world keeps the run it serves."));
    }
    const failures = [...entry.failures.values()];
    fill(entry.el,
      h("div", { class: "job-head" },
        h("strong", {}, job.kind),
        h("span", { class: `status status-${job.status}`, "data-status": job.status }, job.status),
        h("small", {}, `started ${when(job.started_at || job.created_at)}`)),
      rateBox ? h("div", { class: "job-bar" }, bar, rateBox) : bar,
      h("p", { class: "counts" },
        `${num(c.embedded)} of ${num(total)} embedded · ${num(c.pending)} pending · ${num(c.failed)} failed`,
        c.retries ? ` · ${num(c.retries)} retries` : "",
        c.reused ? ` · ${num(c.reused)} reused` : ""),
      waits.length ? h("p", { class: "waiting" }, waits.join(" ")) : null,
      job.gate ? gateFigures(job.gate) : null,
      entry.streamError ? h("p", { class: "error" }, `Live updates stopped: ${entry.streamError}`) : null,
      failures.length ? h("details", { class: "failures" },
        h("summary", {}, `${num(c.failed || failures.length)} failed chunks`),
        h("ul", {}, failures.map((f) =>
          h("li", {}, `book ${f.book_number}, chunk ${f.chunk_number}: ${f.message} (${f.code})`)))) : null,
      actions.length ? h("div", { class: "row" }, actions) : null);
  }

  // A held re-ingest's decision: promote switches the world to the new run, discard cancels it.
  function decide(entry, label, verb, text, confirmText) {
    const b = h("button", { type: "button", class: verb === "discard" ? "danger" : "primary",
      "aria-label": `${text} ${label}` }, text);
    b.addEventListener("click", async () => {
      if (confirmText && !(await confirmDialog(`${text} this re-ingest?`, confirmText, text))) return;
      b.disabled = true;
      try {
        const updated = await post(`/v1/worlds/${worldId}/reingest/${entry.job.id}/${verb}`);
        if (updated && updated.id) entry.job = updated;
        ui.clearError();
        ui.say(`${label}: ${verb === "promote" ? "promoted" : "discarded"}.`);
        drawJob(entry);
        followMore();
        await refreshWorld();
      } catch (err) {
        ui.fail(err);
        b.disabled = false;
      }
    });
    return b;
  }

  await Promise.all([refreshSources(), refreshJobs()]);
  return () => stop.abort();
}

const METRICS = {
  hit_at_1: "hit@1", hit_at_5: "hit@5", mrr_at_10: "MRR@10", answer_share: "answer share", fully: "fully answered",
};

/** A gated re-ingest's gate: its state, the metric before and after, and what decided it. */
function gateFigures(gate) {
  const metric = METRICS[gate.metric] || gate.metric;
  return h("div", { class: `gate gate-${gate.state}` },
    h("p", {}, h("strong", {}, `Gate ${gate.state}`), ` on ${metric}, tolerance ${pct(gate.tolerance)}`),
    gate.before != null || gate.after != null ? h("dl", { class: "stats gate-figures" },
      h("div", {}, h("dt", {}, "Before (run served)"), h("dd", {}, pct(gate.before))),
      h("div", {}, h("dt", {}, "After (new run)"), h("dd", {}, pct(gate.after)))) : null,
    gate.reason ? h("p", { class: "gate-reason" }, gate.reason) : null);
}

/** Chunks embedded per second over the last RATE_WINDOW_MS of progress events, or null when
 *  unknown (fewer than two events half a second apart, none lately, or no chunk embedded). */
function rate(entry) {
  const now = performance.now();
  const recent = (entry.samples || []).filter((x) => now - x.t <= RATE_WINDOW_MS);
  if (recent.length < 2) return null;
  const first = recent[0];
  const last = recent[recent.length - 1];
  const seconds = (last.t - first.t) / 1000;
  const embedded = last.embedded - first.embedded;
  return seconds >= 0.5 && embedded > 0 ? embedded / seconds : null;
}

/** "about 1 min left", from seconds. */
function eta(seconds) {
  if (seconds < 1) return "almost done";
  if (seconds < 60) return `about ${Math.ceil(seconds)} s left`;
  const minutes = Math.round(seconds / 60);
  if (minutes < 60) return `about ${minutes} min left`;
  return `about ${Math.floor(minutes / 60)} h ${minutes % 60} min left`;
}

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
