// The API client: every call carries the tab's bearer token; every non-2xx answer becomes an
// ApiError with the API's own code and message (`{"error": {"code", "message"}}`).

const KEY = "quarry.token";

export function token() {
  return sessionStorage.getItem(KEY) || "";
}

export function setToken(value) {
  if (value) sessionStorage.setItem(KEY, value);
  else sessionStorage.removeItem(KEY);
  me = null;
}

// The token's own description (GET /v1/token): its name, scopes and worlds. Pages ask `can`
// before drawing a control, so that a token sees only what it may do; the API still refuses
// anything else.
let me = null;

/** Who the current token is (asked once per token). */
export async function whoami() {
  if (!me) me = await get("/v1/token");
  return me;
}

/** Whether the current token holds `scope` (`admin` holds `ingest`, which holds `read`). */
export function can(scope) {
  const held = (me && me.scopes) || [];
  const holds = {
    read: ["read", "ingest", "admin"],
    ingest: ["ingest", "admin"],
    admin: ["admin"],
    metrics: ["metrics"],
  }[scope] || [];
  return held.some((s) => holds.includes(s));
}

export class ApiError extends Error {
  constructor(status, code, message, details) {
    super(message);
    this.status = status;
    this.code = code;
    this.details = details;
  }

  /** What the user reads: the API's message, its code and status. */
  describe() {
    const field = this.details && this.details.field ? ` (field: ${this.details.field})` : "";
    return `${this.message}${field} — ${this.code}, HTTP ${this.status}`;
  }
}

async function failure(resp) {
  let body = null;
  try {
    body = await resp.json();
  } catch {
    // Not JSON: a proxy's page, say.
  }
  const error = body && body.error;
  if (error && error.code) {
    return new ApiError(resp.status, error.code, error.message || error.code, error.details);
  }
  return new ApiError(resp.status, "http_error", resp.statusText || "the request failed");
}

function headers(extra = {}) {
  const h = { ...extra };
  const t = token();
  if (t) h.Authorization = `Bearer ${t}`;
  return h;
}

/** `method` on `path` (same origin), with a JSON body or a FormData. Resolves to the parsed
 *  JSON, the text for a text answer, or null for 204. */
export async function api(method, path, body, { signal } = {}) {
  const init = { method, headers: headers({ Accept: "application/json" }), signal };
  if (body instanceof FormData) {
    init.body = body;
  } else if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let resp;
  try {
    resp = await fetch(path, init);
  } catch (err) {
    if (err.name === "AbortError") throw err;
    throw new ApiError(0, "network_error", `the server could not be reached (${err.message})`);
  }
  if (!resp.ok) throw await failure(resp);
  if (resp.status === 204) return null;
  const type = resp.headers.get("content-type") || "";
  return type.startsWith("application/json") ? resp.json() : resp.text();
}

export const get = (path, opts) => api("GET", path, undefined, opts);
export const post = (path, body, opts) => api("POST", path, body, opts);
export const patch = (path, body, opts) => api("PATCH", path, body, opts);
export const del = (path, opts) => api("DELETE", path, undefined, opts);

/** Reads the server-sent events at `path` until the stream ends or `signal` aborts, calling
 *  `onEvent({id, event, data})` for each (data parsed as JSON when it is). EventSource cannot
 *  send an Authorization header, so this reads the stream with fetch and parses the
 *  `event:`/`data:`/`id:` lines itself. Resolves to the last event id seen. */
export async function events(path, onEvent, { signal, lastEventId } = {}) {
  const extra = { Accept: "text/event-stream" };
  if (lastEventId) extra["Last-Event-ID"] = lastEventId;
  const resp = await fetch(path, { headers: headers(extra), signal });
  if (!resp.ok) throw await failure(resp);
  const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  let last = lastEventId || "";
  let event = { id: "", event: "message", data: [] };
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value;
    let nl;
    while ((nl = buffer.search(/\r\n|\n|\r/)) >= 0) {
      const line = buffer.slice(0, nl);
      buffer = buffer.slice(nl + (buffer.startsWith("\r\n", nl) ? 2 : 1));
      if (line === "") {
        if (event.data.length) {
          const text = event.data.join("\n");
          let data = text;
          try {
            data = JSON.parse(text);
          } catch {
            // Plain text data.
          }
          if (event.id) last = event.id;
          onEvent({ id: event.id, event: event.event, data });
        }
        event = { id: "", event: "message", data: [] };
        continue;
      }
      if (line.startsWith(":")) continue; // a comment: keep-alive
      const colon = line.indexOf(":");
      const name = colon < 0 ? line : line.slice(0, colon);
      let val = colon < 0 ? "" : line.slice(colon + 1);
      if (val.startsWith(" ")) val = val.slice(1);
      if (name === "event") event.event = val;
      else if (name === "data") event.data.push(val);
      else if (name === "id") event.id = val;
    }
  }
  return last;
}

/** The message to show for any error thrown by the calls above. */
export function describe(err) {
  if (err instanceof ApiError) {
    if (err.status === 401) {
      return `The token was not accepted: ${err.message} — ${err.code}, HTTP 401. Paste a valid token above.`;
    }
    return err.describe();
  }
  return String(err && err.message ? err.message : err);
}
