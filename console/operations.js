// Page 4, operations (read-only in this first version): provider keys and their state, the
// live replicas, webhook subscriptions. Each section loads on its own; a token without the
// `admin` scope sees the API's 403 message in the section instead of the data.

import { describe, get } from "./api.js";
import { fill, h, when } from "./dom.js";

const SECTIONS = [
  {
    title: "Provider keys",
    path: "/v1/provider-keys",
    rows: (r) => r.keys,
    columns: [
      ["Provider", (k) => k.provider],
      ["Label", (k) => k.label],
      ["Fingerprint", (k) => k.fingerprint],
      ["From", (k) => k.source],
      ["State", (k) => (k.usable ? "usable" : k.problem || (k.retired ? `retired: ${k.retired_reason || ""}` : "disabled"))],
    ],
    empty: "No provider keys: only the local model can embed.",
  },
  {
    title: "Cluster",
    path: "/v1/cluster",
    rows: (r) => r.replicas,
    note: (r) => `This replica: ${r.this}. Provider budgets: ${r.budgets}. Heartbeat every ${r.heartbeat_s} s.`,
    columns: [
      ["Replica", (x) => x.id],
      ["Address", (x) => x.address],
      ["Version", (x) => x.version],
      ["Workers", (x) => x.workers],
      ["In flight", (x) => x.in_flight],
      ["Last heartbeat", (x) => when(x.last_heartbeat)],
    ],
    empty: "No replicas.",
  },
  {
    title: "Webhooks",
    path: "/v1/webhooks",
    rows: (r) => r.webhooks,
    columns: [
      ["URL", (w) => w.url],
      ["Events", (w) => w.events.join(", ")],
      ["World", (w) => w.world_id || "every world"],
      ["Created", (w) => when(w.created_at)],
    ],
    empty: "No webhook subscriptions.",
  },
];

export async function render(main) {
  fill(main, h("h1", {}, "Operations"));
  await Promise.all(SECTIONS.map(async (s, i) => {
    const body = h("div", { class: "table-wrap" }, h("p", {}, "Loading…"));
    main.append(h("section", { class: "card", "aria-labelledby": `ops-${i}` }, h("h2", { id: `ops-${i}` }, s.title), body));
    try {
      const r = await get(s.path);
      const rows = s.rows(r);
      fill(body,
        s.note ? h("p", {}, s.note(r)) : null,
        rows.length ? h("table", {},
          h("thead", {}, h("tr", {}, s.columns.map(([c]) => h("th", { scope: "col" }, c)))),
          h("tbody", {}, rows.map((row) => h("tr", {}, s.columns.map(([, f]) => h("td", {}, f(row)))))))
          : h("p", {}, s.empty));
    } catch (err) {
      fill(body, h("p", { class: "error" }, describe(err)));
    }
  }));
}
