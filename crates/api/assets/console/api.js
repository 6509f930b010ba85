// The console's only way to data: Mast's public /v1 API with the signed-in key, exactly as
// the SDKs call it (x-api-key, anthropic-version, anthropic-beta), plus an SSE reader over
// fetch streaming (EventSource cannot send headers).

const KEY = "mast.console.apiKey";
const BETA = "managed-agents-2026-04-01";
const VERSION = "2023-06-01";

/** The signed-in API key (kept in sessionStorage only: never in a URL, never logged). */
export const getKey = () => sessionStorage.getItem(KEY);
export const setKey = (k) => sessionStorage.setItem(KEY, k);
export const clearKey = () => sessionStorage.removeItem(KEY);

/** An API error: HTTP status plus the error body's type and message. */
export class ApiError extends Error {
  constructor(status, body) {
    const err = (body && body.error) || {};
    super(err.message || `HTTP ${status}`);
    this.status = status;
    this.type = err.type || "api_error";
  }
}

function headers(extra = {}) {
  const key = getKey();
  return { ...(key ? { "x-api-key": key } : {}), "anthropic-version": VERSION, "anthropic-beta": BETA, ...extra };
}

/**
 * Whether the server takes requests without a key (open mode: no key created yet, on loopback),
 * found by reading without one. It is decided by the server alone (`api::auth`), so asking is
 * the only way to know; a 401 here is the expected answer of a keyed server, not a rejected
 * key, so it does not sign anyone out. Other failures throw ApiError.
 */
export async function probeOpen() {
  const res = await fetch(url("/v1/agents", { limit: 1 }), { headers: { "anthropic-version": VERSION, "anthropic-beta": BETA }, cache: "no-store" });
  if (res.ok) return true;
  if (res.status === 401) return false;
  let body = null;
  try { body = await res.json(); } catch { /* not JSON */ }
  throw new ApiError(res.status, body);
}

/** `path` plus a query: arrays repeat bracket-style keys (`statuses[]=a&statuses[]=b`). */
export function url(path, query = {}) {
  const u = new URL(path, location.origin);
  for (const [k, v] of Object.entries(query)) {
    if (v === undefined || v === null || v === "") continue;
    if (Array.isArray(v)) v.forEach((x) => u.searchParams.append(k, x));
    else u.searchParams.append(k, String(v));
  }
  return u.pathname + u.search;
}

async function failure(res) {
  let body = null;
  try { body = await res.json(); } catch { /* not JSON */ }
  const e = new ApiError(res.status, body);
  if (res.status === 401) window.dispatchEvent(new CustomEvent("mast:unauthorized"));
  return e;
}

/** One API call; resolves to the parsed JSON body or throws ApiError. */
export async function api(method, path, { query, body, signal } = {}) {
  const init = { method, headers: headers(body !== undefined ? { "content-type": "application/json" } : {}), signal };
  if (body !== undefined) init.body = JSON.stringify(body);
  const res = await fetch(url(path, query), init);
  if (!res.ok) throw await failure(res);
  return res.status === 204 ? null : res.json();
}

/** Every page of a cursor-paged list (follows `next_page`). */
export async function listAll(path, query = {}, { signal, onPage } = {}) {
  const out = [];
  let page;
  do {
    const r = await api("GET", path, { query: { ...query, page }, signal });
    out.push(...r.data);
    if (onPage) onPage(r.data);
    page = r.next_page;
  } while (page);
  return out;
}

/**
 * Opens an SSE stream. Resolves once the server has answered (it subscribes before sending
 * headers, so events persisted after this point are on the stream) to an async iterator of
 * parsed frames `{event, data}`; pings, comments and frames without `event:` are skipped
 * (the API's SSE framing). An `event: error` frame throws ApiError.
 */
export async function openStream(path, query, signal) {
  const res = await fetch(url(path, query), { headers: headers({ accept: "text/event-stream" }), signal, cache: "no-store" });
  if (!res.ok) throw await failure(res);
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  return (async function* frames() {
    let buf = "";
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        buf += value;
        let m;
        while ((m = /\r\n\r\n|\n\n|\r\r/.exec(buf))) {
          const chunk = buf.slice(0, m.index);
          buf = buf.slice(m.index + m[0].length);
          const frame = parseFrame(chunk);
          if (!frame || frame.event === "ping" || !frame.data) continue;
          const data = JSON.parse(frame.data);
          if (frame.event === "error") throw new ApiError(200, data);
          yield { event: frame.event, data };
        }
      }
    } finally {
      reader.cancel().catch(() => {});
    }
  })();
}

/** One SSE chunk → `{event, data, id}`; null when it has no `event:` line. */
export function parseFrame(chunk) {
  let event = null;
  const data = [];
  let id = null;
  for (const line of chunk.split(/\r\n|\r|\n/)) {
    if (line === "" || line.startsWith(":")) continue;
    const i = line.indexOf(":");
    const field = i < 0 ? line : line.slice(0, i);
    let value = i < 0 ? "" : line.slice(i + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") event = value;
    else if (field === "data") data.push(value);
    else if (field === "id") id = value;
  }
  return event === null ? null : { event, data: data.join("\n"), id };
}
