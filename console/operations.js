// Page 4, operations: provider keys (enable, disable), the key scheduler's live view per
// provider, the live replicas, and webhook subscriptions (create, delete after a confirmation,
// each one's delivery log). Each section loads on its own; a token without the `admin` scope
// sees the API's 403 message in the section instead of the data, and no actions.

import { can, del, describe, get, patch, post } from "./api.js";
import { confirmDialog, field, fill, h, num, when } from "./dom.js";

const EVENTS = ["job.completed", "job.failed", "job.cancelled", "job.waiting", "job.held"];

function keyState(k) {
  if (k.usable) return "usable";
  if (k.problem) return k.problem;
  if (k.retired) return `retired: ${k.retired_reason || ""}`;
  return "disabled";
}

export async function render(main, _params, ui) {
  fill(main, h("h1", {}, "Operations"));

  // One section: a card whose body `load` fills, again after every action.
  function section(i, title, load) {
    const body = h("div", { class: "table-wrap" }, h("p", {}, "Loading…"));
    const card = h("section", { class: "card", "aria-labelledby": `ops-${i}` }, h("h2", { id: `ops-${i}` }, title), body);
    main.append(card);
    const refresh = async () => {
      try {
        await load(body, refresh);
      } catch (err) {
        fill(body, h("p", { class: "error" }, describe(err)));
      }
    };
    return refresh;
  }

  function table(columns, rows, caption) {
    return h("table", {},
      caption ? h("caption", { class: "sr-only" }, caption) : null,
      h("thead", {}, h("tr", {}, columns.map(([c]) => h("th", { scope: "col" }, c)))),
      h("tbody", {}, rows.map((row) => h("tr", {}, columns.map(([, f]) => h("td", {}, f(row)))))));
  }

  const keys = section(0, "Provider keys", async (body, refresh) => {
    const r = await get("/v1/provider-keys?limit=1000");
    if (!r.keys.length) {
      fill(body, h("p", {}, "No provider keys: only the local model can embed."));
      return;
    }
    const toggle = (k) => {
      if (!can("admin")) return "–";
      const verb = k.enabled ? "Disable" : "Enable";
      const b = h("button", { type: "button", "aria-label": `${verb} key ${k.label}` }, verb);
      b.addEventListener("click", async () => {
        b.disabled = true;
        try {
          await patch(`/v1/provider-keys/${k.key_id}`, { enabled: !k.enabled });
          ui.clearError();
          ui.say(`Key ${k.label} ${k.enabled ? "disabled" : "enabled"}.`);
          await Promise.all([refresh(), providers()]);
        } catch (err) {
          ui.fail(err);
          b.disabled = false;
        }
      });
      return b;
    };
    fill(body, table([
      ["Provider", (k) => k.provider],
      ["Label", (k) => k.label],
      ["Fingerprint", (k) => k.fingerprint],
      ["From", (k) => k.source],
      ["State", (k) => h("span", { "data-state": k.enabled ? "enabled" : "disabled" }, keyState(k))],
      ["Actions", toggle],
    ], r.keys, "Provider keys"));
  });

  const providers = section(1, "Key scheduler", async (body) => {
    const r = await get("/v1/providers");
    const rows = r.providers.flatMap((p) => p.keys.map((k) => ({ provider: p.provider, ...k })));
    const breakers = r.providers.flatMap((p) => p.breakers.map((b) => ({ provider: p.provider, ...b })));
    fill(body,
      h("p", { class: "hint" }, "Requests and outcomes since this replica started; a cooling key waits for its provider's limit."),
      rows.length ? table([
        ["Provider", (k) => k.provider],
        ["Key", (k) => k.label],
        ["In flight", (k) => num(k.in_flight)],
        ["Requests", (k) => num(k.requests)],
        ["Rate limited", (k) => num(k.rate_limited)],
        ["Failures", (k) => num(k.failures)],
        ["Cooling down until", (k) => (k.cooling_down_until ? when(k.cooling_down_until) : "–")],
      ], rows, "Keys as the scheduler sees them") : h("p", {}, "No keys to schedule."),
      breakers.length ? h("p", { class: "waiting" }, breakers.map((b) =>
        `${b.provider} / ${b.model}: breaker ${b.state}, ${b.failures_in_row} failures in a row. `)) : null);
  });

  const cluster = section(2, "Cluster", async (body) => {
    const r = await get("/v1/cluster");
    fill(body,
      h("p", {}, `This replica: ${r.this}. Provider budgets: ${r.budgets}. Heartbeat every ${r.heartbeat_s} s.`),
      r.replicas.length ? table([
        ["Replica", (x) => x.id],
        ["Address", (x) => x.address],
        ["Version", (x) => x.version],
        ["Workers", (x) => x.workers],
        ["In flight", (x) => x.in_flight],
        ["Last heartbeat", (x) => when(x.last_heartbeat)],
      ], r.replicas, "Replicas") : h("p", {}, "No replicas."));
  });

  const webhooks = section(3, "Webhooks", async (body, refresh) => {
    const r = await get("/v1/webhooks?limit=1000");
    const log = h("div", { class: "deliveries" });
    const actions = (w) => {
      const show = h("button", { type: "button", "aria-label": `Deliveries of ${w.url}` }, "Deliveries");
      show.addEventListener("click", () => deliveries(w, log).catch((err) => ui.fail(err)));
      const remove = h("button", { type: "button", class: "danger", "aria-label": `Delete webhook ${w.url}` }, "Delete");
      remove.addEventListener("click", async () => {
        const ok = await confirmDialog("Delete this webhook?", `${w.url} receives no more events; its delivery log goes too.`,
          "Delete webhook");
        if (!ok) return;
        try {
          await del(`/v1/webhooks/${w.webhook_id}`);
          ui.clearError();
          ui.say("Webhook deleted.");
          await refresh();
        } catch (err) {
          ui.fail(err);
        }
      });
      return [show, remove];
    };
    fill(body,
      r.webhooks.length ? table([
        ["URL", (w) => w.url],
        ["Events", (w) => w.events.join(", ")],
        ["World", (w) => w.world_id || "every world"],
        ["Created", (w) => when(w.created_at)],
        ["Actions", (w) => h("div", { class: "actions" }, actions(w))],
      ], r.webhooks, "Webhook subscriptions") : h("p", {}, "No webhook subscriptions."),
      log,
      can("admin") ? createWebhook(refresh) : null);
  });

  async function deliveries(w, box) {
    fill(box, h("p", {}, "Loading deliveries…"));
    const r = await get(`/v1/webhooks/${w.webhook_id}/deliveries?limit=50`);
    fill(box,
      h("h3", { id: "deliveries-title", tabindex: "-1" }, `Deliveries to ${w.url}`),
      r.deliveries.length ? table([
        ["Event", (d) => d.event],
        ["Status", (d) => d.status],
        ["Attempts", (d) => num(d.attempts)],
        ["Last answer", (d) => (d.last_status_code != null ? `HTTP ${d.last_status_code}` : d.last_error || "–")],
        ["Next attempt", (d) => when(d.next_attempt_at)],
        ["Created", (d) => when(d.created_at)],
      ], r.deliveries, "Deliveries, newest first") : h("p", {}, "No deliveries yet."));
    box.querySelector("h3").focus();
  }

  function createWebhook(refresh) {
    const url = h("input", { type: "url", required: true, maxlength: 2048, placeholder: "https://hooks.example.com/quarry" });
    const boxes = EVENTS.map((e) => {
      const box = h("input", { type: "checkbox", value: e, checked: true, id: `event-${e.replace(".", "-")}` });
      return h("span", { class: "check" }, box, h("label", { for: box.id }, e));
    });
    const form = h("form", { class: "grid webhook-form" },
      field("Receiver URL", url),
      h("fieldset", { class: "field" }, h("legend", {}, "Events"), boxes),
      h("div", { class: "row" }, h("button", { type: "submit", class: "primary" }, "Create webhook")));
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      const events = boxes.map((b) => b.querySelector("input")).filter((b) => b.checked).map((b) => b.value);
      try {
        const made = await post("/v1/webhooks", { url: url.value, events });
        ui.clearError();
        ui.say("Webhook created.");
        await refresh();
        webhookSecret(made);
      } catch (err) {
        ui.fail(err);
      }
    });
    return h("div", {}, h("h3", {}, "Add a webhook"), form);
  }

  // The signing secret is shown once, in the section, after it is redrawn.
  function webhookSecret(made) {
    const card = main.querySelector("[aria-labelledby=ops-3] .table-wrap");
    card.prepend(h("p", { class: "ok secret" }, "Signing secret (shown this once): ", h("code", {}, made.secret)));
  }

  await Promise.all([keys(), providers(), cluster(), webhooks()]);
}
