// DOM helpers. Everything from the API is inserted as text nodes: no innerHTML anywhere.

/** Builds an element: `h("div", {class: "x", "aria-label": "y"}, "text", child, ...)`. */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") el.className = v;
    else if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else if (k === "value") el.value = v;
    else if (k === "checked") el.checked = !!v;
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  append(el, children);
  return el;
}

/** Appends children (strings become text nodes; arrays are flattened; null is skipped). */
export function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

/** Replaces an element's children. */
export function replace(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

/** A short relative/absolute timestamp for display. */
export function when(ts) {
  if (!ts) return "";
  const d = new Date(ts);
  return isNaN(d) ? String(ts) : d.toLocaleString();
}

/** A status badge. */
export function badge(status) {
  return h("span", { class: `badge st-${String(status).replace(/[^a-z_]/g, "")}` }, status);
}

/** Pretty JSON as a <pre> (text only). */
export function pre(value, cls = "json") {
  return h("pre", { class: cls }, typeof value === "string" ? value : JSON.stringify(value, null, 2));
}

/** Resolves after `ms` (used only for reconnect back-off). */
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
