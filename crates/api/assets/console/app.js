// Entry point: sign-in, the hash router and global shortcuts.
import { api, getKey, setKey, clearKey } from "./api.js";
import { h, replace } from "./dom.js";
import { sessionPage } from "./session.js";
import { sessionsPage, agentsPage, agentPage, environmentsPage, environmentPage } from "./lists.js";

const root = document.getElementById("view");
const nav = document.getElementById("nav");
let cleanup = () => {};

function signIn(message) {
  const key = h("input", { type: "password", id: "api-key", autocomplete: "off", "aria-label": "API key", placeholder: "API key", required: true });
  const err = h("div", { class: "err", role: "alert" }, message || "");
  const form = h("form", { class: "card signin", "aria-label": "Sign in" },
    h("h1", {}, "Sign in"),
    h("p", { class: "muted" }, "Use a Mast API key. It is kept in this tab's session storage only."),
    key, h("button", { type: "submit", class: "primary", id: "sign-in" }, "Sign in"), err);
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    setKey(key.value.trim());
    try {
      await api("GET", "/v1/agents", { query: { limit: 1 } });
      route();
    } catch (x) {
      clearKey();
      err.textContent = x.message;
    }
  });
  nav.hidden = true;
  replace(root, form);
  key.focus();
}

function route() {
  cleanup();
  cleanup = () => {};
  if (!getKey()) return signIn();
  nav.hidden = false;
  const parts = location.hash.replace(/^#\/?/, "").split("/").filter(Boolean).map(decodeURIComponent);
  for (const a of nav.querySelectorAll("a[data-section]")) a.setAttribute("aria-current", a.dataset.section === (parts[0] || "sessions") ? "page" : "false");
  const [section, id, sub, subId] = parts;
  if (section === "agents") cleanup = id ? agentPage(root, id) : agentsPage(root);
  else if (section === "environments") cleanup = id ? environmentPage(root, id) : environmentsPage(root);
  else if (section === "sessions" && id) cleanup = sessionPage(root, id, sub === "threads" ? subId : null);
  else cleanup = sessionsPage(root);
}

document.getElementById("sign-out").addEventListener("click", () => { clearKey(); location.hash = "#/sessions"; route(); });
window.addEventListener("hashchange", route);
window.addEventListener("mast:unauthorized", () => { clearKey(); cleanup(); cleanup = () => {}; signIn("The API key was rejected."); });
document.addEventListener("keydown", (e) => {
  const typing = /^(INPUT|TEXTAREA|SELECT)$/.test(document.activeElement && document.activeElement.tagName);
  if (e.key === "/" && !typing) {
    const s = document.querySelector("input[type=search]");
    if (s) { e.preventDefault(); s.focus(); }
  }
});
route();
