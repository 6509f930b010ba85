// Entry point: sign-in (skipped while the server is open), the hash router and global shortcuts.
import { api, getKey, setKey, clearKey, probeOpen } from "./api.js";
import { h, replace } from "./dom.js";
import { sessionPage } from "./session.js";
import { sessionsPage, agentsPage, agentPage, environmentsPage, environmentPage } from "./lists.js";

const root = document.getElementById("view");
const nav = document.getElementById("nav");
const signOut = document.getElementById("sign-out");
const openMark = document.getElementById("open-mode");
let cleanup = () => {};
// The server answered a read without a key: there is no key to ask for until one is created.
let open = false;

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
  if (!getKey() && !open) return signIn();
  const keyless = !getKey();
  nav.hidden = false;
  signOut.hidden = keyless;
  openMark.hidden = !keyless;
  const parts = location.hash.replace(/^#\/?/, "").split("/").filter(Boolean).map(decodeURIComponent);
  for (const a of nav.querySelectorAll("a[data-section]")) a.setAttribute("aria-current", a.dataset.section === (parts[0] || "sessions") ? "page" : "false");
  const [section, id, sub, subId] = parts;
  if (section === "agents") cleanup = id ? agentPage(root, id) : agentsPage(root);
  else if (section === "environments") cleanup = id ? environmentPage(root, id) : environmentsPage(root);
  else if (section === "sessions" && id) cleanup = sessionPage(root, id, sub === "threads" ? subId : null);
  else cleanup = sessionsPage(root);
}

signOut.addEventListener("click", () => { clearKey(); location.hash = "#/sessions"; start(); });
window.addEventListener("hashchange", route);
window.addEventListener("mast:unauthorized", () => {
  // Several requests in flight can each be refused; the first one's message stays.
  if (!open && !getKey() && root.querySelector(".signin")) return;
  // Open mode ends for good once a key exists (`api::auth`): from then on a key is asked for.
  const wasOpen = open && !getKey();
  open = false;
  clearKey();
  cleanup();
  cleanup = () => {};
  signIn(wasOpen ? "This server now requires an API key: one has been created." : "The API key was rejected.");
});
document.addEventListener("keydown", (e) => {
  const typing = /^(INPUT|TEXTAREA|SELECT)$/.test(document.activeElement && document.activeElement.tagName);
  if (e.key === "/" && !typing) {
    const s = document.querySelector("input[type=search]");
    if (s) { e.preventDefault(); s.focus(); }
  }
});

/** Asks the server whether it needs a key before the first page, so an open server never
 * flashes the sign-in form. */
async function start() {
  if (!getKey()) {
    try { open = await probeOpen(); } catch (e) { return signIn(`Could not ask the server whether it needs a key: ${e.message}`); }
  }
  route();
}
start();
