// The list pages: sessions (live status, filters, paging, create), agents (search, versions,
// diff, archive) and environments (view, self-hosted queue stats).
import { api, listAll } from "./api.js";
import { h, replace, badge, when, pre } from "./dom.js";
import { lineDiff, agentText } from "./diff.js";

const STATUSES = ["idle", "running", "rescheduling", "terminated"];
// Not a status of the API: idle sessions whose last stop asks the user for something.
const WAITING = "requires_action";
const WAITING_TITLE = "Idle until you answer: a custom tool result or a tool confirmation";

/**
 * Whether each idle session waits on the user (its last `session.status_idle` stopped with
 * `requires_action`). The session object does not carry its stop reason, so this reads each
 * idle session's newest idle event; an answer is kept until the session's `updated_at` moves
 * (every status change moves it), so the 3-second poll costs nothing for sessions that rest.
 */
const waitingCache = new Map();
async function markWaiting(sessions) {
  await Promise.all(sessions.map(async (s) => {
    if (s.status !== "idle" || s.archived_at) { waitingCache.delete(s.id); return; }
    const known = waitingCache.get(s.id);
    if (known && known.updated_at === s.updated_at) { s.waiting = known.waiting; return; }
    try {
      const r = await api("GET", `/v1/sessions/${encodeURIComponent(s.id)}/events`, {
        query: { limit: 1, order: "desc", "types[]": ["session.status_idle"] },
      });
      const last = r.data[0];
      s.waiting = !!(last && last.stop_reason && last.stop_reason.type === WAITING);
      waitingCache.set(s.id, { updated_at: s.updated_at, waiting: s.waiting });
    } catch {
      // A session deleted since the list was read: the next poll drops its row.
    }
  }));
}

function statusCell(s) {
  return h("td", {}, badge(s.archived_at ? "archived" : s.status),
    s.waiting ? [" ", h("span", { class: "badge st-waiting waiting", title: WAITING_TITLE }, "waiting on you")] : null);
}

function errorBox() { return h("div", { class: "err", role: "alert" }); }

/** Sessions: newest first, polled every few seconds for live status. */
export function sessionsPage(root) {
  let page = null, timer = null, stopped = false;
  const status = h("select", { id: "f-status", "aria-label": "Status" }, h("option", { value: "" }, "any status"), STATUSES.map((s) => h("option", { value: s }, s)),
    h("option", { value: WAITING }, "waiting on you"));
  const note = h("p", { id: "waiting-note", class: "muted note", hidden: true },
    "Waiting on you: the idle sessions of this page (up to 100) that wait for a tool result or a confirmation, picked out in the browser.");
  const agent = h("select", { id: "f-agent", "aria-label": "Agent" }, h("option", { value: "" }, "any agent"));
  const archived = h("input", { type: "checkbox", id: "f-archived" });
  const rows = h("tbody", { id: "sessions" });
  const prev = h("button", { type: "button", id: "prev", disabled: true }, "← Newer");
  const next = h("button", { type: "button", id: "next", disabled: true }, "Older →");
  const err = errorBox();
  const cAgent = h("select", { id: "new-agent", "aria-label": "Agent for the new session", required: true });
  const cEnv = h("select", { id: "new-env", "aria-label": "Environment for the new session", required: true });
  const cTitle = h("input", { type: "text", id: "new-title", "aria-label": "Title", placeholder: "Title (optional)" });
  const cErr = errorBox();
  const create = h("button", { type: "button", id: "create-session", class: "primary", onclick: async () => {
    cErr.textContent = "";
    try {
      const s = await api("POST", "/v1/sessions", { body: { agent: cAgent.value, environment_id: cEnv.value, ...(cTitle.value ? { title: cTitle.value } : {}) } });
      location.hash = `#/sessions/${s.id}`;
    } catch (e) { cErr.textContent = e.message; }
  } }, "Create session");

  async function load() {
    clearTimeout(timer);
    // The API has no filter on stop reasons: this one asks for idle sessions, a larger page
    // so fewer pages come back empty, and keeps those that wait.
    const waitingOnly = status.value === WAITING;
    note.hidden = !waitingOnly;
    try {
      const r = await api("GET", "/v1/sessions", { query: {
        limit: waitingOnly ? 100 : 20, page, agent_id: agent.value, include_archived: archived.checked ? "true" : null,
        "statuses[]": waitingOnly ? ["idle"] : status.value ? [status.value] : null,
      } });
      await markWaiting(r.data);
      if (stopped) return;
      err.textContent = "";
      const shown = waitingOnly ? r.data.filter((s) => s.waiting) : r.data;
      replace(rows, shown.length ? shown.map((s) => h("tr", {},
        h("td", {}, h("a", { href: `#/sessions/${s.id}` }, s.title || s.id)),
        h("td", {}, (s.agent && s.agent.name) || ""),
        statusCell(s),
        h("td", { class: "muted" }, when(s.created_at)))) : h("tr", {}, h("td", { colspan: 4, class: "muted" }, waitingOnly ? "No session on this page waits on you." : "No sessions.")));
      prev.disabled = !r.prev_page; prev.onclick = () => { page = r.prev_page; load(); };
      next.disabled = !r.next_page; next.onclick = () => { page = r.next_page; load(); };
    } catch (e) { err.textContent = e.message; }
    if (!stopped) timer = setTimeout(load, document.hidden ? 15000 : 3000);
  }
  for (const el of [status, agent, archived]) el.addEventListener("change", () => { page = null; load(); });

  replace(root, h("section", {},
    h("h1", {}, "Sessions"),
    h("details", { class: "card", id: "new-session" }, h("summary", {}, "New session"),
      h("div", { class: "row wrap" }, cAgent, cEnv, cTitle, create), cErr),
    h("div", { class: "row wrap filters" }, status, agent, h("label", {}, archived, " include archived")),
    note, err,
    h("table", { class: "grid" }, h("thead", {}, h("tr", {}, h("th", {}, "Session"), h("th", {}, "Agent"), h("th", {}, "Status"), h("th", {}, "Created"))), rows),
    h("div", { class: "row" }, prev, next)));

  (async () => {
    try {
      const [agents, envs] = await Promise.all([listAll("/v1/agents", { limit: 100 }), listAll("/v1/environments", { limit: 100 })]);
      for (const a of agents) { agent.append(h("option", { value: a.id }, a.name)); cAgent.append(h("option", { value: a.id }, `${a.name} (${a.id})`)); }
      for (const e of envs) cEnv.append(h("option", { value: e.id }, `${e.name} (${e.id})`));
    } catch (e) { cErr.textContent = e.message; }
  })();
  load();
  return () => { stopped = true; clearTimeout(timer); };
}

/** Agents: a searchable list. */
export function agentsPage(root) {
  const search = h("input", { type: "search", id: "agent-search", "aria-label": "Search agents", placeholder: "Search agents  ( / )" });
  const archived = h("input", { type: "checkbox", id: "a-archived" });
  const rows = h("tbody", { id: "agents" });
  const err = errorBox();
  let all = [];
  const show = () => {
    const q = search.value.trim().toLowerCase();
    const hit = all.filter((a) => !q || a.name.toLowerCase().includes(q) || a.id.toLowerCase().includes(q));
    replace(rows, hit.map((a) => h("tr", {},
      h("td", {}, h("a", { href: `#/agents/${a.id}` }, a.name)),
      h("td", { class: "mono" }, a.id),
      h("td", {}, typeof a.model === "string" ? a.model : a.model && a.model.id),
      h("td", {}, `v${a.version}`),
      h("td", {}, a.archived_at ? badge("archived") : ""))));
  };
  const load = async () => {
    try { all = await listAll("/v1/agents", { limit: 100, include_archived: archived.checked ? "true" : null }); show(); }
    catch (e) { err.textContent = e.message; }
  };
  search.addEventListener("input", show);
  archived.addEventListener("change", load);
  replace(root, h("section", {}, h("h1", {}, "Agents"),
    h("div", { class: "row wrap filters" }, search, h("label", {}, archived, " include archived")), err,
    h("table", { class: "grid" }, h("thead", {}, h("tr", {}, h("th", {}, "Name"), h("th", {}, "Id"), h("th", {}, "Model"), h("th", {}, "Version"), h("th", {}, ""))), rows)));
  load();
  return () => {};
}

/** One agent: its versions, one version's definition, a diff of two, archive. */
export function agentPage(root, id) {
  const err = errorBox();
  const body = h("div", {});
  replace(root, h("section", {}, h("a", { href: "#/agents", class: "back" }, "← Agents"), err, body));
  (async () => {
    try {
      const agent = await api("GET", `/v1/agents/${encodeURIComponent(id)}`);
      const versions = (await listAll(`/v1/agents/${encodeURIComponent(id)}/versions`, { limit: 100 })).sort((a, b) => b.version - a.version);
      const opts = () => versions.map((v) => h("option", { value: v.version }, `v${v.version}`));
      const left = h("select", { id: "diff-from", "aria-label": "Older version" }, opts());
      const right = h("select", { id: "diff-to", "aria-label": "Newer version" }, opts());
      left.value = String(versions.length > 1 ? versions[1].version : versions[0].version);
      right.value = String(versions[0].version);
      const view = h("div", { id: "version-view" });
      const out = h("pre", { id: "diff", class: "diff" });
      const pick = (v) => versions.find((x) => String(x.version) === String(v));
      const diff = () => replace(out, lineDiff(agentText(pick(left.value)), agentText(pick(right.value)))
        .map(([op, line]) => h("span", { class: op === "+" ? "add" : op === "-" ? "del" : "same" }, `${op} ${line}\n`)));
      const showVersion = (v) => replace(view, pre(pick(v)));
      const which = h("select", { id: "version-pick", "aria-label": "Version to view", onchange: (e) => showVersion(e.target.value) }, opts());
      left.addEventListener("change", diff);
      right.addEventListener("change", diff);
      const archive = h("button", { type: "button", class: "danger", id: "archive-agent", disabled: !!agent.archived_at, onclick: async () => {
        if (!confirm(`Archive agent ${agent.name}? This cannot be undone.`)) return;
        try { await api("POST", `/v1/agents/${encodeURIComponent(id)}/archive`); agentPage(root, id); } catch (e) { err.textContent = e.message; }
      } }, agent.archived_at ? "Archived" : "Archive");
      replace(body,
        h("div", { class: "row wrap" }, h("h1", {}, agent.name), badge(agent.archived_at ? "archived" : `v${agent.version}`), archive),
        h("p", { class: "mono muted" }, agent.id),
        h("h2", {}, "Version"), which, view,
        h("h2", {}, "Diff"), h("div", { class: "row" }, left, " → ", right), out);
      showVersion(versions[0].version);
      diff();
    } catch (e) { err.textContent = e.message; }
  })();
  return () => {};
}

/** Environments: list. */
export function environmentsPage(root) {
  const rows = h("tbody", { id: "environments" });
  const err = errorBox();
  replace(root, h("section", {}, h("h1", {}, "Environments"), err,
    h("table", { class: "grid" }, h("thead", {}, h("tr", {}, h("th", {}, "Name"), h("th", {}, "Id"), h("th", {}, "Type"), h("th", {}, "Created"))), rows)));
  (async () => {
    try {
      const envs = await listAll("/v1/environments", { limit: 100, include_archived: "true" });
      replace(rows, envs.map((e) => h("tr", {},
        h("td", {}, h("a", { href: `#/environments/${e.id}` }, e.name)), h("td", { class: "mono" }, e.id),
        h("td", {}, e.config && e.config.type), h("td", { class: "muted" }, when(e.created_at)))));
    } catch (e) { err.textContent = e.message; }
  })();
  return () => {};
}

/** One environment: its configuration; for a self-hosted one, the work queue, refreshed live. */
export function environmentPage(root, id) {
  const err = errorBox();
  const body = h("div", {});
  const queue = h("div", { id: "work-queue" });
  let timer = null, stopped = false;
  replace(root, h("section", {}, h("a", { href: "#/environments", class: "back" }, "← Environments"), err, body, queue));
  const poll = async () => {
    try {
      const stats = await api("GET", `/v1/environments/${encodeURIComponent(id)}/work/stats`);
      if (stopped) return;
      replace(queue, h("h2", {}, "Work queue"), pre(stats));
    } catch (e) { replace(queue, h("p", { class: "muted" }, `Work queue: ${e.message}`)); return; }
    if (!stopped) timer = setTimeout(poll, 3000);
  };
  (async () => {
    try {
      const e = await api("GET", `/v1/environments/${encodeURIComponent(id)}`);
      const c = e.config || {};
      replace(body, h("h1", {}, e.name), h("p", { class: "mono muted" }, e.id),
        h("dl", { class: "facts" },
          h("dt", {}, "Type"), h("dd", {}, c.type || ""),
          h("dt", {}, "Networking"), h("dd", {}, pre(c.networking ?? null)),
          h("dt", {}, "Packages"), h("dd", {}, pre(c.packages ?? null))),
        h("details", {}, h("summary", {}, "Full definition"), pre(e)));
      if (c.type === "self_hosted") poll();
    } catch (x) { err.textContent = x.message; }
  })();
  return () => { stopped = true; clearTimeout(timer); };
}
