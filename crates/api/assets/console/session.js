// The session page: history from the events list, then live over SSE; on a dropped
// connection it reopens the stream, re-reads the history and skips ids already shown, so
// nothing is missed or shown twice (the reconnect rule the SDK's tool runner follows). Only the
// newest WINDOW rows are in the DOM; "Show earlier" adds more, so thousands of events stay cheap.
import { api, listAll, openStream, ApiError } from "./api.js";
import { h, replace, badge, sleep } from "./dom.js";
import { renderEvent, hasRow, setSession, cost } from "./transcript.js";

const WINDOW = 200;

/** Mounts the page for a session (or one of its threads) into `root`; returns a cleanup. */
export function sessionPage(root, sessionId, threadId) {
  setSession(sessionId);
  const base = `/v1/sessions/${encodeURIComponent(sessionId)}`;
  const listPath = threadId ? `${base}/threads/${encodeURIComponent(threadId)}/events` : `${base}/events`;
  const streamPath = threadId ? `${base}/threads/${encodeURIComponent(threadId)}/stream` : `${base}/events/stream`;
  const state = {
    events: [], seen: new Set(), start: 0, nodes: new Map(), pending: new Map(), actions: new Map(),
    previews: new Map(), stopped: false, ctrl: null, loading: true, atBottom: true,
  };

  const title = h("h1", { class: "title" }, sessionId);
  const status = h("span", { id: "session-status" }, badge("…"));
  const conn = h("span", { id: "conn", class: "conn", role: "status", "aria-live": "polite" }, "connecting");
  const usageEl = h("span", { id: "usage", class: "muted" });
  const threadsEl = h("nav", { id: "threads", class: "threads", "aria-label": "Threads" });
  const earlier = h("button", { type: "button", id: "show-earlier", class: "link", hidden: true, onclick: showEarlier });
  const list = h("ol", { id: "transcript", class: "transcript", "aria-label": "Transcript", "aria-live": "off" });
  const scroller = h("div", { class: "scroller" }, earlier, list);
  scroller.addEventListener("scroll", () => {
    state.atBottom = scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < 40;
  });
  const input = h("textarea", { id: "composer", rows: 3, "aria-label": "Message", placeholder: "Message the agent (Ctrl/⌘+Enter to send)" });
  const sendBtn = h("button", { type: "button", id: "send", onclick: send }, "Send");
  const interruptBtn = h("button", { type: "button", id: "interrupt", class: "danger", onclick: interrupt, title: "Interrupt (Esc)" }, "Interrupt");
  const download = h("button", { type: "button", id: "download", onclick: downloadTranscript }, "Download JSON");
  const composerErr = h("div", { class: "err", role: "alert" });
  input.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); send(); }
  });
  const composer = threadId
    ? h("div", { class: "composer" }, h("div", { class: "row" }, interruptBtn, download), composerErr)
    : h("div", { class: "composer" }, input, h("div", { class: "row" }, sendBtn, interruptBtn, download), composerErr);

  replace(root, h("div", { class: "session" },
    h("header", { class: "session-head" },
      h("div", {}, h("a", { href: threadId ? `#/sessions/${sessionId}` : "#/sessions", class: "back" }, threadId ? "← Session" : "← Sessions"), title),
      h("div", { class: "row" }, status, conn, usageEl)),
    h("div", { class: "session-body" }, h("div", { class: "main" }, scroller, composer), threadsEl)));

  const onKey = (e) => {
    if (e.key === "Escape" && !e.defaultPrevented) { e.preventDefault(); interrupt(); }
  };
  document.addEventListener("keydown", onKey);

  // --- data --------------------------------------------------------------------------------

  let infoTimer = null;
  let agentName = "";
  function showUsage(u) {
    u = u || {};
    usageEl.textContent = `${agentName ? agentName + " · " : ""}tokens in ${u.input_tokens ?? 0} / out ${u.output_tokens ?? 0}${u.list_cost ? " · " + cost(u.list_cost) : ""}`;
  }
  async function refreshInfo() {
    try {
      const s = await api("GET", base);
      title.textContent = s.title || s.id;
      if (!threadId) replace(status, badge(s.archived_at ? "archived" : s.status));
      agentName = (s.agent && s.agent.name) || "";
      if (!threadId) showUsage(s.usage);
      const threads = await listAll(`${base}/threads`);
      if (threadId) {
        const t = threads.find((x) => x.id === threadId);
        if (t) { replace(status, badge(t.status)); title.textContent = `${t.agent_name || (t.agent && t.agent.name) || "thread"} · ${t.id}`; }
      }
      replace(threadsEl, threads.length > 1 ? [h("h2", {}, "Threads"), h("ul", {}, threads.map((t) => {
        const name = t.agent_name || (t.agent && t.agent.name) || t.id;
        const href = t.parent_thread_id ? `#/sessions/${sessionId}/threads/${t.id}` : `#/sessions/${sessionId}`;
        const current = (threadId || null) === (t.parent_thread_id ? t.id : null);
        return h("li", {}, h("a", { href, "aria-current": current ? "page" : null, class: "thread-link" }, name), " ", badge(t.status));
      }))] : []);
    } catch (e) {
      if (e instanceof ApiError && e.status === 404) { conn.textContent = "session not found"; state.stopped = true; }
    }
  }
  const refreshSoon = () => { clearTimeout(infoTimer); infoTimer = setTimeout(refreshInfo, 250); };

  function ingest(ev) {
    if (!ev.id) return;
    if (state.seen.has(ev.id)) return;
    state.seen.add(ev.id);
    state.events.push(ev);
    trackPending(ev);
    // The newest usage snapshot is the session's (the retrieve may lag the event).
    if (ev.type === "session.usage" && !threadId) showUsage(ev.usage);
    if (!state.loading) {
      clearPreview(ev.id);
      appendNode(ev);
      if (ev.type.startsWith("session.")) refreshSoon();
    }
  }

  function trackPending(ev) {
    const t = ev.type;
    if (t === "agent.custom_tool_use" || ((t === "agent.tool_use" || t === "agent.mcp_tool_use") && ev.evaluated_permission === "ask")) {
      state.pending.set(ev.id, ev);
    } else if (t === "user.custom_tool_result") settle(ev.custom_tool_use_id);
    else if (t === "user.tool_confirmation" || t === "user.tool_result") settle(ev.tool_use_id);
    else if ((t === "session.status_idle" && ev.stop_reason && ev.stop_reason.type !== "requires_action") || t === "session.status_terminated") {
      for (const id of [...state.pending.keys()]) settle(id);
    } else if (t === "session.status_idle" && ev.stop_reason) {
      const open = new Set(ev.stop_reason.event_ids || []);
      for (const id of [...state.pending.keys()]) if (!open.has(id)) settle(id);
    }
  }

  function settle(id) {
    if (!state.pending.delete(id)) return;
    const box = state.actions.get(id);
    if (box) box.replaceChildren();
  }

  // --- rendering ---------------------------------------------------------------------------

  function nodeFor(ev) {
    let box = null;
    if (state.pending.has(ev.id)) { box = h("div", { class: "actions" }); fillActions(box, ev); state.actions.set(ev.id, box); }
    const node = renderEvent(ev, box);
    return node;
  }

  function appendNode(ev) {
    const node = nodeFor(ev);
    if (node) { list.append(node); state.nodes.set(ev.id, node); }
    if (state.atBottom) scroller.scrollTop = scroller.scrollHeight;
  }

  // The index where the WINDOW rows before `end` begin. Rows, not events: some events show
  // nothing, and counting them offered "earlier" rows that were not there.
  function windowStart(end) {
    let i = end, rows = 0;
    while (i > 0 && rows < WINDOW) { i -= 1; if (hasRow(state.events[i])) rows += 1; }
    return i;
  }

  function renderWindow() {
    state.start = windowStart(state.events.length);
    const frag = document.createDocumentFragment();
    for (const ev of state.events.slice(state.start)) { const n = nodeFor(ev); if (n) frag.append(n); }
    list.replaceChildren(frag);
    updateEarlier();
    scroller.scrollTop = scroller.scrollHeight;
  }

  function showEarlier() {
    const from = windowStart(state.start);
    const frag = document.createDocumentFragment();
    for (const ev of state.events.slice(from, state.start)) { const n = nodeFor(ev); if (n) frag.append(n); }
    const keep = scroller.scrollHeight - scroller.scrollTop;
    list.prepend(frag);
    scroller.scrollTop = scroller.scrollHeight - keep;
    state.start = from;
    updateEarlier();
  }

  function updateEarlier() {
    let more = 0;
    for (let i = 0; i < state.start; i += 1) if (hasRow(state.events[i])) more += 1;
    earlier.hidden = more === 0;
    earlier.textContent = more ? `Show earlier (${more} more)` : "";
  }

  function fillActions(box, ev) {
    const err = h("div", { class: "err", role: "alert" });
    if (ev.type === "agent.custom_tool_use") {
      const result = h("textarea", { rows: 2, class: "tool-result-input", "aria-label": `Result for ${ev.name}` });
      const isErr = h("input", { type: "checkbox", class: "is-error" });
      const btn = h("button", { type: "button", class: "primary answer", onclick: () => post([{
        type: "user.custom_tool_result", custom_tool_use_id: ev.id,
        content: [{ type: "text", text: result.value }], is_error: isErr.checked,
      }], err) }, "Send result");
      result.addEventListener("keydown", (e) => { if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); btn.click(); } });
      replace(box, h("div", { class: "pending-label" }, "Waiting for your result"), result,
        h("div", { class: "row" }, h("label", {}, isErr, " is error"), btn), err);
    } else {
      const msg = h("input", { type: "text", class: "deny-message", "aria-label": "Deny message", placeholder: "Deny message (optional)" });
      const allow = h("button", { type: "button", class: "primary allow", onclick: () => post([{ type: "user.tool_confirmation", tool_use_id: ev.id, result: "allow" }], err) }, "Allow");
      const deny = h("button", { type: "button", class: "danger deny", onclick: () => post([{
        type: "user.tool_confirmation", tool_use_id: ev.id, result: "deny", ...(msg.value ? { deny_message: msg.value } : {}),
      }], err) }, "Deny");
      replace(box, h("div", { class: "pending-label" }, "Needs your confirmation"), h("div", { class: "row" }, allow, deny, msg), err);
    }
  }

  async function post(events, errEl) {
    errEl.textContent = "";
    try {
      // Shown when the stream echoes it, so the transcript keeps the log's order.
      await api("POST", `${base}/events`, { body: { events } });
      return true;
    } catch (e) {
      errEl.textContent = e.message;
      return false;
    }
  }

  async function send() {
    const text = input.value;
    if (!text.trim()) return;
    if (await post([{ type: "user.message", content: [{ type: "text", text }] }], composerErr)) input.value = "";
  }

  function interrupt() {
    post([threadId ? { type: "user.interrupt", session_thread_id: threadId } : { type: "user.interrupt" }], composerErr);
  }

  function downloadTranscript() {
    const blob = new Blob([JSON.stringify(state.events, null, 2)], { type: "application/json" });
    const a = h("a", { href: URL.createObjectURL(blob), download: `${threadId || sessionId}.json` });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(a.href), 1000);
  }

  // --- streaming previews ------------------------------------------------------------------

  function onFrame(f) {
    const d = f.data;
    if (d.type === "event_start") {
      if (d.event && d.event.type === "agent.message" && !state.seen.has(d.event.id)) {
        const text = h("div", { class: "text" });
        const node = h("li", { class: "ev ev-agent preview", "data-preview": d.event.id }, h("div", { class: "meta" }, h("span", { class: "who" }, "Agent"), h("span", { class: "tag" }, "typing…")), text);
        state.previews.set(d.event.id, { node, text, blocks: [] });
        list.append(node);
        if (state.atBottom) scroller.scrollTop = scroller.scrollHeight;
      }
    } else if (d.type === "event_delta") {
      const p = state.previews.get(d.event_id);
      if (p && d.delta && d.delta.content) {
        const i = d.delta.index ?? 0;
        p.blocks[i] = (p.blocks[i] || "") + (d.delta.content.text || "");
        p.text.textContent = p.blocks.join("\n");
      }
    } else if (d.type === "span.model_request_end") {
      for (const id of [...state.previews.keys()]) clearPreview(id);
      ingest(d);
    } else {
      ingest(d);
      if (d.type === "session.deleted") { state.stopped = true; conn.textContent = "session deleted"; }
    }
  }

  function clearPreview(id) {
    const p = state.previews.get(id);
    if (p) { p.node.remove(); state.previews.delete(id); }
  }

  // --- connection loop ---------------------------------------------------------------------

  async function connectOnce() {
    const ctrl = new AbortController();
    state.ctrl = ctrl;
    const frames = await openStream(streamPath, threadId ? {} : { "event_deltas[]": ["agent.message"] }, ctrl.signal);
    // Frames that arrive while the history loads wait here, then go through the same dedupe.
    const queue = [];
    let deliver = null;
    const pump = (async () => { for await (const f of frames) { if (deliver) deliver(f); else queue.push(f); } })();
    pump.catch(() => {});
    const first = state.loading;
    await listAll(listPath, { limit: 1000 }, { signal: ctrl.signal, onPage: (page) => page.forEach(ingest) });
    if (first) { state.loading = false; renderWindow(); refreshInfo(); }
    deliver = onFrame;
    for (const f of queue.splice(0)) onFrame(f);
    conn.textContent = "live";
    conn.className = "conn live";
    await pump;
  }

  (async () => {
    let backoff = 250;
    while (!state.stopped) {
      const began = Date.now();
      try {
        await connectOnce();
      } catch (e) {
        if (state.stopped) break;
        if (e instanceof ApiError && (e.status === 404 || e.status === 401 || e.status === 400)) {
          conn.textContent = e.message; conn.className = "conn bad"; break;
        }
      }
      if (state.stopped) break;
      for (const id of [...state.previews.keys()]) clearPreview(id);
      conn.textContent = "reconnecting…";
      conn.className = "conn";
      if (Date.now() - began > 10000) backoff = 250;
      await sleep(backoff);
      backoff = Math.min(backoff * 2, 4000);
    }
  })();

  return () => {
    state.stopped = true;
    if (state.ctrl) state.ctrl.abort();
    clearTimeout(infoTimer);
    document.removeEventListener("keydown", onKey);
  };
}
