// The Workbench's shell: sign-in, the workspace, the navigation and the page router.
// Each page is a module in pages/ exporting `render(ctx)` → an element (or a promise of one);
// ctx = {api, session, navigate, waiting, signal}: `waiting` is the workspace's list of what
// waits for a person (js/waiting.js); `signal` aborts when the user moves to another page
// (listeners a page adds with it go then). Pages are loaded when first visited.

import { Api, ApiError } from "./api.js";
import { h, field, replace, select, status } from "./dom.js";
import { Waiting } from "./waiting.js";

export const PAGES = [
  { route: "tools", title: "Tools", module: "./pages/tools.js" },
  { route: "mcp", title: "MCP servers", module: "./pages/mcp.js" },
  { route: "services", title: "Tool services", module: "./pages/services.js" },
  { route: "prompts", title: "Prompts", module: "./pages/prompts.js" },
  { route: "agent", title: "Agent", module: "./pages/agent.js" },
  { route: "approvals", title: "Approvals", module: "./pages/approvals.js" },
  { route: "dialogs", title: "Dialogs", module: "./pages/dialogs.js" },
  { route: "mcp-clients", title: "MCP clients", module: "./pages/mcp-clients.js" },
  { route: "config", title: "Config", module: "./pages/config.js" },
];

/** What the signed-in token may do (its capabilities, as `iam whoami` tells them). */
export class Session {
  constructor(user) {
    this.user = user;
    this.capabilities = new Set(user.roles || []);
  }

  /** Whether the token has capability (config:read, config:write, agent, approve,
   * tools:invoke, admin). */
  can(capability) {
    return this.capabilities.has(capability);
  }

  /** Whether the token may write config (forms are read-only without it). */
  get canWrite() {
    return this.can("config:write");
  }
}

const api = new Api();
const waiting = new Waiting(api);
const root = document.getElementById("app");
let session = null;
/** Aborts at sign-out: the shell's listeners go with it. */
let signedIn = new AbortController();

function signIn(message = "") {
  const token = h("input", { type: "password", name: "token", autocomplete: "current-password",
    spellcheck: "false" });
  const tokenField = field("Token", token, {
    hint: "The gateway's token or a scoped one (toolmesh token create). Kept in this tab only. "
      + "Leave empty if the gateway has none." });
  const note = status(message, message ? "error" : "");
  const form = h("form", { class: "sign-in", "aria-labelledby": "sign-in-title",
    onsubmit: async (event) => {
      event.preventDefault();
      note.set("Signing in…", "busy");
      api.setToken(token.value.trim());
      try {
        await start();
      } catch (e) {
        api.setToken("");
        note.set(refusal(e) || `Cannot sign in: ${e.message}`, "error");
        token.focus();
      }
    } },
  h("h1", { id: "sign-in-title" }, "toolmesh Workbench"),
  // password managers look for a user name beside a password; a token has none
  h("input", { type: "text", name: "username", autocomplete: "username", value: "toolmesh",
    class: "visually-hidden", tabindex: "-1", "aria-hidden": "true", readonly: true }),
  tokenField,
  h("button", { type: "submit", class: "primary" }, "Sign in"),
  note);
  replace(root, h("main", { class: "centered" }, form));
  token.focus();
}

/** What to tell a person whose token the gateway refused; "" for any other failure. */
function refusal(e) {
  if (!(e instanceof ApiError)) return "";
  if (e.type === "auth-failed" || e.status === 401) return "That token was refused.";
  if (e.type.startsWith("auth-") || e.type === "too-many-connections") return e.message;
  return "";
}

async function start() {
  // first on the WebSocket: a token refused there is a frame, not a 401 in the console
  await api.authenticate();
  const user = await api.whoami();
  session = new Session(user);
  let workspaces = [api.workspace];
  try {
    workspaces = await api.workspaces();
  } catch {
    // a token without list rights still has its own workspace
  }
  if (!workspaces.includes(api.workspace)) {
    api.setWorkspace(workspaces.includes(user.workspace) ? user.workspace : workspaces[0] || "default");
  }
  shell(workspaces);
  window.addEventListener("hashchange", show);
  waiting.start(session.can("approve"));
  await show();
}

function shell(workspaces) {
  signedIn.abort();
  signedIn = new AbortController();
  const workspace = select(workspaces, { value: api.workspace, id: "workspace" });
  workspace.addEventListener("change", () => {
    api.setWorkspace(workspace.value);
    waiting.reset();
    show();
  });
  const nav = h("nav", { "aria-label": "Workbench" }, h("ul", {},
    PAGES.map((p) => h("li", {}, h("a", { href: `#/${p.route}`, dataset: { route: p.route } }, p.title),
      p.route === "approvals" ? waitingCount() : null))));
  const who = h("span", { class: "who", title: session.user.name || "" },
    session.user.id, session.canWrite ? "" : " (read-only)");
  const signOut = h("button", { type: "button", onclick: () => {
    api.setToken("");
    window.removeEventListener("hashchange", show);
    waiting.stop();
    leave?.abort();
    signIn();
  } }, "Sign out");
  replace(root,
    h("header", { class: "top" },
      h("a", { class: "brand", href: "#/tools" }, "toolmesh"),
      nav,
      h("div", { class: "account" },
        h("label", { for: "workspace" }, "Workspace"), workspace, who, signOut)),
    h("main", { id: "page", tabindex: "-1" }));
}

/** The count beside "Approvals": how many calls wait for an answer (hidden when none). */
function waitingCount() {
  const number = h("span", {});
  const count = h("span", { class: "nav-count", id: "waiting-count", "aria-live": "polite",
    hidden: true }, number, h("span", { class: "visually-hidden" }, " waiting"));
  const update = () => {
    number.textContent = String(waiting.count);
    count.hidden = waiting.count === 0;
    const one = waiting.count === 1;
    count.title = `${waiting.count} call${one ? "" : "s"} wait${one ? "s" : ""} for an answer`;
  };
  waiting.addEventListener("change", update, { signal: signedIn.signal });
  update();
  return count;
}

// Each navigation's number: a page whose data comes back after the user has moved on must
// not replace the page they moved to.
let shown = 0;
/** Aborts when the page shown is left (ctx.signal). */
let leave = null;

async function show() {
  const mine = ++shown;
  leave?.abort();
  leave = new AbortController();
  const signal = leave.signal;
  waiting.refresh();  // a sign of life: a watch lost is taken up again (js/waiting.js)
  const route = (location.hash.replace(/^#\/?/, "").split("/")[0]) || "tools";
  const page = PAGES.find((p) => p.route === route) || PAGES[0];
  for (const link of document.querySelectorAll("nav a")) {
    if (link.dataset.route === page.route) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  document.title = `${page.title} · toolmesh Workbench`;
  const main = document.getElementById("page");
  replace(main, status("Loading…", "busy"));
  try {
    const module = await import(page.module);
    const ctx = { api, session, waiting, signal, navigate: (r) => { location.hash = `#/${r}`; } };
    const content = await module.render(ctx);
    if (mine === shown && document.getElementById("page") === main) replace(main, content);
  } catch (e) {
    if (mine !== shown) return;  // a failure of a page nobody is looking at any more
    if (e instanceof ApiError && e.status === 401) {
      api.setToken("");
      waiting.stop();
      signIn("The token is no longer accepted; sign in again.");
      return;
    }
    replace(main, h("h1", {}, page.title), status(`Cannot show this page: ${e.message}`, "error"));
  }
}

(async () => {
  try {
    await start();  // a token from this tab's session, or a gateway without a token
  } catch (e) {
    if (!refusal(e)) signIn(`Cannot reach the gateway: ${e.message}`);
    else if (api.token) signIn("The saved token is no longer accepted; sign in again.");
    else signIn();  // the gateway needs a token: the form asks for it
  }
})();
