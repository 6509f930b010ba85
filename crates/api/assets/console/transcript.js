// One event → one transcript row. Every piece of event content goes in as text.
import { h, pre, when } from "./dom.js";

/** The text of content blocks; other blocks become a bracketed placeholder. */
export function blocksText(content) {
  if (typeof content === "string") return content;
  return (content || [])
    .map((b) => {
      if (b.type === "text") return b.text;
      if (b.type === "search_result") return `[search result: ${b.title || b.source}]\n${blocksText(b.content)}`;
      if (b.type === "document") return `[document${b.title ? ": " + b.title : ""}]`;
      return `[${b.type}]`;
    })
    .join("\n");
}

function row(kind, ev, ...children) {
  return h("li", { class: `ev ev-${kind}`, "data-type": ev.type, "data-id": ev.id || "" }, ...children);
}

function meta(label, ev, ...extra) {
  return h("div", { class: "meta" }, h("span", { class: "who" }, label), ...extra,
    h("time", { title: ev.processed_at || "queued" }, ev.processed_at ? when(ev.processed_at) : "queued"));
}

function thread(ev) {
  return ev.session_thread_id ? h("span", { class: "tag" }, `thread ${ev.session_thread_id}`) : null;
}

function usage(u) {
  if (!u) return "";
  const parts = [`in ${u.input_tokens ?? 0}`, `out ${u.output_tokens ?? 0}`];
  if (u.cache_read_input_tokens) parts.push(`cache read ${u.cache_read_input_tokens}`);
  if (u.list_cost) parts.push(`list cost ${cost(u.list_cost)}`);
  return parts.join(" · ");
}

/** A list-cost amount (cents as a decimal string) as dollars. */
export function cost(c) {
  if (!c) return "";
  const cents = Number(c.amount);
  return isNaN(cents) ? `${c.amount} ${c.currency}` : `$${(cents / 100).toFixed(4)}`;
}

function stopReason(sr) {
  if (!sr) return "";
  if (sr.type === "requires_action") return `requires action (${(sr.event_ids || []).length})`;
  return sr.type.replace(/_/g, " ");
}

/** Whether `renderEvent` gives the event a row (a model request's start has none). */
export function hasRow(ev) {
  return ev.type !== "span.model_request_start";
}

/** Renders one event; `actions` is an empty box the session page fills for pending calls. */
export function renderEvent(ev, actions) {
  const t = ev.type;
  switch (t) {
    case "user.message":
      return row("user", ev, meta("You", ev), h("div", { class: "text" }, blocksText(ev.content)));
    case "system.message":
      return row("system", ev, meta("System", ev), h("div", { class: "text" }, blocksText(ev.content)));
    case "agent.message":
      return row("agent", ev, meta("Agent", ev, thread(ev)), h("div", { class: "text" }, blocksText(ev.content)));
    case "agent.thinking":
      return row("marker", ev, h("span", { class: "thinking" }, "thinking…"));
    case "agent.tool_use":
    case "agent.mcp_tool_use":
    case "agent.custom_tool_use": {
      const label = t === "agent.custom_tool_use" ? "Custom tool" : t === "agent.mcp_tool_use" ? `MCP ${ev.mcp_server_name}` : "Tool";
      const perm = ev.evaluated_permission ? h("span", { class: `tag perm-${ev.evaluated_permission}` }, ev.evaluated_permission) : null;
      return row("tool", ev, meta(`${label} call`, ev, thread(ev), perm),
        h("div", { class: "tool-name" }, ev.name), pre(ev.input ?? {}), actions);
    }
    case "agent.tool_result":
    case "agent.mcp_tool_result":
    case "user.tool_result":
    case "user.custom_tool_result": {
      const who = t.startsWith("user.") ? "Your result" : "Result";
      const of = ev.tool_use_id || ev.mcp_tool_use_id || ev.custom_tool_use_id;
      return row(ev.is_error ? "result error" : "result", ev,
        meta(who, ev, h("span", { class: "tag" }, `for ${of}`), ev.is_error ? h("span", { class: "tag bad" }, "error") : null),
        pre(blocksText(ev.content), "out"));
    }
    case "user.tool_confirmation":
      return row("line", ev, h("span", {}, `You ${ev.result === "allow" ? "allowed" : "denied"} ${ev.tool_use_id}`),
        ev.deny_message ? h("span", { class: "quote" }, ` — ${ev.deny_message}`) : null);
    case "user.interrupt":
      return row("line", ev, "You interrupted", ev.session_thread_id ? ` thread ${ev.session_thread_id}` : "");
    case "user.define_outcome":
      return row("user", ev, meta("Outcome", ev), h("div", { class: "text" }, ev.description));
    case "session.status_running":
    case "session.status_idle":
    case "session.status_rescheduled":
    case "session.status_terminated": {
      const s = t.slice("session.status_".length);
      return row("status", ev, h("span", { class: `badge st-${s}` }, s), ev.stop_reason ? ` ${stopReason(ev.stop_reason)}` : "");
    }
    case "session.thread_created": {
      const link = h("a", { href: `#/sessions/${encodeURIComponent(currentSession)}/threads/${encodeURIComponent(ev.session_thread_id)}` }, "open thread");
      if (ev.workflow_run_id) return row("line", ev, `${runName(ev.workflow_run_id)}: ${ev.agent_name} started `, link);
      return row("line", ev, `Delegated to ${ev.agent_name} `, link);
    }
    case "workflow_run.created": {
      runs[ev.workflow_run_id] = ev.name;
      for (const p of ev.phases || []) phases[p.id] = p.name;
      const list = h("ol", { class: "phases" }, ...(ev.phases || []).map((p) => h("li", {}, p.name)));
      return row("run", ev, meta(`Workflow run: ${ev.name}`, ev, h("span", { class: "tag" }, ev.workflow_run_id)),
        ev.description ? h("div", { class: "text" }, ev.description) : "", list);
    }
    case "workflow_run.status_running":
    case "workflow_run.status_idle": {
      const s = t.slice("workflow_run.status_".length);
      return row("status", ev, `${runName(ev.workflow_run_id)}: `, h("span", { class: `badge st-${s}` }, s === "idle" ? "paused" : s));
    }
    case "workflow_run.phase_started":
      return row("line", ev, `${runName(ev.workflow_run_id)}: phase "${phases[ev.workflow_run_phase_id] || ev.workflow_run_phase_id}" started`);
    case "workflow_run.phase_ended":
      return row("line", ev, `${runName(ev.workflow_run_id)}: phase "${phases[ev.workflow_run_phase_id] || ev.workflow_run_phase_id}" ended`);
    case "workflow_run.error": {
      const e = ev.error || {};
      const who = ev.workflow_run_id ? runName(ev.workflow_run_id) : "Workflow run not started";
      return row("error", ev, meta(who, ev), h("div", { class: "text" }, `${e.type || "error"}: ${e.message || ""}`));
    }
    case "workflow_run.status_ended": {
      const r = ev.result || {};
      const how = r.type === "error" ? `error: ${(r.error && r.error.type) || ""}` : r.type;
      return row("status", ev, `${runName(ev.workflow_run_id)}: `, h("span", { class: `badge st-${r.type === "completed" ? "idle" : "terminated"}` }, "ended"), ` ${how}`);
    }
    case "session.thread_status_running":
    case "session.thread_status_idle":
    case "session.thread_status_rescheduled":
    case "session.thread_status_terminated": {
      const s = t.slice("session.thread_status_".length);
      return row("status", ev, `${ev.agent_name || "thread"}: `, h("span", { class: `badge st-${s}` }, s), ev.stop_reason ? ` ${stopReason(ev.stop_reason)}` : "");
    }
    case "agent.thread_message_sent":
      return row("agent", ev, meta(`To ${ev.to_agent_name || "primary"}`, ev), h("div", { class: "text" }, blocksText(ev.content)));
    case "agent.thread_message_received":
      return row("agent", ev, meta(`From ${ev.from_agent_name || "primary"}`, ev), h("div", { class: "text" }, blocksText(ev.content)));
    case "session.error": {
      const e = ev.error || {};
      return row("error", ev, meta("Error", ev, h("span", { class: "tag" }, (e.retry_status && e.retry_status.type) || "")),
        h("div", { class: "text" }, `${e.type || "error"}: ${e.message || ""}`));
    }
    case "span.model_request_start":
      return null; // see hasRow
    case "span.model_request_end":
      return row("usage", ev, `model request${ev.is_error ? " (error)" : ""}: ${usage(ev.model_usage)}`);
    case "session.usage":
      return row("usage", ev, `usage: ${usage(ev.usage)}`);
    case "session.updated":
      return row("line", ev, "Session updated");
    default:
      return row("other", ev, meta(t, ev), pre(ev));
  }
}

// Thread links need the session id; the session page sets it before rendering.
let currentSession = "";
// Workflow runs' and phases' names, from the runs' `workflow_run.created` events, so later
// events (which carry only ids) show them.
let runs = {};
let phases = {};
/** Sets the session id used in rendered thread links. */
export function setSession(id) {
  if (id !== currentSession) { runs = {}; phases = {}; }
  currentSession = id;
}

function runName(id) {
  return runs[id] ? `Run "${runs[id]}"` : `Run ${id}`;
}
