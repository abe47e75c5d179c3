// The sign-in of the MCP items that use OAuth (`"auth": {"type": "oauth", "per": ...}`), as
// a column of the MCP servers page: whether this person — or, for an item signed in per
// workspace, the workspace — is connected (the mcp-tool service's `logins`), a Connect button
// (`login`, then the authorization page in a new tab through go.html: js/links.js) and a
// Disconnect button (`logout`). The state is read again when the window regains focus: that
// is when the person comes back from the sign-in tab.

import { h, replace, status } from "../dom.js";
import { openThroughGo, webAddress } from "../links.js";

/** "user" or "workspace" for an item value that signs in with OAuth; else null. */
export function oauthPer(value) {
  const auth = value && typeof value === "object" ? value.auth : null;
  if (!auth || typeof auth !== "object" || auth.type !== "oauth") return null;
  return auth.per === "workspace" ? "workspace" : "user";
}

/** The mcp-tool service's `object`: JSON text (or, from some paths, the value itself). */
function decoded(object) {
  if (typeof object !== "string") return object ?? null;
  try {
    return JSON.parse(object);
  } catch {
    return null;
  }
}

function call(api, body) {
  return api.call("mcp-tool", body, { flow: api.flow });
}

/**
 * The sign-in cells of the page's items: `cell(key, value)` → the cell's content (null for an
 * item without OAuth); `any`: whether some item has OAuth. The state is read once the page is
 * built and whenever the window regains focus, while a cell is still on the page.
 */
export function signIns(ctx, items) {
  const { api, session } = ctx;
  const cells = [];
  const any = items.some((i) => oauthPer(i.value) !== null);
  let reads = 0;

  const refresh = async () => {
    const mine = ++reads;  // an older read that comes back later must not win
    let rows;
    try {
      rows = decoded((await call(api, { operation: "logins" })).object);
      if (!Array.isArray(rows)) rows = [];
    } catch (e) {
      if (mine === reads) for (const c of cells) c.unknown(e.message);
      return;
    }
    if (mine === reads) for (const c of cells) c.show(rows);
  };

  const onFocus = () => {
    if (!cells.some((c) => c.el.isConnected)) {
      window.removeEventListener("focus", onFocus);  // the page was left
      return;
    }
    refresh();
  };

  const cell = (key, value) => {
    const per = oauthPer(value);
    if (per === null) return null;
    const made = signInCell(api, session, key, per, refresh);
    cells.push(made);
    if (cells.length === 1 && session.can("tools:invoke")) {
      window.addEventListener("focus", onFocus);
      refresh();  // answers after this render's other cells are made
    }
    return made.el;
  };
  return { any, cell };
}

function signInCell(api, session, key, per, refresh) {
  const state = h("span", { class: "badge" }, "checking…");
  const note = status();
  const mayInvoke = session.can("tools:invoke");
  const shared = per === "workspace";

  const connect = h("button", { type: "button", onclick: async () => {
    connect.disabled = true;
    note.set(`Starting the sign-in for ${key}…`, "busy");
    try {
      const started = decoded((await call(api, { operation: "login", name: key })).object) || {};
      const url = webAddress(started.url);
      if (url === null) {
        note.set("The gateway gave no web address to sign in at.", "error");
      } else if (openThroughGo(url)) {
        note.set(`Sign in at ${url.host} in the new tab; this page notices when you come back.`,
          "busy");
      } else {
        note.set("The browser blocked the new tab: allow pop-ups for this page and press "
          + "Connect again.", "error");
      }
    } catch (e) {
      note.set(`Cannot connect: ${e.message}`, "error");
    } finally {
      connect.disabled = false;
    }
  } }, "Connect");

  const disconnect = h("button", { type: "button", class: "danger", hidden: true,
    onclick: async () => {
      disconnect.disabled = true;
      note.set("Disconnecting…", "busy");
      try {
        const answer = await call(api, { operation: "logout", name: key });
        const removed = answer.removed ?? decoded(answer.object)?.removed;
        note.set(removed ? `Disconnected: ${shared ? "the workspace's" : "your"} sign-in for `
          + `${key} is forgotten.` : "There was no sign-in to forget.", removed ? "ok" : "");
      } catch (e) {
        note.set(`Cannot disconnect: ${e.message}`, "error");
      } finally {
        disconnect.disabled = false;
      }
      await refresh();
    } }, "Disconnect");

  const setState = (text, kind) => {
    state.textContent = text;
    state.className = ["badge", kind].filter(Boolean).join(" ");
  };
  const el = h("div", { class: "mcp-sign-in", dataset: { item: key } },
    h("span", {}, state, shared ? h("span", { class: "muted" }, " shared by the workspace") : null),
    mayInvoke ? null : h("p", { class: "hint" }, "Signing in needs the tools:invoke capability."),
    shared && mayInvoke && !session.can("admin")
      ? h("p", { class: "hint" }, "Only an admin may connect or disconnect it.") : null,
    mayInvoke ? h("div", { class: "toolbar" }, connect, disconnect) : null,
    note);
  if (!mayInvoke) setState("unknown", "");

  return {
    el,
    show(rows) {
      const mine = rows.find((r) => r && Array.isArray(r.items) && r.items.includes(key)
        && (r.per ?? per) === per);
      if (mine) setState("connected", "ok");
      else setState("not connected", "off");
      // "sign in in the new tab" is done with once the sign-in is kept
      if (mine && note.classList.contains("busy")) note.set(`Connected to ${key}.`, "ok");
      replace(connect, mine ? "Connect again" : "Connect");
      disconnect.hidden = !mine;
    },
    unknown(message) {
      setState("unknown", "warn");
      disconnect.hidden = false;  // it may still hold a grant to forget
      if (!note.textContent) note.set(`Cannot read the sign-in state: ${message}`, "error");
    },
  };
}
